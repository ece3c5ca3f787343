// SPDX-License-Identifier: (GPL-2.0 OR MIT)
/*
 * ilnp_route_xmit — lwt xmit on the identifier prefix's route (P::/64 dev
 * ilnp0): translation at the route, before the packet reaches ilnp0.
 *
 * The kernel runs it for every packet routed to an identifier address, before
 * the packet is queued on ilnp0. A small packet of an established session, whose
 * next hop ilnp_egress has looked up and cached with its Ethernet addresses
 * (ilnp_nh_cache: fresh, SUCCESS, through its source locator's own uplink), is
 * translated here, given its Ethernet header and redirected to that uplink: it
 * is transmitted once, not on ilnp0 and then again on the uplink.
 *
 * Everything else is left as it is (BPF_OK) and goes on to ilnp0, where
 * ilnp_egress decides, counts and sends it exactly as without this program:
 * packets it punts, GSO packets (lwt programs have no bpf_skb_adjust_room, and
 * bpf_skb_change_head leaves the skb's network header where it was), balanced
 * correspondents (per-packet and per-flow: ilnp_egress picks the pair), v4
 * paths, a locator that is aged, and the first packet of a pair after the
 * cache's generation or TTL ran out (ilnp_egress looks it up again). The
 * measurement build without the nonce passes everything.
 *
 * ilnpd loads it with libbpf from its own object (aya does not know lwt
 * programs), with the maps of the loaded ilnp_dp.o (crates/ilnpd/src/bpf/route.rs).
 */
#include "ilnp_egress.c"

SEC("lwt_xmit")
int ilnp_route_xmit(struct __sk_buff *skb)
{
#ifdef ILNP_EXP_NONCE_OMITTED
	return BPF_OK;
#else
	struct ilnp_cfg *cfg = get_cfg();
	struct ilnp_balance_val *b;
	struct ilnp_local_val *lv;
	struct egress_ctx c = {};
	struct ilnp_nh_val nh = {};
	struct ethhdr eth;
	__u64 gen;

	if (!cfg)
		return BPF_OK;
	/* first, before any lookup: a GSO packet is never translated here */
	if (skb->gso_size) {
		count(ILNP_R_EGRESS_ROUTE_PASS_GSO);
		return BPF_OK;
	}
	if (eg_checks(skb, cfg, &c))
		return BPF_OK;
	b = bpf_map_lookup_elem(&ilnp_balance, &c.key);
	if (b && b->n_slots && b->n_pairs &&
	    (b->policy == ILNP_POLICY_PER_PACKET || b->policy == ILNP_POLICY_PER_FLOW))
		return BPF_OK;
	if (is_v4_loc(c.local_loc) || is_v4_loc(c.remote_loc))
		return BPF_OK;
	lv = bpf_map_lookup_elem(&ilnp_locals, &c.local_loc);
	if (!lv || lv->state >= ILNP_LOC_AGED)
		return BPF_OK;
	gen = route_gen();
	nh_key(&c, &nh.key);
	if (!gen || !nh_cache_get(&nh.key, gen, bpf_ktime_get_coarse_ns(), &nh) || nh.rc != BPF_FIB_LKUP_RET_SUCCESS ||
	    nh.ifindex != lv->ifindex || skb->len + ILNP_NONCE_HLEN > nh.mtu) {
		count(ILNP_R_EGRESS_ROUTE_PASS_NH);
		return BPF_OK;
	}
	count(ILNP_R_EGRESS_NH_HIT);

	/* from here on the packet is changed: a failure can only drop it. The
	 * Ethernet header is the real one: bpf_redirect sends the frame as it is */
	__builtin_memcpy(eth.h_dest, nh.dmac, ETH_ALEN);
	__builtin_memcpy(eth.h_source, nh.smac, ETH_ALEN);
	eth.h_proto = bpf_htons(ETH_P_IPV6);
	if (eg_push_wire(skb, cfg, &c, &eth))
		goto drop;
	__sync_fetch_and_add(&c.e->tx_pkts, 1);
	__sync_fetch_and_add(&c.e->tx_bytes, skb->len - ETH_HLEN);
	count(ILNP_R_EGRESS_FAST);
	count(ILNP_R_EGRESS_ROUTE_XMIT);
	return bpf_redirect(nh.ifindex, 0);
drop:
	count(ILNP_R_EGRESS_DROP_ERROR);
	return BPF_DROP;
#endif
}

char _license[] SEC("license") = "Dual MIT/GPL";
