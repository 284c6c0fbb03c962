"""compile family: PyTorch's operator database through ``torch.compile`` against eager
and float64, and the compiled step under ambient state.

``specs`` declares the probes; ``run`` builds, compiles and judges the database's entries
as programs; ``ambient`` runs ``compile.ambient`` (one training step compiled under precision
and autocast states in turn); ``coverage`` prints the coverage table of ``docs/probes.md``.
"""
