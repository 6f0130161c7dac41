#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t82-generator.sh - the systemd side as make install-systemd installs it
# (systemd/): uzram-generator turns sample configs into unit instances,
# with the options, ordering and sockets each section asks for, and
# `systemd-analyze verify` accepts every generated unit without a word; bad
# configs give a message naming the file and line, no unit for the section
# concerned, exit status 1, and units for the good sections still. No
# systemd as PID 1 is needed: the generator runs as systemd would run it,
# on a private root (UZRAM_GENERATOR_ROOT), and verify reads the units
# from $SYSTEMD_UNIT_PATH.
source "$(dirname "$0")/functions.sh"
require systemd-analyze make psktool

root=$(cd "$ITEST_DIR/../.." && pwd)
P=$T/prefix
step "make install-systemd into $P"
make -s -C "$root" install-systemd PREFIX="$P/usr" UNITDIR="$P/units" \
	GENERATORDIR="$P/generators" SYSUSERSDIR="$P/sysusers" \
	SYSCONFDIR=/etc DESTDIR=
mkdir -p "$P/usr/bin" "$P/etc/uzram/uzram.conf.d"
ln -s "$UZRAM" "$P/usr/bin/uzram"
gen=$P/generators/uzram-generator
[[ -x $gen ]] || fail "no executable $gen"
grep -q '^u _uzram ' "$P/sysusers/uzram.conf" || fail "no _uzram in the sysusers file"
# the keys the generator takes for each type ($keys_swap...), from itself
eval "$(sed -n '/^keys_device=/,/^keys_all=/p' "$gen")"

# every_key TYPE FILE...: the FILEs give every key of TYPE.
every_key()
{
	local type=$1 k want
	shift
	eval "want=\$keys_$type"
	for k in $want; do
		grep -Eqh "^$k *=" "$@" || fail "the sample has no key $k of type $type"
	done
}

# systemd-detect-virt as the generator calls it: not a container, unless
# FAKE_VIRT names one (the tests may run in one themselves).
mkdir -p "$T/bin"
cat >"$T/bin/systemd-detect-virt" <<'SH'
#!/bin/sh
case " $* " in *" --quiet "*) ;; *) echo "${FAKE_VIRT:-none}" ;; esac
[ -n "${FAKE_VIRT:-}" ]
SH
chmod +x "$T/bin/systemd-detect-virt"

# generate OUT: run the generator on $P/etc as systemd would (three dirs).
generate()
{
	rm -rf "$1" && mkdir -p "$1" "$1.early" "$1.late"
	PATH=$T/bin:$PATH UZRAM_GENERATOR_ROOT=$P "$gen" "$1" "$1.early" "$1.late" 2>"$1.err"
}

# verify OUT UNIT...: systemd-analyze verify says nothing and exits 0.
verify()
{
	local out=$1 rc=0
	shift
	SYSTEMD_UNIT_PATH=$out:$P/units: systemd-analyze verify --man=no \
		"$@" >"$T/verify.out" 2>&1 || rc=$?
	((rc == 0)) && [[ ! -s $T/verify.out ]] ||
		fail "systemd-analyze verify $* (exit $rc):"$'\n'"$(cat "$T/verify.out")"
}

# exec_argv FILE: the ExecStart= command line of drop-in FILE into ARGV, as
# systemd reads it (each argument in double quotes, \\ and \" escaped,
# %% and $$ doubled).
exec_argv()
{
	local line
	line=$(sed -n 's/^ExecStart=//p' "$1")
	[[ -n $line ]] || fail "no ExecStart= in $1"
	line=$(printf '%s' "$line" | sed 's/%%/%/g; s/\$\$/\\$/g')
	eval "ARGV=($line)"
}

# run_dry FILE: the unit's command line, with --dry-run, succeeds.
# The unit's state directory (StateDirectory= makes it before the server
# starts) and the disks it names are the target machine's: here, in $T.
mkdir -p "$T/state" "$T/disk"
run_dry()
{
	local out i
	exec_argv "$1"
	for i in "${!ARGV[@]}"; do
		ARGV[i]=${ARGV[i]/#\/var\/lib\/uzram\//$T/state/}
		ARGV[i]=${ARGV[i]/#\/dev\/disk\//$T/disk/}
		[[ ${ARGV[i]} != "$T"/* ]] || mkdir -p "$(dirname "${ARGV[i]}")"
	done
	out=$("${ARGV[@]}" --dry-run 2>&1) ||
		fail "the command line of $1 fails: ${ARGV[*]} --dry-run:"$'\n'"$out"
}

# example NAME: the config $P/etc/uzram/uzram.conf, an example of the docs,
# makes units without a message; systemd-analyze verify takes each, and
# uzram takes each swap and serve unit's command line (--dry-run).
example()
{
	local out=$T/ex-$1 d u units=()
	rm -rf "$P/etc/uzram/uzram.conf.d"
	generate "$out" || fail "exit $? on $1:"$'\n'"$(cat "$out.err")"
	[[ ! -s $out.err ]] || fail "messages on $1:"$'\n'"$(cat "$out.err")"
	for d in "$out"/uzram-*.d; do
		[[ -d $d ]] || fail "$1 makes no unit"
		u=$(basename "$d" .d)
		units+=("$u")
		case $u in
		uzram-swap@* | uzram-serve@*.service) run_dry "$d/50-uzram.conf" ;;
		esac
	done
	verify "$out" "${units[@]}"
}

# refused OUT PATTERN...: the generator, run on the config into OUT, exits
# 1 and its messages match every PATTERN (grep), each prefixed by the
# config file's path.
refused()
{
	local out=$1 rc=0 f=$P/etc/uzram/uzram.conf.d/50-unix.conf want
	shift
	generate "$out" || rc=$?
	assert_eq "$rc" 1 "exit status on a config with errors"
	for want in "$@"; do
		grep -q -- "$f:$want" "$out.err" ||
			fail "no message '$f:$want' in:"$'\n'"$(cat "$out.err")"
	done
}

# has FILE LINE: FILE holds exactly that line.
has() { grep -qxF -- "$2" "$1" || fail "$1 lacks the line: $2"$'\n'"$(cat "$1")"; }

step "the packaged uzram.conf, all commented, makes no unit"
cp "$root/systemd/uzram.conf" "$P/etc/uzram/uzram.conf"
generate "$T/none" || fail "exit $? on the commented config: $(cat "$T/none.err")"
[[ -z $(ls -A "$T/none") ]] || fail "units made from comments: $(ls -A "$T/none")"

step "one swap, one /tmp, one served export"
cat >"$P/etc/uzram/uzram.conf.d/50-sample.conf" <<'CONF'
# a comment
[swap0]
type = swap
size = 2G
algorithm = zstd
level = 5
cluster-size = 8K
swap-priority = 100
mem-limit = 1G
backing = /tmp/swap.backing
high-watermark = 85
low-watermark = 60
writeback-limit = 4G
recomp-algorithm = zstd:12
dedup = yes
threads = 2
host-memory-limit = none

[tmp]
type=mount
mount-point = /tmp
size = 4G
mode = 1777
owner = 0:0

[vm-disk]
type = serve
size = 8G
algorithm = lz4
cluster-size = 16K
image = /srv/images/vm disk.img
backing = /var/lib/uzram/vm.backing
dedup = yes
dict = /etc/uzram/vm.dict
recomp-algorithm = zstd:9
recomp-algorithm = deflate
tls = require
tls-psk = /etc/uzram/keys.psk
tcp = 127.0.0.1:10809
CONF
cat >"$P/etc/uzram/uzram.conf.d/60-later.conf" <<'CONF'
; a later file changes a key of an earlier section
[swap0]
swap-priority = 5

[swap1]
type = swap
device = /dev/nbd7

[swap2]
type = swap
device = /dev/ublkb3
CONF
every_key swap "$P/etc/uzram/uzram.conf.d/"*.conf
generate "$T/a" || fail "exit $?: $(cat "$T/a.err")"
[[ ! -s $T/a.err ]] || fail "messages on a good config: $(cat "$T/a.err")"
d=$T/a
swap='uzram-swap@swap0.service' mnt='uzram-mount@tmp.service'
srv='uzram-serve@vm\x2ddisk'
for l in "swap.target.wants/$swap" "local-fs.target.wants/$mnt" \
	"sockets.target.wants/$srv.socket" "sockets.target.wants/uzram-ctl@vm\\x2ddisk.socket"; do
	[[ -L $d/$l && -f $d/$l ]] || fail "no link $l to an installed template"
done
has "$d/$swap.d/50-uzram.conf" "ExecStart=$P/usr/bin/uzram swapon --size \"2G\" --algorithm \"zstd\" --level \"5\" --mem-limit \"1G\" --cluster \"8K\" --dedup --threads \"2\" --backing \"/tmp/swap.backing\" --high-watermark \"85\" --low-watermark \"60\" --writeback-limit \"4G\" --recomp-algorithm \"zstd:12\" --priority \"5\""
has "$d/$swap.d/50-uzram.conf" "ExecStop=$P/usr/bin/uzram swapoff"
has "$d/$swap.d/50-uzram.conf" "RequiresMountsFor=/tmp"
has "$d/$mnt.d/50-uzram.conf" "ExecStart=$P/usr/bin/uzram mount -f --nonempty \"/tmp\" --size \"4G\" --mode \"1777\" --uid \"0\" --gid \"0\""
has "$d/tmp.mount.d/50-uzram.conf" "Requires=$mnt"
has "$d/tmp.mount.d/50-uzram.conf" "After=$mnt"
has "$d/run-uzram-.mount.d/50-uzram.conf" "DefaultDependencies=no"
has "$d/$srv.service.d/50-uzram.conf" "ExecStart=$P/usr/bin/uzram serve --size \"8G\" --algorithm \"lz4\" --cluster \"16K\" --dedup --backing \"/var/lib/uzram/vm.backing\" --recomp-algorithm \"zstd:9\" --recomp-algorithm \"deflate\" --dict \"/etc/uzram/vm.dict\" --image \"/srv/images/vm disk.img\" --tls \"require\" --tls-psk %d/tls-psk"
has "$d/$srv.service.d/50-uzram.conf" "ReadWritePaths=-/srv/images"
has "$d/$srv.service.d/50-uzram.conf" "LoadCredential=tls-psk:/etc/uzram/keys.psk"
has "$d/$srv.socket.d/50-uzram.conf" "ListenStream=127.0.0.1:10809"
has "$d/uzram-ctl@vm\\x2ddisk.socket.d/50-uzram.conf" "ListenStream=/run/uzram-serve/vm-disk.ctl"

has "$d/uzram-swap@swap1.service.d/50-uzram.conf" "ExecStart=$P/usr/bin/uzram swapon --device \"/dev/nbd7\""
has "$d/uzram-swap@swap1.service.d/50-uzram.conf" "ExecStop=$P/usr/bin/uzram swapoff --device \"/dev/nbd7\""
has "$d/uzram-swap@swap2.service.d/50-uzram.conf" "ExecStart=$P/usr/bin/uzram swapon --device \"/dev/ublkb3\""
has "$d/uzram-swap@swap2.service.d/50-uzram.conf" "ExecStop=$P/usr/bin/uzram swapoff --device \"/dev/ublkb3\""

step "the swap units' command lines pass uzram's own checks (swapon --dry-run)"
for u in "$swap" uzram-swap@swap1.service uzram-swap@swap2.service; do
	run_dry "$d/$u.d/50-uzram.conf"
done
# the transport it names is the one the real run would take: on a kernel
# with neither (this machine's, say) it says the real run would stop
# (it showed ublk's line as if it would run)
out=$("$UZRAM" swapon --dry-run 2>&1) || fail "swapon --dry-run: $out"
if [[ ! -e /dev/ublk-control && ! -e /sys/module/nbd ]] &&
   ! modprobe -n nbd 2>/dev/null && ! modprobe -n ublk_drv 2>/dev/null; then
	grep -q "would stop before it" <<<"$out" ||
		fail "no transport here, and --dry-run did not say so: $out"
else
	grep -q "would stop" <<<"$out" &&
		fail "--dry-run says the run would stop on a kernel with a transport: $out"
fi

step "systemd-analyze verify on every generated unit"
verify "$d" "$swap" uzram-swap@swap1.service "$mnt" "$srv.service" "$srv.socket" 'uzram-ctl@vm\x2ddisk.socket'

step "what the templates promise: ordering, readiness, hardening"
u=$P/units
has "$u/uzram-swap@.service" "Before=swap.target umount.target"
has "$u/uzram-mount@.service" "Before=local-fs.target umount.target"
has "$u/uzram-mount@.service" "Type=notify"
has "$u/uzram-mount@.service" "KillMode=mixed"
has "$u/uzram-serve@.service" "Type=notify"
has "$u/uzram-serve@.service" "User=_uzram"
has "$u/uzram-serve@.service" "ProtectSystem=strict"
has "$u/uzram-serve@.service" "PrivateTmp=yes"
has "$u/uzram-serve@.socket" "FileDescriptorName=nbd"
has "$u/uzram-ctl@.socket" "FileDescriptorName=ctl"
! grep -Eq '^(ProtectSystem|PrivateTmp|ProtectHome|ReadWritePaths)=' "$u/uzram-mount@.service" ||
	fail "uzram-mount@.service has a namespace option: its mount would stay in it"

step "a Unix socket export gets its defaults, its ctl beside it"
rm "$P/etc/uzram/uzram.conf.d/"*
cat >"$P/etc/uzram/uzram.conf.d/50-unix.conf" <<'CONF'
[disk]
type = serve
socket-mode = 0660
socket-group = kvm
read-only = no
tls-verify-peer = yes
CONF
generate "$T/b" || fail "exit $?: $(cat "$T/b.err")"
has "$T/b/uzram-serve@disk.socket.d/50-uzram.conf" "ListenStream=/run/uzram-serve/disk.sock"
has "$T/b/uzram-serve@disk.socket.d/50-uzram.conf" "SocketMode=0660"
has "$T/b/uzram-serve@disk.socket.d/50-uzram.conf" "SocketGroup=kvm"
has "$T/b/uzram-ctl@disk.socket.d/50-uzram.conf" "ListenStream=/run/uzram-serve/disk.sock.ctl"
has "$T/b/uzram-serve@disk.service.d/50-uzram.conf" "ExecStart=$P/usr/bin/uzram serve --tls-verify-peer"
verify "$T/b" uzram-serve@disk.service uzram-serve@disk.socket uzram-ctl@disk.socket

step "bad sections are refused by file and line; good ones still get units"
cat >"$P/etc/uzram/uzram.conf.d/50-unix.conf" <<'CONF'
orphan = 1
[ok]
type = swap
[notype]
size = 1G
[wrongkey]
type = mount
mount-point = /mnt/x
dedup = yes
[typo]
type = serve
szie = 1G
[relative]
type = mount
mount-point = tmp
[both]
type = serve
socket = /run/x.sock
tcp = 1234
[badbool]
type = serve
dedup = maybe
[kind]
type = zram
[bad name!]
type = swap
no equals sign here
[swap2]
type = swap
[swap3]
type = swap
device = /dev/sda
CONF
refused "$T/c" \
	"1: 'orphan' before any \[NAME\] section" \
	"4: \[notype\] has no type" \
	"6: \[wrongkey\] is type mount, which takes no dedup" \
	"12: unknown key 'szie'" \
	"13: \[relative\] needs mount-point = an absolute path" \
	"16: \[both\] has both socket and tcp" \
	"20: dedup = maybe: want yes or no" \
	"23: \[kind\] has type = zram" \
	"25: bad section name \[bad name!\]" \
	"27: expected KEY = VALUE" \
	"28: \[swap2\] is a second swap section without device" \
	"30: \[swap3\] device = /dev/sda: want /dev/ublkbN or /dev/nbdN"
made=$(cd "$T/c" && find . -name '*.conf' | sort | tr '\n' ' ')
assert_eq "$made" "./uzram-swap@ok.service.d/50-uzram.conf " "the only unit made"
verify "$T/c" uzram-swap@ok.service

step "zram-generator's keys: sizes of ram, host-memory-limit, an algorithm list"
mkdir -p "$P/proc"
printf 'MemTotal:        8388608 kB\nMemFree:         1000000 kB\n' >"$P/proc/meminfo"
cat >"$P/etc/uzram/uzram.conf.d/50-unix.conf" <<'CONF'
[zswap]
type = swap
size = min(ram / 2, 4096)
mem-limit = ram / 8
algorithm = lz4 zstd(level=3) (type=idle)
backing = /tmp/zswap.backing
[small]
type = swap
device = /dev/nbd5
host-memory-limit = 4096
[big]
type = swap
device = /dev/nbd6
host-memory-limit = none
size = max(ram - 9000, 0) + 1024
algorithm = zstd(level=7)
[nested]
type = serve
size = min(min(ram, 4096) + max(ram - 4096, 0) / 2, 32 * 1024)
mem-limit = 512M
[none]
type = mount
mount-point = /mnt/none
size = ram - 8192
[share]
type = mount
mount-point = /mnt/share
size = 25%
mem-limit = 12.5%
CONF
generate "$T/e" || fail "exit $?: $(cat "$T/e.err")"
has "$T/e/uzram-swap@zswap.service.d/50-uzram.conf" "ExecStart=$P/usr/bin/uzram swapon --size \"4096M\" --algorithm \"lz4\" --mem-limit \"1024M\" --backing \"/tmp/zswap.backing\" --recomp-algorithm \"zstd:3\""
has "$T/e/uzram-swap@big.service.d/50-uzram.conf" "ExecStart=$P/usr/bin/uzram swapon --size \"1024M\" --algorithm \"zstd\" --level \"7\" --device \"/dev/nbd6\""
has "$T/e/uzram-serve@nested.service.d/50-uzram.conf" "ExecStart=$P/usr/bin/uzram serve --size \"6144M\" --mem-limit \"512M\""
# a share of RAM as it is, its % as systemd's %% (a specifier otherwise)
has "$T/e/uzram-mount@share.service.d/50-uzram.conf" "ExecStart=$P/usr/bin/uzram mount -f --nonempty \"/mnt/share\" --size \"25%%\" --mem-limit \"12.5%%\""
[[ ! -e $T/e/uzram-swap@small.service.d ]] || fail "[small] made on a machine above its host-memory-limit"
grep -q "\[small\] not made: 8192 MiB of RAM, above host-memory-limit = 4096" "$T/e.err" ||
	fail "no note on [small]: $(cat "$T/e.err")"
[[ ! -e $T/e/uzram-mount@none.service.d ]] || fail "[none] of size 0 made"
grep -q "\[none\] size = ram - 8192 is 0 MiB on this machine" "$T/e.err" ||
	fail "no note on [none]: $(cat "$T/e.err")"
for u in zswap big; do run_dry "$T/e/uzram-swap@$u.service.d/50-uzram.conf"; done
run_dry "$T/e/uzram-serve@nested.service.d/50-uzram.conf"
verify "$T/e" uzram-swap@zswap.service uzram-swap@big.service uzram-serve@nested.service

step "bad expressions and lists are refused by file and line"
cat >"$P/etc/uzram/uzram.conf.d/50-unix.conf" <<'CONF'
[e1]
type = swap
size = ram * 2 + $(reboot)
[e2]
type = serve
mem-limit = min(ram, 
[e3]
type = serve
algorithm = zstd(dict=/x)
[e4]
type = serve
algorithm = zstd lz4 (type=huge)
[e5]
type = mount
mount-point = /mnt/e5
algorithm = lz4 zstd
[e6]
type = serve
host-memory-limit = lots
CONF
refused "$T/f" \
	"3: size = ram \* 2 + \$(reboot): want a size with a unit" \
	"6: mem-limit = min(ram,: want a size" \
	"9: algorithm = zstd(dict=/x): zstd(dict=/x): the only parameter is level=N" \
	"12: algorithm = zstd lz4 (type=huge): uzram recompresses the oldest" \
	"16: \[e5\] is type mount, which takes one algorithm" \
	"19: host-memory-limit = lots: want MiB or none"
[[ -z $(cd "$T/f" && find . -name '50-uzram.conf') ]] || fail "units made from bad sections"

step "uzram=0 on the kernel command line, or a container: nothing, exit 0"
printf 'BOOT_IMAGE=/vmlinuz root=/dev/sda1 uzram=0 quiet\n' >"$P/proc/cmdline"
cp "$root/systemd/uzram.conf" "$P/etc/uzram/uzram.conf"
printf '[s]\ntype = swap\n' >"$P/etc/uzram/uzram.conf.d/50-unix.conf"
generate "$T/g" || fail "exit $? with uzram=0: $(cat "$T/g.err")"
[[ -z $(ls -A "$T/g") ]] || fail "units made with uzram=0"
grep -q "uzram=0 on the kernel command line: no device" "$T/g.err" || fail "no note: $(cat "$T/g.err")"
printf 'uzram=0 uzram=1\n' >"$P/proc/cmdline"
generate "$T/g" || fail "exit $?: $(cat "$T/g.err")"
[[ -e $T/g/uzram-swap@s.service.d/50-uzram.conf ]] || fail "the last uzram= does not win"
rm "$P/proc/cmdline"
FAKE_VIRT=docker generate "$T/h" || fail "exit $? in a container: $(cat "$T/h.err")"
[[ -z $(ls -A "$T/h") ]] || fail "units made in a container"
grep -q "in a container (docker): no device" "$T/h.err" || fail "no note: $(cat "$T/h.err")"
rm -rf "$P/proc"

step "a comment after a value is refused by line, and fails loudly"
cat >"$P/etc/uzram/uzram.conf.d/50-unix.conf" <<'CONF'
[c1]
type = swap            # uzram-swap@c1.service
size = 8G  # eight gigs
[c2] ; the second
type = serve
size = 1G
[c3]
type = mount
mount-point = /mnt/c3
mode = 1777 ;sticky
# a comment of its own, and values with # and ; inside
[ok]
type = serve
socket = /run/a#b;c.sock
CONF
refused "$T/i" \
	"2: '# uzram-swap@c1.service' after 'type = swap': a comment must be a line of its own" \
	"3: '# eight gigs' after 'size = 8G'" \
	"4: '; the second' after '\[c2\]'" \
	"10: ';sticky' after 'mode = 1777'" \
	"1: \[c1\] skipped: it has a comment after a value" \
	"4: \[c2\] skipped" "7: \[c3\] skipped"
made=$(cd "$T/i" && find . -name '50-uzram.conf' | sort | tr '\n' ' ')
assert_eq "$made" "./uzram-ctl@ok.socket.d/50-uzram.conf ./uzram-serve@ok.service.d/50-uzram.conf ./uzram-serve@ok.socket.d/50-uzram.conf " "the units made"
has "$T/i/uzram-serve@ok.socket.d/50-uzram.conf" "ListenStream=/run/a#b;c.sock"
e=$T/i/uzram-config-error.service
[[ -L $T/i/sysinit.target.wants/uzram-config-error.service && -f $e ]] ||
	fail "no uzram-config-error.service wanted by sysinit.target"
has "$e" "ExecStart=/bin/echo \"$P/etc/uzram/uzram.conf.d/50-unix.conf:3: '# eight gigs' after 'size = 8G': a comment must be a line of its own, starting with # or ; (uzram.conf(5))\""
has "$e" "ExecStart=/bin/false"
verify "$T/i" uzram-config-error.service uzram-serve@ok.service
# what it prints when it runs, and that it fails
n=0
while IFS= read -r l; do
	exec_argv <(printf 'ExecStart=%s\n' "${l#ExecStart=}")
	if [[ ${ARGV[0]} == /bin/false ]]; then
		! "${ARGV[@]}" || fail "its last command succeeds"
	else
		"${ARGV[@]}" >>"$T/i.printed"
		n=$((n + 1))
	fi
done < <(grep '^ExecStart=' "$e")
assert_eq "$(cat "$T/i.printed")" "$(sed 's/^uzram-generator: //' "$T/i.err")" "what the error unit prints"

step "the examples of README.md, doc/packaging.md, uzram.conf(5) and uzram.conf"
mkdir -p "$P/proc"
printf 'MemTotal:        2097152 kB\n' >"$P/proc/meminfo"
awk '/<!-- generator-test:/ { want = 1; next }
	want && /^```ini$/ { on = 1; want = 0; next } on && /^```$/ { exit } on' \
	"$root/README.md" >"$P/etc/uzram/uzram.conf"
grep -q '^\[' "$P/etc/uzram/uzram.conf" || fail "no marked ini block in README.md"
example README.md
awk '/^```ini$/ { on = 1; next } on && /^```$/ { exit } on' "$root/doc/packaging.md" \
	>"$P/etc/uzram/uzram.conf"
example doc/packaging.md
awk '/^# EXAMPLE/ { ex = 1; next } ex && /^```$/ { on = !on; next } ex && on
	!on && /^# / { ex = 0 }' "$root/doc/man/uzram.conf.5.scd" >"$P/etc/uzram/uzram.conf"
grep -q '^\[' "$P/etc/uzram/uzram.conf" || fail "no example in uzram.conf(5)"
example "uzram.conf(5)"
has "$T/ex-uzram.conf(5)/uzram-swap@swap.service.d/50-uzram.conf" 'Requires=dev-disk-by\x2dpartlabel-uzram\x2dswap.device'
sed -n 's/^# \{0,1\}//; /^\[/,$p' "$root/systemd/uzram.conf" >"$P/etc/uzram/uzram.conf"
example "the packaged uzram.conf, its comments taken away"
rm -rf "$P/proc"

step "every key of serve and mount, their command lines run for real"
psktool -u uzram -p "$T/keys.psk" >/dev/null
head -c 4096 "$root/README.md" >"$T/dict"
mkdir -p "$T/mnt" "$T/cred" "$T/run" && chmod 700 "$T/run"
cp "$T/keys.psk" "$T/cred/tls-psk"
cat >"$P/etc/uzram/uzram.conf" <<CONF
[real]
type = serve
size = 64M
algorithm = zstd
level = 3
mem-limit = 32M
cluster-size = 8K
host-memory-limit = none
dedup = yes
threads = 2
recomp-algorithm = zstd:9
recomp-algorithm = deflate
backing = $T/state/real.backing
high-watermark = 85
low-watermark = 70
writeback-limit = 16M
dict = $T/dict
image = $T/state/real.img
export-name = real
read-only = no
max-connections = 4
buffer-limit = 64M
timeout = 60
handshake-timeout = 10
socket = $T/real.sock
socket-mode = 0660
socket-user = root
socket-group = root
tls = require
tls-psk = $T/keys.psk

[x509]
type = serve
tcp = 127.0.0.1:10999
tls = on
tls-certificates = /etc/uzram/pki
tls-verify-peer = yes

[m]
type = mount
mount-point = $T/mnt
size = 64M
algorithm = lz4
level = 1
mem-limit = 48M
cluster-size = 16K
host-memory-limit = none
fs-type = ext4
mode = 1777
owner = 0:0
options = noatime
via = fuse
inodes = 2k
CONF
generate "$T/r" || fail "exit $?: $(cat "$T/r.err")"
every_key serve "$P/etc/uzram/uzram.conf"
every_key mount "$P/etc/uzram/uzram.conf"
verify "$T/r" uzram-serve@real.service uzram-serve@real.socket uzram-serve@x509.service uzram-mount@m.service
run_dry "$T/r/uzram-serve@x509.service.d/50-uzram.conf"
exec_argv "$T/r/uzram-serve@real.service.d/50-uzram.conf"
ARGV=("${ARGV[@]//%d/$T/cred}")
"${ARGV[@]}" --socket "$T/real.sock" --run true >"$T/real.out" 2>&1 ||
	fail "the real export's command line fails: ${ARGV[*]}:"$'\n'"$(cat "$T/real.out")"
[[ -s $T/state/real.img ]] || fail "no image saved by the real export: $(cat "$T/real.out")"
exec_argv "$T/r/uzram-mount@m.service.d/50-uzram.conf"
[[ ${ARGV[2]} == -f ]] || fail "the mount unit's command line has no -f: ${ARGV[*]}"
unset 'ARGV[2]'	# returns once mounted, the keeper in the background
if ! command -v nbdfuse fuse2fs mkfs.ext4 >/dev/null || [[ ! -e /dev/fuse ]]; then
	echo "$ITEST_NAME: no nbdfuse, fuse2fs or /dev/fuse: the mount's command line not run"
else
	um() { UZRAM_RUNTIME_DIR=$T/run "$UZRAM" umount "$T/mnt"; }
	umount_late() { ! grep -qF " $T/mnt " /proc/self/mountinfo || um || true; }
	on_exit umount_late
	UZRAM_RUNTIME_DIR=$T/run "${ARGV[@]}" >"$T/m.out" 2>&1 ||
		fail "the mount's command line fails: ${ARGV[*]}:"$'\n'"$(cat "$T/m.out")"
	grep -q " $T/mnt .*noatime.* fuse.ext4 " /proc/self/mountinfo ||
		fail "$T/mnt not mounted by fuse2fs with noatime"
	assert_eq "$(stat -c '%a %u:%g' "$T/mnt")" "1777 0:0" "the mount's mode and owner"
	n=$(stat -f -c %c "$T/mnt")
	((n >= 2048 && n < 4096)) || fail "inodes = 2k: ext4 has $n inodes"
	um
fi

step "no config at all: nothing, exit 0"
rm -rf "$P/etc/uzram"
generate "$T/d" || fail "exit $? with no config: $(cat "$T/d.err")"
[[ -z $(ls -A "$T/d") ]] || fail "units made from nothing"
