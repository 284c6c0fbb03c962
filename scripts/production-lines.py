#!/usr/bin/env python3
"""Counts a Rust source tree's production lines: usage `production-lines.py DIR`.

Prints `DIR ALL CODE`: ALL is every line outside `#[cfg(test)]` items; CODE leaves out blank
and comment lines too (`//`, `///`, `//!`). The binary crate's thinness is measured as CODE of
`crates/gpuprobe/src` (bench/RESULTS.md, "Crate sizes").
"""
import sys, os, re
def count(path):
    src = open(path).read().split('\n')
    out_all = out_nb = 0
    i = 0; n = len(src)
    while i < n:
        line = src[i]
        if line.strip().startswith('#[cfg(test)]'):
            # skip the next item: find first line with '{' or ';' and match braces
            j = i + 1
            depth = 0; started = False
            while j < n:
                for ch in src[j]:
                    if ch == '{': depth += 1; started = True
                    elif ch == '}': depth -= 1
                if (started and depth == 0) or (not started and src[j].rstrip().endswith(';')):
                    break
                j += 1
            i = j + 1
            continue
        out_all += 1
        s = line.strip()
        if s and not s.startswith('//'):
            out_nb += 1
        i += 1
    return out_all, out_nb
root = sys.argv[1]
ta = tn = 0
for d, _, fs in os.walk(root):
    for f in fs:
        if f.endswith('.rs'):
            a, b = count(os.path.join(d, f)); ta += a; tn += b
print(root, ta, tn)
