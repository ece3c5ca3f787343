//! The slow path: packets from the TUN handed to the core, the core's actions
//! carried out (raw socket, TUN, BPF maps, events) and the drop-log rate limit.

use super::counters::ShellCounter;
use super::{monitor, Daemon};
use ilnp_core::{Action, AnswerHint, Event};
use ilnp_wire::split_addr;
use ilnp_wire::translate::Csum;
use socket2::{SockAddr, Socket};
use std::collections::BTreeMap;
use std::net::{Ipv6Addr, SocketAddrV6};
use std::time::{Duration, Instant};

/// Drop log lines per reason per second (every drop is counted regardless).
const DROP_LOG_BURST: u32 = 10;

impl Daemon {
    /// Sends a wire packet through `uplink`, the one the core chose (it owns the
    /// packet's source locator; the kernel routes it via that interface's routes
    /// only), so it reaches the network its source address belongs to (BCP 38) over
    /// the path it was advertised for. If that uplink has no route to the
    /// destination (its router is gone), the main table decides, counted as
    /// `send_uplink_fallback`.
    fn send_wire(&mut self, pkt: &[u8], uplink: Option<u32>) {
        let Ok(dst) = ilnp_wire::ipv6::Packet::new_checked(pkt).map(|p| p.dst()) else { return };
        if let Some(ifindex) = uplink {
            match send_via(&self.raw, pkt, dst, ifindex) {
                Ok(()) => return,
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENETUNREACH) | Some(libc::EHOSTUNREACH)) => {
                    self.bump(ShellCounter::SendUplinkFallback);
                    tracing::debug!("no route to {dst} via ifindex {ifindex}: main table");
                }
                Err(e) => {
                    self.bump(ShellCounter::SendError);
                    tracing::debug!("sending {} bytes to {dst} via ifindex {ifindex}: {e}", pkt.len());
                    return;
                }
            }
        }
        let sa = SockAddr::from(SocketAddrV6::new(dst, 0, 0, 0));
        if let Err(e) = self.raw.send_to(pkt, &sa) {
            self.bump(ShellCounter::SendError);
            tracing::debug!("sending {} bytes to {dst}: {e}", pkt.len());
        }
    }

    pub(super) fn bump(&mut self, k: ShellCounter) {
        *self.counters.entry(k).or_insert(0) += 1;
    }

    pub(super) fn run_actions(&mut self, actions: Vec<Action>) {
        for a in actions {
            match a {
                Action::SendWire { pkt, uplink } => self.send_wire(&pkt, uplink),
                Action::SendV4 { pkt, to } => self.send_v4(&pkt, to),
                Action::DeliverLocal(pkt) => {
                    if let Err(e) = self.tun.send(&pkt) {
                        self.bump(ShellCounter::DeliverError);
                        tracing::debug!("{e:#}");
                    }
                }
                Action::IlccUpsert(s) => {
                    self.state_dirty.get_or_insert_with(Instant::now);
                    if let Some(dp) = self.dp.as_mut() {
                        if let Err(e) = dp.upsert_peer(&s) {
                            tracing::warn!("{e:#}");
                        }
                    }
                }
                Action::IlccRemove(nid) => {
                    self.state_dirty.get_or_insert_with(Instant::now);
                    if let Some(dp) = self.dp.as_mut() {
                        if let Err(e) = dp.remove_peer(nid) {
                            tracing::warn!("removing {nid} from the fast path: {e:#}");
                        }
                    }
                }
                Action::PlainPeerUpsert { nid, remote_loc } => {
                    // a fallback is kept in the state file
                    self.state_dirty.get_or_insert_with(Instant::now);
                    if let Some(dp) = self.dp.as_mut() {
                        if let Err(e) = dp.upsert_plain_peer(nid, remote_loc) {
                            tracing::warn!("{e:#}");
                        }
                    }
                }
                Action::PlainPeerRemove(nid) => {
                    self.state_dirty.get_or_insert_with(Instant::now);
                    if let Some(dp) = self.dp.as_mut() {
                        if let Err(e) = dp.remove_plain_peer(nid) {
                            tracing::warn!("{e:#}");
                        }
                    }
                }
                Action::LocalLocators(l) => {
                    // the addresses ilnpd added change with them (kept in the state file)
                    self.state_dirty.get_or_insert_with(Instant::now);
                    if let Some(dp) = self.dp.as_mut() {
                        if let Err(e) = dp.set_local_locators(&l) {
                            tracing::warn!("{e:#}");
                        }
                    }
                    self.dns_locators_changed(&l);
                }
                Action::Event(ev) => {
                    if let Event::LuFailed { nid, .. } = &ev {
                        self.dns_recover(*nid);
                    }
                    if let Event::LuAcked { rtt_us, attempts, .. } = &ev {
                        self.observe_lu_acked(*rtt_us, *attempts);
                    }
                    self.emit(ev)
                }
                Action::NudgeTransport(nid) => self.nudge_transport(nid),
                Action::Balance(c) => {
                    if let Some(dp) = self.dp.as_mut() {
                        if let Err(e) = dp.set_balance(&c) {
                            tracing::warn!("{e:#}");
                        }
                    }
                }
            }
        }
    }

    fn emit(&mut self, ev: Event) {
        if let Event::Drop { reason, .. } = &ev {
            // at most DROP_LOG_BURST log lines per reason per second; all are counted,
            // and what was not logged is summed up in one line when the window ends
            let now = Instant::now();
            self.flush_drop_log(now);
            let e = self.drop_log.entry(reason).or_insert((now, 0));
            e.1 += 1;
            if e.1 <= DROP_LOG_BURST {
                tracing::warn!("{ev}");
            }
        } else {
            tracing::info!("{ev}");
        }
        let _ = self.events.send(monitor::monitor_event(&ev).to_line());
    }

    /// Ends drop-log windows older than a second, with one line per reason saying
    /// how many drops were not logged (the counters in `ilnpctl stats` have them all).
    pub(super) fn flush_drop_log(&mut self, now: Instant) {
        self.drop_log.retain(|reason, (start, n)| {
            if now.duration_since(*start) < Duration::from_secs(1) {
                return true;
            }
            if *n > DROP_LOG_BURST {
                let secs = now.duration_since(*start).as_secs_f64();
                tracing::warn!(
                    "drop ({reason}): {} more in the last {secs:.1} s not logged (rate limit)",
                    *n - DROP_LOG_BURST
                );
            }
            false
        });
    }

    pub(super) fn on_tun_packet(&mut self, pkt: &[u8], meta: crate::tun::PacketMeta) {
        let now = Instant::now();
        let csum = if meta.needs_csum { Csum::Partial } else { Csum::Complete };
        if pkt.first().is_some_and(|b| b >> 4 == 4) {
            // a v4 path's datagram the ingress program punted
            self.on_tun_v4(pkt, csum);
            return;
        }
        if pkt.len() < 40 {
            self.bump(ShellCounter::TunRunt);
            return;
        }
        let Ok(ip) = ilnp_wire::ipv6::Packet::new_checked(pkt) else {
            self.bump(ShellCounter::TunRunt);
            return;
        };
        if ip.dst().is_multicast() {
            // MLD and the like that the kernel sends on ilnp0: nothing to carry
            self.bump(ShellCounter::TunMulticastIgnored);
            return;
        }
        let (sl, _) = split_addr(ip.src());
        let outbound = sl == self.cfg.id_prefix;
        if meta.gso_type != 0 && outbound {
            // A GSO super-packet missed the fast path (first burst after a flush,
            // an entry just created): the raw socket cannot send it whole, so it
            // is cut into MSS-sized segments with complete checksums.
            match crate::gso::split(pkt, &meta.vnet_hdr) {
                Ok(segs) => {
                    self.bump(ShellCounter::SlowPathGsoSplit);
                    for s in segs {
                        let actions = self.core.handle_outbound(now, &s, Csum::Complete);
                        self.run_actions(actions);
                    }
                }
                Err(e) => {
                    self.bump(ShellCounter::SlowPathGsoBad);
                    tracing::debug!("GSO packet from {}: {e}", self.tun.name);
                }
            }
            return;
        }
        let actions = if outbound {
            // admission = socket: the core may ask where the packet our stack is
            // answering came from (the ingress program's hint, read only then)
            let dp = self.dp.as_ref();
            self.core.handle_outbound_hinted(now, pkt, csum, &mut |nid| answer_hint(dp?, nid, now))
        } else {
            self.core.handle_inbound(now, pkt, csum)
        };
        self.run_actions(actions);
    }

    pub(super) fn on_timer(&mut self) {
        // the core's timer may be a soft-handoff quiet period ending: it decides on
        // the fast path's latest receive stamps (read here, not polled)
        self.feed_local_activity();
        let actions = self.core.handle_timeout(Instant::now());
        self.run_actions(actions);
    }
}

/// The fast path's answer hint for `nid`, its CLOCK_MONOTONIC stamp made an
/// `Instant` (the same clock) relative to `now`.
fn answer_hint(dp: &crate::bpf::Datapath, nid: ilnp_wire::Nid, now: Instant) -> Option<AnswerHint> {
    let (remote_loc, local_loc, peer_nonce, ns, via) = match dp.answer_hint(nid) {
        Ok(h) => h?,
        Err(e) => {
            tracing::debug!("{e:#}");
            return None;
        }
    };
    let age = Duration::from_nanos(super::locators::monotonic_ns().saturating_sub(ns));
    Some(AnswerHint { remote_loc, local_loc, peer_nonce, at: now.checked_sub(age).unwrap_or(now), via })
}

/// Sends `pkt` (a whole IPv6 packet) on the IPPROTO_RAW socket with an
/// IPV6_PKTINFO control message naming `ifindex` and no source address:
/// rawv6_sendmsg() takes the output interface from it even with the header
/// included, and an output interface without a source address makes the route
/// lookup strict (RT6_LOOKUP_F_IFACE: only routes through that interface).
fn send_via(raw: &Socket, pkt: &[u8], dst: Ipv6Addr, ifindex: u32) -> std::io::Result<()> {
    use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags, SockaddrIn6};
    use std::os::fd::AsRawFd;
    let info = libc::in6_pktinfo { ipi6_addr: libc::in6_addr { s6_addr: [0; 16] }, ipi6_ifindex: ifindex };
    let to = SockaddrIn6::from(SocketAddrV6::new(dst, 0, 0, 0));
    sendmsg(
        raw.as_raw_fd(),
        &[std::io::IoSlice::new(pkt)],
        &[ControlMessage::Ipv6PacketInfo(&info)],
        MsgFlags::empty(),
        Some(&to),
    )
    .map(|_| ())
    .map_err(std::io::Error::from)
}

/// Slow-path time per packet, log2 buckets: bucket i counts times below
/// 2^(FIRST + i) ns (bucket 0 also everything faster), the last everything slower.
#[derive(Debug, Default)]
pub(super) struct SlowPathHist([u64; SlowPathHist::BUCKETS]);

impl SlowPathHist {
    const FIRST: u32 = 8; // < 256 ns
    const BUCKETS: usize = 20; // ... < 2^26 ns (67 ms), then >=

    pub(super) fn record(&mut self, ns: u64) {
        let bits = 64 - ns.leading_zeros(); // ns < 2^bits
        let i = (bits.saturating_sub(Self::FIRST) as usize).min(Self::BUCKETS - 1);
        self.0[i] += 1;
    }

    /// Non-empty buckets by label (`lt_256ns`, ..., `ge_67108864ns`).
    pub(super) fn labelled(&self) -> BTreeMap<String, u64> {
        let last = Self::BUCKETS - 1;
        self.0
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| {
                let label = if i == last {
                    format!("ge_{}ns", 1u64 << (Self::FIRST as usize + last - 1))
                } else {
                    format!("lt_{}ns", 1u64 << (Self::FIRST as usize + i))
                };
                (label, *n)
            })
            .collect()
    }
}

#[cfg(test)]
mod hist_tests {
    use super::SlowPathHist;

    #[test]
    fn buckets_are_powers_of_two() {
        let mut h = SlowPathHist::default();
        for ns in [0, 255, 256, 511, 3_000, u64::MAX] {
            h.record(ns);
        }
        let l = h.labelled();
        assert_eq!(l["lt_256ns"], 2);
        assert_eq!(l["lt_512ns"], 2);
        assert_eq!(l["lt_4096ns"], 1);
        assert_eq!(l["ge_67108864ns"], 1);
        assert_eq!(l.values().sum::<u64>(), 6);
    }
}
