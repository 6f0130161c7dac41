#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
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
NBD_OPT_STRUCTURED_REPLY = 8
NBD_OPT_SET_META_CONTEXT = 10

NBD_REP_ACK = 1
NBD_REP_SERVER = 2
NBD_REP_INFO = 3
NBD_REP_META_CONTEXT = 4
NBD_REP_FLAG_ERROR = 1 << 31
NBD_REP_ERR_UNSUP = NBD_REP_FLAG_ERROR | 1
NBD_REP_ERR_POLICY = NBD_REP_FLAG_ERROR | 2
NBD_REP_ERR_INVALID = NBD_REP_FLAG_ERROR | 3
NBD_REP_ERR_UNKNOWN = NBD_REP_FLAG_ERROR | 6
NBD_REP_ERR_TOO_BIG = NBD_REP_FLAG_ERROR | 9

NBD_INFO_EXPORT = 0
NBD_INFO_BLOCK_SIZE = 3

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
NBD_ESHUTDOWN = 108

ERRNAMES = {0: "OK", NBD_EPERM: "EPERM", NBD_EIO: "EIO", NBD_ENOMEM: "ENOMEM",
            NBD_EINVAL: "EINVAL", NBD_ENOSPC: "ENOSPC",
            NBD_EOVERFLOW: "EOVERFLOW", NBD_ENOTSUP: "ENOTSUP",
            NBD_ESHUTDOWN: "ESHUTDOWN"}

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
        self.max_block = None
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
            if itype == NBD_INFO_BLOCK_SIZE and len(data) == 14:
                self.max_block = struct.unpack(">III", data[2:])[2]
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

    def structured_reply(self, handle):
        """Read structured reply chunks to `handle` until one has the DONE
        flag; returns the error of an error chunk, or 0."""
        err = 0
        while True:
            magic, flags, rtype, h, n = struct.unpack(">IHHQI", self.recv(20))
            check(magic == NBD_STRUCTURED_REPLY_MAGIC,
                  "structured reply magic %#x" % magic)
            check(h == handle, "reply handle %d, expected %d" % (h, handle))
            body = self.recv(n)
            if rtype & 0x8000:
                err = struct.unpack(">I", body[:4])[0]
            if flags & 1:
                return err

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


def case_spec_errors(a):
    """The answers doc/proto.md asks for (issue 13, item 6), each checked
    even when an earlier one failed: zero-length READ and WRITE succeed on a
    new connection; a READ over the maximum block size with simple replies
    gets EINVAL (EOVERFLOW is for structured replies only); TRIM past the
    end gets EINVAL; a failed SET_META_CONTEXT clears the context an earlier
    one selected."""
    failed = []
    for part in (_spec_zero_length, _spec_read_max, _spec_trim, _spec_meta):
        try:
            part(a)
        except (Failure, Closed) as e:
            failed.append("%s: %s" % (part.__name__[6:], e))
    check(not failed, "; ".join(failed))


def _spec_zero_length(a):
    for cmd, name in ((NBD_CMD_READ, "read"), (NBD_CMD_WRITE, "write")):
        c = Conn(a.socket).open(a.export)
        err, _ = c.cmd(cmd, 4096, 0)
        expect_err("zero-length %s as the first request" % name, err, (0,))
        in_sync(c, "zero-length " + name)
        c.disconnect()


def _spec_read_max(a):
    c = Conn(a.socket).open(a.export)
    check(c.max_block, "no NBD_INFO_BLOCK_SIZE in the reply to NBD_OPT_GO")
    check(c.size > c.max_block, "export too small for this case")
    err, _ = c.cmd(NBD_CMD_READ, 0, c.max_block + 1)
    expect_err("simple-reply read of max block size + 1 (%d)" %
               (c.max_block + 1), err, (NBD_EINVAL,))
    in_sync(c, "read over the maximum block size")
    c.disconnect()


def _spec_trim(a):
    c = Conn(a.socket).open(a.export)
    for off, n in ((c.size - 4096, 8192), (c.size, 4096),
                   ((1 << 64) - 4096, 8192)):
        err, _ = c.cmd(NBD_CMD_TRIM, off, n)
        expect_err("trim of %d at %d (size %d)" % (n, off, c.size), err,
                   (NBD_EINVAL,))
        in_sync(c, "trim past the end")
    c.disconnect()


def _spec_meta(a):
    ctx = b"base:allocation"
    good = struct.pack(">I", 0) + struct.pack(">I", 1) + \
        struct.pack(">I", len(ctx)) + ctx
    c = Conn(a.socket)
    c.start()
    c.send_opt(NBD_OPT_STRUCTURED_REPLY)
    rtype, _ = c.opt_reply(NBD_OPT_STRUCTURED_REPLY)
    check(rtype == NBD_REP_ACK, "NBD_OPT_STRUCTURED_REPLY refused")
    c.send_opt(NBD_OPT_SET_META_CONTEXT, good)
    rtype, _ = c.opt_reply(NBD_OPT_SET_META_CONTEXT)
    check(rtype == NBD_REP_META_CONTEXT, "base:allocation not selected")
    rtype, _ = c.opt_reply(NBD_OPT_SET_META_CONTEXT)
    check(rtype == NBD_REP_ACK, "SET_META_CONTEXT not acknowledged")
    c.send_opt(NBD_OPT_SET_META_CONTEXT, good[:-3])  # truncated: invalid
    rtype, _ = c.opt_reply(NBD_OPT_SET_META_CONTEXT)
    check(rtype & NBD_REP_FLAG_ERROR,
          "a truncated SET_META_CONTEXT got reply %#x, not an error" % rtype)
    r = c.go(a.export)
    check(r == 0, "NBD_OPT_GO failed with %#x" % r)
    h = c.request(NBD_CMD_BLOCK_STATUS, 0, 4096)
    err = c.structured_reply(h)
    expect_err("block status after a failed SET_META_CONTEXT", err,
               (NBD_EINVAL,))
    c.disconnect()


def _stopped(path):
    """Whether the server stopped listening (its shutdown began)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return False
    except OSError:
        return True
    finally:
        s.close()


def case_eshutdown(a):
    """Requests read after the server's shutdown began get NBD_ESHUTDOWN.
    Two 32 MiB reads whose replies we do not read yet fill the connection's
    in-flight budget, so the server cannot read what follows; SIGTERM; once
    the server stops listening, the replies are read: the large reads
    complete, the small reads queued behind them get ESHUTDOWN, then the
    server closes the connection. Ends the server."""
    import signal
    check(a.pid, "--pid is required")
    big = 32 * MiB
    c = Conn(a.socket, rcvbuf=4096).open(a.export)
    check(c.size >= 3 * big, "export too small for this case")
    bigs = [c.request(NBD_CMD_READ, i * big, big) for i in range(3)]
    smalls = [c.request(NBD_CMD_READ, i * 4096, 4096) for i in range(4)]
    time.sleep(0.5)  # let the server read what it can; any order is fine
    os.kill(a.pid, signal.SIGTERM)
    deadline = time.monotonic() + TIMEOUT
    while not _stopped(a.socket):
        check(time.monotonic() < deadline, "the server kept listening "
              "after SIGTERM")
        time.sleep(0.05)
    got = {}
    for _ in bigs + smalls:
        h, err = c.reply_any()
        check(h in bigs + smalls and h not in got, "reply to handle %d" % h)
        got[h] = err
        if err == 0:
            c.recv(big if h in bigs else 4096)
    for h in bigs[:2]:
        expect_err("32 MiB read sent before SIGTERM", got[h], (0,))
    expect_err("third 32 MiB read", got[bigs[2]], (0, NBD_ESHUTDOWN))
    for h in smalls:
        expect_err("read the server took in after SIGTERM", got[h],
                   (NBD_ESHUTDOWN,))
    c.expect_close("after the replies, shutting down")
    c.close()


def _rss_attack(a, conns, reads, size, read_replies):
    out = []
    for _ in range(conns):
        c = Conn(a.socket, rcvbuf=None if read_replies else 4096)
        out.append(c.open(a.export))
    for c in out:
        hs = [c.request(NBD_CMD_READ, (i * size) % (c.size - size), size)
              for i in range(reads)]
        # Replies come in any order; one connection's are all read before
        # the next one's requests go out, as a client reading every
        # connection at once would do.
        for _ in hs if read_replies else ():
            h, err = c.reply_any()
            check(h in hs and err == 0, "read of %d failed with %s" %
                  (size, errname(err)))
            c.recv(size)
    return out


def case_buffer_attack(a):
    """Issue 13, item 3: 8 connections each send three 32 MiB reads and
    never read the replies. The server's RSS must stay within its buffer
    budget (--buffer-limit, given here as --limit) plus a fixed allowance
    for everything else; without a budget it grew by about 500 MiB."""
    check(a.pid and a.limit, "--pid and --limit are required")
    mem = MemWatch(a.pid)
    conns = _rss_attack(a, 8, 3, 32 * MiB, False)
    end = time.monotonic() + 3.0
    while time.monotonic() < end:
        mem.sample()
        time.sleep(0.05)
    allow = a.limit // MiB + 24
    print("  budget %d MiB, allowed growth %d MiB" % (a.limit // MiB, allow))
    mem.check("8 clients x three unread 32 MiB reads", rss_mib=allow,
              vsz_mib=1 << 20)
    for c in conns:
        c.close()


def case_idle_buffers(a):
    """Issue 13, item 3: 4 connections each make sixteen 4 MiB reads, then
    sit idle, still connected. Their buffers must go back: within 10 s the
    server's RSS is back within 16 MiB of where it started (it held about
    140 MiB for good before)."""
    check(a.pid, "--pid is required")
    rss0 = vm_kb(a.pid, "VmRSS")
    conns = _rss_attack(a, 4, 16, 4 * MiB, True)
    peak = vm_kb(a.pid, "VmRSS")
    deadline = time.monotonic() + 10.0
    while True:
        rss = vm_kb(a.pid, "VmRSS")
        if rss - rss0 < 16 * 1024:
            break
        check(time.monotonic() < deadline, "4 idle connections still hold "
              "%d KiB more than before their reads (peak %d KiB)" %
              (rss - rss0, peak - rss0))
        time.sleep(0.1)
    print("  VmRSS %d KiB before, %d after the reads, %d idle" %
          (rss0, peak, rss))
    for c in conns:
        in_sync(c, "idle connection after its buffers went back")
        c.disconnect()


def case_idle_starve(a):
    """Connections idle after a small read keep a small buffer each; a
    request of the maximum block size on another connection must still be
    served (run with a tiny --buffer-limit and as many connections as it
    allows)."""
    idle = [Conn(a.socket).open(a.export) for _ in range(a.conns - 1)]
    for c in idle:
        c.read(0, 4096)
    c = Conn(a.socket).open(a.export)
    data = c.read(0, c.max_block)
    check(len(data) == c.max_block, "short read")
    print("  read of %d bytes beside %d idle connections" %
          (c.max_block, len(idle)))
    for x in idle + [c]:
        x.disconnect()


def case_table_limit(a):
    """Issue 13, item 5: WRITE_ZEROES with NO_HOLE over a large device
    with a tiny --mem-limit fails with ENOSPC instead of growing the page
    table without bound; data written before stays."""
    check(a.pid, "--pid is required")
    c = Conn(a.socket).open(a.export)
    tail = os.urandom(65536)
    err = c.write(c.size - len(tail), tail)
    check(err == 0, "write of 64 KiB at the end failed: %s" % errname(err))
    mem = MemWatch(a.pid)
    step = (4 << 30) - 65536
    offs = list(range(0, c.size - step, step)) + [c.size - step]
    errs = []
    for off in offs:
        err, _ = c.cmd(NBD_CMD_WRITE_ZEROES, off, step,
                       flags=NBD_CMD_FLAG_NO_HOLE)
        errs.append(err)
        mem.sample()
    print("  WRITE_ZEROES NO_HOLE of %d bytes at %s: %s" %
          (step, offs, [errname(e) for e in errs]))
    check(errs[0] == NBD_ENOSPC, "WRITE_ZEROES over 4 GiB under a 1 MiB "
          "limit: got %s, expected ENOSPC" % errname(errs[0]))
    check(all(e in (0, NBD_ENOSPC) for e in errs), "unexpected error")
    if not a.no_rss:
        mem.check("NO_HOLE zeroing of the device", rss_mib=8)
    check(c.read(c.size - len(tail), len(tail)) == tail,
          "data at the end changed")
    c.disconnect()


def case_slow_handshake(a):
    """Issue 13, item 4: a client that sends one byte of its handshake
    every second is cut off at the handshake deadline (--deadline, the
    server's --handshake-timeout), not kept forever."""
    check(a.deadline, "--deadline is required")
    c = Conn(a.socket)
    c.greeting()
    stream = struct.pack(">I", NBD_FLAG_C_FIXED_NEWSTYLE) + \
        struct.pack(">QII", IHAVEOPT, NBD_OPT_LIST, 0) * 8
    t0 = time.monotonic()
    sent = 0
    try:
        for b in stream[:a.deadline * 3 + 10]:
            c.s.sendall(bytes([b]))
            sent += 1
            c.s.settimeout(1.0)
            try:
                if c.s.recv(65536) == b"":
                    break
            except socket.timeout:
                pass
        else:
            raise Failure("still connected after %d bytes at one a second "
                          "(deadline %d s)" % (sent, a.deadline))
    except (BrokenPipeError, ConnectionResetError):
        pass
    print("  cut off after %d bytes, %.1f s" % (sent, time.monotonic() - t0))
    c.close()


def case_partial_write(a):
    """Issue 13, item 9: a 1 MiB write that fails at the memory limit
    leaves every 4 KiB cluster either all old or all new bytes; clusters
    written before the failure may hold the new data, as the spec allows."""
    check(a.mem_limit, "--mem-limit is required")
    c = Conn(a.socket).open(a.export)
    old = os.urandom(256 * 1024) + bytes(768 * 1024)
    base = a.start
    err = 0
    off = base
    while off + len(old) <= c.size:     # fill until the limit refuses
        err = c.write(off, os.urandom(len(old)))
        if err:
            break
        off += len(old)
    check(err == NBD_ENOSPC, "no ENOSPC filling the device: %s" % errname(err))
    # Room for about what the old bytes' zeros leave: the new write then
    # fails part-way (or, with luck, just fits).
    err, _ = c.cmd(NBD_CMD_TRIM, base, MiB)
    check(err == 0, "trim failed")
    err = c.write(base, old)
    check(err == 0, "could not write the old bytes back after a trim")
    new = os.urandom(MiB)
    err = c.write(base, new)
    got = c.read(base, MiB)
    mixed = [i for i in range(256)
             if got[i*4096:(i+1)*4096] not in (old[i*4096:(i+1)*4096],
                                               new[i*4096:(i+1)*4096])]
    check(not mixed, "clusters holding neither old nor new bytes: %s" % mixed)
    nnew = sum(got[i*4096:(i+1)*4096] == new[i*4096:(i+1)*4096]
               for i in range(256))
    print("  1 MiB write: %s, %d of 256 clusters new" % (errname(err), nnew))
    if err == 0:
        check(nnew == 256, "write succeeded but not all clusters are new")
    c.disconnect()


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
    "spec-errors": case_spec_errors,
    "eshutdown": case_eshutdown,
    "buffer-attack": case_buffer_attack,
    "idle-buffers": case_idle_buffers,
    "table-limit": case_table_limit,
    "idle-starve": case_idle_starve,
    "slow-handshake": case_slow_handshake,
    "partial-write": case_partial_write,
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
    p.add_argument("--limit", type=int, default=0,
                   help="buffer-attack: the server's --buffer-limit")
    p.add_argument("--conns", type=int, default=4,
                   help="idle-starve: connections the server allows")
    p.add_argument("--no-rss", action="store_true",
                   help="table-limit: skip the RSS check (TSan builds)")
    p.add_argument("--deadline", type=int, default=0,
                   help="slow-handshake: the server's --handshake-timeout")
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
