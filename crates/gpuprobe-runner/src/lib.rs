//! Workers: spawn, JSONL protocol, timeouts, crash capture, run directory
