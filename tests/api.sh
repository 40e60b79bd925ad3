# api.sh -- the public surface of libshardq: the shared library exports the
# names its installed headers declare and nothing else, every header stands
# on its own, and programs of the world and of replay compile against an
# installed copy (make install DESTDIR=..., pkg-config), link it and compute
# what the command computes; the Python package installs against that copy
# with pip. (The manual's own examples, docs/library.md, are compiled and
# run by tests/docs.sh against the build tree.)

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
: "${SHARDQ_BUILDDIR:=$SHARDQ_SRCDIR}"
: "${SHARDQ:=$SHARDQ_BUILDDIR/src/shardq}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
T=$TEST_TMPDIR

# Only GPU tests skip: a missing tool is an error (exit 99).
need() { echo "error: $*" >&2; exit 99; }
for tool in nm readelf pkg-config make cc python3; do
  command -v $tool >/dev/null 2>&1 || need "$tool is needed"
done
so=$SHARDQ_BUILDDIR/.libs/libshardq.so
test -f "$so" || need "no shared library $so (configured with --disable-shared?)"
hdrs=$SHARDQ_SRCDIR/include/shardq

# --- exports -------------------------------------------------------------
ok "nm -D --defined-only libshardq.so" nm -D --defined-only "$so"
# name.resolver: the loader's choice between the clones of one function;
# __odr_asan.name: AddressSanitizer's marker beside each exported global
awk '$2 ~ /^[TDBRVW]$/ {print $3}' "$sq_tmp/out" | sed 's/\.resolver$//; s/^__odr_asan\.//' |
  sort -u >"$T/exports.txt"
n=$(wc -l <"$T/exports.txt")
ok "libshardq.so exports the API ($n names)" test "$n" -gt 100
undeclared=
while read -r sym; do
  grep -qw -- "$sym" "$hdrs"/*.h || undeclared="$undeclared $sym"
done <"$T/exports.txt"
ok "every exported name is declared in include/shardq/ (undeclared:${undeclared:- none})" \
  test -z "$undeclared"
# internals stay inside: the safe file writer, the uniforms of the codec's
# SR loop, the CUDA device layer
for sym in sq_wfile_open sq_uniforms sq_device_count sq_world_fail; do
  ok "$sym is not exported" sh -c '! grep -qx -- "$1" "$2"' sh "$sym" "$T/exports.txt"
done

# --- an installed copy ---------------------------------------------------
root=$T/root
ok "make install DESTDIR=..." env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
  make -s -C "$SHARDQ_BUILDDIR" install DESTDIR="$root"
libdir=$(sed -n 's/^libdir=//p' "$SHARDQ_BUILDDIR/shardq.pc")
prefix=$(sed -n 's/^prefix=//p' "$SHARDQ_BUILDDIR/shardq.pc")
libdir=$(echo "$libdir" | sed "s|\${exec_prefix}|$prefix|; s|\${prefix}|$prefix|")
PKG_CONFIG_SYSROOT_DIR=$root PKG_CONFIG_PATH=$root$libdir/pkgconfig
export PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_PATH
ok "pkg-config --cflags --libs shardq (installed)" pkg-config --cflags --libs shardq
flags=$(cat "$sq_tmp/out")
ok "the installed shardq.pc points into the installed copy" \
  sh -c 'case "$1" in *"$2"*) exit 0 ;; *) exit 1 ;; esac' sh "$flags" "$root"

CC=${CC:-cc}
# A sanitizer build of the library needs its runtime in the program too.
san=
if readelf -d "$so" 2>/dev/null | grep -q 'libasan'; then
  san="-fsanitize=address,undefined -fno-omit-frame-pointer"
fi
for h in "$root$prefix"/include/shardq/*.h "$root$prefix"/include/shardq.h; do
  name=${h#"$root$prefix"/include/}
  printf '#include <%s>\nint main(void) { return 0; }\n' "$name" >"$T/h.c"
  ok "<$name> compiles on its own (C11, -Wall -Wextra -Werror)" \
    $CC -std=c11 -Wall -Wextra -Werror -fsyntax-only $flags "$T/h.c"
done

# --- programs against the installed copy ------------------------------------
# The world: SDP4Bit's gradient reduce-scatter on 2 x 4 workers, its error
# against the exact mean and its inter-node bits per element.
cat >"$T/world.c" <<'EOF'
#include <shardq.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    const uint64_t n = 1000000;
    sq_world_config cfg = {.elements = n, .seed = 1};
    sq_error err = {0};
    sq_world *w = NULL;
    if (sq_topo_parse("2x4", &cfg.topo, &err) || sq_scheme_preset("sdp4bit", &cfg.scheme, &err) ||
        sq_world_open(&cfg, &w, &err)) {
        fprintf(stderr, "%s\n", sq_error_message(&err));
        return 1;
    }
    float *g = malloc(n * sizeof *g), *tmp = malloc(n * sizeof *tmp);
    float *u = malloc(3 * n * sizeof *u), *shard = malloc(sq_world_shard(w) * sizeof *shard);
    double *exact = malloc(sq_world_padded(w) * sizeof *exact);
    if (!g || !tmp || !u || !shard || !exact) return 1;
    int rc = SQ_OK;
    sq_step_exact_zero(w, exact);
    for (int r = 0; r < sq_world_workers(w) && !rc; r++) {
        sq_synth_grad(1, 1, r, SQ_SYNTH_NORMAL, n, g, tmp, u);
        sq_step_add_grad(w, exact, g, NULL, 1, tmp);
        rc = sq_world_put_grad(w, r, g);
    }
    sq_step_exact_mean(w, exact);
    sq_erracc acc;
    sq_erracc_init(&acc);
    if (!rc) rc = sq_world_reduce_grads(w, 1);
    if (!rc) rc = sq_step_grad_error(w, exact, NULL, shard, &acc);
    if (rc) {
        fprintf(stderr, "%s: %s\n", sq_strerror(rc), sq_world_error(w));
    } else {
        sq_errstats s = sq_erracc_finish(&acc);
        sq_traffic t = {0};
        sq_world_add_traffic(w, &t);
        const sq_link_traffic *inter = &t.t[SQ_COLL_GRAD][SQ_LINK_INTER];
        double bytes = (double)(inter->sent_codes + inter->sent_meta);
        printf("gradient rel. L2 error %.4f, inter-node %.3f bits per element\n", s.rel_l2,
               8.0 * bytes / (double)inter->sent_elems);
    }
    sq_world_close(w);
    free(g), free(tmp), free(u), free(shard), free(exact);
    return rc ? 1 : 0;
}
EOF
# A replay of a trace (its first argument) under a preset (its second).
cat >"$T/replay.c" <<'EOF'
#include <shardq.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    sq_error err = {0};
    sq_trace t;
    if (argc != 3 || sq_trace_open(argv[1], &t, &err)) {
        fprintf(stderr, "usage: replay TRACE PRESET (%s)\n", sq_error_message(&err));
        return 2;
    }
    sq_replay_config c = {.topo = sq_replay_default_topo(&t), .seed = 1,
                          .paths = SQ_REPLAY_GRAD | SQ_REPLAY_WEIGHT};
    sq_replay_result res;
    int rc = sq_scheme_preset(argv[2], &c.scheme, &err);
    if (!rc) rc = sq_replay_run(&c, &t, NULL, &res, &err);
    sq_trace_close(&t);
    if (rc) {
        fprintf(stderr, "%s: %s\n", sq_strerror(rc), sq_error_message(&err));
        return 1;
    }
    printf("%zu steps x %zu params: gradient rel. L2 %.4f, weights rel. L2 %.4f\n", res.steps,
           res.params, res.grad.rel_l2, res.weight.rel_l2);
    return 0;
}
EOF
for ex in world replay; do
  ok "the $ex program compiles against the installed library" \
    $CC -std=c11 -Wall -Wextra -Werror $san -o "$T/$ex" "$T/$ex.c" $flags
done
LD_LIBRARY_PATH=$root$libdir
export LD_LIBRARY_PATH
ok "the world program links the installed libshardq.so" ldd "$T/world"
cp "$sq_tmp/out" "$T/ldd.txt"
ok "... that one ($(grep libshardq "$T/ldd.txt" | tr -s ' \t' ' '))" \
  grep -q "$root$libdir/libshardq.so" "$T/ldd.txt"

ok "the world program runs" "$T/world"
out=$(cat "$sq_tmp/out")
# 8-bit intra / 4-bit inter with a Hadamard: a 4-bit error; group 128 with
# fp32 scales: 4 + 32/128 = 4.25 bits per element between nodes
ok "it prints the error and the bits ($out)" \
  sh -c 'echo "$1" | awk "/gradient rel. L2 error/ { e = \$5 + 0; b = \$7 + 0;
    exit !(e > 0.01 && e < 0.5 && b == 4.25) }"' sh "$out"

ok "a synthetic trace" "$SHARDQ" trace synth --steps 3 --workers 4 --topology 2x2 "$T/trace"
ok "the replay program runs" "$T/replay" "$T/trace" sdp4bit
ex_line=$(cat "$sq_tmp/out")
ok "shardq replay of the same trace" "$SHARDQ" replay --no-db --json --scheme sdp4bit "$T/trace"
cli=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
print("%.4f %.4f" % (d["grad"]["rel_l2"], d["weight"]["rel_l2"]))' "$sq_tmp/out")
lib=$(echo "$ex_line" | sed -n 's/.*gradient rel. L2 \([0-9.]*\), weights rel. L2 \([0-9.]*\)$/\1 \2/p')
ok "the program's errors equal the command's ($lib; $cli)" test "$lib" = "$cli"
ok "a missing trace: the program says so and fails" sh -c '! "$1" "$2/none" sdp4bit' sh "$T/replay" "$T"

# --- the Python package against the installed copy --------------------------
# The pip command of docs/python.md ("Installing"), in a virtual environment
# that sees Debian's packages (numpy, cffi, setuptools): the cffi module
# compiles against the installed headers and library that pkg-config names.
# From a copy of python/, since pip builds in the directory it is given;
# --no-deps --no-index keep pip off the network.
. "$SHARDQ_SRCDIR/tests/python_env.sh"
cp -R "$SHARDQ_SRCDIR/python" "$T/pysrc" && chmod -R u+w "$T/pysrc"
ok "python3 -m venv --system-site-packages" env -u LD_PRELOAD "$PY" -m venv --system-site-packages "$T/venv"
ok "pip install ./python (against the installed libshardq)" env -u LD_PRELOAD \
  "$T/venv/bin/pip" install --no-build-isolation --no-deps --no-index "$T/pysrc"
ok "the installed package quantizes" "$T/venv/bin/python" -c '
import shardq, numpy as np
x = np.linspace(-1, 1, 1000, dtype=np.float32)
q = shardq.quantize(x, shardq.Codec("bits=8,group=100,round=rtn"))
assert np.abs(shardq.dequantize(q) - x).max() < 0.01'
ok "... and its module links the installed libshardq.so" sh -c \
  'ldd "$1"/lib/python3*/site-packages/shardq/_shardq*.so | grep -q "$2/libshardq.so"' sh "$T/venv" "$root$libdir"

finish
