"""Mobile IPv6 (RFC 6275) as a lab component, the seeds' baseline run beside ILNPv6 (issue
#43). Not a product: enough of RFC 6275 for the seeds' handoffs, the kernel doing the data plane.

    mh.py       Mobility Header messages and the IPv6 packets carrying them, byte-exact
    rr.py       return routability: Kcn, nonces, keygen tokens, Kbm, the authenticator
    binding.py  binding cache, binding update list, sequence numbers, RFC 6275 / UMIP timers
    node.py     the roles (home agent, mobile node, correspondent) over raw MH sockets and the
                kernel configuration they drive (ip6ip6 tunnel, proxy NDP, xfrm ro states)

No IPsec between the mobile node and the home agent, as the seeds ran it (their BU is 110
bytes: no ESP). Needs a kernel with CONFIG_IPV6_MIP6 (Debian 12's 6.1 has it; this host's
does not): tests/test_mipv6_lab.py checks the formats on any kernel, the handoffs run in the
Debian 12 VM (scripts/qemu-debian12.sh --guest tests/system/mipv6_guest.py).
"""
