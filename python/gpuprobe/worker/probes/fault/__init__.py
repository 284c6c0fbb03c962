"""fault family: deliberate real faults that prove the isolation (run only when named).

``specs`` declares the probes; ``run`` triggers the faults.
"""
