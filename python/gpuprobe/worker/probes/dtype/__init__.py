"""dtype family: the conversion matrix between dtypes, measured bit for bit.

``specs`` declares the probes; ``run`` implements them (``build_inputs`` is copied into
repro scripts).
"""
