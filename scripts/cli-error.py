#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""cli-error.py [FILE...]: turn the program's hand-typed error prefixes
into cli_error() calls (cli/base/base.h), in place.

    fprintf(stderr, "uzram mount: bad size '%s'\\n", arg);
 -> cli_error("mount", "bad size '%s'", arg);

cli_error() prints "uzram CMD: ", the message and a newline, so the output
is the same byte for byte. A call is rewritten only when its format is
string literals alone, the first starting with "uzram CMD: " and the last
ending with "\\n" (a message finished by that call); any other (a message
that later fprintf()s continue) is left as it is and named on stderr.
Re-run it on code merged later: it changes nothing already converted.
With no FILE, every .c file under cli/.
"""
import glob
import re
import sys

START = re.compile(r'fprintf\(\s*stderr,\s*"uzram ([a-z-]+): ')


def literal_end(s, i):
    """s[i] is '"': the index after the closing quote."""
    i += 1
    while s[i] != '"':
        i += 2 if s[i] == '\\' else 1
    return i + 1


def convert(text, path):
    out, pos, n = [], 0, 0
    for m in START.finditer(text):
        if m.start() < pos:
            continue
        # The format: string literals and the blanks between them.
        i = m.end() - len('"uzram ') - len(m.group(1)) - 2
        lits = []
        while True:
            j = literal_end(text, i)
            lits.append((i, j))
            k = j
            while text[k] in ' \t\n':
                k += 1
            if text[k] != '"':
                break
            i = k
        after = text[k]
        last_i, last_j = lits[-1]
        if after not in ',)' or not text[last_i:last_j].endswith('\\n"'):
            line = text.count('\n', 0, m.start()) + 1
            print(f'cli-error.py: {path}:{line}: left as it is', file=sys.stderr)
            continue
        first_i = lits[0][0]
        prefix_len = len('"uzram ') + len(m.group(1)) + 2
        fmt = text[first_i:last_j]
        # Drop "uzram CMD: " from the first literal, the "\n" from the last.
        fmt = '"' + fmt[prefix_len:]
        fmt = fmt[:-3] + '"'
        out.append(text[pos:m.start()])
        out.append(f'cli_error("{m.group(1)}", {fmt}')
        pos = last_j
        n += 1
    out.append(text[pos:])
    return ''.join(out), n


def main():
    files = sys.argv[1:] or sorted(glob.glob('cli/**/*.c', recursive=True))
    total = 0
    for path in files:
        with open(path) as f:
            text = f.read()
        new, n = convert(text, path)
        # A format left empty ("" after the prefix went) stays valid C.
        if n:
            with open(path, 'w') as f:
                f.write(new)
            total += n
    print(f'cli-error.py: {total} calls converted', file=sys.stderr)


if __name__ == '__main__':
    main()
