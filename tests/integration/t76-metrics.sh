#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# t76-metrics.sh - `uzram stat --prometheus` and `uzram serve --metrics`:
# the text parses with prometheus_client's parser (the exposition format's
# grammar); every metric has HELP and a TYPE other than untyped, a name in
# Prometheus's conventions (uzram_, _total on counters only, the unit in
# the name), and the value `uzram stat --json` gives for the figure its
# HELP names, on the same device after real traffic; every JSON figure has
# a metric. The HTTP listener, on a Unix socket and on TCP, is fetched with
# curl and gives the same metrics; other paths get 404, other methods 405.
# The listener's socket is gone after the server stops.
source "$(dirname "$0")/functions.sh"
require nbdcopy curl python3
real_server || skip_all "--metrics needs the real server"
python3 -c 'import prometheus_client.parser' 2>/dev/null ||
	fail "python3-prometheus-client is missing (scripts/deps.sh test installs it)"

MPORT=$(free_port)
step "a server with both listeners, and data on it"
start_server m --size 64M --export 'ex"port' --metrics "unix:$T/metrics.sock"
start_server_tcp t 127.0.0.1:0 --size 16M --metrics "127.0.0.1:$MPORT"
MURI="nbd+unix:///ex%22port?socket=${SOCK[m]}" # a label value to escape
nbdcopy "$TAR" "$MURI"
nbdcopy "$MURI" "$T/back.img"

# check JSON_BEFORE PROM JSON_AFTER [DATA]: the checks above, in Python;
# DATA: the device must hold data.
check()
{
	python3 - "$@" <<'PY'
import json, re, sys
from prometheus_client.parser import text_string_to_metric_families

before, prom, after = json.load(open(sys.argv[1])), open(sys.argv[2]).read(), json.load(open(sys.argv[3]))
def fail(msg):
    sys.exit("metrics: " + msg)

# HELP and TYPE precede each family, as the format wants
helped, typed = set(), set()
for line in prom.splitlines():
    m = re.match(r'# (HELP|TYPE) (\S+) ', line)
    if m:
        (helped if m.group(1) == 'HELP' else typed).add(m.group(2))
    elif not line.startswith('#'):
        name = re.match(r'[a-zA-Z_:][a-zA-Z0-9_:]*', line).group(0)
        if name not in helped or name not in typed:
            fail(f"{name} has no HELP or TYPE line before it")

families = list(text_string_to_metric_families(prom))
covered = set()
for fam in families:
    if not re.fullmatch(r'uzram_[a-z0-9_]+', fam.name):
        fail(f"bad metric name {fam.name}")
    if fam.type not in ('gauge', 'counter'):
        fail(f"{fam.name} is {fam.type}: name it in ctl/metrics.c")
    m = re.search(r'\(stat: ([a-z_, ]+)\)$', fam.documentation)
    if not m:
        fail(f"{fam.name}'s HELP names no figure: {fam.documentation!r}")
    fig = m.group(1)
    for s in fam.samples:
        if s.labels.get('export') != before['export']:
            fail(f"{s.name} has export={s.labels.get('export')!r}, want {before['export']!r}")
    if fam.type == 'counter':
        if not all(s.name.endswith('_total') for s in fam.samples):
            fail(f"counter {fam.name} without _total")
    elif any(s.name.endswith('_total') for s in fam.samples):
        fail(f"gauge {fam.name} ends with _total")
    if fam.name == 'uzram_info':
        s = fam.samples[0]
        if s.labels['algorithm'] != before['algorithm'] or s.value != 1:
            fail(f"uzram_info is {s}")
        covered |= {'export', 'algorithm', 'metrics'}
        continue
    if fig == 'requests':
        for s in fam.samples:
            t = s.labels['type']
            if not before['requests'][t] <= s.value <= after['requests'][t]:
                fail(f"requests {t}: {s.value} not in [{before['requests'][t]}, {after['requests'][t]}]")
        covered.add('requests')
        continue
    if fig not in before:
        fail(f"{fam.name} names figure {fig}, which uzram stat --json has not")
    scale = 1e-9 if fig.endswith('_ns') else 1
    if fig.endswith('_ns') and not fam.name.endswith('_seconds'):
        fail(f"{fam.name} holds nanoseconds ({fig}) but is not in _seconds")
    if re.search(r'(size|bytes)', fig) and not re.search(r'_bytes$', fam.name):
        fail(f"{fam.name} holds bytes ({fig}) but does not end in _bytes")
    lo, hi = sorted((before[fig] * scale, after[fig] * scale))
    (s,) = fam.samples
    if not lo - 1e-9 <= s.value <= hi + 1e-9:
        fail(f"{s.name} = {s.value}, uzram stat --json says {fig} = {before[fig]} .. {after[fig]}")
    covered.add(fig)
missing = set(before) - covered
if missing:
    fail(f"figures of uzram stat --json with no metric: {sorted(missing)}")
names = {s.name for f in families for s in f.samples}
for want in ('uzram_orig_data_bytes', 'uzram_bd_reads_total', 'uzram_requests_total'):
    if want not in names:
        fail(f"no {want}")
if len(sys.argv) > 4 and before['orig_data_size'] == 0:
    fail("the device holds nothing: the traffic did not reach it")
print(f"{len(families)} metric families agree with uzram stat --json")
PY
}

step "uzram stat --prometheus agrees with uzram stat --json"
uzram stat --socket "${SOCK[m]}" --json >"$T/a.json"
uzram stat --socket "${SOCK[m]}" --prometheus >"$T/m.prom"
uzram stat --socket "${SOCK[m]}" --json >"$T/b.json"
check "$T/a.json" "$T/m.prom" "$T/b.json" data

step "GET /metrics on the Unix socket"
uzram stat --socket "${SOCK[m]}" --json >"$T/a.json"
curl -sSf --max-time 10 --unix-socket "$T/metrics.sock" http://localhost/metrics -D "$T/h" -o "$T/u.prom"
uzram stat --socket "${SOCK[m]}" --json >"$T/b.json"
grep -qi '^content-type: text/plain; version=0.0.4' "$T/h" || fail "content type: $(cat "$T/h")"
check "$T/a.json" "$T/u.prom" "$T/b.json" data

step "GET /metrics on TCP"
uzram stat --tcp "${PORT[t]}" --json >"$T/a.json"
curl -sSf --max-time 10 "http://127.0.0.1:$MPORT/metrics" -o "$T/t.prom"
uzram stat --tcp "${PORT[t]}" --json >"$T/b.json"
check "$T/a.json" "$T/t.prom" "$T/b.json"

step "other paths and methods"
code=$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MPORT/other")
assert_eq "$code" 404 "GET /other"
code=$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$MPORT/metrics")
assert_eq "$code" 405 "POST /metrics"
assert_fails uzram stat --socket "${SOCK[m]}" --json --prometheus

step "--metrics 127.0.0.1:0: the banner, stat and stat --json say the port it took"
start_server z --size 16M --metrics 127.0.0.1:0
addr=$(sed -n 's|^metrics: \(http://127\.0\.0\.1:[0-9]*/metrics\) .*|\1|p' "${OUT[z]}")
[[ -n $addr && $addr != *:0/* ]] ||
	fail "the banner does not say where the metrics are: $(cat "${OUT[z]}")"
curl -sSf --max-time 10 "$addr" -o "$T/z.prom"
grep -q '^uzram_orig_data_bytes' "$T/z.prom" || fail "GET $addr: $(head -c 300 "$T/z.prom")"
uzram stat --socket "${SOCK[z]}" --json >"$T/z.json"
assert_eq "$(json_get "$T/z.json" "j['metrics']")" "$addr" "stat --json's metrics"
uzram stat --socket "${SOCK[z]}" >"$T/z.txt"
grep -qE "^metrics +$addr\$" "$T/z.txt" || fail "stat has no metrics line: $(cat "$T/z.txt")"
uzram stat --socket "${SOCK[z]}" --all >"$T/z.txt"
grep -qE "^metrics +$addr\$" "$T/z.txt" || fail "stat --all has no metrics line: $(cat "$T/z.txt")"
uzram stat --socket "${SOCK[m]}" --json >"$T/m.json"
assert_eq "$(json_get "$T/m.json" "j['metrics']")" "unix:$T/metrics.sock" \
	"stat --json's metrics on a Unix socket"
stop_server z

step "the listeners go with the server"
stop_server m
stop_server t
[[ ! -e $T/metrics.sock ]] || fail "$T/metrics.sock left behind"
assert_fails curl -s --max-time 5 "http://127.0.0.1:$MPORT/metrics"
