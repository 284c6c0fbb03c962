"""graph family: CUDA graphs and ``torch.compile(mode="reduce-overhead")`` against eager
and float64.

``specs`` declares the probes; ``run`` holds the workloads, the capture and replay, and the
judge.
"""
