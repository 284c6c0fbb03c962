"""width family: operations on tensors past the index-width boundaries.

``specs`` declares the probes; ``run`` plans memory and runs a probe's cases (in a fresh
``child`` process after a fault); ``cases`` and ``grid`` (the ``g16`` launch-geometry
cases) define the cases.
"""
