"""rng family: random generators on the device under test, judged statistically.

``specs`` declares the probes; ``run`` draws the samples and reports their statistics.
"""
