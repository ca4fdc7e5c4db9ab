"""`edgerun bench --footprint`: the sizes are those of real stripped copies,
llama.cpp's row is its real libraries (each file once) or cleanly skipped.

The rpi5 row is checked where the board's cross build is already there
(`make test-boards` or `make bench` builds it); building it here would cost
minutes of CI."""
import importlib.machinery
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from edgerun.bench import footprint

REPO = pathlib.Path(__file__).resolve().parent.parent
HOST = footprint.host_build_dir()
LIB = HOST / "runtime_c" / "libedgerun.so"
BOARD_CLI = REPO / "build" / footprint.BOARD / "runtime_c" / "tools" / "edgerun-cli"

need_host = pytest.mark.skipif(not LIB.is_file() or shutil.which("strip") is None,
                               reason="needs the host build and strip")


@need_host
def test_stripped_copy_is_smaller_and_leaves_the_original(tmp_path):
    before = LIB.stat().st_size
    n = footprint.stripped_size(LIB)
    assert 100_000 < n < before            # the symbol table is gone, the code is not
    assert LIB.stat().st_size == before    # a copy was stripped, not the build's file
    with pytest.raises(RuntimeError):
        bad = tmp_path / "not-elf"
        bad.write_bytes(b"hello")
        footprint.stripped_size(bad)
    with pytest.raises(FileNotFoundError):
        footprint.stripped_size(LIB, strip="no-such-strip-tool")


def test_board_strip_comes_from_its_toolchain():
    assert footprint.toolchain_strip("rpi5") == "aarch64-linux-gnu-strip"
    assert footprint.toolchain_strip("host") == "strip"


CLI = HOST / "runtime_c" / "tools" / "edgerun-cli"


def _fake_llama_cpp(tmp_path, monkeypatch):
    """A llama_cpp package dir as pip writes one: versioned libraries, their
    other names as symlinks or (a wheel holds no links) as equal copies.
    Three different ELF files stand in for libllama, libggml and libggml-base."""
    lib = tmp_path / "llama_cpp" / "lib"
    lib.mkdir(parents=True)
    elves = {"libllama.so.0.5.0": LIB, "libggml.so.0.25.3": CLI, "libggml-base.so.0.25.3": shutil.which("ls"),
             "libmtmd.so.0.5.0": shutil.which("cat")}
    for name, src in elves.items():
        shutil.copy(src, lib / name)
    for link, target in (("libllama.so", "libllama.so.0.5.0"), ("libllama.so.0", "libllama.so.0.5.0"),
                         ("libggml-base.so", "libggml-base.so.0.25.3")):
        os.symlink(target, lib / link)
    for copy, target in (("libggml.so", "libggml.so.0.25.3"), ("libggml.so.0", "libggml.so.0.25.3")):
        shutil.copy(lib / target, lib / copy)
    spec = importlib.machinery.ModuleSpec("llama_cpp", None, is_package=True)
    spec.submodule_search_locations = [str(tmp_path / "llama_cpp")]
    real = footprint.importlib.util.find_spec
    monkeypatch.setattr(footprint.importlib.util, "find_spec",
                        lambda name, *a: spec if name == "llama_cpp" else real(name, *a))
    return lib, elves


@need_host
def test_llama_libraries_counted_once_without_mtmd(tmp_path, monkeypatch):
    lib, elves = _fake_llama_cpp(tmp_path, monkeypatch)
    libs = footprint.llama_cpp_libs()
    assert len(libs) == 3 and not any("mtmd" in p.name for p in libs)
    assert {p.read_bytes() for p in libs} == {pathlib.Path(elves[n]).read_bytes() for n in
                                             ("libllama.so.0.5.0", "libggml.so.0.25.3", "libggml-base.so.0.25.3")}
    rep = footprint.measure(build=False)
    row = next(r for r in rep["rows"] if r["what"].startswith("llama.cpp"))
    assert row["bytes"] == sum(footprint.stripped_size(p) for p in libs)
    ours = next(r for r in rep["rows"] if r["name"] == "libedgerun.so (host)")
    both = next(r for r in rep["rows"] if r["name"] == "libedgerun.so + edgerun-cli (host)")
    assert ours["bytes"] == footprint.stripped_size(LIB) and both["bytes"] > ours["bytes"]
    text = footprint.format_table(rep)
    assert f"llama.cpp's libraries are {row['bytes'] / ours['bytes']:.1f}x this" in text and "like for like" in text


@need_host
def test_llama_row_skipped_cleanly_when_absent(monkeypatch):
    real = footprint.importlib.util.find_spec
    monkeypatch.setattr(footprint.importlib.util, "find_spec",
                        lambda name, *a: None if name == "llama_cpp" else real(name, *a))
    rep = footprint.measure(build=False)
    row = rep["rows"][-1]
    assert "bytes" not in row and "not installed" in row["skipped"]
    assert "not installed" in footprint.format_table(rep)
    assert all("bytes" in r for r in rep["rows"][1:-1])      # the host rows still measured


@pytest.mark.skipif(not BOARD_CLI.is_file() or shutil.which("aarch64-linux-gnu-strip") is None,
                    reason="needs the rpi5 cross build and aarch64-linux-gnu-strip")
def test_cli_reports_the_aarch64_cli_within_budget(tmp_path):
    out = tmp_path / "fp.json"
    env = dict(os.environ, PYTHONPATH=str(REPO / "pybind"))
    r = subprocess.run([sys.executable, "-m", "edgerun", "bench", "--footprint", "--out", str(out)],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    row = json.loads(out.read_text())["rows"][0]
    assert row["name"] == "edgerun-cli (rpi5, aarch64)"
    assert row["bytes"] == footprint.stripped_size(BOARD_CLI, "aarch64-linux-gnu-strip")
    assert row["bytes"] < row["budget_bytes"]
    assert "edgerun-cli (rpi5, aarch64)" in r.stdout and "within" in r.stdout


def test_board_row_skipped_without_the_cross_compiler(monkeypatch):
    real = footprint.shutil.which
    monkeypatch.setattr(footprint.shutil, "which",
                        lambda name, *a: None if name == "aarch64-linux-gnu-gcc" else real(name, *a))
    row = footprint.board_row("rpi5", build=True)
    assert "bytes" not in row and "error" not in row
    assert "aarch64-linux-gnu-gcc is not installed" in row["skipped"]
    assert "not installed" in footprint.format_table({"board": "rpi5", "rows": [row]})


def test_footprint_refuses_a_model_argument():
    env = dict(os.environ, PYTHONPATH=str(REPO / "pybind"))
    r = subprocess.run([sys.executable, "-m", "edgerun", "bench", "x.gguf", "--footprint"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "--footprint" in (r.stderr + r.stdout)
