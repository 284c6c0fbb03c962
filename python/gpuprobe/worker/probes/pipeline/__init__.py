"""pipeline family: the data path of a training job (DataLoader, Accelerate, serialization).

``specs`` declares the probes; ``run`` implements them; ``data`` is the dataset, in a module
of its own so that DataLoader worker processes can import it.
"""
