#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""report.py - turn the raw outputs of bench/run.sh into the report.

    report.py summary TARGET [RAWDIR]   progress lines for one target
    report.py build RAWDIR ROOT         ROOT/bench/results.json (every figure),
                                        ROOT/BENCHMARKS.md, ROOT/bench/chart.png
    report.py check ROOT                every section of ROOT/BENCHMARKS.md is
                                        one build writes or one of
                                        bench/sections/, word for word

Inputs in RAWDIR (all written by run.sh):
    env.json              machine, versions, date, mode
    codec.json            build/codec-limit: raw LZ4 on the same pages
    T.json                fio --output-format=json of target T
    T.fill-tar.json ...   bench-fill results (kernel and NBD targets)
    T.stats.jsonl         engine stats lines (in-process targets)
    T.mem.json            memory after the fill (kernel and NBD targets)
    T.skip                the reason target T was skipped
    perf-randread.txt     bench/profile.sh's profile (full runs)
and ROOT/bench/notes.md, hand-written notes on a run, copied in if present,
as are ROOT/bench/sections/*.md, in the order of their names: the sections
that side benches (make bench-dict) write, and the hand-written ones (the
VM swap runs, the file system's, a run's figures not taken). A section of
BENCHMARKS.md that is in none of these is lost at the next build: write it
into bench/sections/ and let bench/section.py copy it in.

Units: MB = 10^6 bytes, latencies in microseconds, IOPS in requests/s.
Standard library only.
"""
import json
import os
import re
import subprocess
import sys

TARGETS = [
    # name, label, kind, algorithm
    ("uzram-lz4", "uzram in-process, lz4", "in-process", "lz4"),
    ("uzram-zstd", "uzram in-process, zstd", "in-process", "zstd"),
    ("uzram-lz4-c16k", "uzram in-process, lz4, 16K clusters", "in-process", "lz4"),
    ("uzram-lz4-pool", "uzram in-process, lz4, 1 worker thread", "in-process", "lz4"),
    ("uzram-zstd-c32k", "uzram in-process, zstd, 32K clusters", "in-process", "zstd"),
    ("zram-lz4", "kernel zram, lz4", "kernel", "lz4"),
    ("serve-lz4", "uzram serve (NBD), lz4", "nbd", "lz4"),
    ("serve-zstd", "uzram serve (NBD), zstd", "nbd", "zstd"),
    ("serve-zstd-c32k", "uzram serve (NBD), zstd, 32K clusters", "nbd", "zstd"),
    ("nbdkit-sparse", "nbdkit memory, sparse", "nbd", "none"),
    ("nbdkit-zstd", "nbdkit memory, zstd", "nbd", "zstd"),
]
READ_JOBS = ["seqread", "randread-qd1", "randread-qd1-2j", "randread-qd16",
             "mix-read"]
WRITE_BS = ["4k", "64k", "400k", "1600k", "4500k"]


def load_json(path):
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    if not text.strip():
        return None
    # fio may print notes before its JSON object
    start = text.find("{")
    return json.loads(text[start:]) if start >= 0 else None


def pct(lat, key):
    p = lat.get("percentile") or {}
    for k, v in p.items():
        if abs(float(k) - key) < 1e-6:
            return v / 1000.0
    return None


def parse_fio(path):
    """Per job name: summed IOPS and bandwidth, latency of the first job."""
    data = load_json(path)
    jobs = {}
    if not data:
        return jobs
    for j in data.get("jobs", []):
        name = j["jobname"]
        for ddir in ("read", "write"):
            d = j[ddir]
            if not d.get("total_ios"):
                continue
            e = jobs.setdefault(name, {"dir": ddir, "iops": 0.0, "MBps": 0.0,
                                       "jobs": 0, "error": 0})
            e["iops"] += d["iops"]
            e["MBps"] += d["bw_bytes"] / 1e6
            e["jobs"] += 1
            e["error"] |= j.get("error", 0)
            lat = d.get("lat_ns") or {}
            if "lat_us" not in e and lat.get("N"):
                e["lat_us"] = {
                    "p50": pct(lat, 50), "p99": pct(lat, 99),
                    "p99.99": pct(lat, 99.99), "max": lat["max"] / 1000.0,
                    "mean": lat["mean"] / 1000.0,
                }
    return jobs


def collect_target(raw, name):
    t = {}
    skip = os.path.join(raw, name + ".skip")
    if os.path.exists(skip):
        t["skipped"] = open(skip).read().strip()
        return t
    jobs = parse_fio(os.path.join(raw, name + ".json"))
    if not jobs and not os.path.exists(os.path.join(raw, name + ".mem.json")) \
            and not os.path.exists(os.path.join(raw, name + ".stats.jsonl")):
        return None
    fill = {}
    for part in ("tar", "core"):
        ext = load_json(os.path.join(raw, "%s.fill-%s.json" % (name, part)))
        if ext:
            fill[part] = {"MBps": ext["MBps"], "bytes": ext["bytes"],
                          "seconds": ext["seconds"], "by": "bench-fill"}
            if "cpu_seconds" in ext:
                fill[part]["cpu_seconds"] = ext["cpu_seconds"]
        elif "fill-" + part in jobs:
            j = jobs.pop("fill-" + part)
            fill[part] = {"MBps": j["MBps"], "by": "fio uzram engine"}
    if "tar" in fill and "core" in fill and "bytes" not in fill["tar"]:
        env = load_json(os.path.join(raw, "env.json")) or {}
        fill["tar"]["bytes"] = env.get("corpus_tar_mib", 0) << 20
        fill["core"]["bytes"] = env.get("corpus_core_mib", 0) << 20
        for p in ("tar", "core"):
            fill[p]["seconds"] = fill[p]["bytes"] / (fill[p]["MBps"] * 1e6)
    mem = {}
    stats = os.path.join(raw, name + ".stats.jsonl")
    lines = {}
    if os.path.exists(stats):
        for line in open(stats):
            try:
                s = json.loads(line)
            except ValueError:
                continue
            lines[s.get("job")] = s
            part = s.get("job", "")[5:] if s.get("job", "").startswith("fill-") else None
            if part in fill and "cpu_seconds" in s:
                fill[part].setdefault("cpu_seconds", s["cpu_seconds"])
            if s.get("job") == "fill-core" and not mem:
                mem = {k: v for k, v in s.items() if k not in ("job", "cpu_seconds")}
    if "tar" in fill and "core" in fill:
        b = fill["tar"]["bytes"] + fill["core"]["bytes"]
        s = fill["tar"]["seconds"] + fill["core"]["seconds"]
        fill["all"] = {"MBps": b / s / 1e6, "bytes": b, "seconds": s}
        if "cpu_seconds" in fill["tar"] and "cpu_seconds" in fill["core"]:
            c = fill["tar"]["cpu_seconds"] + fill["core"]["cpu_seconds"]
            fill["all"]["cpu_seconds"] = c
            fill["all"]["cpu_s_per_gb"] = c / (b / 1e9)
    t["fill"] = fill
    t["lock_mix"] = lock_delta(lines, "randread-qd16", ("mix-read", "mix-write"))
    m = load_json(os.path.join(raw, name + ".mem.json"))
    if m:
        st = m.pop("stat", None)
        mem.update(m)
        if st:
            for k in ("orig_data_size", "compr_data_size", "mem_used_total",
                      "mem_used_max", "same_pages", "huge_pages",
                      "pages_stored", "table_bytes"):
                if k in st:
                    mem[k] = st[k]
    if mem.get("mem_used_total") and mem.get("compr_data_size"):
        mem["overhead"] = mem["mem_used_total"] / mem["compr_data_size"]
    t["memory"] = mem
    after = load_json(os.path.join(raw, name + ".mem-after.json"))
    if after:
        t["memory_after_workloads"] = after
    t["jobs"] = jobs
    return t


LOCK_FIELDS = ["slot_lock_waits", "slot_lock_wait_ns", "slot_read_waits",
               "slot_read_wait_ns", "class_lock_waits", "class_lock_wait_ns",
               "frame_waits", "frame_wait_ns"]


def lock_delta(lines, before, during):
    """The lock figures counted while the jobs `during` ran: the engine's
    stats lines are cumulative, one per job at its end."""
    a = lines.get(before)
    bs = [lines[j] for j in during if j in lines]
    if not a or not bs or any(k not in a for k in LOCK_FIELDS):
        return None
    return {k: max(b.get(k, 0) for b in bs) - a[k] for k in LOCK_FIELDS}


def get(d, *keys):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def ratio(a, b):
    return a / b if a is not None and b else None


# ---- formatting -----------------------------------------------------------

def f0(v):
    return "—" if v is None else "{:,.0f}".format(v)


def f1(v):
    return "—" if v is None else "{:,.1f}".format(v)


def f2(v):
    return "—" if v is None else "{:.2f}".format(v)


def f3(v):
    return "—" if v is None else "{:.3f}".format(v)


def fx(v):
    return "—" if v is None else "{:.2f}×".format(v)


def fp(v):
    return "—" if v is None else "{:.0f}%".format(v * 100)


def fp1(v):
    return "—" if v is None else "{:.1f}%".format(v * 100)


def mb(v):
    return "—" if v is None else "{:,.1f}".format(v / 1e6)


def summary(name, raw):
    t = collect_target(raw, name)
    if not t:
        print("no results")
        return
    if t.get("skipped"):
        print("skipped: " + t["skipped"])
        return
    fill = t.get("fill", {})
    if fill:
        print("fill: " + ", ".join("%s %s MB/s" % (k, f1(v["MBps"]))
                                   for k, v in fill.items()))
    m = t.get("memory", {})
    parts = []
    for k in ("mem_used_total", "compr_data_size", "rss_bytes"):
        if m.get(k) is not None:
            parts.append("%s %s MB" % (k, mb(m[k])))
    if parts:
        print("memory: " + ", ".join(parts))
    j = t.get("jobs", {})
    line = []
    for k in ("seqread",):
        if k in j:
            line.append("seq read %s MB/s" % f0(j[k]["MBps"]))
    for k in ("randread-qd1", "randread-qd1-2j", "randread-qd16"):
        if k in j:
            line.append("%s %s IOPS" % (k[9:], f0(j[k]["iops"])))
    if line:
        print("read: " + ", ".join(line))
    if "mix-read" in j and j["mix-read"].get("lat_us"):
        l = j["mix-read"]["lat_us"]
        print("read latency under a writer (us): p50 %s p99 %s p99.99 %s max %s"
              % (f1(l["p50"]), f1(l["p99"]), f1(l["p99.99"]), f1(l["max"])))
    w = ["%s %s" % (bs, f0(get(j, "write-" + bs, "MBps"))) for bs in WRITE_BS
         if "write-" + bs in j]
    if w:
        print("write MB/s by block size: " + ", ".join(w))
    errs = [k for k, v in j.items() if v.get("error")]
    if errs:
        print("fio reported errors in: " + ", ".join(errs))


# ---- the targets of issue 4 ---------------------------------------------

def targets_table(R):
    T = R["targets"]
    C = R.get("codec") or {}
    rows = []

    def row(measure, target, value, met, basis):
        rows.append({"measure": measure, "target": target, "value": value,
                     "met": met, "basis": basis})

    uz = T.get("uzram-lz4") or {}
    zr = T.get("zram-lz4") or {}
    dr1 = get(C, "decompress_random", "1", "pages_per_s")
    dr2 = get(C, "decompress_random", "2", "pages_per_s")
    c1 = get(C, "compress", "1", "MBps")

    q1 = get(uz, "jobs", "randread-qd1", "iops")
    zq1 = get(zr, "jobs", "randread-qd1", "iops")
    r = ratio(q1, dr1)
    row("in-process 4K random read, qd1, 1 thread", "≥ 85% of raw LZ4 decode",
        "%s IOPS = %s of %s pages/s (%s kernel zram's %s)"
        % (f0(q1), fp1(r), f0(dr1), fx(ratio(q1, zq1)), f0(zq1)),
        None if r is None else r >= 0.85, "uzram-lz4 randread-qd1 / codec decompress_random 1 thread")

    q2 = get(uz, "jobs", "randread-qd1-2j", "iops")
    s_uz, s_c = ratio(q2, q1), ratio(dr2, dr1)
    zs = ratio(get(zr, "jobs", "randread-qd1-2j", "iops"), zq1)
    r = ratio(s_uz, s_c)
    row("scaling, 2 threads vs 1", "≥ 0.9× raw LZ4 decode scaling",
        "%s vs raw LZ4 %s = %s (kernel zram %s)" % (fx(s_uz), fx(s_c), f3(r), fx(zs)),
        None if r is None else r >= 0.9, "randread-qd1-2j / randread-qd1")

    fw = get(uz, "fill", "all", "MBps")
    r = ratio(fw, c1)
    zf = get(zr, "fill", "all", "MBps")
    row("sequential write, one writer", "≥ 80% of raw LZ4 compress",
        "%s MB/s = %s of %s MB/s (%s kernel zram's %s MB/s)"
        % (f1(fw), fp1(r), f1(c1), fx(ratio(fw, zf)), f1(zf)),
        None if r is None else r >= 0.80, "fill of the corpus, 1M writes qd1")

    um = get(uz, "memory", "mem_used_total")
    zm = get(zr, "memory", "mem_used_total")
    r = ratio(um, zm)
    row("memory for the same data, lz4", "≤ 0.95× kernel zram's mem_used_total",
        "%s MB vs %s MB = %s" % (mb(um), mb(zm), f3(r)),
        None if r is None else r <= 0.95, "mem_used_total after the fill")
    ov = get(uz, "memory", "overhead")
    row("allocator overhead, lz4", "mem_used_total / compr_data_size ≤ 1.03",
        "%s / %s MB = %s" % (mb(um), mb(get(uz, "memory", "compr_data_size")), f3(ov)),
        None if ov is None else ov <= 1.03, "uzram-lz4 after the fill")

    cl = T.get("uzram-lz4-c16k") or {}
    cm = get(cl, "memory", "mem_used_total")
    r = ratio(cm, zm)
    row("memory for the same data, lz4, 16 KiB clusters",
        "≤ 0.95× kernel zram's mem_used_total",
        "%s MB vs %s MB = %s; its 4K random read qd1: %s IOPS (%s of one-page clusters)"
        % (mb(cm), mb(zm), f3(r), f0(get(cl, "jobs", "randread-qd1", "iops")),
           fp1(ratio(get(cl, "jobs", "randread-qd1", "iops"), q1))),
        None if r is None else r <= 0.95, "uzram-lz4-c16k mem_used_total after the fill")

    nz = get(T, "nbdkit-zstd", "memory", "rss_bytes")
    sz = get(T, "serve-zstd", "memory", "rss_bytes")
    basis = "uzram serve zstd RSS vs nbdkit zstd RSS"
    if sz is None:
        sz = get(T, "uzram-zstd", "memory", "mem_used_total")
        basis = "uzram in-process zstd mem_used_total vs nbdkit zstd RSS"
    r = ratio(sz, nz)
    row("memory with zstd", "below nbdkit allocator=zstd's RSS",
        "%s MB vs %s MB = %s" % (mb(sz), mb(nz), f3(r)),
        None if r is None else r < 1.0, basis)
    zc = T.get("uzram-zstd-c32k") or {}
    sz = get(T, "serve-zstd-c32k", "memory", "rss_bytes")
    basis = "uzram serve --cluster 32K zstd RSS vs nbdkit zstd RSS"
    if sz is None:
        sz = get(zc, "memory", "mem_used_total")
        basis = "uzram in-process zstd 32K clusters mem_used_total vs nbdkit zstd RSS"
    r = ratio(sz, nz)
    row("memory with zstd, 32 KiB clusters", "below nbdkit allocator=zstd's RSS",
        "%s MB vs %s MB = %s; in-process 4K random read qd1: %s IOPS (nbdkit zstd over NBD: %s)"
        % (mb(sz), mb(nz), f3(r), f0(get(zc, "jobs", "randread-qd1", "iops")),
           f0(get(T, "nbdkit-zstd", "jobs", "randread-qd1", "iops"))),
        None if r is None else r < 1.0, basis)

    lat = get(uz, "jobs", "mix-read", "lat_us") or {}
    zlat = get(zr, "jobs", "mix-read", "lat_us") or {}
    r = ratio(lat.get("p99.99"), zlat.get("p99.99"))
    mx = lat.get("max")
    met = None
    if r is not None and mx is not None:
        met = r <= 0.5 and mx <= 5000
    row("reader p99.99 / max latency under one writer",
        "p99.99 ≤ 0.5× kernel zram's; max ≤ 5 ms",
        "p99.99 %s µs vs zram %s µs = %s; max %s µs (zram %s µs)"
        % (f1(lat.get("p99.99")), f1(zlat.get("p99.99")), f3(r), f1(mx),
           f1(zlat.get("max"))), met, "mix-read while mix-write rewrites")

    bws = [get(uz, "jobs", "write-" + bs, "MBps") for bs in WRITE_BS[1:]]
    r = None
    if all(b for b in bws):
        r = max(bws) / min(bws)
    row("write bandwidth across block sizes", "max/min ≤ 1.15 from 64K up",
        "%s MB/s (64K..4500K) → %s" % (" / ".join(f0(b) for b in bws), f3(r)),
        None if r is None else r <= 1.15, "uzram-lz4 write sweep")

    sq = get(T, "serve-lz4", "jobs", "randread-qd1", "iops")
    nq = get(T, "nbdkit-sparse", "jobs", "randread-qd1", "iops")
    r = ratio(sq, nq)
    row("over NBD: 4K random read qd1", "≥ nbdkit's uncompressed memory plugin",
        "%s vs %s IOPS = %s (nbdkit zstd %s)"
        % (f0(sq), f0(nq), f3(r), f0(get(T, "nbdkit-zstd", "jobs", "randread-qd1", "iops"))),
        None if r is None else r >= 1.0, "serve-lz4 vs nbdkit-sparse")
    return rows


# ---- the targets of issue 14 (the write path) ------------------------------

def issue14_table(R):
    """Issue 14's targets, ratios within this run, each met or missed."""
    T, C = R["targets"], R.get("codec") or {}
    N = get(R, "nbdcopy", "targets") or {}
    rows = []

    def row(measure, target, value, met, basis):
        rows.append({"measure": measure, "target": target, "value": value,
                     "met": met, "basis": basis})

    uz, pool, zr = (T.get(k) or {} for k in ("uzram-lz4", "uzram-lz4-pool",
                                            "zram-lz4"))
    fw, pw, zf = (get(t, "fill", "all", "MBps") for t in (uz, pool, zr))
    uc, pc, zc = (get(t, "fill", "all", "cpu_s_per_gb") for t in (uz, pool, zr))
    r = ratio(fw, zf)
    row("in-process fill, 1 writer, default settings", "≥ 1.0× kernel zram",
        "%s vs %s MB/s = %s; CPU %s s/GB vs zram %s s/GB. With 1 worker "
        "thread: %s MB/s = %s zram, CPU %s s/GB"
        % (f1(fw), f1(zf), fx(r), f2(uc), f2(zc), f1(pw), fx(ratio(pw, zf)),
           f2(pc)),
        None if r is None else r >= 1.0,
        "fill of the corpus, 1M writes qd1; uzram-lz4-pool: UZRAM_FIO_THREADS=1")

    a, b = get(N, "serve-lz4", "change", "seconds"), get(N, "nbdkit-sparse", "change", "seconds")
    r = ratio(a, b)
    row("nbdcopy of a different file over stored data", "≤ 1.0× nbdkit sparse's time",
        "%s s vs %s s = %s" % (f2(a), f2(b), fx(r)),
        None if r is None else r <= 1.0, "bench/nbdcopy.sh, phase change")

    a = get(T, "serve-lz4", "jobs", "seqread", "MBps")
    b = get(T, "nbdkit-sparse", "jobs", "seqread", "MBps")
    a1, b1 = get(N, "serve-lz4", "fio-1m", "MBps"), get(N, "nbdkit-sparse", "fio-1m", "MBps")
    r = ratio(a1, b1) if a1 is not None else ratio(a, b)
    row("fio nbd 1 MiB sequential reads, qd1", "≥ 1.0× nbdkit sparse",
        "nbdcopy.sh fio-1m: %s vs %s MB/s = %s; workloads seqread: %s vs %s MB/s = %s"
        % (f0(a1), f0(b1), fx(ratio(a1, b1)), f0(a), f0(b), fx(ratio(a, b))),
        None if r is None else r >= 1.0, "serve-lz4 vs nbdkit-sparse")

    q1 = get(uz, "jobs", "randread-qd1", "iops")
    dr1 = get(C, "decompress_random", "1", "pages_per_s")
    r = ratio(q1, dr1)
    row("in-process 4K random read, qd1", "≥ 85% of raw LZ4 decode",
        "%s IOPS = %s of %s pages/s" % (f0(q1), fp1(r), f0(dr1)),
        None if r is None else r >= 0.85, "uzram-lz4 randread-qd1 / codec")

    lat = get(uz, "jobs", "mix-read", "lat_us") or {}
    zlat = get(zr, "jobs", "mix-read", "lat_us") or {}
    mx, zmx = lat.get("max"), zlat.get("max")
    r = ratio(lat.get("p99.99"), zlat.get("p99.99"))
    met = None
    if r is not None and mx is not None and zmx is not None:
        met = mx <= 5000 and mx <= zmx and r <= 0.5
    lm = uz.get("lock_mix")
    waits = ""
    if lm:
        waits = ("; lock waits during the mix: readers on a cluster %d (%s µs "
                 "in all), on a moving frame %d (%s µs), writer on a cluster "
                 "%d, on a size class %d (%s µs)"
                 % (lm["slot_read_waits"], f1(lm["slot_read_wait_ns"] / 1e3),
                    lm["frame_waits"], f1(lm["frame_wait_ns"] / 1e3),
                    lm["slot_lock_waits"], lm["class_lock_waits"],
                    f1(lm["class_lock_wait_ns"] / 1e3)))
    row("reader latency under one writer, in-process",
        "max ≤ 5 ms and ≤ zram's; p99.99 ≤ 0.5× zram's",
        "max %s µs (zram %s µs); p99.99 %s µs vs %s µs = %s%s"
        % (f1(mx), f1(zmx), f1(lat.get("p99.99")), f1(zlat.get("p99.99")), f3(r),
           waits),
        met, "mix-read while mix-write rewrites")
    return rows


# ---- nbdcopy (issue 3), from bench/nbdcopy.sh ------------------------------

NBDCOPY_PHASES = [
    ("in", "copy into a fresh device", "`nbdcopy files.tar URI`"),
    ("overwrite", "copy in again, over the data", "`nbdcopy files.tar URI`"),
    ("out", "copy out", "`nbdcopy URI null:`"),
]


def nbdcopy_markdown(R):
    """The "nbdcopy" section: seconds per phase, uzram vs nbdkit, and
    issue 3's target (every copy at least as fast as nbdkit sparse)."""
    N = R.get("nbdcopy")
    if not N:
        return []
    T = N.get("targets", {})
    uz, ns, nz = (T.get(k) or {} for k in ("serve-lz4", "nbdkit-sparse",
                                          "nbdkit-zstd"))
    out = []
    w = out.append
    w("## nbdcopy, %d MiB" % (N.get("bytes", 0) >> 20))
    w("")
    w("bench/nbdcopy.sh: %s of %s, each server on a fresh 1 GiB device over a "
      "Unix socket, started by the script; the targets take turns within each "
      "of %d repetitions, medians shown. In brackets: CPU seconds of the "
      "server process (utime+stime) and of nbdcopy. Load average at the end "
      "%s." % (N.get("nbdcopy", "nbdcopy"), os.path.basename(N.get("file", "?")),
              N.get("reps", 0), " ".join(N.get("loadavg") or []) or "?"))
    w("")

    def cell(t, ph):
        m = t.get(ph)
        if not m:
            return "—"
        if ph == "fio-1m":
            return "%s MB/s (%s)" % (f0(m.get("MBps")), f2(m.get("server_cpu")))
        return "%s s (%s, %s)" % (f2(m.get("seconds")), f2(m.get("server_cpu")),
                                  f2(m.get("client_cpu")))

    w("| copy | uzram serve, lz4 | nbdkit memory, sparse | nbdkit memory, zstd "
      "| uzram / nbdkit sparse | at least as fast? |")
    w("|---|---|---|---|---|---|")
    verdicts = []
    for ph, label, how in NBDCOPY_PHASES:
        a, b = get(uz, ph, "seconds"), get(ns, ph, "seconds")
        met = None if a is None or b is None else a <= b
        verdicts.append(met)
        w("| %s (%s) | %s | %s | %s | %s | %s |" % (
            label, how, cell(uz, ph), cell(ns, ph), cell(nz, ph),
            fx(ratio(a, b)),
            {True: "**met**", False: "**missed**", None: "not measured"}[met]))
    a, b = get(uz, "change", "seconds"), get(ns, "change", "seconds")
    if a is not None:
        w("| copy a different file over the data (files.tar rotated by one "
          "page: no page can be skipped; information) | %s | %s | %s | %s | — |"
          % (cell(uz, "change"), cell(ns, "change"), cell(nz, "change"),
             fx(ratio(a, b))))
    a, b = get(uz, "fio-1m", "MBps"), get(ns, "fio-1m", "MBps")
    w("| fio nbd engine, 1 MiB sequential reads, qd1 (information) | %s | %s | %s "
      "| %s | — |" % (cell(uz, "fio-1m"), cell(ns, "fio-1m"), cell(nz, "fio-1m"),
                      fx(ratio(b, a))))
    w("")
    if None in verdicts:
        overall = "not measured"
    else:
        overall = "**met**" if all(verdicts) else "**missed**"
    w("Issue 3's target, sequential copy with nbdcopy at least as fast as "
      "nbdkit's memory plugin (sparse), in every copy: %s. The ratio column "
      "is uzram's time over nbdkit's (fio: nbdkit's bandwidth over "
      "uzram's), so below 1 is uzram faster." % overall)
    bad = [k for k, t in T.items()
           if t.get("error") or not (t.get("verify") or {"ok": True})["ok"]]
    ok = [k for k, t in T.items() if (t.get("verify") or {}).get("ok")]
    if ok:
        w("The copy out to a file matched the sha256 of the file copied in "
          "last for: %s." % ", ".join(ok))
    for k in bad:
        w("**%s: %s**" % (k, T[k].get("error") or "sha256 of the copy out differs"))
    w("")
    return out


# ---- the report ---------------------------------------------------------

def present(R):
    return [(n, l) for n, l, _, _ in TARGETS
            if R["targets"].get(n) and not R["targets"][n].get("skipped")]


def markdown(R, chart_rel):
    E, C, T = R["env"], R.get("codec") or {}, R["targets"]
    zr = T.get("zram-lz4") or {}
    ns = T.get("nbdkit-sparse") or {}
    nz = T.get("nbdkit-zstd") or {}
    out = []
    w = out.append
    w("# uzram benchmarks")
    w("")
    w("Generated by `make %s` (bench/run.sh, bench/report.py) on %s. Do not edit by hand: "
      "run it again. Every figure is also in `bench/results.json`; fio's raw output "
      "is in `bench/out/raw/` after a run."
      % ("bench" if E.get("mode") == "full" else "bench-quick", E.get("date")))
    w("")
    w("- machine: %s, %s CPUs (%s), %s MiB RAM; kernel %s"
      % (E.get("machine"), E.get("cpus"), E.get("cpu"), E.get("mem_total_mib"), E.get("kernel")))
    w("- software: %s, %s, libnbd %s, lz4 %s, zstd %s, gcc %s, %s (git %s)"
      % (E.get("fio"), E.get("nbdkit"), (E.get("libnbd") or "").replace("libnbd ", ""),
         E.get("lz4"), E.get("zstd"), E.get("gcc"), E.get("uzram"), E.get("git")))
    w("- data: the corpus of scripts/corpus.sh (or make bench CORPUS=DIR), all real data: %s MiB of "
      "files.tar (installed binaries, headers, docs) at device offset 0 and %s MiB of "
      "heap-python.core (a Python process image) right after it, on a 2 GiB device"
      % (E.get("corpus_tar_mib"), E.get("corpus_core_mib")))
    w("- mode: %s; MB = 10^6 bytes; latencies in µs; one run on a 2-core machine shared "
      "with other work (load average %s at the start, %s at the end; nice %s), so "
      "expect noise, most of all in the latency tails"
      % (E.get("mode"), " ".join(E.get("loadavg") or []) or "?",
         E.get("loadavg_end", "?"), E.get("nice")))
    w("")
    w("![IOPS, throughput and memory per target](%s)" % chart_rel)
    w("")

    w("## Targets of issue 4 (computed from this run)")
    w("")
    w("| measure | target | this run | met? |")
    w("|---|---|---|---|")
    for r in R["targets_table"]:
        met = {True: "**met**", False: "**missed**", None: "not measured"}[r["met"]]
        w("| %s | %s | %s | %s |" % (r["measure"], r["target"], r["value"], met))
    w("")

    w("## Targets of issue 14, the write path (computed from this run)")
    w("")
    w("| measure | target | this run | met? |")
    w("|---|---|---|---|")
    for r in R.get("issue14_table", []):
        met = {True: "**met**", False: "**missed**", None: "not measured"}[r["met"]]
        w("| %s | %s | %s | %s |" % (r["measure"], r["target"], r["value"], met))
    w("")

    w("## Targets run")
    w("")
    w("| target | how | status |")
    w("|---|---|---|")
    how = {
        "uzram-lz4": "libuzram in the fio process, `ioengine=external:build/uzram-fio.so`",
        "uzram-zstd": "the same with `uzram_algorithm=zstd`",
        "uzram-lz4-c16k": "the same with `uzram_cluster=16384` (lz4)",
        "uzram-lz4-pool": "the same with one worker thread (`UZRAM_FIO_THREADS=1`), fill only",
        "uzram-zstd-c32k": "the same with `uzram_algorithm=zstd`, `uzram_cluster=32768`",
        "zram-lz4": "/dev/zram0 (lz4, 2G), fio psync direct=1 (qd16: io_uring)",
        "serve-lz4": "`build/uzram serve --algorithm lz4`, fio nbd engine, Unix socket",
        "serve-zstd": "`build/uzram serve --algorithm zstd`, fill and memory only",
        "serve-zstd-c32k": "`build/uzram serve --algorithm zstd --cluster 32K`, fill and memory only",
        "nbdkit-sparse": "`nbdkit memory allocator=sparse`, fio nbd engine, Unix socket",
        "nbdkit-zstd": "`nbdkit memory allocator=zstd`, fio nbd engine, Unix socket",
    }
    for n, l, _, _ in TARGETS:
        t = T.get(n)
        if t is None:
            status = "not in this run"
        elif t.get("skipped"):
            status = "skipped: " + t["skipped"]
        else:
            errs = [k for k, v in t.get("jobs", {}).items() if v.get("error")]
            status = "ran" + (" (fio errors in %s)" % ", ".join(errs) if errs else "")
        w("| %s | %s | %s |" % (n, how[n], status))
    w("")

    w("## Codec limit: raw LZ4 on the same 4 KiB pages")
    w("")
    w("build/codec-limit: every page of the corpus compressed once with "
      "LZ4_compress_default, then LZ4_decompress_safe in a random page order "
      "(the limit for 4K random reads) and in storage order (for sequential "
      "reads), and LZ4_compress_default in order (for writes). %s pages, %s MB → %s MB (ratio %s)."
      % (f0(C.get("pages")), mb(C.get("orig_bytes")), mb(C.get("compr_bytes")),
         f2(ratio(C.get("orig_bytes"), C.get("compr_bytes")))))
    w("")
    w("| measure | 1 thread MB/s | 1 thread pages/s | 2 threads MB/s | 2 threads pages/s | scaling |")
    w("|---|---|---|---|---|---|")
    for k in ("decompress_random", "decompress_seq", "compress"):
        a, b = get(C, k, "1") or {}, get(C, k, "2") or {}
        w("| %s | %s | %s | %s | %s | %s |" % (
            k.replace("_", " "), f1(a.get("MBps")), f0(a.get("pages_per_s")),
            f1(b.get("MBps")), f0(b.get("pages_per_s")),
            fx(ratio(b.get("pages_per_s"), a.get("pages_per_s")))))
    w("")

    fnull = get(R, "fio_null", "iops")
    lim = get(C, "decompress_random", "1", "pages_per_s")
    if fnull and lim:
        # A device taking exactly the decode time, plus fio's own time.
        best = 1 / (1 / fnull + 1 / lim)
        w("fio's own ceiling in this harness: its null engine runs the same 4K random "
          "read job (qd1) at %s IOPS, %.2f µs of fio per request. A device that only "
          "decoded would show %s IOPS through fio, %s of the limit."
          % (f0(fnull), 1e6 / fnull, f0(best), fp(best / lim)))
        w("")

    dr1 = get(C, "decompress_random", "1", "pages_per_s")
    dr2 = get(C, "decompress_random", "2", "pages_per_s")
    ds1 = get(C, "decompress_seq", "1", "MBps")
    c1 = get(C, "compress", "1", "MBps")
    zq = lambda k: get(zr, "jobs", k, "iops")
    nq = lambda k: get(ns, "jobs", k, "iops")

    w("## Reads")
    w("")
    w("4K random reads over the whole corpus (norandommap), sequential 1M reads. "
      "Ratios: to kernel zram (lz4), to nbdkit sparse (uncompressed), and to the "
      "codec limit (random-order decode for 4K reads, 1 thread for qd1 and qd16, "
      "2 threads for 2 jobs; storage-order decode for sequential reads).")
    w("")
    w("| target | seq read MB/s | 4K qd1 IOPS | 4K qd1 2 jobs IOPS | 4K qd16 IOPS | qd1 vs zram | qd1 vs nbdkit sparse | qd1 / limit | 2 jobs / limit | qd16 / limit | seq / limit |")
    w("|---|---|---|---|---|---|---|---|---|---|---|")
    for n, l in present(R):
        j = T[n].get("jobs", {})
        q1 = get(j, "randread-qd1", "iops")
        q2 = get(j, "randread-qd1-2j", "iops")
        q16 = get(j, "randread-qd16", "iops")
        sr = get(j, "seqread", "MBps")
        if q1 is None and sr is None:
            continue
        w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            l, f0(sr), f0(q1), f0(q2), f0(q16), fx(ratio(q1, zq("randread-qd1"))),
            fx(ratio(q1, nq("randread-qd1"))), fp(ratio(q1, dr1)), fp(ratio(q2, dr2)),
            fp(ratio(q16, dr1)), fp(ratio(sr, ds1))))
    w("")

    w("## Read latency while a second job rewrites random pages")
    w("")
    w("One 4K random reader at qd1 and one 4K random writer at qd1 on the same "
      "data; the writer's pages are fio buffers with buffer_compress_percentage=50. "
      "fio completion-to-submission latency (lat_ns).")
    w("")
    w("| target | p50 µs | p99 µs | p99.99 µs | max µs | reader IOPS | reader / limit | writer IOPS | p99.99 vs zram | max vs zram |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    zl = get(zr, "jobs", "mix-read", "lat_us") or {}
    for n, l in present(R):
        j = T[n].get("jobs", {})
        lat = get(j, "mix-read", "lat_us")
        if not lat:
            continue
        w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            l, f1(lat["p50"]), f1(lat["p99"]), f1(lat["p99.99"]), f1(lat["max"]),
            f0(get(j, "mix-read", "iops")), fp(ratio(get(j, "mix-read", "iops"), dr1)),
            f0(get(j, "mix-write", "iops")),
            fx(ratio(lat["p99.99"], zl.get("p99.99"))), fx(ratio(lat["max"], zl.get("max")))))
    w("")

    w("## Writes")
    w("")
    w("Fill: the corpus written with sequential 1M writes at qd1 (in-process: fio "
      "with the engine's uzram_src option, which pwrites the corpus bytes into "
      "fio's buffer; kernel and NBD: build/bench-fill, the same pread + write "
      "loop, O_DIRECT for zram; fio itself can only write generated data). "
      "Sweep: sequential writes of fio buffers (50% compressible) over a 1 GiB+ "
      "region written once before, one writer.")
    w("")
    w("| target | fill tar MB/s | fill core MB/s | fill all MB/s | all / LZ4 compress | all vs zram | %s | max/min 64K+ |"
      % " | ".join(bs.upper() + " MB/s" for bs in WRITE_BS))
    w("|---|---|---|---|---|---|%s---|" % ("---|" * len(WRITE_BS)))
    zf = get(zr, "fill", "all", "MBps")
    for n, l in present(R):
        t = T[n]
        j = t.get("jobs", {})
        fa = get(t, "fill", "all", "MBps")
        bws = [get(j, "write-" + bs, "MBps") for bs in WRITE_BS]
        big = [b for b in bws[1:] if b]
        flat = max(big) / min(big) if len(big) == len(bws) - 1 else None
        w("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            l, f1(get(t, "fill", "tar", "MBps")), f1(get(t, "fill", "core", "MBps")),
            f1(fa), fp(ratio(fa, c1)) if "lz4" in n else "—", fx(ratio(fa, zf)),
            " | ".join(f0(b) for b in bws), f2(flat)))
    w("")

    out.extend(nbdcopy_markdown(R))
    w("## Memory held for the corpus")
    w("")
    w("Right after the fill. mem_used_total: what the allocator holds (zram's "
      "mm_stat, uzram_stats). RSS: the whole process (for in-process targets that "
      "is the fio process, with fio's own %s MB before the device was filled)."
      % mb(get(T, "uzram-lz4", "memory", "rss_open_bytes")))
    w("")
    w("| target | stored MB | compressed MB | mem_used_total MB | overhead | page table MB | RSS MB | vs zram | vs nbdkit zstd RSS |")
    w("|---|---|---|---|---|---|---|---|---|")
    zm = get(zr, "memory", "mem_used_total")
    nzr = get(nz, "memory", "rss_bytes")
    for n, l in present(R):
        m = T[n].get("memory") or {}
        held = m.get("mem_used_total")
        # against nbdkit zstd's RSS: the RSS of a server, else what the
        # in-process device holds (the fio process's RSS is mostly fio)
        zcmp = None
        if T[n].get("algorithm") == "zstd":
            zcmp = m.get("rss_bytes") if n.startswith(("serve", "nbdkit")) else held
        w("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            l, mb(m.get("orig_data_size")), mb(m.get("compr_data_size")), mb(held),
            f3(m.get("overhead")), mb(m.get("table_bytes")), mb(m.get("rss_bytes")),
            fx(ratio(held, zm)) if held else "—", fx(ratio(zcmp, nzr))))
    w("")

    prof = R.get("profile")
    missed = [r for r in R["targets_table"] if r["met"] is False]
    if prof:
        w("## Profile: in-process 4K random read, qd1")
        w("")
        w("`perf record -g` of the fio process during uzram-lz4's randread-qd1 "
          "(bench/profile.sh), flat by library and symbol (self time):")
        w("")
        w("```")
        w(prof.rstrip())
        w("```")
        w("")
    if missed:
        w("Missed in this run: " + "; ".join(r["measure"] for r in missed) + ".")
        w("")
    for sec in R.get("sections", []):
        w(sec.rstrip())
        w("")
    notes = R.get("notes")
    if notes:
        w("## Notes")
        w("")
        w("Written by hand from a run of `make bench` (bench/notes.md); they explain "
          "that run and may not match the figures above if this report was "
          "regenerated since.")
        w("")
        w(notes.rstrip())
        w("")
    return "\n".join(out) + "\n"


def chart(R, root):
    """bench/chart.png: three panels, IOPS, throughput and memory per target."""
    T = R["targets"]
    rows = present(R)
    outdir = os.path.join(root, "bench", "out")
    os.makedirs(outdir, exist_ok=True)
    dat = os.path.join(outdir, "chart.dat")
    with open(dat, "w") as f:
        f.write("# target qd1 qd1x2 qd16 fill seqread write1600k memused rss\n")
        for n, l in rows:
            t = T[n]
            j = t.get("jobs", {})
            m = t.get("memory", {})

            def v(x, scale=1.0):
                return "NaN" if x is None else "%.3f" % (x / scale)
            f.write('"%s" %s %s %s %s %s %s %s %s\n' % (
                n, v(get(j, "randread-qd1", "iops"), 1e3),
                v(get(j, "randread-qd1-2j", "iops"), 1e3),
                v(get(j, "randread-qd16", "iops"), 1e3),
                v(get(t, "fill", "all", "MBps")), v(get(j, "seqread", "MBps")),
                v(get(j, "write-1600k", "MBps")),
                v(m.get("mem_used_total"), 1e6), v(m.get("rss_bytes"), 1e6)))
    png = os.path.join(root, "bench", "chart.png")
    gp = os.path.join(outdir, "chart.gp")
    with open(gp, "w") as f:
        f.write("""set terminal pngcairo size 1500,520 font ",10"
set output '%s'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set termoption noenhanced
set xtics rotate by 30 right scale 0
set key above font ",9"
set yrange [0:*]
set datafile missing "NaN"
set multiplot layout 1,3 title "uzram vs kernel zram vs nbdkit (%s, %s)"
set title "4K random read (thousand IOPS)"
plot '%s' using 2:xtic(1) title "qd1", '' using 3 title "qd1, 2 jobs", '' using 4 title "qd16"
set title "throughput (MB/s)"
plot '%s' using 5:xtic(1) title "fill (1M writes)", '' using 6 title "seq read 1M", '' using 7 title "write 1600K"
set title "memory after the fill (MB)"
plot '%s' using 8:xtic(1) title "mem_used_total", '' using 9 title "process RSS"
unset multiplot
""" % (png, R["env"].get("date"), R["env"].get("kernel"), dat, dat, dat))
    try:
        subprocess.run(["gnuplot", gp], check=True, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        print("report: gnuplot failed: %s" % e, file=sys.stderr)
        return None
    return "bench/chart.png"


def build(raw, root):
    env = load_json(os.path.join(raw, "env.json")) or {}
    try:
        env["loadavg_end"] = open(os.path.join(raw, "loadavg-end")).read().strip()
    except OSError:
        pass
    R = {"env": env,
         "codec": load_json(os.path.join(raw, "codec.json")), "targets": {}}
    for n, l, kind, algo in TARGETS:
        t = collect_target(raw, n)
        if t is not None:
            t.update({"label": l, "kind": kind, "algorithm": algo})
            R["targets"][n] = t
    null = parse_fio(os.path.join(raw, "fio-null.json"))
    if null.get("randread-qd1"):
        R["fio_null"] = null["randread-qd1"]
    R["nbdcopy"] = load_json(os.path.join(raw, "nbdcopy.json"))
    prof = os.path.join(raw, "perf-randread.txt")
    if os.path.exists(prof):
        R["profile"] = open(prof).read()
    notes = os.path.join(root, "bench", "notes.md")
    if os.path.exists(notes):
        R["notes"] = open(notes).read()
    # Sections the side benches wrote (bench/dict.sh, ...), kept as they are.
    secdir = os.path.join(root, "bench", "sections")
    if os.path.isdir(secdir):
        R["sections"] = [open(os.path.join(secdir, n)).read()
                         for n in sorted(os.listdir(secdir)) if n.endswith(".md")]
    R["targets_table"] = targets_table(R)
    R["issue14_table"] = issue14_table(R)
    with open(os.path.join(root, "bench", "results.json"), "w") as f:
        json.dump(R, f, indent=1, sort_keys=False)
        f.write("\n")
    rel = chart(R, root) or "bench/chart.png"
    with open(os.path.join(root, "BENCHMARKS.md"), "w") as f:
        f.write(markdown(R, rel))
    for r in R["targets_table"] + R["issue14_table"]:
        met = {True: "met", False: "MISSED", None: "not measured"}[r["met"]]
        print("  %-46s %-12s %s" % (r["measure"], met, r["value"]))


# The headings markdown() writes from a run's figures (the beginning of each).
GENERATED = ("Targets of issue 4", "Targets of issue 14", "Targets run", "Codec limit",
             "Reads", "Read latency", "Writes", "nbdcopy", "Memory held", "Profile", "Notes")


def check(root):
    """Exit 1 when BENCHMARKS.md has a section the next build would drop or
    change: neither generated nor the same as its bench/sections file."""
    doc = open(os.path.join(root, "BENCHMARKS.md")).read()
    secdir = os.path.join(root, "bench", "sections")
    kept = {}
    for n in sorted(os.listdir(secdir)):
        if n.endswith(".md"):
            t = open(os.path.join(secdir, n)).read().rstrip()
            kept[t.split("\n", 1)[0]] = (n, t)
    bad = 0
    for part in re.split(r"(?m)^(?=## )", doc):
        if not part.startswith("## "):
            continue
        head = part.split("\n", 1)[0]
        if head in kept:
            if part.rstrip() != kept[head][1]:
                print("BENCHMARKS.md: '%s' differs from bench/sections/%s" % (head, kept[head][0]))
                bad += 1
        elif not head[3:].startswith(GENERATED):
            print("BENCHMARKS.md: '%s' is in no bench/sections/*.md: the next build drops it"
                  % head)
            bad += 1
    sys.exit(1 if bad else 0)


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "summary":
        raw = sys.argv[3] if len(sys.argv) > 3 else os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "out", "raw")
        summary(sys.argv[2], raw)
    elif len(sys.argv) == 4 and sys.argv[1] == "build":
        build(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "check":
        check(sys.argv[2])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
