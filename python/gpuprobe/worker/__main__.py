"""``python -m gpuprobe.worker --plan PLAN --event-fd N``: the worker, for tests and debugging."""

import sys

from gpuprobe.worker.main import main

sys.exit(main(sys.argv[1:]))
