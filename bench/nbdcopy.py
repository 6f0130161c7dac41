#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""nbdcopy.py - sequential copies with nbdcopy against `uzram serve` and
nbdkit's memory plugin, on the same file, in one run (bench/nbdcopy.sh).

    nbdcopy.py OUT.json

For each repetition, for each target in turn (interleaved, so a slow spell of
the machine hits every target alike), a fresh server with a 1 GiB device on a
Unix socket, then these phases on it:

    in         nbdcopy FILE URI      copy into the fresh device
    overwrite  nbdcopy FILE URI      the same copy again, over the data
    out        nbdcopy URI null:     read the device back (extents skip holes)
    fio-1m     fio nbd engine, sequential 1 MiB reads at qd1 over the file's
               length (information: one request at a time)
    change     nbdcopy FILE2 URI     over the data, a file of the same size
               and kind in which every page differs from the one stored
               there: FILE rotated by one page (information: what a
               rewrite costs when it cannot be skipped)
    verify     nbdcopy URI TMPFILE + sha256 of the file copied in last,
               first repetition only

Per phase: wall seconds, the server's CPU seconds (utime+stime of the whole
process from /proc/PID/stat) and nbdcopy's (rusage of the child). The JSON
holds every sample and the medians; a summary goes to stdout.

Environment: BUILD (default build), NBDCOPY_FILE (default
build/bench-corpus/files.tar, 512 MiB, else build/corpus/files.tar),
NBDCOPY_REPS (3),
NBDCOPY_TARGETS (serve-lz4 nbdkit-sparse nbdkit-zstd), NBDCOPY_PHASES
(in overwrite out fio-1m), NBDCOPY_PERF=DIR (perf record -g of the server
per phase, DIR/TARGET-PHASE.data, first repetition only), NBDCOPY_ARGS
(extra nbdcopy arguments), NBDCOPY_ALT=PATH (another uzram binary as
target serve-alt, for A/B comparisons; NBDCOPY_ALT_ALGO its --algorithm,
default lz4), NBDCOPY_VERIFY=0 (skip the
sha256 check). Standard library only.
"""
import hashlib
import json
import os
import resource
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

TARGETS = {
    # name: (label, argv with {sock} {size})
    "serve-lz4": ("uzram serve, lz4",
                  ["{build}/uzram", "serve", "--size", "1G", "--algorithm", "lz4",
                   "--socket", "{sock}"]),
    "serve-zstd": ("uzram serve, zstd",
                   ["{build}/uzram", "serve", "--size", "1G", "--algorithm",
                    "zstd", "--socket", "{sock}"]),
    # write fast, re-encode later (issue 30): lz4 at the writer, zstd
    # on the device's own thread once it gets to a cluster
    "serve-zstd-only": ("uzram serve, zstd, no fast codec",
                        ["{build}/uzram", "serve", "--size", "1G",
                         "--algorithm", "zstd", "--fast-algorithm", "none",
                         "--socket", "{sock}"]),
    "serve-fast": ("uzram serve, zstd, fast lz4",
                   ["{build}/uzram", "serve", "--size", "1G", "--algorithm",
                    "zstd", "--fast-algorithm", "lz4", "--socket", "{sock}"]),
    "serve-fast8": ("uzram serve, zstd, fast lz4:8",
                    ["{build}/uzram", "serve", "--size", "1G", "--algorithm",
                     "zstd", "--fast-algorithm", "lz4:8", "--socket",
                     "{sock}"]),
    "nbdkit-sparse": ("nbdkit memory, sparse",
                      ["nbdkit", "-f", "-U", "{sock}", "memory", "size=1G",
                       "allocator=sparse"]),
    "nbdkit-zstd": ("nbdkit memory, zstd",
                    ["nbdkit", "-f", "-U", "{sock}", "memory", "size=1G",
                     "allocator=zstd"]),
}
PHASES = ["in", "overwrite", "out", "fio-1m", "change"]
if os.environ.get("NBDCOPY_ALT"):
    _alt = os.environ.get("NBDCOPY_ALT_ALGO", "lz4")
    TARGETS["serve-alt"] = ("uzram serve, %s (alt)" % _alt,
                            [os.environ["NBDCOPY_ALT"], "serve", "--size", "1G",
                             "--algorithm", _alt, "--socket", "{sock}"])
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)


def rotate(src, dst, by):
    """Write src rotated left by `by` bytes to dst; its sha256."""
    h = hashlib.sha256()
    with open(src, "rb") as f, open(dst, "wb") as out:
        head = f.read(by)
        for b in iter(lambda: f.read(1 << 20), b""):
            out.write(b)
            h.update(b)
        out.write(head)
        h.update(head)
    return h.hexdigest()


class Server:
    def __init__(self, name, build, tmp):
        self.sock = os.path.join(tmp, name + ".sock")
        self.log = os.path.join(tmp, name + ".log")
        argv = [a.format(build=build, sock=self.sock) for a in TARGETS[name][1]]
        self.proc = subprocess.Popen(argv, stdout=open(self.log, "w"),
                                     stderr=subprocess.STDOUT)
        for _ in range(200):
            if self.proc.poll() is not None:
                raise RuntimeError("%s did not start: %s" %
                                   (name, open(self.log).read().strip()))
            if os.path.exists(self.sock):
                try:
                    s = socket.socket(socket.AF_UNIX)
                    s.connect(self.sock)
                    s.close()
                    break
                except OSError:
                    pass
            time.sleep(0.05)
        self.uri = "nbd+unix:///?socket=" + self.sock

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        try:
            os.unlink(self.sock)
        except OSError:
            pass


def timed(server, argv, perf=None):
    """Run argv; wall seconds, server CPU seconds, client CPU seconds."""
    rec = None
    if perf:
        rec = subprocess.Popen(["perf", "record", "-q", "-F", "2000", "-g",
                                "-p", str(server.proc.pid), "-o", perf],
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        time.sleep(0.5)
    s0, c0, t0 = cpu_seconds(server.proc.pid), child_cpu(), time.monotonic()
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t1, s1, c1 = time.monotonic(), cpu_seconds(server.proc.pid), child_cpu()
    if rec:
        rec.send_signal(signal.SIGINT)
        rec.wait()
    if r.returncode != 0:
        why = r.stderr.decode().strip().splitlines()[-1:] or ["?"]
        st = server.proc.poll()
        if st is not None:
            why.insert(0, "the server exited with status %d" % st)
        raise RuntimeError("%s: %s" % (argv[0], "; ".join(why)))
    return {"seconds": t1 - t0, "server_cpu": s1 - s0,
            "client_cpu": c1 - c0}, r.stdout


def run_target(name, rep, cfg, tmp, samples):
    srv = Server(name, cfg["build"], tmp)
    try:
        nbdcopy = ["nbdcopy"] + cfg["args"]
        size = os.path.getsize(cfg["file"])
        for phase in cfg["phases"]:
            perf = None
            if cfg["perf"] and rep == 0:
                perf = os.path.join(cfg["perf"], "%s-%s.data" % (name, phase))
            if phase in ("in", "overwrite"):
                argv = nbdcopy + [cfg["file"], srv.uri]
            elif phase == "change":
                argv = nbdcopy + [cfg["rotated"], srv.uri]
            elif phase == "out":
                argv = nbdcopy + [srv.uri, "null:"]
            elif phase == "fio-1m":
                argv = ["fio", "--name=seqread", "--ioengine=nbd",
                        "--uri=" + srv.uri, "--rw=read", "--bs=1M",
                        "--iodepth=1", "--size=%d" % size,
                        "--output-format=json"]
            else:
                raise SystemExit("nbdcopy.py: unknown phase " + phase)
            try:
                res, out = timed(srv, argv, perf)
            except RuntimeError as e:
                raise RuntimeError("%s: %s" % (phase, e))
            if phase == "fio-1m":
                j = json.loads(out[out.find(b"{"):])
                rd = j["jobs"][0]["read"]
                res["MBps"] = rd["bw_bytes"] / 1e6
            else:
                res["MBps"] = size / res["seconds"] / 1e6
            samples.setdefault(name, {}).setdefault(phase, []).append(res)
        if rep == 0 and cfg["verify"]:
            dst = os.path.join(tmp, "out.img")
            subprocess.run(nbdcopy + [srv.uri, dst], check=True)
            with open(dst, "r+b") as f:
                f.truncate(size)
            got = sha256(dst)
            os.unlink(dst)
            want = cfg["sha256"]
            if cfg["phases"] and cfg["phases"][-1] == "change":
                want = cfg["rotated_sha256"]
            samples[name]["verify"] = {"sha256": got, "ok": got == want}
        stat = None
        if name.startswith("serve-"):
            r = subprocess.run([cfg["build"] + "/uzram", "stat", "--socket",
                                srv.sock, "--json"], capture_output=True,
                               text=True)
            if r.returncode == 0:
                stat = json.loads(r.stdout)
        if stat and rep == 0:
            samples[name]["stat"] = stat
    finally:
        srv.stop()


def median_of(runs, key):
    vals = [r[key] for r in runs if key in r]
    return statistics.median(vals) if vals else None


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: nbdcopy.py OUT.json")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    build = os.path.join(root, os.environ.get("BUILD", "build"))
    f = os.environ.get("NBDCOPY_FILE")
    if not f:
        f = os.path.join(root, "build/bench-corpus/files.tar")  # make bench's
        if not os.path.exists(f):
            f = os.path.join(root, "build/corpus/files.tar")
    cfg = {
        "build": build, "file": f,
        "reps": int(os.environ.get("NBDCOPY_REPS", "3")),
        "targets": os.environ.get("NBDCOPY_TARGETS",
                                  "serve-lz4 nbdkit-sparse nbdkit-zstd").split(),
        "phases": os.environ.get("NBDCOPY_PHASES", " ".join(PHASES)).split(),
        "perf": os.environ.get("NBDCOPY_PERF"),
        "args": shlex.split(os.environ.get("NBDCOPY_ARGS", "")),
        "verify": os.environ.get("NBDCOPY_VERIFY", "1") == "1",
    }
    if cfg["perf"]:
        os.makedirs(cfg["perf"], exist_ok=True)
    for t in cfg["targets"]:
        if t not in TARGETS:
            raise SystemExit("nbdcopy.py: unknown target " + t)
    cfg["sha256"] = sha256(f)  # also brings the file into the page cache
    samples = {}
    errors = {}
    tmp = tempfile.mkdtemp(prefix="uzram-nbdcopy.")
    try:
        if "change" in cfg["phases"]:
            cfg["rotated"] = os.path.join(tmp, "rotated")
            cfg["rotated_sha256"] = rotate(f, cfg["rotated"], 4096)
        for rep in range(cfg["reps"]):
            for t in cfg["targets"]:
                if t in errors:
                    continue
                try:
                    run_target(t, rep, cfg, tmp, samples)
                except (RuntimeError, OSError,
                        subprocess.CalledProcessError) as e:
                    errors[t] = str(e)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    result = {
        "file": f, "bytes": os.path.getsize(f), "reps": cfg["reps"],
        "nbdcopy": subprocess.run(["nbdcopy", "--version"], capture_output=True,
                                  text=True).stdout.split("\n")[0],
        "nbdcopy_args": cfg["args"], "phases": cfg["phases"],
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "loadavg": open("/proc/loadavg").read().split()[:3],
        "targets": {},
    }
    for t in cfg["targets"]:
        e = {"label": TARGETS[t][0]}
        if t in errors:
            e["error"] = errors[t]
        s = samples.get(t, {})
        for ph in cfg["phases"]:
            runs = s.get(ph)
            if not runs:
                continue
            e[ph] = {"runs": runs,
                     "seconds": median_of(runs, "seconds"),
                     "MBps": median_of(runs, "MBps"),
                     "server_cpu": median_of(runs, "server_cpu"),
                     "client_cpu": median_of(runs, "client_cpu")}
        for k in ("verify", "stat"):
            if k in s:
                e[k] = s[k]
        result["targets"][t] = e
    with open(sys.argv[1], "w") as out:
        json.dump(result, out, indent=1)

    print("nbdcopy, %d MiB (%s), median of %d; seconds (server CPU s, "
          "nbdcopy CPU s)" % (result["bytes"] >> 20, os.path.basename(f),
                              cfg["reps"]))
    print("  %-22s" % "" + "".join("%-22s" % p for p in cfg["phases"]) +
          "verify")
    for t, e in result["targets"].items():
        row = "  %-22s" % e["label"]
        for ph in cfg["phases"]:
            m = e.get(ph)
            if not m:
                row += "%-22s" % "—"
            elif ph == "fio-1m":
                row += "%-22s" % ("%.0f MB/s (%.2f)" %
                                  (m["MBps"], m["server_cpu"]))
            else:
                row += "%-22s" % ("%.2f (%.2f, %.2f)" %
                                  (m["seconds"], m["server_cpu"],
                                   m["client_cpu"]))
        v = e.get("verify")
        row += "—" if not v else ("ok" if v["ok"] else "MISMATCH")
        if "error" in e:
            row += "  error: " + e["error"]
        print(row)
    bad = any("error" in e or not e.get("verify", {"ok": True})["ok"]
              for e in result["targets"].values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
