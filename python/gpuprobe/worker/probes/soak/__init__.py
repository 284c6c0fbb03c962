"""soak family: sentinel probes run cold, then after sustained load.

``specs`` declares the probe; ``run`` runs the sentinels (other families' implementations)
around the load.
"""
