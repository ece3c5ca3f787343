/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * What bpf/cc/hybla.c and bpf/cc/veno.c share: the kernel types (vmlinux.h, dumped
 * from this kernel's BTF by the lab at load time, CO-RE relocated), the TCP helpers the
 * kernel exports to struct_ops congestion controls as kfuncs, and small inline
 * versions of the kernel's static inline helpers (tcp_sk, tcp_in_slow_start, ...).
 */
#ifndef ILNP_TCP_CA_H
#define ILNP_TCP_CA_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

/* kfuncs (net/ipv4/bpf_tcp_ca.c registers these for tcp_congestion_ops programs) */
extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;
extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;
extern void tcp_cong_avoid_ai(struct tcp_sock *tp, __u32 w, __u32 acked) __ksym;

/* The verifier types a tcp_congestion_ops program's `struct sock *` as a tcp_sock. */
static __always_inline struct tcp_sock *ca_tcp(struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

/* The algorithm's private state: icsk_ca_priv (ICSK_CA_PRIV_SIZE = 104 bytes). */
static __always_inline void *ca_priv(struct sock *sk)
{
	return (void *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline bool ca_in_slow_start(const struct tcp_sock *tp)
{
	return tp->snd_cwnd < tp->snd_ssthresh;
}

/* tcp_is_cwnd_limited(): growth only while the window, not the application, limits. */
static __always_inline bool ca_cwnd_limited(const struct tcp_sock *tp)
{
	if (ca_in_slow_start(tp))
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited);
}

#define CA_OPEN 0 /* TCP_CA_Open */

#endif
