# cli_demo_resume.sh -- `shardq demo` is never silently wrong and always
# resumes:
#
# - other options in the same directory are another configuration: a demo
#   run there with --steps 8 after --steps 4 captures and trains anew and
#   prints and reports what a fresh --steps 8 demo does;
# - a demo killed (SIGKILL, with every process it started) at random moments
#   in every phase and run again each time ends complete, with the same
#   tables as a demo never interrupted. Each chain of kills takes one seed:
#   it kills the demo once in phase 1 (as soon as the capture has written a
#   step: a trace cut short), then once in each of phases 2 to 6, at a
#   random moment within that phase's length in the uninterrupted run, and
#   finally lets it finish.
#
# What is compared, table by table (runs are matched by their key, the bench
# and model runs by their kind, and the output directory's path is replaced
# by OUT): every column of the database's tables but the measurements and the
# bookkeeping of a process -- run ids, pids, host, start and end times, the
# seconds of a step or a tensor, the timings table's seconds and GB/s, and the
# bench's GB/s (a bench run killed and run again measures again); and every
# table of report.md but its run-id columns ("runs", "run") and the bench's
# throughput columns. A run of a demo killed while it ran a bench or the cost
# model stays behind (those commands take no --key, so nothing deletes it),
# marked failed as interrupted by the next run that begins; only runs that
# are done are compared, and any other run must be such a bench or model run,
# never one still 'running'.
#
# SHARDQ_TEST_KILLS sets the number of chains (default 3; 1 under a
# sanitizer build, ASAN_OPTIONS set, where a demo is several times slower):
# every chain kills in every phase.

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
: "${SHARDQ:=${SHARDQ_BUILDDIR:-$SHARDQ_SRCDIR}/src/shardq}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
cli_env
if test -n "${SHARDQ_TEST_KILLS:-}"; then
  kills=$SHARDQ_TEST_KILLS
elif test -n "${ASAN_OPTIONS:-}"; then
  kills=1
else
  kills=3
fi

for i in $(seq 1 200); do
  echo "line $i: the quick brown fox jumps over the lazy dog; sharded data parallel training"
done >"$T/corpus.txt"

# The driver: runs demos, kills them, and dumps what they stored.
cat >"$T/drive.py" <<'EOF'
import glob, json, os, random, re, signal, sqlite3, subprocess, sys, time

SHARDQ, CORPUS = os.environ["SHARDQ"], os.environ["CORPUS"]

def args(out, steps):
    return [SHARDQ, "demo", "--tiny", "--steps", str(steps), "--corpus", CORPUS, "--out", out]

def fill(pid):
    """Fills the pipe of process pid's output, through a descriptor of its own
    (non-blocking: the process's stay as they are)."""
    fd = os.open("/proc/%d/fd/1" % pid, os.O_WRONLY | os.O_NONBLOCK)
    for n in (65536, 1):
        try:
            while True:
                os.write(fd, b"\0" * n)
        except BlockingIOError:
            pass
    os.close(fd)

def run(out, steps, kill_phase=0, delay=0.0, log=None):
    """Runs a demo in its own process group; with kill_phase, kills the group
    delay seconds after the phase's line (phase 1: once the capture wrote a
    step). Returns (exit status, phase it was in when killed, seconds at which
    each phase began, whether the trace was cut short).

    In phase 1 the pipe of the demo's output is filled up (NULs, dropped when
    read) at the phase's line, and not read until the kill: the capture's
    training blocks at its first line after that, "step N" (at each
    evaluation), which it prints before its last step has finished the trace
    (manifest.json); so the kill, however late, finds the trace cut short,
    unless this process saw nothing of the phase's line until the capture,
    which measures sgemm for 0.3 s before it trains, had trained to the end."""
    p = subprocess.Popen(args(out, steps), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True)
    t0, starts, phase, partial, text = time.time(), {}, 0, False, []
    for raw in p.stdout:
        line = raw.decode(errors="replace").replace("\0", "")
        text.append(line)
        m = re.match(r"\[([1-6])/6 ", line)
        if m:
            phase = int(m.group(1))
            starts[phase] = time.time() - t0
        if kill_phase and phase == kill_phase:
            if kill_phase == 1:
                fill(p.pid)
                end = time.time() + 120
                while p.poll() is None and not glob.glob(out + "/trace*/step-*"):
                    if time.time() > end:
                        os.killpg(p.pid, signal.SIGKILL)
                        raise AssertionError("phase 1: no step captured in two minutes")
                    time.sleep(0.005)
            time.sleep(delay)
            os.killpg(p.pid, signal.SIGKILL)
            partial = bool(glob.glob(out + "/trace*/step-*")) and \
                not glob.glob(out + "/trace*/manifest.json")
            for raw in p.stdout:  # what it printed before it died
                line = raw.decode(errors="replace").replace("\0", "")
                text.append(line)
                m = re.match(r"\[([1-6])/6 ", line)
                if m:
                    phase = int(m.group(1))
            break
    rc = p.wait()
    starts["end"] = time.time() - t0
    if log:
        open(log, "w").write("".join(text))
    return rc, phase, starts, partial

def md_tables(path, out):
    """report.md's tables without run ids and measured throughputs, rows sorted."""
    skip = {"runs", "run", "GB/s", "std GB/s", "copy GB/s", "% of copy"}
    tables, cur = [], None
    for line in open(path):
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cur is None:
                cur = {"head": cells, "rows": []}
                tables.append(cur)
            elif not set("".join(cells)) <= set("-:"):
                cur["rows"].append(cells)
        else:
            cur = None
    for t in tables:
        keep = [i for i, h in enumerate(t["head"]) if h not in skip]
        t["head"] = [t["head"][i] for i in keep]
        t["rows"] = sorted([r[i].replace(out, "OUT") for i in keep] for r in t["rows"])
    return tables

# the columns that are measurements or a process's bookkeeping
SKIP = {"runs": {"id", "host", "pid", "pid_start", "boot_id", "heartbeat", "started", "ended"},
        "step_metrics": {"seconds"}, "tensor_stats": {"seconds"},
        "train_steps": {"seconds"}, "timings": {"seconds", "gb_per_s"},
        "bench_results": {"gb_per_s", "gb_per_s_std", "copy_gb_per_s"}}

def db_tables(path, out):
    c = sqlite3.connect(path)
    name = {}
    # a bench run whose figures stayed noisy (a busy machine) is superseded:
    # the demo measures again, and only the newest done bench run counts
    last_bench = c.execute("SELECT max(id) FROM runs WHERE kind = 'bench' AND status = 'done'").fetchone()[0]
    for rid, kind, key, status in c.execute("SELECT id, kind, key, status FROM runs"):
        if status == "done" and kind == "bench" and rid != last_bench:
            continue
        if status == "done":
            name[rid] = (key or kind).replace(out, "OUT")
        elif kind not in ("bench", "model") or status == "running":
            raise AssertionError("run %d (%s) is %s" % (rid, key, status))
    dump = {}
    tables = [r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for t in sorted(tables):
        cols = [r[1] for r in c.execute("PRAGMA table_info(%s)" % t)]
        idcol = "id" if t == "runs" else "run_id" if "run_id" in cols else None
        if idcol is None:
            continue
        keep = [k for k in cols if k not in SKIP.get(t, set()) and k != idcol]
        rows = []
        for r in c.execute("SELECT %s, %s FROM %s" % (idcol, ", ".join(keep), t)):
            if r[0] in name:
                rows.append([name[r[0]]] + [v.replace(out, "OUT") if isinstance(v, str) else v
                                            for v in r[1:]])
        dump[t] = sorted(rows, key=repr)
    return dump

def lines(log):
    """The error and convergence lines (the scale line too: the cost model
    computes, it measures nothing)."""
    text = open(log).read()
    return text[text.index("The three lines"):text.index("\nreport:")]

def snapshot(out, log):
    return {"db": db_tables(out + "/shardq.db", out),
            "report": md_tables(out + "/report/report.md", out), "lines": lines(log)}

def compare(ref, got, what):
    for part in ("lines", "report", "db"):
        if part not in got:
            continue
        a, b = ref[part], got[part]
        if part == "db":
            for t in sorted(set(a) | set(b)):
                if a.get(t) != b.get(t):
                    x, y = a.get(t, []), b.get(t, [])
                    diff = [r for r in x if r not in y][:2] + [r for r in y if r not in x][:2]
                    raise AssertionError("%s: table %s differs (%d rows, %d rows): %s"
                                         % (what, t, len(x), len(y), diff))
        elif a != b:
            raise AssertionError("%s: %s differs:\n%s\n---\n%s" % (what, part, a, b))

cmd = sys.argv[1]
if cmd == "ref":
    out, steps, log = sys.argv[2], int(sys.argv[3]), sys.argv[4]
    rc, _, starts, _ = run(out, steps, log=log)
    assert rc == 0, "exit status %d" % rc
    json.dump({"starts": starts, "snap": snapshot(out, log)}, open(out + ".json", "w"))
elif cmd == "same":  # a demo's output directory against the reference
    ref, out, log = json.load(open(sys.argv[2])), sys.argv[3], sys.argv[4]
    got = snapshot(out, log)
    if sys.argv[5:] == ["report"]:  # a directory with other configurations too
        del got["db"], ref["snap"]["db"]
    compare(ref["snap"], got, out)
elif cmd == "chain":
    ref, out, steps, seed = json.load(open(sys.argv[2])), sys.argv[3], int(sys.argv[4]), \
        int(sys.argv[5])
    st, rnd = ref["starts"], random.Random(seed)
    for k in range(1, 7):
        length = st[str(k + 1) if k < 6 else "end"] - st[str(k)]
        delay = 0.0 if k == 1 else rnd.uniform(0, 0.9 * length)
        rc, landed, _, partial = run(out, steps, k, delay, log=out + ".kill%d.log" % k)
        print("# seed %d: killed %.2f s into phase %d (length %.2f s): it was in phase %d%s"
              % (seed, delay, k, length, landed, ", the trace cut short" if partial else ""))
        if rc not in (0, -signal.SIGKILL):
            tail = open(out + ".kill%d.log" % k).read().splitlines()[-4:]
            raise AssertionError("exit status %d:\n%s" % (rc, "\n".join(tail)))
        if k == 1:
            assert partial, "the kill in phase 1 did not leave a trace cut short"
    rc, _, _, _ = run(out, steps, log=out + ".log")
    if rc != 0:
        tail = open(out + ".log").read().splitlines()[-4:]
        raise AssertionError("the last run: exit status %d:\n%s" % (rc, "\n".join(tail)))
    compare(ref["snap"], snapshot(out, out + ".log"), out)
EOF
drive() { SHARDQ="$SHARDQ" CORPUS="$T/corpus.txt" python3 "$T/drive.py" "$@"; }

# the reference: a demo never interrupted
ok "a demo never interrupted (the reference)" drive ref "$T/ref" 8 "$T/ref.log"

# other options in the same directory: a new configuration, not the old runs
ok "demo --steps 4" "$SHARDQ" demo --tiny --steps 4 --corpus "$T/corpus.txt" --out "$T/opt"
ok "then --steps 8 in the same directory" "$SHARDQ" demo --tiny --steps 8 --corpus "$T/corpus.txt" \
  --out "$T/opt"
cat "$sq_tmp/out" "$sq_tmp/err" >"$T/opt.log"
ok "... captures anew: it reuses no run of the other configuration" sh -c \
  '! grep -q "reusing capture\|already done: run" "$0" &&
   grep -q "42 configurations, 0 already done" "$0" &&
   grep -q "5 configurations, 0 already done" "$0"' "$T/opt.log"
ok "... and prints and reports what a fresh --steps 8 demo does" \
  drive same "$T/ref.json" "$T/opt" "$T/opt.log" report
ok "the trace of each configuration is its own" sh -c \
  'test "$(ls -d "$0"/trace-* | wc -l)" -eq 2 && test -L "$0/trace"' "$T/opt"
ok "back to --steps 4: everything reused" "$SHARDQ" demo --tiny --steps 4 \
  --corpus "$T/corpus.txt" --out "$T/opt"
cat "$sq_tmp/out" "$sq_tmp/err" >"$T/back.log"
# (a bench whose figures stayed noisy on a busy machine is measured again,
# and the demo says why, instead of reusing it)
ok "... said so" sh -c 'grep -q "^reusing capture run 1 (same options, same corpus)" "$0" &&
  grep -q "42 of 42 configurations done (0 now, 42 before)" "$0" &&
  { grep -q "^reusing bench run" "$0" ||
    grep -q "^bench run [0-9]* has figures that stayed noisy (a busy machine): measuring again" "$0"; } &&
  grep -q "^reusing model run" "$0"' "$T/back.log"

# kills in every phase, one chain per seed
for seed in $(seq 1 "$kills"); do
  ok "seed $seed: killed in every phase, run again each time, ends like the reference" \
    drive chain "$T/ref.json" "$T/k$seed" 8 "$seed"
  sed -n 's/^# /# /p' "$sq_tmp/out"
done

finish
