"""The adversary suite: `ilnp-lab run attacks` (experiments/attacks.toml; issue #42 item 7).

Every attack of docs/security.md run against two ilnpd hosts by a third host the attacker
owns, with the real peer silent, lossy and live:

By concern (each module's docstring has its part of the definitions):

    bed.py        the testbed: topology, the attacker's knowledge, the peer modes (Bed)
    catalogue.py  the attacks: what each sends and wants, what names it (ATTACKS, COUNTED,
                  attack), the measures and the two classic attacks (v4-replay, slow-dns)
    forge.py      the attacker's packets (forged_udp, forged_lu, forged_echo, forged_icmp)
    scripts.py    the programs run inside the namespaces (echo service, clients, sender, ...)
    runner.py     the plugin: the experiment file (Spec), the runs, `run`
    report.py     results -> report.md (summarise, report)

Every public name is also here (`ilnp_lab.attacks` is the plugin experiment.py loads).
"""

from .bed import (CLIENT_PPS, DNS_UPSTREAM_PORT, M4_NID, M4_V4, MODES, PORT, V4_PORT, X_ADDR, X_L64, X_NET, X_V4, Bed,
                  counters, entry)
from .catalogue import (ATTACKS, COUNTED, DNS_CAP, DNS_DEADLINE_S, ONCE, SETTLE_S, V4_LINGER_S, V4_REPLAY_GAP_S, attack,
                        attack_ilnp, attack_slow_dns, attack_v4_replay, v4_via)
from .forge import forged_echo, forged_icmp, forged_lu, forged_udp, nonce_opt
from .report import report, summarise
from .runner import OPTIONS, Spec, describe, ensure_group, run, run_experiment
from .scripts import CLIENT, DNS_CLIENT, ECHO, SENDER, SLOW_DNS, UPSTREAM, V4_REPLAYER

__all__ = ["ATTACKS", "Bed", "CLIENT", "CLIENT_PPS", "COUNTED", "DNS_CAP", "DNS_CLIENT", "DNS_DEADLINE_S",
           "DNS_UPSTREAM_PORT", "ECHO", "M4_NID", "M4_V4", "MODES", "ONCE", "OPTIONS", "PORT", "SENDER", "SETTLE_S",
           "SLOW_DNS", "Spec", "UPSTREAM", "V4_LINGER_S", "V4_PORT", "V4_REPLAYER", "V4_REPLAY_GAP_S", "X_ADDR", "X_L64",
           "X_NET", "X_V4", "attack", "attack_ilnp", "attack_slow_dns", "attack_v4_replay", "counters", "describe",
           "ensure_group", "entry", "forged_echo", "forged_icmp", "forged_lu", "forged_udp", "nonce_opt", "report", "run",
           "run_experiment", "summarise", "v4_via"]
