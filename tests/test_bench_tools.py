"""The C benchmark tools under scripts/ that docs/PERFORMANCE.md cites for its
figures still build (warnings as errors) and run: kernel_stream.c and
attention_stream.c against the build's static library, vnni_ports.c on its
own. They are not part of the runtime, so without this nothing would notice
a kernel-table change that breaks them until someone tries to re-measure.
Nothing here is timed."""
import os
import pathlib
import platform
import re
import shutil
import subprocess

import pytest

import edgerun

REPO = pathlib.Path(__file__).resolve().parent.parent
CFLAGS = ["-std=c11", "-D_GNU_SOURCE", "-O2", "-Wall", "-Wextra", "-Werror"]


def _cc():
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        pytest.skip("needs a C compiler")
    return cc


def _x86_flags():
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("x86 tools")
    with open("/proc/cpuinfo") as f:
        line = next((ln for ln in f if ln.startswith("flags")), "")
    return set(line.split(":", 1)[-1].split())


def test_kernel_stream_repacked_and_file_layout_agree(tmp_path):
    """One product of the native table's repacked Q4_0 layout and one of the
    file layout, same seeded matrix: the tool prints the first output, and
    the two layouts compute it bit for bit (test_repack's claim, seen
    through the tool)."""
    _x86_flags()
    exe = _build_against_lib(tmp_path, "kernel_stream")
    with edgerun.Model() as m:
        isa = m.isa
    if isa == "generic":
        pytest.skip("the generic table has no repacked layout")
    y0 = []
    for extra in ([], ["file"]):
        r = subprocess.run([str(exe), isa, "q4_0", "64", "512", "2", "2", *extra],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        got = re.search(r"m=2: [\d.]+ us, [\d.]+ GB/s, [\d.]+ GMAC/s \(y0 (\S+), ", r.stdout)
        assert got, r.stdout
        y0.append(got.group(1))
    assert y0[0] == y0[1]
    bad = subprocess.run([str(exe), isa, "q9_9", "64", "512", "1", "1"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "bad type" in bad.stderr


def _build_against_lib(tmp_path, name):
    lib = pathlib.Path(os.environ.get("EDGERUN_LIB", "")).parent / "libedgerun_internal.a"
    if not lib.is_file():
        pytest.skip(f"needs the build's {lib.name}")
    exe = tmp_path / name
    subprocess.run([_cc(), *CFLAGS, f"-I{REPO}/runtime_c/include", f"-I{REPO}/runtime_c/src",
                    str(REPO / "scripts" / f"{name}.c"), str(lib), "-lm", "-pthread", "-o", str(exe)],
                   check=True, timeout=300)
    return exe


def test_attention_stream_tables_agree_on_every_group(tmp_path):
    """The x86 tables take a K/V head's query heads 2 (avx2) or 4
    (avx512vnni) at a time and must give the same floats: the tool's output
    hash, per group size 1-5 and cache type, is the same from both tables
    this machine runs (from one where only one runs, that it runs)."""
    exe = _build_against_lib(tmp_path, "attention_stream")
    flags = _x86_flags()
    if "avx2" not in flags:
        pytest.skip("needs AVX2")
    tables = ["avx2"] + (["avx512vnni"] if {"avx512f", "avx512vl", "avx512bw", "avx512_vnni"} <= flags else [])
    for group in range(1, 6):
        for extra in ([], ["f32"]):
            hashes = set()
            for t in tables:
                r = subprocess.run([str(exe), t, "3", str(group), "64", "37", "1", "1", *extra],
                                   capture_output=True, text=True, timeout=60)
                assert r.returncode == 0, r.stderr
                got = re.search(r"scores [\d.]+ us .* sums [\d.]+ us .*outputs ([0-9a-f]{8})$", r.stdout.strip())
                assert got, r.stdout
                hashes.add(got.group(1))
            assert len(hashes) == 1, (group, extra, hashes)
    bad = subprocess.run([str(exe), "avx2", "0", "1", "64", "8", "1", "1"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "bad shape" in bad.stderr


def test_vnni_ports_builds_and_reports_each_mix(tmp_path):
    flags = _x86_flags()
    exe = tmp_path / "vnni_ports"
    subprocess.run([_cc(), *CFLAGS, str(REPO / "scripts" / "vnni_ports.c"), "-o", str(exe)], check=True, timeout=120)
    if not {"avx512f", "avx512_vnni"} <= flags:
        pytest.skip("built; running it needs AVX-512 VNNI")
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = re.findall(r"^(16 .+?)\s+([\d.]+) cycles$", r.stdout, re.M)
    assert [name for name, _ in rows][:2] == ["16 VPDPBUSD zmm", "16 VPDPBUSD + 4 VMULPS"]
    assert len(rows) == 7 and all(float(c) > 0 for _, c in rows)
