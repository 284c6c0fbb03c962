"""optim family: torch.optim's for-loop, foreach and fused steps against float64, and
GradScaler's rules.

``specs`` declares the probes; ``run`` holds the optimizer configurations, the float64
reference and the judge.
"""
