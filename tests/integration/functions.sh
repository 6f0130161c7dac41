# SPDX-License-Identifier: MIT
# functions.sh - shared helpers for the integration scripts (sourced, not run).
#
# In the spirit of nbdkit's tests/functions.sh and git's t/README: every
# script starts with
#
#	source "$(dirname "$0")/functions.sh"
#
# which turns on `set -euo pipefail`, makes a private temp dir ($T) and
# registers a single EXIT trap. That trap runs, in this order and even when
# the script failed half-way: the steps pushed with on_exit, cleanup_mount
# and cleanup_loop (newest first), a kill of every server started with
# start_server, and the removal of $T. A failing command, or an explicit
# fail, ends the script with a message naming the current `step` and what
# failed.
#
# Servers
#   start_server NAME [SERVE ARGS...]  runs `$UZRAM serve --socket $T/NAME.sock
#	ARGS` in the background, waits (at most $SERVER_START_TIMEOUT s) for its
#	"ready" line and the socket, and fails with its stderr if it dies.
#	Afterwards: ${PID[NAME]}, ${SOCK[NAME]}, ${URI[NAME]} (nbd+unix URI with
#	the export name), ${OUT[NAME]} / ${ERR[NAME]} (its stdout and stderr).
#   start_server_tcp NAME HOST:PORT [ARGS...]  the same on TCP. PORT 0: a
#	free port (free_port), and another if some process bound it before
#	the server did; ${PORT[NAME]} is the port either way.
#   free_port  a TCP port of 127.0.0.1 that nothing holds now (for a
#	server started otherwise: two make tests on one machine must not
#	meet on a fixed port).
#   stop_server NAME   SIGTERM; asserts exit status 0 and the sockets removed.
#   assert_alive NAME  the process is still running.
#   stat_field NAME FIELD  one figure of `uzram stat --json` on server NAME.
#   server_ctl NAME ARGS...  `uzram ctl --socket SOCKET ARGS` on server NAME.
#
# Checks (each fails the script with a message): assert_eq, assert_ok,
# assert_fails, assert_same_data, assert_same_range, assert_zero,
# assert_zero_bit, wait_for, qio / qio_fails (qemu-io), require.
# complete_members SRC DST [MAX]: a tar of SRC's complete members.
# corpus_data OUT BYTES: the first BYTES of the tar, and of the core after
#	it if the tar is smaller.
# compressible_data OUT BYTES: real data that compresses, of that size,
#	whatever the corpus holds.
#
# Switching the server under test: server_argv below is the only place
# that knows the command line. UZRAM_ITEST_SERVER=nbdkit runs nbdkit's
# memory plugin instead (a stand-in used while uzram serve was being
# written; options it has no equivalent for are dropped). Scripts that need
# uzram-only features must pass with the real server, not the stand-in.
# A sanitizer build of uzram is run under setarch -R automatically.

set -euo pipefail
set -E			# the ERR trap is inherited by functions
shopt -s inherit_errexit 2>/dev/null || true

ITEST_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ITEST_NAME=$(basename "$0" .sh)
SERVER_START_TIMEOUT=${SERVER_START_TIMEOUT:-10}
UZRAM_ITEST_SERVER=${UZRAM_ITEST_SERVER:-uzram}

declare -A PID=() SOCK=() URI=() OUT=() ERR=()
declare -A PORT=()
_exit_steps=()
_step="setup"

step()
{
	_step="$*"
	printf '%s: %s\n' "$ITEST_NAME" "$_step"
}

fail()
{
	printf '%s: FAIL: %s: %s\n' "$ITEST_NAME" "$_step" "$*" >&2
	exit 1
}

skip_all()
{
	printf '%s: SKIP: %s\n' "$ITEST_NAME" "$*"
	exit 0
}

_on_err()
{
	local rc=$1 line=$2 cmd=$3

	trap - ERR
	printf '%s: FAIL: %s: line %s: `%s` exited with %s\n' \
		"$ITEST_NAME" "$_step" "$line" "$cmd" "$rc" >&2
	exit "$rc"
}
trap '_on_err $? $LINENO "$BASH_COMMAND"' ERR

# on_exit CMD...: run CMD when the script ends, newest first.
on_exit()
{
	local q
	printf -v q '%q ' "$@"
	_exit_steps+=("$q")
}

# as_nobody DIR...: the unprivileged rounds' set-up, as root. /dev/fuse
# read-write for every user (what Debian's udev rule does; put back at
# exit), AS the command prefix that runs as nobody, $T open to walk
# through, and each DIR made, nobody's own, mode 700.
as_nobody()
{
	if [[ $(stat -c %a /dev/fuse) != 666 ]]; then
		on_exit chmod "$(stat -c %a /dev/fuse)" /dev/fuse
		chmod 666 /dev/fuse
	fi
	id nobody >/dev/null 2>&1 || fail "no user 'nobody'"
	AS=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
	chmod 711 "$T"
	install -d -o nobody -g nogroup -m 700 "$@"
}

# The mount tests' helpers (t64-t68; a test may define its own): whether DIR is a mount point in
# this namespace; whether PID runs (exists and has not exited: a keeper
# outlives the `uzram mount` that forked it, and whoever inherits it may
# reap late); wait_gone PID: 0 once it has ended, 1 if it still runs
# after 30 s.
is_mounted() { grep -qF " $1 " /proc/self/mountinfo; }
# as CMD...: CMD as the user of AS (as_nobody; empty: this one), with
# UZRAM_RUNTIME_DIR; um ARGS...: the uzram program so; _unmount DIR (for
# on_exit): DIR unmounted by whatever way works.
as() { "${AS[@]}" env UZRAM_RUNTIME_DIR="$UZRAM_RUNTIME_DIR" "$@"; }
um() { as "${SANITIZER_RUN[@]}" "$UZRAM" "$@"; }
_unmount()
{
	is_mounted "$1" || return 0
	umount "$1" 2>/dev/null || as fusermount3 -u "$1" 2>/dev/null ||
		umount -l "$1" 2>/dev/null || true
}
# fs_mount DIR ARGS...: uzram mount DIR --via fs ARGS (as the user of AS),
# checked mounted, unmounted on exit; the keeper's pid in KEEPER.
fs_mount()
{
	local dir=$1
	shift
	um mount "$dir" --via fs "$@" 2>"$T/mount.err" ||
		fail "uzram mount $dir $*: $(cat "$T/mount.err")"
	KEEPER=$(cat "$(dirname "$(grep -lxF "$dir" "$UZRAM_RUNTIME_DIR"/m-*/dir)")/pid")
	on_exit _unmount "$dir"
	is_mounted "$dir" || fail "$dir is not a mount point after uzram mount"
}
running()
{
	local st
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
	[[ ${st%% *} != Z ]]
}
wait_gone()
{
	local i
	for ((i = 0; i < 300; i++)); do
		running "$1" || return 0
		sleep 0.1
	done
	return 1
}

# cleanup_mount DIR / cleanup_loop DEV: unmount DIR / detach DEV at exit,
# in the same newest-first order as on_exit, so a file system on a loop on
# a FUSE mount comes apart from the top.
cleanup_mount() { on_exit _umount "$1"; }
cleanup_loop() { on_exit _loop_detach "$1"; }

_umount()
{
	local i
	for ((i = 0; i < 20; i++)); do
		mountpoint -q "$1" 2>/dev/null || return 0
		umount "$1" 2>/dev/null && return 0
		fusermount3 -u "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	umount -l "$1" 2>/dev/null || fusermount3 -uz "$1"
}

_loop_detach()
{
	losetup "$1" >/dev/null 2>&1 || return 0
	losetup -d "$1"
}

_kill_pid()
{
	local pid=$1 i

	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
}

_cleanup()
{
	local rc=$? i name

	trap - ERR
	set +e
	for ((i = ${#_exit_steps[@]} - 1; i >= 0; i--))
		do eval "${_exit_steps[i]}"; done
	for name in "${!PID[@]}"; do
		_kill_pid "${PID[$name]}"
		[[ -n ${SOCK[$name]:-} ]] && rm -f "${SOCK[$name]}"
	done
	[[ -n ${T:-} && -d $T ]] && rm -rf "$T"
	if ((rc == 0)); then
		printf '%s: ok\n' "$ITEST_NAME"
	fi
	exit "$rc"
}
trap _cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

T=$(mktemp -d "${TMPDIR:-/tmp}/uzram-$ITEST_NAME.XXXXXX")

# The system python3 when there is one: version-manager shims (pyenv) cost
# a second per start, and only the standard library is used.
if [[ -x /usr/bin/python3 ]]; then
	PYTHON=/usr/bin/python3
else
	PYTHON=python3
fi
python3() { "$PYTHON" "$@"; }

# real_server: false when running against the nbdkit stand-in; guards the
# few checks of uzram-only behaviour.
real_server() { [[ $UZRAM_ITEST_SERVER != nbdkit ]]; }

# require CMD...: fail (never skip) when a client the tests need is missing.
require()
{
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null ||
			fail "'$c' not found: run scripts/deps.sh test as root"
	done
}

# The program and the corpus: UZRAM and UZRAM_TEST_CORPUS if set (make
# check-integration sets both), else the tree's build/uzram and
# build/corpus, so that a script runs alone: bash tests/integration/t20-nbdinfo.sh
TREE=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[[ $UZRAM_ITEST_SERVER == nbdkit ]] || {
	: "${UZRAM:=$TREE/build/uzram}"
	[[ -x $UZRAM ]] || fail "UZRAM=$UZRAM is not an executable (run make," \
		"or make check-integration T=${0##*/}, which builds it)"
}
# A sanitizer build of uzram runs with address randomisation off, as the
# Makefile runs the unit tests (this kernel's ASLR breaks their runtimes).
SANITIZER_RUN=()
if real_server && ldd "$UZRAM" 2>/dev/null | grep -Eq 'lib(asan|tsan|ubsan)'; then
	SANITIZER_RUN=(setarch "$(uname -m)" -R)
fi

# uzram ARGS...: run the uzram program (stat, a serve expected to fail).
uzram() { "${SANITIZER_RUN[@]}" "$UZRAM" "$@"; }

: "${UZRAM_TEST_CORPUS:=$TREE/build/corpus}"
[[ -f $UZRAM_TEST_CORPUS/files.tar && -f $UZRAM_TEST_CORPUS/heap-python.core ]] ||
	fail "UZRAM_TEST_CORPUS=$UZRAM_TEST_CORPUS must name a folder with" \
		"files.tar and heap-python.core (bash scripts/corpus.sh" \
		"build/corpus 8 makes one; make check-integration does)"
CORPUS=$UZRAM_TEST_CORPUS

# complete_members SRC DST [MAX]: write to DST a tar of the members of SRC
# that are whole in it (a tar may be cut in the middle of one) and end within
# MAX bytes; print how many regular files (and hard links to them) it holds.
complete_members()
{
	python3 - "$1" "$2" "${3:-0}" <<'PY'
import os, sys, tarfile
src_path, dst_path, cap = sys.argv[1], sys.argv[2], int(sys.argv[3])
size = os.path.getsize(src_path)
if cap:
    # the end blocks, then tarfile pads the archive to whole records
    size = min(size, cap // tarfile.RECORDSIZE * tarfile.RECORDSIZE - 1024)
files = 0
with tarfile.open(src_path) as src, tarfile.open(dst_path, "w") as dst:
    try:
        for m in src:
            if m.offset_data + (m.size if m.isreg() else 0) > size:
                break
            dst.addfile(m, src.extractfile(m) if m.isreg() else None)
            files += m.isreg() or m.islnk()
    except tarfile.ReadError:
        pass
print(files)
PY
}

# $TAR, the tar the scripts use: the corpus's files.tar when it is at most
# TAR_MAX bytes (the devices the scripts make are sized for that), else a
# tar of its first complete members up to TAR_MAX, made in $T. A corpus of
# one's own (make test CORPUS=DIR) may hold a larger one. $TAR_MEMBERS is
# the number of regular files in it, counted from the tar itself.
TAR_MAX=$((24 << 20))
TAR=$CORPUS/files.tar
if (($(stat -c %s "$TAR") > TAR_MAX)); then
	TAR=$T/corpus-cut.tar  # not files.tar: t60 and t65 write that from $TAR
	complete_members "$CORPUS/files.tar" "$TAR" "$TAR_MAX" >/dev/null
fi

# corpus_data OUT BYTES: write to OUT the first BYTES of $TAR and, if the
# tar is smaller (a corpus of one's own may be), of the core image after
# it: data of the size a script needs whatever the corpus's size.
corpus_data()
{
	head -c "$2" "$TAR" >"$1"
	head -c $(($2 - $(stat -c %s "$1"))) "$CORPUS/heap-python.core" >>"$1"
	(($(stat -c %s "$1") == $2)) ||
		fail "corpus_data: the corpus holds less than $2 bytes"
}

# compressible_data OUT BYTES: write to OUT BYTES (a multiple of 4 KiB) of
# real data in which every 4 KiB page goes to the codec and compresses to
# half or less (zlib's level 1, a stand-in for the codecs), none filled
# with one 8-byte word (the store keeps those without the codec, zram's
# same pages): the pages of $TAR that do, in their order, then, if the tar has too few (a corpus of gzip'd documentation, a
# small one), those of the core image. For a script whose checks need data
# that compresses (a recompression that saves, a dictionary that is used)
# rather than the first bytes of whatever tar the corpus has. Prints how
# many pages came from the tar.
compressible_data()
{
	python3 - "$1" "$2" "$TAR" "$CORPUS/heap-python.core" <<'PY'
import sys, zlib
out, want, sources = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
PAGE = 4096
assert want % PAGE == 0, "BYTES must be a multiple of 4096"
got, from_tar = 0, 0
with open(out, "wb") as o:
    for k, path in enumerate(sources):
        with open(path, "rb") as f:
            while got < want:
                page = f.read(PAGE)
                if len(page) < PAGE:
                    break
                if (len(zlib.compress(page, 1)) <= PAGE // 2 and
                        page != page[:8] * (PAGE // 8)):
                    o.write(page)
                    got += PAGE
                    from_tar += k == 0
if got < want:
    sys.exit("compressible_data: the corpus has %d compressible bytes, "
             "%d wanted" % (got, want))
print(from_tar)
PY
}

# server_argv LISTEN-ARGS -- SERVE-ARGS: the command line of the server under
# test, in the array SERVER_ARGV. LISTEN-ARGS is --socket PATH or --tcp H:P.
server_argv()
{
	local listen=("$1" "$2")

	shift 3
	if [[ $UZRAM_ITEST_SERVER != nbdkit ]]; then
		SERVER_ARGV=("${SANITIZER_RUN[@]}" "$UZRAM" serve "${listen[@]}" "$@")
		return
	fi
	local size=1G ro=() exp=() net=()
	while (($#)); do
		case $1 in
		--size) size=$2; shift ;;
		--read-only) ro=(-r) ;;
		--export) exp=(-e "$2"); shift ;;
		--algorithm|--level|--mem-limit|--max-connections) shift ;;
		*) fail "stand-in: unknown serve option $1" ;;
		esac
		shift
	done
	if [[ ${listen[0]} == --socket ]]; then
		net=(--unix "${listen[1]}")
	else
		net=(-i "${listen[1]%:*}" -p "${listen[1]##*:}")
	fi
	SERVER_ARGV=(nbdkit --foreground --exit-with-parent "${net[@]}"
		"${ro[@]}" "${exp[@]}" memory "size=$size")
}

_export_of()
{
	local e=""
	while (($#)); do
		[[ $1 == --export ]] && { e=$2; break; }
		shift
	done
	printf '%s' "$e"
}

_start()
{
	local name=$1 listen=$2 addr=$3 i
	shift 3
	[[ -z ${PID[$name]:-} ]] || fail "server $name is already running"

	server_argv "$listen" "$addr" -- "$@"
	OUT[$name]=$T/$name.out
	ERR[$name]=$T/$name.err
	"${SERVER_ARGV[@]}" >"${OUT[$name]}" 2>"${ERR[$name]}" </dev/null &
	PID[$name]=$!
	[[ $listen == --socket ]] && SOCK[$name]=$addr

	for ((i = 0; i < SERVER_START_TIMEOUT * 20; i++)); do
		if ! kill -0 "${PID[$name]}" 2>/dev/null; then
			local rc=0
			wait "${PID[$name]}" || rc=$?
			unset "PID[$name]"
			if ((_retry_port_taken)) &&
			   grep -q "Address already in use" "${ERR[$name]}"; then
				_port_taken=1
				return 0
			fi
			fail "server $name exited with $rc before it was ready:" \
				"${SERVER_ARGV[*]}"$'\n'"$(cat "${ERR[$name]}")"
		fi
		if _is_ready "$name" "$listen" "$addr"; then
			return 0
		fi
		sleep 0.05
	done
	fail "server $name not ready after ${SERVER_START_TIMEOUT}s:" \
		"${SERVER_ARGV[*]}"$'\n'"$(cat "${ERR[$name]}")"
}

_is_ready()
{
	local name=$1 listen=$2 addr=$3

	if [[ $UZRAM_ITEST_SERVER != nbdkit ]]; then
		grep -qxs ready "${OUT[$name]}" || return 1
	fi
	if [[ $listen == --socket ]]; then
		[[ -S $addr ]]
	else
		(exec 3<>"/dev/tcp/${addr%:*}/${addr##*:}") 2>/dev/null
	fi
}

start_server()
{
	local name=$1 exp
	shift
	exp=$(_export_of "$@")
	_start "$name" --socket "$T/$name.sock" "$@"
	URI[$name]="nbd+unix:///$exp?socket=$T/$name.sock"
}

free_port()
{
	python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# _start sets _port_taken instead of failing when _retry_port_taken is 1
# and the server could not bind its port.
_retry_port_taken=0
_port_taken=0

start_server_tcp()
{
	local name=$1 host=${2%:*} want=${2##*:} port exp try
	shift 2
	exp=$(_export_of "$@")
	for ((try = 1; ; try++)); do
		port=$want
		((want != 0)) || port=$(free_port)
		_retry_port_taken=$((want == 0 && try < 5))
		_port_taken=0
		_start "$name" --tcp "$host:$port" "$@"
		((_port_taken)) || break
	done
	_retry_port_taken=0
	PORT[$name]=$port
	URI[$name]="nbd://$host:$port/$exp"
}

assert_alive()
{
	local name=$1
	kill -0 "${PID[$name]}" 2>/dev/null ||
		fail "server $name (pid ${PID[$name]}) died:" \
			$'\n'"$(tail -n 20 "${ERR[$name]}")"
}

stat_field()
{
	uzram stat --socket "${SOCK[$1]}" --json >"$T/stat-field.json" ||
		fail "uzram stat on server $1 failed"
	json_get "$T/stat-field.json" "j['$2']"
}

server_ctl()
{
	local name=$1
	shift
	uzram ctl --socket "${SOCK[$name]}" "$@"
}

# stop_server NAME: SIGTERM must end the server cleanly within 10 s, with
# exit status 0 and its socket removed.
stop_server()
{
	local name=$1 pid=${PID[$1]} i rc=0

	assert_alive "$name"
	kill -TERM "$pid"
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid"
		fail "server $name still running 10s after SIGTERM"
	fi
	wait "$pid" || rc=$?
	unset "PID[$name]"
	((rc == 0)) || fail "server $name exited with $rc after SIGTERM:" \
		"$(tail -n 20 "${ERR[$name]}")"
	if [[ -n ${SOCK[$name]:-} ]] && real_server; then
		local left
		left=$(compgen -G "${SOCK[$name]}*" || true)
		[[ -z $left ]] || fail "server $name left sockets behind: $left"
	fi
}

assert_eq()
{
	[[ $1 == "$2" ]] || fail "${3:-value}: got '$1', expected '$2'"
}

# assert_ok WHAT CMD...: CMD must succeed; its output is shown on failure.
assert_ok()
{
	local what=$1 out rc=0
	shift
	out=$("$@" 2>&1) || rc=$?
	((rc == 0)) || fail "$what: \`$*\` exited with $rc:"$'\n'"$out"
}

# assert_fails WHAT CMD...: CMD must exit non-zero.
assert_fails()
{
	local what=$1 rc=0
	shift
	"$@" >"$T/last-fail.out" 2>&1 || rc=$?
	((rc != 0)) || fail "$what: \`$*\` succeeded but must fail"
}

sha() { sha256sum "$1" | cut -d' ' -f1; }

# sha_head FILE BYTES: sha256 of the first BYTES of FILE.
sha_head() { head -c "$2" "$1" | sha256sum | cut -d' ' -f1; }

# assert_same_data FILE1 FILE2 [BYTES]: the first BYTES (default: all of
# FILE1) of both files are equal.
assert_same_data()
{
	local n=${3:-$(stat -c %s "$1")}
	[[ $(sha_head "$1" "$n") == "$(sha_head "$2" "$n")" ]] ||
		fail "data differs in the first $n bytes: $1 vs $2:" \
			"$(cmp -n "$n" "$1" "$2" 2>&1 | head -n 1)"
}

# assert_zero FILE OFFSET BYTES: that range of FILE is all zero bytes.
assert_zero()
{
	cmp -s -n "$3" -i "$2:0" "$1" /dev/zero ||
		fail "$1: bytes [$2, $(($2 + $3))) are not all zero"
}

# assert_same_range FILE1 OFFSET1 FILE2 OFFSET2 BYTES: BYTES at OFFSET1 in
# FILE1 equal BYTES at OFFSET2 in FILE2.
assert_same_range()
{
	cmp -s -n "$5" -i "$2:$4" "$1" "$3" ||
		fail "$1 at $2 and $3 at $4 differ within $5 bytes:" \
			"$(cmp -n "$5" -i "$2:$4" "$1" "$3" 2>&1 | head -n 1)"
}

# wait_for SECONDS WHAT CMD...: poll CMD every 50 ms until it succeeds.
wait_for()
{
	local secs=$1 what=$2 i
	shift 2
	for ((i = 0; i < secs * 20; i++)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	fail "timed out after ${secs}s waiting for $what"
}

# conns NAME N: server NAME has N client connections now (a connection
# counts until the requests it sent are done).
conns() { [[ $(stat_field "$1" connections_current) == "$2" ]]; }

# json_get FILE PYTHON-EXPR: evaluate EXPR with `j` bound to the parsed JSON.
json_get()
{
	python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
v = eval(sys.argv[2])
print(json.dumps(v) if isinstance(v, (dict, list)) else v)' "$1" "$2"
}

# qio [-r] URI CMD...: run qemu-io on URI (raw; -r: read-only), one -c per
# CMD; fails when qemu-io fails or reports a failed command or pattern.
qio()
{
	local args=() c out rc=0 uri

	[[ $1 == -r ]] && { args+=(-r); shift; }
	uri=$1
	shift
	for c in "$@"; do args+=(-c "$c"); done
	out=$(qemu-io -f raw "${args[@]}" "$uri" 2>&1) || rc=$?
	if ((rc != 0)) || grep -qiE 'fail|error' <<<"$out"; then
		fail "qemu-io $(printf "'%s' " "$@")exited with $rc:"$'\n'"$out"
	fi
}

# qio_fails [-r] URI CMD...: the qemu-io command must fail.
qio_fails()
{
	local args=() c out rc=0 uri

	[[ $1 == -r ]] && { args+=(-r); shift; }
	uri=$1
	shift
	for c in "$@"; do args+=(-c "$c"); done
	out=$(qemu-io -f raw "${args[@]}" "$uri" 2>&1) || rc=$?
	if ((rc == 0)) && ! grep -qiE 'fail|error' <<<"$out"; then
		fail "qemu-io $(printf "'%s' " "$@")succeeded but must fail:"$'\n'"$out"
	fi
}

# map_types URI OFFSET LENGTH: the distinct base:allocation types (as
# numbers: bit 0 hole, bit 1 zero) of the extents nbdinfo --map reports
# over [OFFSET, OFFSET + LENGTH), space-separated and sorted.
map_types()
{
	nbdinfo --map --json "$1" >"$T/map.json"
	python3 - "$T/map.json" "$2" "$3" <<'PY'
import json, sys
ext = json.load(open(sys.argv[1]))
lo, hi = int(sys.argv[2]), int(sys.argv[2]) + int(sys.argv[3])
types = {e["type"] for e in ext
         if e["offset"] < hi and e["offset"] + e["length"] > lo}
covered = sum(min(hi, e["offset"] + e["length"]) - max(lo, e["offset"])
              for e in ext if e["offset"] < hi and e["offset"] + e["length"] > lo)
if covered != hi - lo:
    sys.exit("map covers %d of %d bytes" % (covered, hi - lo))
print(" ".join(str(t) for t in sorted(types)))
PY
}

# assert_zero_bit URI OFFSET LENGTH WHAT: every extent over the range has
# the zero bit (2) of base:allocation.
assert_zero_bit()
{
	local t types
	types=$(map_types "$1" "$2" "$3")
	for t in $types; do
		(((t & 2) != 0)) ||
			fail "${4:-}: [$2, $(($2 + $3))) has types '$types'," \
				"not all zero"
	done
}
