"""ilnp-lab: namespaced testbeds, traffic, captures and analysis for ILNPv6."""
