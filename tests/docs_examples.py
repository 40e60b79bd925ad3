#!/usr/bin/env python3
"""Run every example of the manual (README.md, python/README.md and
docs/*.md) as a test.

Each fenced block must say what it is, by the first word of its info string:

  sh        run with `bash -e` in the document's scratch directory
  c         compiled (C11, -Wall -Wextra -Werror, against this tree) and run
  python    run with the interpreter the tests use, on the built package
  output    the expected standard output of the runnable block just before
            it; a line `...` matches any number of lines, a line ending in
            `...` any line that starts with the text before it
  text      an illustration, not run (a sample page, a log excerpt)

A block of any language with the attribute file=NAME is written to the
scratch directory instead of being run, for a later block to use. Other
attributes: needs=mpi|root|gpu|torch (a block whose need is not met is
reported as skipped, with the reason; under needs=mpi, mpirun may run as
root and oversubscribe the cores, as the tests' own mpirun does), timeout=SECONDS (default 300), and
`install` on an sh block: a line that installs, builds or runs the suite
itself (./bootstrap, make install, make check), checked for syntax with
`bash -n` and not run here (.ci/run runs the README's test line as it is).

The blocks of one document run in order in one scratch directory, which
holds `experiments`, `analysis` and `python` (links into the source tree)
and `src/shardq` (the built command), so that the examples read as they
would in a clone; `shardq` is first on PATH. Relative links between the
documents are checked too: the file must exist and the #anchor be one of
its headings.

Prints one TAP-like line per check (`ok N - docs/replay.md:40 sh`), which
tests/docs.sh passes on, and a summary of what ran.
"""
import argparse
import functools
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

RUNNABLE = ("sh", "c", "python")
FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})\s*(.*)$")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


class Block:
    def __init__(self, path, line, info, text):
        self.path, self.line, self.text = path, line, text
        words = info.split()
        self.lang = words[0] if words else ""
        self.attrs, self.flags = {}, set()
        for w in words[1:]:
            if "=" in w:
                k, v = w.split("=", 1)
                self.attrs[k] = v
            else:
                self.flags.add(w)
        self.expect = None      # the output block that follows, if any

    def where(self, rel):
        return "%s:%d %s" % (rel, self.line, self.lang)


def parse(path):
    """The fenced blocks of a Markdown file, in order, with the line of
    their opening fence. Unclosed fences are an error."""
    blocks, lines = [], open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = len(m.group(1)), m.group(2), m.group(3).strip()
        start, body, i = i + 1, [], i + 1
        while i < len(lines):
            close = re.match(r"^ {0,3}" + re.escape(fence[0]) + "{%d,}\\s*$" % len(fence), lines[i])
            if close:
                break
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        else:
            raise SyntaxError("%s:%d: the fence is never closed" % (path, start))
        blocks.append(Block(path, start, info, "\n".join(body) + "\n"))
        i += 1
    return blocks


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped,
    spaces to hyphens."""
    h = re.sub(r"[`*_]", "", heading.strip().lower())
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


@functools.lru_cache(maxsize=None)   # a chapter is linked to many times
def anchors(path):
    seen, out, in_fence = {}, set(), False
    for line in open(path, encoding="utf-8"):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        m = None if in_fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else "%s-%d" % (s, n))
    return out


def match_output(expect, got):
    """Whether the lines got match the pattern lines expect (see the module
    comment): a small backtracking match, the patterns being short."""
    def m(i, j):
        if i == len(expect):
            return j == len(got)
        e = expect[i]
        if e == "...":
            return any(m(i + 1, k) for k in range(j, len(got) + 1))
        if j == len(got):
            return False
        ok = got[j].startswith(e[:-3]) if e.endswith("...") else got[j] == e
        return ok and m(i + 1, j + 1)
    return m(0, 0)


class Runner:
    def __init__(self, srcdir, build):
        self.srcdir, self.build = os.path.abspath(srcdir), os.path.abspath(build)
        self.n = self.failed = 0
        self.counts = {"sh": 0, "c": 0, "python": 0, "output": 0, "file": 0,
                       "install": 0, "text": 0, "links": 0}
        self.skipped = []
        self.python = os.environ.get("SHARDQ_PYTHON") or (
            "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3")
        self.py_preload = os.environ.get("SHARDQ_DOCS_PY_PRELOAD", "")
        self._needs = {}

    def report(self, passed, desc, detail=""):
        self.n += 1
        if passed:
            print("ok %d - %s" % (self.n, desc))
        else:
            self.failed += 1
            print("not ok %d - %s" % (self.n, desc))
            for line in detail.rstrip("\n").split("\n")[-60:]:
                print("# " + line)
        sys.stdout.flush()

    def need(self, what):
        """None when the need is met, else the reason it is not."""
        if what in self._needs:
            return self._needs[what]
        why = None
        if what == "mpi":
            mpirun = os.environ.get("SHARDQ_MPIRUN", "")
            if not mpirun or not shutil.which(mpirun.split()[0]):
                why = "no mpirun (this build has no MPI transport)"
        elif what == "root":
            if os.geteuid() != 0:
                why = "not root (network namespaces need it)"
            elif not (shutil.which("ip") and shutil.which("tc")):
                why = "no ip or tc (iproute2)"
        elif what == "gpu":
            try:
                r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=60)
                if r.returncode != 0 or b"GPU" not in r.stdout:
                    why = "no GPU (nvidia-smi -L lists none)"
            except (OSError, subprocess.TimeoutExpired):
                why = "no GPU (no nvidia-smi)"
            if why is None and not os.path.exists(os.path.join(self.build, "kernels")):
                why = "this build has no CUDA"
        elif what == "torch":
            r = subprocess.run([self.python, "-c", "import torch"], capture_output=True)
            if r.returncode != 0:
                why = "%s cannot import torch" % self.python
        else:
            why = "unknown need %r" % what
        self._needs[what] = why
        return why

    def scratch(self, root, rel):
        d = os.path.join(root, re.sub(r"[^\w.-]", "_", rel))
        os.makedirs(os.path.join(d, "src"))
        os.makedirs(os.path.join(d, ".bin"))
        for name in ("experiments", "analysis", "python"):
            os.symlink(os.path.join(self.srcdir, name), os.path.join(d, name))
        exe = os.path.join(self.build, "src", "shardq")
        os.symlink(exe, os.path.join(d, "src", "shardq"))
        os.symlink(exe, os.path.join(d, ".bin", "shardq"))
        # `python3` in an example is the interpreter the tests use (Debian's,
        # with numpy and torch), whatever else is first on PATH
        py = shutil.which(self.python)
        if py:
            os.symlink(py, os.path.join(d, ".bin", "python3"))
        return d

    def env(self, d, python=False):
        e = dict(os.environ)
        e.pop("SHARDQ_DB", None)
        e["PATH"] = os.path.join(d, ".bin") + os.pathsep + e.get("PATH", "")
        pp = os.path.join(self.build, "python-build")
        e["PYTHONPATH"] = pp + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
        e["PYTHONDONTWRITEBYTECODE"] = "1"
        e["HOME"] = d
        if python and self.py_preload:
            e["LD_PRELOAD"] = self.py_preload
        return e

    def cc_command(self, src, exe):
        cc = os.environ.get("CC") or "cc"
        libdir = os.path.join(self.build, ".libs")
        cmd = [cc, "-std=c11", "-Wall", "-Wextra", "-Werror",
               "-I" + os.path.join(self.srcdir, "include"),
               "-I" + os.path.join(self.build, "include"), "-o", exe, src,
               "-L" + libdir, "-Wl,-rpath," + libdir, "-lshardq", "-lm"]
        if self.py_preload:     # the sanitizer build: link the same runtimes
            cmd[1:1] = ["-fsanitize=address,undefined"]
        return cmd

    def run_block(self, b, rel, d, needs=()):
        timeout = int(b.attrs.get("timeout", "300"))
        if b.lang == "sh":
            path = os.path.join(d, ".block-%d.sh" % b.line)
            open(path, "w").write(b.text)
            cmd, env = ["bash", "-e", path], self.env(d)
            if "mpi" in needs:
                # what a user types is plain `mpirun -np N`; here the runner may
                # be root on a machine with fewer cores than ranks
                env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                           OMPI_MCA_rmaps_base_oversubscribe="1")
        elif b.lang == "python":
            path = os.path.join(d, ".block-%d.py" % b.line)
            open(path, "w").write(b.text)
            cmd, env = [self.python, path], self.env(d, python=True)
        else:
            src = os.path.join(d, ".block-%d.c" % b.line)
            exe = os.path.join(d, ".block-%d" % b.line)
            open(src, "w").write(b.text)
            r = subprocess.run(self.cc_command(src, exe), cwd=d, capture_output=True,
                               text=True, timeout=timeout)
            if r.returncode != 0:
                return False, "compile failed:\n" + r.stdout + r.stderr
            cmd, env = [exe], self.env(d)
        try:
            r = subprocess.run(cmd, cwd=d, env=env, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=timeout,
                               errors="replace")
        except subprocess.TimeoutExpired:
            return False, "did not finish within %d s (timeout=)" % timeout
        log = "$ %s\n%s%s" % (b.text.strip(), r.stdout, r.stderr)
        if r.returncode != 0:
            return False, "exit status %d\n%s" % (r.returncode, log)
        if b.expect is not None:
            want = b.expect.text.rstrip("\n").split("\n")
            got = r.stdout.rstrip("\n").split("\n") if r.stdout else []
            if not match_output(want, got):
                return False, "its output differs from the output block at line %d:\n%s" % (
                    b.expect.line, log)
        return True, ""

    def document(self, path, root):
        rel = os.path.relpath(path, self.srcdir)
        try:
            blocks = parse(path)
        except SyntaxError as e:
            self.report(False, "%s parses" % rel, str(e))
            return
        d = self.scratch(root, rel)
        prev = None
        for b in blocks:
            if b.lang == "output":
                if prev is None or prev.lang not in RUNNABLE or prev.expect is not None:
                    self.report(False, "%s follows a runnable block" % b.where(rel),
                                "an output block must come right after an sh, c or python block")
                else:
                    prev.expect = b
                    self.counts["output"] += 1
            prev = b
        for b in blocks:
            desc = b.where(rel)
            if b.lang == "output":
                continue
            if "file" in b.attrs:
                name = b.attrs["file"]
                if os.path.isabs(name) or ".." in name.split("/"):
                    self.report(False, desc + " file=" + name, "file= must be a relative name")
                    continue
                os.makedirs(os.path.dirname(os.path.join(d, name)) or d, exist_ok=True)
                open(os.path.join(d, name), "w").write(b.text)
                self.counts["file"] += 1
                continue
            if b.lang == "text":
                self.counts["text"] += 1
                continue
            if b.lang == "sh" and "install" in b.flags:
                r = subprocess.run(["bash", "-n"], input=b.text, capture_output=True, text=True)
                self.report(r.returncode == 0, desc + " (install line: bash -n)", r.stderr)
                self.counts["install"] += 1
                continue
            if b.lang not in RUNNABLE:
                self.report(False, desc, "a block must be sh, c, python, output or text, or "
                            "carry file=NAME (info string %r)" % b.lang)
                continue
            why = None
            for need in filter(None, b.attrs.get("needs", "").split(",")):
                why = why or self.need(need)
            if why:
                self.skipped.append("%s: %s" % (desc, why))
                print("# skip %s: %s" % (desc, why))
                continue
            passed, detail = self.run_block(b, rel, d, b.attrs.get("needs", "").split(","))
            self.report(passed, desc + (" + output" if b.expect is not None else ""), detail)
            self.counts[b.lang] += 1
        self.links(path, rel)
        if rel == "README.md":
            self.front_door(path)

    def front_door(self, path):
        """What README.md promises a new reader (issue: the front door):
        short, no commit hashes, and in its first 60 lines how to install
        and the one command that runs the demo."""
        lines = open(path, encoding="utf-8").read().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        self.report(len(lines) <= 400, "README.md has at most 400 lines (%d)" % len(lines))
        hashes = [l for l in lines if re.search(r"\b[0-9a-f]{7}\b", l)]
        self.report(not hashes, "README.md holds no commit hash", "\n".join(hashes))
        head = "\n".join(lines[:60])
        test_cmd = None
        ci = os.path.join(self.srcdir, ".ci", "run")
        if os.path.exists(ci):
            m = re.search(r"^README_TEST_CMD='([^']*)'", open(ci).read(), re.M)
            test_cmd = m and m.group(1)
        self.report(bool(test_cmd) and test_cmd in head,
                    "README.md's first 60 lines hold the test command of .ci/run (%s)" % test_cmd)
        demo = test_cmd and test_cmd.replace("make -j2 check", "src/shardq demo")
        self.report(bool(demo) and demo in head,
                    "README.md's first 60 lines hold the demo command (%s)" % demo)

    def links(self, path, rel):
        text = open(path, encoding="utf-8").read()
        text = re.sub(r"(?ms)^ {0,3}(`{3,}|~{3,}).*?^ {0,3}\1\s*$", "", text)
        text = re.sub(r"`[^`\n]*`", "", text)
        bad = []
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            self.counts["links"] += 1
            if not os.path.exists(dest):
                bad.append("%s: no such file" % target)
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                bad.append("%s: no heading with that anchor" % target)
        self.report(not bad, "%s: its relative links lead somewhere" % rel, "\n".join(bad))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--srcdir", default=os.environ.get("SHARDQ_SRCDIR", "."))
    ap.add_argument("--build", default=os.environ.get("SHARDQ_BUILDDIR", "."))
    ap.add_argument("files", nargs="*",
                    help="default: README.md, python/README.md and docs/*.md of --srcdir")
    a = ap.parse_args()
    r = Runner(a.srcdir, a.build)
    files = a.files or [os.path.join(r.srcdir, "README.md"),
                        os.path.join(r.srcdir, "python", "README.md")] + sorted(
        glob.glob(os.path.join(r.srcdir, "docs", "*.md")))
    root = tempfile.mkdtemp(prefix="shardq-docs.")
    try:
        for f in files:
            r.document(os.path.abspath(f), root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    c = r.counts
    print("# %d examples run (sh %d, c %d, python %d; %d with their output checked), "
          "%d files written for them, %d install lines checked with bash -n, %d illustrations, "
          "%d links, %d skipped" % (c["sh"] + c["c"] + c["python"], c["sh"], c["c"], c["python"],
                                   c["output"], c["file"], c["install"], c["text"], c["links"],
                                   len(r.skipped)))
    print("1..%d" % r.n)
    return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())
