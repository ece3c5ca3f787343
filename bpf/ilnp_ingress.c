// SPDX-License-Identifier: (GPL-2.0 OR MIT)
/*
 * ilnp_ingress — tc ingress on each Ethernet uplink.
 *
 * Wire form (L64:NID_peer -> L64:NID_self + DestOpts with the peer's nonce)
 * becomes identifier form (P:NID_peer -> P:NID_self) for established peers and
 * goes up the stack to the socket bound on the identifier address (assigned to
 * ilnp0, so the kernel delivers it locally).
 * Anything ILNP that the fast path does not fully vouch for is punted: redirected
 * to the egress of ilnp0, whose program lets it through to the TUN (its
 * destination is not in P), where ilnpd reads it and decides.
 * Plain IPv6 (no nonce option) is never touched, except a fallback peer's to our
 * NID (ilnp_plain_peers): ilnpd carries that session as plain IPv6.
 */
#include "ilnp_common.h"


enum opts_verdict {
	OPTS_NOT_ILNP,  /* no nonce option: plain IPv6, the kernel handles it */
	OPTS_NONCE,     /* pads (the filler too) and exactly one nonce option of length 4 or 12 */
	OPTS_OTHER,     /* a nonce, but also other options (or after them), or a big header */
	OPTS_MULTI,     /* more than one nonce option */
	OPTS_MALFORMED, /* a nonce option that is truncated or of another length */
	OPTS_OVERRUN,   /* a nonce option running past its header (FreeBSD's 96-bit reflection) */
};

struct ingress_ctx {
	struct ipv6hdr ip6;
	__u32 dopt_off; /* DestOpts header offset (after Ethernet + IPv6) */
	__u32 hlen;     /* DestOpts header length */
	__u32 nonce_at; /* offset of the nonce option inside the header */
	__u8 nonce_len;
	__u8 next;         /* Next Header after the DestOpts header */
	__u8 nonce_loaded; /* nonce[] holds the packet's nonce already (in_own_hdr) */
	__u8 _pad;
	__u32 nonce[ILNP_NONCE_MAX / 4];
};

static __always_inline int in_punt(struct ilnp_cfg *cfg, __u32 reason)
{
	count(reason);
	return bpf_redirect(cfg->ilnp0_ifindex, 0); /* -> ilnp0 egress -> TUN -> ilnpd */
}

static __always_inline int in_drop(__u32 reason)
{
	count(reason);
	return TC_ACT_SHOT;
}

/* A plain ICMPv6 error (type 1-4) quoting a packet whose DestOpts header
 * starts with a nonce option: one of ours, which ilnpd translates. */
static __always_inline int in_quotes_ilnp(struct __sk_buff *skb, __u32 icmp_off)
{
	__u8 type, q_next, q_opt;

	if (bpf_skb_load_bytes(skb, icmp_off, &type, 1) < 0 || type < 1 || type > 4)
		return 0;
	/* quoted IPv6 header at +8: Next Header at +6, its first option at +40+2 */
	if (bpf_skb_load_bytes(skb, icmp_off + 8 + 6, &q_next, 1) < 0 || q_next != NEXTHDR_DEST)
		return 0;
	if (bpf_skb_load_bytes(skb, icmp_off + 8 + IPV6_HLEN + 2, &q_opt, 1) < 0)
		return 0;
	return q_opt == ILNP_OPT_NONCE;
}

/* A plain packet (no nonce) to our NID: a fallback peer's is punted to ilnpd,
 * which turns it into identifier form; any other stays the kernel's. Only its
 * data (TCP, UDP, Echo): Neighbour Discovery, MLD and errors are the kernel's. */
static __always_inline int in_plain(struct __sk_buff *skb, struct ilnp_cfg *cfg, struct ingress_ctx *c)
{
	struct ilnp_plain_peer_val *p;
	__u64 nid_s = lo64(&c->ip6.saddr);
	__u8 type;

	if (c->ip6.nexthdr == NEXTHDR_ICMPV6) {
		if (bpf_skb_load_bytes(skb, ETH_HLEN + IPV6_HLEN, &type, 1) < 0 ||
		    (type != ICMPV6_ECHO_REQUEST && type != ICMPV6_ECHO_REPLY))
			return TC_ACT_OK;
	}
	p = bpf_map_lookup_elem(&ilnp_plain_peers, &nid_s);
	if (!p || p->remote_loc != hi64(&c->ip6.saddr))
		return TC_ACT_OK;
	return in_punt(cfg, ILNP_R_INGRESS_PUNT_PLAIN_PEER);
}

/* Type and length of the option at offset i of the header; 0 = read. */
static __always_inline int in_load_tl(struct __sk_buff *skb, __u32 off, __u8 *tl)
{
	if (bpf_skb_load_bytes(skb, off, tl, 2) == 0)
		return 0;
	tl[1] = 0; /* a Pad1 in the last byte of the packet */
	return bpf_skb_load_bytes(skb, off, tl, 1);
}

/*
 * Walk the options (RFC 8200 §4.2 TLVs) of the DestOpts header at dopt_off. The
 * options are read one by one with bpf_skb_load_bytes() rather than indexed in a
 * stack copy: the offsets then stay imprecise scalars for the verifier, which
 * (6.18's at least) prunes the loop instead of walking every combination of
 * option lengths.
 * At most OPTS_WALK_MAX options: a header with more is not one we sent, so it
 * goes to ilnpd if it carries a nonce.
 *
 * A global function, so that the verifier checks it once, on its own (the offset
 * and the packet unknown), and the caller goes on from one unknown result. Inlined
 * into ilnp_ingress, as it was until 2026-11-24, Linux 6.1's verifier (Debian 12)
 * walked the 16 options again for each state the caller reached it with and gave
 * up at a million instructions ("BPF program is too large"; docs/debian12-kernel.md).
 * Its result is one scalar, not writes through a pointer to the caller's stack
 * (nothing depends on how a verifier models those): the verdict (bits 0-7), the Next
 * Header (8-15), the header length (16-31), the nonce option's offset in the
 * header (32-47) and its length (48-55); 0 where the walk did not get to them.
 */
#define OPTS_WALK_MAX 16
__attribute__((noinline)) __u64 ilnp_in_walk_opts(struct __sk_buff *skb, __u32 dopt_off)
{
	__u32 i = 2, end, nonces = 0, others = 0, first = 0, l, nonce_at = 0, nonce_len = 0, next;
	__u8 tl[2] = {};
	__u64 v;

	if (bpf_skb_load_bytes(skb, dopt_off, tl, 2) < 0)
		return OPTS_NOT_ILNP; /* shorter than any DestOpts header: the kernel drops it */
	next = tl[0];
	end = ((__u32)tl[1] + 1) * 8;
	tl[0] = 0;
	for (int n = 0; n < OPTS_WALK_MAX; n++) {
		if (i >= end)
			break;
		if (in_load_tl(skb, dopt_off + i, tl))
			goto truncated;
		if (tl[0] == 0) { /* Pad1 */
			i++;
			continue;
		}
		l = tl[1];
		if (i + 2 + l > end) {
			v = tl[0] == ILNP_OPT_NONCE ? OPTS_OVERRUN : (nonces ? OPTS_MALFORMED : OPTS_NOT_ILNP);
			goto out;
		}
		if (tl[0] == ILNP_OPT_NONCE) {
			if (nonces) {
				v = OPTS_MULTI; /* RFC 6744 §2 */
				goto out;
			}
			nonces = 1;
			nonce_at = i;
			nonce_len = l;
			first = !others;
		} else if (tl[0] != 1 && tl[0] != ILNP_OPT_FILLER) { /* not PadN, not the filler */
			others = 1;
		}
		i += 2 + l;
	}
	if (i < end) /* more options than we walk */
		others = 1;
	if (!nonces)
		v = OPTS_NOT_ILNP;
	else if (nonce_len != 4 && nonce_len != 12)
		v = OPTS_MALFORMED;
	else
		v = first && !others ? OPTS_NONCE : OPTS_OTHER;
	goto out;
truncated:
	/* a broken header without our option is the kernel's to reject */
	v = nonces || tl[0] == ILNP_OPT_NONCE ? OPTS_MALFORMED : OPTS_NOT_ILNP;
out:
	return v | (__u64)(next & 0xff) << 8 | (__u64)(end & 0xffff) << 16 | (__u64)(nonce_at & 0xffff) << 32 |
	       (__u64)(nonce_len & 0xff) << 48;
}

/*
 * The header exactly as ILNPv6 nodes build it (ours: nonce_hdr in ilnp_egress.c,
 * ilnp_wire::destopts): 16 bytes, the nonce option first, 4 bytes of nonce and the
 * filler option (ILNP_OPT_FILLER) of 6 (or, from builds before issue #46, a PadN
 * of 6), or 12 bytes of nonce. The walk's verdict for it is known (OPTS_NONCE,
 * the nonce at 2), so one load takes the place of the walk and of the nonce's own
 * load (≈ 90 ns a packet, docs/benchmarks.md § The programs' time per packet).
 * 0 = not in this form (e.g. FreeBSD's 8-byte header): walk it.
 */
static __always_inline int in_own_hdr(struct __sk_buff *skb, struct ingress_ctx *c)
{
	__u8 h[ILNP_NONCE_HLEN];

	if (bpf_skb_load_bytes(skb, c->dopt_off, h, sizeof(h)) < 0 || h[1] != 1 || h[2] != ILNP_OPT_NONCE)
		return 0;
	if (!(h[3] == 4 && (h[8] == ILNP_OPT_FILLER || h[8] == 1) && h[9] == 6) && h[3] != 12)
		return 0;
	c->next = h[0];
	c->hlen = ILNP_NONCE_HLEN;
	c->nonce_at = 2;
	c->nonce_len = h[3];
	__builtin_memcpy(c->nonce, &h[4], sizeof(c->nonce)); /* 4-byte nonce: the option after it, never compared */
	c->nonce_loaded = 1;
	return 1;
}

static __always_inline int in_parse_opts(struct __sk_buff *skb, struct ingress_ctx *c)
{
	__u64 r;

	if (in_own_hdr(skb, c))
		return OPTS_NONCE;
	r = ilnp_in_walk_opts(skb, c->dopt_off);

	c->next = r >> 8;
	c->hlen = (r >> 16) & 0xffff;
	c->nonce_at = (r >> 32) & 0xffff;
	c->nonce_len = r >> 48;
	return r & 0xff;
}

/* The upper layer after the DestOpts header (TCP, UDP, ESP, ICMPv6 echo): 0 = fast
 * path, else a punt reason. */
static __always_inline int in_check_proto(struct __sk_buff *skb, struct ingress_ctx *c)
{
	__u8 type;

	switch (c->next) {
	case IPPROTO_TCP:
	case IPPROTO_UDP:
	case IPPROTO_ESP: /* no checksum over the addresses (eg_check_proto) */
		return 0;
	case NEXTHDR_ICMPV6:
		if (bpf_skb_load_bytes(skb, c->dopt_off + c->hlen, &type, 1) < 0)
			return ILNP_R_INGRESS_PUNT_PROTO;
		if (type == ICMPV6_LOCATOR_UPDATE)
			return ILNP_R_INGRESS_PUNT_LU;
		if (type < 128)
			return ILNP_R_INGRESS_PUNT_ICMP_ERROR; /* the quote needs translating */
		if (type == ICMPV6_ECHO_REQUEST || type == ICMPV6_ECHO_REPLY)
			return 0;
	}
	return ILNP_R_INGRESS_PUNT_PROTO; /* incl. No Next Header: a nonce-only packet */
}

/* Is the packet's nonce the peer's own (IlccEntry::accepts_nonce)? Ours reflected
 * is a reply the core judges (only a shared-nonce peer's answer to what we sent,
 * docs/security.md): punted as a bad nonce. Constant-size compares. */
static __always_inline int in_nonce_eq(const struct ingress_ctx *c, const __u8 *v, __u8 len)
{
	__u32 want[ILNP_NONCE_MAX / 4];

	if (len != c->nonce_len)
		return 0;
	__builtin_memcpy(want, v, sizeof(want));
	if (len == 4)
		return c->nonce[0] == want[0];
	return c->nonce[0] == want[0] && c->nonce[1] == want[1] && c->nonce[2] == want[2];
}

static __always_inline int in_nonce_ok(struct __sk_buff *skb, struct ingress_ctx *c,
				       const struct ilnp_ilcc_val *e)
{
	__u32 off = c->dopt_off + c->nonce_at + 2;

	if (!c->nonce_loaded) {
		if (c->nonce_len == 4) {
			if (bpf_skb_load_bytes(skb, off, c->nonce, 4) < 0)
				return 0;
		} else if (bpf_skb_load_bytes(skb, off, c->nonce, 12) < 0) {
			return 0;
		}
	}
	return in_nonce_eq(c, e->nonce_rx, e->nonce_rx_len);
}

static __always_inline int in_src_loc_known(const struct ilnp_ilcc_val *e, __u64 loc)
{
	int known = 0;

	for (int k = 0; k < ILNP_MAX_REMOTE_LOCS; k++)
		if (k < e->n_remote_locs && e->remote_locs[k] == loc)
			known = 1;
	return known;
}

/* A verified packet arrived on this local locator: the soft-handoff quiet period
 * starts again. One aligned 8-byte store, only when the stamp is older than the
 * grain; a race between CPUs leaves one of two close times, which is as good. */
static __always_inline void in_note_local_rx(struct ilnp_local_val *lv)
{
	__u64 now = bpf_ktime_get_coarse_ns(); /* a clock read per packet costs ≈ 40 ns; a tick's grain is fine here */

	if (now - lv->last_rx_ns > ILNP_LOCAL_RX_GRAIN_NS)
		lv->last_rx_ns = now;
}

/* A Destination Options verdict other than OPTS_NONCE (and OPTS_NOT_ILNP, which each
 * caller handles its own way): what becomes of the packet. */
static __always_inline int in_opts_refused(struct ilnp_cfg *cfg, int verdict)
{
	switch (verdict) {
	case OPTS_MULTI:
		return in_drop(ILNP_R_INGRESS_DROP_MULTI_NONCE); /* RFC 6744 §2 */
	case OPTS_MALFORMED:
		return in_drop(ILNP_R_INGRESS_DROP_MALFORMED);
	case OPTS_OVERRUN:
		return in_drop(ILNP_R_INGRESS_DROP_NONCE_OVERRUN);
	}
	return in_punt(cfg, ILNP_R_INGRESS_PUNT_OPTIONS); /* OPTS_OTHER */
}

/*
 * Does the fast path vouch for this packet from an established peer: eBPF mode, an upper
 * layer it translates, the peer's ILCC entry e (the source NID's, looked up by the caller;
 * NULL: none) with its nonce learned, the packet's nonce the peer's own, its
 * source locator one the entry accepts? 0 = yes, else the punt reason. A wrong nonce is
 * ilnpd's to judge and count; a right one from a new source locator is legitimate (RFC 6744
 * §4): ilnpd learns it.
 */
static __always_inline int in_verify(struct __sk_buff *skb, struct ilnp_cfg *cfg, struct ingress_ctx *c,
				     struct ilnp_ilcc_val *e)
{
	int r;

	if (cfg->mode != ILNP_MODE_EBPF)
		return ILNP_R_INGRESS_PUNT_USERSPACE;
	r = in_check_proto(skb, c);
	if (r)
		return r;
	if (!e)
		return ILNP_R_INGRESS_PUNT_MISS;
	if (e->flags & ILNP_ILCC_F_FULL_CSUM)
		return ILNP_R_INGRESS_PUNT_CSUM_RULE;
	if (e->nonce_rx_len == 0)
		return ILNP_R_INGRESS_PUNT_NONCE_UNKNOWN;
	if (!in_nonce_ok(skb, c, e))
		return ILNP_R_INGRESS_PUNT_BAD_NONCE;
	if (!in_src_loc_known(e, hi64(&c->ip6.saddr)))
		return ILNP_R_INGRESS_PUNT_SRC_LOC;
	return 0;
}

/*
 * After in_verify: does the entry found by the packet's pair of NIDs say the
 * same NID of ours (ilnp_ilcc_val.local_nid)? Always, unless ilnpd wrote an
 * entry under another's key: a mismatch is ilnpd's to judge. 0 = yes, else the
 * punt reason.
 */
static __always_inline int in_verify_nid(struct ilnp_cfg *cfg, const struct ilnp_ilcc_val *e, __u64 nid_d)
{
	return ilcc_local_nid(cfg, e) == nid_d ? 0 : ILNP_R_INGRESS_PUNT_OTHER_NID;
}

/*
 * Admission (ILNP_CFG_F_ADMIT_SOCKET): would a local socket take this TCP/UDP
 * packet once translated? Looked up on the identifier-form tuple, which is what
 * the stack will see: one socket hash lookup in the kernel, no trip to ilnpd.
 */
static __always_inline int in_socket_exists(struct __sk_buff *skb, struct ilnp_cfg *cfg, struct ingress_ctx *c)
{
	struct bpf_sock_tuple t = {};
	struct bpf_sock *sk;
	__u16 ports[2];
	__u64 nid_s = lo64(&c->ip6.saddr);

	if (bpf_skb_load_bytes(skb, c->dopt_off + c->hlen, ports, sizeof(ports)) < 0)
		return 1; /* no ports to look up: ilnpd decides */
	__builtin_memcpy(&t.ipv6.saddr[0], &cfg->id_prefix, 8);
	__builtin_memcpy(&t.ipv6.saddr[2], &nid_s, 8);
	__builtin_memcpy(&t.ipv6.daddr[0], &cfg->id_prefix, 8);
	__builtin_memcpy(&t.ipv6.daddr[2], &cfg->local_nid, 8);
	t.ipv6.sport = ports[0];
	t.ipv6.dport = ports[1];
	if (c->next == IPPROTO_TCP)
		sk = bpf_sk_lookup_tcp(skb, &t, sizeof(t.ipv6), BPF_F_CURRENT_NETNS, 0);
	else
		sk = bpf_sk_lookup_udp(skb, &t, sizeof(t.ipv6), BPF_F_CURRENT_NETNS, 0);
	if (!sk)
		return 0;
	bpf_sk_release(sk);
	return 1;
}

/*
 * The packet goes up without state and the stack will answer it (RST, port
 * unreachable) towards a NID without an ILCC entry: remember where it came from,
 * where it arrived and its nonce, for ilnpd to send that answer there (bounded
 * LRU map: a flood only overwrites older hints; at most ILNP_HINT_BURST at once and
 * one per ILNP_HINT_INTERVAL_NS after that, per CPU). Before in_rewrite changes c->ip6.
 */
static __always_inline void in_note_answer_hint(struct __sk_buff *skb, struct ingress_ctx *c, __u64 nid_s,
						__u32 v4_addr, __u16 v4_port)
{
	struct ilnp_answer_hint_val h = {};
	__u32 off = c->dopt_off + c->nonce_at + 2, k = 0;
	__u64 now = bpf_ktime_get_ns(), *tat;

	/* the writes' budget (ilnp_hint_tat): per CPU, so no atomics */
	tat = bpf_map_lookup_elem(&ilnp_hint_tat, &k);
	if (!tat || *tat > now + ILNP_HINT_BURST * ILNP_HINT_INTERVAL_NS)
		return;
	*tat = (*tat > now ? *tat : now) + ILNP_HINT_INTERVAL_NS;
	h.remote_loc = hi64(&c->ip6.saddr);
	h.local_loc = hi64(&c->ip6.daddr);
	h.ts_ns = now;
	h.nonce_len = c->nonce_len;
	__builtin_memcpy(h.remote_v4_addr, &v4_addr, 4);
	h.remote_v4_port = v4_port;
	if (c->nonce_len == 4) {
		if (bpf_skb_load_bytes(skb, off, h.nonce, 4) < 0)
			return;
	} else if (bpf_skb_load_bytes(skb, off, h.nonce, 12) < 0) {
		return;
	}
	bpf_map_update_elem(&ilnp_answer_hints, &nid_s, &h, BPF_ANY);
}

/* Wire form -> identifier form, in place. 0 = done. */
static __always_inline int in_rewrite(struct __sk_buff *skb, struct ilnp_cfg *cfg, struct ingress_ctx *c)
{
	struct ipv6hdr *ip6 = &c->ip6;
	__u32 l4_off = c->dopt_off + c->hlen;

	if (c->next == NEXTHDR_ICMPV6) {
		if (fix_l4_csum(skb, l4_off, c->next, hi64(&ip6->saddr), hi64(&ip6->daddr), cfg->id_prefix,
				cfg->id_prefix))
			return -1;
	} else if (fix_l4_csum(skb, l4_off, c->next, 0, 0, cfg->id_prefix, cfg->id_prefix)) {
		return -1;
	}
	/* the checksums stay valid, so a NIC's CHECKSUM_UNNECESSARY may stay too */
	if (c->hlen && bpf_skb_adjust_room(skb, -(__s32)c->hlen, BPF_ADJ_ROOM_NET,
					   BPF_F_ADJ_ROOM_FIXED_GSO | BPF_F_ADJ_ROOM_NO_CSUM_RESET))
		return -1;
	ip6->payload_len = bpf_htons(bpf_ntohs(ip6->payload_len) - c->hlen);
	ip6->nexthdr = c->next;
	set_hi64(&ip6->saddr, cfg->id_prefix);
	set_hi64(&ip6->daddr, cfg->id_prefix);
	return bpf_skb_store_bytes(skb, ETH_HLEN, ip6, sizeof(*ip6), BPF_F_RECOMPUTE_CSUM);
}

#ifdef ILNP_EXP_NONCE_OMITTED
/*
 * Measurement build only (docs/benchmarks.md § Without the nonce): a TCP/UDP
 * packet without a header from an established peer's known locator to one of
 * ours is taken as that session's. NOT a design: plain IPv6 between the same
 * addresses would be taken too. -1 = not such a packet.
 */
static __always_inline int in_nonce_omitted(struct __sk_buff *skb, struct ilnp_cfg *cfg, struct ingress_ctx *c)
{
	struct ilnp_local_val *lv;
	struct ilnp_ilcc_val *e = NULL;
	struct ilnp_ilcc_key k = ilcc_key(cfg, lo64(&c->ip6.saddr), lo64(&c->ip6.daddr));
	__u64 loc_d = hi64(&c->ip6.daddr);

	if (cfg->mode != ILNP_MODE_EBPF || (c->ip6.nexthdr != IPPROTO_TCP && c->ip6.nexthdr != IPPROTO_UDP))
		return -1;
	e = bpf_map_lookup_elem(&ilnp_ilcc, &k);
	if (!e || e->nonce_rx_len == 0 || !in_src_loc_known(e, hi64(&c->ip6.saddr)))
		return -1;
	lv = bpf_map_lookup_elem(&ilnp_locals, &loc_d);
	if (!lv || lv->state >= ILNP_LOC_AGED)
		return -1;
	c->dopt_off = ETH_HLEN + IPV6_HLEN;
	c->hlen = 0;
	c->next = c->ip6.nexthdr;
	if (in_rewrite(skb, cfg, c))
		return in_drop(ILNP_R_INGRESS_DROP_ERROR);
	__sync_fetch_and_add(&e->rx_pkts, 1);
	__sync_fetch_and_add(&e->rx_bytes, skb->len - ETH_HLEN);
	in_note_local_rx(lv);
	count(ILNP_R_INGRESS_FAST);
	return TC_ACT_OK;
}
#endif

static __always_inline int in_is_echo_reply(struct __sk_buff *skb, const struct ingress_ctx *c)
{
	__u8 type;

	return bpf_skb_load_bytes(skb, c->dopt_off + c->hlen, &type, 1) == 0 && type == ICMPV6_ECHO_REPLY;
}

/* the v4 path: its checks, decapsulation and delivery */
#include "ilnp_ingress_v4.h"

SEC("classifier")
int ilnp_ingress(struct __sk_buff *skb)
{
	struct ilnp_cfg *cfg = get_cfg();
	struct ilnp_ilcc_val *e = NULL;
	struct ilnp_local_val *lv;
	struct ingress_ctx c = {};
	struct ilnp_ilcc_key k;
	__u64 nid_d;
	int r, temp = 0;

	if (skb->protocol == bpf_htons(ETH_P_IP))
		return ilnp_in_v4(skb);
	if (!cfg || skb->protocol != bpf_htons(ETH_P_IPV6))
		return TC_ACT_OK;
	if (bpf_skb_load_bytes(skb, ETH_HLEN, &c.ip6, sizeof(c.ip6)) < 0)
		return TC_ACT_OK;
	nid_d = lo64(&c.ip6.daddr);
	if (nid_d != cfg->local_nid) {
		if (!bpf_map_lookup_elem(&ilnp_temp_nids, &nid_d))
			return TC_ACT_OK; /* not for our NID: whatever the kernel does */
		/* a temporary NID's (issue #44 item 2): ILNPv6 with a nonce first goes on
		 * as to the stable NID, for the entry that uses it (in_verify_nid); the
		 * rest is ilnpd's slow path, plain ICMPv6 (ND) the kernel's */
		if (c.ip6.nexthdr == NEXTHDR_ICMPV6 && !in_quotes_ilnp(skb, ETH_HLEN + IPV6_HLEN))
			return TC_ACT_OK;
		if (c.ip6.nexthdr != NEXTHDR_DEST)
			return in_punt(cfg, ILNP_R_INGRESS_PUNT_TEMP_NID);
		temp = 1;
	}
	if (c.ip6.nexthdr == NEXTHDR_ICMPV6)
		return in_quotes_ilnp(skb, ETH_HLEN + IPV6_HLEN) ? in_punt(cfg, ILNP_R_INGRESS_PUNT_ICMP_ERROR)
								  : in_plain(skb, cfg, &c);
#ifdef ILNP_EXP_NONCE_OMITTED
	r = in_nonce_omitted(skb, cfg, &c);
	if (r >= 0)
		return r;
#endif
	/* RFC 8200 lets the nonce's Destination Options header follow a Fragment header
	 * (FreeBSD ILNP6 puts it there, ip6po_dest2), and later fragments carry none:
	 * a known correspondent's fragments go to ilnpd, which checks the first one's
	 * nonce and the others' locators and hands them to the kernel to reassemble */
	k = ilcc_key(cfg, lo64(&c.ip6.saddr), nid_d);
	if (c.ip6.nexthdr == NEXTHDR_FRAGMENT) {
		if (bpf_map_lookup_elem(&ilnp_ilcc, &k))
			return in_punt(cfg, ILNP_R_INGRESS_PUNT_FRAGMENT);
		return in_plain(skb, cfg, &c);
	}
	if (c.ip6.nexthdr != NEXTHDR_DEST)
		return in_plain(skb, cfg, &c);

	c.dopt_off = ETH_HLEN + IPV6_HLEN;
	r = in_parse_opts(skb, &c);
	if (r == OPTS_NOT_ILNP)
		return temp ? in_punt(cfg, ILNP_R_INGRESS_PUNT_TEMP_NID) : in_plain(skb, cfg, &c);
	if (r != OPTS_NONCE)
		return in_opts_refused(cfg, r);
	e = bpf_map_lookup_elem(&ilnp_ilcc, &k);
	/* a temporary NID's packet without an entry: ilnpd's (admission looks up
	 * sockets on the stable NID's address only) */
	if (temp && !e)
		return in_punt(cfg, ILNP_R_INGRESS_PUNT_TEMP_NID);
	/* admission: no state for a new NID unless a socket takes the packet; without
	 * one the stack gets it statelessly and answers as for plain IPv6 (in both
	 * modes, so they behave alike), sent by ilnpd where the hint says */
	if ((cfg->flags & ILNP_CFG_F_ADMIT_SOCKET) && (c.next == IPPROTO_TCP || c.next == IPPROTO_UDP) && !e) {
		if (in_socket_exists(skb, cfg, &c))
			return in_punt(cfg, ILNP_R_INGRESS_ADMIT_SOCKET);
		in_note_answer_hint(skb, &c, k.remote_nid, 0, 0);
		if (in_rewrite(skb, cfg, &c))
			return in_drop(ILNP_R_INGRESS_DROP_ERROR);
		count(ILNP_R_INGRESS_NO_SOCKET);
		return TC_ACT_OK;
	}
	r = in_verify(skb, cfg, &c, e);
	if (!r)
		r = in_verify_nid(cfg, e, nid_d);
	if (r)
		return in_punt(cfg, r);
	__u64 loc_d = hi64(&c.ip6.daddr);
	lv = bpf_map_lookup_elem(&ilnp_locals, &loc_d);
	if (!lv || lv->state >= ILNP_LOC_AGED)
		return in_punt(cfg, ILNP_R_INGRESS_PUNT_DST_LOC);

	if (in_rewrite(skb, cfg, &c))
		return in_drop(ILNP_R_INGRESS_DROP_ERROR);
	__sync_fetch_and_add(&e->rx_pkts, 1);
	__sync_fetch_and_add(&e->rx_bytes, skb->len - ETH_HLEN);
	in_note_local_rx(lv);
	count(ILNP_R_INGRESS_FAST);
	return TC_ACT_OK;
}
