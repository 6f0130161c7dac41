#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""fs_staged.py - every operation that meets a file whose last, partial
block uzram's file system may still hold staged (fs/bmap.c): the file is
written in pieces as tar writes, then one operation comes before anything
reads it back, then one more write. The same runs on a reference
directory (tmpfs); at the end both trees must hold the same bytes, read
with O_DIRECT under test so that the kernel's page cache does not answer.

usage: fs_staged.py TEST_DIR REF_DIR
"""
import ctypes
import mmap
import os
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
PUNCH = 0x01 | 0x02  # FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE


def fallocate(fd, mode, off, length):
    if libc.fallocate(fd, mode, ctypes.c_long(off), ctypes.c_long(length)) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def pattern(n, seed):
    return bytes((i * 7 + seed) & 0xff for i in range(n))


# name: what happens to the file (its fd, its path, the directory)
CASES = {
    "trunc_below": lambda fd, p, d: os.ftruncate(fd, 5000),
    "trunc_inside": lambda fd, p, d: os.ftruncate(fd, 66000),
    "trunc_inside_grow": lambda fd, p, d: (os.ftruncate(fd, 66000),
                                           os.ftruncate(fd, 90000)),
    "trunc_up": lambda fd, p, d: os.ftruncate(fd, 200000),
    "punch_inside": lambda fd, p, d: fallocate(fd, PUNCH, 66000, 1500),
    "punch_all": lambda fd, p, d: fallocate(fd, PUNCH, 0, 1 << 20),
    "alloc_after": lambda fd, p, d: fallocate(fd, 0, 0, 300000),
    "write_inside": lambda fd, p, d: os.pwrite(fd, b"M" * 100, 66000),
    "write_before": lambda fd, p, d: os.pwrite(fd, b"B" * 5000, 1000),
    "write_far": lambda fd, p, d: os.pwrite(fd, b"F" * 10, 500000),
    "write_other": lambda fd, p, d: open(os.path.join(d, "other"),
                                         "ab").write(b"o" * 3000),
    "append_other_fd": lambda fd, p, d: open(p, "ab").write(b"A" * 777),
    "link_write": lambda fd, p, d: (os.link(p, p + ".ln"),
                                    open(p + ".ln", "ab").write(b"L" * 99)),
    "rename": lambda fd, p, d: os.rename(p, p + ".mv"),
    "unlink_open": lambda fd, p, d: os.unlink(p),
    "unlink_last": lambda fd, p, d: None,  # unlinked after its last write
    "mmap_read": lambda fd, p, d: mmap.mmap(fd, 0, prot=mmap.PROT_READ)[:10],
    "seek_data": lambda fd, p, d: os.lseek(fd, 65536, os.SEEK_DATA),
}


def run(root):
    kept = {}
    for name, op in sorted(CASES.items()):
        p = os.path.join(root, name)
        fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        # 67,500 bytes in tar's 10 KiB pieces: its last block partial
        for off in range(0, 67500, 10240):
            os.pwrite(fd, pattern(min(10240, 67500 - off), off), off)
        op(fd, p, root)
        end = os.fstat(fd).st_size
        os.pwrite(fd, b"E" * 321, end)  # and one more write at the end
        if name == "unlink_open":  # read it back through the open fd
            kept[name] = os.pread(fd, 1 << 20, 0)
        if name == "unlink_last":  # gone with its last block unread
            os.unlink(p)
            os.close(fd)
            time.sleep(0.2)  # the kernel's FORGET frees the node
            continue
        os.close(fd)
    return kept


def reuse(root):
    """Blocks freed must read as zeros when a file takes them again (a
    staged block written after its file let it go would show here)."""
    for name in os.listdir(root):
        os.unlink(os.path.join(root, name))
    fd = os.open(os.path.join(root, "zeros"), os.O_RDWR | os.O_CREAT, 0o644)
    fallocate(fd, 0, 0, 64 << 20)
    os.close(fd)
    data = tree(root, True, {})["zeros"]
    if data.count(0) != len(data):
        sys.exit("a block taken again holds bytes from before, at byte %d"
                 % next(i for i, c in enumerate(data) if c))


def tree(root, direct, kept):
    out = dict(kept)
    for name in sorted(os.listdir(root)):
        fd = os.open(os.path.join(root, name),
                     os.O_RDONLY | (os.O_DIRECT if direct else 0))
        chunks = []
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            chunks.append(b)
        os.close(fd)
        out[name] = b"".join(chunks)
    return out


def main():
    test, ref = sys.argv[1], sys.argv[2]
    a = tree(test, True, run(test))
    b = tree(ref, False, run(ref))
    for name in sorted(set(a) | set(b)):
        x, y = a.get(name), b.get(name)
        if x != y:
            if x is None or y is None:
                sys.exit("%s: only in %s" % (name, "reference" if x is None
                                             else "test"))
            i = next((i for i in range(min(len(x), len(y))) if x[i] != y[i]),
                     min(len(x), len(y)))
            sys.exit("%s: %d bytes against %d, first difference at byte %d"
                     % (name, len(x), len(y), i))
    reuse(test)
    print("%d files agree; blocks taken again read as zeros" % len(a))


if __name__ == "__main__":
    main()
