# cli_capture.sh -- `shardq train --capture` and a run's --key: a capture
# killed half way is taken up by the same command run again (its trace names
# the key that wrote it), a directory of anything else is never written into
# nor emptied, a run already done under its key is not taken for a trace that
# is not there, and --capture-every alone is an error, not ignored.

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
: "${SHARDQ:=${SHARDQ_BUILDDIR:-$SHARDQ_SRCDIR}/src/shardq}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
cli_env

for i in $(seq 1 200); do
  echo "line $i: the quick brown fox jumps over the lazy dog; sharded data parallel training"
done >"$T/corpus.txt"
# a tiny model, so that a run takes seconds
train() {
  "$SHARDQ" train --corpus "$T/corpus.txt" --layers 1 --channels 32 --heads 2 --context 32 \
    --seq 32 --eval-seqs 8 --workers 1x2 --eval-every 0 --scheme baseline --db "$T/s.db" "$@"
}

expect_fail_with 2 "--capture-every: there is no --capture DIR to write" train --steps 4 \
  --capture-every 2 --key none

# the run under a key, and the same command again: already done
ok "train --key k1 --capture" train --steps 8 --capture-every 2 --key k1 --capture "$T/c1"
ok "its trace" "$SHARDQ" trace info "$T/c1"
pyjson "the manifest names the key that wrote it" "$T/c1/manifest.json" "
assert d['owner'] == 'k1' and len(d['id']) == 32 and d['steps'] == [0, 2, 4, 6], d"
ok "the same command again: already done" train --steps 8 --capture-every 2 --key k1 \
  --capture "$T/c1"
cp "$sq_tmp/out" "$T/again.txt"
ok "... said so" grep -q "already done: run 1" "$T/again.txt"
expect_fail_with 1 "--capture $T/elsewhere: the run of this --key is done, but its trace is not there" \
  train --steps 8 --capture-every 2 --key k1 --capture "$T/elsewhere"
rm -r "$T/c1/step-000004"
expect_fail_with 1 "step-000004/weights.safetensors: missing" train --steps 8 --capture-every 2 \
  --key k1 --capture "$T/c1"

# weights at a cadence of their own: every 4th step of a capture of every 2nd
ok "train --capture-weights-every 4" train --steps 10 --capture-every 2 \
  --capture-weights-every 4 --key kw --capture "$T/cw"
pyjson "the manifest lists the weight steps, the gradients are at every captured step" \
  "$T/cw/manifest.json" "
assert d['steps'] == [0, 2, 4, 6, 8] and d['weights'] == [0, 4, 8], d
import os
for s in d['steps']:
    step = os.path.join(os.path.dirname(sys.argv[1]), 'step-%06d' % s)
    assert os.path.exists(os.path.join(step, 'weights.safetensors')) == (s % 4 == 0), s
    assert os.path.exists(os.path.join(step, 'grads-w01.safetensors')), s"
ok "replay runs its weight path at the weight steps" "$SHARDQ" replay --no-db --json \
  --scheme qwd "$T/cw"
cp "$sq_tmp/out" "$T/cw.json"
pyjson "... two all-gathers (steps 4 and 8), five reduce-scatters" "$T/cw.json" "
assert d['steps'] == 5 and d['weight_steps'] == 3, d
assert d['weight']['n'] == 2 * d['elements'] and d['grad']['n'] == 5 * d['elements'], d"
expect_fail_with 2 "--capture-weights-every 3: expected a multiple of the capture interval 2" \
  train --steps 4 --capture-every 2 --capture-weights-every 3 --key none --capture "$T/never"
expect_fail_with 2 "--capture-weights-every: there is no --capture DIR to write" train \
  --steps 4 --capture-weights-every 2 --key none

# someone else's directory is refused, and left as it was
mkdir "$T/mine"
echo "keep me" >"$T/mine/notes.txt"
expect_fail_with 1 "mine: cannot create the trace directory: it exists and is not empty" \
  train --steps 4 --key k2 --capture "$T/mine"
ok "... and left as it was" sh -c 'test "$(ls -A "$0")" = notes.txt' "$T/mine"

# killed while it captures: the same command again starts the trace afresh
# and finishes it; another key is refused the unfinished trace.
# The training writes its lines into a pipe filled beforehand that nothing
# reads: it blocks at its first, "step 59" (--eval-every 0), which it prints
# after its last step and before it finishes the trace; so the kill finds the
# trace unfinished however fast the machine trains, or slow the test polls.
mkfifo "$T/full"
exec 3<>"$T/full"
python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK)  # its own O_NONBLOCK
for n in (65536, 1):
    try:
        while True: os.write(fd, b"x" * n)
    except BlockingIOError: pass' "$T/full"
train --steps 60 --capture-every 20 --key k3 --capture "$T/c3" >&3 2>/dev/null &
# the training's own pid, from the file its trace writer holds (a minute at most)
pid=
for _ in $(seq 1 3000); do
  test -d "$T/c3/step-000000" && pid=$(sed -n 's/^pid //p' "$T/c3/.shardq-writer") &&
    test -n "$pid" && break
  sleep 0.02
done
ok "the capture of k3 began (pid ${pid:-none}), and the training is killed while it runs" \
  kill -9 "${pid:-none}"
wait
exec 3>&-
ok "the kill left an unfinished trace of k3" sh -c 'test ! -e "$0/manifest.json" &&
  grep -qx k3 "$0/.shardq-writer" && grep -qx "pid $1" "$0/.shardq-writer"' "$T/c3" "$pid"
expect_fail_with 1 "c3: holds the unfinished trace of another writer (pid $pid, 'k3'" \
  train --steps 60 --capture-every 20 --key k4 --capture "$T/c3"
ok "the same command again resumes" train --steps 60 --capture-every 20 --key k3 \
  --capture "$T/c3"
"$SHARDQ" trace info --json "$T/c3" >"$T/c3.json"
pyjson "... and the trace is whole" "$T/c3.json" "assert d['steps'] == [0, 20, 40], d['steps']"
ok "... with no writer file left" test ! -e "$T/c3/.shardq-writer"
pyrun "one run of k3, done" '
c = sqlite3.connect(sys.argv[1])
rows = c.execute("SELECT status FROM runs WHERE key = \"k3\"").fetchall()
assert rows == [("done",)], rows
' "$T/s.db"

finish
