"""The package's imports point one way (README.md, "Layout"):

    cli  ->  bench, boards, ota, convert, chat, serve  ->  the runtime

The runtime (the top-level modules: _ffi, model, session, tokenizer, live,
cuda, errors) imports none of the folders; convert never loads the C library,
directly or through a runtime module that does. Between the folders in the
middle only the arrows in BETWEEN are allowed, so there is no cycle.

Read from the source with `ast`, every import counts, the ones inside
functions too: a lazy import still runs when its function is called. An
import of a module also runs its packages' __init__.py, so those count as
well. An import that names no file of the package (an old flat-layout path
such as `from .. import reference`, or a typo) fails: old paths are for code
outside the package only.
"""
import ast
import pathlib
import subprocess
import sys

import pytest

PKG = pathlib.Path(__file__).resolve().parent.parent / "pybind" / "edgerun"

MIDDLE = ("bench", "boards", "ota", "convert", "chat", "serve")
# The arrows allowed between middle folders. bench runs its workloads on the
# boards (build, qemu) and reads GGUF files with convert's reference; ota
# builds and health-checks a board's slot; a server serves chats, and on a
# device the model of the active slot that ota's device config names; a release
# (ota/release.py) gates the bundle on the board bench's latency gates.
BETWEEN = {"bench": {"boards", "convert"}, "ota": {"boards", "bench"}, "serve": {"chat", "ota"}}
# The one arrow out of the runtime: Model.chat and Model.chat_session (the
# chat issue's API on the model) hand over to edgerun.chat, importing it
# inside those two methods only, so loading the runtime never loads jinja2
# or the chat package (test_runtime_loads_without_the_folders checks).
FACADES = {("edgerun.model", "edgerun.chat")}
# Top-level modules that are not the runtime: `python -m edgerun` is the CLI.
TOP_CLI = {"edgerun.__main__"}


def modules():
    """{dotted name: path} for every module of the package."""
    out = {}
    for p in PKG.rglob("*.py"):
        parts = ("edgerun",) + p.relative_to(PKG).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


MODULES = modules()


def layer(name):
    parts = name.split(".")
    if name in TOP_CLI:
        return "cli"
    if len(parts) > 1 and (PKG / parts[1]).is_dir():
        return parts[1]
    return "runtime"


def with_parents(name):
    """The module and every package above it, whose __init__ runs first."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


def imports_of(name):
    """[(line, target module, source text)] for every import of the package
    that `name` makes; the target is None where no file of the package matches."""
    path = MODULES[name]
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "edgerun" or a.name.startswith("edgerun."):
                    out.append((node.lineno, a.name if a.name in MODULES else None, f"import {a.name}"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[:-(node.level - 1)]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base != "edgerun" and not base.startswith("edgerun."):
                continue
            text = f"from {'.' * node.level}{node.module or ''} import {', '.join(a.name for a in node.names)}"
            if base not in MODULES:
                out.append((node.lineno, None, text))
                continue
            for a in node.names:
                sub = f"{base}.{a.name}"
                if sub in MODULES:
                    out.append((node.lineno, sub, text))
                elif a.name == "*" or a.name in _defined(base):
                    out.append((node.lineno, base, text))
                else:
                    out.append((node.lineno, None, text))
    return out


_DEFS = {}


def _defined(name):
    """Names a module binds at top level (what `from it import x` may take)."""
    if name not in _DEFS:
        tree = ast.parse(MODULES[name].read_text())
        names = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
        _DEFS[name] = names
    return _DEFS[name]


def graph():
    """{module: {module it runs by importing}}, parents' __init__ included."""
    g = {}
    for name in MODULES:
        targets = set()
        for _, target, _ in imports_of(name):
            if target is not None:
                targets |= with_parents(target)
        g[name] = targets - {name}
    return g


def allowed(src, dst):
    if (src, dst) in FACADES:
        return True
    a, b = layer(src), layer(dst)
    if a == b or b == "runtime" or a == "cli":
        return True
    if a == "runtime":
        return False
    return b in BETWEEN.get(a, set())


def test_every_import_names_a_module_of_the_package():
    bad = [f"{MODULES[n].relative_to(PKG.parent)}:{line}: {text}"
           for n in MODULES for line, target, text in imports_of(n) if target is None]
    assert not bad, "imports that match no module (old flat-layout paths?):\n" + "\n".join(bad)


def test_imports_point_one_way():
    bad = []
    for name in MODULES:
        for line, target, text in imports_of(name):
            if target is None:
                continue
            for t in with_parents(target) - {name}:
                if not allowed(name, t):
                    bad.append(f"{MODULES[name].relative_to(PKG.parent)}:{line}: {text}  "
                               f"({layer(name)} -> {layer(t)}: {t})")
    assert not bad, "imports against the layering:\n" + "\n".join(sorted(set(bad)))


def test_convert_never_reaches_the_c_library():
    g = graph()
    for start in (n for n in MODULES if layer(n) == "convert"):
        seen, todo, came = {start}, [start], {}
        while todo:
            n = todo.pop()
            for t in g[n]:
                if t not in seen:
                    seen.add(t)
                    came[t] = n
                    todo.append(t)
        if "edgerun._ffi" in seen:
            chain, n = ["edgerun._ffi"], "edgerun._ffi"
            while n != start:
                n = came[n]
                chain.append(n)
            pytest.fail(f"{start} loads the C library: {' -> '.join(reversed(chain))}")


def test_the_checker_sees_a_wrong_arrow():
    """The rules refuse what they are for (so a broken resolver cannot pass silently)."""
    assert not allowed("edgerun.model", "edgerun.convert.hf")
    assert not allowed("edgerun.convert.hf", "edgerun.cli.app")
    assert not allowed("edgerun.boards.build", "edgerun.bench.engines")
    assert not allowed("edgerun.convert.hf", "edgerun.boards")
    assert allowed("edgerun.cli.run", "edgerun.model") and allowed("edgerun.bench.isa", "edgerun.boards.qemu")
    g = graph()
    assert "edgerun._ffi" in g["edgerun.model"] and "edgerun.boards.board" in g["edgerun.boards.build"]
    assert "edgerun.convert.tokenizer" in g["edgerun.bench.tokenizer"]   # a lazy import inside a function
    assert all(layer(n) in MIDDLE + ("cli", "runtime") for n in MODULES)


def test_convert_runs_without_the_c_library(tmp_path):
    """The same as the AST test, by running: importing every convert module
    with no library to find loads nothing from it."""
    names = sorted(n for n in MODULES if layer(n) == "convert")
    code = (f"import sys\nimport {', '.join(names)}\n"
            "assert 'edgerun._ffi' not in sys.modules, sorted(m for m in sys.modules if m.startswith('edgerun'))\n")
    env = {"PYTHONPATH": str(PKG.parent), "EDGERUN_LIB": str(tmp_path / "absent.so"), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr


def test_runtime_loads_without_the_folders():
    """Opening a model (the runtime's import graph as it runs, lazy facades
    not called) loads none of the job folders."""
    code = ("import sys, edgerun; m = edgerun.Model(); m.close(); "
            "print(sorted(k for k in sys.modules if k.startswith('edgerun.') and k.split('.')[1] in %r))" % (MIDDLE + ("cli",),))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
