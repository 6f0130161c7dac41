#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""fs_diff.py - differential random tester: uzram's own FUSE file system vs tmpfs.

The same random operations go to a directory on a fresh `uzram mount --via fs`
and to a directory on tmpfs; after every step the results (value or errno) and
then the whole trees (names, types, sizes, modes, nlink, owners, link groups,
symlink targets, contents, user.* xattrs, SEEK_DATA/SEEK_HOLE maps) are
compared. On a divergence the op list since the last reset is minimised
(ddmin, replayed on fresh subdirectories) and written to the log.

  fs_diff.py diff    --seed N --ops N [--size 512M] [--cluster 4K]
  fs_diff.py enospc  --seed N --ops N --size 64M      (uzram vs a byte model)
  fs_diff.py conc    --seed N --procs 3 --ops N        (concurrent writers)

Mounts are made and removed by the script itself (as root: tmpfs with
mount -t tmpfs; as a user: a directory under /dev/shm). It found, on
2026-12-05, that atime never moved and that a lookup of a name over 255
bytes was ENOENT (both fixed, t66); what stays apart from tmpfs is filtered
as "known" where it is compared (uzram-mount(1) lists it). Exit status 1
when anything diverged. make test runs a few seeds (t63-fs-diff.sh).
"""
import argparse, ctypes, ctypes.util, errno, gc, hashlib, json, mmap, os, random
import shutil, stat, subprocess, sys, tempfile, time, traceback

HERE = os.path.dirname(os.path.abspath(__file__))
UZRAM = os.environ.get("UZRAM", os.path.join(HERE, "..", "..", "build", "uzram"))
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
AT_FDCWD = -100
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE = 1, 2, 0x10
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
SEEK_DATA, SEEK_HOLE = 3, 4
PAGE = 4096
ROOT = os.geteuid() == 0


def ename(e):
    return errno.errorcode.get(e, str(e))


# ---------------------------------------------------------------- data
def gen_data(kind, seed, n):
    r = random.Random(seed)
    if n == 0:
        return b""
    if kind == "zero":
        return bytes(n)
    if kind == "fill":
        return bytes([r.randrange(1, 256)]) * n
    if kind == "text":
        s = ("%x-" % r.getrandbits(40)).encode() * 8
        return (s * (n // len(s) + 1))[:n]
    if kind == "mix":
        out = bytearray()
        while len(out) < n:
            k = r.choice(["z", "r", "f"])
            m = r.choice([PAGE, 1000, 16384, 333])
            out += bytes(m) if k == "z" else (r.randbytes(m) if k == "r" else bytes([r.randrange(256)]) * m)
        return bytes(out[:n])
    return r.randbytes(n)


def h(b):
    return hashlib.sha1(b).hexdigest()[:16]


# ---------------------------------------------------------------- ops
FILES = ["a", "b", "c", "d", "e", "f"]
DIRS = ["D", "E"]


class Gen:
    """Makes random ops; looks at the reference side's tree to pick names."""

    def __init__(self, rng, bigmax):
        self.r = rng
        self.bigmax = bigmax

    def scan(self, ref):
        self.dirs, self.files, self.all = [""], [], []
        for dp, dn, fn in os.walk(ref):
            rel = os.path.relpath(dp, ref)
            rel = "" if rel == "." else rel
            for d in dn:
                self.dirs.append(os.path.join(rel, d))
                self.all.append(os.path.join(rel, d))
            for f in fn:
                q = os.path.join(rel, f)
                self.all.append(q)
                try:
                    if stat.S_ISREG(os.lstat(os.path.join(ref, q)).st_mode):
                        self.files.append(q)
                except OSError:
                    pass

    def path(self, ref, want=None):
        r = self.r
        dirs = self.dirs
        if want == "dir":
            base = r.choice(dirs)
            return os.path.join(base, r.choice(DIRS)) if base.count("/") < 2 or r.random() < 0.3 else base or "D"
        if want == "file" and self.files and r.random() < 0.8:
            return r.choice(self.files)
        if want == "any" and self.all and r.random() < 0.6:
            return r.choice(self.all)
        if r.random() < 0.03:
            return os.path.join("nodir", r.choice(FILES))
        base = r.choice(dirs) if r.random() < 0.4 else ""
        return os.path.join(base, r.choice(FILES + (DIRS if r.random() < 0.15 else [])))

    def size(self):
        r = self.r
        x = r.random()
        if x < 0.1:
            return r.choice([0, 1, 2, 7])
        if x < 0.45:
            return r.randrange(1, 9000)
        if x < 0.75:
            b = r.choice([4096, 16384, 65536, 131072])
            return max(0, b * r.randrange(1, 4) + r.randrange(-5, 6))
        if x < 0.95:
            return r.randrange(1, 300000)
        return r.randrange(1, self.bigmax)

    def off(self, cur):
        r = self.r
        x = r.random()
        if x < 0.15:
            return 0
        if x < 0.3:
            return cur
        if x < 0.45:
            return cur + r.randrange(1, 70000)
        if x < 0.7:
            b = r.choice([4096, 16384, 65536])
            return max(0, b * r.randrange(0, 40) + r.randrange(-3, 4))
        if x < 0.95:
            return r.randrange(0, 2 << 20)
        return r.randrange(0, 20 << 20)

    def data(self):
        return [self.r.choice(["rand", "rand", "zero", "fill", "text", "mix"]), self.r.getrandbits(32)]

    def op(self, ref, side):
        r = self.r
        self.scan(ref)
        p = self.path(ref, "file" if r.random() < 0.8 else "any")
        try:
            cur = os.lstat(os.path.join(ref, p)).st_size
        except OSError:
            cur = 0
        slot = r.randrange(4)
        if side.fds and r.random() < 0.8:
            slot = r.choice(sorted(side.fds))
        kinds = [("create", 6), ("pwrite", 14), ("pread", 4), ("truncate", 5), ("fallocate", 6),
                 ("mmapw", 4), ("mmapp", 2), ("rename", 5), ("link", 3), ("unlink", 4),
                 ("symlink", 2), ("readlink", 1), ("mkdir", 3), ("rmdir", 2), ("chmod", 2),
                 ("utime", 2), ("xattr", 4), ("cfr", 4), ("open", 7), ("fdwrite", 7), ("fdread", 5),
                 ("fdlseek", 3), ("fdtrunc", 2), ("fdfalloc", 2), ("close", 3), ("map", 2),
                 ("mapread", 3), ("mapwrite", 3), ("unmap", 1), ("mkfifo", 0.2), ("seek", 2),
                 ("mtime", 2), ("chown", 1 if ROOT else 0)]
        tot = sum(w for _, w in kinds)
        x = r.random() * tot
        for k, w in kinds:
            if x < w:
                break
            x -= w
        if k == "create":
            fl = r.choice(["trunc", "excl", "append", "plain", "wronly"])
            return dict(op=k, p=p, fl=fl, n=self.size() if r.random() < 0.8 else 0, d=self.data(),
                        mode=r.choice([0o644, 0o600, 0o755]))
        if k == "pwrite":
            return dict(op=k, p=p, off=self.off(cur), n=self.size(), d=self.data())
        if k == "pread":
            return dict(op=k, p=p, off=self.off(cur), n=self.size())
        if k == "truncate":
            return dict(op=k, p=p, len=r.choice([0, max(0, cur - r.randrange(1, 20000)), cur + r.randrange(1, 70000), self.off(cur)]))
        if k in ("fallocate", "fdfalloc"):
            mode = r.choice([0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                             FALLOC_FL_ZERO_RANGE, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE])
            o = self.off(cur) if r.random() < 0.5 else r.randrange(0, max(1, cur))
            d = dict(op=k, mode=mode, off=o, n=max(1, self.size()) if r.random() < 0.95 else 0)
            d.update(p=p) if k == "fallocate" else d.update(slot=slot)
            return d
        if k == "mmapw":
            return dict(op=k, p=p, off=r.randrange(0, max(1, cur)), n=self.size(), d=self.data(), sync=r.random() < 0.5)
        if k == "mmapp":
            return dict(op=k, p=p, off=r.randrange(0, max(1, cur)), n=self.size(), d=self.data())
        if k == "rename":
            q = self.path(ref) if r.random() < 0.85 else self.path(ref, "dir")
            return dict(op=k, p=p if r.random() < 0.8 else self.path(ref, "dir"), q=q,
                        fl=r.choice([0, 0, RENAME_NOREPLACE, RENAME_EXCHANGE]))
        if k == "link":
            return dict(op=k, p=p, q=self.path(ref))
        if k == "symlink":
            return dict(op=k, p=p, t=r.choice(["a", "../a", "D/b", "nowhere", "x" * r.randrange(1, 300)]))
        if k in ("unlink", "readlink", "seek"):
            return dict(op=k, p=p)
        if k in ("mkdir", "rmdir"):
            return dict(op=k, p=self.path(ref, "dir") if r.random() < 0.8 else p)
        if k == "chmod":
            return dict(op=k, p=p, mode=r.choice([0o644, 0o600, 0o000, 0o755, 0o4755, 0o2755, 0o2745, 0o1777, 0o444]))
        if k == "chown":
            return dict(op=k, p=p, uid=r.choice([0, 65534, 1000]), gid=r.choice([0, 65534, 1000]))
        if k == "utime":
            return dict(op=k, p=p, a=r.randrange(0, 2 ** 33) * 10 ** 9 + r.randrange(10 ** 9),
                        m=r.randrange(0, 2 ** 33) * 10 ** 9 + r.randrange(10 ** 9), nofollow=r.random() < 0.3)
        if k == "xattr":
            return dict(op=k, p=p, sub=r.choice(["set", "set", "create", "replace", "get", "list", "remove"]),
                        name="user." + r.choice(["x", "y", "long" * 20]),
                        val=[r.choice(["rand", "text", "zero"]), r.getrandbits(32), r.choice([0, 1, 10, 200, 4000])])
        if k == "cfr":
            return dict(op=k, p=p, q=self.path(ref), soff=r.randrange(0, max(1, cur + 5000)),
                        doff=self.off(0), n=self.size())
        if k == "open":
            fl = r.choice(["r", "w", "rw", "rwc", "wc", "wct", "a", "ac", "rwt", "dir", "nofollow", "wcx"])
            slot = r.randrange(4)
            return dict(op=k, p=p, slot=slot, fl=fl)
        if k == "fdwrite":
            return dict(op=k, slot=slot, pos=r.choice([None, None, self.off(cur)]), n=self.size(), d=self.data())
        if k == "fdread":
            return dict(op=k, slot=slot, pos=r.choice([None, self.off(cur)]), n=self.size())
        if k == "fdlseek":
            return dict(op=k, slot=slot, wh=r.choice([0, 1, 2, SEEK_DATA, SEEK_HOLE]), off=r.choice([0, 1, 5000, 16384, self.off(cur), -1]))
        if k == "fdtrunc":
            return dict(op=k, slot=slot, len=self.off(cur))
        if k == "close":
            return dict(op=k, slot=slot, sync=r.random() < 0.3)
        if k == "map":
            return dict(op=k, slot=slot, off=r.choice([0, 0, 4096, 16384]), n=r.choice([4096, 20000, 65536, 300000]))
        if k == "mapread":
            return dict(op=k, slot=slot, off=r.randrange(0, 300000), n=self.size())
        if k == "mapwrite":
            return dict(op=k, slot=slot, off=r.randrange(0, 300000), n=self.size(), d=self.data(), sync=r.random() < 0.3)
        if k == "unmap":
            return dict(op=k, slot=slot)
        if k == "mkfifo":
            return dict(op=k, p=p)
        if k == "mtime":
            # set an old mtime, do something, report whether mtime/ctime moved
            return dict(op=k, p=p, what=r.choice(["write", "trunc", "punch", "create_in", "unlink_in", "chmod", "setx", "mmap", "read"]),
                        n=self.size(), d=self.data())
        raise AssertionError(k)


def OPEN(p, fl, mode=0o777):
    return os.open(p, fl | os.O_NONBLOCK, mode)  # a fifo must not block


class Side:
    def __init__(self, root, emulate_zero=False):
        self.root = root
        self.emulate_zero = emulate_zero
        self.coarse = False
        self.fds = {}
        self.maps = {}

    def P(self, p):
        return os.path.join(self.root, p)

    def reset(self):
        gc.collect()  # views of a mapping left by an op refuse its close()
        for m in self.maps.values():
            try:
                m[0].close()
            except Exception:
                pass
            try:
                os.close(m[1])  # even when the mapping would not close
            except OSError:
                pass
        for fd in self.fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds, self.maps = {}, {}

    def apply(self, o):
        try:
            return self._apply(o)
        except OSError as e:
            return ("E", ename(e.errno))
        except (ValueError, OverflowError, TypeError) as e:
            return ("X", type(e).__name__)

    def _apply(self, o):
        k = o["op"]
        P = self.P
        if k == "create":
            fl = {"trunc": os.O_RDWR | os.O_CREAT | os.O_TRUNC, "excl": os.O_RDWR | os.O_CREAT | os.O_EXCL,
                  "append": os.O_WRONLY | os.O_CREAT | os.O_APPEND, "plain": os.O_RDWR | os.O_CREAT,
                  "wronly": os.O_WRONLY | os.O_CREAT}[o["fl"]]
            fd = OPEN(P(o["p"]), fl, o["mode"])
            try:
                n = os.write(fd, gen_data(*o["d"], o["n"])) if o["n"] else 0
                return ("ok", n, os.fstat(fd).st_size)
            finally:
                os.close(fd)
        if k == "pwrite":
            fd = OPEN(P(o["p"]), os.O_RDWR)
            try:
                return ("ok", os.pwrite(fd, gen_data(*o["d"], o["n"]), o["off"]), os.fstat(fd).st_size)
            finally:
                os.close(fd)
        if k == "pread":
            fd = OPEN(P(o["p"]), os.O_RDONLY)
            try:
                b = os.pread(fd, o["n"], o["off"])
                return ("ok", len(b), h(b))
            finally:
                os.close(fd)
        if k == "truncate":
            os.truncate(P(o["p"]), o["len"])
            return ("ok",)
        if k == "fallocate":
            fd = OPEN(P(o["p"]), os.O_RDWR)
            try:
                return self._falloc(fd, o)
            finally:
                os.close(fd)
        if k in ("mmapw", "mmapp"):
            fd = OPEN(P(o["p"]), os.O_RDWR)
            try:
                sz = os.fstat(fd).st_size
                if sz == 0 or o["n"] == 0:
                    return ("skip",)
                off = o["off"] % sz
                base = off & ~(PAGE - 1)
                n = min(o["n"], sz - off)
                m = mmap.mmap(fd, off - base + n, flags=mmap.MAP_SHARED if k == "mmapw" else mmap.MAP_PRIVATE,
                              prot=mmap.PROT_READ | mmap.PROT_WRITE, offset=base)
                before = h(m[off - base:off - base + n])
                m[off - base:off - base + n] = gen_data(*o["d"], n)
                if k == "mmapw" and o["sync"]:
                    m.flush()
                after = h(m[:])
                m.close()
                return ("ok", before, after)
            finally:
                os.close(fd)
        if k == "rename":
            r = libc.renameat2(AT_FDCWD, P(o["p"]).encode(), AT_FDCWD, P(o["q"]).encode(), o["fl"])
            if r < 0:
                return ("E", ename(ctypes.get_errno()))
            return ("ok",)
        if k == "link":
            os.link(P(o["p"]), P(o["q"]))
            return ("ok",)
        if k == "unlink":
            os.unlink(P(o["p"]))
            return ("ok",)
        if k == "symlink":
            os.symlink(o["t"], P(o["p"]))
            return ("ok",)
        if k == "readlink":
            return ("ok", os.readlink(P(o["p"])))
        if k == "mkdir":
            os.mkdir(P(o["p"]))
            return ("ok",)
        if k == "rmdir":
            os.rmdir(P(o["p"]))
            return ("ok",)
        if k == "chmod":
            os.chmod(P(o["p"]), o["mode"])
            return ("ok", oct(os.lstat(P(o["p"])).st_mode))
        if k == "chown":
            os.chown(P(o["p"]), o["uid"], o["gid"], follow_symlinks=False)
            return ("ok", oct(os.lstat(P(o["p"])).st_mode))
        if k == "utime":
            os.utime(P(o["p"]), ns=(o["a"], o["m"]), follow_symlinks=not o["nofollow"])
            st = os.stat(P(o["p"]), follow_symlinks=not o["nofollow"])
            return ("ok", st.st_atime_ns, st.st_mtime_ns)
        if k == "xattr":
            p, s, nm = P(o["p"]), o["sub"], o["name"]
            v = gen_data(o["val"][0], o["val"][1], o["val"][2])
            if s in ("set", "create", "replace"):
                fl = {"set": 0, "create": os.XATTR_CREATE, "replace": os.XATTR_REPLACE}[s]
                os.setxattr(p, nm, v, fl, follow_symlinks=False)
                return ("ok",)
            if s == "get":
                return ("ok", h(os.getxattr(p, nm, follow_symlinks=False)))
            if s == "list":
                return ("ok", sorted(os.listxattr(p, follow_symlinks=False)))
            os.removexattr(p, nm, follow_symlinks=False)
            return ("ok",)
        if k == "cfr":
            a = OPEN(P(o["p"]), os.O_RDONLY)
            try:
                b = OPEN(P(o["q"]), os.O_WRONLY)
                try:
                    return ("ok", os.copy_file_range(a, b, o["n"], o["soff"], o["doff"]))
                finally:
                    os.close(b)
            finally:
                os.close(a)
        if k == "open":
            if o["slot"] in self.fds:
                self._close(o["slot"])
            fl = {"r": os.O_RDONLY, "w": os.O_WRONLY, "rw": os.O_RDWR, "rwc": os.O_RDWR | os.O_CREAT,
                  "wc": os.O_WRONLY | os.O_CREAT, "wct": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                  "a": os.O_WRONLY | os.O_APPEND, "ac": os.O_RDWR | os.O_APPEND | os.O_CREAT,
                  "rwt": os.O_RDWR | os.O_TRUNC, "dir": os.O_RDONLY | os.O_DIRECTORY,
                  "nofollow": os.O_RDWR | os.O_NOFOLLOW, "wcx": os.O_WRONLY | os.O_CREAT | os.O_EXCL}[o["fl"]]
            self.fds[o["slot"]] = OPEN(P(o["p"]), fl, 0o644)
            return ("ok",)
        # the rest need a slot
        if k == "mkfifo":
            os.mkfifo(P(o["p"]))
            return ("ok",)
        if k == "seek":
            fd = OPEN(P(o["p"]), os.O_RDONLY | os.O_NONBLOCK)
            try:
                if stat.S_ISDIR(os.fstat(fd).st_mode):
                    return ("dir",)  # known: uzram ENXIO, tmpfs EINVAL
                sg = self.segs(fd)
                if self.coarse:
                    return ("ok", "coarse", self.holes_zero(fd, sg, os.fstat(fd).st_size))
                return ("ok", sg)
            finally:
                os.close(fd)
        if k == "mtime":
            return self._mtime(o)
        if k == "unmap":
            m = self.maps.pop(o["slot"], None)
            if m:
                m[0].close()
                os.close(m[1])
            return ("ok", m is not None)
        if k in ("mapread", "mapwrite"):
            if o["slot"] not in self.maps:
                return ("nomap",)
            m, fd, base = self.maps[o["slot"]]
            sz = os.fstat(fd).st_size
            lim = min(len(m), max(0, ((sz + PAGE - 1) & ~(PAGE - 1)) - base))
            if k == "mapwrite":
                lim = min(len(m), max(0, sz - base))
            if lim == 0:
                return ("skip", lim)
            a = o["off"] % lim
            n = min(o["n"], lim - a)
            if k == "mapread":
                return ("ok", n, h(m[a:a + n]))
            m[a:a + n] = gen_data(*o["d"], n)
            if o["sync"]:
                m.flush()
            return ("ok", n)
        if o["slot"] not in self.fds:
            return ("noslot",)
        fd = self.fds[o["slot"]]
        if k == "fdwrite":
            b = gen_data(*o["d"], o["n"])
            n = os.write(fd, b) if o["pos"] is None else os.pwrite(fd, b, o["pos"])
            return ("ok", n, os.lseek(fd, 0, 1), os.fstat(fd).st_size)
        if k == "fdread":
            b = os.read(fd, o["n"]) if o["pos"] is None else os.pread(fd, o["n"], o["pos"])
            return ("ok", len(b), h(b), os.lseek(fd, 0, 1))
        if k == "fdlseek":
            if o["wh"] in (SEEK_DATA, SEEK_HOLE):
                if stat.S_ISDIR(os.fstat(fd).st_mode):
                    return ("dir",)  # known: uzram ENXIO, tmpfs EINVAL
                if self.coarse:
                    try:
                        os.lseek(fd, o["off"], o["wh"])
                        return ("ok", "coarse")
                    except OSError as e:
                        return ("ok", "coarse") if e.errno == errno.ENXIO and o["off"] >= 0 and o["off"] < os.fstat(fd).st_size else ("E", ename(e.errno))
                    finally:
                        os.lseek(fd, max(0, o["off"]), 0)
            return ("ok", os.lseek(fd, o["off"], o["wh"]))
        if k == "fdtrunc":
            os.ftruncate(fd, o["len"])
            return ("ok", os.fstat(fd).st_size)
        if k == "fdfalloc":
            return self._falloc(fd, o)
        if k == "close":
            if o["sync"]:
                os.fsync(fd)
            self._close(o["slot"])
            return ("ok",)
        if k == "map":
            if o["slot"] in self.maps:
                old = self.maps.pop(o["slot"])
                old[0].close()
                os.close(old[1])
            import fcntl
            acc = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
            prot = mmap.PROT_READ | (mmap.PROT_WRITE if acc == os.O_RDWR else 0)
            sz = os.fstat(fd).st_size
            n = o["n"] if sz <= o["off"] else min(o["n"], sz - o["off"])
            m = mmap.mmap(fd, n, flags=mmap.MAP_SHARED, prot=prot, offset=o["off"])
            self.maps[o["slot"]] = (m, os.dup(fd), o["off"])
            return ("ok", acc == os.O_RDWR)
        raise AssertionError(k)

    def _close(self, slot):
        os.close(self.fds.pop(slot))

    def _falloc(self, fd, o):
        if not o["mode"] & FALLOC_FL_PUNCH_HOLE:
            self.coarse = True  # known: preallocated blocks are data on uzram, holes on tmpfs
        if self.emulate_zero and o["mode"] & FALLOC_FL_ZERO_RANGE and o["n"] > 0:
            # tmpfs has no ZERO_RANGE (uzram has): punch, then allocate
            r = libc.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, o["off"], o["n"])
            if r == 0:
                r = libc.fallocate(fd, o["mode"] & FALLOC_FL_KEEP_SIZE, o["off"], o["n"])
            if r < 0:
                return ("E", ename(ctypes.get_errno()))
            return ("ok", os.fstat(fd).st_size)
        if not o["mode"] & FALLOC_FL_PUNCH_HOLE:
            self.coarse = True  # known: preallocated blocks are data on uzram, holes on tmpfs
        r = libc.fallocate(fd, o["mode"], o["off"], o["n"])
        if r < 0:
            return ("E", ename(ctypes.get_errno()))
        return ("ok", os.fstat(fd).st_size)

    def _mtime(self, o):
        p = self.P(o["p"])
        old = 10 ** 9 * 1000000
        os.utime(p, ns=(old, old), follow_symlinks=False)
        st0 = os.lstat(p)
        time.sleep(0.01)
        w = o["what"]
        if w == "write":
            fd = OPEN(p, os.O_WRONLY)
            try:
                os.write(fd, gen_data(*o["d"], o["n"]))
            finally:
                os.close(fd)
        elif w == "trunc":
            os.truncate(p, o["n"])
        elif w == "punch":
            fd = OPEN(p, os.O_WRONLY)
            r = libc.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, max(1, o["n"]))
            e = ctypes.get_errno()
            os.close(fd)
            if r < 0:
                return ("E", ename(e))
        elif w == "create_in":
            os.close(os.open(os.path.join(p, "tmp_created"), os.O_CREAT | os.O_WRONLY))
            os.unlink(os.path.join(p, "tmp_created"))
        elif w == "unlink_in":
            os.mkdir(os.path.join(p, "tmp_dir"))
            os.utime(p, ns=(old, old))
            st0 = os.lstat(p)
            time.sleep(0.01)
            os.rmdir(os.path.join(p, "tmp_dir"))
        elif w == "read":
            fd = OPEN(p, os.O_RDONLY)
            try:
                os.read(fd, 10)  # EISDIR on a directory: the fd still closes
            finally:
                os.close(fd)
        elif w == "chmod":
            os.chmod(p, st0.st_mode & 0o7777)
        elif w == "setx":
            os.setxattr(p, "user.t", b"1")
        elif w == "mmap":
            fd = OPEN(p, os.O_RDWR)
            try:
                if os.fstat(fd).st_size == 0:
                    return ("skip",)
                m = mmap.mmap(fd, 1)
                m[0:1] = b"Z"
                m.flush()
                m.close()
            finally:
                os.close(fd)
        st1 = os.lstat(p)
        # atime left out: the page cache answers most reads without the
        # file system, which moves atime only for those that reach it
        return ("ok", st1.st_mtime_ns != st0.st_mtime_ns, st1.st_ctime_ns != st0.st_ctime_ns)

    @staticmethod
    def holes_zero(fd, segs, size):
        pos = 0
        for a, b in segs + [(size, size)]:
            while pos < a:
                n = min(a - pos, 1 << 20)
                if os.pread(fd, n, pos).count(0) != n:
                    return False
                pos += n
            pos = max(pos, b)
        return True

    @staticmethod
    def segs(fd):
        out = []
        pos = 0
        for _ in range(10000):
            try:
                d = os.lseek(fd, pos, SEEK_DATA)
            except OSError as e:
                if e.errno == errno.ENXIO:
                    break
                raise
            hh = os.lseek(fd, d, SEEK_HOLE)
            out.append((d, hh))
            pos = hh
        return out

    def snapshot(self):
        """The tree as a comparable dict."""
        snap = {}
        ino = {}
        for dp, dn, fn in os.walk(self.root, onerror=lambda e: snap.__setitem__("walkerr:" + os.path.relpath(e.filename, self.root), ename(e.errno))):
            dn.sort()
            for name in sorted(dn + fn):
                full = os.path.join(dp, name)
                rel = os.path.relpath(full, self.root)
                try:
                    st = os.lstat(full)
                except OSError as ex:
                    snap[rel] = "lstat:" + ename(ex.errno)
                    continue
                e = {"mode": oct(st.st_mode), "uid": st.st_uid, "gid": st.st_gid, "nlink": st.st_nlink}
                if not stat.S_ISDIR(st.st_mode):
                    e["size"] = st.st_size
                ino.setdefault(st.st_ino, []).append(rel)
                e["ino"] = st.st_ino
                if stat.S_ISLNK(st.st_mode):
                    e["target"] = os.readlink(full)
                else:
                    try:
                        e["xattr"] = {x: h(os.getxattr(full, x)) for x in sorted(os.listxattr(full)) if x.startswith("user.")}
                    except OSError as ex:
                        e["xattr"] = ename(ex.errno)
                if stat.S_ISREG(st.st_mode):
                    try:
                        fd = os.open(full, os.O_RDONLY)
                    except OSError as ex:
                        e["data"] = ename(ex.errno)
                    else:
                        try:
                            hs = hashlib.sha1()
                            first_nz = None
                            while True:
                                b = os.read(fd, 1 << 20)
                                if not b:
                                    break
                                hs.update(b)
                            e["data"] = hs.hexdigest()[:16]
                            e["segs"] = self.segs(fd)
                            e["holes_zero"] = self.holes_zero(fd, e["segs"], st.st_size)
                            e["blocks"] = st.st_blocks
                        finally:
                            os.close(fd)
                snap[rel] = e
        for rel, e in snap.items():
            if isinstance(e, dict) and "ino" in e:
                e["links"] = sorted(ino[e.pop("ino")])
        return snap


def canon_segs(segs):
    """Merge touching segments."""
    out = []
    for a, b in segs:
        if out and out[-1][1] >= a:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def diff_snap(a, b, cluster, relaxed=False):
    """Differences between the uzram tree a and the tmpfs tree b."""
    out = []
    for k in sorted(set(a) | set(b)):
        if k not in a or k not in b:
            out.append((k, "only in " + ("uzram" if k in a else "tmpfs")))
            continue
        ea, eb = a[k], b[k]
        if not isinstance(ea, dict) or not isinstance(eb, dict):
            if ea != eb:
                out.append((k, ea, eb))
            continue
        for f in sorted(set(ea) | set(eb)):
            va, vb = ea.get(f), eb.get(f)
            if f in ("blocks", "holes_zero"):
                continue
            if f == "segs" and va is not None and vb is not None:
                va, vb = canon_segs(va), canon_segs(vb)
                if (cluster > PAGE or relaxed) and va != vb:
                    # uzram maps whole clusters, tmpfs's mmap faults and our ZERO_RANGE
                    # emulation make data: only uzram's holes must read as zeros
                    if ea.get("holes_zero", True):
                        continue
            if va != vb:
                out.append((k, f, va, vb))
    return out


# ---------------------------------------------------------------- mounts
def sh(*a, **kw):
    return subprocess.run(a, check=True, **kw)


class Mounts:
    def __init__(self, size, cluster, extra=()):
        self.base = tempfile.mkdtemp(prefix="fsdiff-", dir=os.environ.get("TMPDIR", "/tmp"))
        self.uz = os.path.join(self.base, "uz")
        os.mkdir(self.uz)
        args = [UZRAM, "mount", "--size", size]
        if ROOT:
            args += ["--via", "fs"]
        if cluster:
            args += ["--cluster", cluster]
        args += list(extra) + [self.uz]
        sh(*args)
        if ROOT:
            self.tm = os.path.join(self.base, "tm")
            os.mkdir(self.tm)
            sh("mount", "-t", "tmpfs", "-o", "size=" + size + ",mode=0755", "tmpfs", self.tm)
            self.tm_mounted = True
        else:
            self.tm = tempfile.mkdtemp(prefix="fsdiff-tm-", dir="/dev/shm")
            self.tm_mounted = False

    def close(self):
        # a mapping whose close() was refused (a view of it still alive)
        # keeps the mount busy: collect, retry, and at last detach it
        for _ in range(30):
            gc.collect()
            if subprocess.run([UZRAM, "umount", self.uz], stderr=subprocess.DEVNULL).returncode == 0:
                break
            time.sleep(0.1)
        else:
            print("fs_diff: %s still busy after 3 s: detached" % self.uz, flush=True)
            subprocess.run(["umount", "-l", self.uz] if ROOT else ["fusermount3", "-uz", self.uz])
            subprocess.run([UZRAM, "umount", self.uz], stderr=subprocess.DEVNULL)
        if self.tm_mounted:
            subprocess.run(["umount", self.tm])
        else:
            shutil.rmtree(self.tm, ignore_errors=True)
        shutil.rmtree(self.base, ignore_errors=True)


def rmtree_side(root):
    for dp, dn, fn in os.walk(root):
        try:
            os.chmod(dp, 0o755)
        except OSError:
            pass
    shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------- diff run
class Runner:
    def __init__(self, m, cluster, log):
        self.m = m
        self.cluster = cluster
        self.log = log
        self.n = 0
        self.stats = {}

    def fresh(self):
        self.n += 1
        name = "run%d" % self.n
        a, b = os.path.join(self.m.uz, name), os.path.join(self.m.tm, name)
        os.mkdir(a)
        os.mkdir(b)
        os.chmod(a, 0o755)
        os.chmod(b, 0o755)
        self.relaxed = False
        sa, sb = Side(a), Side(b, emulate_zero=True)
        self.sides = [sa, sb]
        sa.coarse = sb.coarse = self.cluster > PAGE
        return sa, sb

    def drop(self, sa, sb):
        for s in (sa, sb):
            s.reset()
            rmtree_side(s.root)

    def step(self, sa, sb, o):
        if self.relaxed:
            sa.coarse = sb.coarse = True
        ra, rb = sa.apply(o), sb.apply(o)
        st = self.stats.setdefault(o["op"], {})
        st[ra[0]] = st.get(ra[0], 0) + 1
        if ra != rb:
            return ("result", ra, rb)
        if o["op"] in ("mmapw", "mmapp", "map", "mapread", "mapwrite", "mtime") or sa.coarse:
            self.relaxed = True
        d = diff_snap(sa.snapshot(), sb.snapshot(), self.cluster, self.relaxed)
        if d:
            return ("tree", d[:6])
        return None

    def replay(self, ops):
        sa, sb = self.fresh()
        try:
            for i, o in enumerate(ops):
                r = self.step(sa, sb, o)
                if r:
                    return i, r
            return None
        finally:
            self.drop(sa, sb)

    def ddmin(self, ops, budget=150):
        """Shrink ops while a replay still diverges (any divergence)."""
        first = self.replay(ops)
        if not first:
            return ops, None
        ops = ops[:first[0] + 1]
        res = first
        n = 2
        while len(ops) >= 2 and budget > 0:
            chunk = max(1, len(ops) // n)
            reduced = False
            for i in range(0, len(ops), chunk):
                cand = ops[:i] + ops[i + chunk:]
                if not cand:
                    continue
                budget -= 1
                r = self.replay(cand)
                if r:
                    ops, res = cand[:r[0] + 1], r
                    n = max(n - 1, 2)
                    reduced = True
                    break
                if budget <= 0:
                    break
            if not reduced:
                if chunk == 1:
                    break
                n = min(len(ops), n * 2)
        return ops, res


def run_diff(a):
    rng = random.Random(a.seed)
    m = Mounts(a.size, a.cluster)
    cl = {"4K": 4096, "8K": 8192, "16K": 16384, "32K": 32768, "64K": 65536}.get(a.cluster or "16K")
    log = open(a.log, "a")
    found = 0
    try:
        run = Runner(m, cl, log)
        g = Gen(rng, a.bigmax)
        sa, sb = run.fresh()
        hist = []
        for i in range(a.ops):
            o = g.op(sb.root, sb)
            hist.append(o)
            r = run.step(sa, sb, o)
            if r or len(hist) >= a.reset:
                if r:
                    found += 1
                    print("seed %d op %d DIVERGENCE %s" % (a.seed, i, json.dumps(r, default=str)[:600]), flush=True)
                    run.drop(sa, sb)
                    mini, res = run.ddmin(hist) if a.minimize else (hist, r)
                    log.write(json.dumps(dict(seed=a.seed, at=i, uid=os.geteuid(), cluster=a.cluster, first=r,
                                              minimal=mini, minres=res), default=str) + "\n")
                    log.flush()
                    print("  minimal (%d ops): %s\n  -> %s" % (len(mini), json.dumps(mini), json.dumps(res, default=str)[:800]), flush=True)
                else:
                    run.drop(sa, sb)
                sa, sb = run.fresh()
                hist = []
                if found >= a.maxfound:
                    break
        run.drop(sa, sb)
        if a.verbose:
            print(json.dumps(run.stats))
        print("seed %d: %d ops, %d divergences (uid %d, cluster %s)" % (a.seed, i + 1, found, os.geteuid(), a.cluster), flush=True)
    finally:
        for s in getattr(run, "sides", []):
            s.reset()
        m.close()
    return found


# ---------------------------------------------------------------- ENOSPC run
def run_enospc(a):
    """uzram (or tmpfs with --tmpfs) against a byte model: on ENOSPC nothing already written may change."""
    rng = random.Random(a.seed)
    m = Mounts(a.size, a.cluster, a.extra.split() if a.extra else ())
    root = m.tm if a.tmpfs else m.uz
    model = {}
    bad = 0
    nospc = 0
    try:
        for i in range(a.ops):
            name = "f%d" % rng.randrange(6)
            p = os.path.join(root, name)
            k = rng.choice(["write", "write", "write", "bigwrite", "trunc", "falloc", "punch", "unlink", "cfr"])
            cur = model.get(name)
            try:
                if k in ("write", "bigwrite"):
                    n = rng.randrange(1, 200000) if k == "write" else rng.randrange(1 << 20, 12 << 20)
                    off = rng.choice([0, len(cur or b""), rng.randrange(0, 30 << 20)])
                    d = gen_data(rng.choice(["rand", "rand", "mix", "text"]), rng.getrandbits(32), n)
                    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
                    if cur is None:
                        model[name] = cur = bytearray()
                    try:
                        done = 0
                        while done < n:
                            w = os.pwrite(fd, d[done:], off + done)
                            if len(cur) < off + done:
                                cur.extend(bytes(off + done - len(cur)))
                            cur[off + done:off + done + w] = d[done:done + w]
                            done += w
                    finally:
                        os.close(fd)
                elif k == "trunc" and cur is not None:
                    ln = rng.choice([0, len(cur) // 2, len(cur) + rng.randrange(1, 1 << 20)])
                    os.truncate(p, ln)
                    if ln < len(cur):
                        del cur[ln:]
                    else:
                        cur.extend(bytes(ln - len(cur)))
                elif k in ("falloc", "punch") and cur is not None:
                    off = rng.randrange(0, len(cur) + 100000)
                    n = rng.randrange(1, 8 << 20)
                    mode = 0 if k == "falloc" else FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
                    fd = os.open(p, os.O_RDWR)
                    try:
                        if libc.fallocate(fd, mode, off, n) < 0:
                            raise OSError(ctypes.get_errno(), "fallocate")
                    finally:
                        os.close(fd)
                    if k == "falloc":
                        if off + n > len(cur):
                            cur.extend(bytes(off + n - len(cur)))
                    else:
                        e = min(len(cur), off + n)
                        if off < e:
                            cur[off:e] = bytes(e - off)
                elif k == "unlink" and cur is not None:
                    os.unlink(p)
                    del model[name]
                elif k == "cfr" and cur is not None:
                    q = "f%d" % rng.randrange(6)
                    if q == name or q not in model:
                        continue
                    dst = model[q]
                    n = rng.randrange(1, 4 << 20)
                    doff = rng.choice([0, len(dst)])
                    fa, fb = os.open(p, os.O_RDONLY), os.open(os.path.join(root, q), os.O_WRONLY)
                    try:
                        done = 0
                        while done < n:
                            w = os.copy_file_range(fa, fb, n - done, done, doff + done)
                            if w == 0:
                                break
                            seg = cur[done:done + w]
                            if len(dst) < doff + done:
                                dst.extend(bytes(doff + done - len(dst)))
                            dst[doff + done:doff + done + w] = seg
                            done += w
                    finally:
                        os.close(fa)
                        os.close(fb)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    print("op %d %s %s: unexpected %s" % (i, k, name, ename(e.errno)))
                    bad += 1
                nospc += 1
            # check every file against the model
            for nm, c in model.items():
                with open(os.path.join(root, nm), "rb") as f:
                    got = f.read()
                if got != c:
                    bad += 1
                    j = next((x for x in range(min(len(got), len(c))) if got[x] != c[x]), min(len(got), len(c)))
                    print("seed %d op %d (%s on %s): %s differs from model: size %d vs model %d, first diff at %d"
                          % (a.seed, i, k, name, nm, len(got), len(c), j), flush=True)
                    model[nm] = bytearray(got)
            if a.verbose and i % 50 == 0:
                print(i, nospc, subprocess.run(["df", "-h", root], capture_output=True, text=True).stdout.split("\n")[1])
        print("enospc seed %d (%s): %d ops, %d ENOSPC, %d bad" % (a.seed, "tmpfs" if a.tmpfs else "uzram", a.ops, nospc, bad), flush=True)
    finally:
        m.close()
    return bad


# ---------------------------------------------------------------- concurrent
def conc_child(path, seed, ops, out):
    r = random.Random(seed)
    model = bytearray()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    fd2 = os.open(path, os.O_RDONLY)
    for i in range(ops):
        k = r.choice(["w", "w", "w", "t", "p", "m", "r", "z"])
        if k == "w":
            n = r.choice([r.randrange(1, 70000), r.randrange(1, 1 << 20)])
            off = r.choice([len(model), r.randrange(0, len(model) + 100000)])
            d = gen_data(r.choice(["rand", "mix", "text", "zero"]), r.getrandbits(32), n)
            assert os.pwrite(fd, d, off) == n
            if len(model) < off:
                model.extend(bytes(off - len(model)))
            model[off:off + n] = d
        elif k == "t":
            ln = r.randrange(0, len(model) + 50000)
            os.ftruncate(fd, ln)
            if ln < len(model):
                del model[ln:]
            else:
                model.extend(bytes(ln - len(model)))
        elif k in ("p", "z") and model:
            off, n = r.randrange(0, len(model)), r.randrange(1, 100000)
            mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE if k == "p" else FALLOC_FL_ZERO_RANGE
            if libc.fallocate(fd, mode, off, n) != 0:
                e = ctypes.get_errno()
                assert k == "z" and e == errno.EOPNOTSUPP, ename(e)  # tmpfs: no ZERO_RANGE
                continue
            e = min(len(model), off + n)
            model[off:e] = bytes(e - off)
            if k == "z" and off + n > len(model):
                model.extend(bytes(off + n - len(model)))
        elif k == "m" and len(model) > 10:
            off = r.randrange(0, len(model))
            n = min(r.randrange(1, 30000), len(model) - off)
            base = off & ~(PAGE - 1)
            mm = mmap.mmap(fd, off - base + n, offset=base)
            d = gen_data("rand", r.getrandbits(32), n)
            mm[off - base:off - base + n] = d
            mm.flush()
            mm.close()
            model[off:off + n] = d
        elif k == "r" and model:
            off = r.randrange(0, len(model))
            n = r.randrange(1, 200000)
            b = os.pread(fd2, n, off)
            if b != bytes(model[off:off + n]):
                out.write("child %s op %d: pread at %d differs\n" % (path, i, off))
    os.close(fd)
    os.close(fd2)
    with open(path, "rb") as f:
        got = f.read()
    if got != bytes(model):
        j = next((x for x in range(min(len(got), len(model))) if got[x] != model[x]), min(len(got), len(model)))
        out.write("child %s: final content differs: size %d model %d first diff %d\n" % (path, len(got), len(model), j))
        return 1
    return 0


def run_conc(a):
    m = Mounts(a.size, a.cluster)
    bad = 0
    try:
        for root in (m.uz, m.tm):
            pids = []
            for k in range(a.procs):
                pid = os.fork()
                if pid == 0:
                    rc = 1
                    try:
                        rc = conc_child(os.path.join(root, "p%d" % k), a.seed * 100 + k, a.ops, sys.stdout)
                    except Exception:
                        traceback.print_exc()
                    sys.stdout.flush()
                    os._exit(rc)
                pids.append(pid)
            for pid in pids:
                _, st = os.waitpid(pid, 0)
                if st:
                    bad += 1
            print("conc seed %d on %s: %d procs x %d ops, %d bad" % (a.seed, "uzram" if root == m.uz else "tmpfs", a.procs, a.ops, bad), flush=True)
    finally:
        m.close()
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["diff", "enospc", "conc"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ops", type=int, default=300)
    ap.add_argument("--size", default="512M")
    ap.add_argument("--cluster", default=None, help="uzram --cluster (default: uzram's own, 16K)")
    ap.add_argument("--bigmax", type=int, default=3 << 20)
    ap.add_argument("--reset", type=int, default=150, help="ops before starting a fresh tree")
    ap.add_argument("--maxfound", type=int, default=5)
    ap.add_argument("--no-minimize", dest="minimize", action="store_false")
    ap.add_argument("--log", default=os.path.join(HERE, "divergences.jsonl"))
    ap.add_argument("--procs", type=int, default=3)
    ap.add_argument("--tmpfs", action="store_true", help="enospc: run against tmpfs instead")
    ap.add_argument("--extra", default="", help="more uzram mount options")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    os.umask(0o022)
    import signal
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
    rc = {"diff": run_diff, "enospc": run_enospc, "conc": run_conc}[a.mode](a)
    sys.exit(1 if rc else 0)


if __name__ == "__main__":
    main()
