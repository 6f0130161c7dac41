#!/usr/bin/env python3
"""nbd_bad_client.py - a misbehaving NBD client for t50-bad-client.sh.

Speaks the NBD protocol (NetworkBlockDevice/nbd doc/proto.md) over raw
sockets with the Python standard library only, and breaks it on purpose:
one CASE per run. A few cases are well-behaved but reach what the real
clients do not: the NBD_OPT_EXPORT_NAME handshake, every command flag, and
racing sub-page writes from many connections (subpage-race, run by
t45-fio.sh). A case exits 0 when the server answered as the spec says
(or as the accepted alternatives listed with the case), 1 with a message
naming the check otherwise. Whether the server survived, and whether data
written before the case is unchanged, is checked by the calling script with
real clients.

    nbd_bad_client.py --socket PATH [--export NAME] [--pid PID] CASE

Transmission is always negotiated without structured replies, so every
reply is a simple reply and the parsing stays small.
"""

import argparse
import os
import socket
import struct
import sys
import threading
import time

# Handshake (proto.md "Newstyle negotiation", "Values").
NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
REPLY_MAGIC = 0x3E889045565A9
NBD_FLAG_FIXED_NEWSTYLE = 1 << 0
NBD_FLAG_NO_ZEROES = 1 << 1
NBD_FLAG_C_FIXED_NEWSTYLE = 1 << 0
NBD_FLAG_C_NO_ZEROES = 1 << 1

NBD_OPT_EXPORT_NAME = 1
NBD_OPT_ABORT = 2
NBD_OPT_LIST = 3
NBD_OPT_STARTTLS = 5
NBD_OPT_INFO = 6
NBD_OPT_GO = 7

NBD_REP_ACK = 1
NBD_REP_SERVER = 2
NBD_REP_INFO = 3
NBD_REP_FLAG_ERROR = 1 << 31
NBD_REP_ERR_UNSUP = NBD_REP_FLAG_ERROR | 1
NBD_REP_ERR_POLICY = NBD_REP_FLAG_ERROR | 2
NBD_REP_ERR_INVALID = NBD_REP_FLAG_ERROR | 3
NBD_REP_ERR_UNKNOWN = NBD_REP_FLAG_ERROR | 6
NBD_REP_ERR_TOO_BIG = NBD_REP_FLAG_ERROR | 9

NBD_INFO_EXPORT = 0

# Transmission flags.
NBD_FLAG_READ_ONLY = 1 << 1

# Transmission.
NBD_REQUEST_MAGIC = 0x25609513
NBD_SIMPLE_REPLY_MAGIC = 0x67446698
NBD_STRUCTURED_REPLY_MAGIC = 0x668E33EF

NBD_CMD_READ = 0
NBD_CMD_WRITE = 1
NBD_CMD_DISC = 2
NBD_CMD_FLUSH = 3
NBD_CMD_TRIM = 4
NBD_CMD_WRITE_ZEROES = 6
NBD_CMD_BLOCK_STATUS = 7

NBD_CMD_CACHE = 5

NBD_CMD_FLAG_FUA = 1 << 0
NBD_CMD_FLAG_NO_HOLE = 1 << 1
NBD_CMD_FLAG_FAST_ZERO = 1 << 4

NBD_FLAG_SEND_FLUSH = 1 << 2
NBD_FLAG_SEND_FUA = 1 << 3
NBD_FLAG_SEND_TRIM = 1 << 5
NBD_FLAG_SEND_WRITE_ZEROES = 1 << 6
NBD_FLAG_CAN_MULTI_CONN = 1 << 8
NBD_FLAG_SEND_CACHE = 1 << 10
NBD_FLAG_SEND_FAST_ZERO = 1 << 11

NBD_EPERM = 1
NBD_EIO = 5
NBD_ENOMEM = 12
NBD_EINVAL = 22
NBD_ENOSPC = 28
NBD_EOVERFLOW = 75
NBD_ENOTSUP = 95

ERRNAMES = {0: "OK", NBD_EPERM: "EPERM", NBD_EIO: "EIO", NBD_ENOMEM: "ENOMEM",
            NBD_EINVAL: "EINVAL", NBD_ENOSPC: "ENOSPC",
            NBD_EOVERFLOW: "EOVERFLOW", NBD_ENOTSUP: "ENOTSUP"}

MiB = 1024 * 1024
TIMEOUT = 10.0


class Failure(Exception):
    pass


class Closed(Exception):
    """The server closed the connection (EOF or reset)."""


def check(cond, what):
    if not cond:
        raise Failure(what)


def errname(e):
    return ERRNAMES.get(e, str(e))


class Conn:
    """One client connection; every helper raises Closed on EOF/reset."""

    def __init__(self, path, rcvbuf=None):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if rcvbuf:
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.s.settimeout(TIMEOUT)
        self.s.connect(path)
        self.no_zeroes = False
        self.size = None
        self.tflags = None
        self.next_handle = 1

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass

    def send(self, data):
        try:
            self.s.sendall(data)
        except (BrokenPipeError, ConnectionResetError) as e:
            raise Closed(str(e))
        except socket.timeout:
            raise Failure("the server stopped reading for %gs" % TIMEOUT)

    def recv(self, n):
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.s.recv(min(n - len(buf), 1 << 20))
            except ConnectionResetError as e:
                raise Closed(str(e))
            except socket.timeout:
                raise Failure("no answer from the server within %gs "
                              "(waiting for %d bytes)" % (TIMEOUT, n))
            if not chunk:
                raise Closed("EOF after %d of %d bytes" % (len(buf), n))
            buf += chunk
        return bytes(buf)

    def expect_close(self, what, secs=TIMEOUT):
        """The server must close the connection; data before EOF is
        tolerated (and drained)."""
        deadline = time.monotonic() + secs
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failure("%s: the server did not close the "
                              "connection within %gs" % (what, secs))
            self.s.settimeout(left)
            try:
                if not self.s.recv(65536):
                    return
            except ConnectionResetError:
                return
            except socket.timeout:
                continue

    # Handshake.
    def greeting(self):
        magic, opt, hflags = struct.unpack(">QQH", self.recv(18))
        check(magic == NBDMAGIC, "greeting magic %#x" % magic)
        check(opt == IHAVEOPT, "greeting IHAVEOPT magic %#x" % opt)
        check(hflags & NBD_FLAG_FIXED_NEWSTYLE,
              "server does not set NBD_FLAG_FIXED_NEWSTYLE")
        return hflags

    def client_flags(self, hflags):
        cflags = NBD_FLAG_C_FIXED_NEWSTYLE
        if hflags & NBD_FLAG_NO_ZEROES:
            cflags |= NBD_FLAG_C_NO_ZEROES
            self.no_zeroes = True
        self.send(struct.pack(">I", cflags))

    def start(self):
        self.client_flags(self.greeting())

    def send_opt(self, opt, data=b"", length=None):
        if length is None:
            length = len(data)
        self.send(struct.pack(">QII", IHAVEOPT, opt, length) + data)

    def opt_reply(self, opt):
        magic, ropt, rtype, rlen = struct.unpack(">QIII", self.recv(20))
        check(magic == REPLY_MAGIC, "option reply magic %#x" % magic)
        check(ropt == opt, "option reply for option %d, sent %d" % (ropt, opt))
        check(rlen <= 1 * MiB, "option reply length %d" % rlen)
        return rtype, self.recv(rlen)

    def go(self, name, opt=NBD_OPT_GO):
        """NBD_OPT_GO (or INFO); returns 0 on success, else the error
        reply type. Sets size and tflags from NBD_INFO_EXPORT."""
        nm = name.encode()
        self.send_opt(opt, struct.pack(">I", len(nm)) + nm +
                      struct.pack(">H", 0))
        while True:
            rtype, data = self.opt_reply(opt)
            if rtype == NBD_REP_ACK:
                check(self.size is not None,
                      "NBD_REP_ACK without NBD_INFO_EXPORT")
                return 0
            if rtype & NBD_REP_FLAG_ERROR:
                return rtype
            check(rtype == NBD_REP_INFO, "unexpected reply type %#x" % rtype)
            check(len(data) >= 2, "short NBD_REP_INFO")
            (itype,) = struct.unpack(">H", data[:2])
            if itype == NBD_INFO_EXPORT:
                check(len(data) == 12,
                      "NBD_INFO_EXPORT of %d bytes" % len(data))
                self.size, self.tflags = struct.unpack(">QH", data[2:])

    def open(self, name):
        self.start()
        r = self.go(name)
        check(r == 0, "NBD_OPT_GO '%s' failed with reply %#x" % (name, r))
        return self

    # Transmission.
    def request(self, cmd, off, length, payload=b"", flags=0, handle=None):
        if handle is None:
            handle = self.next_handle
            self.next_handle += 1
        self.send(struct.pack(">IHHQQI", NBD_REQUEST_MAGIC, flags, cmd,
                              handle, off, length) + payload)
        return handle

    def reply(self, handle, read_len=0):
        """Read one simple reply to `handle`; returns (error, data)."""
        magic, err, h = struct.unpack(">IIQ", self.recv(16))
        check(magic == NBD_SIMPLE_REPLY_MAGIC, "reply magic %#x (structured "
              "replies were not negotiated)" % magic)
        check(h == handle, "reply handle %d, expected %d" % (h, handle))
        data = self.recv(read_len) if err == 0 and read_len else b""
        return err, data

    def reply_any(self):
        """Read one simple reply without data, to any request; replies may
        come in any order. Returns (handle, error)."""
        magic, err, h = struct.unpack(">IIQ", self.recv(16))
        check(magic == NBD_SIMPLE_REPLY_MAGIC, "reply magic %#x" % magic)
        return h, err

    def cmd(self, cmd, off, length, payload=b"", flags=0):
        h = self.request(cmd, off, length, payload, flags)
        return self.reply(h, length if cmd == NBD_CMD_READ else 0)

    def read(self, off, length):
        err, data = self.cmd(NBD_CMD_READ, off, length)
        check(err == 0, "read of %d at %d failed with %s" %
              (length, off, errname(err)))
        return data

    def write(self, off, data, flags=0):
        err, _ = self.cmd(NBD_CMD_WRITE, off, len(data), data, flags)
        return err

    def disconnect(self):
        try:
            self.request(NBD_CMD_DISC, 0, 0)
        except Closed:
            pass
        self.close()


def expect_err(what, err, allowed):
    check(err in allowed, "%s: got %s, expected %s" %
          (what, errname(err), " or ".join(errname(e) for e in allowed)))


def in_sync(c, what):
    """After an error, the same connection must still answer correctly."""
    h = c.request(NBD_CMD_READ, 0, 4096)
    err, data = c.reply(h, 4096)
    check(err == 0 and len(data) == 4096,
          "%s: a read on the same connection afterwards failed (%s)" %
          (what, errname(err)))


def vm_kb(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise Failure("no %s in /proc/%d/status" % (field, pid))


class MemWatch:
    """Samples the server's VmRSS and VmSize while a case runs."""

    def __init__(self, pid):
        self.pid = pid
        self.rss0 = vm_kb(pid, "VmRSS")
        self.vsz0 = vm_kb(pid, "VmSize")
        self.rss = self.rss0
        self.vsz = self.vsz0

    def sample(self):
        try:
            self.rss = max(self.rss, vm_kb(self.pid, "VmRSS"))
            self.vsz = max(self.vsz, vm_kb(self.pid, "VmSize"))
        except (OSError, Failure):
            pass

    def check(self, what, rss_mib=32, vsz_mib=1024):
        self.sample()
        print("  %s: server VmRSS %d -> %d KiB, VmSize %d -> %d KiB" %
              (what, self.rss0, self.rss, self.vsz0, self.vsz))
        check(self.rss - self.rss0 < rss_mib * 1024,
              "%s: server RSS grew by %d KiB" % (what, self.rss - self.rss0))
        check(self.vsz - self.vsz0 < vsz_mib * 1024,
              "%s: server address space grew by %d KiB (allocated the "
              "declared length?)" % (what, self.vsz - self.vsz0))


def pump(c, total, mem, chunk=1 * MiB):
    """Send up to `total` junk bytes; stop quietly when the server closes
    or stops reading (send timeout)."""
    junk = b"\xa5" * chunk
    sent = 0
    c.s.settimeout(2.0)
    try:
        while sent < total:
            c.s.sendall(junk)
            sent += chunk
            mem.sample()
    except (OSError, socket.timeout):
        pass
    c.s.settimeout(TIMEOUT)
    return sent


# The cases. Each takes the parsed arguments.

def case_bad_magic(a):
    c = Conn(a.socket)
    c.start()
    c.send(struct.pack(">QII", 0x4948415645475254, NBD_OPT_GO, 0))
    c.expect_close("option with a wrong magic")
    c.close()

    c = Conn(a.socket)
    c.greeting()
    c.send(struct.pack(">I", 0xFFFF0000 | NBD_FLAG_C_FIXED_NEWSTYLE))
    c.expect_close("unknown client flags")
    c.close()

    c = Conn(a.socket).open(a.export)
    c.send(struct.pack(">IHHQQI", 0x12345678, 0, NBD_CMD_READ, 1, 0, 4096))
    c.expect_close("request with a wrong magic")
    c.close()


def case_truncated_handshake(a):
    c = Conn(a.socket)
    c.close()

    c = Conn(a.socket)
    c.s.shutdown(socket.SHUT_WR)
    c.greeting()
    c.expect_close("client that closed its side at once")
    c.close()

    c = Conn(a.socket)
    c.greeting()
    c.send(b"\x00\x00")
    c.close()

    c = Conn(a.socket)
    c.start()
    c.send(struct.pack(">QII", IHAVEOPT, NBD_OPT_GO, 100)[:10])
    c.close()

    c = Conn(a.socket)
    c.start()
    c.send_opt(NBD_OPT_GO, b"\x00\x00\x00\x04da", length=100)
    c.close()

    c = Conn(a.socket).open(a.export)
    c.send(struct.pack(">IHHQQI", NBD_REQUEST_MAGIC, 0, NBD_CMD_READ, 1, 0,
                       4096)[:13])
    c.close()


def case_huge_option(a):
    check(a.pid, "--pid is required")
    for opt, what in ((NBD_OPT_GO, "NBD_OPT_GO"),
                      (0x7FFF0042, "an unknown option"),
                      (NBD_OPT_EXPORT_NAME, "NBD_OPT_EXPORT_NAME")):
        mem = MemWatch(a.pid)
        c = Conn(a.socket)
        c.start()
        c.send_opt(opt, length=0xFFFFFFF0)
        sent = pump(c, 64 * MiB, mem)
        time.sleep(0.3)
        mem.check("%s declaring 4 GiB, %d MiB sent" % (what, sent // MiB))
        c.close()


def case_unknown_option(a):
    c = Conn(a.socket)
    c.start()
    c.send_opt(0x7FFF1234, b"x" * 20)
    rtype, _ = c.opt_reply(0x7FFF1234)
    check(rtype == NBD_REP_ERR_UNSUP,
          "unknown option: reply %#x, expected NBD_REP_ERR_UNSUP" % rtype)
    c.send_opt(NBD_OPT_STARTTLS)
    rtype, _ = c.opt_reply(NBD_OPT_STARTTLS)
    check(rtype & NBD_REP_FLAG_ERROR,
          "NBD_OPT_STARTTLS without TLS: reply %#x, expected an error" % rtype)
    r = c.go(a.export)
    check(r == 0, "NBD_OPT_GO after the refused options: reply %#x" % r)
    in_sync(c, "after unknown options")
    c.disconnect()

    c = Conn(a.socket)
    c.start()
    c.send_opt(NBD_OPT_GO, b"\x00\x00\x00\x10ab")
    rtype, _ = c.opt_reply(NBD_OPT_GO)
    check(rtype & NBD_REP_FLAG_ERROR,
          "NBD_OPT_GO with a name longer than its option: reply %#x" % rtype)
    c.send_opt(NBD_OPT_ABORT)
    c.expect_close("NBD_OPT_ABORT")
    c.close()


def case_unknown_export(a):
    c = Conn(a.socket)
    c.start()
    r = c.go("no-such-export")
    check(r & NBD_REP_FLAG_ERROR, "NBD_OPT_GO to an unknown export succeeded")
    if r != NBD_REP_ERR_UNKNOWN:
        print("  note: unknown export refused with %#x, the spec suggests "
              "NBD_REP_ERR_UNKNOWN" % r)
    r = c.go(a.export)
    check(r == 0, "NBD_OPT_GO to the real export after a refused one: %#x" % r)
    in_sync(c, "after an unknown export")
    c.disconnect()

    c = Conn(a.socket)
    c.start()
    c.send_opt(NBD_OPT_EXPORT_NAME, b"no-such-export")
    c.expect_close("NBD_OPT_EXPORT_NAME to an unknown export")
    c.close()


def case_unknown_command(a):
    c = Conn(a.socket).open(a.export)
    err, _ = c.cmd(0x55, 0, 0)
    expect_err("unknown command 0x55", err, (NBD_EINVAL,))
    in_sync(c, "unknown command")
    err, _ = c.cmd(NBD_CMD_READ, 0, 4096, flags=0x4000)
    expect_err("read with an unknown flag", err, (NBD_EINVAL,))
    in_sync(c, "unknown flag")
    err, _ = c.cmd(NBD_CMD_BLOCK_STATUS, 0, 4096)
    expect_err("block status without a metadata context", err, (NBD_EINVAL,))
    in_sync(c, "block status without a context")
    c.disconnect()


def case_out_of_range(a):
    c = Conn(a.socket).open(a.export)
    size = c.size
    read_cases = ((size - 512, 1024), (size, 1), (size + 4096, 4096),
                  ((1 << 64) - 512, 1024), ((1 << 63), 4096))
    for off, n in read_cases:
        err, _ = c.cmd(NBD_CMD_READ, off, n)
        expect_err("read of %d at %d (size %d)" % (n, off, size), err,
                   (NBD_EINVAL,))
        in_sync(c, "read past the end")
    for off, n in ((size - 512, 1024), (size, 512), ((1 << 64) - 4096, 8192)):
        err = c.write(off, b"\xee" * n)
        expect_err("write of %d at %d (size %d)" % (n, off, size), err,
                   (NBD_ENOSPC, NBD_EINVAL))
        in_sync(c, "write past the end")
        for cmd, name in ((NBD_CMD_TRIM, "trim"),
                          (NBD_CMD_WRITE_ZEROES, "write-zeroes")):
            err, _ = c.cmd(cmd, off, n)
            expect_err("%s of %d at %d" % (name, n, off), err,
                       (NBD_ENOSPC, NBD_EINVAL))
            in_sync(c, name + " past the end")
    last = c.read(size - 1, 1)
    check(len(last) == 1, "read of the last byte")
    # The spec leaves zero-length requests to the server; any answer will
    # do as long as the stream stays in step.
    for cmd, name in ((NBD_CMD_READ, "read"), (NBD_CMD_WRITE, "write"),
                      (NBD_CMD_TRIM, "trim")):
        err, _ = c.cmd(cmd, 4096, 0)
        print("  zero-length %s: %s" % (name, errname(err)))
        in_sync(c, "zero-length " + name)
    c.disconnect()


def case_too_big(a):
    check(a.pid, "--pid is required")
    big = 40 * MiB
    c = Conn(a.socket).open(a.export)
    check(c.size >= big, "export too small for this case (%d)" % c.size)
    h = c.request(NBD_CMD_READ, 0, big)
    try:
        err, _ = c.reply(h, 0)
        expect_err("read of 40 MiB", err, (NBD_EOVERFLOW, NBD_EINVAL))
        in_sync(c, "read of 40 MiB")
    except Closed:
        print("  read of 40 MiB: the server disconnected")
    c.close()

    c = Conn(a.socket).open(a.export)
    mem = MemWatch(a.pid)
    h = c.request(NBD_CMD_WRITE, 0, big)
    t = threading.Thread(target=pump, args=(c, big, mem))
    t.start()
    try:
        err, _ = c.reply(h, 0)
        t.join()
        expect_err("write of 40 MiB", err,
                   (NBD_EOVERFLOW, NBD_EINVAL, NBD_ENOSPC))
        in_sync(c, "write of 40 MiB")
    except Closed:
        print("  write of 40 MiB: the server disconnected")
    t.join()
    c.close()
    mem.check("write of 40 MiB", rss_mib=48)

    mem = MemWatch(a.pid)
    c = Conn(a.socket).open(a.export)
    c.request(NBD_CMD_WRITE, 0, 0xFFFFFFFF)
    c.send(b"\x5a" * 4096)
    time.sleep(0.3)
    mem.check("write header declaring 4 GiB")
    c.close()


def case_read_only(a):
    c = Conn(a.socket).open(a.export)
    check(c.tflags & NBD_FLAG_READ_ONLY, "NBD_FLAG_READ_ONLY not set")
    err = c.write(0, b"\x77" * 4096)
    expect_err("write to a read-only export", err, (NBD_EPERM,))
    in_sync(c, "write to a read-only export")
    for cmd, name in ((NBD_CMD_TRIM, "trim"),
                      (NBD_CMD_WRITE_ZEROES, "write-zeroes")):
        err, _ = c.cmd(cmd, 0, 4096)
        expect_err("%s on a read-only export" % name, err, (NBD_EPERM,))
        in_sync(c, name + " on a read-only export")
    c.disconnect()


def case_half_write(a):
    c = Conn(a.socket).open(a.export)
    c.request(NBD_CMD_WRITE, 0, 1 * MiB)
    c.send(b"\xee" * (MiB // 2))
    c.close()

    c = Conn(a.socket).open(a.export)
    c.request(NBD_CMD_WRITE, 8192, 4096)
    c.close()

    c = Conn(a.socket).open(a.export)
    c.request(NBD_CMD_WRITE, 3 * MiB + 100, 5000)
    c.send(b"\xee" * 4999)
    c.s.shutdown(socket.SHUT_WR)
    c.expect_close("write missing its last byte, then EOF")
    c.close()


def case_vanish(a):
    for rnd in range(4):
        c = Conn(a.socket, rcvbuf=4096).open(a.export)
        # The server may stop reading once its replies back up: send what
        # it takes, then vanish.
        c.s.settimeout(0.2)
        try:
            for i in range(256):
                c.s.sendall(struct.pack(
                    ">IHHQQI", NBD_REQUEST_MAGIC, 0, NBD_CMD_READ, i + 1,
                    (i * 131072) % (c.size - 131072), 131072))
        except (OSError, socket.timeout):
            pass
        if rnd % 2:
            c.s.shutdown(socket.SHUT_RDWR)
        c.close()

    # NBD_CMD_DISC after pipelined reads: every outstanding request is
    # answered, then the server closes.
    c = Conn(a.socket).open(a.export)
    handles = [c.request(NBD_CMD_READ, i * 65536, 65536) for i in range(32)]
    c.request(NBD_CMD_DISC, 0, 0)
    got = set()
    for _ in handles:
        h, err = c.reply_any()
        check(err == 0 and h in handles and h not in got,
              "reply to pipelined read: error %s handle %d" % (errname(err), h))
        got.add(h)
        c.recv(65536)
    c.expect_close("NBD_CMD_DISC")
    c.close()


def case_mem_limit(a):
    check(a.mem_limit, "--mem-limit is required")
    c = Conn(a.socket).open(a.export)
    chunk = 256 * 1024
    off = a.start
    acked = []
    err = 0
    while off + chunk <= c.size:
        data = os.urandom(chunk)
        err = c.write(off, data)
        if err:
            break
        acked.append((off, data))
        off += chunk
    check(err != 0, "wrote %d MiB of random data past a %d byte limit "
          "without an error" % ((off - a.start) // MiB, a.mem_limit))
    expect_err("write past the memory limit", err, (NBD_ENOSPC,))
    written = len(acked) * chunk
    print("  %d KiB acknowledged before ENOSPC (limit %d KiB)" %
          (written // 1024, a.mem_limit // 1024))
    check(written <= a.mem_limit,
          "%d bytes of incompressible data stored under a limit of %d" %
          (written, a.mem_limit))
    check(written >= a.mem_limit // 2,
          "ENOSPC after only %d bytes under a limit of %d" %
          (written, a.mem_limit))
    for o, data in acked:
        check(c.read(o, chunk) == data,
              "acknowledged data at %d changed after ENOSPC" % o)
    err, _ = c.cmd(NBD_CMD_TRIM, a.start, c.size - a.start)
    expect_err("trim of the filled range", err, (0,))
    data = os.urandom(chunk)
    err = c.write(a.start, data)
    expect_err("write after trim gave the memory back", err, (0,))
    check(c.read(a.start, chunk) == data, "data written after the trim")
    err, _ = c.cmd(NBD_CMD_TRIM, a.start, chunk)
    expect_err("trim", err, (0,))
    c.disconnect()


def case_export_name(a):
    """The old way in: NBD_OPT_EXPORT_NAME, with and without the 124 zero
    bytes, then simple-reply reads of up to 1 MiB checked against
    --expect."""
    check(a.expect, "--expect is required")
    with open(a.expect, "rb") as f:
        want = f.read(1 * MiB)
    for no_zeroes in (True, False):
        c = Conn(a.socket)
        hflags = c.greeting()
        cflags = NBD_FLAG_C_FIXED_NEWSTYLE
        if no_zeroes and hflags & NBD_FLAG_NO_ZEROES:
            cflags |= NBD_FLAG_C_NO_ZEROES
        c.send(struct.pack(">I", cflags))
        c.send_opt(NBD_OPT_EXPORT_NAME, a.export.encode())
        size, tflags = struct.unpack(">QH", c.recv(10))
        if not cflags & NBD_FLAG_C_NO_ZEROES:
            check(c.recv(124) == bytes(124), "the 124 reserved bytes")
        check(size == a.size, "export size %d, expected %d" % (size, a.size))
        check(tflags & 1, "NBD_FLAG_HAS_FLAGS not set")
        c.size = size
        for off, n in ((0, len(want)), (4095, 2), (12345, 67890)):
            got = c.read(off, n)
            check(got == want[off:off + n],
                  "read of %d at %d differs from %s" % (n, off, a.expect))
        c.disconnect()


def case_commands(a):
    """Every advertised command and flag, used correctly, succeeds: FUA
    writes, flush, cache, trim, write-zeroes with NO_HOLE and FAST_ZERO.
    Works on [--start, --start + 1 MiB)."""
    c = Conn(a.socket).open(a.export)
    f = c.tflags
    for flag, name in ((NBD_FLAG_SEND_FLUSH, "FLUSH"),
                       (NBD_FLAG_SEND_FUA, "FUA"),
                       (NBD_FLAG_SEND_TRIM, "TRIM"),
                       (NBD_FLAG_SEND_WRITE_ZEROES, "WRITE_ZEROES"),
                       (NBD_FLAG_SEND_CACHE, "CACHE"),
                       (NBD_FLAG_CAN_MULTI_CONN, "CAN_MULTI_CONN")):
        check(f & flag, "transmission flag NBD_FLAG_%s not set" % name)
    base = a.start
    data = os.urandom(64 * 1024)
    err = c.write(base + 1000, data, NBD_CMD_FLAG_FUA)
    expect_err("write with FUA", err, (0,))
    check(c.read(base + 1000, len(data)) == data, "data of the FUA write")
    expect_err("flush", c.cmd(NBD_CMD_FLUSH, 0, 0)[0], (0,))
    expect_err("cache", c.cmd(NBD_CMD_CACHE, base, 1 * MiB)[0], (0,))
    expect_err("write-zeroes with NO_HOLE",
               c.cmd(NBD_CMD_WRITE_ZEROES, base + 4096, 8192,
                     flags=NBD_CMD_FLAG_NO_HOLE)[0], (0,))
    check(c.read(base + 4096, 8192) == bytes(8192), "zeros after NO_HOLE")
    check(c.read(base + 1000, 3096) == data[:3096],
          "bytes before a write-zeroes changed")
    if f & NBD_FLAG_SEND_FAST_ZERO:
        err, _ = c.cmd(NBD_CMD_WRITE_ZEROES, base + 16384, 4096,
                       flags=NBD_CMD_FLAG_FAST_ZERO)
        expect_err("write-zeroes with FAST_ZERO", err, (0, NBD_ENOTSUP))
        if err == 0:
            check(c.read(base + 16384, 4096) == bytes(4096),
                  "zeros after FAST_ZERO")
    expect_err("trim with FUA", c.cmd(NBD_CMD_TRIM, base, 1 * MiB,
                                      flags=NBD_CMD_FLAG_FUA)[0], (0,))
    expect_err("write-zeroes with FUA",
               c.cmd(NBD_CMD_WRITE_ZEROES, base, 1 * MiB,
                     flags=NBD_CMD_FLAG_FUA)[0], (0,))
    check(c.read(base, 1 * MiB) == bytes(1 * MiB), "zeros after trim")
    c.disconnect()


def _race_writer(path, export, start, t, pages, slot, fill, barrier, out):
    try:
        c = Conn(path).open(export)
        burst = b"".join(
            struct.pack(">IHHQQI", NBD_REQUEST_MAGIC, 0, NBD_CMD_WRITE,
                        p + 1, start + p * 4096 + t * slot, slot) + fill
            for p in range(pages))
        # Replies are read while the burst goes out: a server may stop
        # reading while its replies back up, and one that does is right.
        errs = []

        def replies():
            try:
                left = set(range(1, pages + 1))
                while left:
                    h, err = c.reply_any()
                    check(h in left, "reply to unknown handle %d" % h)
                    left.discard(h)
                    check(err == 0, "write failed with %s" % errname(err))
            except Exception as e:
                errs.append(e)

        barrier.wait(TIMEOUT)
        rd = threading.Thread(target=replies)
        rd.start()
        c.send(burst)
        rd.join()
        if errs:
            raise errs[0]
        c.disconnect()
    except Exception as e:
        out.put("writer %d: %s" % (t, e))


def case_subpage_race(a):
    """8 processes, one connection each, write their own 512-byte slot of
    the same 4 KiB pages at the same moment (all requests of a round sent
    in one burst after a barrier). Every slot is written once per round and
    checked after it, so a page read-modify-write that is not atomic shows
    as a slot still holding the previous round. Works on 4 MiB at --start."""
    import multiprocessing as mp
    nproc, pages, slot, rounds = 8, 1024, 512, 4
    ctx = mp.get_context("fork")
    for r in range(rounds):
        barrier = ctx.Barrier(nproc)
        out = ctx.Queue()
        procs = [ctx.Process(target=_race_writer,
                             args=(a.socket, a.export, a.start, t, pages, slot,
                                   bytes([(t << 4) | r]) * slot, barrier, out))
                 for t in range(nproc)]
        for pr in procs:
            pr.start()
        for pr in procs:
            pr.join(60)
        errors = []
        while not out.empty():
            errors.append(out.get())
        check(not errors, "; ".join(errors))
        check(all(pr.exitcode == 0 for pr in procs), "a writer process died")
        c = Conn(a.socket).open(a.export)
        got = c.read(a.start, pages * 4096)
        c.disconnect()
        lost = [(p, t) for p in range(pages) for t in range(nproc)
                if got[p * 4096 + t * slot:p * 4096 + (t + 1) * slot] !=
                bytes([(t << 4) | r]) * slot]
        check(not lost, "round %d: %d of %d slots lost their write, first "
              "page %d slot %d" % (r, len(lost), pages * nproc, *lost[0])
              if lost else "")


CASES = {
    "export-name": case_export_name,
    "commands": case_commands,
    "subpage-race": case_subpage_race,
    "bad-magic": case_bad_magic,
    "truncated-handshake": case_truncated_handshake,
    "huge-option": case_huge_option,
    "unknown-option": case_unknown_option,
    "unknown-export": case_unknown_export,
    "unknown-command": case_unknown_command,
    "out-of-range": case_out_of_range,
    "too-big": case_too_big,
    "read-only": case_read_only,
    "half-write": case_half_write,
    "vanish": case_vanish,
    "mem-limit": case_mem_limit,
}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--socket", required=True)
    p.add_argument("--export", default="")
    p.add_argument("--pid", type=int, default=0)
    p.add_argument("--mem-limit", type=int, default=0)
    p.add_argument("--start", type=int, default=0,
                   help="mem-limit, commands, subpage-race: first offset")
    p.add_argument("--expect", help="export-name: file with the data")
    p.add_argument("--size", type=int, default=0,
                   help="export-name: the export size")
    p.add_argument("case", choices=sorted(CASES))
    a = p.parse_args()
    try:
        CASES[a.case](a)
    except Failure as e:
        print("nbd_bad_client: %s: %s" % (a.case, e), file=sys.stderr)
        return 1
    except Closed as e:
        print("nbd_bad_client: %s: the server closed the connection "
              "unexpectedly (%s)" % (a.case, e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
