#!/bin/bash
# experiments/results.sh -- docs/results.md from fresh measurements: the one
# command that updates the manual's measured figures, so that no figure is
# ever edited by hand. Every table gets a header saying the version, the
# machine, the load, the date and the command as a user would type it;
# figures that depend on the machine stand beside the bound measured in the
# same run (memcpy, the reader alone, PyTorch, the link's rate).
#
#   experiments/results.sh [--shardq PATH] [--out FILE] [--only TABLE]...
#
# Run it from anywhere; it writes into a scratch directory and moves the new
# file into place only when every table it measured succeeded.
set -Eeuo pipefail
export LC_ALL=C

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)

# The tables, in the order of the file: NAME|HEADING
TABLES=(
  "demo|Demo"
  "kernels|Codec kernels"
  "replay|Replay throughput"
  "torch|Training against PyTorch"
  "table1|SDP4Bit's Table 1 at small scale"
  "compressors|Compressors compared"
  "mpi|MPI collectives"
  "shaped|Two nodes on a shaped link"
  "cost|Cost model against published rows"
  "cuda|CUDA"
)

usage() {
  cat <<EOF
usage: experiments/results.sh [--shardq PATH] [--out FILE] [--only TABLE]...

Measures every table of docs/results.md afresh and rewrites the file (about
twenty minutes on two cores). With --only, measures only the tables named
and replaces just their sections in the existing file.

options:
  --shardq PATH   the shardq command (default: src/shardq of this tree,
                  else shardq on PATH)
  --out FILE      the file to write (default docs/results.md of this tree)
  --only TABLE    one table, by name or heading (repeatable): $(for t in "${TABLES[@]}"; do printf '%s ' "${t%%|*}"; done)
  -h, --help      this text

The MPI tables run Open MPI's mpirun (as root with OMPI_ALLOW_RUN_AS_ROOT);
the shaped link needs root (network namespaces and tc); CUDA needs a GPU.
A table whose needs are not met says so in its section.
EOF
}

shardq=
out=$top/docs/results.md
only=()
while test $# -gt 0; do
  case $1 in
    --shardq) shardq=${2:?--shardq needs a path}; shift 2 ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    --only) only+=("${2:?--only needs a table}"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "results.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
if test -z "$shardq"; then
  if test -x "$top/src/shardq"; then shardq=$top/src/shardq
  else shardq=$(command -v shardq) || { echo "results.sh: no shardq (build it, or --shardq PATH)" >&2; exit 1; }
  fi
fi
test -x "$shardq" || { echo "results.sh: $shardq is not an executable" >&2; exit 1; }
python=${SHARDQ_PYTHON:-$(command -v /usr/bin/python3 || command -v python3)}

# The names the user asked for, checked against the list.
selected=()
for want in "${only[@]+"${only[@]}"}"; do
  hit=
  for t in "${TABLES[@]}"; do
    if test "$want" = "${t%%|*}" || test "$want" = "${t#*|}"; then hit=${t%%|*}; fi
  done
  test -n "$hit" || { echo "results.sh: no table '$want' (tables: $(for t in "${TABLES[@]}"; do printf '%s ' "${t%%|*}"; done))" >&2; exit 2; }
  selected+=("$hit")
done
if test ${#selected[@]} -gt 0 && ! test -f "$out"; then
  echo "results.sh: --only replaces sections of $out, which does not exist" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/shardq-results.XXXXXX")
trap 'rm -rf "$work"' EXIT
if test "$(id -u)" -eq 0; then   # mpirun refuses root unless told
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export SHARDQ="$shardq"

version=$("$shardq" --version | sed 1q)
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | sed 1q)
cores=$(nproc)
mem=$(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)

# header COMMAND...: the lines above a table (one command per argument)
header() {
  printf -- '- version: %s\n' "$version"
  printf -- '- machine: %s, %s cores, %s; load average %s at the start\n' \
    "${cpu:-unknown CPU}" "$cores" "$mem" "$(cut -d' ' -f1-3 /proc/loadavg)"
  printf -- '- date: %s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
  printf -- '- command:\n\n```text\n'
  printf '%s\n' "$@"
  printf '```\n\n'
}

# fence FILE: a file's text as a block that is not run
fence() { printf '```text\n'; cat "$1"; printf '```\n'; }

# The copy bound of this moment: memcpy of 16 MB with one thread and with
# every core, from the bench's own measurement.
copy_bound() {
  "$shardq" bench --ops hadamard --sizes 16 --threads "1,$cores" --json >"$work/copy.json"
  "$python" - "$work/copy.json" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(" ".join("%.2f" % r["copy_gbps"] for r in rows))
EOF
}

# ---------------------------------------------------------------- tables --
t_demo() {
  header "shardq demo --out DIR"
  local t0 t1
  t0=$(date +%s)
  "$shardq" demo --out "$work/demo" >"$work/demo.out" 2>"$work/demo.err"
  t1=$(date +%s)
  sed -n '/^The three lines that matter:/,/^  scale:/p' "$work/demo.out" >"$work/three"
  if ! test -s "$work/three"; then echo "results.sh: the demo printed no three lines" >&2; false; fi
  fence "$work/three"
  printf '\nThe whole demo took %d s on %s cores (ten training runs are most of it).\n' \
    "$((t1 - t0))" "$cores"
}

# bench_table FILE: the rows of `shardq bench --json` as a Markdown table
bench_table() {
  "$python" - "$1" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("| op | MB | threads | GB/s | +- | copy GB/s | % of copy | noisy |")
print("|---|---:|---:|---:|---:|---:|---:|---|")
for r in rows:
    print("| %s | %d | %d | %.2f | %.2f | %.2f | %.1f%% | %s |" % (
        r["op"], r["bytes_in"] // (1 << 20), r["threads"], r["gbps"], r["gbps_std"],
        r["copy_gbps"], r["percent_of_copy"], "yes" if r["noisy"] or r["copy_noisy"] else ""))
EOF
}

t_kernels() {
  header "shardq bench --sizes 16,64 --threads 1,$cores --json"
  "$shardq" bench --sizes 16,64 --threads "1,$cores" --json >"$work/bench.json"
  printf 'GB/s = (bytes read + bytes written) / time, the median of timed batches, beside memcpy of the\n'
  printf 'same size with the same threads measured in the same run; **%% of copy** is the figure that\n'
  printf 'carries from machine to machine. A figure marked noisy spread over 25%% in three tries.\n\n'
  bench_table "$work/bench.json"
}

t_replay() {
  local params=wte:2048x1024,h.fc:1024x2048,h.proj:2048x1024,h.ln:1024
  header "shardq trace synth --params $params --steps 3 --workers 8 --topology 2x4 TRACE" \
    "shardq replay --bound --no-db --scheme SCHEME TRACE     # SCHEME: baseline, sdp4bit, zeropp"
  "$shardq" trace synth --params "$params" --steps 3 --workers 8 --topology 2x4 "$work/trace" >/dev/null
  printf 'The replay reads the trace (8 gradient files and the weights per step, fp32) and runs the\n'
  printf "scheme's collectives; the bound is the reader alone on the same files with the same threads,\n"
  printf 'timed right after (`--bound`).\n\n'
  printf '| scheme | trace GB | replay GB/s | reader alone GB/s | share of the reader |\n|---|---:|---:|---:|---:|\n'
  local s
  for s in baseline sdp4bit zeropp; do
    "$shardq" replay --bound --no-db --scheme "$s" "$work/trace" >"$work/replay.$s" 2>&1
    awk -v s="$s" '
      /GB of trace read/ { match($0, /[0-9.]+ GB of trace read \([0-9.]+ GB\/s\)/)
        split(substr($0, RSTART, RLENGTH), a, "[ (]+"); gb = a[1]; rate = a[6] }
      /reader alone/ { match($0, /\([0-9.]+ GB\/s/); r = substr($0, RSTART + 1, RLENGTH - 6)
        match($0, /at [0-9.]+%/); p = substr($0, RSTART + 3, RLENGTH - 3) }
      END { if (rate == "" || r == "") exit 1
        printf "| %s | %s | %s | %s | %s |\n", s, gb, rate, r, p }' "$work/replay.$s"
  done
}

t_torch() {
  header "experiments/train-vs-torch.sh --steps 30 --repeats 2"
  "$here/train-vs-torch.sh" --steps 30 --repeats 2 --shardq "$shardq" --python "$python" \
    >"$work/torch.out" 2>&1
  printf 'shardq train (its sharded world emulated, 2 x 4 workers) beside the same GPT in PyTorch,\n'
  printf "one process, the same threads, global batch and AdamW; the speedup is the figure to compare.\n\n"
  fence "$work/torch.out"
}

t_table1() {
  # The recipe's short grid, shortened: 100 steps, one seed. The whole
  # experiment (400 and 1600 steps, two seeds) is
  # `shardq sweep experiments/table1-convergence.ini`, hours on two cores.
  header "shardq sweep --db DB table1-short.ini      # table1-convergence.ini's [grid short] at 100 steps, seed 1" \
    "shardq db export --db DB QUERY             # the last validation loss of each run"
  awk '/^\[grid long\]/ { exit } { print }' "$here/table1-convergence.ini" |
    sed 's/^seeds = .*/seeds = 1/; s/^steps = .*/steps = 100/; s/^warmup = .*/warmup = 10/; s/^eval-every = .*/eval-every = 50/' \
    >"$work/table1-short.ini"
  "$shardq" sweep -q --db "$work/table1.db" "$work/table1-short.ini" >/dev/null
  "$shardq" db export --db "$work/table1.db" \
    "SELECT r.preset, s.step, s.val_loss FROM runs r JOIN train_steps s ON s.run_id = r.id
     WHERE s.val_loss IS NOT NULL AND s.step = (SELECT max(step) FROM train_steps t WHERE t.run_id = r.id AND t.val_loss IS NOT NULL)
     ORDER BY r.id" >"$work/table1.csv"
  printf "SDP4Bit's Table 1 orders the schemes by final validation loss (baseline, then qwd and sdp4bit\n"
  printf 'within noise, qw and the 4-bit gradient paths above). Here the recipe runs at 100 steps and one\n'
  printf 'seed (the whole recipe takes hours on two cores); the difference to the baseline is the figure.\n\n'
  "$python" - "$work/table1.csv" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
base = next(float(r["val_loss"]) for r in rows if r["preset"] == "baseline")
print("| preset | step | validation loss | vs baseline |")
print("|---|---:|---:|---:|")
for r in rows:
    v = float(r["val_loss"])
    print("| %s | %s | %.4f | %+.2f%% |" % (r["preset"], r["step"], v, 100 * (v - base) / base))
EOF
}

t_compressors() {
  header "experiments/compressors.sh --out DIR --steps 60 --trace-steps 20"
  (cd "$work" && bash "$here/compressors.sh" --out comp --steps 60 --trace-steps 20 >comp.log 2>&1)
  if ! test -s "$work/comp/table.md"; then cat "$work/comp.log" >&2; false; fi
  printf 'Every compressor on the gradient path of the default GPT on 2 x 4 workers: the error of the\n'
  printf 'reduced gradient on a captured trace, and the losses of a training run of 60 steps, at the bits\n'
  printf 'per parameter each worker sends ([training](training.md#the-experiment-the-compressors-compared)).\n\n'
  cat "$work/comp/table.md"
}

t_mpi() {
  if ! command -v mpirun >/dev/null; then
    header "mpirun -np 4 shardq netbench --workers 2x2 --max-bytes 16M --json"
    printf 'Not measured on this machine: no mpirun.\n'
    return 0
  fi
  header "mpirun -np 4 shardq netbench --workers 2x2 --levels intra,inter,all --max-bytes 16M --no-db --json"
  local copy
  copy=$(copy_bound)
  mpirun --oversubscribe -np 4 "$shardq" netbench --workers 2x2 --levels intra,inter,all \
    --max-bytes 16M --no-db --json >"$work/netbench.json" 2>"$work/netbench.err"
  printf "MPI's own collectives between 4 ranks of this machine (2 x 2: the \"nodes\" share the memory),\n"
  printf 'bus bandwidth at the largest size beside memcpy measured in the same run (%s GB/s with 1 and\n' "${copy% *}"
  printf '%s threads). These are the rates `shardq netbench` writes into a platform file.\n\n' "$cores"
  "$python" - "$work/netbench.json" "${copy%% *}" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
copy = float(sys.argv[2])
best = {}
for r in d["results"]:   # the largest size of each level and collective
    key = (r["level"], r["op"])
    if key not in best or r["bytes"] > best[key]["bytes"]:
        best[key] = r
print("| level | collective | bytes | time us | bus GB/s | % of memcpy (1 thread) |")
print("|---|---|---:|---:|---:|---:|")
for (lvl, op), r in sorted(best.items()):
    bw = r["busbw_gb_s"]
    print("| %s | %s | %d | %.1f | %.3f | %.1f%% |" % (lvl, op, r["bytes"], r["time_us"], bw,
                                                     100 * bw / copy))
EOF
}

t_shaped() {
  header "experiments/mpi-namespaces.sh --out DIR --steps 10 --trace-steps 10 --rate 1gbit --schemes baseline,sdp4bit"
  if test "$(id -u)" -ne 0 || ! command -v mpirun >/dev/null || ! command -v tc >/dev/null; then
    printf 'Not measured on this machine: it needs root, mpirun and tc (network namespaces).\n'
    return 0
  fi
  (cd "$work" && bash "$here/mpi-namespaces.sh" --out ns --steps 10 --trace-steps 10 --rate 1gbit \
    --schemes baseline,sdp4bit >ns.log 2>&1)
  printf 'Two network namespaces of 4 ranks each, joined by a veth pair shaped to 1 Gbit/s by tc, the\n'
  printf 'baseline and sdp4bit trained on them under mpirun; the predicted time is the cost model on the\n'
  printf 'platform netbench measured on the same link. The link rate is the bound.\n\n'
  # the script ends with its table (times in ms per step)
  sed -n '/^| scheme/,/^[^|]/p' "$work/ns.log" | grep '^|' >"$work/ns.table"
  if ! test -s "$work/ns.table"; then tail -30 "$work/ns.log" >&2; false; fi
  printf 'Times in ms per step.\n\n'
  cat "$work/ns.table"
}

t_cost() {
  header "shardq model --validate sdp4bit-a100"
  "$shardq" model --validate sdp4bit-a100 >"$work/cost.out"
  printf "The model's speedup of sdp4bit over the baseline for SDP4Bit's A100 rows, beside the paper's.\n"
  printf 'Deterministic: these figures are the same on every machine.\n\n'
  fence "$work/cost.out"
}

t_cuda() {
  header "shardq bench --device cuda --json"
  if ! nvidia-smi -L >/dev/null 2>&1; then
    printf 'Not measured on this machine: no GPU (nvidia-smi lists none). On a GPU the command above\n'
    printf 'measures the CUDA kernels beside a device-to-device copy of the same size.\n'
    return 0
  fi
  "$shardq" bench --device cuda --json >"$work/cuda.json"
  printf 'The CUDA kernels beside a device-to-device copy of the same size (the copy column).\n\n'
  bench_table "$work/cuda.json"
}

# ------------------------------------------------------------ the file --
# A failed command anywhere ends the run (set -e: the table functions are
# never called in a condition, where it would not apply), the file untouched.
trap 'echo "results.sh: a measurement failed (line $LINENO); $out is unchanged" >&2' ERR
run_table() { # NAME HEADING: the section into $work/sec-NAME.md
  local t0=$SECONDS
  printf 'results.sh: %s ...\n' "$2" >&2
  printf '## %s\n\n' "$2" >"$work/sec-$1.md"
  "t_$1" >>"$work/sec-$1.md"
  printf '\n' >>"$work/sec-$1.md"
  printf 'results.sh: %s done in %d s\n' "$2" "$((SECONDS - t0))" >&2
}

wanted() { # NAME: whether this run measures the table
  test ${#selected[@]} -eq 0 && return 0
  local s
  for s in "${selected[@]}"; do test "$s" = "$1" && return 0; done
  return 1
}

for t in "${TABLES[@]}"; do
  if wanted "${t%%|*}"; then run_table "${t%%|*}" "${t#*|}"; fi
done

if test ${#selected[@]} -eq 0; then
  {
    printf '# Measured results\n\n'
    printf 'Every figure of this file was measured by one command, `experiments/results.sh` (its\n'
    printf '`--only TABLE` remeasures one table); nothing here is edited by hand. Above each table: the\n'
    printf 'version, the machine, its load, the date and the command. Figures that depend on the machine\n'
    printf 'stand beside the bound measured in the same run (memcpy, the reader alone, PyTorch, the link):\n'
    printf 'the ratio is what carries to another machine. The [manual](index.md) explains each experiment.\n\n'
    for t in "${TABLES[@]}"; do cat "$work/sec-${t%%|*}.md"; done
  } >"$work/results.md"
else
  # Replace the selected sections of the existing file, keep the rest.
  SQ_TABLES=$(printf '%s\n' "${TABLES[@]}") "$python" - "$out" "$work" "${selected[@]}" >"$work/results.md" <<'EOF'
import os, re, sys
path, work, names = sys.argv[1], sys.argv[2], sys.argv[3:]
tables = dict(l.split("|", 1) for l in os.environ["SQ_TABLES"].split("\n"))
text = open(path).read()
parts = re.split(r"(?m)^(?=## )", text)
headings = {p.split("\n", 1)[0][3:].strip(): i for i, p in enumerate(parts) if p.startswith("## ")}
for n in names:
    h = tables[n]
    if h not in headings:
        sys.exit("results.sh: %s has no section '## %s'" % (path, h))
    parts[headings[h]] = open(os.path.join(work, "sec-%s.md" % n)).read()
sys.stdout.write("".join(parts))
EOF
fi
# drop a trailing blank line, then move into place
sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' "$work/results.md" >"$out.new.$$"
mv "$out.new.$$" "$out"
echo "results.sh: wrote $out" >&2
