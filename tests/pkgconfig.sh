# pkgconfig.sh -- the generated shardq.pc is complete: a static link with
# `pkg-config --static --libs shardq` names every library that the built
# libshardq.so needs (its DT_NEEDED entries), so a program that links the
# static library resolves all of libshardq's symbols.

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
: "${SHARDQ_BUILDDIR:=$SHARDQ_SRCDIR}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
T=$TEST_TMPDIR

so=$SHARDQ_BUILDDIR/.libs/libshardq.so
# Only GPU tests skip: a missing tool or library is an error (exit 99).
need() { echo "error: $*" >&2; exit 99; }
command -v pkg-config >/dev/null 2>&1 || need "pkg-config is needed (apt-get install pkg-config)"
command -v readelf >/dev/null 2>&1 || need "readelf is needed (apt-get install binutils)"
test -f "$so" || need "no shared library $so (configured with --disable-shared?)"

# The uninstalled shardq.pc of the build tree; its Requires.private modules
# resolve from the system's pkg-config path.
PKG_CONFIG_PATH=$SHARDQ_BUILDDIR${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export PKG_CONFIG_PATH
ok "pkg-config --static --libs shardq" pkg-config --static --libs shardq
cp "$sq_tmp/out" "$T/libs.txt"
ok "readelf -d libshardq.so" readelf -d "$so"
sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' "$sq_tmp/out" >"$T/needed.txt"
ok "libshardq.so needs libraries" test -s "$T/needed.txt"

# libNAME.so.N is -lNAME, except what the compiler driver adds by itself (libc,
# the dynamic loader, libgcc_s, a sanitizer's runtime from -fsanitize in the
# user's LDFLAGS) and OpenMP's runtime, which -fopenmp brings.
while read -r lib; do
  name=${lib#lib}
  name=${name%%.so*}
  case $name in
    c | ld-linux* | ld64* | ld | gcc_s | asan | ubsan | tsan | lsan | hwasan) continue ;;
    gomp) flag=-fopenmp ;;
    *) flag=-l$name ;;
  esac
  ok "shardq.pc names $lib ($flag)" sh -c 'tr " " "\n" <"$1" | grep -qx -e "$2"' sh "$T/libs.txt" "$flag"
done <"$T/needed.txt"

finish
