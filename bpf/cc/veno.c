/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * TCP Veno (C. P. Fu, S. C. Liew, "TCP Veno: TCP enhancement for transmission over
 * wireless access networks", IEEE JSAC 21(2), 2003) as a BPF struct_ops congestion
 * control, for kernels built without tcp_veno. Registered as "veno". Behaviour follows
 * Linux's tcp_veno.c (the reference the lab compares with):
 *
 *   backlog N = cwnd x (RTT - BaseRTT) / RTT, kept doubled (N << 1); beta = 3.
 *   BaseRTT: the least RTT sample of the connection; RTT: the least sample since the
 *   last window update.
 *   loss with N < beta (taken as random, non-congestive): ssthresh = cwnd x 4/5;
 *   loss with N >= beta (congestive):                   ssthresh = cwnd / 2.
 *   slow start as Reno; congestion avoidance: +1 segment per RTT while N < beta,
 *   +1 every other RTT once N >= beta (the link is being filled).
 *   Fewer than 3 RTT samples, or outside the Open state: Reno.
 */
#include "tcp_ca.h"

char _license[] SEC("license") = "GPL";

#define N_SHIFT 1		 /* N is kept << 1 */
#define BETA (3 << N_SHIFT) /* beta = 3 segments of backlog */
#define RTT_NONE 0x7fffffff

struct veno {
	__u32 on;	/* in the Open state: Veno's rules apply */
	__u32 samples;	/* RTT samples since Veno was switched on */
	__u32 minrtt;	/* least RTT sample since the last window update (us) */
	__u32 basertt;	/* least RTT sample of the connection (us) */
	__u32 inc;	/* congestive state: grow on this RTT (alternates) */
	__u32 diff;	/* N << N_SHIFT, as of the last window update */
};

static __always_inline void veno_on(struct veno *v)
{
	v->on = 1;
	v->minrtt = RTT_NONE;
}

static __always_inline void veno_off(struct veno *v)
{
	v->on = 0;
	v->samples = 0;
}

SEC("struct_ops")
void BPF_PROG(veno_init, struct sock *sk)
{
	struct veno *v = ca_priv(sk);

	v->basertt = RTT_NONE;
	v->inc = 1;
	v->diff = 0;
	v->samples = 0;
	veno_on(v);
}

SEC("struct_ops")
void BPF_PROG(veno_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct veno *v = ca_priv(sk);
	__s32 rtt_us = sample->rtt_us;
	__u32 rtt;

	if (rtt_us < 0)
		return;
	rtt = (__u32)rtt_us + 1; /* never 0 */
	if (rtt < v->basertt)
		v->basertt = rtt;
	if (rtt < v->minrtt)
		v->minrtt = rtt;
	v->samples++;
}

SEC("struct_ops")
void BPF_PROG(veno_set_state, struct sock *sk, __u8 new_state)
{
	struct veno *v = ca_priv(sk);

	if (new_state == CA_OPEN)
		veno_on(v);
	else
		veno_off(v);
}

SEC("struct_ops")
void BPF_PROG(veno_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	struct veno *v = ca_priv(sk);

	/* an idle connection starts over: its RTT history is stale */
	if (event == CA_EVENT_CWND_RESTART || event == CA_EVENT_TX_START) {
		v->basertt = RTT_NONE;
		v->inc = 1;
		v->diff = 0;
		v->samples = 0;
		veno_on(v);
	}
}

SEC("struct_ops")
void BPF_PROG(veno_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = ca_tcp(sk);
	struct veno *v = ca_priv(sk);
	__u64 expected;
	__u32 cwnd;

	if (!v->on) {
		tcp_reno_cong_avoid(sk, ack, acked);
		return;
	}
	if (!ca_cwnd_limited(tp))
		return;
	if (v->samples <= 2) {
		tcp_reno_cong_avoid(sk, ack, acked);
		v->minrtt = RTT_NONE;
		return;
	}
	/* N = cwnd - cwnd x BaseRTT / RTT (doubled) */
	cwnd = tp->snd_cwnd;
	expected = ((__u64)cwnd * v->basertt) << N_SHIFT;
	expected /= v->minrtt ? v->minrtt : 1;
	v->diff = (cwnd << N_SHIFT) - (__u32)expected;

	if (ca_in_slow_start(tp)) {
		acked = tcp_slow_start(tp, acked);
		if (!acked)
			goto clamp;
	}
	if (v->diff < BETA) {
		/* non-congestive: Reno's one segment per RTT */
		tcp_cong_avoid_ai(tp, tp->snd_cwnd, acked);
	} else if (tp->snd_cwnd_cnt >= tp->snd_cwnd) {
		/* congestive: one segment every other RTT */
		if (v->inc && tp->snd_cwnd < tp->snd_cwnd_clamp) {
			tp->snd_cwnd = tp->snd_cwnd + 1;
			v->inc = 0;
		} else {
			v->inc = 1;
		}
		tp->snd_cwnd_cnt = 0;
	} else {
		tp->snd_cwnd_cnt = tp->snd_cwnd_cnt + acked;
	}
clamp:
	if (tp->snd_cwnd < 2)
		tp->snd_cwnd = 2;
	else if (tp->snd_cwnd > tp->snd_cwnd_clamp)
		tp->snd_cwnd = tp->snd_cwnd_clamp;
	v->minrtt = RTT_NONE;
}

SEC("struct_ops")
__u32 BPF_PROG(veno_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = ca_tcp(sk);
	struct veno *v = ca_priv(sk);
	__u32 cwnd = tp->snd_cwnd, s;

	if (v->diff < BETA)
		s = cwnd * 4 / 5; /* random loss: back off by a fifth */
	else
		s = cwnd >> 1; /* congestion: halve, as Reno */
	return s > 2 ? s : 2;
}

SEC("struct_ops")
__u32 BPF_PROG(veno_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops veno = {
	.init = (void *)veno_init,
	.pkts_acked = (void *)veno_pkts_acked,
	.set_state = (void *)veno_set_state,
	.cwnd_event = (void *)veno_cwnd_event,
	.cong_avoid = (void *)veno_cong_avoid,
	.ssthresh = (void *)veno_ssthresh,
	.undo_cwnd = (void *)veno_undo_cwnd,
	.name = "veno",
};
