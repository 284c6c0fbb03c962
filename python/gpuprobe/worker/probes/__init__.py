"""Probe families.

``*_specs`` modules declare the probes (ids, tiers, rules, parameters) and import nothing
heavy; ``*_run`` modules implement them with torch and are imported only to run a probe.
Families here: ``copy`` (data movement), ``rng`` (random generators), ``dtype`` (conversions).
"""
