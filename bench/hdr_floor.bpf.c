/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * bench/datapath.py's "header floor" (issue #14): on the sender's uplink (tc egress, Ethernet),
 * every UDP packet to FLOOR_DST (the bench's third MN address, plain IPv6) gets a 16-byte
 * Destination Options header pushed after its IPv6 header, as ILNPv6's nonce header is, and
 * nothing else: no translation, no map, no second transmit. The receiver's kernel skips the
 * header (one skippable option) and delivers the datagram. Its packet rate against plain IPv6 is
 * the cost of carrying the header itself, the floor of any design that puts a nonce on every
 * packet at the sender's tc egress.
 *
 * Built by bench/datapath.py: clang -O2 -target bpf -DFLOOR_DST_LAST=0x0e -c.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* FLOOR_DST is 2001:db8:b::FLOOR_DST_LAST */
#ifndef FLOOR_DST_LAST
#define FLOOR_DST_LAST 0x0e
#endif
#define DO_LEN 16

SEC("tc")
int hdr_floor(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = data + sizeof(*eth);

	if ((void *)(ip6 + 1) > end || eth->h_proto != bpf_htons(ETH_P_IPV6) || ip6->nexthdr != IPPROTO_UDP)
		return TC_ACT_OK;
	if (ip6->daddr.in6_u.u6_addr32[0] != bpf_htonl(0x20010db8) || ip6->daddr.in6_u.u6_addr32[1] != bpf_htonl(0x000b0000) ||
	    ip6->daddr.in6_u.u6_addr32[2] != 0 || ip6->daddr.in6_u.u6_addr32[3] != bpf_htonl(FLOOR_DST_LAST))
		return TC_ACT_OK;
	__u16 plen = bpf_ntohs(ip6->payload_len);

	if (bpf_skb_adjust_room(skb, DO_LEN, BPF_ADJ_ROOM_NET, BPF_F_ADJ_ROOM_FIXED_GSO))
		return TC_ACT_SHOT;
	/* Next Header UDP, length 1 (16 bytes), one option of 12 bytes of zeros, type 0x1E (RFC 4727's
	 * experimental type; action bits 00: a receiver skips it). Not PadN: Linux rejects more than
	 * 7 bytes of padding (ip6_parse_tlv, Ip6InHdrErrors). The same shape as a 96-bit nonce option. */
	__u8 hdr[DO_LEN] = {IPPROTO_UDP, 1, 0x1e, 12};
	__u8 nh = 60; /* IPPROTO_DSTOPTS */
	__be16 len = bpf_htons(plen + DO_LEN);

	if (bpf_skb_store_bytes(skb, ETH_HLEN + sizeof(struct ipv6hdr), hdr, DO_LEN, 0) ||
	    bpf_skb_store_bytes(skb, ETH_HLEN + offsetof(struct ipv6hdr, nexthdr), &nh, 1, 0) ||
	    bpf_skb_store_bytes(skb, ETH_HLEN + offsetof(struct ipv6hdr, payload_len), &len, 2, 0))
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
