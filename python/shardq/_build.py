"""The cffi builder of shardq._shardq: the C API of libshardq, compiled.

cffi's API mode compiles a small C module that includes the real headers of
the installed library, so every declaration in cdef/*.h is checked by the C
compiler against <shardq/...>: a declaration here that drifts from the
library fails the build instead of corrupting memory at run time.

Where the library is: pkg-config's shardq.pc (after `make install`), or
SHARDQ_INCLUDE_DIR and SHARDQ_LIB_DIR (the build tree, for the tests).
"""
import glob
import os
import shlex
import subprocess

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
HEADERS = ["codec", "plugin", "backend", "world", "plan", "trace", "metrics", "store", "replay"]


def _pkgconfig(flag):
    try:
        out = subprocess.run(["pkg-config", flag, "shardq"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit(
            "shardq: libshardq not found: run `make install` in the shardq tree "
            "(pkg-config shardq failed: %s), or set SHARDQ_INCLUDE_DIR and "
            "SHARDQ_LIB_DIR" % e)
    return shlex.split(out)


def _library_flags():
    inc, lib = os.environ.get("SHARDQ_INCLUDE_DIR"), os.environ.get("SHARDQ_LIB_DIR")
    if inc and lib:
        return dict(include_dirs=[inc], library_dirs=[lib], libraries=["shardq"],
                    runtime_library_dirs=[lib])
    cflags, libs = _pkgconfig("--cflags"), _pkgconfig("--libs")
    libdirs = [f[2:] for f in libs if f.startswith("-L")]
    return dict(include_dirs=[f[2:] for f in cflags if f.startswith("-I")],
                library_dirs=libdirs, runtime_library_dirs=libdirs,
                libraries=[f[2:] for f in libs if f.startswith("-l")])


def _cdef():
    # one file per module of the library, in a fixed order (later ones use
    # the types of earlier ones)
    names = sorted(glob.glob(os.path.join(HERE, "cdef", "*.h")))
    return "\n".join(open(n).read() for n in names)


ffibuilder = FFI()
ffibuilder.cdef(_cdef())
ffibuilder.set_source(
    "shardq._shardq",
    "\n".join("#include <shardq/%s.h>" % h for h in HEADERS),
    extra_compile_args=["-ffp-contract=off"],
    **_library_flags())

if __name__ == "__main__":
    # python3 shardq/_build.py [DIR]: the module into DIR/shardq/ (default .)
    import sys
    ffibuilder.compile(tmpdir=sys.argv[1] if len(sys.argv) > 1 else ".",
                       verbose="-v" in sys.argv)
