/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * Map definitions and small helpers shared by ilnp_egress.c and ilnp_ingress.c.
 * Both programs are built into one object (ilnp_dp.c) so they share the maps.
 */
#ifndef ILNP_COMMON_H
#define ILNP_COMMON_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "ilnp_maps.h"

#ifndef AF_INET6
#define AF_INET6 10
#endif
#define NEXTHDR_DEST 60
#define NEXTHDR_FRAGMENT 44
#define NEXTHDR_ICMPV6 58
#define ICMPV6_ECHO_REQUEST 128
#define ICMPV6_ECHO_REPLY 129
#define ICMPV6_LOCATOR_UPDATE 156
#define IPV6_HLEN 40
#define IPV4_HLEN 20 /* no options */

/* bpf_skb_adjust_room: the new outer header after a shrink is IPv6 (skb->protocol
 * follows). Linux 6.3; Debian 12's uapi headers (6.1) lack the name, and a 6.1
 * kernel refuses the flag (-EINVAL, the packet untouched). */
#define ILNP_ADJ_ROOM_DECAP_L3_IPV6 (1ULL << 8)

/* ILNP_PIN_MAPS (set by build.rs for the pinned variant): ilnpd pins the maps
 * by name under its pin directory and reuses them after a restart. */
#ifdef ILNP_PIN_MAPS
#define ILNP_PINNING __uint(pinning, LIBBPF_PIN_BY_NAME);
#else
#define ILNP_PINNING
#endif

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ilnp_cfg);
	ILNP_PINNING
} ilnp_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ILNP_ILCC_DEFAULT_MAX);
	__type(key, struct ilnp_ilcc_key);
	__type(value, struct ilnp_ilcc_val);
	ILNP_PINNING
} ilnp_ilcc SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ILNP_LOCALS_MAX);
	__type(key, __u64);
	__type(value, struct ilnp_local_val);
	ILNP_PINNING
} ilnp_locals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ILNP_ILCC_DEFAULT_MAX);
	__type(key, struct ilnp_ilcc_key);
	__type(value, struct ilnp_balance_val);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* 536 B each: only peers that balance use memory */
	ILNP_PINNING
} ilnp_balance SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ILNP_PLAIN_PEERS_MAX);
	__type(key, __u64);
	__type(value, struct ilnp_plain_peer_val);
	ILNP_PINNING
} ilnp_plain_peers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ILNP_TEMP_NIDS_MAX);
	__type(key, __u64);
	__type(value, __u8);
	ILNP_PINNING
} ilnp_temp_nids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ILNP_ANSWER_HINTS_MAX);
	__type(key, __u64);
	__type(value, struct ilnp_answer_hint_val);
	ILNP_PINNING
} ilnp_answer_hints SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
	ILNP_PINNING
} ilnp_hint_tat SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ILNP_UPLINKS_MAX);
	__type(key, __u32);
	__type(value, __u32);
	ILNP_PINNING
} ilnp_uplinks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ILNP_NH_CACHE_MAX);
	__type(key, struct ilnp_nh_key);
	__type(value, struct ilnp_nh_val);
	ILNP_PINNING
} ilnp_nh_cache SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
	ILNP_PINNING
} ilnp_route_gen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ILNP_R_MAX);
	__type(key, __u32);
	__type(value, __u64);
	ILNP_PINNING
} ilnp_stats SEC(".maps");

/* bpf/ilnp_sockops.c: never pinned (see ilnp_maps.h) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ilnp_tcp_cfg);
} ilnp_tcp_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ILNP_TCP_RTO_MAX);
	__type(key, struct ilnp_tcp_key);
	__type(value, struct ilnp_tcp_rto);
} ilnp_tcp_rto SEC(".maps");

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

/* The ILCC key of a packet between the correspondent `remote` and our NID `ours`. */
static __always_inline struct ilnp_ilcc_key ilcc_key(const struct ilnp_cfg *cfg, __u64 remote, __u64 ours)
{
	struct ilnp_ilcc_key k = { .remote_nid = remote, .local_nid = ours == cfg->local_nid ? 0 : ours };

	return k;
}

/* The NID of ours a correspondent's entry uses (ilnp_ilcc_val.local_nid; 0 = the stable one). */
static __always_inline __u64 ilcc_local_nid(const struct ilnp_cfg *cfg, const struct ilnp_ilcc_val *e)
{
	return e->local_nid ? e->local_nid : cfg->local_nid;
}

/* The 64-bit halves of an IPv6 address, as stored bytes (wire order). */
static __always_inline __u64 hi64(const struct in6_addr *a)
{
	return *(const __u64 *)&a->s6_addr[0];
}

static __always_inline __u64 lo64(const struct in6_addr *a)
{
	return *(const __u64 *)&a->s6_addr[8];
}

static __always_inline void set_hi64(struct in6_addr *a, __u64 v)
{
	*(__u64 *)&a->s6_addr[0] = v;
}

/* A v4 path: the locator 0004:ADDR:PORT (ilnp_wire::v4path), its address and
 * port as they are on the wire (network order). */
static __always_inline int is_v4_loc(__u64 loc)
{
	return (loc & 0xffff) == bpf_htons(ILNP_V4_MARK);
}

static __always_inline __u32 v4_loc_addr(__u64 loc)
{
	return (__u32)(loc >> 16); /* bytes 2-5 of the stored locator */
}

static __always_inline __u16 v4_loc_port(__u64 loc)
{
	return (__u16)(loc >> 48); /* bytes 6-7 */
}

/*
 * The DestOpts header with our nonce that goes right after the IPv6 header: 16
 * bytes for either nonce length (ilnp_wire::destopts), a 32-bit nonce followed
 * by one filler option (ILNP_OPT_FILLER, 6 zero bytes), not PadN: Linux drops a
 * header with more than 7 bytes of padding in a row (ip6_parse_tlv). Linux
 * routers read header byte 12 as the TCP data offset of a forwarded GSO packet
 * (ip6_forward -> skb_gso_validate_network_len -> tcp_hdrlen); an 8-byte header
 * would put the TCP sequence number's top byte there and have every GSO packet
 * in 5/16 of the sequence space answered with Packet Too Big. Byte 12 here is a
 * zero of the filler or nonce byte 8 (top bit clear: ilnp-core).
 * tests/test_gso_exthdr.py.
 */
#define ILNP_NONCE_HLEN 16
/* RFC 4727's experimental option type, action bits 00: every receiver skips it;
 * read as padding (ilnp_wire::destopts::OPT_FILLER) */
#define ILNP_OPT_FILLER 0x1e

/* Offset of the checksum inside the upper-layer header; -1: not handled. */
static __always_inline int l4_csum_off(__u8 proto)
{
	switch (proto) {
	case IPPROTO_TCP:
		return 16;
	case IPPROTO_UDP:
		return 6;
	case NEXTHDR_ICMPV6:
		return 2;
	}
	return -1;
}

/*
 * bpf_csum_diff() of the 16 bytes (from_s, from_d) -> (to_s, to_d), in ALU
 * instructions instead of a helper call (≈ 30 ns a packet on the test machine,
 * docs/benchmarks.md § The programs' time per packet): the 32-bit words of
 * `to` and the complements of those of `from`, as the helper reads them from
 * memory (native order), summed and folded to 32 bits with end-around carry.
 * Not always the helper's bits (kernels differ in how far they fold), but the
 * same ones'-complement sum, which is all bpf_l4_csum_replace() uses.
 */
static __always_inline __u32 csum_diff_halves(__u64 from_s, __u64 from_d, __u64 to_s, __u64 to_d)
{
	__u64 s = (to_s & 0xffffffff) + (to_s >> 32) + (to_d & 0xffffffff) + (to_d >> 32);

	s += (~from_s & 0xffffffff) + (~from_s >> 32) + (~from_d & 0xffffffff) + (~from_d >> 32);
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffffffff) + (s >> 32);
	return (__u32)s;
}

/*
 * Adjust the upper-layer checksum at l4_off for a pseudo-header whose upper
 * address halves change from (from_s, from_d) to (to_s, to_d). The lower halves
 * (the NIDs) and the upper-layer length never change.
 *   TCP/UDP: wire pseudo-header has the locators zeroed (RFC 6744 §3), so the
 *            change is P,P <-> 0,0: one constant per direction.
 *   ICMPv6:  full addresses (RFC 6741 §4.3): P,P <-> locators.
 *   ESP:     none (RFC 4303): nothing to adjust (AH is never translated here).
 * BPF_F_PSEUDO_HDR makes this right for CHECKSUM_PARTIAL (GSO, offloads): the
 * kernel then adjusts the seeded pseudo-header sum instead of the final sum.
 * No BPF_F_IPV6: the callers store the address bytes with
 * BPF_F_RECOMPUTE_CSUM, so skb->csum (CHECKSUM_COMPLETE) must follow the change
 * of the checksum field too, which is what the helper does without that flag.
 */
static __always_inline int fix_l4_csum(struct __sk_buff *skb, __u32 l4_off, __u8 proto, __u64 from_s,
				       __u64 from_d, __u64 to_s, __u64 to_d)
{
	int off = l4_csum_off(proto);
	__u64 flags = BPF_F_PSEUDO_HDR;

	if (proto == IPPROTO_ESP)
		return 0; /* RFC 4303: no checksum over the addresses; the inner one is the
			   * host's, over the identifier addresses, before encryption */
	if (off < 0)
		return -1;
	if (proto == IPPROTO_UDP)
		flags |= BPF_F_MARK_MANGLED_0;
	return bpf_l4_csum_replace(skb, l4_off + off, 0, csum_diff_halves(from_s, from_d, to_s, to_d), flags);
}

#endif
