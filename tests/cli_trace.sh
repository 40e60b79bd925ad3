# cli_trace.sh -- `shardq trace synth` and `shardq trace info`, and what
# `shardq trace info` and `shardq replay` say about broken traces: a missing
# manifest, step or file, a truncated file, a header that lies, a tensor that
# differs from the manifest, a dtype that is not a float, NaN and Inf values,
# zero-sized tensors, a file of another trace. Every error must name the file
# and the field, exit 1, and never crash. And one writer per directory: a
# second writer is refused while the first runs, an unfinished trace is taken
# up by the same command run again and refused to any other.

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
: "${SHARDQ:=${SHARDQ_BUILDDIR:-$SHARDQ_SRCDIR}/src/shardq}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
T=$TEST_TMPDIR
export SHARDQ_PROGRESS=0
export SHARDQ_DB="$T/default.db"

# --- synth and info --------------------------------------------------------
ok "synth writes a trace" "$SHARDQ" trace synth --steps 3 --workers 4 --topology 2x2 \
  --params "a:10x7,b:33,c:0x5" "$T/tr"
ok "manifest and files exist" test -f "$T/tr/manifest.json" -a \
  -f "$T/tr/step-000001/weights.safetensors" -a -f "$T/tr/step-000003/grads-w03.safetensors"
ok "info prints" "$SHARDQ" trace info "$T/tr"
"$SHARDQ" trace info --json "$T/tr" >"$T/info.json"
pyjson "info --json: steps, workers, tensors, shapes" "$T/info.json" "
assert d['kind'] == 'directory', d['kind']
assert d['steps'] == [1, 2, 3], d['steps']
assert d['consecutive'] is True
assert d['workers'] == 4 and d['topology'] == '2x2' and d['weights'] is True
assert [t['name'] for t in d['tensors']] == ['a', 'b', 'c']
assert [t['shape'] for t in d['tensors']] == [[10, 7], [33], [0, 5]]
assert d['elements'] == 103, d['elements']
assert d['bytes'] == 3 * 5 * 103 * 4, d['bytes']
assert d['dtypes'] == 'F32', d['dtypes']"
# weights at a cadence of their own: every 2nd step, the gradients at every one
ok "synth --weights-every 2" "$SHARDQ" trace synth --steps 5 --workers 2 --weights-every 2 \
  --params "a:10x7" "$T/cad"
ok "no weights at step 2" test ! -e "$T/cad/step-000002/weights.safetensors" -a \
  -f "$T/cad/step-000002/grads-w01.safetensors" -a -f "$T/cad/step-000003/weights.safetensors"
"$SHARDQ" trace info --json "$T/cad" >"$T/cad.json"
pyjson "info --json: the weight steps" "$T/cad.json" "
assert d['steps'] == [1, 2, 3, 4, 5] and d['weights'] is True, d
assert d['weight_steps'] == [1, 3, 5], d['weight_steps']
assert d['bytes'] == (5 * 2 + 3) * 70 * 4, d['bytes']"
"$SHARDQ" trace info "$T/cad" >"$T/cad.txt"
ok "info: weights at 3 of 5 steps" grep -q "^weights    at 3 of 5 steps: 1 3 5$" "$T/cad.txt"
pyjson "the manifest lists them" "$T/cad/manifest.json" "
assert d['weights'] == [1, 3, 5] and d['version'] == 1, d"
pyjson "info --json of a trace with weights at every step: all of them" "$T/info.json" "
assert d['weight_steps'] == [1, 2, 3], d['weight_steps']"
rm "$T/cad/step-000003/weights.safetensors"
expect_fail_with 1 "cad/step-000003/weights.safetensors: missing (step 3 is in the manifest)" \
  "$SHARDQ" trace info "$T/cad"
expect_fail_with 2 "--weights-every: --no-weights writes none" \
  "$SHARDQ" trace synth --no-weights --weights-every 2 "$T/never"
ok "synth is deterministic" "$SHARDQ" trace synth --steps 3 --workers 4 --topology 2x2 \
  --params "a:10x7,b:33,c:0x5" "$T/tr2"
ok "same options, same bytes" cmp "$T/tr/step-000002/grads-w01.safetensors" \
  "$T/tr2/step-000002/grads-w01.safetensors"
for dt in BF16 F16 F64; do
  ok "synth --dtype $dt" "$SHARDQ" trace synth --steps 2 --workers 2 --dtype $dt \
    --params "x:100" "$T/tr-$dt"
  "$SHARDQ" trace info --json "$T/tr-$dt" >"$T/info-$dt.json"
  pyjson "info: dtype $dt" "$T/info-$dt.json" "assert d['dtypes'] == '$dt', d['dtypes']"
done
ok "synth --no-weights" "$SHARDQ" trace synth --steps 2 --workers 2 --no-weights \
  --params "x:100" "$T/trnw"
"$SHARDQ" trace info --json "$T/trnw" >"$T/info-nw.json"
pyjson "info: no weights" "$T/info-nw.json" "assert d['weights'] is False"
expect_fail_with 1 "not empty" "$SHARDQ" trace synth --params "x:10" "$T/tr"
ok "synth creates missing parent directories" "$SHARDQ" trace synth --steps 1 --params "x:10" \
  "$T/new/parents/tr"
ok "... and the trace is there" "$SHARDQ" trace info "$T/new/parents/tr"
expect_fail_with 2 "--params" "$SHARDQ" trace synth --params "x" "$T/bad1"
# a list with a hole in it is an error, not a shorter list
expect_fail_with 2 "--params" "$SHARDQ" trace synth --params "x:10x" "$T/bad1"
expect_fail_with 2 "--params" "$SHARDQ" trace synth --params "a:4,,b:2" "$T/bad1"
expect_fail_with 2 "--params" "$SHARDQ" trace synth --params "a:4x,b:2" "$T/bad1"
expect_fail_with 2 "--lr: it moves the weights, and --no-weights writes none" \
  "$SHARDQ" trace synth --no-weights --lr 2 --params "x:10" "$T/bad1"
ok "... and none of them left a directory" test ! -e "$T/bad1"
expect_fail_with 2 "--dtype" "$SHARDQ" trace synth --dtype I32 "$T/bad2"
expect_fail_with 1 "field 'topology'" "$SHARDQ" trace synth --workers 3 --topology 2x2 \
  --params x:4 "$T/bad3"

# single files: one step, one gradient
"$SHARDQ" trace synth --steps 1 --workers 1 --no-weights --params "g:64x4,h:9" "$T/one" \
  >/dev/null 2>&1
cp "$T/one/step-000001/grads-w00.safetensors" "$T/single.safetensors"
"$SHARDQ" trace info --json "$T/single.safetensors" >"$T/info-single.json"
pyjson "a single safetensors file is one step, one gradient" "$T/info-single.json" "
assert d['kind'] == 'safetensors' and d['steps'] == [0] and d['workers'] == 1
assert d['weights'] is False and [t['name'] for t in d['tensors']] == ['g', 'h']"
{
  python3 -c "
import struct, sys
n = 1000
hdr = b'{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (10, 100), }'
hdr += b' ' * (63 - (10 + len(hdr)) % 64) + b'\n'
open(sys.argv[1], 'wb').write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(hdr)) + hdr +
    struct.pack('<%df' % n, *[((i * 37) % 101 - 50) * 1e-3 for i in range(n)]))
" "$T/grad.npy"
  "$SHARDQ" trace info --json "$T/grad.npy" >"$T/info-npy.json"
  pyjson "a .npy file is one step, one gradient named after the file" "$T/info-npy.json" "
assert d['kind'] == 'npy' and d['tensors'][0]['name'] == 'grad'
assert d['tensors'][0]['shape'] == [10, 100]"
  ok "replay a .npy file" "$SHARDQ" replay --no-db "$T/grad.npy"
}
ok "replay a single safetensors file" "$SHARDQ" replay --no-db "$T/single.safetensors"

# --- broken traces -----------------------------------------------------------
"$SHARDQ" trace synth --steps 3 --workers 2 --params "a:40,b:8x8" "$T/good" >/dev/null 2>&1
# fresh copy of the good trace into $T/$1
broken() {
  rm -rf "${T:?}/$1"
  cp -r "$T/good" "$T/$1"
}
expect_fail_with 1 "no manifest.json" "$SHARDQ" trace info "$T/one/step-000001"
expect_fail_with 1 "cannot open" "$SHARDQ" trace info "$T/nonexistent"

broken nostep
rm -r "$T/nostep/step-000002"
expect_fail_with 1 "nostep/step-000002/weights.safetensors: missing" "$SHARDQ" trace info "$T/nostep"
expect_fail_with 1 "nostep/step-000002/weights.safetensors: missing" "$SHARDQ" replay --no-db "$T/nostep"

broken nofile
rm "$T/nofile/step-000003/grads-w01.safetensors"
expect_fail_with 1 "step-000003/grads-w01.safetensors: missing" "$SHARDQ" trace info "$T/nofile"

broken trunc
f="$T/trunc/step-000002/grads-w00.safetensors"
size=$(wc -c <"$f")
truncate -s $((size - 5)) "$f"
expect_fail_with 1 "grads-w00.safetensors" "$SHARDQ" trace info "$T/trunc"
truncate -s 4 "$f"
expect_fail_with 1 "too short for the header length" "$SHARDQ" trace info "$T/trunc"

broken manifest
sed -i 's/"workers":	2/"workers":	0/' "$T/manifest/manifest.json"
expect_fail_with 1 "manifest.json: field 'workers'" "$SHARDQ" trace info "$T/manifest"
broken manifest2
sed -i 's/"version":	1/"version":	9/' "$T/manifest2/manifest.json"
expect_fail_with 1 "field 'version': 9" "$SHARDQ" trace info "$T/manifest2"
broken manifest3
printf '{"format": "shardq-trace", ' >"$T/manifest3/manifest.json"
expect_fail_with 1 "manifest.json: invalid JSON" "$SHARDQ" trace info "$T/manifest3"

{
  # rewrite one file's header through a python function of the parsed header
  patch_header() { # FILE PYTHON-EXPRESSION-ON-h
    python3 - "$1" "$2" <<'EOF'
import json, struct, sys
path, expr = sys.argv[1], sys.argv[2]
b = open(path, 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
data = b[8 + n:]
exec(expr)
j = json.dumps(h).encode()
j += b' ' * ((8 - len(j) % 8) % 8)
open(path, 'wb').write(struct.pack('<Q', len(j)) + j + data)
EOF
  }
  broken lie
  patch_header "$T/lie/step-000001/grads-w01.safetensors" "h['a']['data_offsets'][1] += 4"
  expect_fail_with 1 "grads-w01.safetensors: tensor 'a': field" "$SHARDQ" trace info "$T/lie"
  broken overlap
  patch_header "$T/overlap/step-000001/grads-w00.safetensors" \
    "h['b']['data_offsets'] = [h['a']['data_offsets'][0], h['a']['data_offsets'][0] + 256]; data = data[:256 + 160]"
  expect_fail_with 1 "overlaps" "$SHARDQ" trace info "$T/overlap"
  broken shape
  patch_header "$T/shape/step-000003/weights.safetensors" "h['b']['shape'] = [4, 16]"
  expect_fail_with 1 "weights.safetensors: tensor 'b': field 'shape': [4, 16], but the manifest says [8, 8]" \
    "$SHARDQ" trace info "$T/shape"
  broken dtype
  patch_header "$T/dtype/step-000001/grads-w00.safetensors" "h['a']['dtype'] = 'I32'"
  expect_fail_with 1 "tensor 'a': field 'dtype': I32 is not a floating-point dtype" \
    "$SHARDQ" trace info "$T/dtype"
  broken unknown
  patch_header "$T/unknown/step-000001/grads-w00.safetensors" "h['a']['dtype'] = 'F31'"
  expect_fail_with 1 "field 'dtype': unknown dtype 'F31'" "$SHARDQ" trace info "$T/unknown"
  broken absurd
  patch_header "$T/absurd/step-000001/grads-w00.safetensors" "h['a']['shape'] = [2**40, 2**40]"
  expect_fail_with 1 "tensor 'a': field 'shape'" "$SHARDQ" trace info "$T/absurd"
  broken extra
  patch_header "$T/extra/step-000002/grads-w00.safetensors" \
    "h['z'] = {'dtype': 'F32', 'shape': [0], 'data_offsets': [len(data), len(data)]}"
  patch_header "$T/extra/step-000003/grads-w01.safetensors" \
    "h['num_batches_tracked'] = {'dtype': 'I64', 'shape': [0], 'data_offsets': [len(data), len(data)]}; h['y'] = {'dtype': 'F32', 'shape': [0], 'data_offsets': [len(data), len(data)]}"
  # a tensor the manifest does not list is a buffer: skipped and counted, as in a single file
  ok "extra tensors are buffers, counted" sh -c \
    '"$0" trace info "$1" | grep -F "ignored    2 tensors that are not parameters"' \
    "$SHARDQ" "$T/extra"
  ok "a trace with buffers replays" "$SHARDQ" replay --no-db -q "$T/extra"
  # NaN and Inf values: the header is fine, the replay names the element
  for bad in nan inf; do
    broken val-$bad
    python3 - "$T/val-$bad/step-000002/grads-w01.safetensors" $bad <<'EOF'
import json, struct, sys
path, kind = sys.argv[1], sys.argv[2]
b = bytearray(open(path, 'rb').read())
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
off = 8 + n + h['b']['data_offsets'][0] + 4 * 17
b[off:off + 4] = struct.pack('<f', float(kind))
open(path, 'wb').write(bytes(b))
EOF
    ok "a $bad value passes trace info (headers only)" "$SHARDQ" trace info "$T/val-$bad"
  done
  expect_fail_with 1 "step-000002/grads-w01.safetensors: tensor 'b': element 17 is NaN" \
    "$SHARDQ" trace info --values "$T/val-nan"
  expect_fail_with 1 "tensor 'b': element 17 is +Inf" "$SHARDQ" trace info --values "$T/val-inf"
  ok "--values on a good trace" sh -c \
    '"$0" trace info --values "$1" | grep -F "values     all finite"' "$SHARDQ" "$T/good"
  expect_fail_with 1 "step-000002/grads-w01.safetensors: tensor 'b': element 17 is NaN" \
    "$SHARDQ" replay --no-db "$T/val-nan"
  expect_fail_with 1 "tensor 'b': element 17 is +Inf" "$SHARDQ" replay --no-db "$T/val-inf"
  # the failed replay is stored as failed, with its error, and nothing else is lost
  ok "a good replay into a database" "$SHARDQ" replay --db "$T/f.db" -q "$T/good"
  expect_fail_with 1 "element 17 is NaN" "$SHARDQ" replay --db "$T/f.db" "$T/val-nan"
  ok "the failed run is stored as failed, the good one kept" python3 -c "
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
rows = c.execute('SELECT status, error FROM runs ORDER BY id').fetchall()
assert [r[0] for r in rows] == ['done', 'failed'], rows
assert 'element 17 is NaN' in rows[1][1], rows
assert c.execute('PRAGMA integrity_check').fetchone()[0] == 'ok'
" "$T/f.db"
}

# zero-sized tensors are fine and left out of the replay
"$SHARDQ" replay --no-db --json "$T/tr" >"$T/zero.json"
pyjson "replay leaves zero-sized tensors out" "$T/zero.json" "
assert d['params'] == 2 and d['elements'] == 103, (d['params'], d['elements'])"

# a full disk while writing a trace: no file may grow beyond 64 KB
expect_fail_with 1 "write failed" sh -c "trap '' XFSZ; ulimit -f 128; exec \"\$0\" \"\$@\"" \
  "$SHARDQ" trace synth --params "x:100000" "$T/full"
ok "the cut-short trace has no manifest, so it is refused" test ! -e "$T/full/manifest.json"
expect_fail_with 1 "no manifest.json" "$SHARDQ" trace info "$T/full"
ok "and no partial file is left" sh -c "! ls '$T'/full/step-*/ | grep -q tmp"
expect_fail_with 1 "full: holds the unfinished trace of another writer (pid" \
  "$SHARDQ" trace synth --params "x:100000" --seed 2 "$T/full"
ok "the same command again takes up its unfinished trace" \
  "$SHARDQ" trace synth --params "x:100000" "$T/full"
ok "... and finishes it, with no writer file left" sh -c \
  '"$0" trace info "$1" >/dev/null && test ! -e "$1/.shardq-writer"' "$SHARDQ" "$T/full"

# --- one writer per directory ------------------------------------------------
# a writer that runs long (it is killed below): the second one is refused,
# named by the first one's pid, while the first keeps writing
"$SHARDQ" trace synth --steps 100000 --params "x:100000" "$T/two" >/dev/null 2>&1 &
first=$!
for _ in $(seq 1 600); do
  grep -q "^pid $first\$" "$T/two/.shardq-writer" 2>/dev/null && break
  sleep 0.05
done
expect_fail_with 1 "two: another process (pid $first) is writing a trace into this directory" \
  "$SHARDQ" trace synth --steps 1 --params "x:100000" "$T/two"
kill -9 "$first"
wait "$first" 2>/dev/null
expect_fail_with 1 "two: holds the unfinished trace of another writer (pid $first" \
  "$SHARDQ" trace synth --steps 1 --params "x:100000" "$T/two"
expect_fail_with 1 "no manifest.json" "$SHARDQ" trace info "$T/two"

# a file of another trace, of the same shapes, is refused by name
"$SHARDQ" trace synth --steps 3 --workers 2 --params "a:40,b:8x8" --seed 7 "$T/other" \
  >/dev/null 2>&1
broken mixed
cp "$T/other/step-000002/grads-w01.safetensors" "$T/mixed/step-000002/grads-w01.safetensors"
expect_fail_with 1 "mixed/step-000002/grads-w01.safetensors: field 'trace_id'" \
  "$SHARDQ" trace info "$T/mixed"
expect_fail_with 1 "a file of another trace" "$SHARDQ" replay --no-db "$T/mixed"
"$SHARDQ" trace info --json "$T/good" >"$T/info-id.json"
pyjson "info --json: the trace's id, which every file carries" "$T/info-id.json" "
import struct
assert len(d['id']) == 32, d['id']
f = open(sys.argv[1].replace('info-id.json', 'good/step-000003/weights.safetensors'), 'rb').read()
n = struct.unpack('<Q', f[:8])[0]
assert json.loads(f[8:8 + n])['__metadata__']['trace_id'] == d['id']"

# --- files of another format are named as such -----------------------------
python3 - "$T" <<'EOF'
import pickle, sys, zipfile
d = sys.argv[1]
with zipfile.ZipFile(d + '/zip.pt', 'w') as z:  # torch.save's layout
    z.writestr('archive/data.pkl', b'\x80\x02}q\x00.')
    z.writestr('archive/data/0', b'\0' * 16)
with zipfile.ZipFile(d + '/arr.npz', 'w') as z:  # numpy.savez's layout
    z.writestr('w.npy', b'\x93NUMPY\x01\x00v\x00' + b' ' * 118)
with zipfile.ZipFile(d + '/other.zip', 'w') as z:
    z.writestr('readme.txt', b'hello')
pickle.dump({'w': [1.0, 2.0]}, open(d + '/p.pkl', 'wb'), protocol=4)
# legacy torch.save: a protocol-2 pickle of the magic number 0x1950a86a20f9469cfc6c first
open(d + '/legacy.pt', 'wb').write(
    b'\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.' + bytes(64))
open(d + '/h.h5', 'wb').write(b'\x89HDF\r\n\x1a\n' + bytes(96))
EOF
# numpy's own .npz where this python has numpy (Debian's), else the zipfile one above
/usr/bin/python3 -c 'import numpy, sys; numpy.savez(sys.argv[1], w=numpy.zeros(3, numpy.float32))' \
  "$T/np.npz" 2>/dev/null || cp "$T/arr.npz" "$T/np.npz"
expect_fail_with 1 "zip.pt: this is a PyTorch checkpoint (torch.save's zip format), not safetensors" \
  "$SHARDQ" trace info "$T/zip.pt"
expect_fail_with 1 "legacy.pt: this is a PyTorch checkpoint (torch.save's legacy pickle format)" \
  "$SHARDQ" trace info "$T/legacy.pt"
expect_fail_with 1 "p.pkl: this is a Python pickle" "$SHARDQ" trace info "$T/p.pkl"
expect_fail_with 1 "np.npz: this is a NumPy .npz archive, not safetensors" \
  "$SHARDQ" trace info "$T/np.npz"
expect_fail_with 1 "arr.npz: this is a NumPy .npz archive" "$SHARDQ" trace info "$T/arr.npz"
expect_fail_with 1 "other.zip: this is a zip archive, not safetensors" \
  "$SHARDQ" trace info "$T/other.zip"
expect_fail_with 1 "h.h5: this is an HDF5 file, not safetensors" "$SHARDQ" trace info "$T/h.h5"
expect_fail_with 1 "np.npz: this is a NumPy .npz archive, not .npy: unpack it" \
  "$SHARDQ" codec stats "$T/np.npz"
expect_fail_with 1 "zip.pt: this is a PyTorch checkpoint (torch.save's zip format), not .npy" \
  "$SHARDQ" codec stats "$T/zip.pt"
expect_fail_with 1 "this is a PyTorch checkpoint (torch.save's zip format), not .npy" \
  sh -c '"$0" codec stats - <"$1"' "$SHARDQ" "$T/zip.pt"
expect_fail_with 1 "this is a PyTorch checkpoint (torch.save's zip format), not safetensors" \
  sh -c 'cat "$1" | "$0" codec decode - "$2"' "$SHARDQ" "$T/zip.pt" "$T/out.npy"
# a step file of a directory trace
mkdir -p "$T/ptdir" && cp -r "$T/tr/." "$T/ptdir/"
cp "$T/zip.pt" "$T/ptdir/step-000002/grads-w01.safetensors"
expect_fail_with 1 "step-000002/grads-w01.safetensors: this is a PyTorch checkpoint" \
  "$SHARDQ" trace info "$T/ptdir"

# usage errors
expect_fail_with 2 "unknown command 'inof'" "$SHARDQ" trace inof "$T/tr"
expect_fail_with 2 "expected one PATH" "$SHARDQ" trace info
ok "trace --help" "$SHARDQ" trace --help
ok "trace info --help" "$SHARDQ" trace info --help
ok "trace synth --help" "$SHARDQ" trace synth --help

finish
