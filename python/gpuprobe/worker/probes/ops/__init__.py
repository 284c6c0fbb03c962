"""ops family: PyTorch operations (reductions, elementwise, layout, GEMMs) against trusted
references.

``specs`` declares the probes and the tolerance rule other families reuse; ``run``
implements them (the nn family reuses its accumulators and precision helpers).
"""
