#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t55-tls.sh - `uzram serve --tls`: PSK and X.509 keys made here with
# psktool and certtool; nbdinfo, nbdcopy and qemu-img connect with them and
# a data round trip (large requests included) comes back equal; under
# --tls=require a plaintext client is refused (NBD_REP_ERR_TLS_REQD for
# NBD_OPT_GO, the connection closed for NBD_OPT_EXPORT_NAME) while --tls=on
# serves it; plaintext bytes sent after STARTTLS end the connection; a
# wrong PSK, an unknown user, a server certificate from another CA and,
# with --tls-verify-peer, a client certificate from another CA or none are
# refused, and the server goes on serving; bad --tls options are refused;
# a TCP server on a non-loopback address without --tls=require warns.
source "$(dirname "$0")/functions.sh"
require nbdinfo nbdcopy qemu-img psktool certtool python3 unshare
real_server || skip_all "TLS needs the real server"

MiB=$((1024 * 1024))
SIZE=$((64 * MiB))
HOST=127.0.0.1

step "make the keys: PSKs with psktool, two CAs and their certificates"
mkdir -p "$T/psk" "$T/psk-wrong" "$T/psk-bob"
psktool -u alice -p "$T/psk/keys.psk" >/dev/null
psktool -u alice -p "$T/psk-wrong/keys.psk" >/dev/null	# another key
psktool -u bob -p "$T/psk-bob/keys.psk" >/dev/null
[[ $(cut -d: -f2 "$T/psk/keys.psk") != $(cut -d: -f2 "$T/psk-wrong/keys.psk") ]] ||
	fail "psktool made the same key twice"

# make_cert DIR NAME CA-DIR|"" ROLE: NAME-key.pem and NAME-cert.pem in DIR,
# self-signed as a CA without CA-DIR, else signed by CA-DIR's ca.
make_cert()
{
	local dir=$1 name=$2 ca=$3 role=$4
	mkdir -p "$dir"
	certtool --generate-privkey --key-type=ecdsa \
		--outfile "$dir/$name-key.pem" 2>/dev/null
	{
		echo "cn = uzram test $name"
		echo "expiration_days = 2"
		case $role in
		ca) printf '%s\n' ca cert_signing_key ;;
		server) printf '%s\n' 'dns_name = localhost' \
			'ip_address = 127.0.0.1' tls_www_server signing_key ;;
		client) printf '%s\n' tls_www_client signing_key ;;
		esac
	} >"$dir/$name.info"
	if [[ -z $ca ]]; then
		certtool --generate-self-signed --load-privkey "$dir/$name-key.pem" \
			--template "$dir/$name.info" --outfile "$dir/$name-cert.pem" \
			2>/dev/null
	else
		certtool --generate-certificate --load-privkey "$dir/$name-key.pem" \
			--load-ca-certificate "$ca/ca-cert.pem" \
			--load-ca-privkey "$ca/ca-key.pem" \
			--template "$dir/$name.info" --outfile "$dir/$name-cert.pem" \
			2>/dev/null
	fi
}
make_cert "$T/ca" ca "" ca
make_cert "$T/ca2" ca "" ca				# a CA the server does not trust
make_cert "$T/x509" server "$T/ca" server
cp "$T/ca/ca-cert.pem" "$T/x509/"
make_cert "$T/client" client "$T/ca" client		# the client side: ca + own cert
cp "$T/ca/ca-cert.pem" "$T/client/"
make_cert "$T/client2" client "$T/ca2" client	# trusts ca, cert from ca2
cp "$T/ca/ca-cert.pem" "$T/client2/"
mkdir -p "$T/client-nocert" "$T/client-wrongca"
cp "$T/ca/ca-cert.pem" "$T/client-nocert/"
cp "$T/ca2/ca-cert.pem" "$T/client-wrongca/"		# trusts only ca2

psk_uri() { echo "nbds://${3:-alice}@$HOST:$1/?tls-psk-file=$2/keys.psk"; }
x509_uri() { echo "nbds://$HOST:$1/?tls-certificates=$2"; }

# qimg PORT OBJECT QEMU-IMG-ARGS... with NBD as --image-opts or target: the
# export at PORT through the tls-creds object OBJECT (its id is tls0).
nbd_opts() { echo "driver=nbd,server.type=inet,server.host=$HOST,server.port=$1,tls-creds=tls0"; }

# plain_client PORT CASE: a plaintext NBD client in Python; prints what it saw.
plain_client()
{
	python3 - "$HOST" "$1" "$2" <<'PY'
import socket, struct, sys
host, port, case = sys.argv[1], int(sys.argv[2]), sys.argv[3]
IHAVEOPT, REP_MAGIC = 0x49484156454F5054, 0x3E889045565A9
s = socket.create_connection((host, port), timeout=10)
def recv(n):
    b = b""
    while len(b) < n:
        try:
            d = s.recv(n - len(b))
        except (ConnectionResetError, BrokenPipeError):
            return None
        if not d:
            return None
        b += d
    return b
hello = recv(18)
assert hello and hello[:8] == b"NBDMAGIC", hello
s.sendall(struct.pack(">I", 3))
def pack(o, data=b""):
    return struct.pack(">QII", IHAVEOPT, o, len(data)) + data
def opt(o, data=b""):
    s.sendall(pack(o, data))
def reply():
    h = recv(20)
    if h is None:
        return "closed"
    magic, o, typ, n = struct.unpack(">QIII", h)
    assert magic == REP_MAGIC, hex(magic)
    recv(n)
    return "%d:%#x" % (o, typ)
if case == "go":            # NBD_OPT_GO for the default export
    opt(7, struct.pack(">IH", 0, 0))
    print(reply())
elif case == "export-name":  # no error reply exists: closed, or 134 bytes
    opt(1)
    print("closed" if recv(10) is None else "served")
elif case == "starttls-injected":  # options right behind STARTTLS
    # One write: the server finds the options buffered behind STARTTLS
    # (or, if they came late, takes them for a broken TLS ClientHello).
    s.sendall(pack(5) + pack(8) + pack(7, struct.pack(">IH", 0, 0)))
    r = reply()   # the ACK, unless the reset that follows discarded it
    if r == "5:0x1":
        r = reply()
    print(r)
elif case == "starttls-data":  # STARTTLS has no data
    opt(5, b"x")
    print(reply())
PY
}

step "bad --tls options are refused before anything starts"
for args in "--tls-psk $T/psk/keys.psk" "--tls=on" "--tls=maybe" \
	"--tls=on --tls-psk $T/psk/keys.psk --tls-certificates $T/x509" \
	"--tls=on --tls-psk $T/psk/keys.psk --tls-verify-peer"; do
	rc=0
	# shellcheck disable=SC2086
	uzram serve --socket "$T/bad.sock" $args 2>"$T/bad.err" || rc=$?
	assert_eq "$rc" 2 "exit status of serve $args"
	[[ -s $T/bad.err ]] || fail "serve $args: no message"
	[[ ! -e $T/bad.sock ]] || fail "serve $args left a socket"
done
for args in "--tls-psk $T/nosuch.psk" "--tls-certificates $T/psk"; do
	rc=0
	# shellcheck disable=SC2086
	uzram serve --socket "$T/bad.sock" --tls=require $args 2>"$T/bad.err" ||
		rc=$?
	assert_eq "$rc" 1 "exit status of serve $args"
	grep -q "$T/" "$T/bad.err" || fail "serve $args: message names no file:" \
		"$(cat "$T/bad.err")"
done

step "PSK, --tls=require: nbdinfo and the printed URI"
start_server_tcp psk "$HOST:0" --size 64M --tls=require --tls-psk "$T/psk/keys.psk"
P=${PORT[psk]}
grep -q "^uri: nbds://$HOST:$P/$" "${OUT[psk]}" ||
	fail "no nbds:// URI printed: $(cat "${OUT[psk]}")"
assert_eq "$(nbdinfo --size "$(psk_uri $P "$T/psk")")" "$SIZE" "size over TLS"
nbdinfo --json "$(psk_uri $P "$T/psk")" >"$T/info.json"
assert_eq "$(json_get "$T/info.json" "j['TLS']")" True "nbdinfo's TLS field"

step "PSK: nbdcopy round trip, 256 KiB and 32 MiB requests"
head -c $((40 * MiB)) "$CORPUS/files.tar" >"$T/src.img"
head -c $((24 * MiB)) /dev/urandom >>"$T/src.img"
nbdcopy "$T/src.img" "$(psk_uri $P "$T/psk")"
nbdcopy "$(psk_uri $P "$T/psk")" "$T/back.img"
assert_same_data "$T/src.img" "$T/back.img"
nbdcopy --request-size=$((32 * MiB)) --requests=2 "$(psk_uri $P "$T/psk")" "$T/back2.img"
assert_same_data "$T/src.img" "$T/back2.img"
head -c $((32 * MiB)) /dev/urandom >"$T/big.img"
nbdcopy --request-size=$((32 * MiB)) "$T/big.img" "$(psk_uri $P "$T/psk")"
nbdcopy "$(psk_uri $P "$T/psk")" "$T/back3.img"
assert_same_data "$T/big.img" "$T/back3.img"

step "PSK: qemu-img with tls-creds-psk"
PSK_OBJ="tls-creds-psk,id=tls0,endpoint=client,dir=$T/psk,username=alice"
qemu-img convert -n -f raw "$T/src.img" --object "$PSK_OBJ" \
	--target-image-opts "$(nbd_opts $P)"
qemu-img convert --object "$PSK_OBJ" --image-opts "$(nbd_opts $P)" \
	-O raw "$T/qback.img"
assert_same_data "$T/src.img" "$T/qback.img"
qemu-img info --object "$PSK_OBJ" --image-opts "$(nbd_opts $P)" >"$T/qinfo" ||
	fail "qemu-img info over TLS failed"
grep -q "virtual size: 64 MiB" "$T/qinfo" || fail "qemu-img info: $(cat "$T/qinfo")"

step "PSK, require: plaintext clients are refused"
assert_fails "plaintext nbdinfo under --tls=require" nbdinfo --size "nbd://$HOST:$P/"
assert_eq "$(plain_client $P go)" "7:0x80000005" "NBD_OPT_GO before TLS"
assert_eq "$(plain_client $P export-name)" closed "NBD_OPT_EXPORT_NAME before TLS"
assert_eq "$(plain_client $P starttls-data)" "5:0x80000003" "STARTTLS with data"
assert_eq "$(plain_client $P starttls-injected)" closed \
	"plaintext options sent right after STARTTLS"

step "PSK: a wrong key and an unknown user are refused, the server goes on"
assert_fails "a wrong PSK" nbdinfo --size "$(psk_uri $P "$T/psk-wrong")"
assert_fails "an unknown PSK user" nbdinfo --size "$(psk_uri $P "$T/psk-bob" bob)"
assert_fails "qemu-img with a wrong PSK" qemu-img info \
	--object "tls-creds-psk,id=tls0,endpoint=client,dir=$T/psk-wrong,username=alice" \
	--image-opts "$(nbd_opts $P)"
grep -q "TLS handshake failed" "${ERR[psk]}" ||
	fail "no handshake failure logged: $(cat "${ERR[psk]}")"
# each failure names its client by the address accept() gave, even one
# that hung up before the server logged it: STARTTLS, a broken
# ClientHello, and a reset (getpeername() can then no longer say)
before=$(grep -c "TLS" "${ERR[psk]}" || true)
python3 - "$HOST" "$P" <<'PY'
import socket, struct, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
s.recv(18)
s.sendall(struct.pack(">I", 3) + b"IHAVEOPT" + struct.pack(">II", 5, 0))
r = b""
while len(r) < 20:
    r += s.recv(20 - len(r))
s.sendall(b"\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00garbage")
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
s.close()
PY
wait_for 10 "the broken handshake's message" \
	test "$(grep -c "TLS" "${ERR[psk]}")" -gt "$before"
if grep "TLS" "${ERR[psk]}" | grep -Ev "with $HOST port [0-9]+: " >"$T/unnamed"; then
	fail "TLS failures without the client's address: $(cat "$T/unnamed")"
fi
assert_alive psk
nbdcopy "$(psk_uri $P "$T/psk")" "$T/back4.img"
assert_same_data "$T/src.img" "$T/back4.img"
stop_server psk

step "PSK, --tls=on: plaintext and TLS clients are both served"
start_server_tcp on "$HOST:0" --size 8M --tls=on --tls-psk "$T/psk/keys.psk"
P=${PORT[on]}
assert_eq "$(nbdinfo --size "nbd://$HOST:$P/")" $((8 * MiB)) "plaintext size"
assert_eq "$(nbdinfo --size "$(psk_uri $P "$T/psk")")" $((8 * MiB)) "TLS size"
head -c $((8 * MiB)) /dev/urandom >"$T/on.img"
nbdcopy "$T/on.img" "$(psk_uri $P "$T/psk")"
nbdcopy "nbd://$HOST:$P/" "$T/on-back.img"
assert_same_data "$T/on.img" "$T/on-back.img"
stop_server on

step "X.509, require: nbdinfo, nbdcopy and qemu-img with tls-creds-x509"
start_server_tcp x "$HOST:0" --size 64M --tls=require --tls-certificates "$T/x509"
P=${PORT[x]}
assert_eq "$(nbdinfo --size "$(x509_uri $P "$T/client-nocert")")" "$SIZE" \
	"size over X.509 TLS"
nbdcopy "$T/src.img" "$(x509_uri $P "$T/client")"
nbdcopy --request-size=$((32 * MiB)) "$(x509_uri $P "$T/client")" "$T/xback.img"
assert_same_data "$T/src.img" "$T/xback.img"
X509_OBJ="tls-creds-x509,id=tls0,endpoint=client,dir=$T/client"
qemu-img convert --object "$X509_OBJ" --image-opts "$(nbd_opts $P)" \
	-O raw "$T/xqback.img"
assert_same_data "$T/src.img" "$T/xqback.img"
assert_fails "a client that trusts another CA" \
	nbdinfo --size "$(x509_uri $P "$T/client-wrongca")"
assert_fails "plaintext nbdinfo under --tls=require" nbdinfo --size "nbd://$HOST:$P/"
assert_alive x
stop_server x

step "X.509 --tls-verify-peer: only clients with a certificate from the CA"
start_server_tcp v "$HOST:0" --size 8M --tls=require \
	--tls-certificates "$T/x509" --tls-verify-peer
P=${PORT[v]}
assert_eq "$(nbdinfo --size "$(x509_uri $P "$T/client")")" $((8 * MiB)) \
	"size with a client certificate"
qemu-img info --object "$X509_OBJ" --image-opts "$(nbd_opts $P)" >/dev/null ||
	fail "qemu-img with a client certificate was refused"
assert_fails "a client certificate from another CA" \
	nbdinfo --size "$(x509_uri $P "$T/client2")"
assert_fails "no client certificate" \
	nbdinfo --size "$(x509_uri $P "$T/client-nocert")"
assert_alive v
stop_server v

step "TLS on a Unix socket"
start_server u --size 4M --tls=require --tls-psk "$T/psk/keys.psk"
assert_eq "$(nbdinfo --size "nbds+unix://alice@/?socket=${SOCK[u]}&tls-psk-file=$T/psk/keys.psk")" \
	$((4 * MiB)) "size over TLS on a Unix socket"
assert_fails "plaintext on a TLS-only Unix socket" nbdinfo --size "${URI[u]}"
stop_server u

step "a non-loopback address without --tls=require warns (in a private network namespace)"
# All interfaces of a fresh namespace: nothing outside it can connect, and
# nothing else in it holds a port, so a fixed one is free there.
NETNS=(unshare --net)
((EUID == 0)) || NETNS=(unshare --user --map-root-user --net)
if ! "${NETNS[@]}" true 2>/dev/null; then
	echo "$ITEST_NAME: note: cannot make a network namespace here," \
		"the warning is checked on loopback only"
	NETNS=()
fi
if ((${#NETNS[@]})); then
	for tls in "" "--tls=on --tls-psk $T/psk/keys.psk"; do
		# shellcheck disable=SC2086
		"${NETNS[@]}" "${SANITIZER_RUN[@]}" "$UZRAM" serve --size 1M \
			--tcp 0.0.0.0:15314 --run true $tls >/dev/null 2>"$T/warn.err" ||
			fail "serve --tcp 0.0.0.0 $tls: $(cat "$T/warn.err")"
		grep -q "warning: serving 0.0.0.0:15314 without --tls=require" \
			"$T/warn.err" ||
			fail "no warning for 0.0.0.0 $tls: $(cat "$T/warn.err")"
	done
	"${NETNS[@]}" "${SANITIZER_RUN[@]}" "$UZRAM" serve --size 1M \
		--tcp 0.0.0.0:15314 --run true --tls=require \
		--tls-psk "$T/psk/keys.psk" >/dev/null 2>"$T/warn.err"
	! grep -q warning "$T/warn.err" || fail "warned with TLS: $(cat "$T/warn.err")"
fi
uzram serve --size 1M --tcp "$HOST:$(free_port)" --run true >/dev/null 2>"$T/warn.err"
! grep -q warning "$T/warn.err" || fail "warned on loopback: $(cat "$T/warn.err")"
