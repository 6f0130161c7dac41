#!/usr/bin/env python3
"""put_section.py DOC SECTION: put the section (a markdown file whose first
line is its "## " heading) into DOC now, in place of the section of the same
heading, or at the end; the side benches (dict.sh, tiers.sh) use it so that
BENCHMARKS.md has their figures before the next make bench, whose
report.py copies bench/sections/*.md in again."""
import sys

doc, sec = open(sys.argv[1]).read(), open(sys.argv[2]).read()
head = sec.split("\n", 1)[0]
if head in doc:
    start = doc.index(head)
    nxt = doc.find("\n## ", start + len(head))
    doc = doc[:start] + sec + (doc[nxt + 1:] if nxt >= 0 else "")
else:
    doc = doc.rstrip("\n") + "\n\n" + sec
open(sys.argv[1], "w").write(doc)
