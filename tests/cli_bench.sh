# cli_bench.sh -- `shardq bench`: it measures what it is asked to, prints
# every row beside the copy bandwidth of the same run, and refuses bad
# options and missing devices with the reason. On a machine with a CUDA GPU
# it also runs the device path (the kernels on small sizes); elsewhere it
# checks that asking for one fails cleanly. No check looks at a speed.

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
: "${SHARDQ:=${SHARDQ_BUILDDIR:-$SHARDQ_SRCDIR}/src/shardq}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
T=$TEST_TMPDIR
export SHARDQ_PROGRESS=0

# json_rows FILE OP: the number of JSON rows of FILE for operation OP that
# carry a positive throughput and copy bandwidth.
json_rows() {
  grep -c "^{\"op\":\"$2\",.*\"gbps\":[0-9]*\.[0-9]*[1-9][0-9]*,\"gbps_std\":[0-9.]*,\"copy_gbps\":[0-9]*\.[0-9]*[1-9]" "$1"
}

# ---------------------------------------------------------------------------
# The CPU: rows, fields, the Hadamard twin column
# ---------------------------------------------------------------------------

ok "cpu bench runs" sh -c '"$0" bench --sizes 1,2 --threads 1 --ops quantize-nh,quantize,dequantize-add --min-time 0 --json >"$1/cpu.json"' "$SHARDQ" "$T"
ok "one row per size and op" test "$(wc -l <"$T/cpu.json")" -eq 6
ok "quantize rows have GB/s beside the copy" test "$(json_rows "$T/cpu.json" quantize)" -eq 2
ok "dequantize-add rows too" test "$(json_rows "$T/cpu.json" dequantize-add)" -eq 2
ok "a Hadamard row is compared with its twin" \
  test "$(grep -c '"op":"quantize",.*"vs_without_hadamard":[0-9]' "$T/cpu.json")" -eq 2
ok "a row without a twin has no comparison" \
  test "$(grep -c '"op":"quantize-nh",.*vs_without_hadamard' "$T/cpu.json")" -eq 0
ok "the codec is named in full" grep -q '"codec":"kind=sym,bits=4,group=128,round=sr,hadamard=32,levels=sdp4bit,scale=fp32"' "$T/cpu.json"
ok "sizes are input bytes" grep -q '"bytes_in":2097152' "$T/cpu.json"

ok "the table names the machine and the copy" sh -c '"$0" bench --sizes 1 --threads 1 --ops rng --min-time 0 >"$1/cpu.txt"' "$SHARDQ" "$T"
ok "table header" grep -q "^shardq bench: C reference on" "$T/cpu.txt"
ok "table row" grep -q "^rng  *1  *1  *[0-9.]*  *[0-9.]*  *[0-9.]*%" "$T/cpu.txt"
ok "the Table 5 summary" sh -c '"$0" bench --sizes 1,2 --threads 1 --ops quantize-nh,quantize,dequantize-nh,dequantize --min-time 0 >"$1/t5.txt"' "$SHARDQ" "$T"
ok "Table 5 heading" grep -q "^SDP4Bit Table 5 form, 4-bit" "$T/t5.txt"
ok "Table 5 has one line per size" test "$(grep -c '^ *[12] *[0-9.]*+-[0-9.]* *[0-9.]*+-' "$T/t5.txt")" -eq 2
ok "no 8-bit summary without its rows" sh -c '! grep -q "8-bit" "$0"' "$T/t5.txt"
ok "json rows carry the spread" grep -q '"gbps_std":[0-9]' "$T/cpu.json"
ok "--codec replaces the codec" sh -c '"$0" bench --sizes 1 --threads 1 --ops dequantize --codec bits=2,group=64 --min-time 0 --json | grep -q "\"codec\":\"kind=sym,bits=2,group=64,"' "$SHARDQ"

# ---------------------------------------------------------------------------
# Usage errors (2) and a device that is not there (1)
# ---------------------------------------------------------------------------

expect_fail_with 2 "'gpu' is not a device" "$SHARDQ" bench --device gpu
expect_fail_with 2 "'cuda:x' is not a device" "$SHARDQ" bench --device cuda:x
expect_fail_with 2 "'cuda:' is not a device" "$SHARDQ" bench --device cuda:
expect_fail_with 2 "unknown operation 'quantise'" "$SHARDQ" bench --ops quantise
expect_fail_with 2 "'0' is not a positive integer" "$SHARDQ" bench --sizes 0
expect_fail_with 2 "--min-time: 'soon'" "$SHARDQ" bench --min-time soon
expect_fail_with 2 "bits=9" "$SHARDQ" bench --codec bits=9
# a count no machine has threads for (100000 overflowed libgomp's stack)
expect_fail_with 2 "--threads: '100000' is larger than 1024" "$SHARDQ" bench --sizes 1 --threads 100000
expect_fail_with 2 "--sizes: '65537' is larger than 65536" "$SHARDQ" bench --sizes 65537
expect_fail_with 2 "unexpected argument 'extra'" "$SHARDQ" bench extra

# ---------------------------------------------------------------------------
# --db: a run of kind bench, a row per printed figure and the copy of each size
# ---------------------------------------------------------------------------

unset SHARDQ_DB
ok "bench --db stores the run" sh -c '"$0" bench --sizes 1,2 --threads 1,2 --ops quantize-nh,rng,dequantize --min-time 0 --db "$1/b.db" >"$1/db.txt"' "$SHARDQ" "$T"
ok "and says so" grep -q "^stored as run 1 in $T/b.db" "$T/db.txt"
pyrun "the runs row: kind bench, done, the device, the configuration" "
c = sqlite3.connect(sys.argv[1])
r = c.execute('SELECT kind, status, device, seed, preset, config FROM runs').fetchall()
assert len(r) == 1 and r[0][:5] == ('bench', 'done', 'cpu', 0, None), r
cfg = json.loads(r[0][5])
assert cfg['command'] == 'bench' and cfg['sizes_mb'] == [1, 2] and cfg['threads'] == [1, 2], cfg
assert cfg['ops'] == ['quantize-nh', 'rng', 'dequantize'] and cfg['min_time'] == 0, cfg
" "$T/b.db"
pyrun "one row per op x size x threads, and a copy row per size and threads" "
c = sqlite3.connect(sys.argv[1])
rows = c.execute('SELECT op, threads, elements, bytes, gb_per_s, gb_per_s_std, copy_gb_per_s FROM bench_results').fetchall()
ops = [r for r in rows if r[0] != 'copy']
copies = {(r[1], r[2]): r for r in rows if r[0] == 'copy'}
assert len(ops) == 3 * 2 * 2 and len(copies) == 2 * 2, rows
assert {r[0] for r in ops} == {'quantize-nh', 'rng', 'dequantize'}, ops
assert {r[1] for r in rows} == {1, 2} and {r[2] for r in rows} == {1 << 18, 1 << 19}, rows
for op, th, n, b, g, s, cp in rows:
    assert g > 0 and s is not None and s >= 0 and cp > 0, (op, g, s, cp)
    assert cp == copies[(th, n)][4], (op, th, n, cp)
    want = {'copy': 8 * n, 'rng': 4 * n, 'quantize-nh': 4 * n + n // 2 + n // 128 * 4,
            'dequantize': 4 * n + n // 2 + n // 128 * 4}[op]
    assert b == want, (op, n, b, want)
" "$T/b.db"
ok "json rows name the run" sh -c '"$0" bench --sizes 1 --threads 1 --ops rng --min-time 0 --json --db "$1/b.db" | grep -q "\"run\":2,"' "$SHARDQ" "$T"
ok "db export bench_results" sh -c '"$0" db --db "$1/b.db" export bench_results | grep -c "^2,rng,1,262144," | grep -qx 1' "$SHARDQ" "$T"
mkdir "$T/nodb"
ok "without --db nothing is stored" sh -c 'cd "$1" && SHARDQ_DB=env.db "$0" bench --sizes 1 --threads 1 --ops rng --min-time 0 >/dev/null && test -z "$(ls)"' "$SHARDQ" "$T/nodb"
expect_fail_with 2 "--threads: 2 is listed twice" "$SHARDQ" bench --threads 2,2 --db "$T/x.db"
expect_fail_with 2 "--ops: 'rng' is listed twice" "$SHARDQ" bench --ops rng,rng --db "$T/x.db"
expect_fail_with 2 "--busy-timeout: 'soon' is not an unsigned integer" "$SHARDQ" bench --db "$T/x.db" --busy-timeout soon
ok "a usage error creates no database" test ! -e "$T/x.db"
expect_fail_with 1 "$T/no-such-dir/b.db" "$SHARDQ" bench --sizes 1 --ops rng --db "$T/no-such-dir/b.db"

# a read-only store (as an unprivileged user when the test runs as root):
# refused before anything is measured, its runs kept
mkdir "$T/ro"
cp "$T/b.db" "$T/ro/ro.db"
chmod 0444 "$T/ro/ro.db"
chmod 0555 "$T/ro"
chmod o+rx "$T" "$T/.." 2>/dev/null
expect_fail_with 1 "ro.db: " ro_run "$SHARDQ" bench --sizes 1 --threads 1 --ops rng --min-time 0 --db "$T/ro/ro.db"
chmod 0755 "$T/ro"
chmod 0644 "$T/ro/ro.db"
pyrun "the read-only store kept its runs" "
c = sqlite3.connect(sys.argv[1])
assert c.execute('PRAGMA integrity_check').fetchone()[0] == 'ok'
assert c.execute('SELECT count(*) FROM runs').fetchone()[0] == 2
assert c.execute('SELECT count(*) FROM bench_results').fetchone()[0] == 18
" "$T/ro/ro.db"

# ---------------------------------------------------------------------------
# --peer torch: the PyTorch rows after each of the four rows it covers, with
# the speedup; without torch a clear error and exit 1 (tested with a Python
# that has none: /bin/false stands in for one that cannot import it)
# ---------------------------------------------------------------------------
expect_fail_with 2 "--peer: unknown peer 'numpy'" "$SHARDQ" bench --peer numpy
expect_fail_with 2 "not with --codec" "$SHARDQ" bench --peer torch --codec kind=sym,bits=4,group=128
expect_fail_with 1 "--peer torch: /bin/false cannot import torch" \
  env SHARDQ_PYTHON=/bin/false "$SHARDQ" bench --peer torch --sizes 1 --threads 1 --ops rng
expect_fail_with 1 "--peer torch: $T/none: No such file" \
  env SHARDQ_PYTHON="$T/none" "$SHARDQ" bench --peer torch --sizes 1 --threads 1 --ops rng
if "${SHARDQ_PYTHON:-/usr/bin/python3}" -c "import torch" 2>/dev/null; then
  ok "bench --peer torch runs" sh -c '"$0" bench --peer torch --sizes 1 --threads 1 --ops quantize,rng,dequantize --min-time 0 --json >"$1/peer.json"' "$SHARDQ" "$T"
  pyrun "peer rows: plain and chunked after quantize and dequantize, none after rng, speedups that match the figures" "
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r.get('peer') and (r['op'], r['style']) or r['op'] for r in rows] == [
    'quantize', ('quantize', 'plain'), ('quantize', 'chunked'), 'rng',
    'dequantize', ('dequantize', 'plain'), ('dequantize', 'chunked')], rows
for i, r in enumerate(rows):
    if r.get('peer'):
        own = rows[i - 1 if r['style'] == 'plain' else i - 2]
        assert r['gbps'] > 0 and r['threads'] == own['threads'] == 1
        assert abs(r['speedup'] - own['gbps'] / r['gbps']) < 0.01 * r['speedup'] + 1e-3, (r, own)
" "$T/peer.json"
else
  ok "bench --peer torch: no torch here (skipped)" true
fi

devices=$("$SHARDQ" --version | sed -n 's/.*CUDA yes (\([0-9]*\) device.*/\1/p')
if test "${devices:-0}" -eq 0; then
  expect_fail_with 1 "--device cuda: cuda:0: no CUDA device" "$SHARDQ" bench --device cuda --sizes 8
  expect_fail_with 1 "no CUDA device" "$SHARDQ" bench --device cuda:3 --sizes 8
  # the device is the fault, not an option that only a GPU refuses
  expect_fail_with 1 "--device cuda:7: no CUDA device" "$SHARDQ" bench --device cuda:7 --threads 1
  expect_fail_with 1 "--device cuda:7: no CUDA device" "$SHARDQ" bench --device cuda:7 --ops rng
else
  # on a GPU that is there, the options it has no use for are usage errors
  expect_fail_with 2 "a GPU has no thread count" "$SHARDQ" bench --device cuda --threads 2
  expect_fail_with 2 "'rng' is measured on the CPU only" "$SHARDQ" bench --device cuda --ops rng
  expect_fail_with 1 "--device cuda:$devices: no such device" "$SHARDQ" bench --device "cuda:$devices" --threads 1
  # -----------------------------------------------------------------------
  # A GPU: the device path end to end, on small sizes
  # -----------------------------------------------------------------------
  ok "gpu bench runs" sh -c '"$0" bench --device cuda --sizes 8 --ops quantize-nh,quantize,dequantize,sum-requant,sum --min-time 0 --json >"$1/gpu.json"' "$SHARDQ" "$T"
  ok "gpu rows" test "$(wc -l <"$T/gpu.json")" -eq 5
  ok "gpu rows name the device" test "$(grep -c '"device":"cuda:0 (' "$T/gpu.json")" -eq 5
  ok "gpu quantize beside the copy" test "$(json_rows "$T/gpu.json" quantize)" -eq 1
  ok "gpu twin" grep -q '"op":"quantize",.*"vs_without_hadamard":[0-9]' "$T/gpu.json"
  ok "gpu Table 5" sh -c '"$0" bench --device cuda --sizes 8 --ops quantize-nh,quantize,dequantize-nh,dequantize --min-time 0 | grep -q "^SDP4Bit Table 5 form"' "$SHARDQ"
  expect_fail_with 1 "no such device" "$SHARDQ" bench --device "cuda:$devices" --sizes 8
fi

finish
