#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""make-seeds.py - write the seed corpus for fuzz_nbd into tests/fuzz/corpus/nbd.

Each seed is byte 0 (bit 0: read-only export; bits 1-2: TLS off, on,
require) followed by a client's byte stream: fixed newstyle handshake, options, then transmission requests.
Run it again after changing it and commit the output.
"""
import os
import struct
import sys

IHAVEOPT = 0x49484156454F5054
REQ_MAGIC = 0x25609513
OPT = dict(EXPORT_NAME=1, ABORT=2, LIST=3, STARTTLS=5, INFO=6, GO=7,
           STRUCTURED_REPLY=8, LIST_META=9, SET_META=10, EXTENDED=11)
CMD = dict(READ=0, WRITE=1, DISC=2, FLUSH=3, TRIM=4, CACHE=5, ZEROES=6,
           BLOCK_STATUS=7)
FUA, NO_HOLE, DF, REQ_ONE, FAST_ZERO = 1, 2, 4, 8, 16


def opt(o, data=b""):
    return struct.pack(">QII", IHAVEOPT, o, len(data)) + data


def string(s):
    return struct.pack(">I", len(s)) + s


def info_go(o, name=b"", infos=()):
    return opt(o, string(name) + struct.pack(">H", len(infos)) +
               b"".join(struct.pack(">H", i) for i in infos))


def meta(o, name=b"", queries=(b"base:allocation",)):
    return opt(o, string(name) + struct.pack(">I", len(queries)) +
               b"".join(string(q) for q in queries))


def req(cmd, off=0, length=0, flags=0, cookie=1, payload=b""):
    return struct.pack(">IHHQQI", REQ_MAGIC, flags, CMD[cmd], cookie, off,
                       length) + payload


def hello(no_zeroes=True):
    return struct.pack(">I", 1 | (2 if no_zeroes else 0))


def seeds():
    page = bytes(range(256)) * 16
    io = (req("WRITE", 0, 4096, payload=page, cookie=1) +
          req("WRITE", 5000, 300, FUA, cookie=2, payload=b"\xab" * 300) +
          req("READ", 0, 8192, cookie=3) +
          req("FLUSH", cookie=4) +
          req("TRIM", 8192, 65536, cookie=5) +
          req("ZEROES", 65536, 12288, NO_HOLE | FAST_ZERO, cookie=6) +
          req("CACHE", 0, 4096, cookie=7) +
          req("READ", 4000, 200, cookie=8))
    yield "export-name-io", b"\0" + hello(False) + opt(OPT["EXPORT_NAME"]) + io + req("DISC")
    yield "export-name-named", b"\0" + hello() + opt(OPT["EXPORT_NAME"], b"fuzz") + io + req("DISC")
    structured = (opt(OPT["STRUCTURED_REPLY"]) +
                  meta(OPT["SET_META"]) +
                  info_go(OPT["GO"], b"", (0, 1, 2, 3)))
    sio = (io + req("BLOCK_STATUS", 0, 1 << 20, cookie=9) +
           req("BLOCK_STATUS", 0, 1 << 20, REQ_ONE, cookie=10) +
           req("READ", 0, 1 << 16, DF, cookie=11) +
           req("READ", 0, 0, cookie=12))
    yield "go-structured-io", b"\0" + hello() + structured + sio + req("DISC")
    yield "go-structured-ro", b"\1" + hello() + structured + sio + req("DISC")
    yield "go-plain", b"\0" + hello() + info_go(OPT["GO"], b"fuzz", (3,)) + io
    yield "options", (b"\0" + hello() + opt(OPT["LIST"]) +
                      info_go(OPT["INFO"], b"", (1, 2)) +
                      info_go(OPT["INFO"], b"nosuch") +
                      meta(OPT["LIST_META"], b"", ()) +
                      meta(OPT["LIST_META"], b"", (b"base:",)) +
                      meta(OPT["SET_META"]) +  # before structured: invalid
                      opt(OPT["STARTTLS"]) + opt(OPT["EXTENDED"]) +
                      opt(99, b"xyz") + opt(OPT["LIST"], b"junk") +
                      opt(OPT["ABORT"]))
    bad = (req("READ", 1 << 20, 4096, cookie=1) +
           req("WRITE", (1 << 20) - 10, 20, cookie=2, payload=b"x" * 20) +
           req("READ", 0, 64 << 20, cookie=3) +
           req("WRITE", 0, 4096, 0x80, cookie=4, payload=page) +
           req("TRIM", 0, 4096, DF, cookie=5) +
           struct.pack(">IHHQQI", REQ_MAGIC, 0, 42, 6, 0, 0) +
           req("BLOCK_STATUS", 0, 0, cookie=7) +
           req("READ", 2**64 - 4096, 8192, cookie=8) +
           b"\xde\xad\xbe\xef" + b"\0" * 24)
    yield "bad-requests", b"\0" + hello() + structured + bad
    yield "bad-requests-ro", b"\1" + hello() + opt(OPT["EXPORT_NAME"], b"ro") + bad
    yield "oversized-option", (b"\0" + hello() +
                               struct.pack(">QII", IHAVEOPT, OPT["INFO"], 70000) +
                               b"\0" * 1000)
    yield "bad-magic", b"\0" + hello() + struct.pack(">QII", 0x1234, 7, 0)
    # TLS: what happens in plaintext, before and at NBD_OPT_STARTTLS.
    tls_on, tls_require = b"\2", b"\4"
    yield "tls-require-options", (tls_require + hello() + opt(OPT["LIST"]) +
                                  info_go(OPT["INFO"]) +
                                  opt(OPT["STRUCTURED_REPLY"]) +
                                  meta(OPT["SET_META"]) +
                                  info_go(OPT["GO"], b"fuzz") +
                                  opt(OPT["STARTTLS"], b"x") +
                                  opt(OPT["EXPORT_NAME"]) + io)
    yield "tls-require-abort", (tls_require + hello() + info_go(OPT["GO"]) +
                                opt(OPT["ABORT"]))
    # a TLS ClientHello's record header, then noise, before our ack
    yield "tls-starttls-garbage", (tls_require + hello() + opt(OPT["STARTTLS"]) +
                                   b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc" +
                                   bytes(range(256)))
    yield "tls-starttls-injected", (tls_require + hello() + opt(OPT["STARTTLS"]) +
                                    opt(OPT["STRUCTURED_REPLY"]) +
                                    info_go(OPT["GO"]) + io)
    yield "tls-starttls-end", tls_require + hello() + opt(OPT["STARTTLS"])
    yield "tls-on-plain", (tls_on + hello() + opt(OPT["STARTTLS"], b"xy") +
                           structured + sio + req("DISC"))
    yield "shutdown-io", b"\x10" + hello() + structured + sio
    # byte 0 bit 3: one control channel request line (ctl.c)
    for name, line in (("ctl-json", b"json\n"), ("ctl-compact", b"compact\n"),
                       ("ctl-mem-limit", b"mem-limit 1048576\n"),
                       ("ctl-mem-limit-bad", b"mem-limit  -1\n"),
                       ("ctl-mem-limit-plus", b"mem-limit +5\r\n"),
                       ("ctl-mem-limit-big", b"mem-limit 18446744073709551616"),
                       ("ctl-recompress", b"recompress 1 3 2048\n"),
                       ("ctl-recompress-bad", b"recompress 1 0 4294967296 \n"),
                       ("ctl-idle", b"idle\n"), ("ctl-reset-max", b"reset-max"),
                       ("ctl-junk", b"idle\0junk\n")):
        yield name, b"\x08" + line


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "corpus", "nbd")
    os.makedirs(out, exist_ok=True)
    for name, data in seeds():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
