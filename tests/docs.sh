#!/bin/sh
# tests/docs.sh -- the manual's examples as tests: every fenced block of
# README.md and docs/*.md runs, compiles or is checked (tests/docs_examples.py
# says how), its links lead somewhere, and README.md keeps the promises of a
# front door. One `ok`/`not ok` line per block.
. "$SHARDQ_SRCDIR/tests/lib.sh"
. "$SHARDQ_SRCDIR/tests/python_env.sh"
# The sanitizers' runtimes go to the Python examples only (python_env.sh);
# the C examples link them themselves.
SHARDQ_DOCS_PY_PRELOAD=${LD_PRELOAD:-}
SHARDQ_PYTHON=$PY
export SHARDQ_DOCS_PY_PRELOAD SHARDQ_PYTHON
unset LD_PRELOAD
"$PY" "$SHARDQ_SRCDIR/tests/docs_examples.py" --srcdir "$SHARDQ_SRCDIR" --build "$SHARDQ_BUILDDIR"
