#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""nbd_split_reads.py SOCKET IMAGE - large reads with structured replies.

The server may answer a large read with several data chunks sent as they
are decoded (nbd/transmission.c). With structured replies negotiated,
checks that:
  - random large reads (256 KiB to 4 MiB, unaligned ends, past the written
    data into zeros) cover every byte exactly, with the bytes of IMAGE,
    and end with exactly one chunk flagged DONE;
  - a read with NBD_CMD_FLAG_DF comes back as one chunk;
  - clients that vanish in the middle of such replies, at depth 1 and
    pipelined, leave the server serving the same bytes.
"""
import random
import socket
import struct
import sys
import time

import nbd_bad_client as b

NBD_OPT_STRUCTURED_REPLY = 8
NBD_CMD_FLAG_DF = 1 << 2
NBD_REPLY_FLAG_DONE = 1
NBD_STRUCTURED_REPLY_MAGIC = 0x668E33EF
CHUNK_NONE, CHUNK_DATA, CHUNK_HOLE = 0, 1, 2
MiB = 1 << 20


def connect(sock):
    c = b.Conn(sock)
    c.start()
    c.send_opt(NBD_OPT_STRUCTURED_REPLY)
    rtype, _ = c.opt_reply(NBD_OPT_STRUCTURED_REPLY)
    if rtype != b.NBD_REP_ACK:
        raise AssertionError("structured replies refused: %d" % rtype)
    if c.go("") != 0:
        raise AssertionError("NBD_OPT_GO failed")
    return c


def read(c, off, length, flags=0):
    """One read; returns (bytes, number of chunks)."""
    h = c.request(b.NBD_CMD_READ, off, length, flags=flags)
    buf = bytearray(length)
    covered = bytearray(length)
    chunks = 0
    while True:
        magic, fl, typ, hh, ln = struct.unpack(">IHHQI", c.recv(20))
        if magic != NBD_STRUCTURED_REPLY_MAGIC or hh != h:
            raise AssertionError("bad chunk header %#x handle %d" % (magic, hh))
        data = c.recv(ln)
        chunks += 1
        if typ == CHUNK_DATA:
            o, = struct.unpack(">Q", data[:8])
            d, start = data[8:], o - off
            n = len(d)
        elif typ == CHUNK_HOLE:
            o, n = struct.unpack(">QI", data)
            d, start = bytes(n), o - off
        elif typ == CHUNK_NONE:
            n = 0
        else:
            raise AssertionError("chunk type %d in a read reply" % typ)
        if n:
            if start < 0 or start + n > length or any(covered[start:start + n]):
                raise AssertionError("chunk %d+%d outside the read or twice" % (o, n))
            buf[start:start + n] = d
            covered[start:start + n] = b"\1" * n
        if fl & NBD_REPLY_FLAG_DONE:
            break
    if not all(covered):
        raise AssertionError("read %d+%d: bytes left uncovered" % (off, length))
    return bytes(buf), chunks


def main():
    sock, image = sys.argv[1], open(sys.argv[2], "rb").read()
    size = len(image)
    c = connect(sock)
    rng = random.Random(1)
    most = 0
    for _ in range(200):
        ln = rng.choice([256 << 10, MiB, MiB + 3 * 4096 + 17, 4 * MiB, 300001])
        off = rng.randrange(0, size - ln)
        got, n = read(c, off, ln)
        if got != image[off:off + ln]:
            raise AssertionError("read %d+%d: wrong bytes" % (off, ln))
        most = max(most, n)
    got, n = read(c, 4096, MiB, flags=NBD_CMD_FLAG_DF)
    if n != 1 or got != image[4096:4096 + MiB]:
        raise AssertionError("DF read: %d chunks" % n)
    c.disconnect()
    print("200 large reads right, up to %d chunks each; DF read in one" % most)

    for rnd in range(20):
        c = connect(sock)
        c.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        for _ in range(1 + rnd % 3):
            c.request(b.NBD_CMD_READ, (rnd * MiB) % (size - 4 * MiB), 4 * MiB)
        if rnd % 2:
            c.recv(20)  # one chunk header: a reply over holes is short
        if rnd % 3 == 0:
            c.s.shutdown(socket.SHUT_RDWR)
        c.close()
    time.sleep(0.5)
    c = connect(sock)
    got, _ = read(c, 0, MiB)
    if got != image[:MiB]:
        raise AssertionError("after the vanishing clients: wrong bytes")
    c.disconnect()
    print("20 clients vanished mid-reply; the server serves the same bytes")


if __name__ == "__main__":
    main()
