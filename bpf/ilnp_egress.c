// SPDX-License-Identifier: (GPL-2.0 OR MIT)
/*
 * ilnp_egress — tc egress on ilnp0 (a TUN: packets start at the IPv6 header).
 *
 * Identifier form (P:NID_self -> P:NID_peer, from local sockets) becomes wire
 * form (L64:NID_self -> L64:NID_peer + Destination Options with the nonce) for
 * peers the ILCC knows, and leaves through the uplink of its source locator.
 * Everything else returns TC_ACT_OK, which hands the packet to the TUN, where
 * ilnpd reads it: slow-path identifier packets and wire packets the ingress
 * program punted here (their destination is not in P).
 *
 * Decisions are taken before the packet is touched, so a punt always carries
 * the packet exactly as the kernel built it.
 */
#include "ilnp_common.h"

/* What the checks found: the packet's IPv6 header and its ILCC entry. */
struct egress_ctx {
	struct ipv6hdr ip6;
	struct ilnp_ilcc_val *e;
	struct ilnp_ilcc_key key; /* the entry's: peer NID, our source NID */
	__u64 peer_nid;
	__u64 local_nid;  /* ours the entry uses (the packet's source NID) */
	__u64 local_loc;  /* the pair this packet takes (wire order): the ILCC's, */
	__u64 remote_loc; /* or ilnp_balance's choice */
	__u32 l4_off;
	__u8 proto;
};

static __always_inline int eg_punt(__u32 reason)
{
	count(reason);
	return TC_ACT_OK; /* to the TUN -> ilnpd */
}

/* TCP, UDP, ESP and ICMPv6 echo directly after the IPv6 header; 0 = fast path.
 * ESP (issue #44 item 4): no checksum over the addresses (RFC 4303), carried like
 * UDP without the checksum fix; AH stays punted (its ICV covers the addresses). */
static __always_inline int eg_check_proto(struct __sk_buff *skb, struct egress_ctx *c)
{
	__u8 type;

	switch (c->proto) {
	case IPPROTO_TCP:
	case IPPROTO_UDP:
	case IPPROTO_ESP:
		return 0;
	case NEXTHDR_ICMPV6:
		if (bpf_skb_load_bytes(skb, c->l4_off, &type, 1) < 0)
			return ILNP_R_EGRESS_PUNT_PROTO;
		if (type == ICMPV6_ECHO_REQUEST || type == ICMPV6_ECHO_REPLY)
			return 0;
		/* errors quote an identifier-form packet: ilnpd translates the quote */
		return type < 128 ? ILNP_R_EGRESS_PUNT_ICMP_ERROR : ILNP_R_EGRESS_PUNT_PROTO;
	}
	return ILNP_R_EGRESS_PUNT_PROTO;
}

/* bpf_fib_lookup's results eg_route acts on (size-independent ones: cached) */
static __always_inline int fib_cacheable(__u32 rc)
{
	return rc == BPF_FIB_LKUP_RET_SUCCESS || rc == BPF_FIB_LKUP_RET_NO_NEIGH ||
	       rc == BPF_FIB_LKUP_RET_NOT_FWDED || rc == BPF_FIB_LKUP_RET_UNREACHABLE;
}

/* The next-hop cache's key for the pair and protocol c takes (ilnp_maps.h). */
static __always_inline void nh_key(struct egress_ctx *c, struct ilnp_nh_key *k)
{
	k->local_loc = c->local_loc;
	k->remote_loc = c->remote_loc;
	k->peer_nid = c->peer_nid;
	k->proto = c->proto;
}

/* ilnp_route_gen[0]: the cache's generation, 0 = cache off. */
static __always_inline __u64 route_gen(void)
{
	__u32 zero = 0;
	__u64 *genp = bpf_map_lookup_elem(&ilnp_route_gen, &zero);

	return genp ? *genp : 0;
}

/*
 * Copies k's ilnp_nh_cache entry to *r if it is of generation gen and younger
 * than the TTL at now; 1 = copied. The copy is checked against the live entry's
 * key and generation after it is taken: an LRU element recycled for another key
 * meanwhile (the map reuses preallocated elements) is not used.
 */
static __always_inline int nh_cache_get(struct ilnp_nh_key *k, __u64 gen, __u64 now, struct ilnp_nh_val *r)
{
	struct ilnp_nh_key want = *k; /* k may be r's own key */
	struct ilnp_nh_val *v = bpf_map_lookup_elem(&ilnp_nh_cache, &want);

	if (!v || v->gen != gen || now - v->ts_ns >= ILNP_NH_CACHE_TTL_NS)
		return 0;
	__builtin_memcpy(r, v, sizeof(*r));
	return v->key.local_loc == want.local_loc && v->key.remote_loc == want.remote_loc &&
	       v->key.peer_nid == want.peer_nid && v->key.proto == want.proto && v->gen == gen;
}

/*
 * The main table's answer for the wire addresses, as bpf_fib_lookup gives it
 * (return code, output interface, next hop; for SUCCESS also the MTU and the
 * Ethernet addresses): from ilnp_nh_cache while its generation and age hold
 * (ilnp_maps.h), else looked up and cached.
 * tot_len = 0: for SUCCESS the helper also checks the packet against the
 * output interface's MTU (GSO-aware: is_skb_forwardable, MTU + L2 + VLAN
 * header); an entry is used only for packets that pass it for certain (GSO or
 * at most the MTU), the others are looked up, so FRAG_NEEDED comes out as
 * before. The fast path's own per-packet state (the locator's uplink and
 * router, ilnp_locals) is not cached: eg_route reads it for every packet.
 */
static __always_inline __u32 eg_fib(struct __sk_buff *skb, struct ilnp_cfg *cfg, struct egress_ctx *c,
				    struct ilnp_nh_val *r)
{
	struct bpf_fib_lookup fib = {};
	__u64 gen = route_gen(), now = 0;
	int rc;

	nh_key(c, &r->key);
	if (gen) {
		now = bpf_ktime_get_coarse_ns();
		if (nh_cache_get(&r->key, gen, now, r) &&
		    (r->rc != BPF_FIB_LKUP_RET_SUCCESS || skb->len <= r->mtu || skb->gso_size)) {
			count(ILNP_R_EGRESS_NH_HIT);
			return r->rc;
		}
		nh_key(c, &r->key); /* a copy that was not used may have overwritten it */
		count(ILNP_R_EGRESS_NH_MISS);
	}

	fib.family = AF_INET6;
	fib.l4_protocol = c->proto;
	fib.ifindex = skb->ifindex;
	__builtin_memcpy(&fib.ipv6_src[0], &c->local_loc, 8);
	__builtin_memcpy(&fib.ipv6_src[2], &c->local_nid, 8);
	__builtin_memcpy(&fib.ipv6_dst[0], &c->remote_loc, 8);
	__builtin_memcpy(&fib.ipv6_dst[2], &c->peer_nid, 8);
	rc = bpf_fib_lookup(skb, &fib, sizeof(fib), 0);
	r->rc = (__u32)rc;
	r->ifindex = fib.ifindex;
	r->mtu = rc == BPF_FIB_LKUP_RET_SUCCESS ? fib.mtu_result : 0;
	__builtin_memcpy(r->nh, fib.ipv6_dst, sizeof(r->nh));
	if (rc == BPF_FIB_LKUP_RET_SUCCESS) {
		__builtin_memcpy(r->smac, fib.smac, sizeof(r->smac));
		__builtin_memcpy(r->dmac, fib.dmac, sizeof(r->dmac));
	} else {
		__builtin_memset(r->smac, 0, sizeof(r->smac));
		__builtin_memset(r->dmac, 0, sizeof(r->dmac));
	}
	if (gen && fib_cacheable(r->rc)) {
		r->gen = gen;
		r->ts_ns = now;
		bpf_map_update_elem(&ilnp_nh_cache, &r->key, r, BPF_ANY);
	}
	return r->rc;
}

/*
 * The wire addresses' route; fills nh and oif. 0 = go, else a punt reason.
 *
 * A packet leaves through the uplink that owns its source locator (lv->ifindex),
 * via that uplink's router: its source address belongs to that network, whose
 * path it was advertised for, and another network's ingress filter (BCP 38)
 * would drop it.
 *   1. The main table (eg_fib), as if the wire packet arrived on ilnp0 (ilnpd
 *      sets forwarding=1 on ilnp0 only; the helper insists on it for the
 *      ifindex it is given). The source address takes part (source-specific
 *      routes), and the helper checks the MTU itself, GSO-aware. If its route
 *      leaves through lv->ifindex (a route via that uplink's router, or the
 *      destination on that link), that is the route.
 *   2. Else, if ilnpd knows that uplink's default router (lv->router): through
 *      lv->ifindex to that router (egress_via_router).
 *   3. Else (its router is gone): where the main table says, counted
 *      (egress_fib_fallback), rather than dropped.
 * Not BPF_FIB_LOOKUP_OUTPUT with the uplink as ifindex: on IPv6 the helper then
 * wants forwarding=1 on the uplink itself (which would stop it taking RAs and
 * make the host advertise itself as a router there), and the output interface
 * only breaks ties between routes of equal metric and router preference
 * (no RT6_LOOKUP_F_IFACE), so it does not pin the uplink.
 */
static __always_inline int eg_route(struct __sk_buff *skb, struct ilnp_cfg *cfg, struct egress_ctx *c,
				    struct ilnp_local_val *lv, struct bpf_redir_neigh *nh, __u32 *oif)
{
	struct ilnp_nh_val fib = {};
	__u64 r0, r1;
	__u32 rc;

	rc = eg_fib(skb, cfg, c, &fib);
	if (!fib_cacheable(rc))
		return ILNP_R_EGRESS_PUNT_FIB; /* MTU, blackhole, prohibit, ... */
	if (rc == BPF_FIB_LKUP_RET_NOT_FWDED || rc == BPF_FIB_LKUP_RET_UNREACHABLE || fib.ifindex != lv->ifindex) {
		__builtin_memcpy(&r0, &lv->router[0], 8);
		__builtin_memcpy(&r1, &lv->router[8], 8);
		if (r0 | r1) {
			count(ILNP_R_EGRESS_VIA_ROUTER);
			*oif = lv->ifindex;
			nh->nh_family = AF_INET6;
			__builtin_memcpy(nh->ipv6_nh, lv->router, sizeof(nh->ipv6_nh));
			return 0;
		}
		if (rc == BPF_FIB_LKUP_RET_NOT_FWDED || rc == BPF_FIB_LKUP_RET_UNREACHABLE)
			return ILNP_R_EGRESS_PUNT_FIB;
		count(ILNP_R_EGRESS_FIB_FALLBACK);
	}
	*oif = fib.ifindex;
	if (rc == BPF_FIB_LKUP_RET_NO_NEIGH) {
		/* nh_family stays 0: see the redirect at the end of ilnp_egress */
		count(ILNP_R_EGRESS_NEIGH);
		return 0;
	}
	nh->nh_family = AF_INET6;
	__builtin_memcpy(nh->ipv6_nh, fib.nh, sizeof(nh->ipv6_nh));
	return 0;
}

/* ilnp-core's balance::mix64 (MurmurHash3's 64-bit finaliser). */
static __always_inline __u64 mix64(__u64 x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	return x ^ (x >> 33);
}

/* ilnp-core's balance::flow_hash over ilnp_wire::l4::flow_ports: NIDs as
 * numbers, the upper layer right after the IPv6 header, TCP/UDP ports or the
 * ICMPv6 echo identifier. */
static __always_inline __u64 flow_hash(struct __sk_buff *skb, struct ilnp_cfg *cfg, struct egress_ctx *c, __u64 seed)
{
	__u16 p[3] = {};
	__u64 ports;

	if (c->proto == IPPROTO_TCP || c->proto == IPPROTO_UDP) {
		if (bpf_skb_load_bytes(skb, c->l4_off, p, 4) < 0)
			p[0] = p[1] = 0;
	} else if (c->proto == NEXTHDR_ICMPV6) {
		/* eg_check_proto let only echo request/reply through */
		if (bpf_skb_load_bytes(skb, c->l4_off + 4, p, 2) < 0)
			p[0] = 0;
		p[1] = 0;
	}
	ports = ((__u64)c->proto << 32) | ((__u64)bpf_ntohs(p[0]) << 16) | bpf_ntohs(p[1]);
	return mix64(mix64(mix64(seed ^ bpf_be64_to_cpu(cfg->local_nid)) ^ bpf_be64_to_cpu(c->peer_nid)) ^ ports);
}

/* The pair from ilnp_balance, if this correspondent balances (else the ILCC's;
 * its flag spares the lookup for the others). */
static __always_inline void eg_balance(struct __sk_buff *skb, struct ilnp_cfg *cfg, struct egress_ctx *c)
{
	struct ilnp_balance_val *b;
	__u64 i, n;
	__u8 slot;

	if (!(c->e->flags & ILNP_ILCC_F_BALANCED))
		return;
	b = bpf_map_lookup_elem(&ilnp_balance, &c->key);
	if (!b || b->n_slots == 0 || b->n_pairs == 0)
		return;
	n = b->n_slots;
	if (b->policy == ILNP_POLICY_PER_PACKET)
		i = __sync_fetch_and_add(&b->seq, 1) % n;
	else if (b->policy == ILNP_POLICY_PER_FLOW)
		i = flow_hash(skb, cfg, c, b->flow_seed) % n;
	else
		return;
	slot = b->slots[i & (ILNP_BAL_SLOTS - 1)];
	if (slot >= b->n_pairs)
		return;
	c->local_loc = b->pairs[slot & (ILNP_BAL_MAX_PAIRS - 1)].local_loc;
	c->remote_loc = b->pairs[slot & (ILNP_BAL_MAX_PAIRS - 1)].remote_loc;
	count(ILNP_R_EGRESS_BALANCED);
}

static __always_inline void nonce_hdr(struct egress_ctx *c, __u8 hdr[ILNP_NONCE_HLEN])
{
	hdr[0] = c->proto;       /* Next Header */
	hdr[1] = 1;              /* Hdr Ext Len: 16 bytes */
	hdr[2] = ILNP_OPT_NONCE; /* the nonce first */
	hdr[3] = c->e->nonce_tx_len;
	if (c->e->nonce_tx_len == 4) {
		__builtin_memcpy(&hdr[4], c->e->nonce_tx, 4);
		hdr[8] = ILNP_OPT_FILLER; /* 6 zero bytes: no padding run over 7 (ILNP_NONCE_HLEN) */
		hdr[9] = 6;
	} else {
		__builtin_memcpy(&hdr[4], c->e->nonce_tx, ILNP_NONCE_MAX);
	}
}

/* Inserts the nonce header after the IPv6 header (tc: the skb may be GSO). */
static __always_inline int eg_push_nonce(struct __sk_buff *skb, struct egress_ctx *c)
{
	__u8 hdr[ILNP_NONCE_HLEN] = {};

	if (bpf_skb_adjust_room(skb, ILNP_NONCE_HLEN, BPF_ADJ_ROOM_NET, BPF_F_ADJ_ROOM_FIXED_GSO))
		return -1;
	nonce_hdr(c, hdr);
	return bpf_skb_store_bytes(skb, IPV6_HLEN, hdr, ILNP_NONCE_HLEN, 0);
}

/* The upper layer's checksum for the wire addresses: first, while the upper
 * layer still sits where c->l4_off says. 0 = done. */
static __always_inline int eg_fix_csum(struct __sk_buff *skb, struct ilnp_cfg *cfg, struct egress_ctx *c)
{
	if (c->proto == NEXTHDR_ICMPV6)
		return fix_l4_csum(skb, c->l4_off, c->proto, cfg->id_prefix, cfg->id_prefix, c->local_loc,
				   c->remote_loc);
	return fix_l4_csum(skb, c->l4_off, c->proto, cfg->id_prefix, cfg->id_prefix, 0, 0);
}

/* c->ip6 as it goes on the wire: the pair's locators and, with a nonce header
 * of hlen bytes (0: the measurement build without one), its length and type. */
static __always_inline void eg_wire_ip6(struct egress_ctx *c, __u32 hlen)
{
	if (hlen) {
		c->ip6.payload_len = bpf_htons(bpf_ntohs(c->ip6.payload_len) + hlen);
		c->ip6.nexthdr = NEXTHDR_DEST;
	}
	set_hi64(&c->ip6.saddr, c->local_loc);
	set_hi64(&c->ip6.daddr, c->remote_loc);
}

/* The nonce header's length on the wire: 0 in the measurement build without one
 * (docs/benchmarks.md § Without the nonce). */
#ifndef ILNP_EXP_NONCE_OMITTED
#define EG_HLEN ILNP_NONCE_HLEN
#else
#define EG_HLEN 0
#endif

/* Identifier form -> wire form, in place (the v4 path: its outer headers go in
 * front next). 0 = done. */
static __always_inline int eg_rewrite(struct __sk_buff *skb, struct ilnp_cfg *cfg, struct egress_ctx *c)
{
	if (eg_fix_csum(skb, cfg, c))
		return -1;
	if (EG_HLEN && eg_push_nonce(skb, c))
		return -1;
	eg_wire_ip6(c, EG_HLEN);
	return bpf_skb_store_bytes(skb, 0, &c->ip6, sizeof(c->ip6), BPF_F_RECOMPUTE_CSUM);
}

/*
 * Identifier form -> wire form behind an Ethernet header, for an IPv6 uplink:
 * room for the Ethernet and nonce headers in front, and the three headers written
 * there in one go. The IPv6 header moves 16 bytes forward; the upper layer stays
 * where it is, so a GSO packet's segmentation and a CHECKSUM_PARTIAL packet's
 * csum_start stay right, and no bytes are moved (bpf_skb_adjust_room would move
 * the IPv6 header back and mark a GSO packet's header for checking). The skb's
 * network header is left where the old IPv6 header began: ilnp_egress's
 * bpf_redirect_neigh pulls the Ethernet header and resets it to the new one, and
 * nothing reads it before. ilnp_route_xmit, which redirects without the neighbour
 * layer, lives with that (docs/architecture.md, translation at the route, limit (2)).
 * The upper layer's checksum is fixed first. 0 = done.
 */
static __always_inline int eg_push_wire(struct __sk_buff *skb, struct ilnp_cfg *cfg, struct egress_ctx *c,
					const struct ethhdr *eth)
{
	__u8 h[ETH_HLEN + IPV6_HLEN + EG_HLEN] = {}; /* zeros: the filler's data after a 4-byte nonce */

	if (eg_fix_csum(skb, cfg, c))
		return -1;
	if (bpf_skb_change_head(skb, ETH_HLEN + EG_HLEN, 0))
		return -1;
	eg_wire_ip6(c, EG_HLEN);
	__builtin_memcpy(h, eth, ETH_HLEN);
	__builtin_memcpy(&h[ETH_HLEN], &c->ip6, IPV6_HLEN);
#if EG_HLEN
	nonce_hdr(c, &h[ETH_HLEN + IPV6_HLEN]);
#endif
	return bpf_skb_store_bytes(skb, 0, h, sizeof(h), 0);
}

/*
 * A v4 path (docs/architecture.md § IPv4 and NAT): may this packet go in UDP/IPv4
 * from the fast path? 0 = yes, with *dst the address and port it goes to (the
 * ILCC's remote_v4: the peer's NAT, or its locator's own), else a punt reason.
 * Both locators must be v4 paths (ilnp-core's fit_local picks them so); a
 * balanced pair other than the ILCC's has no destination here (ilnpd knows its
 * NAT): slow path. The packet, with its nonce header and 28 bytes of IPv4 and
 * UDP, must fit the uplink's MTU (GSO packets: ilnp0's MTU leaves the room);
 * a bigger one goes to ilnpd's socket, which lets the kernel fragment it.
 */
static __always_inline int eg_v4_check(struct __sk_buff *skb, struct egress_ctx *c, struct ilnp_local_val *lv,
				       __u64 *dst)
{
	__u32 mtu_len = skb->len;

	if (!is_v4_loc(c->local_loc) || !is_v4_loc(c->remote_loc) || c->remote_loc != c->e->remote_loc ||
	    c->e->remote_v4_port == 0)
		return ILNP_R_EGRESS_PUNT_V4;
	if (!skb->gso_size &&
	    bpf_check_mtu(skb, lv->ifindex, &mtu_len, 16 + ILNP_V4_OVERHEAD, 0) != BPF_MTU_CHK_RET_SUCCESS)
		return ILNP_R_EGRESS_PUNT_V4_MTU;
	/* the same wire order as a locator: 0004, address, port */
	*dst = bpf_htons(ILNP_V4_MARK) | (__u64)(*(__u32 *)c->e->remote_v4_addr) << 16 |
	       (__u64)c->e->remote_v4_port << 48;
	return 0;
}

static __always_inline __u16 csum_fold(__u64 s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)~s;
}

/*
 * Wire form -> the same in UDP/IPv4, from our v4 locator's address and port to
 * dst's. The IPv4 header is what ilnpd's socket would send (DF clear, the kernel
 * may fragment; a random ID), the UDP checksum 0 (RFC 768: none; the inner
 * packet has its own). The skb becomes a UDP tunnel packet: a GSO packet is cut
 * into segments, each with its own outer headers, by the uplink or the kernel,
 * as for any UDP encapsulation (SKB_GSO_UDP_TUNNEL).
 */
static __always_inline int eg_push_v4(struct __sk_buff *skb, struct egress_ctx *c, __u64 dst)
{
	struct {
		struct iphdr ip;
		struct udphdr udp;
	} h = {};
	__u32 len = skb->len + ILNP_V4_OVERHEAD;
	__s64 sum;

	if (bpf_skb_adjust_room(skb, ILNP_V4_OVERHEAD, BPF_ADJ_ROOM_MAC,
				BPF_F_ADJ_ROOM_ENCAP_L3_IPV4 | BPF_F_ADJ_ROOM_ENCAP_L4_UDP | BPF_F_ADJ_ROOM_FIXED_GSO))
		return -1;
	h.ip.version = 4;
	h.ip.ihl = 5;
	h.ip.tot_len = bpf_htons(len > 0xffff ? 0xffff : len); /* GSO: each segment gets its own */
	h.ip.id = (__u16)bpf_get_prandom_u32();
	h.ip.ttl = 64;
	h.ip.protocol = IPPROTO_UDP;
	h.ip.saddr = v4_loc_addr(c->local_loc);
	h.ip.daddr = v4_loc_addr(dst);
	sum = bpf_csum_diff(NULL, 0, (__be32 *)&h.ip, sizeof(h.ip), 0);
	if (sum < 0)
		return -1;
	h.ip.check = csum_fold((__u64)sum);
	h.udp.source = v4_loc_port(c->local_loc);
	h.udp.dest = v4_loc_port(dst);
	h.udp.len = bpf_htons(len - IPV4_HLEN > 0xffff ? 0xffff : len - IPV4_HLEN);
	return bpf_skb_store_bytes(skb, 0, &h, sizeof(h), 0);
}

/*
 * bpf_redirect_neigh() pulls an Ethernet-sized L2 header before it routes to the
 * neighbour and drops packets without one (mac header == network header, as on
 * a TUN). Give it one; the neighbour layer writes the real addresses.
 */
static __always_inline int eg_push_l2(struct __sk_buff *skb, __u16 proto)
{
	struct ethhdr eth = {};

	eth.h_proto = bpf_htons(proto);
	if (bpf_skb_change_head(skb, sizeof(eth), 0))
		return -1;
	return bpf_skb_store_bytes(skb, 0, &eth, sizeof(eth), 0);
}

/*
 * The checks of an identifier-form packet both egress programs make before
 * touching it (ilnp_egress here, ilnp_route_xmit in ilnp_route.c): fills c with
 * its header, ILCC entry and the ILCC's locator pair. 0 = the fast path may
 * send it; else the reason it goes to ilnpd, or ILNP_R_MAX for a packet that is
 * not an identifier-form one (a wire packet ingress punted, on its way to
 * ilnpd: not counted). The entry is the one of the packet's pair of NIDs
 * (ilnp_ilcc_key); without one the source must be the stable NID (a temporary
 * NID's first packet, or a NID not ours, is ilnpd's: egress_punt_src).
 */
static __always_inline int eg_checks(struct __sk_buff *skb, struct ilnp_cfg *cfg, struct egress_ctx *c)
{
	int r;

	if (skb->protocol != bpf_htons(ETH_P_IPV6))
		return ILNP_R_MAX;
	if (bpf_skb_load_bytes(skb, 0, &c->ip6, sizeof(c->ip6)) < 0)
		return ILNP_R_MAX;
	if (hi64(&c->ip6.daddr) != cfg->id_prefix)
		return ILNP_R_MAX;
	if (cfg->mode != ILNP_MODE_EBPF)
		return ILNP_R_EGRESS_PUNT_USERSPACE;
	c->peer_nid = lo64(&c->ip6.daddr);
	c->local_nid = lo64(&c->ip6.saddr);
	c->key = ilcc_key(cfg, c->peer_nid, c->local_nid);
	c->e = bpf_map_lookup_elem(&ilnp_ilcc, &c->key);
	if (hi64(&c->ip6.saddr) != cfg->id_prefix || c->local_nid != (c->e ? ilcc_local_nid(cfg, c->e) : cfg->local_nid))
		return ILNP_R_EGRESS_PUNT_SRC;
	c->proto = c->ip6.nexthdr;
	c->l4_off = IPV6_HLEN;
	r = eg_check_proto(skb, c);
	if (r)
		return r;
	if (!c->e || (c->e->nonce_tx_len != 4 && c->e->nonce_tx_len != 12))
		return ILNP_R_EGRESS_PUNT_MISS;
	/* the constant checksum adjustment is RFC 6741's rule; the other is ilnpd's */
	if (c->e->flags & ILNP_ILCC_F_FULL_CSUM)
		return ILNP_R_EGRESS_PUNT_CSUM_RULE;
	c->local_loc = c->e->local_loc;
	c->remote_loc = c->e->remote_loc;
	return 0;
}

SEC("classifier")
int ilnp_egress(struct __sk_buff *skb)
{
	struct bpf_redir_neigh nh = {};
	struct ilnp_cfg *cfg = get_cfg();
	struct ilnp_local_val *lv;
	struct egress_ctx c = {};
	__u64 v4_dst = 0;
	__u32 oif = 0;
	int r;

	if (!cfg)
		return TC_ACT_OK;
	r = eg_checks(skb, cfg, &c);
	if (r == ILNP_R_MAX)
		return TC_ACT_OK;
	if (r)
		return eg_punt(r);
	eg_balance(skb, cfg, &c);
	lv = bpf_map_lookup_elem(&ilnp_locals, &c.local_loc);
	if (!lv || lv->state >= ILNP_LOC_AGED)
		return eg_punt(ILNP_R_EGRESS_PUNT_LOCAL_LOC);
	if (is_v4_loc(c.remote_loc) || is_v4_loc(c.local_loc))
		r = eg_v4_check(skb, &c, lv, &v4_dst);
	else
		r = eg_route(skb, cfg, &c, lv, &nh, &oif);
	if (r)
		return eg_punt(r);

	/* from here on the packet is changed: a failure can only drop it */
	if (v4_dst) {
		if (eg_rewrite(skb, cfg, &c) || eg_push_v4(skb, &c, v4_dst) || eg_push_l2(skb, ETH_P_IP)) {
			count(ILNP_R_EGRESS_DROP_ERROR);
			return TC_ACT_SHOT;
		}
		__sync_fetch_and_add(&c.e->tx_pkts, 1);
		__sync_fetch_and_add(&c.e->tx_bytes, skb->len - ETH_HLEN - ILNP_V4_OVERHEAD);
		count(ILNP_R_EGRESS_FAST);
		count(ILNP_R_EGRESS_V4);
		/* the kernel routes the outer packet out of the locator's uplink (the
		 * route lookup is bound to it, as for a socket bound to that device) */
		return bpf_redirect_neigh(lv->ifindex, NULL, 0, 0);
	}
	/* bpf_redirect_neigh pulls this Ethernet header (eg_push_l2); the neighbour
	 * layer writes the real one */
	struct ethhdr eth = { .h_proto = bpf_htons(ETH_P_IPV6) };

	if (eg_push_wire(skb, cfg, &c, &eth)) {
		count(ILNP_R_EGRESS_DROP_ERROR);
		return TC_ACT_SHOT;
	}
	__sync_fetch_and_add(&c.e->tx_pkts, 1);
	__sync_fetch_and_add(&c.e->tx_bytes, skb->len - ETH_HLEN);
	count(ILNP_R_EGRESS_FAST);
	/*
	 * Next hop resolved: hand it over, no second route lookup.
	 * Unresolved: let the helper route the wire packet itself. It then
	 * replaces the skb's dst, which still is the identifier route via ilnp0;
	 * a packet queued for neighbour resolution is re-sent through its dst's
	 * neighbour, and ilnp0's (a NOARP device) would send it without an
	 * Ethernet header.
	 */
	if (nh.nh_family == AF_INET6)
		return bpf_redirect_neigh(oif, &nh, sizeof(nh), 0);
	return bpf_redirect_neigh(oif, NULL, 0, 0);
}
