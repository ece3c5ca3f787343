//! One direction of the emulated link, without any OS access: the caller passes
//! the time (nanoseconds on any monotonic clock) into every call.
//!
//! Model, per frame arriving at `now`:
//! 1. random loss with probability `loss` (one RNG draw per frame, so a seeded run
//!    makes the same decisions for the same frame sequence);
//! 2. tail drop when holding it would exceed `limit` packets (delayed or waiting for the
//!    rate), counted in segments so a 64 KB GSO super-frame weighs what it is on the wire;
//! 3. serialization: with a rate, the frame leaves the emulated sender at
//!    `tx_end = max(now, previous tx_end) + wire_bits / rate`, otherwise at `now`;
//! 4. propagation: it is released at `tx_end + delay`.
//!
//! Release times never decrease (delay is constant, tx_end is monotone), so the
//! queue is a FIFO.

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use serde::Serialize;
use std::collections::VecDeque;

/// Size of `struct virtio_net_hdr` that PACKET_VNET_HDR puts before every frame.
pub const VNET_HDR_LEN: usize = 10;
const VNET_F_NEEDS_CSUM: u8 = 1;
const GSO_NONE: u8 = 0;
const GSO_UDP: u8 = 3;
const GSO_UDP_L4: u8 = 5;
const GSO_ECN: u8 = 0x80;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DirConfig {
    pub delay_ns: u64,
    /// Probability in [0, 1].
    pub loss: f64,
    /// Bits per second; `None` = unlimited.
    pub rate_bps: Option<f64>,
    /// Maximum packets (segments) held: delay queue + rate backlog, like netem's limit.
    pub limit: usize,
}

#[derive(Debug, Default, Clone, Serialize, PartialEq)]
pub struct DirStats {
    /// Frames read from the input interface (a GSO super-frame counts once).
    pub received_frames: u64,
    /// Wire bytes of those frames (L2, per-segment headers counted for GSO frames).
    pub received_bytes: u64,
    pub forwarded_frames: u64,
    /// Frames after segmentation (what a capture on the far side would count).
    pub forwarded_segments: u64,
    pub forwarded_bytes: u64,
    /// Dropped by the random loss model.
    pub lost_random: u64,
    /// Frames tail-dropped because --queue-packets segments were already held.
    pub dropped_queue_full: u64,
    /// The output interface refused the frame (sendmmsg error).
    pub dropped_send_error: u64,
    /// Frames larger than the receive buffer (dropped).
    pub dropped_truncated: u64,
    /// Drops the kernel reported on the input socket (PACKET_STATISTICS).
    pub kernel_rx_drops: u64,
    /// Still queued when the line was stopped.
    pub unsent_at_exit: u64,
    pub max_queue_frames: u64,
    pub max_queue_segments: u64,
    /// How late frames were sent relative to their release time.
    pub release_late_us_avg: f64,
    pub release_late_us_max: f64,
    #[serde(skip)]
    late_ns_sum: u128,
    #[serde(skip)]
    late_ns_max: u64,
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Verdict {
    Queued,
    Lost,
    QueueFull,
}

pub struct Frame {
    pub release_ns: u64,
    /// virtio_net_hdr + L2 frame, exactly as received.
    pub data: Vec<u8>,
    pub wire_bytes: u64,
    pub segments: u32,
}

pub struct Direction {
    cfg: DirConfig,
    queue: VecDeque<Frame>,
    held_segments: usize,
    tx_end_ns: u64,
    rng: ChaCha8Rng,
    stats: DirStats,
}

/// Wire size and segment count of a frame that starts with a virtio_net_hdr.
/// A GSO super-frame of N segments costs N copies of its headers on the wire.
pub fn wire_size(buf: &[u8]) -> (u64, u32) {
    if buf.len() < VNET_HDR_LEN {
        return (0, 0);
    }
    let frame_len = (buf.len() - VNET_HDR_LEN) as u64;
    let flags = buf[0];
    let gso_type = buf[1] & !GSO_ECN;
    let gso_size = u16::from_le_bytes([buf[4], buf[5]]) as u64;
    let csum_start = u16::from_le_bytes([buf[6], buf[7]]) as usize;
    if gso_type == GSO_NONE || gso_size == 0 || flags & VNET_F_NEEDS_CSUM == 0 {
        return (frame_len, 1);
    }
    let frame = &buf[VNET_HDR_LEN..];
    // Headers end after the L4 header, which starts at csum_start.
    let l4_len = match gso_type {
        GSO_UDP | GSO_UDP_L4 => 8,
        _ => match frame.get(csum_start + 12) {
            Some(b) => ((b >> 4) as usize) * 4,
            None => return (frame_len, 1),
        },
    };
    let hdr = (csum_start + l4_len) as u64;
    if hdr >= frame_len {
        return (frame_len, 1);
    }
    let segs = (frame_len - hdr).div_ceil(gso_size);
    (frame_len + (segs - 1) * hdr, segs as u32)
}

impl Direction {
    pub fn new(cfg: DirConfig, seed: u64) -> Self {
        Direction {
            cfg,
            queue: VecDeque::new(),
            held_segments: 0,
            tx_end_ns: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
            stats: DirStats::default(),
        }
    }

    /// Uniform in [0, 1).
    fn uniform(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Offer a frame (virtio_net_hdr + L2) that arrived at `now_ns`.
    pub fn offer(&mut self, now_ns: u64, data: Vec<u8>) -> Verdict {
        let (wire_bytes, segments) = wire_size(&data);
        self.stats.received_frames += 1;
        self.stats.received_bytes += wire_bytes;
        if self.cfg.loss > 0.0 && self.uniform() < self.cfg.loss {
            self.stats.lost_random += 1;
            return Verdict::Lost;
        }
        // An empty queue always takes the frame, so an oversized one cannot wedge the line.
        if !self.queue.is_empty() && self.held_segments + segments as usize > self.cfg.limit {
            self.stats.dropped_queue_full += 1;
            return Verdict::QueueFull;
        }
        let tx_end = match self.cfg.rate_bps {
            Some(rate) => {
                let ser = (wire_bytes as f64 * 8.0 * 1e9 / rate).round() as u64;
                self.tx_end_ns.max(now_ns) + ser
            }
            None => now_ns,
        };
        self.tx_end_ns = tx_end;
        let release_ns = tx_end + self.cfg.delay_ns;
        self.queue.push_back(Frame { release_ns, data, wire_bytes, segments });
        self.held_segments += segments as usize;
        self.stats.max_queue_frames = self.stats.max_queue_frames.max(self.queue.len() as u64);
        self.stats.max_queue_segments = self.stats.max_queue_segments.max(self.held_segments as u64);
        Verdict::Queued
    }

    pub fn next_release(&self) -> Option<u64> {
        self.queue.front().map(|f| f.release_ns)
    }

    /// Next frame whose release time has come.
    pub fn pop_due(&mut self, now_ns: u64) -> Option<Frame> {
        if self.queue.front()?.release_ns <= now_ns {
            let f = self.queue.pop_front()?;
            self.held_segments -= f.segments as usize;
            Some(f)
        } else {
            None
        }
    }

    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    pub fn record_sent(&mut self, f: &Frame, sent_at_ns: u64) {
        self.stats.forwarded_frames += 1;
        self.stats.forwarded_segments += f.segments as u64;
        self.stats.forwarded_bytes += f.wire_bytes;
        let late = sent_at_ns.saturating_sub(f.release_ns);
        self.stats.late_ns_sum += late as u128;
        self.stats.late_ns_max = self.stats.late_ns_max.max(late);
    }

    pub fn record_send_error(&mut self) {
        self.stats.dropped_send_error += 1;
    }

    pub fn record_truncated(&mut self) {
        self.stats.dropped_truncated += 1;
    }

    pub fn record_kernel_drops(&mut self, n: u64) {
        self.stats.kernel_rx_drops += n;
    }

    /// Final counters; frames still queued are counted as unsent.
    pub fn finish(mut self) -> DirStats {
        self.stats.unsent_at_exit = self.queue.len() as u64;
        let s = &mut self.stats;
        if s.forwarded_frames > 0 {
            s.release_late_us_avg = (s.late_ns_sum / s.forwarded_frames as u128) as f64 / 1e3;
        }
        s.release_late_us_max = s.late_ns_max as f64 / 1e3;
        self.stats
    }

    pub fn stats(&self) -> &DirStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn cfg(delay_ms: u64, loss: f64, rate: Option<f64>, limit: usize) -> DirConfig {
        DirConfig { delay_ns: delay_ms * MS, loss, rate_bps: rate, limit }
    }

    /// Plain (non-GSO) frame: zero vnet header + `len` bytes of L2.
    fn plain(len: usize) -> Vec<u8> {
        vec![0u8; VNET_HDR_LEN + len]
    }

    #[test]
    fn constant_delay_fifo() {
        let mut d = Direction::new(cfg(20, 0.0, None, 100), 1);
        assert_eq!(d.offer(0, plain(100)), Verdict::Queued);
        assert_eq!(d.offer(5 * MS, plain(100)), Verdict::Queued);
        assert_eq!(d.next_release(), Some(20 * MS));
        assert!(d.pop_due(20 * MS - 1).is_none());
        let f = d.pop_due(20 * MS).unwrap();
        d.record_sent(&f, 20 * MS + 300_000);
        assert!(d.pop_due(24 * MS).is_none());
        assert_eq!(d.pop_due(25 * MS).unwrap().release_ns, 25 * MS);
        assert!(d.pop_due(u64::MAX).is_none());
        let s = d.finish();
        assert_eq!(s.forwarded_frames, 1);
        assert_eq!(s.release_late_us_max, 300.0);
    }

    #[test]
    fn rate_serializes_back_to_back_frames() {
        // 8 Mbit/s: 1000 bytes take 1 ms on the wire.
        let mut d = Direction::new(cfg(10, 0.0, Some(8e6), 100), 1);
        for _ in 0..3 {
            d.offer(0, plain(1000));
        }
        let rel: Vec<u64> = std::iter::from_fn(|| d.pop_due(u64::MAX)).map(|f| f.release_ns).collect();
        assert_eq!(rel, vec![11 * MS, 12 * MS, 13 * MS]);
        // After an idle gap the link is free again: serialization starts at arrival.
        d.offer(100 * MS, plain(1000));
        assert_eq!(d.next_release(), Some(111 * MS));
        // A frame arriving while the previous one is still being serialized waits.
        d.offer(100 * MS + MS / 2, plain(500));
        d.pop_due(u64::MAX);
        assert_eq!(d.next_release(), Some(111 * MS + MS / 2));
    }

    #[test]
    fn rate_limits_long_run_throughput() {
        // Offer 10 Mbit/s worth for 1 s into a 2 Mbit/s link: releases stretch to ~5 s.
        let mut d = Direction::new(cfg(0, 0.0, Some(2e6), 1_000_000), 7);
        for i in 0..1000u64 {
            d.offer(i * MS, plain(1250));
        }
        let last = std::iter::from_fn(|| d.pop_due(u64::MAX)).last().unwrap().release_ns;
        assert_eq!(last, 5000 * MS);
    }

    #[test]
    fn tail_drop_counted_apart_from_loss() {
        let mut d = Direction::new(cfg(50, 0.0, None, 3), 1);
        let v: Vec<Verdict> = (0..5).map(|i| d.offer(i, plain(60))).collect();
        assert_eq!(v[..3], [Verdict::Queued; 3]);
        assert_eq!(v[3..], [Verdict::QueueFull; 2]);
        d.pop_due(u64::MAX);
        assert_eq!(d.offer(10, plain(60)), Verdict::Queued);
        let s = d.finish();
        assert_eq!((s.dropped_queue_full, s.lost_random, s.unsent_at_exit), (2, 0, 3));
        assert_eq!(s.received_frames, 6);
        assert_eq!(s.max_queue_frames, 3);
    }

    #[test]
    fn limit_counts_gso_segments() {
        let mut d = Direction::new(cfg(50, 0.0, None, 20), 1);
        // 11 segments each: the first is taken, the second would make 22 > 20.
        assert_eq!(d.offer(0, tcp6_gso(1428 * 10 + 1, 1428)), Verdict::Queued);
        assert_eq!(d.offer(0, tcp6_gso(1428 * 10 + 1, 1428)), Verdict::QueueFull);
        for _ in 0..9 {
            assert_eq!(d.offer(0, plain(100)), Verdict::Queued);
        }
        assert_eq!(d.offer(0, plain(100)), Verdict::QueueFull);
        d.pop_due(u64::MAX);
        assert_eq!(d.offer(0, tcp6_gso(1428 * 10 + 1, 1428)), Verdict::Queued);
        // A frame larger than the whole limit still passes an empty line.
        let mut small = Direction::new(cfg(0, 0.0, None, 5), 1);
        assert_eq!(small.offer(0, tcp6_gso(1428 * 10 + 1, 1428)), Verdict::Queued);
        let s = d.finish();
        assert_eq!((s.max_queue_segments, s.dropped_queue_full), (20, 2));
    }

    #[test]
    fn loss_rate_and_seed_reproducibility() {
        let run = |seed| {
            let mut d = Direction::new(cfg(0, 0.2, None, usize::MAX), seed);
            (0..100_000).map(|i| d.offer(i, plain(10))).collect::<Vec<_>>()
        };
        let a = run(42);
        assert_eq!(a, run(42));
        assert_ne!(a, run(43));
        let lost = a.iter().filter(|v| **v == Verdict::Lost).count() as f64 / a.len() as f64;
        assert!((lost - 0.2).abs() < 0.005, "loss fraction {lost}");
        // Extremes.
        let mut none = Direction::new(cfg(0, 0.0, None, usize::MAX), 1);
        let mut all = Direction::new(cfg(0, 1.0, None, usize::MAX), 1);
        for i in 0..1000 {
            assert_eq!(none.offer(i, plain(10)), Verdict::Queued);
            assert_eq!(all.offer(i, plain(10)), Verdict::Lost);
        }
    }

    /// virtio_net_hdr + Ethernet + IPv6 + TCP (20-byte header) + payload.
    fn tcp6_gso(payload: usize, mss: u16) -> Vec<u8> {
        let mut b = vec![0u8; VNET_HDR_LEN + 14 + 40 + 20 + payload];
        b[0] = VNET_F_NEEDS_CSUM;
        b[1] = 4; // VIRTIO_NET_HDR_GSO_TCPV6
        b[4..6].copy_from_slice(&mss.to_le_bytes());
        b[6..8].copy_from_slice(&54u16.to_le_bytes()); // csum_start = L4 offset
        b[8..10].copy_from_slice(&16u16.to_le_bytes());
        b[VNET_HDR_LEN + 54 + 12] = 5 << 4; // TCP data offset: 5 words
        b
    }

    #[test]
    fn gso_frames_count_per_segment_headers() {
        let (bytes, segs) = wire_size(&tcp6_gso(1428 * 10 + 1, 1428));
        assert_eq!(segs, 11);
        assert_eq!(bytes, 1428 * 10 + 1 + 11 * 74);
        // Non-GSO and malformed inputs fall back to the raw length.
        assert_eq!(wire_size(&plain(1514)), (1514, 1));
        assert_eq!(wire_size(&[0u8; 3]), (0, 0));
        let mut bad = tcp6_gso(0, 1428);
        bad.truncate(VNET_HDR_LEN + 60);
        assert_eq!(wire_size(&bad), (60, 1));
        // Rate accounting uses the wire size: 11 segments at 1 Gbit/s.
        let mut d = Direction::new(cfg(0, 0.0, Some(1e9), 10), 1);
        d.offer(0, tcp6_gso(1428 * 10 + 1, 1428));
        assert_eq!(d.next_release(), Some(bytes * 8));
    }
}
