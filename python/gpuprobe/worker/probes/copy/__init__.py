"""copy family: bit-exact data movement between host and device, and between devices.

``specs`` declares the probes; ``run`` implements them (``send_to_device`` is shared with the
pipeline family).
"""
