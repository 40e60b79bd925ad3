#!/usr/bin/env python3
# tests/layers.py -- the layering of the sources, checked from the sources.
#
# Reads src/, include/shardq/ and kernels/ of a shardq tree as text and
# builds a file-level graph: an edge a -> b where a includes "b", or where a
# uses (inside a body) a function that b defines without `static`. Then:
#
#   cycles   no cycle among those files (Tarjan's strongly connected
#            components; each printed with its edges and why)
#   order    no file of a lower module includes or calls a higher one, in
#            the order MODULES below; a module directory not in the list fails
#   sqlite   `grep -l sqlite3_ src --include=*.c` lists only src/store files
#   share    src/cli's share of the src C lines (wc -l) is at most 15%
#   cli-fn   no function in src/cli longer than 150 lines
#   python   no import cycle among python/shardq/*.py
#
# Usage: layers.py --check NAME [ROOT]   one check; exit 0 (holds) or 1
#        layers.py [ROOT]                every check, one line each
#        layers.py --selftest            each check fails on a small tree
#                                        made to break it, passes on a clean one
# tests/layers.sh runs it over $SHARDQ_SRCDIR. Python 3, standard library only.
# It reads C as text (no preprocessor): a function called only from a macro
# body, or through a pointer, makes no edge.

import ast
import collections
import os
import re
import sys
import tempfile

# The modules, lowest first: a file may include or call only its own
# module or lower ones. This list is the one statement of the order (the
# README and the manual point here). kernels/ is part of backend.
MODULES = ['core', 'plugin', 'backend', 'trace', 'synth', 'world', 'metrics', 'store', 'replay',
           'train', 'cost', 'bench', 'sweep', 'mpi', 'report', 'app', 'cli']

# include/shardq/NAME.h belongs to the module that implements it: this
# table, else NAME itself when NAME is a module, else the module NAME begins
# with (store_query.h -> store). The plug-in ABI (plugin.h) is the core's:
# src/plugin only loads the files.
HEADER_MODULES = {'codec': 'core', 'plugin': 'core', 'layout': 'world', 'plan': 'world'}

# Files the build writes into src/ (embedded scripts and data): not sources
# anyone edits, so counted by no check.
GENERATED = {'src/cli/peer_scripts.c', 'src/report/scripts.c', 'src/cost/embedded_files.c'}

CLI_SHARE_MAX = 15.0
CLI_FUNCTION_MAX = 150


def module_of(path):
    """The module of a file of the graph, or None if it has none in MODULES."""
    parts = path.split('/')
    if parts[0] == 'kernels':
        return 'backend'
    if parts[0] == 'src' and len(parts) > 2:
        return parts[1] if parts[1] in MODULES else None
    if parts[:2] == ['include', 'shardq']:
        name = os.path.splitext(parts[2])[0]
        if name in HEADER_MODULES:
            return HEADER_MODULES[name]
        if name in MODULES:
            return name
        for m in MODULES:
            if name.startswith(m + '_'):
                return m
    return None


# ---------------------------------------------------------------------------
# Reading the tree
# ---------------------------------------------------------------------------

def c_files(root):
    """The graph's files, relative to root: src/**/*.[ch] (the generated
    ones aside), include/shardq/*.h, kernels/*.{cu,cuh,h}."""
    out = []
    for top, exts in (('src', ('.c', '.h')), ('kernels', ('.cu', '.cuh', '.h'))):
        for d, dirs, fs in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(x for x in dirs if not x.startswith('.'))
            for f in sorted(fs):
                rel = os.path.relpath(os.path.join(d, f), root).replace(os.sep, '/')
                if f.endswith(exts) and rel not in GENERATED:
                    out.append(rel)
    inc = os.path.join(root, 'include', 'shardq')
    if os.path.isdir(inc):
        out += sorted('include/shardq/' + f for f in os.listdir(inc) if f.endswith('.h'))
    return out


def strip_c(t):
    """C text without comments, with every string and character literal
    emptied and every preprocessor line blanked; newlines are kept, so line
    numbers stay."""
    def blank(m):
        return re.sub(r'[^\n]', ' ', m.group(0))
    t = re.sub(r'/\*.*?\*/|//[^\n]*', blank, t, flags=re.S)
    t = re.sub(r"'(\\.|[^'\\\n])*'", '0', t)
    t = re.sub(r'"(\\.|[^"\\\n])*"', '""', t)
    t = re.sub(r'^[ \t]*#(?:[^\n]*\\\n)*[^\n]*', blank, t, flags=re.M)
    # extern "C" { ... } (for C++ readers) holds declarations, not a body
    while True:
        m = re.search(r'\bextern\s*""\s*\{', t)
        if not m:
            return t
        end = body_end(t, m.end() - 1)
        t = t[:m.start()] + ' ' * (m.end() - m.start()) + t[m.end():end] + ' ' + t[end + 1:]


DEF_RE = re.compile(r'^([A-Za-z_][\w \t\*]*?[\s\*])([A-Za-z_]\w*)\s*\(([^;{}]*)\)\s*\{', re.M)
KEYWORDS = {'if', 'for', 'while', 'switch', 'return', 'sizeof', 'do', 'else'}


def definitions(stripped):
    """(name, is_static, start offset of the line, offset of '{') for each
    function defined at the top level of the text."""
    out = []
    for m in DEF_RE.finditer(stripped):
        if m.group(2) in KEYWORDS or depth_at(stripped, m.start()) != 0:
            continue
        out.append((m.group(2), 'static' in m.group(1).split(), m.start(), m.end() - 1))
    return out


def depth_at(t, pos, _cache={}):
    """The brace depth at pos (memoised per text)."""
    key = id(t)
    if key not in _cache or _cache[key][0] is not t:
        depth, d = [], 0
        for ch in t:
            depth.append(d)
            if ch == '{':
                d += 1
            elif ch == '}':
                d -= 1
        _cache.clear()
        _cache[key] = (t, depth)
    return _cache[key][1][pos]


def body_end(t, brace):
    """The offset of the '}' that closes the '{' at brace."""
    d = 0
    for i in range(brace, len(t)):
        if t[i] == '{':
            d += 1
        elif t[i] == '}':
            d -= 1
            if d == 0:
                return i
    return len(t) - 1


def idents_in_bodies(t):
    """The identifiers that stand inside braces: what the file's functions
    (and initialisers) use."""
    out, d = set(), 0
    for tok in re.finditer(r'[{}]|[A-Za-z_]\w*', t):
        s = tok.group(0)
        if s == '{':
            d += 1
        elif s == '}':
            d -= 1
        elif d > 0:
            out.add(s)
    return out


class Tree:
    def __init__(self, root):
        self.root = root
        self.files = c_files(root)
        self.text = {}
        for f in self.files:
            with open(os.path.join(root, f), errors='replace') as fh:
                self.text[f] = fh.read()
        self.stripped = {f: strip_c(self.text[f]) for f in self.files}
        self.defs = collections.defaultdict(set)
        for f in self.files:
            for name, static, _, _ in definitions(self.stripped[f]):
                if not static:
                    self.defs[name].add(f)
        self.edges = collections.defaultdict(set)
        self.why = {}
        for f in self.files:
            for m in re.finditer(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', self.text[f], re.M):
                inc = m.group(1)
                for c in (os.path.join(os.path.dirname(f), inc), 'include/' + inc, 'src/' + inc,
                          'src/core/' + inc, 'kernels/' + inc):
                    c = os.path.normpath(c).replace(os.sep, '/')
                    if c in self.text and c != f:
                        self.edges[f].add(c)
                        self.why[(f, c)] = 'includes "%s"' % inc
                        break
            for n in sorted(idents_in_bodies(self.stripped[f])):
                if f in self.defs.get(n, ()):
                    continue
                for g in self.defs.get(n, ()):
                    self.edges[f].add(g)
                    self.why.setdefault((f, g), 'calls %s()' % n)


def sccs(nodes, edges):
    """Tarjan's strongly connected components of more than one node (or a
    node with an edge to itself), iteratively."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for v0 in nodes:
        if v0 in index:
            continue
        work = [(v0, iter(sorted(edges.get(v0, ()))))]
        index[v0] = low[v0] = counter[0]
        counter[0] += 1
        stack.append(v0)
        on.add(v0)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1 or v in edges.get(v, ()):
                        out.append(sorted(comp))
    return sorted(out)


# ---------------------------------------------------------------------------
# The checks: each returns (holds, lines to print)
# ---------------------------------------------------------------------------

def check_cycles(root, tree=None):
    tree = tree or Tree(root)
    comps = sccs(tree.files, tree.edges)
    lines = []
    for comp in comps:
        lines.append('cycle of %d files: %s' % (len(comp), ' '.join(comp)))
        members = set(comp)
        for a in comp:
            for b in sorted(tree.edges[a] & members):
                lines.append('    %s -> %s (%s)' % (a, b, tree.why[(a, b)]))
    if not comps:
        lines.append('no cycle among %d files' % len(tree.files))
    return not comps, lines


def check_order(root, tree=None):
    tree = tree or Tree(root)
    rank = {m: i for i, m in enumerate(MODULES)}
    lines = []
    for d in sorted(os.listdir(os.path.join(root, 'src'))):
        if os.path.isdir(os.path.join(root, 'src', d)) and not d.startswith('.') and d not in rank:
            lines.append('src/%s/: a module not in MODULES (tests/layers.py): add it in its place' % d)
    for f in tree.files:
        if module_of(f) is None and f.startswith('include/'):
            lines.append('%s: a header of no module (HEADER_MODULES in tests/layers.py)' % f)
        elif module_of(f) is None and f.count('/') == 1:
            lines.append('%s: a file of no module (src/MODULE/ is where it goes)' % f)
    for a in tree.files:
        ma = module_of(a)
        for b in sorted(tree.edges[a]):
            mb = module_of(b)
            if ma in rank and mb in rank and rank[mb] > rank[ma]:
                lines.append('%s (%s) -> %s (%s): %s, a higher module' % (a, ma, b, mb,
                                                                         tree.why[(a, b)]))
    ok = not lines
    lines.append('order, lowest first: ' + ' < '.join(MODULES))
    return ok, lines


def check_sqlite(root, tree=None):
    bad = []
    for d, dirs, fs in os.walk(os.path.join(root, 'src')):
        dirs.sort()
        for f in sorted(fs):
            rel = os.path.relpath(os.path.join(d, f), root).replace(os.sep, '/')
            if not f.endswith('.c'):
                continue
            with open(os.path.join(d, f), errors='replace') as fh:
                if 'sqlite3_' in fh.read() and not rel.startswith('src/store/'):
                    bad.append(rel)
    lines = ['%s: calls SQLite outside src/store' % f for f in bad]
    if not bad:
        lines.append('sqlite3_ only in src/store')
    return not bad, lines


def src_lines(root):
    """(lines of src/cli/*.[ch], lines of src/**/*.[ch]), generated files aside."""
    cli = total = 0
    for d, dirs, fs in os.walk(os.path.join(root, 'src')):
        dirs[:] = [x for x in dirs if not x.startswith('.')]
        for f in fs:
            rel = os.path.relpath(os.path.join(d, f), root).replace(os.sep, '/')
            if not f.endswith(('.c', '.h')) or rel in GENERATED:
                continue
            with open(os.path.join(d, f), 'rb') as fh:
                n = fh.read().count(b'\n')
            total += n
            if rel.startswith('src/cli/'):
                cli += n
    return cli, total


def check_share(root, tree=None):
    cli, total = src_lines(root)
    pct = 100.0 * cli / total if total else 0.0
    return pct <= CLI_SHARE_MAX, [
        'src/cli: %d of %d lines (%.1f%%)' % (cli, total, pct),
        'src/cli/*.[ch] over src/**/*.[ch], wc -l; at most %g%%; generated files not counted: %s'
        % (CLI_SHARE_MAX, ', '.join(sorted(GENERATED)))]


def functions(path_text):
    """(name, first line, line count) of each function defined in C text:
    from the line of its name to that of its closing brace."""
    t = strip_c(path_text)
    out = []
    for name, _, start, brace in definitions(t):
        first = t.count('\n', 0, start) + 1
        last = t.count('\n', 0, body_end(t, brace)) + 1
        out.append((name, first, last - first + 1))
    return out


def check_cli_functions(root, tree=None):
    found = []
    cli = os.path.join(root, 'src', 'cli')
    for f in sorted(os.listdir(cli)) if os.path.isdir(cli) else []:
        rel = 'src/cli/' + f
        if f.endswith(('.c', '.h')) and rel not in GENERATED:
            with open(os.path.join(cli, f), errors='replace') as fh:
                found += [(n, rel, first, name) for name, first, n in functions(fh.read())]
    found.sort(reverse=True)
    long_ = [x for x in found if x[0] > CLI_FUNCTION_MAX]
    lines = ['%s:%d: %s() is %d lines' % (rel, first, name, n) for n, rel, first, name in long_]
    if found:
        n, rel, first, name = found[0]
        lines.append('the longest function in src/cli: %s() at %s:%d, %d lines (at most %d)' % (
            name, rel, first, n, CLI_FUNCTION_MAX))
    return not long_, lines


def python_imports(path, package_dir):
    """The package's modules that the file at path imports, anywhere in it
    (a function's own import closes a cycle as well); '__init__' for the
    package itself. A compiled extension (._shardq) is no node."""
    with open(path, errors='replace') as fh:
        tree = ast.parse(fh.read(), path)
    mods = {os.path.splitext(f)[0] for f in os.listdir(package_dir) if f.endswith('.py')}
    pkg = os.path.basename(package_dir)
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split('.')
                if parts[0] == pkg:
                    out.add(parts[1] if len(parts) > 1 and parts[1] in mods else '__init__')
        elif isinstance(node, ast.ImportFrom):
            if node.level == 1 or (node.level == 0 and node.module and
                                   node.module.split('.')[0] == pkg):
                rest = (node.module or '') if node.level else node.module[len(pkg) + 1:]
                if rest:
                    first = rest.split('.')[0]
                    if first in mods:
                        out.add(first)
                else:  # from . import a, b
                    for a in node.names:
                        out.add(a.name if a.name in mods else '__init__')
    return out


def check_python(root, tree=None):
    pkg = os.path.join(root, 'python', 'shardq')
    if not os.path.isdir(pkg):
        return True, ['no python/shardq']
    edges = {}
    for f in sorted(os.listdir(pkg)):
        if f.endswith('.py'):
            name = os.path.splitext(f)[0]
            edges[name] = python_imports(os.path.join(pkg, f), pkg) - {name}
    # the package's __init__ imports every module by design; a cycle through
    # it is a module importing `shardq` itself, which is reported
    comps = sccs(sorted(edges), edges)
    lines = []
    for comp in comps:
        lines.append('import cycle: ' + ' '.join('python/shardq/%s.py' % c for c in comp))
        for a in comp:
            for b in sorted(edges[a] & set(comp)):
                lines.append('    %s imports %s' % (a, b))
    if not comps:
        lines.append('no import cycle among %d modules' % len(edges))
    return not comps, lines


CHECKS = collections.OrderedDict([
    ('cycles', (check_cycles, 'no cycle among the files of src/, include/shardq/ and kernels/')),
    ('order', (check_order, 'no file includes or calls a higher module (tests/layers.py MODULES)')),
    ('sqlite', (check_sqlite, 'sqlite3_ only in src/store')),
    ('share', (check_share, 'src/cli is at most %g%% of the src lines' % CLI_SHARE_MAX)),
    ('cli-fn', (check_cli_functions, 'no function in src/cli longer than %d lines' %
                CLI_FUNCTION_MAX)),
    ('python', (check_python, 'no import cycle among python/shardq/*.py')),
])


# ---------------------------------------------------------------------------
# Self-test: a clean tree passes every check; each broken tree fails its own
# ---------------------------------------------------------------------------

def write(root, files):
    for rel, text in files.items():
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, 'w') as fh:
            fh.write(text)


CLEAN = {
    # a header's declarations inside extern "C" { } are no calls
    'include/shardq/codec.h': '#ifdef __cplusplus\nextern "C" {\n#endif\nint sq_low(int x);\n'
                              '#ifdef __cplusplus\n}\n#endif\n',
    'src/core/low.c': '#include "shardq/codec.h"\nint sq_low(int x)\n{\n    return x + 1;\n}\n',
    'src/store/db.c': '#include <sqlite3.h>\nint sq_db(sqlite3 *d)\n{\n'
                      '    return sqlite3_close(d);\n}\n',
    'src/trace/mid.c': '#include "shardq/codec.h"\nint sq_mid(void)\n{\n    return sq_low(2);\n}\n',
    'src/cli/main.c': '#include "shardq/codec.h"\nint main(void)\n{\n    return sq_low(0);\n}\n',
    'src/cli/peer_scripts.c': 'const char big[] =\n' + '"x"\n' * 400 + ';\n',
    'src/core/pad.h': '/* padding */\n' * 40,
    'python/shardq/__init__.py': 'from .a import f\nfrom .b import g\n',
    'python/shardq/a.py': 'from .b import g\n\ndef f():\n    return g()\n',
    'python/shardq/b.py': 'import os\n\ndef g():\n    return os.sep\n',
}

BROKEN = {
    # a header whose inline body calls the .c that includes it
    'cycles': {'src/trace/w.h': '#ifdef __cplusplus\nextern "C" {\n#endif\nint sq_w_abort(void);\n'
                                'static inline int w_end(void) { return sq_w_abort(); }\n'
                                '#ifdef __cplusplus\n}\n#endif\n',
               'src/trace/w.c': '#include "w.h"\nint sq_w_abort(void)\n{\n    return w_end();\n}\n'},
    # the core including a trace header, and a module the list lacks
    'order': {'src/core/up.c': '#include "trace/mid.h"\nint sq_up(void)\n{\n    return 0;\n}\n',
              'src/trace/mid.h': 'int sq_mid(void);\n'},
    'order-new-module': {'src/newmod/x.c': 'int sq_x(void)\n{\n    return 0;\n}\n'},
    'order-call': {'src/core/call.c': 'int sq_call(void)\n{\n    return sq_mid();\n}\n'},
    'sqlite': {'src/trace/sql.c': 'int sq_sql(void *d)\n{\n    return sqlite3_close(d);\n}\n'},
    'share': {'src/cli/big.c': '/* big */\n' * 100},
    'cli-fn': {'src/cli/long.c': 'int cli_long(int x)\n{\n' + '    x++;\n' * 160 + '    return x;\n}\n',
               'src/core/more.h': '/* so that the share holds */\n' * 1200},
    'python': {'python/shardq/b.py': 'def g():\n    from .a import f\n    return f\n'},
}


def selftest():
    failures = []
    with tempfile.TemporaryDirectory(prefix='layers-selftest.') as tmp:
        clean = os.path.join(tmp, 'clean')
        write(clean, CLEAN)
        for name, (fn, _) in CHECKS.items():
            ok, lines = fn(clean)
            if not ok:
                failures.append('the clean tree fails %s: %s' % (name, '; '.join(lines)))
        for case, files in BROKEN.items():
            root = os.path.join(tmp, case)
            write(root, CLEAN)
            write(root, files)
            name = case.split('-')[0] if case.startswith('order') else case
            fn = CHECKS[name][0]
            ok, lines = fn(root)
            if ok:
                failures.append('%s: the broken tree passes: %s' % (case, '; '.join(lines)))
            else:
                print('# %s caught: %s' % (case, lines[0].strip()))
            # and only that check fails on it
            for other, (ofn, _) in CHECKS.items():
                if other != name and not ofn(root)[0]:
                    failures.append('%s: also fails %s' % (case, other))
        # what the output says
        out = check_cycles(os.path.join(tmp, 'cycles'))[1]
        if not any('src/trace/w.h -> src/trace/w.c (calls sq_w_abort())' in l for l in out):
            failures.append('a cycle is printed without its edge: %s' % out)
        out = check_share(clean)[1][0]
        if out != 'src/cli: 5 of 60 lines (8.3%)':
            failures.append('the share of the clean tree (peer_scripts.c not counted): %s' % out)
        out = check_cli_functions(os.path.join(tmp, 'cli-fn'))[1]
        if not out or 'cli_long() is 164 lines' not in out[0]:
            failures.append('the long function is not reported as 164 lines: %s' % out)
    for f in failures:
        print('not ok: ' + f)
    return not failures


def main(argv):
    args = list(argv)
    if args[:1] == ['--selftest']:
        return 0 if selftest() else 1
    only = None
    if args[:1] == ['--check']:
        if len(args) < 2 or args[1] not in CHECKS:
            print('usage: layers.py --check {%s} [ROOT]' % ','.join(CHECKS), file=sys.stderr)
            return 2
        only, args = args[1], args[2:]
    root = args[0] if args else '.'
    if not os.path.isdir(os.path.join(root, 'src')):
        print('layers.py: %s has no src/' % root, file=sys.stderr)
        return 2
    tree = Tree(root) if only in (None, 'cycles', 'order') else None
    status = 0
    for name, (fn, desc) in CHECKS.items():
        if only and name != only:
            continue
        ok, lines = fn(root, tree)
        if not only:
            print('%s - %s' % ('ok' if ok else 'not ok', desc))
        for l in lines:
            print(('# ' if not only else '') + l)
        status |= 0 if ok else 1
    return status


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
