// SPDX-License-Identifier: (GPL-2.0 OR MIT)
/*
 * ILNPv6 tc data path (docs/architecture.md "Data path").
 *
 *  ilnp_egress  — tc egress on ilnp0 (a TUN: packets start at the IPv6 header):
 *                 identifier form -> wire form for peers in the ILCC, redirect to the uplink.
 *  ilnp_ingress — tc ingress on each Ethernet uplink:
 *                 wire form -> identifier form for established peers; everything the
 *                 fast path does not handle is redirected to ilnp0 so ilnpd reads it.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "ilnp_maps.h"

#ifndef AF_INET6
#define AF_INET6 10
#endif
#define NEXTHDR_DEST 60
#define IPPROTO_ICMPV6_ 58
#define ICMPV6_LOCATOR_UPDATE 156
#define DESTOPTS_MAX 64

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ilnp_cfg);
} ilnp_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536); /* set by ilnpd at load time */
	__type(key, __u64);
	__type(value, struct ilnp_ilcc_val);
} ilnp_ilcc SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u64);
	__type(value, struct ilnp_local_val);
} ilnp_locals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ILNP_R_MAX);
	__type(key, __u32);
	__type(value, __u64);
} ilnp_stats SEC(".maps");

/* Bound an index into opts[] in a way the compiler cannot optimise away, so the
 * verifier sees the mask. */
static __always_inline __u32 bound(__u32 i)
{
	asm volatile("%0 &= 63" : "+r"(i));
	return i;
}

static __always_inline void count(__u32 reason)
{
	__u64 *c = bpf_map_lookup_elem(&ilnp_stats, &reason);
	if (c)
		*c += 1;
}

static __always_inline struct ilnp_cfg *get_cfg(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&ilnp_cfg, &zero);
}

/* Offset of the checksum field inside the upper-layer header, or -1. */
static __always_inline int l4_csum_off(__u8 proto)
{
	switch (proto) {
	case IPPROTO_TCP:
		return 16;
	case IPPROTO_UDP:
		return 6;
	case IPPROTO_ICMPV6_:
		return 2;
	}
	return -1;
}

/*
 * Adjust the upper-layer checksum for new upper address halves.
 * TCP/UDP: the wire pseudo-header has the locators zeroed (RFC 6744 §3).
 * ICMPv6: the full addresses (RFC 6741 §4.3).
 * from/to: the upper 64 bits of source and destination as seen by the checksum.
 */
static __always_inline int fix_csum(struct __sk_buff *skb, __u32 l4_off, __u8 proto, __u64 from_s, __u64 from_d,
				    __u64 to_s, __u64 to_d)
{
	__u64 from[2] = { from_s, from_d };
	__u64 to[2] = { to_s, to_d };
	int off = l4_csum_off(proto);
	__s64 diff;
	__u64 flags = BPF_F_PSEUDO_HDR;

	if (off < 0)
		return 0;
	diff = bpf_csum_diff((__be32 *)from, sizeof(from), (__be32 *)to, sizeof(to), 0);
	if (diff < 0)
		return -1;
	if (proto == IPPROTO_UDP)
		flags |= BPF_F_MARK_MANGLED_0;
	return bpf_l4_csum_replace(skb, l4_off + off, 0, diff, flags);
}

/* ------------------------------------------------------------------ egress */

SEC("classifier")
int ilnp_egress(struct __sk_buff *skb)
{
	struct ilnp_cfg *cfg = get_cfg();
	struct ipv6hdr ip6;
	struct ilnp_ilcc_val *e;
	__u64 nid_d;
	__u8 hdr[16] = {};
	__u32 hlen;
	__u16 plen;

	if (!cfg || skb->protocol != bpf_htons(ETH_P_IPV6))
		return TC_ACT_OK;
	if (bpf_skb_load_bytes(skb, 0, &ip6, sizeof(ip6)) < 0)
		return TC_ACT_OK;
	/* a packet ingress punted to ilnpd is on its way to the TUN: let it through */
	if (*(__u64 *)&ip6.daddr.s6_addr[0] != cfg->id_prefix)
		return TC_ACT_OK;
	if (cfg->mode != ILNP_MODE_EBPF) {
		count(ILNP_R_EGRESS_PUNT);
		return TC_ACT_OK;
	}
	if (l4_csum_off(ip6.nexthdr) < 0) {
		count(ILNP_R_EGRESS_PUNT);
		return TC_ACT_OK;
	}
	nid_d = *(__u64 *)&ip6.daddr.s6_addr[8];
	e = bpf_map_lookup_elem(&ilnp_ilcc, &nid_d);
	if (!e || (e->nonce_tx_len != 4 && e->nonce_tx_len != 12)) {
		count(ILNP_R_EGRESS_MISS);
		return TC_ACT_OK;
	}

	/* the source locator must still be ours */
	struct ilnp_local_val *lv = bpf_map_lookup_elem(&ilnp_locals, &e->local_loc);
	if (!lv || lv->state >= ILNP_LOC_AGED) {
		count(ILNP_R_EGRESS_FIB_FAIL);
		return TC_ACT_OK; /* ilnpd decides */
	}

	/*
	 * Route the wire packet as if it arrived on ilnp0 (ilnpd enables forwarding
	 * on ilnp0 only, which the helper requires); source-specific routes and
	 * rules pick the uplink of the source locator. Done before any rewrite so
	 * that anything the fast path cannot finish goes to ilnpd untouched.
	 */
	struct bpf_fib_lookup fib = {};
	fib.family = AF_INET6;
	fib.l4_protocol = ip6.nexthdr;
	fib.tot_len = 0; /* 0: the helper checks the MTU with GSO in mind */
	fib.ifindex = skb->ifindex;
	__builtin_memcpy(fib.ipv6_src, &e->local_loc, 8);
	__builtin_memcpy(&fib.ipv6_src[2], &ip6.saddr.s6_addr[8], 8);
	__builtin_memcpy(fib.ipv6_dst, &e->remote_loc, 8);
	__builtin_memcpy(&fib.ipv6_dst[2], &nid_d, 8);
	int rc = bpf_fib_lookup(skb, &fib, sizeof(fib), 0);
	if (rc == BPF_FIB_LKUP_RET_NO_NEIGH) {
		/* the slow path's send makes the kernel resolve the next hop */
		count(ILNP_R_EGRESS_NEIGH);
		return TC_ACT_OK;
	}
	if (rc != BPF_FIB_LKUP_RET_SUCCESS) {
		count(ILNP_R_EGRESS_NO_ROUTE);
		return TC_ACT_OK;
	}
	struct ethhdr eth;
	__builtin_memcpy(eth.h_dest, fib.dmac, ETH_ALEN);
	__builtin_memcpy(eth.h_source, fib.smac, ETH_ALEN);
	eth.h_proto = bpf_htons(ETH_P_IPV6);

	/* checksums first, while the upper layer still sits at offset 40 */
	if (ip6.nexthdr == IPPROTO_ICMPV6_) {
		if (fix_csum(skb, sizeof(ip6), ip6.nexthdr, cfg->id_prefix, cfg->id_prefix, e->local_loc, e->remote_loc))
			goto err;
	} else {
		if (fix_csum(skb, sizeof(ip6), ip6.nexthdr, cfg->id_prefix, cfg->id_prefix, 0, 0))
			goto err;
	}

	/* open room for the Destination Options header right after the IPv6 header */
	hlen = e->nonce_tx_len == 4 ? 8 : 16;
	if (bpf_skb_adjust_room(skb, hlen, BPF_ADJ_ROOM_NET, BPF_F_ADJ_ROOM_FIXED_GSO))
		goto err;
	hdr[0] = ip6.nexthdr;
	hdr[1] = hlen / 8 - 1;
	hdr[2] = ILNP_OPT_NONCE;
	hdr[3] = e->nonce_tx_len;
	__builtin_memcpy(&hdr[4], e->nonce_tx, ILNP_NONCE_MAX);
	if (hlen == 8) {
		if (bpf_skb_store_bytes(skb, sizeof(ip6), hdr, 8, 0))
			goto err;
	} else if (bpf_skb_store_bytes(skb, sizeof(ip6), hdr, 16, 0)) {
		goto err;
	}

	plen = bpf_htons(bpf_ntohs(ip6.payload_len) + hlen);
	ip6.payload_len = plen;
	ip6.nexthdr = NEXTHDR_DEST;
	*(__u64 *)&ip6.saddr.s6_addr[0] = e->local_loc;
	*(__u64 *)&ip6.daddr.s6_addr[0] = e->remote_loc;
	if (bpf_skb_store_bytes(skb, 0, &ip6, sizeof(ip6), 0))
		goto err;

	__sync_fetch_and_add(&e->tx_pkts, 1);
	__sync_fetch_and_add(&e->tx_bytes, skb->len);

	if (bpf_skb_change_head(skb, ETH_HLEN, 0))
		goto err;
	if (bpf_skb_store_bytes(skb, 0, &eth, sizeof(eth), 0))
		goto err;
	count(ILNP_R_EGRESS_FAST);
	return bpf_redirect(fib.ifindex, 0);
err:
	count(ILNP_R_EGRESS_ERROR);
	return TC_ACT_SHOT;
}

/* ------------------------------------------------------------------ ingress */

static __always_inline int punt(struct ilnp_cfg *cfg, __u32 reason)
{
	count(reason);
	return bpf_redirect(cfg->ilnp0_ifindex, 0);
}

/* Is this ICMPv6 error quoting a packet that carries our nonce option first? */
static __always_inline int quotes_ilnp(struct __sk_buff *skb, __u32 icmp_off)
{
	__u8 t, q[2];

	if (bpf_skb_load_bytes(skb, icmp_off, &t, 1) < 0)
		return 0;
	if (t < 1 || t > 4)
		return 0;
	/* quoted IPv6 next header at +6, first option type of its DestOpts at +42 */
	if (bpf_skb_load_bytes(skb, icmp_off + 8 + 6, &q[0], 1) < 0)
		return 0;
	if (bpf_skb_load_bytes(skb, icmp_off + 8 + 42, &q[1], 1) < 0)
		return 0;
	return q[0] == NEXTHDR_DEST && q[1] == ILNP_OPT_NONCE;
}

SEC("classifier")
int ilnp_ingress(struct __sk_buff *skb)
{
	struct ilnp_cfg *cfg = get_cfg();
	const __u32 l3 = ETH_HLEN;
	struct ipv6hdr ip6;
	__u8 opts[DESTOPTS_MAX];
	__u32 hlen, i, nonce_at = 0, nonces = 0, others = 0;
	__u8 nonce_len = 0, next;

	if (!cfg || skb->protocol != bpf_htons(ETH_P_IPV6))
		return TC_ACT_OK;
	if (bpf_skb_load_bytes(skb, l3, &ip6, sizeof(ip6)) < 0)
		return TC_ACT_OK;
	if (*(__u64 *)&ip6.daddr.s6_addr[8] != cfg->local_nid)
		return TC_ACT_OK;

	if (ip6.nexthdr == IPPROTO_ICMPV6_) {
		if (quotes_ilnp(skb, l3 + sizeof(ip6)))
			return punt(cfg, ILNP_R_PUNT_ICMP_ERROR);
		return TC_ACT_OK;
	}
	if (ip6.nexthdr != NEXTHDR_DEST)
		return TC_ACT_OK;

	if (bpf_skb_load_bytes(skb, l3 + sizeof(ip6), opts, 2) < 0)
		goto malformed;
	hlen = ((__u32)opts[1] + 1) * 8;
	if (hlen > DESTOPTS_MAX)
		return punt(cfg, ILNP_R_PUNT_OTHER); /* unusual: let ilnpd judge it */
	if (hlen == 8) {
		if (bpf_skb_load_bytes(skb, l3 + sizeof(ip6), opts, 8) < 0)
			goto malformed;
	} else if (hlen == 16) {
		if (bpf_skb_load_bytes(skb, l3 + sizeof(ip6), opts, 16) < 0)
			goto malformed;
	} else {
		if (bpf_skb_load_bytes(skb, l3 + sizeof(ip6), opts, DESTOPTS_MAX) < 0)
			goto malformed;
	}
	next = opts[0];

	i = 2;
#pragma unroll
	for (int n = 0; n < 16; n++) {
		if (i >= hlen || i >= DESTOPTS_MAX - 1)
			break;
		__u8 t = opts[bound(i)];
		if (t == 0) { /* Pad1 */
			i++;
			continue;
		}
		__u8 l = opts[bound(i + 1)];
		if (i + 2 + l > hlen)
			goto malformed;
		if (t == ILNP_OPT_NONCE) {
			nonces++;
			nonce_at = i;
			nonce_len = l;
		} else if (t != 1) {
			others++;
		}
		i += 2 + l;
	}
	if (nonces == 0)
		return TC_ACT_OK; /* plain IPv6 with destination options: not ours */
	if (nonces > 1) {
		count(ILNP_R_DROP_MULTI_NONCE);
		return TC_ACT_SHOT;
	}
	if (nonce_len != 4 && nonce_len != 12)
		goto malformed;
	if (cfg->mode != ILNP_MODE_EBPF || others || l4_csum_off(next) < 0)
		return punt(cfg, ILNP_R_PUNT_OTHER);
	if (next == IPPROTO_ICMPV6_) {
		__u8 t;
		if (bpf_skb_load_bytes(skb, l3 + sizeof(ip6) + hlen, &t, 1) < 0)
			goto malformed;
		if (t == ICMPV6_LOCATOR_UPDATE)
			return punt(cfg, ILNP_R_PUNT_LU);
	}

	__u64 nid_s = *(__u64 *)&ip6.saddr.s6_addr[8];
	__u64 loc_s = *(__u64 *)&ip6.saddr.s6_addr[0];
	__u64 loc_d = *(__u64 *)&ip6.daddr.s6_addr[0];
	struct ilnp_ilcc_val *e = bpf_map_lookup_elem(&ilnp_ilcc, &nid_s);
	if (!e)
		return punt(cfg, ILNP_R_PUNT_MISS);
	if (e->nonce_rx_len == 0)
		return punt(cfg, ILNP_R_PUNT_NONCE_UNKNOWN);
	if (e->nonce_rx_len != nonce_len)
		goto bad_nonce;
	{
		__u32 a = nonce_at & (DESTOPTS_MAX - 1);
		if (a + 2 + 12 > DESTOPTS_MAX)
			goto malformed;
		__u8 diff = 0;
#pragma unroll
		for (int k = 0; k < ILNP_NONCE_MAX; k++)
			if (k < nonce_len)
				diff |= opts[bound(a + 2 + k)] ^ e->nonce_rx[k];
		if (diff)
			goto bad_nonce;
	}
	{
		int known = 0;
#pragma unroll
		for (int k = 0; k < ILNP_MAX_REMOTE_LOCS; k++)
			if (k < e->n_remote_locs && e->remote_locs[k] == loc_s)
				known = 1;
		if (!known)
			return punt(cfg, ILNP_R_PUNT_SRC_LOC);
	}
	struct ilnp_local_val *lv = bpf_map_lookup_elem(&ilnp_locals, &loc_d);
	if (!lv || lv->state >= ILNP_LOC_AGED)
		return punt(cfg, ILNP_R_PUNT_DST_LOC);

	/* checksum: wire rule -> identifier addresses */
	__u32 l4 = l3 + sizeof(ip6) + hlen;
	if (next == IPPROTO_ICMPV6_) {
		if (fix_csum(skb, l4, next, loc_s, loc_d, cfg->id_prefix, cfg->id_prefix))
			goto err;
	} else if (fix_csum(skb, l4, next, 0, 0, cfg->id_prefix, cfg->id_prefix)) {
		goto err;
	}
	if (bpf_skb_adjust_room(skb, -(__s32)hlen, BPF_ADJ_ROOM_NET, BPF_F_ADJ_ROOM_FIXED_GSO))
		goto err;
	ip6.payload_len = bpf_htons(bpf_ntohs(ip6.payload_len) - hlen);
	ip6.nexthdr = next;
	*(__u64 *)&ip6.saddr.s6_addr[0] = cfg->id_prefix;
	*(__u64 *)&ip6.daddr.s6_addr[0] = cfg->id_prefix;
	if (bpf_skb_store_bytes(skb, l3, &ip6, sizeof(ip6), 0))
		goto err;
	__sync_fetch_and_add(&e->rx_pkts, 1);
	__sync_fetch_and_add(&e->rx_bytes, skb->len);
	count(ILNP_R_INGRESS_FAST);
	return TC_ACT_OK;

bad_nonce:
	count(ILNP_R_DROP_BAD_NONCE);
	return TC_ACT_SHOT;
malformed:
	count(ILNP_R_DROP_MALFORMED);
	return TC_ACT_SHOT;
err:
	count(ILNP_R_INGRESS_ERROR);
	return TC_ACT_SHOT;
}

char _license[] SEC("license") = "Dual MIT/GPL";
