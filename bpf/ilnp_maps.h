/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * The one definition of the BPF map keys, values and reason codes shared by the
 * tc programs (bpf/ilnp_egress.c, bpf/ilnp_ingress.c) and ilnpd.
 *
 * crates/ilnpd/src/bpf/maps.rs mirrors every struct with #[repr(C)]; its test
 * `layout_matches_c_header` compiles a probe against this header and compares
 * every size, offset and reason name, so a change here that is not mirrored
 * there fails `cargo test`.
 *
 * Byte order: prefixes, locators and NIDs are 8 bytes exactly as on the wire
 * (network order) kept in a __u64, so the programs compare them with packet
 * bytes without swapping. Everything else is host order.
 *
 * Every field has a fixed size and every hole is an explicit _pad field, so the
 * layout is the same for clang -target bpf, the host C compiler and rustc.
 */
#ifndef ILNP_MAPS_H
#define ILNP_MAPS_H

#include <linux/types.h>

#define ILNP_MAX_REMOTE_LOCS 8
#define ILNP_NONCE_MAX 12
#define ILNP_OPT_NONCE 0x8b
#define ILNP_LOCALS_MAX 256
/* a v4 path (ilnp_wire::v4path): the locator 0004:ADDR:PORT, ILNPv6 in UDP/IPv4 */
#define ILNP_V4_MARK 0x0004
#define ILNP_V4_OVERHEAD 28 /* IPv4 + UDP headers */
#define ILNP_ILCC_DEFAULT_MAX 65536 /* ilnpd overrides it at load time */

enum ilnp_mode {
	ILNP_MODE_EBPF = 0,      /* the fast path translates established sessions */
	ILNP_MODE_USERSPACE = 1, /* steer only: ilnpd translates everything */
};

/* ilnp_cfg: ARRAY, one entry, key 0 (__u32). Written by ilnpd before attaching. */
struct ilnp_cfg {
	__u64 id_prefix;     /* identifier prefix P: upper 64 bits of identifier addresses (wire order) */
	__u64 local_nid;     /* this node's NID (wire order) */
	__u32 ilnp0_ifindex; /* the TUN; ingress punts are redirected to its egress */
	__u32 mode;          /* enum ilnp_mode */
	__u32 flags;         /* ILNP_CFG_F_* */
	__u16 v4_port;       /* the v4 path's UDP port (network order); 0 = [ipv4] off */
	__u16 _pad;
};

/* ilnp_cfg.flags: admission = "socket" (crates/ilnp-core/src/admission.rs). A
 * TCP/UDP packet with a nonce from a NID without an ilnp_ilcc entry is punted
 * only if a local socket would take it (bpf_sk_lookup_*); otherwise it is passed
 * up in identifier form without state, so the stack answers as plain IPv6 would. */
#define ILNP_CFG_F_ADMIT_SOCKET 1

/* ilnp_ilcc: HASH, key = struct ilnp_ilcc_key: the correspondent's NID and the
 * one of ours it talks to (ilnp-core's IlccKey: a correspondent talking to the
 * stable NID and to a temporary one has two entries, issue #44 item 2). */
struct ilnp_ilcc_key {
	__u64 remote_nid; /* wire order */
	__u64 local_nid;  /* wire order; 0 = the stable one (ilnp_cfg's), else a temporary one */
};

#define ILNP_ILCC_F_NONE 0 /* flags */
#define ILNP_ILCC_F_FULL_CSUM 1 /* the peer's TCP/UDP checksums cover the full addresses
				 * (ChecksumRule::FullAddress): its packets take the slow path */
#define ILNP_ILCC_F_BALANCED 2 /* ilnp_balance holds a table for this peer: the egress
				* programs look it up only then (ilnpd keeps the flag
				* in step with the table: Datapath::set_balance) */

struct ilnp_ilcc_val {
	__u64 local_loc;                         /* source locator to send from (wire order) */
	__u64 remote_loc;                        /* active destination locator (wire order) */
	__u64 remote_locs[ILNP_MAX_REMOTE_LOCS]; /* source locators accepted from the peer */
	__u8 nonce_tx[ILNP_NONCE_MAX];           /* nonce we put on packets to the peer */
	__u8 nonce_tx_len;                       /* 4 or 12; anything else: not ready, punt */
	__u8 nonce_rx_len;                       /* 4 or 12; 0 = peer's nonce not learned yet */
	__u8 n_remote_locs;                      /* valid entries in remote_locs */
	__u8 flags;                              /* ILNP_ILCC_F_* */
	__u8 nonce_rx[ILNP_NONCE_MAX];           /* nonce the peer puts on packets to us */
	__u8 _pad[4];
	/* written by the programs only (__sync_fetch_and_add); ilnpd keeps them on update */
	__u64 tx_pkts;
	__u64 tx_bytes;
	__u64 rx_pkts;
	__u64 rx_bytes;
	/* remote_loc is a v4 path (0004:ADDR:PORT): where its packets go, the address
	 * and port a NAT in front of the peer showed us, else the locator's own
	 * (ilnp-core's RemoteLocator::v4_destination; network order). The ingress
	 * program takes the peer's v4-path packets only from there. Port 0 = none. */
	__u8 remote_v4_addr[4];
	__u16 remote_v4_port;
	__u8 _pad2[2];
	/* which of our NIDs the peer talks to: the key's local_nid again (ilnp-core's
	 * IlccEntry::local_nid; 0 = the stable one). The programs check that the two
	 * agree (in_verify_nid, eg_checks): a mismatch is ilnpd's to judge. */
	__u64 local_nid;
};

enum ilnp_loc_state {
	ILNP_LOC_VALID = 0,
	ILNP_LOC_ACTIVE = 1,
	ILNP_LOC_AGED = 2,   /* and above: not usable by the fast path */
	ILNP_LOC_EXPIRED = 3,
};

/*
 * ilnp_locals: HASH, key = local locator (__u64, wire order).
 * router: the default router behind `ifindex` (its address as in the kernel's
 * default route, usually link-local), all zero if that uplink has none. The
 * egress program sends a packet from this locator through `ifindex` via this
 * router when the main table would send it out of another uplink.
 */
struct ilnp_local_val {
	__u32 state;      /* enum ilnp_loc_state */
	__u32 ifindex;    /* uplink carrying the locator */
	__u8 router[16];  /* IPv6 address, network order; :: = no router */
	/* written by the ingress program only: bpf_ktime_get_coarse_ns() (CLOCK_MONOTONIC
	 * as of the last tick, so up to one tick behind it) of the last packet it
	 * delivered on this locator, refreshed when older than ILNP_LOCAL_RX_GRAIN_NS;
	 * 0 = none. ilnpd keeps it on update and feeds it to the soft-handoff quiet
	 * period. */
	__u64 last_rx_ns;
};

/*
 * ilnp_balance: HASH, key = struct ilnp_ilcc_key (the entry's), same bound as
 * ilnp_ilcc. Present only for correspondents whose balancing policy is not
 * failover (ilnp-core's balance.rs builds the table; without an entry the
 * ILCC's local_loc/remote_loc are used), and looked up only for an ILCC entry
 * with ILNP_ILCC_F_BALANCED, which ilnpd sets once the table is written and
 * clears before removing it (either alone leaves the ILCC's pair). The egress
 * program takes the pair slots[i] with i = seq++ % n_slots (per-packet: one
 * shared atomic, so the split is exact across CPUs) or
 * i = flow_hash(flow_seed, NIDs, proto, ports) % n_slots (per-flow). O(1) per
 * packet whatever the number of locators.
 */
enum ilnp_policy {
	ILNP_POLICY_FAILOVER = 0,
	ILNP_POLICY_PER_FLOW = 1,
	ILNP_POLICY_PER_PACKET = 2,
};

#define ILNP_BAL_MAX_PAIRS 16
#define ILNP_BAL_SLOTS 256

struct ilnp_bal_pair {
	__u64 local_loc;  /* source locator (wire order) */
	__u64 remote_loc; /* destination locator (wire order) */
};

struct ilnp_balance_val {
	__u64 seq;       /* per-packet position; the program increments it, ilnpd keeps it on update */
	__u64 flow_seed; /* per-flow hash seed (stable across restarts) */
	__u32 policy;    /* enum ilnp_policy */
	__u16 n_slots;   /* used entries of slots (1..ILNP_BAL_SLOTS) */
	__u8 n_pairs;    /* used entries of pairs */
	__u8 _pad;
	struct ilnp_bal_pair pairs[ILNP_BAL_MAX_PAIRS];
	__u8 slots[ILNP_BAL_SLOTS]; /* indices into pairs */
};

/* a locator's last_rx_ns is rewritten at most this often (keeps the store, and
 * its cache-line traffic between CPUs, off most packets) */
#define ILNP_LOCAL_RX_GRAIN_NS 10000000ULL

/*
 * ilnp_plain_peers: HASH, key = remote NID (__u64, wire order). A correspondent
 * that does not speak ILNPv6 (ilnp-core's fallback) or is being probed: its
 * plain packets (no nonce) from remote_loc:NID to our NID are punted to ilnpd,
 * which translates them to identifier form. No ILCC entry exists for it, so our
 * packets to it miss the egress program and reach ilnpd too (slow path only).
 */
#define ILNP_PLAIN_PEERS_MAX 4096

/*
 * ilnp_temp_nids: HASH, key = one of our temporary NIDs (__u64, wire order; issue
 * #44 item 2, [privacy]), value unused (__u8). The ingress program takes ILNPv6 to
 * one as to the stable NID, and delivers it itself only for a correspondent whose
 * ILCC entry uses that NID (ilnp_ilcc_val.local_nid); the rest (no entry, another
 * NID's entry: ingress_punt_other_nid, plain packets, ICMPv6 errors quoting ours)
 * goes to ilnpd (ingress_punt_temp_nid), plain ICMPv6 such as Neighbour Discovery
 * to the kernel as for the stable NID.
 */
#define ILNP_TEMP_NIDS_MAX 64

struct ilnp_plain_peer_val {
	__u64 remote_loc; /* the peer's locator (wire order) */
};

/*
 * ilnp_answer_hints: LRU_HASH, key = remote NID (__u64, wire order), at most
 * ILNP_ANSWER_HINTS_MAX entries (fixed: memory bounded by this constant, never by
 * the sender). admission = socket: the ingress program writes one when it passes a
 * TCP/UDP packet from a NID without an ILCC entry up with no socket to take it
 * (ingress_no_socket). The stack's answer (RST, port unreachable) reaches ilnpd
 * without an entry; ilnp-core sends it to remote_loc, from local_loc, under its
 * global budget (admission.rs). A flood overwrites the oldest hints, never state.
 */
#define ILNP_ANSWER_HINTS_MAX 4096

/*
 * ilnp_uplinks: HASH, key = uplink ifindex (__u32), value __u32 ILNP_UPLINK_F_*.
 * Written by ilnpd when it attaches the ingress program (Datapath::attach_uplink).
 * ILNP_UPLINK_F_NO_IPV6: the uplink has IPv6 disabled (net.ipv6.conf.<dev>.
 * disable_ipv6 = 1, an IPv4-only uplink): the kernel would drop a v4-path packet
 * the ingress program decapsulated there (Ip6InDiscards), so it is redirected to
 * ilnp0's ingress instead, whose IPv6 is on (ingress_v4_via_ilnp0).
 */
#define ILNP_UPLINKS_MAX 256
#define ILNP_UPLINK_F_NO_IPV6 1

/*
 * ilnp_hint_tat: PERCPU_ARRAY, one __u64 (key 0): the hint writes' budget, a GCRA
 * (virtual scheduling) per CPU: a hint is written only while its theoretical
 * arrival time is at most ILNP_HINT_BURST intervals ahead of now. Under a flood the
 * LRU update (the costly part: ~0.2-0.4 us, an eviction per write) stops after the
 * burst, and the path costs what it did without hints; the core could not send more
 * refusals than its budget anyway (default 100/s), nor the kernel more port
 * unreachables than net.ipv6.icmp ratelimits (1000/s).
 */
#define ILNP_HINT_INTERVAL_NS 1000000ULL /* 1000 hints/s per CPU */
#define ILNP_HINT_BURST 64

struct ilnp_answer_hint_val {
	__u64 remote_loc;           /* source locator of the packet (wire order) */
	__u64 local_loc;            /* our locator it arrived on (wire order) */
	__u64 ts_ns;                /* bpf_ktime_get_ns() (CLOCK_MONOTONIC) at arrival */
	__u8 nonce[ILNP_NONCE_MAX]; /* the peer's nonce */
	__u8 nonce_len;             /* 4 or 12 */
	__u8 _pad[3];
	/* a v4 path's packet (ilnp_in_v4): the outer IPv4 source address and UDP port
	 * it came from (network order), where the answer goes; port 0 = IPv6 */
	__u8 remote_v4_addr[4];
	__u16 remote_v4_port;
	__u8 _pad2[2];
};

/*
 * ilnp_nh_cache: LRU_HASH, key struct ilnp_nh_key, at most ILNP_NH_CACHE_MAX
 * entries (fixed). The egress program's main-table answer (bpf_fib_lookup's
 * result) for the wire addresses local_loc:our NID -> remote_loc:peer_nid and
 * the upper-layer protocol: everything the lookup depends on that varies per
 * packet (the input ifindex is always ilnp0, flow label, mark and tos are 0).
 * The keys come from ilnp_ilcc / ilnp_balance entries (at most 1 + 16 pairs per
 * correspondent, 3 protocols), never from packet fields alone, so a sender
 * cannot add keys beyond the ILCC's own bound; the LRU bound keeps memory fixed
 * whatever that bound is (an eviction costs one lookup, never correctness).
 *
 * An entry is used only while its gen equals ilnp_route_gen[0] and it is
 * younger than ILNP_NH_CACHE_TTL_NS; else the program does the lookup and
 * refills it. ilnpd writes a new generation (never 0) on every rtnetlink link,
 * neighbour, IPv6 address, route, rule, netconf and nexthop event (and on a
 * netlink overrun), from a thread of its own (ilnpd::bpf::RouteWatch); 0 = no
 * watcher = cache off (the initial value, and ilnpd's last write on exit). The
 * TTL bounds the staleness if ilnpd dies without that last write.
 * The value repeats the key: a reader of an LRU entry recycled under it (the
 * map reuses preallocated elements) sees a mismatch and does the lookup.
 */
#define ILNP_NH_CACHE_MAX 16384
#define ILNP_NH_CACHE_TTL_NS 1000000000ULL

struct ilnp_nh_key {
	__u64 local_loc;  /* wire order */
	__u64 remote_loc; /* wire order */
	__u64 peer_nid;   /* wire order */
	__u8 proto;       /* upper layer: TCP, UDP, ICMPv6 */
	__u8 _pad[7];
};

struct ilnp_nh_val {
	struct ilnp_nh_key key; /* the entry's own key (see above) */
	__u64 gen;              /* ilnp_route_gen[0] when it was filled */
	__u64 ts_ns;            /* bpf_ktime_get_coarse_ns() when it was filled */
	__u32 rc;               /* bpf_fib_lookup's return: SUCCESS, NO_NEIGH, NOT_FWDED, UNREACHABLE */
	__u32 ifindex;          /* its output interface */
	__u32 mtu;              /* SUCCESS: that interface's MTU (mtu_result) */
	__u32 _pad;
	__u8 nh[16];            /* its next hop (the router, or the destination on link) */
	__u8 smac[6];           /* SUCCESS: the output interface's address, */
	__u8 dmac[6];           /* and the next hop's (its neighbour entry then): */
	__u8 _pad2[4];          /* the Ethernet header bpf/ilnp_route.c writes */
};

/* ilnp_route_gen: ARRAY, one __u64 (key 0): see ilnp_nh_cache. */

/* RFC 6069 hints (bpf/ilnp_sockops.c). Not pinned: a restarted ilnpd starts them
 * empty (only hints are lost: the next retransmission timeout records them again).
 *
 * ilnp_tcp_cfg: ARRAY, one entry, key 0 (__u32), written by ilnpd before attaching;
 * netns_cookie 0 = off (the program does nothing). */
struct ilnp_tcp_cfg {
	__u64 netns_cookie; /* SO_NETNS_COOKIE of ilnpd's namespace: only its connections */
};

/* ilnp_tcp_rto: LRU_HASH, key = a TCP connection to an identifier address (local
 * and remote identifier addresses as in the socket, ports in host order), value =
 * its last retransmission timeout. */
#define ILNP_TCP_RTO_MAX 4096

struct ilnp_tcp_key {
	__u8 local[16];
	__u8 remote[16];
	__u16 lport;
	__u16 rport;
	__u32 _pad;
};

struct ilnp_tcp_rto {
	__u64 ts_ns;       /* bpf_ktime_get_ns() of the timeout (CLOCK_MONOTONIC) */
	__u32 snd_una;     /* the oldest unacknowledged sequence number then */
	__u32 retransmits; /* icsk_retransmits before this timeout (the backoff so far) */
};


/*
 * ilnp_stats: PERCPU_ARRAY of __u64 indexed by reason. One X-macro list gives
 * the enum and the names ilnpd reports (the layout test checks both).
 * Punts go to ilnpd through the ilnp0 TUN; drops are TC_ACT_SHOT.
 */
#define ILNP_REASONS(X)                                                                          \
	X(EGRESS_FAST, "egress_fast")                       /* translated, redirected to an uplink */   \
	X(EGRESS_NEIGH, "egress_neigh")                     /* ... and the next hop was unresolved */   \
	X(EGRESS_PUNT_USERSPACE, "egress_punt_userspace")   /* mode = userspace */                      \
	X(EGRESS_PUNT_PROTO, "egress_punt_proto")           /* not TCP/UDP/ESP/ICMPv6 echo after IPv6 */\
	X(EGRESS_PUNT_ICMP_ERROR, "egress_punt_icmp_error") /* ICMPv6 error quoting identifier form */  \
	X(EGRESS_PUNT_SRC, "egress_punt_src")               /* source is not the identifier address */ \
	                                                    /* of the NID the peer's entry uses */       \
	X(EGRESS_PUNT_MISS, "egress_punt_miss")             /* no ILCC entry or no tx nonce */          \
	X(EGRESS_PUNT_LOCAL_LOC, "egress_punt_local_loc")   /* source locator not ours or aged */       \
	X(EGRESS_PUNT_FIB, "egress_punt_fib")               /* FIB lookup failed (route, MTU, ...) */   \
	X(EGRESS_DROP_ERROR, "egress_drop_error")           /* a helper failed mid-rewrite */           \
	X(EGRESS_VIA_ROUTER, "egress_via_router")           /* main route left by another uplink: */    \
	                                                    /* sent via the locator's uplink router */  \
	X(EGRESS_FIB_FALLBACK, "egress_fib_fallback")       /* ... and that uplink has no router: */    \
	                                                    /* sent where the main route says */        \
	X(EGRESS_BALANCED, "egress_balanced")               /* pair taken from ilnp_balance */          \
	X(EGRESS_NH_HIT, "egress_nh_hit")                   /* route from ilnp_nh_cache */              \
	X(EGRESS_NH_MISS, "egress_nh_miss")                 /* cache on, entry absent/stale: looked up */ \
	X(INGRESS_FAST, "ingress_fast")                     /* translated, passed up */                 \
	X(INGRESS_PUNT_USERSPACE, "ingress_punt_userspace")                                             \
	X(INGRESS_PUNT_LU, "ingress_punt_lu")               /* ICMPv6 Locator Update */                 \
	X(INGRESS_PUNT_ICMP_ERROR, "ingress_punt_icmp_error") /* ICMPv6 error about an ILNP packet */   \
	X(INGRESS_PUNT_PROTO, "ingress_punt_proto")         /* other upper layer (incl. No Next Hdr) */ \
	X(INGRESS_PUNT_OPTIONS, "ingress_punt_options")     /* other options, nonce not first, big */   \
	X(INGRESS_PUNT_MISS, "ingress_punt_miss")           /* no ILCC entry for the source NID */      \
	X(INGRESS_PUNT_NONCE_UNKNOWN, "ingress_punt_nonce_unknown") /* rx nonce not learned */         \
	X(INGRESS_PUNT_BAD_NONCE, "ingress_punt_bad_nonce") /* nonce differs: ilnpd judges, counts */   \
	X(INGRESS_PUNT_SRC_LOC, "ingress_punt_src_loc")     /* source locator not in the ILCC */        \
	X(INGRESS_PUNT_DST_LOC, "ingress_punt_dst_loc")     /* destination locator not ours or aged */  \
	X(INGRESS_DROP_MULTI_NONCE, "ingress_drop_multi_nonce") /* RFC 6744 §2: two nonce options */   \
	X(INGRESS_DROP_MALFORMED, "ingress_drop_malformed") /* truncated option, bad nonce length */    \
	X(INGRESS_DROP_ERROR, "ingress_drop_error")         /* a helper failed mid-rewrite */          \
	X(INGRESS_PUNT_PLAIN_PEER, "ingress_punt_plain_peer") /* plain, from a fallback peer */ \
	X(INGRESS_ADMIT_SOCKET, "ingress_admit_socket")     /* unknown NID, a socket takes it: punt */  \
	X(INGRESS_NO_SOCKET, "ingress_no_socket")           /* unknown NID, no socket: passed up */     \
	                                                    /* statelessly, no ILCC state */            \
	X(INGRESS_PUNT_FRAGMENT, "ingress_punt_fragment")   /* Fragment header first, known NID: */     \
	                                                    /* a nonce after it (FreeBSD), ilnpd's */   \
	X(INGRESS_DROP_NONCE_OVERRUN, "ingress_drop_nonce_overrun") /* nonce runs past its header */ \
	X(EGRESS_PUNT_CSUM_RULE, "egress_punt_csum_rule")   /* full-address checksum peer: ilnpd */   \
	X(INGRESS_PUNT_CSUM_RULE, "ingress_punt_csum_rule") /* ... translates its packets */ \
	X(EGRESS_PUNT_V4, "egress_punt_v4")                 /* a v4 path the fast path cannot send: */  \
	                                                    /* no v4 destination, mixed families */     \
	X(EGRESS_V4, "egress_v4")                           /* fast, in UDP/IPv4 (a v4 path) */         \
	X(EGRESS_PUNT_V4_MTU, "egress_punt_v4_mtu")         /* v4 path, too big for the uplink: */      \
	                                                    /* ilnpd's socket fragments it */           \
	X(INGRESS_V4, "ingress_v4")                         /* fast, out of UDP/IPv4 (a v4 path) */     \
	X(INGRESS_PUNT_V4_PATH, "ingress_punt_v4_path")     /* from another address:port than the */    \
	                                                    /* ILCC's (NAT rebinding): ilnpd checks */  \
	X(INGRESS_PUNT_V4_NO_DECAP, "ingress_punt_v4_no_decap") /* GSO, kernel < 6.3: cannot decapsulate */ \
	X(INGRESS_PUNT_V4_PLAIN, "ingress_punt_v4_plain")   /* v4 path, no nonce first (plain, */      \
	                                                    /* fragment, ICMPv6 error): ilnpd */       \
	X(EGRESS_ROUTE_XMIT, "egress_route_xmit")           /* translated at the route (ilnp_route.c) */ \
	                                                    /* and sent to the uplink: one transmit */ \
	X(EGRESS_ROUTE_PASS_GSO, "egress_route_pass_gso")   /* a GSO packet: left to ilnp_egress */     \
	X(EGRESS_ROUTE_PASS_NH, "egress_route_pass_nh")     /* no fresh next hop with its addresses */  \
	                                                    /* in ilnp_nh_cache: left to ilnp_egress */ \
	X(INGRESS_V4_ADMIT_SOCKET, "ingress_v4_admit_socket") /* v4 path, unknown NID, a socket */     \
	                                                    /* takes it: the datagram to ilnpd */       \
	X(INGRESS_V4_NO_SOCKET, "ingress_v4_no_socket")     /* v4 path, unknown NID, no socket: */      \
	                                                    /* out of UDP/IPv4, passed up statelessly */ \
	X(INGRESS_V4_VIA_ILNP0, "ingress_v4_via_ilnp0")     /* decapsulated on an uplink with IPv6 */   \
	                                                    /* disabled: delivered through ilnp0 */     \
	X(INGRESS_PUNT_V4_ECHO_REPLY, "ingress_punt_v4_echo_reply") /* v4 path: may answer a */       \
	                                                    /* rebinding validation: ilnpd's */         \
	X(INGRESS_PUNT_TEMP_NID, "ingress_punt_temp_nid")   /* to a temporary NID, not for the fast */ \
	                                                    /* path (no entry, plain): ilnpd's */       \
	X(INGRESS_PUNT_OTHER_NID, "ingress_punt_other_nid") /* to one of our NIDs the peer's entry */   \
	                                                    /* does not use: ilnpd's (it drops it) */

#define ILNP_REASON_ENUM(id, name) ILNP_R_##id,
enum ilnp_reason {
	ILNP_REASONS(ILNP_REASON_ENUM)
	ILNP_R_MAX,
};
#undef ILNP_REASON_ENUM

_Static_assert(sizeof(struct ilnp_cfg) == 32, "ilnp_cfg layout");
_Static_assert(sizeof(struct ilnp_ilcc_val) == 160, "ilnp_ilcc_val layout");
_Static_assert(__builtin_offsetof(struct ilnp_ilcc_val, local_nid) == 152, "ilnp_ilcc_val.local_nid");
_Static_assert(__builtin_offsetof(struct ilnp_ilcc_val, remote_v4_addr) == 144, "ilnp_ilcc_val.remote_v4_addr");
_Static_assert(__builtin_offsetof(struct ilnp_ilcc_val, nonce_tx) == 80, "ilnp_ilcc_val.nonce_tx");
_Static_assert(__builtin_offsetof(struct ilnp_ilcc_val, nonce_rx) == 96, "ilnp_ilcc_val.nonce_rx");
_Static_assert(__builtin_offsetof(struct ilnp_ilcc_val, tx_pkts) == 112, "ilnp_ilcc_val counters 8-aligned");
_Static_assert(sizeof(struct ilnp_balance_val) == 536, "ilnp_balance_val layout");
_Static_assert(__builtin_offsetof(struct ilnp_balance_val, pairs) == 24, "ilnp_balance_val.pairs");
_Static_assert(sizeof(struct ilnp_local_val) == 32, "ilnp_local_val layout");
_Static_assert(sizeof(struct ilnp_plain_peer_val) == 8, "ilnp_plain_peer_val layout");
_Static_assert(sizeof(struct ilnp_answer_hint_val) == 48, "ilnp_answer_hint_val layout");
_Static_assert(sizeof(struct ilnp_nh_key) == 32, "ilnp_nh_key layout");
_Static_assert(sizeof(struct ilnp_nh_val) == 96, "ilnp_nh_val layout");
_Static_assert(__builtin_offsetof(struct ilnp_local_val, last_rx_ns) == 24, "ilnp_local_val.last_rx_ns");

#endif
