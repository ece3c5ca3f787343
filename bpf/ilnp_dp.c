// SPDX-License-Identifier: (GPL-2.0 OR MIT)
/*
 * The object ilnpd loads: both tc programs (and the RFC 6069 hints' sock_ops
 * program) in one ELF so they share one set of maps (ilnp_common.h). build.rs
 * compiles this file twice: plain, and with -DILNP_PIN_MAPS for a daemon that
 * pins its maps.
 */
#include "ilnp_egress.c"
#include "ilnp_ingress.c"
#include "ilnp_sockops.c"

char _license[] SEC("license") = "Dual MIT/GPL";
