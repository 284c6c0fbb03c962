"""Probe families.

``*_specs`` modules declare the probes (ids, tiers, rules, parameters) and import nothing
heavy; ``*_run`` modules implement them with torch and are imported only to run a probe.
Families: ``copy`` (data movement), ``rng`` (random generators), ``dtype`` (conversions), ``ops``
(reductions, elementwise, layout, matmul), ``nn`` (convolution, attention, autocast), ``alloc``
(the caching allocator and memory limits), ``pipeline`` (DataLoader, Accelerate, serialization),
``dist`` (peer copies and collectives), ``soak`` (load over time) and ``fault`` (deliberate faults
that prove the isolation, run only when named).
"""
