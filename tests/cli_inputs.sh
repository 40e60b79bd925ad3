# cli_inputs.sh -- every input a command reads must be a regular file: a FIFO
# without a writer (which once blocked open() for ever) and /dev/zero (which
# once was read until memory ran out) are refused at once, naming the file;
# standard input may be a pipe, and a pipe that never ends is not read to its
# end; duplicate keys in a trace's manifest are refused. Each command runs
# under `timeout 10`, so that a regression fails instead of hanging.

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
: "${SHARDQ:=${SHARDQ_BUILDDIR:-$SHARDQ_SRCDIR}/src/shardq}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
T=$TEST_TMPDIR
S=$SHARDQ
export SHARDQ_PROGRESS=0
export SHARDQ_DB="$T/default.db"

mkfifo "$T/fifo" || skip_all "mkfifo is not available"
FIFO="not a regular file (a FIFO)"
DEV="not a regular file (a character device)"

# A good .npy and safetensors file, and a small trace.
pyrun "a .npy file" '
import struct
h = "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (300,), }".replace("\"", chr(39))
h += " " * (118 - len(h)) + "\n"
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode()
                              + struct.pack("<300f", *[i / 300 - 0.5 for i in range(300)]))' "$T/x.npy"
ok "a safetensors file" "$S" codec encode "$T/x.npy" "$T/x.st"
ok "a trace" "$S" trace synth --steps 2 --workers 2 --topology 1x2 --params "a:40,b:8x8" "$T/tr"

# ---------------------------------------------------------------------------
# Named inputs: a FIFO without a writer and a device
# ---------------------------------------------------------------------------

for bad in "$T/fifo:$FIFO" "/dev/zero:$DEV"; do
  input=${bad%%:*} # not f: lib.sh loops over f
  why=${bad#*:}
  expect_fail_with 1 "$input: $why" timeout 10 "$S" codec encode "$input" "$T/o.st"
  expect_fail_with 1 "$input: $why" timeout 10 "$S" codec encode --raw "$input" "$T/o.st"
  expect_fail_with 1 "$input: $why" timeout 10 "$S" codec stats "$input"
  expect_fail_with 1 "$input: $why" timeout 10 "$S" codec stats --raw "$input"
  expect_fail_with 1 "$input: $why" timeout 10 "$S" codec decode "$input" "$T/o.npy"
  expect_fail_with 1 "$input: $why" timeout 10 "$S" trace info "$input"
  expect_fail_with 1 "$input: $why" timeout 10 "$S" replay --no-db "$input"
  expect_fail_with 1 "$input: not a regular file or a directory" \
    timeout 10 "$S" train --corpus "$input" --no-db
  expect_fail_with 2 "$input: $why" timeout 10 "$S" model --platform "$input"
  expect_fail_with 2 "$input: $why" timeout 10 "$S" model --model "$input"
done
ok "nothing was written" test ! -e "$T/o.st" -a ! -e "$T/o.npy"

# A trace whose manifest or one of whose files is a FIFO.
cp -r "$T/tr" "$T/trm"
rm "$T/trm/manifest.json"
mkfifo "$T/trm/manifest.json"
expect_fail_with 1 "manifest.json: $FIFO" timeout 10 "$S" trace info "$T/trm"
expect_fail_with 1 "manifest.json: $FIFO" timeout 10 "$S" replay --no-db "$T/trm"
cp -r "$T/tr" "$T/trf"
rm "$T/trf/step-000002/grads-w01.safetensors"
mkfifo "$T/trf/step-000002/grads-w01.safetensors"
expect_fail_with 1 "step-000002/grads-w01.safetensors: $FIFO" timeout 10 "$S" trace info "$T/trf"
expect_fail_with 1 "step-000002/grads-w01.safetensors: $FIFO" timeout 10 "$S" replay --no-db "$T/trf"

# ---------------------------------------------------------------------------
# Standard input: a pipe is fine, a device is not, an endless pipe is cut
# ---------------------------------------------------------------------------

ok "encode from a pipe" sh -c 'cat "$1" | timeout 10 "$0" codec encode - "$2"' "$S" "$T/x.npy" "$T/p.st"
ok "... the same file as by name" cmp "$T/p.st" "$T/x.st"
ok "decode from a pipe" sh -c 'cat "$1" | timeout 10 "$0" codec decode - "$2"' "$S" "$T/x.st" "$T/p.npy"
ok "encode from a redirected file" sh -c 'timeout 10 "$0" codec encode - "$2" <"$1"' "$S" "$T/x.npy" "$T/r.st"
ok "... the same file as by name" cmp "$T/r.st" "$T/x.st"
expect_fail_with 1 "/dev/stdin: $DEV: standard input must be a file or a pipe" \
  sh -c 'timeout 10 "$0" codec stats - </dev/zero' "$S"
expect_fail_with 1 "/dev/stdin: $DEV" sh -c 'timeout 10 "$0" codec stats --raw - </dev/zero' "$S"
expect_fail_with 1 "/dev/stdin: $DEV" sh -c 'timeout 10 "$0" codec decode - "$1" </dev/zero' "$S" "$T/o.npy"
expect_fail_with 1 "more than 1048576 bytes of trailing data" \
  sh -c 'cat "$1" /dev/zero | timeout 10 "$0" codec stats -' "$S" "$T/x.npy"
expect_fail_with 1 "on belong to no tensor" \
  sh -c 'cat "$1" /dev/zero | timeout 10 "$0" codec decode - "$2"' "$S" "$T/x.st" "$T/o.npy"
ok "nothing was written" test ! -e "$T/o.npy"

# ---------------------------------------------------------------------------
# Duplicate keys in a manifest
# ---------------------------------------------------------------------------

cp -r "$T/tr" "$T/trd"
pyrun "a manifest with 'steps' twice" '
f = sys.argv[1]
text = open(f).read()
assert text.count("\"steps\"") == 1, text
open(f, "w").write(text.replace("\"steps\"", "\"steps\": [1], \"steps\"", 1))' "$T/trd/manifest.json"
expect_fail_with 1 "manifest.json: key 'steps' given twice" "$S" trace info "$T/trd"
expect_fail_with 1 "manifest.json: key 'steps' given twice" "$S" replay --no-db "$T/trd"
expect_fail_with 1 "manifest.json: field 'weight': unknown" sh -c \
  'cp -r "$1/tr" "$1/trk" && sed -i "s/\"weights\"/\"weight\"/" "$1/trk/manifest.json" &&
   "$0" trace info "$1/trk"' "$S" "$T"

# ---------------------------------------------------------------------------
# A trace of empty tensors only: nothing to replay, not a perfect score
# ---------------------------------------------------------------------------

ok "a trace of empty tensors" "$S" trace synth --steps 2 --workers 2 --params "c:0x5,d:0" "$T/tre"
ok "trace info shows it" "$S" trace info "$T/tre"
expect_fail_with 1 "nothing to replay: every tensor of the trace has 0 elements" \
  "$S" replay --no-db "$T/tre"

finish
