// SPDX-License-Identifier: (GPL-2.0 OR MIT)
/*
 * TCP loss-of-connectivity hints (RFC 6069) for ILNP hard handoffs: the sock_ops
 * program ilnpd attaches to the cgroup v2 root. For TCP connections of this
 * network namespace (ilnp_tcp_cfg.netns_cookie) to an identifier address
 * (ilnp_cfg.id_prefix) it asks for the RTO callback when they are established,
 * and on every retransmission timeout records the head of the connection
 * (snd_una) in ilnp_tcp_rto. When a silent peer comes back with a Locator Update,
 * ilnpd reads the peer's entries and hands its own stack ICMPv6 "no route" errors
 * quoting snd_una, so the kernel undoes its backoff (tcp_ld_RTO_revert) and
 * retransmits at once instead of at the next, backed-off timer.
 */
#include "ilnp_common.h"


static __always_inline __u32 ctx_u32(const __u32 *field)
{
	return *(volatile const __u32 *)field;
}

/* address words in network order, as the context gives them */
static __always_inline void ctx_ip6(__u8 out[16], const __u32 *words)
{
	__u32 w[4];
#pragma unroll
	for (int i = 0; i < 4; i++)
		w[i] = ctx_u32(&words[i]);
	__builtin_memcpy(out, w, 16);
}

static __always_inline int ilnp_sockops_ours(struct bpf_sock_ops *skops)
{
	__u32 zero = 0;
	struct ilnp_tcp_cfg *tc = bpf_map_lookup_elem(&ilnp_tcp_cfg, &zero);
	struct ilnp_cfg *cfg = get_cfg();
	if (!tc || !cfg || !tc->netns_cookie || skops->family != AF_INET6)
		return 0;
	if (bpf_get_netns_cookie(skops) != tc->netns_cookie)
		return 0;
	/* the context allows 4-byte reads only: volatile keeps clang from merging them */
	__u32 p[2] = {ctx_u32(&skops->remote_ip6[0]), ctx_u32(&skops->remote_ip6[1])};
	__u64 prefix;
	__builtin_memcpy(&prefix, p, 8); /* the 8 wire bytes, as ilnp_cfg keeps them */
	return prefix == cfg->id_prefix;
}

SEC("sockops")
int ilnp_sockops(struct bpf_sock_ops *skops)
{
	switch (skops->op) {
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		if (ilnp_sockops_ours(skops))
			bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_RTO_CB_FLAG);
		break;
	case BPF_SOCK_OPS_RTO_CB: {
		if (!ilnp_sockops_ours(skops))
			break;
		struct ilnp_tcp_key k = {};
		ctx_ip6(k.local, skops->local_ip6);
		ctx_ip6(k.remote, skops->remote_ip6);
		k.lport = (__u16)skops->local_port;
		k.rport = (__u16)bpf_ntohl(skops->remote_port); /* network order, as the kernel gives it */
		struct ilnp_tcp_rto v = {
			.ts_ns = bpf_ktime_get_ns(),
			.snd_una = skops->snd_una,
			.retransmits = skops->args[0],
		};
		bpf_map_update_elem(&ilnp_tcp_rto, &k, &v, BPF_ANY);
		break;
	}
	}
	return 1;
}
