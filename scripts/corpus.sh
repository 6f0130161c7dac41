#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# corpus.sh OUT_DIR [MIB] - build a corpus of real data, data nobody in this
# project wrote, for the tests, `make run` and the benchmarks:
#
#   files.tar         a tar of installed files (ELF binaries, headers, docs),
#                     at most MIB MiB (default 512), a complete archive;
#   heap-python.core  a core image of a Python process holding ordinary
#                     application data (dicts, strings, an SQLite database,
#                     JSON): the kind of anonymous memory zram holds as swap;
#   MANIFEST          name, bytes and sha256 of each, then what was taken.
#
# Reproducible as far as a machine allows: the directories are taken in the
# order given, the files of each in byte order of their names, with mtime 0,
# owner and group 0 and no user names; a file that does not fit in what is
# left of the cap is skipped (never cut), so the tar is a valid archive.
# The same machine image gives the same files.tar. The core image differs
# from run to run in its layout, not in kind.
#
# Environment:
#   CORPUS_DIRS  directories under / to take, in order (default: the
#                multiarch library directory, usr/include, usr/share/doc,
#                usr/bin); missing ones are skipped and said so. An entry
#                may be a glob (usr/lib/python3.*: each match in byte
#                order) and may end in :MIB, a share of at most MIB MiB for
#                it (for all its matches together), so that a small corpus
#                holds several kinds of file rather than the first
#                directory alone:
#                CORPUS_DIRS="usr/include:2 usr/lib/python3.*:2 usr/share/perl5"
#   CORPUS_SEED  seed of the Python workload's data (default 7)
#
# Files already in OUT_DIR are kept: delete them to rebuild. Needs python3,
# and gdb (gcore) for the core image.
set -euo pipefail

out=${1:?usage: corpus.sh OUT_DIR [MIB]}
mib=${2:-512}
seed=${CORPUS_SEED:-7}
[[ $mib =~ ^[1-9][0-9]*$ ]] || { echo "corpus.sh: MIB must be a positive integer, not '$mib'" >&2; exit 2; }
[[ $seed =~ ^[0-9]+$ ]] || { echo "corpus.sh: CORPUS_SEED must be a number, not '$seed'" >&2; exit 2; }

if [[ -z ${CORPUS_DIRS:-} ]]; then
	multiarch=$(gcc -print-multiarch 2>/dev/null || true)
	CORPUS_DIRS="usr/lib${multiarch:+/$multiarch} usr/include usr/share/doc usr/bin"
fi
# Split on blanks, globs left for Python to match under /, not here.
read -ra dirs <<< "$CORPUS_DIRS"

mkdir -p "$out"
out=$(cd "$out" && pwd)
say() { printf 'corpus.sh: %s\n' "$*" >&2; }

# The tar: Python's tarfile, so that the member list, the headers and the
# cap are ours to fix exactly rather than left to the tar program's version.
if [[ ! -s $out/files.tar ]]; then
	say "files.tar: up to $mib MiB from: $CORPUS_DIRS"
	python3 - "$out/files.tar.part" "$((mib << 20))" "${dirs[@]}" \
		> "$out/files.list" <<'PY'
import glob, os, stat, sys, tarfile

path, cap, specs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
MIB = 1 << 20

# (directory, its entry) and each entry's share in bytes (None: no share
# of its own), for the entries of CORPUS_DIRS; the matches of a glob share
# its entry's. One that matches nothing stays as it is, said missing below.
dirs, shares = [], []
for spec in specs:
    top, _, share = spec.partition(":")
    if share and not share.isdigit():
        sys.exit("corpus.sh: %s: the share after ':' must be a whole "
                 "number of MiB" % spec)
    top = top.strip("/")
    found = sorted((m[1:] for m in glob.glob("/" + top)), key=os.fsencode)
    dirs.extend((t, len(shares)) for t in (found or [top]))
    shares.append(int(share) * MIB if share else None)
END = 2 * 512                   # the end-of-archive blocks
BLOCK = 512

def entries(top):
    """Every entry under /top, directories first, names in byte order."""
    stack = [top]
    while stack:
        d = stack.pop()
        yield d
        try:
            names = sorted(os.listdir("/" + d), key=os.fsencode)
        except OSError:
            continue
        subdirs = []
        for n in names:
            rel = d + "/" + n
            try:
                st = os.lstat("/" + rel)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                subdirs.append(rel)
            elif stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                yield rel
        stack.extend(reversed(subdirs))

def fixed(ti):
    ti.mtime = 0
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    return ti

used, members, skipped = 0, 0, 0
added = set()
with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
    entry, limit = None, cap
    for top, e in dirs:
        if e != entry:
            # The entry's own cap: its share on top of what is used.
            entry = e
            if shares[e] is not None:
                limit = min(cap, used + shares[e] + END)
            else:
                limit = cap
        if not os.path.isdir("/" + top):
            print("missing /%s" % top)
            continue
        n0, b0 = members, used
        for rel in entries(top):
            try:
                st = os.lstat("/" + rel)
            except OSError:
                skipped += 1
                continue
            # Past the cap even as a bare header and its data: skipped, the
            # same as below, without gettarinfo()'s owner lookups (most of
            # the time once the tar is full). A hard link may still fit as
            # a link member: those go the long way.
            if (stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and
                    used + BLOCK + -(-st.st_size // BLOCK) * BLOCK + END > limit):
                skipped += 1
                continue
            try:
                ti = fixed(tar.gettarinfo("/" + rel, arcname=rel))
            except OSError:
                skipped += 1
                continue
            need = len(ti.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape"))
            if ti.isreg():
                need += -(-ti.size // BLOCK) * BLOCK
            if ti.islnk() and ti.linkname not in added:
                skipped += 1
                continue
            if used + need + END > limit:
                # gettarinfo() took note of its inode for later hard links
                st = os.lstat("/" + rel)
                if tar.inodes.get((st.st_ino, st.st_dev)) == rel:
                    del tar.inodes[(st.st_ino, st.st_dev)]
                skipped += 1
                continue
            try:
                if ti.isreg():
                    with open("/" + rel, "rb") as f:
                        tar.addfile(ti, f)
                else:
                    tar.addfile(ti)
            except OSError:
                skipped += 1
                continue
            used += need
            members += 1
            added.add(rel)
        print("took /%s: %d members, %d bytes" % (top, members - n0, used - b0))
print("files.tar: %d members, %d bytes before the end blocks; %d skipped "
      "(unreadable, or larger than what was left)" % (members, used, skipped))
PY
	mv "$out/files.tar.part" "$out/files.tar"
	sed 's/^/corpus.sh: /' "$out/files.list" >&2
fi

# The core image: a Python process builds its data, says it is ready, and
# waits to be dumped. It lets any process of ours trace it, so gcore works
# without root where Yama's ptrace_scope is 1.
dump_python() {
	local ready=$out/.python-ready pid
	rm -f "$ready"
	python3 - "$seed" "$ready" <<'PY' &
import collections, ctypes, json, os, random, sqlite3, sys, time

seed, ready = int(sys.argv[1]), sys.argv[2]
try:
    PR_SET_PTRACER, PR_SET_PTRACER_ANY = 0x59616d61, -1
    ctypes.CDLL(None).prctl(PR_SET_PTRACER, ctypes.c_ulong(PR_SET_PTRACER_ANY), 0, 0, 0)
except Exception:
    pass
rng = random.Random(seed)
words = ["alpha", "beta", "gamma", "delta", "ops", "admin", "red", "green",
         "blue", "paris", "tokyo", "lima", "oslo", "quito"]
users = [{"id": i, "name": "user%06d" % i,
          "email": "u%d@example.org" % i, "score": rng.random(),
          "city": rng.choice(words[9:]), "tags": rng.sample(words[:9], 3)}
         for i in range(250000)]
index = collections.defaultdict(list)
for u in users:
    for t in u["tags"]:
        index[t].append(u["id"])
db = sqlite3.connect(":memory:")
db.execute("create table events(id integer primary key, user int, kind text,"
           " payload text)")
db.executemany("insert into events(user, kind, payload) values (?,?,?)",
               ((rng.randrange(len(users)), rng.choice(["login", "view", "buy"]),
                 json.dumps(users[i % 1000])) for i in range(200000)))
db.commit()
blob = json.dumps(users[:50000]).encode()
with open(ready, "w"):
    pass
time.sleep(600)
PY
	pid=$!
	for _ in $(seq 600); do
		[[ -e $ready ]] && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	if [[ -e $ready ]]; then
		timeout 300 gcore -o "$out/heap-python.tmp" "$pid" >/dev/null 2>&1 || true
	fi
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	rm -f "$ready"
	if [[ -s $out/heap-python.tmp.$pid ]]; then
		mv "$out/heap-python.tmp.$pid" "$out/heap-python.core"
	else
		rm -f "$out/heap-python.tmp.$pid"
		say "heap-python.core: gcore failed (is gdb installed, may we ptrace?)"
		return 1
	fi
}

status=0
if [[ ! -s $out/heap-python.core ]]; then
	if command -v gcore >/dev/null; then
		say "heap-python.core: dumping a Python process (seed $seed)"
		dump_python || status=1
	else
		say "heap-python.core: no gcore (apt-get install gdb)"
		status=1
	fi
fi

# MANIFEST last, and only when both files are there: make takes it as the
# sign that the corpus is complete.
((status == 0)) || exit "$status"
{
	for f in files.tar heap-python.core; do
		[[ -s $out/$f ]] || continue
		printf '%s %s %s\n' "$f" "$(stat -c %s "$out/$f")" \
			"$(sha256sum "$out/$f" | cut -d' ' -f1)"
	done
	sed 's/^/# /' "$out/files.list" 2>/dev/null || true
} > "$out/MANIFEST.part"
mv "$out/MANIFEST.part" "$out/MANIFEST"
cat "$out/MANIFEST"
