/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * The one definition of the BPF map layouts shared by the tc programs and ilnpd.
 * crates/ilnpd/src/bpf.rs mirrors these structs with #[repr(C)]; the test
 * `bpf_layout_matches_c_header` compiles this header and compares every offset.
 *
 * All addresses, locators and NIDs are stored as they appear on the wire
 * (network byte order), so the programs compare them with packet bytes directly.
 */
#ifndef ILNP_MAPS_H
#define ILNP_MAPS_H

#include <linux/types.h>

#define ILNP_MAX_REMOTE_LOCS 8
#define ILNP_NONCE_MAX 12
#define ILNP_OPT_NONCE 0x8b

enum ilnp_mode {
	ILNP_MODE_EBPF = 0,      /* fast path translates established sessions */
	ILNP_MODE_USERSPACE = 1, /* steer only: ilnpd translates everything */
};

/* ilnp_cfg[0] */
struct ilnp_cfg {
	__u64 id_prefix;      /* upper 64 bits of identifier addresses */
	__u64 local_nid;
	__u32 ilnp0_ifindex;
	__u32 mode;           /* enum ilnp_mode */
};

/* ilnp_ilcc: key = remote NID (8 bytes as on the wire) */
struct ilnp_ilcc_val {
	__u64 local_loc;                           /* source locator to send from */
	__u64 remote_loc;                          /* destination locator to send to */
	__u64 remote_locs[ILNP_MAX_REMOTE_LOCS];   /* accepted source locators */
	__u8 nonce_tx[ILNP_NONCE_MAX];
	__u8 nonce_rx[ILNP_NONCE_MAX];
	__u8 nonce_tx_len;                         /* 4 or 12 */
	__u8 nonce_rx_len;                         /* 0 = not learned yet */
	__u8 n_remote_locs;
	__u8 flags;
	__u32 _pad;
	__u64 tx_pkts;
	__u64 tx_bytes;
	__u64 rx_pkts;
	__u64 rx_bytes;
};

enum ilnp_loc_state {
	ILNP_LOC_VALID = 0,
	ILNP_LOC_ACTIVE = 1,
	ILNP_LOC_AGED = 2,
	ILNP_LOC_EXPIRED = 3,
};

/* ilnp_locals: key = local locator (8 bytes as on the wire) */
struct ilnp_local_val {
	__u32 state;   /* enum ilnp_loc_state */
	__u32 ifindex;
};

/* ilnp_stats: per-CPU counter per reason. Names in crates/ilnpd/src/bpf.rs REASONS. */
enum ilnp_reason {
	ILNP_R_EGRESS_FAST = 0,     /* translated and redirected by the fast path */
	ILNP_R_EGRESS_MISS,         /* no ILCC entry: to the daemon */
	ILNP_R_EGRESS_PUNT,         /* userspace mode or unsupported protocol: to the daemon */
	ILNP_R_EGRESS_FIB_FAIL,     /* source locator not usable here: to the daemon */
	ILNP_R_EGRESS_ERROR,        /* a helper failed: dropped */
	ILNP_R_EGRESS_NEIGH,        /* next hop not resolved yet: to the daemon (its send resolves it) */
	ILNP_R_EGRESS_NO_ROUTE,     /* no route to the destination locator: to the daemon */
	ILNP_R_INGRESS_FAST,        /* translated and passed up by the fast path */
	ILNP_R_PUNT_MISS,           /* unknown correspondent */
	ILNP_R_PUNT_LU,             /* Locator Update */
	ILNP_R_PUNT_NONCE_UNKNOWN,  /* peer's nonce not learned yet */
	ILNP_R_PUNT_SRC_LOC,        /* source locator not in the ILCC */
	ILNP_R_PUNT_DST_LOC,        /* destination locator not (or no longer) ours */
	ILNP_R_PUNT_ICMP_ERROR,     /* ICMPv6 error quoting an ILNP packet */
	ILNP_R_PUNT_OTHER,          /* userspace mode, other options, other protocols */
	ILNP_R_DROP_BAD_NONCE,      /* wrong nonce from a known correspondent */
	ILNP_R_DROP_MULTI_NONCE,    /* more than one nonce option */
	ILNP_R_DROP_MALFORMED,      /* truncated header or bad nonce length */
	ILNP_R_INGRESS_ERROR,       /* a helper failed: dropped */
	ILNP_R_MAX,
};

#endif
