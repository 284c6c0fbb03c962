//! Stack fingerprint: sysfs/procfs readers behind a root path, library discovery, and parsers for pasted tool output
