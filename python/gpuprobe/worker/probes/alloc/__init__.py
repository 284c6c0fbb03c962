"""alloc family: device memory as the framework's caching allocator hands it out.

``specs`` declares the probes; ``run`` implements the allocator probes (out-of-memory
recovery, usable memory, the largest allocation, fragmentation, stream reuse, allocator
settings) and ``stress`` the allocator under concurrent load; ``child`` is the fresh process
in which allocator settings read at start-up take effect.
"""
