// SPDX-License-Identifier: (GPL-2.0 OR MIT)
/*
 * ilnp_ingress, the v4 path (docs/architecture.md § IPv4 and NAT): ILNPv6 in UDP/IPv4
 * to our [ipv4] port, its outer header checked against the ILCC and taken off
 * (in_v4_decap, with the fallback for kernels before 6.3), strangers passed up or
 * punted. Included by ilnp_ingress.c after the helpers it uses (struct ingress_ctx,
 * in_punt, in_drop, in_verify, in_rewrite, ...); not a unit of its own.
 */
#ifndef ILNP_INGRESS_V4_H
#define ILNP_INGRESS_V4_H

/* The v4 path's outer 28 bytes off, the Ethernet type made IPv6's. Linux 6.3+ does it
 * in one call (BPF_F_ADJ_ROOM_DECAP_L3_IPV6); an older kernel refuses that flag, and a
 * packet that is not GSO is then taken out in two steps the older kernels have: the
 * skb made IPv6 (bpf_skb_change_proto inserts 20 bytes after the MAC header), then the
 * 20 + 28 bytes before the inner IPv6 header removed at the MAC layer. The inner
 * bytes stay where they were, so a partial checksum's start still points at them.
 * 0 = done; -1 = the packet is as it was (a GSO packet on an older kernel); other = broken. */
static __always_inline int in_v4_decap(struct __sk_buff *skb)
{
	const __s32 grown = IPV6_HLEN - 20; /* what change_proto inserts for IPv4 -> IPv6 */
	__u16 proto6 = bpf_htons(ETH_P_IPV6);

	if (bpf_skb_adjust_room(skb, -ILNP_V4_OVERHEAD, BPF_ADJ_ROOM_MAC,
				ILNP_ADJ_ROOM_DECAP_L3_IPV6 | BPF_F_ADJ_ROOM_FIXED_GSO)) {
		if (skb->gso_size)
			return -1;
		if (bpf_skb_change_proto(skb, proto6, 0))
			return -1;
		if (bpf_skb_adjust_room(skb, -(ILNP_V4_OVERHEAD + grown), BPF_ADJ_ROOM_MAC, 0))
			return -2;
	}
	return bpf_skb_store_bytes(skb, __builtin_offsetof(struct ethhdr, h_proto), &proto6, sizeof(proto6), 0) ? -2
													       : 0;
}

/* A decapsulated v4-path packet goes up the stack: on this uplink, unless its IPv6
 * is disabled (ilnp_uplinks: the kernel would drop it, Ip6InDiscards), then through
 * ilnp0's receive path, where the identifier address lives. */
static __always_inline int in_v4_deliver(struct __sk_buff *skb, struct ilnp_cfg *cfg)
{
	__u32 ifx = skb->ifindex, *f = bpf_map_lookup_elem(&ilnp_uplinks, &ifx);

	if (!f || !(*f & ILNP_UPLINK_F_NO_IPV6))
		return TC_ACT_OK;
	count(ILNP_R_INGRESS_V4_VIA_ILNP0);
	return bpf_redirect(cfg->ilnp0_ifindex, BPF_F_INGRESS);
}

/*
 * A v4 path's TCP/UDP from a NID without an ILCC entry (admission = socket), as
 * ilnp_ingress treats the same packet over IPv6: a socket would take it -> the
 * whole datagram to ilnpd (which admits it, ingress_v4_admit_socket); none -> a
 * hint naming the outer source (the stack's answer goes there, under the core's
 * budget), out of UDP/IPv4, translated and passed up with no state
 * (ingress_v4_no_socket). A GSO packet on a kernel before 6.3, which cannot
 * decapsulate it (in_v4_decap), is punted (ingress_punt_v4_no_decap): ilnpd's
 * embryonic tier and budget then bound it.
 */
static __always_inline int in_v4_stranger(struct __sk_buff *skb, struct ilnp_cfg *cfg, struct ingress_ctx *c,
					  __u32 v4_addr, __u16 v4_port)
{
	int r;

	if (in_socket_exists(skb, cfg, c)) {
		count(ILNP_R_INGRESS_ADMIT_SOCKET);
		return in_punt(cfg, ILNP_R_INGRESS_V4_ADMIT_SOCKET);
	}
	r = in_v4_decap(skb);
	if (r == -1)
		return in_punt(cfg, ILNP_R_INGRESS_PUNT_V4_NO_DECAP);
	if (r)
		return in_drop(ILNP_R_INGRESS_DROP_ERROR);
	c->dopt_off = ETH_HLEN + IPV6_HLEN;
	in_note_answer_hint(skb, c, lo64(&c->ip6.saddr), v4_addr, v4_port);
	if (in_rewrite(skb, cfg, c))
		return in_drop(ILNP_R_INGRESS_DROP_ERROR);
	count(ILNP_R_INGRESS_NO_SOCKET);
	count(ILNP_R_INGRESS_V4_NO_SOCKET);
	return in_v4_deliver(skb, cfg);
}

/*
 * A v4 path's datagram (docs/architecture.md § IPv4 and NAT): ILNPv6 in UDP/IPv4
 * to our [ipv4] port. The inner packet gets the checks of any ILNPv6 packet, and
 * the path its own: it must come from the address and port the ILCC holds for the
 * peer (remote_v4, which ilnpd validated, a NAT's included) to the address and
 * port of the v4 locator it is sent to. Only then is the outer header removed and
 * the packet translated like any other. Anything else ILNP goes to ilnpd whole,
 * outer header and all, through ilnp0 like every punt: the kernel completes its
 * checksums and cuts a GSO packet on the way into the TUN, which ilnpd's UDP
 * socket would not (it would get an unfinished inner checksum, or 64 KB). The
 * socket gets what is not looked at here: fragments (reassembled by the kernel),
 * datagrams that are not ILNPv6 to our NID.
 * A global function: the verifier checks it once, on its own.
 */
__attribute__((noinline)) int ilnp_in_v4(struct __sk_buff *skb)
{
	struct ilnp_cfg *cfg = get_cfg();
	struct ilnp_local_val *lv;
	struct ilnp_ilcc_val *e = NULL;
	struct ingress_ctx c = {};
	struct {
		struct iphdr ip;
		struct udphdr udp;
	} o;
	struct ilnp_ilcc_key k;
	__u64 loc_d, nid_d;
	int r, temp;

	if (!cfg || !cfg->v4_port || bpf_skb_load_bytes(skb, ETH_HLEN, &o, sizeof(o)) < 0)
		return TC_ACT_OK;
	if (o.ip.version != 4 || o.ip.ihl != 5 || o.ip.protocol != IPPROTO_UDP || (o.ip.frag_off & bpf_htons(0x3fff)) ||
	    o.udp.dest != cfg->v4_port)
		return TC_ACT_OK;
	if (bpf_skb_load_bytes(skb, ETH_HLEN + ILNP_V4_OVERHEAD, &c.ip6, sizeof(c.ip6)) < 0 || c.ip6.version != 6)
		return TC_ACT_OK; /* ilnpd's socket counts it (v4_not_ilnp) */
	nid_d = lo64(&c.ip6.daddr);
	temp = nid_d != cfg->local_nid;
	if (temp && !bpf_map_lookup_elem(&ilnp_temp_nids, &nid_d))
		return TC_ACT_OK; /* ilnpd's socket counts it (v4_not_ilnp) */
	/* to a temporary NID (issue #44 item 2): only its entry's verified packets
	 * are the fast path's; the rest goes to ilnpd's socket, as before */
	if (c.ip6.nexthdr != NEXTHDR_DEST)
		return temp ? TC_ACT_OK : in_punt(cfg, ILNP_R_INGRESS_PUNT_V4_PLAIN);
	c.dopt_off = ETH_HLEN + ILNP_V4_OVERHEAD + IPV6_HLEN;
	r = in_parse_opts(skb, &c);
	if (r == OPTS_NOT_ILNP)
		return temp ? TC_ACT_OK : in_punt(cfg, ILNP_R_INGRESS_PUNT_V4_PLAIN);
	if (r != OPTS_NONCE)
		return in_opts_refused(cfg, r);
	k = ilcc_key(cfg, lo64(&c.ip6.saddr), nid_d);
	e = bpf_map_lookup_elem(&ilnp_ilcc, &k);
	if (temp && !e)
		return TC_ACT_OK;
	/* admission, as for ILNPv6 over IPv6 (ilnp_ingress): no state for a new NID
	 * unless a socket takes the packet; without one it goes up statelessly */
	if ((cfg->flags & ILNP_CFG_F_ADMIT_SOCKET) && (c.next == IPPROTO_TCP || c.next == IPPROTO_UDP) && !e)
		return in_v4_stranger(skb, cfg, &c, o.ip.saddr, o.udp.source);
	r = in_verify(skb, cfg, &c, e);
	if (!r)
		r = in_verify_nid(cfg, e, nid_d);
	if (r)
		return in_punt(cfg, r);
	/* an Echo Reply may answer a rebinding validation sent over this (old) path:
	 * the core must see it (v4path.rs); ping over a v4 path takes the slow path */
	if (c.next == NEXTHDR_ICMPV6 && in_is_echo_reply(skb, &c))
		return in_punt(cfg, ILNP_R_INGRESS_PUNT_V4_ECHO_REPLY);
	/* a NAT that rebound the peer's port, or a stranger: ilnpd challenges it */
	if (e->remote_v4_port == 0 || e->remote_v4_port != o.udp.source || *(__u32 *)e->remote_v4_addr != o.ip.saddr)
		return in_punt(cfg, ILNP_R_INGRESS_PUNT_V4_PATH);
	loc_d = hi64(&c.ip6.daddr);
	lv = bpf_map_lookup_elem(&ilnp_locals, &loc_d);
	if (!lv || lv->state >= ILNP_LOC_AGED || !is_v4_loc(loc_d) || v4_loc_addr(loc_d) != o.ip.daddr ||
	    v4_loc_port(loc_d) != o.udp.dest)
		return in_punt(cfg, ILNP_R_INGRESS_PUNT_DST_LOC);

	/* out of UDP/IPv4; a GSO packet on a kernel before 6.3 is left as it was */
	r = in_v4_decap(skb);
	if (r == -1)
		return in_punt(cfg, ILNP_R_INGRESS_PUNT_V4_NO_DECAP);
	if (r)
		return in_drop(ILNP_R_INGRESS_DROP_ERROR);
	c.dopt_off = ETH_HLEN + IPV6_HLEN;
	if (in_rewrite(skb, cfg, &c))
		return in_drop(ILNP_R_INGRESS_DROP_ERROR);
	__sync_fetch_and_add(&e->rx_pkts, 1);
	__sync_fetch_and_add(&e->rx_bytes, skb->len - ETH_HLEN);
	in_note_local_rx(lv);
	count(ILNP_R_INGRESS_FAST);
	count(ILNP_R_INGRESS_V4);
	return in_v4_deliver(skb, cfg);
}

#endif /* ILNP_INGRESS_V4_H */
