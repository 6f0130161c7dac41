#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""fs_model.py - a model-based test of a file system: random sequences of
file operations run on the directory under test and on a reference
directory (tmpfs) side by side; after every step both trees must agree in
names, types, modes, sizes, link counts, hard-link groups, symlink targets,
contents, and every operation must fail or succeed alike (same errno).

Files under test are read with O_DIRECT where the file system allows it,
so the check sees what the file system holds and not the kernel's page
cache; with CACHED, through the page cache instead, so the check sees what
programs see: a cache the kernel kept stale would show there (uzram's file
system lets the kernel keep pages and attributes, fs/session.c).

With EVERY > 1 the trees are compared only every EVERY steps, so that
operations meet state the file system has not been asked to read back
yet (fs/bmap.c's staged block, a cache).

usage: fs_model.py TEST_DIR REF_DIR SEED STEPS [EVERY [cached]]
"""
import ctypes
import errno
import os
import random
import stat
import sys

libc = ctypes.CDLL(None, use_errno=True)
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
PUNCH = 0x01 | 0x02  # FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE
FILES = ["f0", "f1", "f2", "f3", "d0/f0", "d0/f1", "d1/f0", "d0/d2/f0"]
EXTRA = ["g0", "g1", "g2", "d0/g0", "d1/g1", "d0/d2/g2"]  # links, mostly
DIRS = ["d0", "d1", "d0/d2"]
NAMES = FILES + EXTRA + DIRS


def c_call(fn, *args):
    if fn(*args) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def renameat2(src, dst, flags):
    c_call(libc.renameat2, -100, src.encode(), -100, dst.encode(), flags)


def punch(path, off, length):
    fd = os.open(path, os.O_WRONLY)
    try:
        c_call(libc.fallocate, fd, PUNCH, ctypes.c_long(off),
               ctypes.c_long(length))
    finally:
        os.close(fd)


def data_for(rng, n):
    kind = rng.randrange(3)
    if kind == 0:
        return rng.randbytes(n)
    if kind == 1:
        return bytes([rng.randrange(256)]) * n
    word = rng.randbytes(rng.randrange(1, 40))
    return (word * (n // len(word) + 1))[:n]


def write(path, off, data, flags):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o644)
    try:
        if flags & os.O_APPEND:
            os.write(fd, data)
        else:
            os.pwrite(fd, data, off)
    finally:
        os.close(fd)


def pick_op(rng):
    f, g = rng.choice(FILES + EXTRA[:3]), rng.choice(NAMES)
    off = rng.choice([0, rng.randrange(70000), rng.randrange(400000)])
    n = rng.choice([1, rng.randrange(1, 5000), rng.randrange(1, 140000)])
    k = rng.randrange(100)
    if k < 28:
        flags = rng.choice([0, 0, 0, os.O_APPEND, os.O_TRUNC])
        return ("write", f, off, data_for(rng, n), flags)
    if k < 36:
        return ("truncate", f, rng.choice([0, off, n]))
    if k < 48:
        return ("rename", rng.choice(NAMES), g, rng.choice([0, 0, 1, 2]))
    if k < 60:
        return ("link", f, rng.choice(EXTRA))
    if k < 67:
        return ("unlink", rng.choice(FILES + EXTRA))
    if k < 71:
        return ("symlink", "t" * rng.randrange(1, 50), rng.choice(FILES))
    if k < 76:
        # set-user-ID and set-group-ID modes too: the writes, truncates
        # and punches after them must clear the bits as tmpfs does
        return ("chmod", f, rng.choice([0o700, 0o755, 0o744, 0o2755, 0o1777,
                                        0o4755, 0o6745, 0o6775]))
    if k < 86:
        return ("punch", f, off, n)
    if k < 97:
        return ("mkdir", rng.choice(DIRS))
    return ("rmdir", rng.choice(DIRS))


def apply(root, op):
    """Run op under root; None on success, else the errno."""
    p = lambda rel: os.path.join(root, rel)
    try:
        name = op[0]
        if name == "write":
            write(p(op[1]), op[2], op[3], op[4])
        elif name == "truncate":
            os.truncate(p(op[1]), op[2])
        elif name == "rename":
            renameat2(p(op[1]), p(op[2]), op[3])
        elif name == "link":
            os.link(p(op[1]), p(op[2]))
        elif name == "unlink":
            os.unlink(p(op[1]))
        elif name == "symlink":
            os.symlink(op[1], p(op[2]))
        elif name == "chmod":
            os.chmod(p(op[1]), op[2])
        elif name == "punch":
            punch(p(op[1]), op[2], op[3])
        elif name == "mkdir":
            os.mkdir(p(op[1]), 0o755)
        elif name == "rmdir":
            os.rmdir(p(op[1]))
    except OSError as e:
        return e.errno
    return None


def read_file(path, direct):
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
    try:
        out = []
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                return b"".join(out)
            out.append(b)
    finally:
        os.close(fd)


def snapshot(root, direct):
    """Everything the model compares, by relative path."""
    tree, inodes = {}, {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            entry = [stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode),
                     st.st_nlink]
            if stat.S_ISREG(st.st_mode):
                entry += [st.st_size, read_file(path, direct)]
                inodes.setdefault(st.st_ino, []).append(rel)
            elif stat.S_ISLNK(st.st_mode):
                entry += [st.st_size, os.readlink(path)]
            tree[rel] = entry
    links = sorted(sorted(v) for v in inodes.values())
    return tree, links


def describe(op):
    if op[0] == "write":
        return "write %s off=%d len=%d flags=%#o" % (op[1], op[2],
                                                     len(op[3]), op[4])
    return " ".join(str(x) for x in op)


def first_difference(a, b):
    for rel in sorted(set(a) | set(b)):
        if a.get(rel) != b.get(rel):
            ea, eb = a.get(rel), b.get(rel)
            if ea and eb and len(ea) == 5 and ea[:4] == eb[:4]:
                i = next(i for i in range(len(ea[4]))
                         if ea[4][i] != eb[4][i])
                return "%s: contents differ from byte %d" % (rel, i)
            short = lambda e: e if e is None else e[:4]
            return "%s: %s (test) vs %s (reference)" % (rel, short(ea),
                                                         short(eb))
    return "hard-link groups differ"


def main():
    test, ref, seed, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
        int(sys.argv[4])
    every = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    direct = not (len(sys.argv) > 6 and sys.argv[6] == "cached")
    rng = random.Random(seed)
    history = []
    os.umask(0o022)
    for step in range(steps):
        op = pick_op(rng)
        history.append(describe(op))
        rt, rr = apply(test, op), apply(ref, op)
        if rt != rr:
            sys.exit("seed %d step %d: %s: %s (test) vs %s (reference)\n"
                     "history:\n  %s" % (seed, step, describe(op),
                                         rt and errno.errorcode[rt],
                                         rr and errno.errorcode[rr],
                                         "\n  ".join(history[-15:])))
        if (step + 1) % every and step + 1 < steps:
            continue
        st, sr = snapshot(test, direct), snapshot(ref, False)
        if st != sr:
            sys.exit("seed %d step %d: after %s: %s\nhistory:\n  %s" %
                     (seed, step, describe(op), first_difference(st[0], sr[0])
                      if st[0] != sr[0] else "hard-link groups differ",
                      "\n  ".join(history[-max(15, every):])))
    print("seed %d: %d steps agree" % (seed, steps))


if __name__ == "__main__":
    main()
