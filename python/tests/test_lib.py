"""The package loads, and a failure carries the library's sentence."""
import pytest

import shardq
from shardq._lib import check, lib, ffi


def test_version_matches_library():
    assert shardq.__version__ == "0.1.0"


def test_error_kinds_map_to_exceptions():
    with pytest.raises(shardq.SpecError) as e:
        check(lib.SQ_ERR_SPEC)
    assert e.value.status == -2 and e.value.kind == "SQ_ERR_SPEC"
    assert "codec spec" in str(e.value)
    with pytest.raises(OSError):
        check(lib.SQ_ERR_IO)
