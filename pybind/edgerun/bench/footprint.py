"""`edgerun bench --footprint` (in `make bench`): bytes on disk of what ships,
each a stripped copy (strip's default, --strip-all; the originals are not
touched), edgerun beside llama.cpp.

Rows:
  * edgerun-cli of the rpi5 board build (aarch64, every Arm kernel table and
    the Unicode tables), stripped with the board toolchain's strip
    (aarch64-linux-gnu-strip): issue 25's budget, under 1 MB. The CLI holds
    the whole runtime (libedgerun is linked in), so it is all a device needs.
  * the host build's libedgerun.so and edgerun-cli, and the two together,
    stripped with the host's strip.
  * llama.cpp: the shared libraries llama-cpp-python ships for this host
    (libllama.so and libggml*.so in the installed llama_cpp package; libmtmd,
    its multimodal library, left out), stripped the same way. That package
    has no CLI, so the like-for-like pair is library against library:
    libedgerun.so against libllama + libggml*; the edgerun rows with the CLI
    show what our second artefact adds.
A row that cannot be measured here (no cross compiler, no llama_cpp) says why
and the rest still print.
"""
import hashlib
import importlib.util
import os
import pathlib
import shutil
import subprocess
import tempfile

BOARD = "rpi5"
BUDGET = 1_000_000       # issue 25: the stripped aarch64 edgerun-cli under 1 MB
LLAMA_LIBS = ("libllama.so*", "libggml*.so*")


def stripped_size(path, strip="strip"):
    """Bytes of a stripped copy of `path` (strip: the tool for its machine)."""
    tool = shutil.which(strip)
    if tool is None:
        raise FileNotFoundError(f"{strip} is not installed")
    with tempfile.TemporaryDirectory() as d:
        out = pathlib.Path(d) / pathlib.Path(path).name
        r = subprocess.run([tool, "-o", str(out), str(path)], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{strip} {path}: {(r.stderr.strip().splitlines() or ['failed'])[-1]}")
        return out.stat().st_size


def toolchain_tool(board, name, native):
    """The program the board's meson cross file names for `name` ([binaries]),
    or `native` for a board built natively."""
    import configparser

    from ..boards import board as boards
    ini = boards.load(board).toolchain_file()
    if ini is None:
        return native
    cp = configparser.ConfigParser()
    cp.read(ini)
    return cp.get("binaries", name, fallback=native).strip("'\"")


def toolchain_strip(board):
    """The strip named by the board's meson cross file ([binaries] strip)."""
    return toolchain_tool(board, "strip", "strip")


def host_build_dir():
    """The host build the Python package runs on ($EDGERUN_LIB's, else build/native)."""
    lib = os.environ.get("EDGERUN_LIB")
    if lib:
        return pathlib.Path(lib).resolve().parent.parent
    from ..boards import board as boards
    return boards.repo_root() / "build" / "native"


def llama_cpp_libs():
    """llama.cpp's libraries in the installed llama_cpp package, each once,
    or None when it is not installed. A wheel cannot hold symlinks, so pip
    writes libggml.so, libggml.so.0 and libggml.so.0.25.3 as three equal
    files: a library is counted once by its content (links resolved too)."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return None
    lib = pathlib.Path(list(spec.submodule_search_locations)[0]) / "lib"
    found = {}
    for pat in LLAMA_LIBS:
        for p in sorted(lib.glob(pat)):
            real = p.resolve()
            if real.is_file():
                found.setdefault(hashlib.sha256(real.read_bytes()).hexdigest(), real)
    return sorted(set(found.values())) or None


def _row(name, what, files, strip):
    try:
        sizes = [stripped_size(f, strip) for f in files]
    except (OSError, RuntimeError) as e:
        return {"name": name, "what": what, "error": str(e)}
    return {"name": name, "what": what, "files": [str(f) for f in files], "bytes": sum(sizes),
            "unstripped_bytes": sum(pathlib.Path(f).stat().st_size for f in files)}


def board_row(board=BOARD, build=True):
    """The row of the board build's edgerun-cli. build: build it when it is
    missing or stale. Without the cross compiler the row is skipped, not
    failed (make setup installs it); a failed build is an error."""
    from ..boards import build as board_build
    name, what = f"edgerun-cli ({board}, aarch64)", "edgerun: the device CLI, runtime linked in"
    cc = toolchain_tool(board, "c", "cc")
    if shutil.which(cc) is None:
        return {"name": name, "what": what, "skipped": f"{cc} is not installed (make setup installs it)"}
    try:
        bdir = board_build.ensure_built(board) if build else board_build.BuildConfig(board).build_dir()
    except Exception as e:     # noqa: BLE001 -- a failed cross build must not stop the other rows
        return {"name": name, "what": what, "error": f"{type(e).__name__}: {e}"}
    cli = bdir / "runtime_c" / "tools" / "edgerun-cli"
    if not cli.is_file():
        return {"name": name, "what": what, "error": f"{cli} is not built"}
    row = _row(f"edgerun-cli ({board}, {board_build.elf_machine(cli)})", what, [cli], toolchain_strip(board))
    if "bytes" in row:
        row["budget_bytes"] = BUDGET
    return row


def measure(board=BOARD, build=True, host_dir=None):
    """The footprint report (a dict; see the module docstring for its rows)."""
    rows = [board_row(board, build)]
    host = pathlib.Path(host_dir) if host_dir else host_build_dir()
    lib, cli = host / "runtime_c" / "libedgerun.so", host / "runtime_c" / "tools" / "edgerun-cli"
    for name, what, files in (("libedgerun.so (host)", "edgerun: the runtime library", [lib]),
                              ("edgerun-cli (host)", "edgerun: the CLI, runtime linked in", [cli]),
                              ("libedgerun.so + edgerun-cli (host)", "edgerun: both artefacts", [lib, cli])):
        missing = [f for f in files if not f.is_file()]
        rows.append({"name": name, "what": what, "error": f"{missing[0]} is not built"} if missing
                    else _row(name, what, files, "strip"))

    libs = llama_cpp_libs()
    name = "libllama + libggml* (host)"
    what = "llama.cpp: the libraries llama-cpp-python ships"
    if libs is None:
        rows.append({"name": name, "what": what, "skipped": "llama.cpp: not installed (pip install llama-cpp-python)"})
    else:
        rows.append(_row(name, what, libs, "strip"))
    return {"board": board, "rows": rows}


def format_table(rep):
    """Plain-text table: the rows, stripped bytes, and llama.cpp's over ours."""
    by = {r["name"]: r for r in rep["rows"]}
    peer = next((r for r in rep["rows"] if r["what"].startswith("llama.cpp") and "bytes" in r), None)
    lines = ["footprint: stripped copies (strip --strip-all), bytes on disk"]
    w = max(len(r["name"]) for r in rep["rows"])
    for r in rep["rows"]:
        if "bytes" not in r:
            lines.append(f"  {r['name']:<{w}}  {r.get('skipped') or 'not measured: ' + r['error']}")
            continue
        note = ""
        if "budget_bytes" in r:
            note = f"  (budget {r['budget_bytes']:,}: {'within' if r['bytes'] < r['budget_bytes'] else 'OVER'})"
        elif peer is not None and r is not peer:
            note = f"  (llama.cpp's libraries are {peer['bytes'] / r['bytes']:.1f}x this)"
        lines.append(f"  {r['name']:<{w}}  {r['bytes']:>11,}  {r['what']}{note}")
    if peer is not None and "libedgerun.so (host)" in by:
        lines.append("  like for like: libedgerun.so against libllama + libggml* (runtime libraries, same host, "
                     "same strip); llama-cpp-python ships no CLI")
    return "\n".join(lines)
