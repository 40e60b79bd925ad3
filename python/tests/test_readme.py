"""The README's Python examples run as printed and say what the README
says they say (the blocks after `<!-- example: NAME -->` markers)."""
import os
import re
import socket
import subprocess
import sys

import pytest

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def example(name):
    text = open(README).read()
    m = re.search(r"<!-- example: %s -->\n```python\n(.*?)\n```" % re.escape(name), text, re.S)
    assert m, "README has no example %s" % name
    return m.group(1)


def run(tmp_path, name, *args, timeout=120):
    src = tmp_path / name
    src.write_text(example(name))
    p = subprocess.run([sys.executable, str(src), *args], cwd=tmp_path, capture_output=True,
                       text=True, timeout=timeout)
    assert p.returncode == 0, "%s failed (exit %d):\n%s%s" % (name, p.returncode, p.stdout,
                                                              p.stderr)
    return p.stdout


def test_capture_example_replays_what_its_world_computed(tmp_path, shardq_cli):
    out = run(tmp_path, "capture.py")
    assert "12 tensors replayed, all equal: True" in out, out
    err = float(re.search(r"grad rel\. L2 under sdp4bit: ([0-9.]+)", out).group(1))
    assert 0.0 < err < 0.5, out
    info = shardq_cli("trace", "info", tmp_path / "run1").stdout
    assert re.search(r"^steps +3: 0 2 4", info, re.M), info
    assert re.search(r"^workers +4 gradient files per step, captured on 2x2", info, re.M), info
    assert re.search(r"^tensors +4:", info, re.M), info


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_example_trains_on_four_gloo_ranks(tmp_path):
    out = run(tmp_path, "ddp.py", str(_free_port()), timeout=180)
    loss = float(re.search(r"loss after 20 steps under tlqhs: ([0-9.]+)", out).group(1))
    assert 0.0 < loss < 0.5, out
