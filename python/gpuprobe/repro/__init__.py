"""Standalone repro scripts for failing probe results (``python -m gpuprobe.repro``).

The generator reads one ``ProbeResult`` and the run's ``plan.json``, finds the probe's
definition in the catalog and writes ``repro.py``: plain torch code that rebuilds the one
failing case (seed, shape, dtype, method, settings), runs it, compares with the probe's own
reference and prints ``REPRODUCED`` or ``NOT REPRODUCED``. The script never imports
gpuprobe: the small pure helpers it needs (the input patterns) are copied into it. See
``docs/repro.md``.
"""
