"""Probe families, one package each (``probes/<family>/``).

A family's ``specs`` module declares its probes (ids, tiers, rules, parameters) and imports
nothing heavy; ``run`` and the family's other modules implement them with torch and are
imported only to run a probe. Each family's ``__init__`` says what the family owns. The
catalog lists every family's spec function in one place
(``gpuprobe.worker.catalog.FAMILY_SPECS``).

Families: ``copy`` (data movement), ``rng`` (random generators), ``dtype`` (conversions), ``ops``
(reductions, elementwise, layout, matmul), ``nn`` (convolution, attention, autocast), ``alloc``
(the caching allocator and memory limits), ``pipeline`` (DataLoader, Accelerate, serialization),
``dist`` (peer copies and collectives), ``soak`` (load over time), ``sweep`` (PyTorch's operator
database against float64), ``width`` (tensors past the index-width boundaries), ``compile``
(``torch.compile`` against eager), ``graph`` (CUDA graphs), ``optim`` (optimizer steps),
``train`` (whole training steps) and ``fault`` (deliberate faults that prove the isolation, run
only when named).

Shared by several families: ``children`` (child processes: start, wait, read their report)
and ``precision`` (the TF32 switch). Every module imports what it uses at its top and uses
only the public names of the others (``tests/python/test_probe_layout.py``).
"""
