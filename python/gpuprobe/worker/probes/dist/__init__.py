"""dist family: several GPUs of one host working together (peer copies, collectives).

``specs`` declares the probes; ``run`` implements them and starts one ``child`` process per
rank for the collectives.
"""
