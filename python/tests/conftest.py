"""Shared fixtures of the Python package's tests, and the TAP lines that
tests/python.sh passes to the project's test count: one `ok N - nodeid` or
`not ok N - nodeid` per test, written to $SHARDQ_TAP when it is set."""
import os
import shutil
import subprocess

import pytest

_tap = {"n": 0}


def pytest_runtest_logreport(report):
    path = os.environ.get("SHARDQ_TAP")
    if not path:
        return
    # one line per test: its call, or the setup that failed before it
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        if report.skipped:
            return
        _tap["n"] += 1
        word = "ok" if report.passed else "not ok"
        with open(path, "a") as f:
            f.write("%s %d - %s\n" % (word, _tap["n"], report.nodeid))
    elif report.when == "teardown" and report.failed:
        _tap["n"] += 1
        with open(path, "a") as f:
            f.write("not ok %d - %s (teardown)\n" % (_tap["n"], report.nodeid))


@pytest.fixture(scope="session")
def shardq_cli():
    """The shardq command of the tree under test ($SHARDQ), else on PATH."""
    exe = os.environ.get("SHARDQ") or shutil.which("shardq")
    if not exe:
        pytest.fail("no shardq command: set SHARDQ or put shardq on PATH")

    def run(*args, check=True, **kw):
        p = subprocess.run([exe, *map(str, args)], capture_output=True, text=True, **kw)
        if check and p.returncode != 0:
            raise AssertionError("shardq %s: exit %d\n%s" % (" ".join(map(str, args)),
                                                            p.returncode, p.stderr))
        return p
    run.exe = exe
    return run
