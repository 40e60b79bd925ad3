# cli_replay.sh -- `shardq replay`: what it stores and prints, that qwd
# beats qw on weights that move by small steps, that the same seed gives the
# same figures, what a --key does, how a locked, read-only or full database
# is refused without losing what it holds, and that memory stays bounded on
# a trace of more than 1 GB (its throughput is printed, not asserted).

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
: "${SHARDQ:=${SHARDQ_BUILDDIR:-$SHARDQ_SRCDIR}/src/shardq}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
cli_env

"$SHARDQ" trace synth --steps 4 --workers 8 --topology 2x4 \
  --params "emb:256x64,w1:64x256,w2:256x64,ln:64" "$T/tr" >/dev/null

# --- a replay and what it stores ------------------------------------------
cd "$T" || exit 99
# a top-k gradient wire: its bits per element, the closed form 8 (1 + 4) / 256
ok "replay with top-k gradient hops" "$SHARDQ" replay --scheme ulq --set grad.kind=topk \
  --set grad.keep=8 --set grad.group=256 --no-db --json tr
cp "$sq_tmp/out" "$T/topk.json"
pyrun "top-k replay: 1.25 bits per element on both hops, a finite error" "
d = json.load(open(sys.argv[1]))
g = d['bytes']['grad_reducescatter']
for l in ('intra', 'inter'):
    assert abs(g[l]['bits_per_element'] - 1.25) < 1e-9, (l, g[l])
assert 0.5 < d['grad']['rel_l2'] < 1, d['grad']
" "$T/topk.json"
ok "replay --bound prints the reader alone beside the replay" "$SHARDQ" replay --no-db \
  --bound --paths grad --workers 1x4 --reuse-workers tr
cp "$sq_tmp/out" "$T/bound.txt"
pyrun "the reader alone's line: the same bytes, a share" "
import re
out = open(sys.argv[1]).read()
m = re.search(r'([0-9.]+) GB of trace read', out)
r = re.search(r'reader alone [0-9.]+ s for the same ([0-9.]+) GB .*: the replay ran at ([0-9.]+)% of it', out)
assert m and r and m.group(1) == r.group(1) and float(r.group(2)) > 0, out
" "$T/bound.txt"
ok "replay into the default database" "$SHARDQ" replay --scheme sdp4bit --json tr
cp "$sq_tmp/out" "$T/r1.json"
ok "the default database is shardq.db in the current directory" test -f "$T/shardq.db"
pyrun "JSON summary: steps, params, errors, bytes" "
d = json.load(open(sys.argv[1]))
assert d['run'] == 1 and d['steps'] == 4 and d['params'] == 4, d
assert d['elements'] == 256*64*3 + 64 and d['workers'] == '2x4'
assert 0.01 < d['grad']['rel_l2'] < 0.5, d['grad']
assert 0 < d['weight']['rel_l2'] < 0.05, d['weight']
assert d['grad']['n'] == 4 * d['elements'] and d['weight']['n'] == 3 * d['elements']
b = d['bytes']
assert abs(b['grad_reducescatter']['intra']['bits_per_element'] - 8.25) < 0.3, b
assert abs(b['grad_reducescatter']['inter']['bits_per_element'] - 4.25) < 0.3, b
assert 4.0 < b['weight_allgather']['intra']['bits_per_element'] < 4.2, b
assert d['trace_bytes'] == 4 * 8 * d['elements'] * 4 + 4 * d['elements'] * 4, d['trace_bytes']
# Megatron's flat bucket: one world, padded at its end only (to 16384 on 2x4)
assert d['layout'] == 'bucket' and d['units'] == 1, d
assert d['padded'] == -(-d['elements'] // 16384) * 16384, d['padded']
" "$T/r1.json"
pyrun "JSON summary: bits per real parameter beside bits per element, the padding" "
d = json.load(open(sys.argv[1]))
assert d['padded'] > d['elements'] and abs(d['padding_overhead'] - d['padded'] / d['elements']) < 1e-12, d
for c, x in d['bytes'].items():
    for l, y in x.items():
        assert 0 < y['real_elements'] < y['elements'], (c, l, y)
        assert y['bits_per_param'] > y['bits_per_element'], (c, l, y)
        assert abs(y['padding_overhead'] - y['elements'] / y['real_elements']) < 1e-12, (c, l, y)
# every real element once per hop of each collective, 4 steps (and the first broadcast)
w = d['bytes']['weight_allgather']
assert (w['intra']['real_elements'] + w['inter']['real_elements']) % (7 * d['elements']) == 0, w
g = d['bytes']['grad_reducescatter']
assert g['intra']['real_elements'] == 4 * 2 * 3 * d['elements'], g
assert g['inter']['real_elements'] == 4 * d['elements'], g
" "$T/r1.json"
pyrun "the database holds the run, its params, step and tensor rows, bytes, timings" "
c = sqlite3.connect(sys.argv[1])
run = c.execute('SELECT status, kind, preset, topo, seed, scheme, version, host, started, ended, config FROM runs').fetchall()
assert len(run) == 1 and run[0][0] == 'done' and run[0][1] == 'replay', run
assert run[0][2] == 'sdp4bit' and run[0][3] == '2x4' and run[0][4] == 1
assert 'grad.inter.bits=4' in run[0][5], run[0][5]
assert run[0][8] and run[0][9] and json.loads(run[0][10])['trace'] == 'tr'
p = dict(c.execute('SELECT key, value FROM params').fetchall())
assert p['grad.intra.bits'] == '8' and p['trace.steps'] == '4', p
steps = c.execute('SELECT step, path FROM step_metrics ORDER BY path, step').fetchall()
assert steps == [(s, 'grad') for s in (1,2,3,4)] + [(s, 'weight') for s in (2,3,4)], steps
nt = c.execute('SELECT count(*) FROM tensor_stats').fetchone()[0]
assert nt == 4 * 4 + 4 * 3, nt
# a step row is its tensors together: the element counts add up
for (s, path, n) in c.execute('SELECT step, path, elements FROM step_metrics'):
    m = c.execute('SELECT sum(elements) FROM tensor_stats WHERE step=? AND path=?', (s, path)).fetchone()[0]
    assert m == n, (s, path, n, m)
# and so do the squared errors: mse x n over tensors = mse x n of the step
for (s, path, n, mse) in c.execute('SELECT step, path, elements, mse FROM step_metrics'):
    m = c.execute('SELECT sum(mse * elements) FROM tensor_stats WHERE step=? AND path=?', (s, path)).fetchone()[0]
    assert abs(m - mse * n) <= 1e-9 * m, (s, path, m, mse * n)
b = c.execute('SELECT collective, link, sent_codes + sent_meta, bits_per_elem FROM bytes').fetchall()
assert len(b) == 4 and all(x[2] > 0 for x in b), b
t = dict((r[0], r[1]) for r in c.execute('SELECT op, calls FROM timings'))
# one bucket: one collective per step
assert t['grad_reducescatter'] == 4 and t['weight_allgather'] == 3, t
" "$T/shardq.db"

# --- figures that must hold ------------------------------------------------
"$SHARDQ" replay --no-db --json --scheme qw tr >"$T/qw.json"
"$SHARDQ" replay --no-db --json --scheme qwd tr >"$T/qwd.json"
pyrun "qwd reconstructs the weights better than qw (SDP4Bit's point)" "
qw = json.load(open(sys.argv[1]))['weight']['rel_l2']
qwd = json.load(open(sys.argv[2]))['weight']['rel_l2']
assert qwd < qw / 3, (qw, qwd)
" "$T/qw.json" "$T/qwd.json"
"$SHARDQ" replay --no-db --json --scheme baseline --set grad.mode=a2a --set grad.bits=32 \
  tr >"$T/base.json"
pyrun "fp32 gradients and bf16 weights: errors at rounding level" "
d = json.load(open(sys.argv[1]))
assert d['grad']['rel_l2'] < 1e-6, d['grad']
assert d['weight']['rel_l2'] < 4e-3, d['weight']
" "$T/base.json"
"$SHARDQ" replay --no-db --json --scheme powersgd tr >"$T/psgd1.json"
"$SHARDQ" replay --no-db --json --scheme powersgd4 tr >"$T/psgd4.json"
"$SHARDQ" replay --no-db --json --scheme baseline --set grad.mode=powersgd \
  --set grad.powersgd.cols=64 tr >"$T/psgdb.json"
pyrun "powersgd: the factors' bits per parameter, more rank more of the gradient" "
one, four, flat = (json.load(open(f)) for f in sys.argv[1:])
# per matrix two all-reduces of (rows + cols) rank fp32 values, the 1-D ln on the fp32 ring:
# 8 bytes (rows + cols) rank over (N - 1) n elements, 64 bits per (rows + cols) rank value
for d, rank in ((one, 1), (four, 4)):
    assert d['layout'] == 'param', d['layout']
    want = (64 * 3 * (256 + 64) * rank + 32 * 64) / (256 * 64 * 3 + 64)
    for link in ('intra', 'inter'):
        assert abs(d['bytes']['grad_reducescatter'][link]['bits_per_param'] - want) < 1e-9, (d['bytes'], want)
assert four['grad']['cosine'] > one['grad']['cosine'] > 0, (one['grad'], four['grad'])
# one bucket viewed as rows of 64 columns: 769 x 64
assert flat['layout'] == 'bucket'
b = flat['bytes']['grad_reducescatter']
bits = 8 * sum(b[l]['sent_codes'] + b[l]['sent_meta'] for l in ('intra', 'inter')) / (b['intra']['real_elements'] + b['inter']['real_elements'])
assert abs(bits - 64 * (769 + 64) / 49216) < 1e-12, b
" "$T/psgd1.json" "$T/psgd4.json" "$T/psgdb.json"
# --- error feedback: its state per step in the store and the summary ---------
ok "replay with error feedback on both hops" "$SHARDQ" replay --db "$T/ef.db" --json --scheme tlqhs --set grad.ef=1 tr
cp "$sq_tmp/out" "$T/ef.json"
ok "... its text says so" sh -c '"$0" replay --no-db --scheme tlqhs --set grad.ef=1 --set layout=param tr | grep -q "error feedback  residual/gradient 0\.[0-9]* after the last step (mean 0\.[0-9]*); 0\.[0-9]* MB per worker"' "$SHARDQ"
"$SHARDQ" replay --db "$T/ef.db" --json --scheme tlqhs tr >"$T/noef.json"
pyrun "error feedback: the per-step residual stored and queryable, NULL without it" "
d = json.load(open(sys.argv[1])); e = d['error_feedback']
# one bucket padded to P: a residual of P floats at the first hop and P / 4 at the second
assert e['residual_bytes_per_worker'] == 4 * (d['padded'] + d['padded'] // 4), (e, d['padded'])
assert 0 < e['ef_residual_last'] < 1 and 0 < e['ef_residual_mean'] < 1, e
assert 'grad.intra.ef=1' in d['scheme'] and 'grad.inter.ef=1' in d['scheme'], d['scheme']
n = json.load(open(sys.argv[2]))
assert 'error_feedback' not in n and '.ef=' not in n['scheme'], n
c = sqlite3.connect(sys.argv[3])
rows = c.execute('SELECT step, path, ef_residual FROM step_metrics WHERE run_id = 1 ORDER BY path, step').fetchall()
assert [r[2] is not None for r in rows] == [True] * 4 + [False] * 3, rows
assert abs(rows[3][2] - e['ef_residual_last']) < 1e-15, (rows, e)
t = c.execute('SELECT count(*), count(ef_residual) FROM tensor_stats WHERE run_id = 1 AND path = \"grad\"').fetchone()
assert t == (16, 16), t
assert c.execute('SELECT count(ef_residual) FROM step_metrics WHERE run_id = 2').fetchone()[0] == 0
p = dict(c.execute('SELECT key, value FROM params WHERE run_id = 1 AND key LIKE \"grad.in%.ef\"').fetchall())
assert p == {'grad.intra.ef': '1', 'grad.inter.ef': '1'}, p
# EF trades each step's error for an unbiased sum: a step's error is larger
assert d['grad']['rel_l2'] > n['grad']['rel_l2'], (d['grad'], n['grad'])
" "$T/ef.json" "$T/noef.json" "$T/ef.db"
ok "db export: the column is there" sh -c '"$0" db --db "$1" export "SELECT ef_residual FROM step_metrics WHERE run_id = 1 AND path = '"'grad'"'" | tail -n +2 | grep -c "^0\." | grep -qx 4' "$SHARDQ" "$T/ef.db"
expect_fail_with 2 "grad.mode=ring" "$SHARDQ" replay --no-db --scheme baseline --set grad.ef=1 tr
expect_fail_with 2 "grad.dtype=fp16" "$SHARDQ" replay --no-db --scheme qgz --set grad.ef=1 tr
expect_fail_with 2 "grad.ef=2: must be 0 (off) or 1" "$SHARDQ" replay --no-db --set grad.ef=2 tr

expect_fail_with 1 "the files of trace workers 4 .. 7 (grads-w04 .. w07) would be dropped" \
  "$SHARDQ" replay --no-db --json --workers 2x2 tr
expect_fail_with 1 "workers 8 .. 15 would reuse the files of trace workers 0 .. 7 (worker r gets file r mod 8); ask for it to accept that (--reuse-workers)" \
  "$SHARDQ" replay --no-db --json --workers 4x4 tr
"$SHARDQ" replay --no-db --json --reuse-workers --workers 2x2 tr >"$T/fewer.json"
"$SHARDQ" replay --no-db --json --reuse-workers --workers 4x4 tr >"$T/more.json"
ok "--reuse-workers: the text says how many workers reuse files" sh -c \
  '"$0" replay --no-db --reuse-workers --workers 4x4 tr | grep -q "note: 8 workers reused gradient files"' "$SHARDQ"
pyrun "fewer or more emulated workers than gradient files, when asked for" "
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
assert a['workers'] == '2x2' and b['workers'] == '4x4'
assert a['dropped_workers'] == 4 and a['reused_workers'] == 0, a
assert b['reused_workers'] == 8 and b['dropped_workers'] == 0, b
assert 0 < a['grad']['rel_l2'] < 0.5 and 0 < b['grad']['rel_l2'] < 0.5
" "$T/fewer.json" "$T/more.json"
"$SHARDQ" replay --no-db --json --seed 7 tr >"$T/s7a.json"
"$SHARDQ" replay --no-db --json --seed 7 tr >"$T/s7b.json"
"$SHARDQ" replay --no-db --json --seed 8 tr >"$T/s8.json"
pyrun "same seed, same figures; another seed, other figures" "
a, b, c = (json.load(open(f)) for f in sys.argv[1:4])
assert a['grad'] == b['grad'] and a['weight'] == b['weight']
assert a['grad']['rel_l2'] != c['grad']['rel_l2']
" "$T/s7a.json" "$T/s7b.json" "$T/s8.json"
"$SHARDQ" replay --no-db --json --paths grad --steps 2 tr >"$T/g2.json"
pyrun "--paths grad --steps 2" "
d = json.load(open(sys.argv[1]))
assert d['steps'] == 2 and 'weight' not in d and d['grad']['n'] == 2 * d['elements']
assert d['bytes']['weight_allgather']['intra']['elements'] == 0
" "$T/g2.json"
expect_fail_with 1 "the weight path needs at least two steps" \
  "$SHARDQ" replay --no-db --paths weight --steps 1 tr

# --- weights at a cadence of their own --------------------------------------
# The same synthetic run with weights every K-th step (the weights at those
# steps are the same bytes): the weight path runs at the weight steps alone,
# from one to the next, the gradient path at every step; qwd's difference
# spans K optimizer steps, so its error grows with K (the issue's 9.5x at a
# 10-step cadence was on a real run).
for k in 1 2 5 10; do
  "$SHARDQ" trace synth --steps 21 --workers 2 --params "a:64x64" --weights-every $k \
    "$T/cad$k" >/dev/null
done
ok "replay a trace with weights every 2nd step" "$SHARDQ" replay --db "$T/cad.db" --scheme qwd \
  --json "$T/cad2"
cp "$sq_tmp/out" "$T/cad2.json"
pyrun "weight rows at the weight steps alone, gradient rows at every step" "
d = json.load(open(sys.argv[1]))
assert d['steps'] == 21 and d['weight_steps'] == 11, d
assert d['grad']['n'] == 21 * 4096 and d['weight']['n'] == 10 * 4096, d
c = sqlite3.connect(sys.argv[2])
for path, want in (('grad', list(range(1, 22))), ('weight', list(range(3, 22, 2)))):
    for table in ('step_metrics', 'tensor_stats'):
        got = [s for (s,) in c.execute('SELECT step FROM ' + table + ' WHERE path=? ORDER BY step', (path,))]
        assert got == want, (path, table, got)
" "$T/cad2.json" "$T/cad.db"
"$SHARDQ" replay --no-db --scheme qwd "$T/cad2" >"$T/cad2.txt"
ok "the text says the weights' cadence" grep -q "note: weights at 11 of the 21 steps" "$T/cad2.txt"
for k in 1 2 5 10; do
  "$SHARDQ" replay --no-db --json --scheme qwd --paths weight "$T/cad$k" >"$T/cad$k.json"
done
pyrun "qwd's weight error grows with the weight cadence" "
e = [json.load(open(f))['weight']['rel_l2'] for f in sys.argv[1:5]]
print('# qwd weight rel_l2 at cadence 1, 2, 5, 10:', ' '.join('%.4g' % x for x in e),
      '(x%.2f at 10)' % (e[3] / e[0]))
assert e[0] < e[1] < e[2] < e[3], e
assert e[3] > 2 * e[0], e
" "$T/cad1.json" "$T/cad2.json" "$T/cad5.json" "$T/cad10.json"
expect_fail_with 1 "the weight path needs at least two steps with weights" \
  "$SHARDQ" replay --no-db --paths weight --steps 10 "$T/cad10"

# --- F64 values: the reference is the file's fp64 values, not their fp32 copy -
# x64 = f + ulp(f)/4 (f an fp32 number) rounds to f: the world sees the same
# fp32 values in both files, the exact mean differs by the quarter ulps
pyrun "write an F64 file and its fp32 rounding as F32" "
import json, struct
f = [struct.unpack('<f', struct.pack('<f', 0.001 * (k + 1) * (-1) ** k))[0] for k in range(256)]
def ulp(x):
    b = struct.unpack('<I', struct.pack('<f', abs(x)))[0]
    return struct.unpack('<f', struct.pack('<I', b + 1))[0] - abs(x)
for name, fmt, dt, vals in (('f64', 'd', 'F64', [x + ulp(x) / 4 for x in f]), ('f32', 'f', 'F32', f)):
    data = struct.pack('<%d%s' % (len(vals), fmt), *vals)
    hdr = json.dumps({'g': {'dtype': dt, 'shape': [len(vals)], 'data_offsets': [0, len(data)]}}).encode()
    hdr += b' ' * (-len(hdr) % 8)
    open(sys.argv[1] + '/' + name + '.safetensors', 'wb').write(struct.pack('<Q', len(hdr)) + hdr + data)
" "$T"
"$SHARDQ" replay --no-db --json --scheme baseline "$T/f64.safetensors" >"$T/f64.json"
"$SHARDQ" replay --no-db --json --scheme baseline "$T/f32.safetensors" >"$T/f32.json"
pyrun "an F64 trace is measured against its fp64 values" "
a, b = (json.load(open(x)) for x in sys.argv[1:3])
assert a['bytes'] == b['bytes']
assert a['grad']['mean_signed'] < b['grad']['mean_signed'], (a['grad'], b['grad'])
assert a['grad']['max_abs'] != b['grad']['max_abs'], (a['grad'], b['grad'])
" "$T/f64.json" "$T/f32.json"

# --- keys: a configuration done is not done again ---------------------------
ok "a run under a key" "$SHARDQ" replay --db "$T/k.db" --key K1 -q tr
"$SHARDQ" replay --db "$T/k.db" --key K1 tr >"$T/again.out" 2>&1
ok "the same key again is skipped" grep -q "already done: run 1" "$T/again.out"
pyrun "one run under the key" "
c = sqlite3.connect(sys.argv[1])
assert c.execute('SELECT count(*) FROM runs').fetchone()[0] == 1
" "$T/k.db"

# --- the database refuses, and keeps what it holds ---------------------------
cp "$T/k.db" "$T/k.before"
# locked: another process holds the write lock until the replay has been
# refused (the file unlock appears; two minutes at most), not for a time that
# a slow start of the replay could outlast
python3 -c "
import os, sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute('BEGIN EXCLUSIVE')
open(sys.argv[2], 'w').close()
end = time.monotonic() + 120
while not os.path.exists(sys.argv[3]) and time.monotonic() < end:
    time.sleep(0.05)
c.execute('ROLLBACK')
" "$T/k.db" "$T/locked" "$T/unlock" &
lockpid=$!
for _ in $(seq 600); do test -f "$T/locked" && break; sleep 0.1; done
ok "another process holds the database's write lock" test -f "$T/locked"
expect_fail_with 1 "k.db: database is locked" \
  "$SHARDQ" replay --db "$T/k.db" --busy-timeout 200 -q tr
touch "$T/unlock"
wait $lockpid
pyrun "after the lock: the old run intact, nothing added" "
c = sqlite3.connect(sys.argv[1])
assert c.execute('PRAGMA integrity_check').fetchone()[0] == 'ok'
assert c.execute('SELECT count(*) FROM runs').fetchone()[0] == 1
assert c.execute('SELECT count(*) FROM step_metrics').fetchone()[0] == 7
" "$T/k.db"
# read-only: as an unprivileged user when the test runs as root
chmod 0444 "$T/k.db"
chmod 0555 "$T"
chmod o+rx "$T/.." 2>/dev/null
expect_fail_with 1 "k.db: " ro_run "$SHARDQ" replay --db "$T/k.db" -q "$T/tr"
chmod 0755 "$T"
chmod 0644 "$T/k.db"
pyrun "after the read-only refusal: nothing lost" "
c = sqlite3.connect(sys.argv[1])
assert c.execute('PRAGMA integrity_check').fetchone()[0] == 'ok'
assert c.execute('SELECT count(*) FROM runs').fetchone()[0] == 1
" "$T/k.db"
# a full disk: no file may grow beyond 32 KB (ulimit -f counts 512-byte blocks)
expect_fail_with 1 "k.db" sh -c "trap '' XFSZ; ulimit -f 64; exec \"\$0\" \"\$@\"" \
  "$SHARDQ" replay --db "$T/k.db" -q --set grad.group=64 "$T/tr"
pyrun "after the full disk: the old run intact, no partial run left done" "
c = sqlite3.connect(sys.argv[1])
assert c.execute('PRAGMA integrity_check').fetchone()[0] == 'ok'
assert c.execute(\"SELECT count(*) FROM runs WHERE status = 'done'\").fetchone()[0] == 1
assert c.execute('SELECT count(*) FROM step_metrics WHERE run_id = 1').fetchone()[0] == 7
" "$T/k.db"
expect_fail_with 1 "not a database" "$SHARDQ" replay --db "$T/r1.json" -q tr

# --- usage errors ------------------------------------------------------------
expect_fail_with 2 "unknown scheme" "$SHARDQ" replay --scheme nope tr
expect_fail_with 2 "--set" "$SHARDQ" replay --set grad.bits=99 tr
expect_fail_with 2 "--workers" "$SHARDQ" replay --workers 0x4 tr
expect_fail_with 2 "--paths" "$SHARDQ" replay --paths both tr
expect_fail_with 2 "--seed" "$SHARDQ" replay --seed 18446744073709551615 tr
expect_fail_with 2 "expected one TRACE" "$SHARDQ" replay
ok "replay --help" "$SHARDQ" replay --help

# --- more than 1 GB of trace, in bounded memory -------------------------------
# 4 steps x (weights + 8 gradients) x 8 tensors of 1 M elements x 4 bytes =
# 1.2 GB. The replay holds one tensor at a time: the bound is 12 fp32 copies
# of the largest tensor per worker (the world's buffers, codes and the
# replay's own) plus 200 MB for the program itself and a sanitizer's shadow,
# under half the trace. And the peak must not grow with the steps replayed.
big=$T/big
params=t0:1024x1024
for i in 1 2 3 4 5 6 7; do params=$params,t$i:1024x1024; done
# a small quarantine, so that AddressSanitizer's freed memory does not count
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16"
if "$SHARDQ" trace synth --steps 4 --workers 8 --topology 2x4 --params "$params" "$big" >/dev/null
then
  ok "the big trace holds more than 1 GB" python3 -c "
import json, subprocess, sys
d = json.loads(subprocess.check_output([sys.argv[1], 'trace', 'info', '--json', sys.argv[2]]))
assert d['bytes'] > 1e9, d['bytes']
" "$SHARDQ" "$big"
  # one world per param: the bound below is the largest tensor's (a bucket's
  # memory follows the bucket size instead)
  ok "replay the big trace, the reader alone timed after it" "$SHARDQ" replay --no-db --json \
    --set layout=param --bound "$big"
  cp "$sq_tmp/out" "$T/big.json"
  ok "replay its first two steps" "$SHARDQ" replay --no-db --json --set layout=param --steps 2 "$big"
  cp "$sq_tmp/out" "$T/big2.json"
  python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
r = d['reader_alone']
print('# replay of %.2f GB: %.1f s, %.3f GB/s of trace, peak RSS %.0f MB; the reader alone '
      '%.3f GB/s: the replay at %.1f%% of it' % (
    d['trace_bytes'] / 1e9, d['seconds'], d['gb_per_s'], d['peak_rss_bytes'] / 1e6,
    r['gb_per_s'], 100 * r['replay_share']))
" "$T/big.json"
  pyrun "the reader alone read what the replay read" "
d = json.load(open(sys.argv[1]))
r = d['reader_alone']
assert r['bytes'] == d['trace_bytes'] and r['seconds'] > 0, (r, d['trace_bytes'])
assert abs(r['replay_share'] - d['gb_per_s'] / r['gb_per_s']) < 1e-9 * r['replay_share']
" "$T/big.json"
  pyrun "peak memory bounded by the largest tensor x workers, not by the trace" "
d = json.load(open(sys.argv[1]))
largest, workers = 1024 * 1024, 8
bound = 12 * 4 * largest * workers + 200e6
assert d['trace_bytes'] > 1e9 and bound < d['trace_bytes'] / 2
assert d['peak_rss_bytes'] < bound, (d['peak_rss_bytes'], bound)
" "$T/big.json"
  pyrun "peak memory does not grow with the steps replayed" "
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
assert a['trace_bytes'] > 1.9 * b['trace_bytes']
assert a['peak_rss_bytes'] < 1.1 * b['peak_rss_bytes'] + 20e6, (a['peak_rss_bytes'], b['peak_rss_bytes'])
" "$T/big.json" "$T/big2.json"
  rm -rf "$big"
else
  sq_report 1 "write the big trace (is the disk full?)"
fi

finish
