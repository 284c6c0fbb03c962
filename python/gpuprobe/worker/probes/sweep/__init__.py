"""sweep family: PyTorch's operator database, operator by operator, against float64.

``specs`` declares the probes (static and framework-dependent); ``db`` reads the operator
database; ``cases`` turns its samples into cases (transforms, variants, devices); ``ref``
is the float64 reference process; ``oracle`` judges one output against its reference;
``run`` drives an operator's cases; ``coverage`` runs ``sweep.opdb`` and prints the
coverage table of ``docs/probes.md``. The compile, graph, optim and train families judge
with ``oracle`` too.
"""
