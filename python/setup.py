# setuptools reads the metadata from pyproject.toml; this file names the
# cffi module, which pyproject.toml cannot do, and gives the version, which
# is the library's: SHARDQ_VERSION_STRING of the shardq/codec.h that the
# module is built against (SHARDQ_INCLUDE_DIR, or pkg-config's shardq.pc,
# whose version configure takes from that header).
import os
import re
import subprocess

from setuptools import setup


def _version():
    inc = os.environ.get("SHARDQ_INCLUDE_DIR")
    if inc:
        with open(os.path.join(inc, "shardq", "codec.h")) as f:
            return re.search(r'^#define SHARDQ_VERSION_STRING "([^"]+)"', f.read(), re.M).group(1)
    try:
        return subprocess.run(["pkg-config", "--modversion", "shardq"], check=True,
                              capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit("shardq: libshardq not found: run `make install` in the shardq tree "
                         "(pkg-config shardq failed: %s), or set SHARDQ_INCLUDE_DIR" % e)


setup(version=_version(), cffi_modules=["shardq/_build.py:ffibuilder"])
