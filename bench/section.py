#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""section.py BENCHMARKS.md SECTION.md - put a side bench's section into
BENCHMARKS.md now, in place of an older one with the same heading (its first
line), or at the end; bench/report.py copies bench/sections/*.md the same way
when it rewrites the whole file."""
import sys

doc, sec = open(sys.argv[1]).read(), open(sys.argv[2]).read().rstrip("\n") + "\n\n"
head = sec.split("\n", 1)[0]
if head in doc:
    start = doc.index(head)
    nxt = doc.find("\n## ", start + len(head))
    doc = doc[:start] + sec + (doc[nxt + 1:] if nxt >= 0 else "")
else:
    doc = doc.rstrip("\n") + "\n\n" + sec
open(sys.argv[1], "w").write(doc)
