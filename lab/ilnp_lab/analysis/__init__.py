"""Metrics from tcpdump captures, with seed 000 §5.4 / §6.1's definitions, by concern:
`packets` (reading the captures), `flows` (TCP, MPTCP, UDP), `handoffs` (Locator Updates,
control messages, handoffs, what the MN dropped), `events` (a mobility run's events and
the gaps around them), `stats` (summaries over runs). Every name is also here.

All results are plain dicts of JSON types; times are seconds relative to the caller's t0.
"""

from .events import (BROKEN_S, DAD_RETRANS_S, EVENT_MARGIN_S, EVENT_PRE_S, EVENT_RTTS, STARTUP_S, between_events,
                     delivered, event_context, event_window, first_ra_s, mn_prefix, ra_to_lu_ms, with_new_prefixes)
from .flows import IPERF_COOKIE, iperf_receiver, probe_loss, tcp_flow, udp_flow, udp_reverse, udp_transfer
from .handoffs import (accepted_locators, attribute_drops, control_messages, control_totals, handoff_latencies,
                       handoff_summary, handoffs, lu_by_event, lu_handshakes, stale_drops)
from .packets import (LU_ACK, LU_ADVERT, LU_TYPE, MPTCP_ADD_ADDR, MPTCP_MP_JOIN, MPTCP_OPT,
                      MPTCP_REMOVE_ADDR)
from .stats import T95, ci95, median, summary

__all__ = ["tcp_flow", "udp_flow", "udp_transfer", "lu_handshakes", "accepted_locators", "stale_drops",
           "attribute_drops", "lu_by_event", "udp_reverse", "handoffs", "handoff_summary", "iperf_receiver", "summary",
           "event_window", "control_messages", "control_totals", "handoff_latencies"]
