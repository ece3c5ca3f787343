/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * bench/lwt_probe.py's prototype of issue #27 item 1 (a): translation at the route. An LWT `xmit`
 * program on the route of one MN address (bench/lwt_probe.py's LWT_MN/128) does, per packet, the
 * work ilnp_egress does on ilnp0 minus its map lookups: the destination's upper 64 bits are
 * written with the peer's locator, with the transport checksum adjusted (the locator is the
 * address's own /64, so the socket's replies still match: the same work, a result the application
 * and the receiver accept without a reverse translation), the 16-byte Destination Options header
 * goes in after the IPv6 header, and the Ethernet header is written from the next hop's address
 * given at build time. Then `bpf_redirect` to the uplink: the packet is transmitted once, on the
 * uplink. UDP and TCP without GSO (iperf3's control connection is TCP); a GSO packet leaves as
 * routed, untouched.
 *
 * The LWT xmit helper set has no bpf_skb_adjust_room: the room is made at the head
 * (bpf_skb_change_head, 16 + 14 bytes) and the IPv6 header moved forward into it. That leaves the
 * skb's network header offset where it was, 16 bytes into the packet's new IPv6 header, which is
 * why this is a probe and not a design: BPF_LWT_REROUTE (ipv6_hdr() for the route lookup) and
 * GSO (segmentation from the stale mac_len) would read the wrong bytes. See docs/benchmarks.md.
 *
 * Built by bench/lwt_probe.py: clang -O2 -target bpf -DUPLINK_IFINDEX=.. -DNH_MAC=.. -DOWN_MAC=.. -c.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#ifndef UPLINK_IFINDEX
#error "UPLINK_IFINDEX, NH_MAC and OWN_MAC come from bench/lwt_probe.py"
#endif
/* the locator written into the destination: 2001:db8:b::/64, MN's */
#define LOC_HI0 0x20010db8
#define LOC_HI1 0x000b0000
#define DO_LEN 16

SEC("lwt_xmit")
int lwt_probe(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ipv6hdr *ip6 = data;

	if ((void *)(ip6 + 1) > end || ip6->version != 6 || skb->gso_segs > 1 ||
	    (ip6->nexthdr != IPPROTO_UDP && ip6->nexthdr != IPPROTO_TCP))
		return BPF_OK;
	__u8 proto = ip6->nexthdr;
	__u32 csum_off = sizeof(*ip6) + (proto == IPPROTO_UDP ? offsetof(struct udphdr, check) : 16);

	/* translation: upper 64 bits of the destination, transport checksum (pseudo-header) adjusted */
	__be32 old[2] = {ip6->daddr.in6_u.u6_addr32[0], ip6->daddr.in6_u.u6_addr32[1]};
	__be32 loc[2] = {bpf_htonl(LOC_HI0), bpf_htonl(LOC_HI1)};
	__u16 plen = bpf_ntohs(ip6->payload_len);
	__s64 diff = bpf_csum_diff(old, sizeof(old), loc, sizeof(loc), 0);

	if (diff < 0 ||
	    bpf_l4_csum_replace(skb, csum_off, 0, diff,
				BPF_F_PSEUDO_HDR | BPF_F_MARK_MANGLED_0) ||
	    bpf_skb_store_bytes(skb, offsetof(struct ipv6hdr, daddr), loc, sizeof(loc), 0))
		return BPF_DROP;

	/* room for the Ethernet header and the nonce header at the head; IPv6 header moved up */
	struct ipv6hdr hdr;

	if (bpf_skb_load_bytes(skb, 0, &hdr, sizeof(hdr)) || bpf_skb_change_head(skb, ETH_HLEN + DO_LEN, 0))
		return BPF_DROP;
	hdr.nexthdr = 60; /* IPPROTO_DSTOPTS */
	hdr.payload_len = bpf_htons(plen + DO_LEN);
	/* Next Header the transport, length 1 (16 bytes), one skippable option of 12 bytes (as
	 * hdr_floor.bpf.c) */
	__u8 dopt[DO_LEN] = {proto, 1, 0x1e, 12};
	struct ethhdr eth = {.h_dest = {NH_MAC}, .h_source = {OWN_MAC}, .h_proto = bpf_htons(ETH_P_IPV6)};

	if (bpf_skb_store_bytes(skb, 0, &eth, sizeof(eth), 0) ||
	    bpf_skb_store_bytes(skb, ETH_HLEN, &hdr, sizeof(hdr), 0) ||
	    bpf_skb_store_bytes(skb, ETH_HLEN + sizeof(hdr), dopt, DO_LEN, 0))
		return BPF_DROP;
	return bpf_redirect(UPLINK_IFINDEX, 0);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
