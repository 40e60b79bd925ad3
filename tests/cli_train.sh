# cli_train.sh -- `shardq train`: options and their errors, a short run on the
# default corpus (Debian's fortunes) whose loss falls, what it stores and
# prints, a --key, a captured trace that `shardq trace info` and `shardq
# replay` read, and the bad inputs (missing corpus, binary-only corpus,
# sequences longer than the context, a read-only database).

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
: "${SHARDQ:=${SHARDQ_BUILDDIR:-$SHARDQ_SRCDIR}/src/shardq}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
T=$TEST_TMPDIR
export SHARDQ_PROGRESS=0
unset SHARDQ_DB SHARDQ_CORPUS

TINY="--layers 2 --channels 32 --heads 2 --context 32 --seq 32 --batch 2"

# --- options --------------------------------------------------------------
ok "train --help" "$SHARDQ" train --help
cp "$sq_tmp/out" "$T/help.txt"
ok "the help names the options" sh -c 'for o in --corpus --steps --layers --lr --warmup \
  --weight-decay --clip --scheme --set --workers --seed --capture --capture-every --db --json; do
  grep -q -e "  $o " "$0" || { echo "no $o"; exit 1; }; done' "$T/help.txt"
ok "help lists train" sh -c '"$0" --help | grep -q "^  train "' "$SHARDQ"
expect_fail_with 2 "unknown option '--stpes' (did you mean '--steps'?)" "$SHARDQ" train --stpes 3
expect_fail_with 2 "--channels 30 is not a multiple of --heads 4" \
  "$SHARDQ" train --channels 30 --heads 4 --no-db
expect_fail_with 2 "--seq 64: expected 1 .. the context (32)" \
  "$SHARDQ" train --context 32 --seq 64 --no-db
expect_fail_with 2 "--lr: 'fast' is not a number" "$SHARDQ" train --lr fast
expect_fail_with 2 "--steps: '-1' is not an unsigned integer" "$SHARDQ" train --steps -1
expect_fail_with 2 "unknown scheme 'nope'" "$SHARDQ" train --scheme nope --no-db
expect_fail_with 2 "--workers:" "$SHARDQ" train --workers 2y2 --no-db
expect_fail_with 2 "--capture-every 0: expected >= 1" \
  "$SHARDQ" train --capture "$T/never" --capture-every 0 --no-db
expect_fail_with 2 "unexpected argument 'extra'" "$SHARDQ" train extra

# --- the corpus -------------------------------------------------------------
expect_fail_with 1 "install the Debian package fortunes" \
  env SHARDQ_CORPUS="$T/no-such-corpus" "$SHARDQ" train --no-db
expect_fail_with 1 "$T/missing.txt: No such file or directory (--corpus)" \
  "$SHARDQ" train --corpus "$T/missing.txt" --no-db
mkdir "$T/binary"
printf 'a\000b' >"$T/binary/x.dat"
expect_fail_with 1 "too little to train on" "$SHARDQ" train --corpus "$T/binary" --no-db
cat "$SHARDQ_SRCDIR"/src/cli/help/*.txt | head -c 300 >"$T/small.txt"
# shellcheck disable=SC2086 # TINY is meant to split into words
expect_fail_with 1 "each must exceed --seq 32" \
  "$SHARDQ" train --corpus "$T/small.txt" $TINY --no-db

# --- a short run on the default corpus ------------------------------------
cd "$T" || exit 99
# shellcheck disable=SC2086
ok "train on the default corpus, --json" \
  "$SHARDQ" train $TINY --steps 40 --lr 3e-3 --eval-every 20 --workers 2x2 --json
cp "$sq_tmp/out" "$T/t1.json"
pyjson "the summary: losses, speed beside sgemm, bytes per link" "$T/t1.json" "
assert d['run'] == 1 and d['steps'] == 40 and d['workers'] == '2x2', d
assert d['corpus'] == '/usr/share/games/fortunes', d['corpus']
assert abs(d['first_loss'] - math.log(256)) < 0.2, d['first_loss']
assert d['final_loss'] < d['first_loss'] - 1.0, (d['first_loss'], d['final_loss'])
assert d['final_val_loss'] < d['first_loss'] - 1.0, d['final_val_loss']
assert d['tokens'] == 40 * 4 * 2 * 32
assert d['tokens_per_s'] > 0 and d['gflops_compute'] > 0 and d['sgemm_gflops'] > 0, d
assert 0 < d['collective_share'] < 1 and 0 < d['overhead_share'] < 1, d
b = d['bytes']
for c in ('weight_allgather', 'grad_reducescatter'):
    for l in ('intra', 'inter'):
        assert b[c][l]['sent_codes'] > 0 and b[c][l]['sent_meta'] > 0, (c, l, b)
assert abs(b['grad_reducescatter']['intra']['bits_per_element'] - 8.25) < 0.5, b
assert abs(b['grad_reducescatter']['inter']['bits_per_element'] - 4.25) < 0.5, b
assert b['weight_allgather']['inter']['bits_per_element'] < 4.5, b
# beside them, per real parameter: the padding of every tensor paid for
m = d['model']
assert m['padded'] > m['params'] and abs(m['padding_overhead'] - m['padded'] / m['params']) < 1e-12, m
for c in b:
    for l, x in b[c].items():
        assert 0 < x['real_elements'] < x['elements'], (c, l, x)
        assert x['bits_per_param'] > x['bits_per_element'], (c, l, x)
g = b['grad_reducescatter']
assert g['intra']['real_elements'] == 40 * 2 * 1 * m['params'], g
assert g['inter']['real_elements'] == 40 * m['params'], g
"
pyrun "the database: a train run, a row per step, validation every 20 steps" "
c = sqlite3.connect(sys.argv[1])
r = c.execute('SELECT kind, status, preset, topo, seed, config FROM runs').fetchall()
assert len(r) == 1 and r[0][:5] == ('train', 'done', 'sdp4bit', '2x2', 1), r
cfg = json.loads(r[0][5])
assert cfg['layers'] == 2 and cfg['channels'] == 32 and cfg['steps'] == 40, cfg
p = dict(c.execute('SELECT key, value FROM params').fetchall())
assert p['model.layers'] == '2' and p['train.batch'] == '2' and p['grad.inter.bits'] == '4', p
rows = c.execute('SELECT step, tokens, loss, val_loss, lr, grad_norm, seconds FROM train_steps ORDER BY step').fetchall()
assert [x[0] for x in rows] == list(range(40)), rows
assert [x[0] for x in rows if x[3] is not None] == [19, 39], rows
assert all(rows[i][1] == (i + 1) * 256 for i in range(40))
assert all(rows[i][6] <= rows[i + 1][6] for i in range(39))
assert max(x[4] for x in rows) <= 3e-3 * (1 + 1e-6) and rows[-1][4] < rows[10][4]
assert c.execute('SELECT count(*) FROM bytes').fetchone()[0] == 4
t = dict(c.execute('SELECT op, seconds FROM timings').fetchall())
colls = {'collective.' + c + l for c in ('grad_reducescatter', 'weight_allgather') for l in ('', '.intra', '.inter')}
assert set(t) == {'compute', 'grad_reducescatter', 'optimizer', 'weight_allgather', 'eval', 'capture'} | colls, t
# the collectives' own time lies inside the phases that run them
assert 0 < t['collective.grad_reducescatter'] <= t['grad_reducescatter'], t
assert 0 < t['collective.weight_allgather'] <= t['weight_allgather'], t
" "$T/shardq.db"
ok "db export train_steps" "$SHARDQ" db export train_steps
cp "$sq_tmp/out" "$T/steps.csv"
pyrun "as CSV, a row per step in order" "
rows = list(csv.reader(open(sys.argv[1], newline='')))
assert rows[0] == ['run_id', 'step', 'tokens', 'loss', 'val_loss', 'lr', 'grad_norm', 'seconds', 'ef_residual'], rows[0]
assert [int(r[1]) for r in rows[1:]] == list(range(40)) and rows[1][4] == '' and rows[20][4] != '', rows[:3]
assert all(r[8] == '' for r in rows[1:]), rows[1]  # no error feedback: NULL
" "$T/steps.csv"
# error feedback: its state at every step, and the residuals' memory
# shellcheck disable=SC2086
ok "training with error feedback" "$SHARDQ" train $TINY --steps 3 --workers 2x2 --set grad.ef=1 --db "$T/ef.db" --json
cp "$sq_tmp/out" "$T/ef.json"
pyrun "its JSON and train_steps rows hold the residual's state" "
d = json.load(open(sys.argv[1])); e = d['error_feedback']
assert e['residual_bytes_per_worker'] > 4 * d['model']['params'], (e, d['model'])
assert 0 < e['ef_residual_last'] < 2, e
c = sqlite3.connect(sys.argv[2])
ef = [r[0] for r in c.execute('SELECT ef_residual FROM train_steps ORDER BY step')]
assert len(ef) == 3 and all(0 < x < 2 for x in ef) and ef[-1] == e['ef_residual_last'], (ef, e)
" "$T/ef.json" "$T/ef.db"
# shellcheck disable=SC2086
ok "the text summary" "$SHARDQ" train $TINY --steps 3 --workers 1x2 --no-db
cp "$sq_tmp/out" "$T/summary.txt"
ok "it names the loss, the speed beside sgemm and the collectives' share" sh -c '
  grep -q "loss .* -> .*, validation" "$0" &&
  grep -q "tokens/s; .* GFLOP/s in forward+backward .* beside sgemm .* GFLOP/s" "$0" &&
  grep -q "emulated collectives" "$0" && grep -q "grad_reducescatter  intra" "$0"' "$T/summary.txt"

# the same seed, the same losses; every scheme sees the same data
# shellcheck disable=SC2086
ok "two runs of one seed" sh -c '"$0" train $1 --steps 4 --workers 2x2 --no-db --json >"$2/a.json" &&
  "$0" train $1 --steps 4 --workers 2x2 --no-db --json >"$2/b.json"' "$SHARDQ" "$TINY" "$T"
pyrun "give the same losses" "
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert a['final_loss'] == b['final_loss'] and a['final_val_loss'] == b['final_val_loss'], (a, b)
" "$T/a.json" "$T/b.json"

# --key: done once
# shellcheck disable=SC2086
ok "a keyed run" "$SHARDQ" train $TINY --steps 2 --key k1 --db "$T/k.db" -q
# shellcheck disable=SC2086
ok "the same key again" "$SHARDQ" train $TINY --steps 2 --key k1 --db "$T/k.db"
cp "$sq_tmp/out" "$T/again.txt"
ok "is not repeated" grep -q "already done: run 1" "$T/again.txt"

# --- capture, then replay -------------------------------------------------
# shellcheck disable=SC2086
ok "train with --capture every 2 steps" \
  "$SHARDQ" train $TINY --steps 5 --workers 2x2 --capture "$T/cap" --capture-every 2 --no-db
cp "$sq_tmp/out" "$T/cap.txt"
ok "it says so" grep -q "captured 3 steps into $T/cap" "$T/cap.txt"
ok "trace info reads the capture" "$SHARDQ" trace info --json "$T/cap"
cp "$sq_tmp/out" "$T/info.json"
pyjson "steps 0, 2, 4; 4 workers; the GPT's params; its model and topology" "$T/info.json" "
assert d['steps'] == [0, 2, 4] and d['workers'] == 4 and d['topology'] == '2x2', d
names = [p['name'] for p in d['tensors']]
assert names[:3] == ['wte', 'wpe', 'h.0.ln1.w'] and names[-1] == 'lnf.b' and len(names) == 28, names
assert d['tensors'][0]['shape'] == [256, 32], d['tensors'][0]
assert d['model']['kind'] == 'gpt' and d['model']['layers'] == 2 and d['model']['preset'] == 'sdp4bit', d['model']
"
ok "replay reads it with the training's scheme and seed" \
  "$SHARDQ" replay --scheme sdp4bit --seed 1 --no-db --json "$T/cap"
cp "$sq_tmp/out" "$T/replay.json"
pyjson "gradient error of 8/4-bit gradients, on the trace's 2x2" "$T/replay.json" "
assert d['workers'] == '2x2' and d['steps'] == 3, d
assert 0.001 < d['grad']['rel_l2'] < 0.5, d['grad']
"
# shellcheck disable=SC2086
expect_fail_with 1 "$T/cap" \
  "$SHARDQ" train $TINY --steps 2 --capture "$T/cap" --no-db

# --- the database --------------------------------------------------------
# a read-only store (as an unprivileged user when the test runs as root):
# refused before training, its run kept
# shellcheck disable=SC2086
"$SHARDQ" train $TINY --steps 2 --db "$T/ro.db" -q
cat "$SHARDQ_SRCDIR"/src/cli/help/*.txt >"$T/corpus.txt"
chmod 0444 "$T/ro.db" "$T/corpus.txt"
chmod 0555 "$T"
chmod o+rx "$T/.." 2>/dev/null
# shellcheck disable=SC2086
expect_fail_with 1 "ro.db: " ro_run "$SHARDQ" train --corpus "$T/corpus.txt" $TINY --steps 2 \
  --db "$T/ro.db"
chmod 0755 "$T"
chmod 0644 "$T/ro.db"
pyrun "the read-only store kept its run" "
c = sqlite3.connect(sys.argv[1])
assert c.execute('PRAGMA integrity_check').fetchone()[0] == 'ok'
assert c.execute('SELECT count(*) FROM runs WHERE status = \"done\"').fetchone()[0] == 1
assert c.execute('SELECT count(*) FROM train_steps').fetchone()[0] == 2
" "$T/ro.db"

finish
