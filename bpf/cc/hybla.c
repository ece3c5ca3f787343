/* SPDX-License-Identifier: (GPL-2.0 OR MIT) */
/*
 * TCP Hybla (C. Caini, R. Firrincieli, "TCP Hybla: a TCP enhancement for heterogeneous
 * networks", Int. J. Satellite Communications and Networking 22(5), 2004) as a BPF
 * struct_ops congestion control, for kernels built without tcp_hybla. Registered as
 * "hybla". Behaviour follows Linux's tcp_hybla.c (the reference the lab compares with):
 *
 *   rho = max(SRTT / RTT0, 1), RTT0 = 25 ms, recomputed when the smoothed RTT drops
 *   below the least seen; kept in fixed point: rho << 3 and rho^2 << 7.
 *   slow start, per ACK:           cwnd += 2^rho - 1      (capped at ssthresh)
 *   congestion avoidance, per ACK: cwnd += rho^2 / cwnd
 *   fractions of a segment accumulate in 1/128ths; loss: Reno's ssthresh (cwnd / 2).
 *   Outside the Open state (recovery, loss) the window grows as Reno's.
 *
 * So a Hybla flow at RTT = rho x RTT0 grows its window per unit of time as Reno would at
 * RTT0: rho times faster in slow start's exponent, rho^2 times faster in congestion
 * avoidance (tests/test_cc.py measures both signatures against Reno).
 */
#include "tcp_ca.h"

char _license[] SEC("license") = "GPL";

#define RTT0_MS 25

struct hybla {
	__u32 rho;	/* rho, integer part */
	__u32 rho2;	/* rho^2, integer part */
	__u32 rho_3ls;	/* rho << 3 */
	__u32 rho2_7ls; /* rho^2 << 7 */
	__u32 minrtt_us; /* least smoothed RTT seen (srtt_us units: << 3) */
	__u32 cents;	/* fraction of a segment owed to cwnd, in 1/128ths */
	__u32 enabled;	/* in the Open state */
};

/* 2^(i/8) in 1/128ths, i = 0..7: the fractional part of 2^rho. */
static __always_inline __u32 pow2_eighths(__u32 i)
{
	switch (i) {
	case 0: return 128;
	case 1: return 140;
	case 2: return 152;
	case 3: return 166;
	case 4: return 181;
	case 5: return 197;
	case 6: return 215;
	default: return 235;
	}
}

static __always_inline void hybla_rho(struct sock *sk, struct hybla *h)
{
	/* srtt_us is 8 x SRTT, so this is rho << 3; at least 1 << 3 */
	__u32 r = ca_tcp(sk)->srtt_us / (RTT0_MS * 1000);

	if (r < 8)
		r = 8;
	h->rho_3ls = r;
	h->rho = r >> 3;
	h->rho2_7ls = (r * r) << 1;
	h->rho2 = h->rho2_7ls >> 7;
}

SEC("struct_ops")
void BPF_PROG(hybla_init, struct sock *sk)
{
	struct tcp_sock *tp = ca_tcp(sk);
	struct hybla *h = ca_priv(sk);

	h->cents = 0;
	h->enabled = 1;
	tp->snd_cwnd = 2;
	hybla_rho(sk, h);
	h->minrtt_us = tp->srtt_us;
	/* the initial window is rho segments (at least 2) */
	tp->snd_cwnd = h->rho > 2 ? h->rho : 2;
}

SEC("struct_ops")
void BPF_PROG(hybla_set_state, struct sock *sk, __u8 new_state)
{
	struct hybla *h = ca_priv(sk);

	h->enabled = new_state == CA_OPEN;
}

SEC("struct_ops")
void BPF_PROG(hybla_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = ca_tcp(sk);
	struct hybla *h = ca_priv(sk);
	__u32 inc, odd, cwnd, frac, sh;
	bool slow_start = false;

	if (tp->srtt_us < h->minrtt_us) {
		hybla_rho(sk, h);
		h->minrtt_us = tp->srtt_us;
	}
	if (!ca_cwnd_limited(tp))
		return;
	if (!h->enabled) {
		tcp_reno_cong_avoid(sk, ack, acked);
		return;
	}
	if (h->rho == 0)
		hybla_rho(sk, h);

	if (ca_in_slow_start(tp)) {
		/* 2^rho - 1 segments, in 1/128ths: 2^int(rho) x 2^frac(rho) - 1 */
		slow_start = true;
		sh = h->rho < 16 ? h->rho : 16;
		frac = h->rho_3ls - (h->rho << 3);
		inc = (1U << sh) * pow2_eighths(frac & 7) - 128;
	} else {
		/* rho^2 / cwnd segments, in 1/128ths */
		inc = h->rho2_7ls / (tp->snd_cwnd ? tp->snd_cwnd : 1);
		if (inc < 128)
			tp->snd_cwnd_cnt++;
	}
	odd = inc & 127;
	cwnd = tp->snd_cwnd + (inc >> 7);
	h->cents += odd;
	if (h->cents >= 128) { /* cents < 128 before, odd < 128: at most one whole segment */
		cwnd++;
		h->cents -= 128;
		tp->snd_cwnd_cnt = 0;
	}
	/* a window so large that the increment rounds to zero still grows, once per window */
	if (inc == 0 && tp->snd_cwnd_cnt >= cwnd) {
		cwnd++;
		tp->snd_cwnd_cnt = 0;
	}
	if (slow_start && cwnd > tp->snd_ssthresh)
		cwnd = tp->snd_ssthresh;
	if (cwnd > tp->snd_cwnd_clamp)
		cwnd = tp->snd_cwnd_clamp;
	tp->snd_cwnd = cwnd;
}

SEC("struct_ops")
__u32 BPF_PROG(hybla_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(hybla_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops hybla = {
	.init = (void *)hybla_init,
	.set_state = (void *)hybla_set_state,
	.cong_avoid = (void *)hybla_cong_avoid,
	.ssthresh = (void *)hybla_ssthresh,
	.undo_cwnd = (void *)hybla_undo_cwnd,
	.name = "hybla",
};
