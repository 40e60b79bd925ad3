# cli_plugin.sh -- plug-in codecs through the command: the example module
# (experiments/plugins/terngrad.c, built by make; SHARDQ_TERNGRAD is its
# path) loaded with --plugin (before or after the command) or
# SHARDQ_PLUGINS, used by `shardq codec encode/decode/stats/info`, as a
# scheme knob in `shardq world` and `shardq replay`, swept by `shardq sweep`
# from a recipe that names the module (and resumed), and drawn by `shardq
# report` with no plug-in loaded; the refusals name the codec or the file.

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
: "${SHARDQ:=${SHARDQ_BUILDDIR:-$SHARDQ_SRCDIR}/src/shardq}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
T=$TEST_TMPDIR
export SHARDQ_PROGRESS=0
unset SHARDQ_DB SHARDQ_PLUGINS SHARDQ_TERNGRAD_PARAMS

test -f "$SHARDQ_TERNGRAD" || {
  echo "error: no example module at '$SHARDQ_TERNGRAD' (make builds it)" >&2
  exit 99
}
PLUG=$SHARDQ_TERNGRAD

python3 - "$T/x.npy" <<'EOF'
import struct, sys, random
# a .npy of 1000 float32 values, written by hand (no NumPy needed)
r = random.Random(7)
vals = [r.gauss(0, 1) for _ in range(1000)]
hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (1000,), }"
hdr += " " * (64 - 10 - len(hdr) - 1) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
    f.write(struct.pack("<1000f", *vals))
EOF

# --- codec -----------------------------------------------------------------
expect_fail_with 2 "kind=plugin:terngrad: no plug-in codec of that name is registered" \
  "$SHARDQ" codec info --codec kind=plugin:terngrad
cp "$sq_tmp/err" "$T/refusal.txt"
ok "the refusal says how to load one" grep -q "SHARDQ_PLUGINS=FILE.so" "$T/refusal.txt"
ok "codec info --plugin" "$SHARDQ" codec info --plugin "$PLUG" --codec kind=plugin:terngrad \
  --n 1000 --json
cp "$sq_tmp/out" "$T/info.json"
pyjson "sizes: ceil(n/4) code bytes, 4 per group of 128" "$T/info.json" \
  "assert d['codec'] == 'kind=plugin:terngrad,group=128', d; \
   assert (d['code_bytes'], d['scale_bytes'], d['offset_bytes'], d['bytes']) == (250, 32, 0, 282), d"
ok "--plugin before the command" "$SHARDQ" --plugin "$PLUG" codec info \
  --codec kind=plugin:terngrad
ok "--plugin=FILE" "$SHARDQ" codec info --plugin="$PLUG" --codec kind=plugin:terngrad
ok "SHARDQ_PLUGINS loads the module" env SHARDQ_PLUGINS=":$PLUG:" "$SHARDQ" codec info \
  --codec kind=plugin:terngrad
ok "the same file twice is loaded once" env SHARDQ_PLUGINS="$PLUG" "$SHARDQ" codec info \
  --plugin "$PLUG" --plugin "$PLUG" --codec kind=plugin:terngrad
expect_fail_with 2 "takes no bits" "$SHARDQ" codec info --plugin "$PLUG" \
  --codec kind=plugin:terngrad,bits=2
expect_fail_with 2 "group=64: plug-in codec terngrad has group 128" \
  "$SHARDQ" codec info --plugin "$PLUG" --codec kind=plugin:terngrad,group=64
ok "the registration parameters set the group" env SHARDQ_TERNGRAD_PARAMS=group=64 \
  "$SHARDQ" codec info --plugin "$PLUG" --codec kind=plugin:terngrad,group=64

ok "codec encode" "$SHARDQ" codec encode --plugin "$PLUG" --codec kind=plugin:terngrad \
  --seed 3 --site grad-inter "$T/x.npy" "$T/x.st"
ok "codec decode" "$SHARDQ" codec decode --plugin "$PLUG" "$T/x.st" "$T/y.npy"
ok "decoded values are 0 or +-(the group's absmax), with x's sign" python3 - "$T/x.npy" "$T/y.npy" <<'EOF'
import struct, sys
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<H", b[8:10])[0]
    return list(struct.unpack("<1000f", b[10 + n:10 + n + 4000]))
x, y = load(sys.argv[1]), load(sys.argv[2])
nonzero = 0
for g in range(0, 1000, 128):
    s = max(abs(v) for v in x[g:g + 128])
    for a, b in zip(x[g:g + 128], y[g:g + 128]):
        assert b == 0 or (abs(b) == s and (a < 0) == (b < 0)), (a, b, s)
        nonzero += b != 0
assert 200 < nonzero < 900, nonzero
EOF
expect_fail_with 1 "kind=plugin:terngrad: no plug-in codec" "$SHARDQ" codec decode "$T/x.st" "$T/z.npy"
ok "encode is reproducible" "$SHARDQ" codec encode --plugin "$PLUG" --codec kind=plugin:terngrad \
  --seed 3 --site grad-inter "$T/x.npy" "$T/x2.st"
ok "the same bytes" cmp "$T/x.st" "$T/x2.st"
ok "codec stats" env SHARDQ_PLUGINS="$PLUG" "$SHARDQ" codec stats --codec kind=plugin:terngrad \
  --seed 1 --json "$T/x.npy"
cp "$sq_tmp/out" "$T/stats.json"
pyjson "stats: 2.256 bits per element, an error of the order of the signal" "$T/stats.json" \
  "assert abs(d['bits_per_element'] - 2.256) < 1e-9, d; assert 0.5 < d['rel_l2'] < 2, d"

# --- the loader's refusals ---------------------------------------------------
expect_fail_with 1 "--plugin: plug-in $T/none.so: No such file" \
  "$SHARDQ" codec info --plugin "$T/none.so"
printf 'not an ELF file\n' >"$T/text.so"
expect_fail_with 1 "plug-in $T/text.so: cannot load it" "$SHARDQ" world --plugin "$T/text.so"
expect_fail_with 1 "SHARDQ_PLUGINS: plug-in $T/none.so" env SHARDQ_PLUGINS="$T/none.so" \
  "$SHARDQ" codec info
expect_fail_with 2 "needs a file" "$SHARDQ" codec info --plugin
expect_fail_with 2 "shardq trace: --plugin: this command takes no codec specs" \
  "$SHARDQ" trace info --plugin "$PLUG" "$T"
ok "codec encode --help names --plugin" sh -c '"$0" codec encode --help | grep -q -- "--plugin FILE.so"' "$SHARDQ"
ok "shardq help world names --plugin" sh -c '"$0" help world | grep -q -- "--plugin FILE.so"' "$SHARDQ"

# --- world -----------------------------------------------------------------
ok "world with grad.inter.kind=plugin:terngrad" "$SHARDQ" world --plugin "$PLUG" \
  --set grad.inter.kind=plugin:terngrad --set grad.hadamard=0 --elements 65536 --run --steps 2 --json
cp "$sq_tmp/out" "$T/world.json"
pyjson "the inter-node hop sends 2 + 32/128 bits an element" "$T/world.json" \
  "t = d['traffic']['grad_reducescatter']['inter']; assert t['bits_per_element'] == 2.25, t; \
   assert t['sent_codes'] == 65536 // 4 and t['sent_meta'] == 65536 // 128 * 4, t; \
   assert 'grad.inter.kind=plugin:terngrad,grad.inter.group=128' in d['scheme']['canonical'], d['scheme']"
expect_fail_with 2 "grad.inter.hadamard=32: kind=plugin:terngrad takes no Hadamard transform" \
  "$SHARDQ" world --plugin "$PLUG" --set grad.inter.kind=plugin:terngrad
expect_fail_with 2 "grad.inter.kind=plugin:nosuch" "$SHARDQ" world --plugin "$PLUG" \
  --set grad.inter.kind=plugin:nosuch
ok "schemes lists plugin:NAME among the kinds" sh -c '"$0" schemes | grep -q "plugin:NAME"' "$SHARDQ"

# --- replay, sweep, report ---------------------------------------------------
mkdir -p "$T/s/traces" "$T/s/plugins"
"$SHARDQ" trace synth --steps 2 --workers 4 --topology 2x2 \
  --params "a:128x64,b:4096,c:100" "$T/s/traces/tiny" >/dev/null
cp "$PLUG" "$T/s/plugins/terngrad.so"
ok "replay with a plug-in wire" "$SHARDQ" replay --plugin "$PLUG" --db "$T/r.db" \
  --set grad.inter.kind=plugin:terngrad --set grad.hadamard=0 "$T/s/traces/tiny"
ok "the stored run names the codec and the file" python3 - "$T/r.db" "$PLUG" <<'EOF'
import os, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
p = dict(c.execute("SELECT key, value FROM params WHERE run_id = 1"))
assert p["grad.inter.kind"] == "plugin:terngrad", p
assert p["plugins"] == "terngrad=" + os.path.realpath(sys.argv[2]), p["plugins"]
EOF

cat >"$T/s/tern.ini" <<'EOF'
; TernGrad beside 2-bit sym on the inter-node hop
[sweep]
name = tern
trace = traces/tiny
plugins = plugins/terngrad.so
paths = grad
seeds = 1, 2
presets = sdp4bit
grad.hadamard = 0

[grid tern]
grad.inter.kind = sym, plugin:terngrad
grad.inter.bits = 2
EOF
sed '/^plugins/d' "$T/s/tern.ini" >"$T/s/tern-noplugin.ini"
expect_fail_with 2 "kind=plugin:terngrad: no plug-in codec" "$SHARDQ" sweep --list \
  "$T/s/tern-noplugin.ini"
ok "sweep runs the recipe (its plugins key loads the module)" "$SHARDQ" sweep --db "$T/s.db" \
  --jobs 2 "$T/s/tern.ini"
ok "four runs done, two of them TernGrad, each naming its file" python3 - "$T/s.db" "$T/s/plugins/terngrad.so" <<'EOF'
import os, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
runs = c.execute("SELECT id FROM runs WHERE sweep = 'tern' AND status = 'done'").fetchall()
assert len(runs) == 4, runs
rows = c.execute("SELECT p.run_id, p.value, q.value FROM params p LEFT JOIN params q "
                 "ON q.run_id = p.run_id AND q.key = 'plugins' "
                 "WHERE p.key = 'grad.inter.kind'").fetchall()
tern = [r for r in rows if r[1] == "plugin:terngrad"]
assert len(tern) == 2, rows
assert all(r[2] == "terngrad=" + os.path.realpath(sys.argv[2]) for r in tern), rows
assert all(r[2] is None for r in rows if r[1] == "sym"), rows
EOF
ok "the sweep again: nothing left to run" "$SHARDQ" sweep --db "$T/s.db" "$T/s/tern.ini"
cp "$sq_tmp/err" "$T/again.txt"
ok "it says so" grep -q "4 already done, 0 to run" "$T/again.txt"
ok "report draws the runs with no plug-in loaded" env -u SHARDQ_PLUGINS "$SHARDQ" report \
  --db "$T/s.db" --out "$T/rep"
ok "error-bits is drawn" test -s "$T/rep/error-bits.png"
ok "the report's table has TernGrad's line" grep -q "inter.kind=plugin:terngrad" "$T/rep/report.md"

finish
