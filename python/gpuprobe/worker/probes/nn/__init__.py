"""nn family: convolutions, a small VAE, attention and autocast on the device under test.

``specs`` declares the probes; ``run`` implements them; ``sdpa_matrix`` is the attention
matrix's design (pure Python: the catalog and the run read it).
"""
