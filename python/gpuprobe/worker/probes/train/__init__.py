"""train family: whole training steps of two tiny models against float64.

``specs`` declares the probes; ``run`` holds the models, the training loop, the float64
reference, autocast's emulated rounding and the judge.
"""
