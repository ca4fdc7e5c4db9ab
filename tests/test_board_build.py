"""The board driver end to end: `edgerun build --board rpi5` (a real aarch64 cross
build into build/rpi5/), its kernels and model checks under qemu-user, `edgerun
doctor`. Skipped when the cross compiler, its libc or qemu-user are missing
(scripts/setup.sh installs them). The cross build is shared by the whole session;
the full `edgerun test --board rpi5` (every C test under emulation) is -m long."""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("yaml")

from edgerun.boards import build, prereqs, qemu, tests as board_test  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]

for _tool in ("aarch64-linux-gnu-gcc", "qemu-aarch64", "sysroot", "meson", "ninja"):
    _ok, _why = prereqs.CHECKS[_tool].run()
    if not _ok:
        pytestmark = pytest.mark.skip(reason=f"{_tool} missing: {prereqs.CHECKS[_tool].fix}")
        break


def edgerun(*args, timeout=900):
    env = dict(os.environ, PYTHONPATH=str(REPO / "pybind"))
    return subprocess.run([sys.executable, "-m", "edgerun", *args], capture_output=True, text=True,
                          env=env, cwd=str(REPO), timeout=timeout)


@pytest.fixture(scope="session")
def rpi5_build():
    r = edgerun("build", "--board", "rpi5")
    assert r.returncode == 0, r.stderr[-3000:]
    return REPO / "build" / "rpi5", r.stdout


def test_build_produces_aarch64_artefacts(rpi5_build):
    bdir, out = rpi5_build
    lib, cli = bdir / "runtime_c" / "libedgerun.so", bdir / "runtime_c" / "tools" / "edgerun-cli"
    for p in (lib, cli):
        assert p.is_file() and build.elf_machine(p) == "aarch64"
    lines = out.splitlines()
    assert lines[0].startswith("built rpi5 in build/rpi5 (gcc, release)")
    lib_line = next(ln for ln in lines if "libedgerun.so" in ln)
    assert lib_line.split()[-1] == "aarch64" and lib_line.split()[-2] in ("KiB", "MiB")
    assert any("edgerun-cli" in ln for ln in lines)
    assert build.test_executables(bdir)
    # the board's flags reached the compiler, the toolchain's baseline did not
    cmds = json.loads(subprocess.run(["ninja", "-C", str(bdir), "-t", "compdb"], capture_output=True,
                                     text=True, check=True).stdout)
    q = next(c["command"] for c in cmds if c["file"].endswith("neon/q_neon.c") and "DOTPROD=0" in c["command"])
    assert "-mcpu=cortex-a76" in q and "-march=armv8-a " not in q


def test_build_again_is_incremental(rpi5_build):
    r = edgerun("build", "--board", "rpi5", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    # nothing to redo (other work in a shared checkout may touch a file or two
    # meanwhile: the point is no reconfigure and no full rebuild)
    assert not rep["configured"]
    assert rep["steps"] <= 5, rep
    assert {a["path"] for a in rep["artefacts"]} == {"build/rpi5/runtime_c/libedgerun.so",
                                                      "build/rpi5/runtime_c/tools/edgerun-cli"}


def test_both_neon_tables_under_cortex_a76(rpi5_build):
    """The dotprod-naming fix: with -mcpu=cortex-a76 the build links both the plain
    NEON and the SDOT table, and each matches generic under qemu's Cortex-A76."""
    bdir, _ = rpi5_build
    r = qemu.run("rpi5", "cortex-a76", [bdir / "runtime_c" / "tests" / "test_kernels_isa"], timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    status = {ln.split()[1]: ln.split()[-1] for ln in r.stdout.splitlines() if ln.startswith("table ")}
    assert status.get("neon") == "ok" and status.get("neon-dotprod") == "ok", r.stdout[-2000:]


def test_qemu_run_api_and_cpu_model(rpi5_build):
    bdir, _ = rpi5_build
    cli = bdir / "runtime_c" / "tools" / "edgerun-cli"
    r = qemu.run("rpi5", "cortex-a76", [cli, "--version"], timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("edgerun-cli ")
    # QEMU_CPU reaches qemu: the runtime's kernel choice follows the CPU model
    # (every aarch64 build carries the SVE table; it is picked at >= 256 bits)
    prompts = bdir / "edgerun-test" / "pytest-prompts.txt"
    board_test.write_prompts(prompts, 2)
    for cpu, isa in (("cortex-a76", "neon-dotprod"), ("max,sve256=on", "sve")):
        r = qemu.run("rpi5", cpu, [cli, "eval", board_test.model_path(), prompts, "-n", "6"], timeout=300)
        assert r.returncode == 0, r.stderr
        header, rows = board_test.parse_eval(r.stdout)
        assert header["isa"] == isa and len(rows) == 2
    r = qemu.run("rpi5", "cortex-a76", [cli, "eval", board_test.model_path()], timeout=120)
    assert r.returncode == 2 and "needs a PROMPTS.txt" in r.stderr


def test_model_checks_rpi5(rpi5_build):
    """edgerun test --board rpi5 without the C tests: answers and logits vs build/host."""
    r = edgerun("test", "--board", "rpi5", "--no-c-tests", "--problems", "16", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    rep = json.loads(r.stdout)
    assert rep["ok"] and rep["board"] == "rpi5"
    checks = {(x["cpu"], x["check"]): x for x in rep["results"]}
    assert set(checks) == {("cortex-a76", "answers"), ("cortex-a76", "logits")}
    assert checks[("cortex-a76", "answers")]["detail"].startswith("16/16 correct")
    assert checks[("cortex-a76", "logits")]["max_abs_diff"] < board_test.LOGITS_ATOL
    assert "qemu -cpu" in r.stderr and "PASS" in r.stderr


@pytest.mark.long
def test_full_board_test_rpi5(rpi5_build):
    r = edgerun("test", "--board", "rpi5", timeout=1800)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "PASS" in r.stdout and "c-tests" in r.stdout


def test_doctor_output():
    r = edgerun("doctor")
    lines = r.stdout.splitlines()
    row = {ln.split()[0]: ln.split()[1] for ln in lines if ln.startswith("  ")}
    for name in ("aarch64-linux-gnu-gcc", "qemu-aarch64", "sysroot", "meson", "ninja"):
        assert row[name] == "ok"
    missing = [n for n, s in row.items() if s == "MISSING"]
    assert r.returncode == (1 if missing else 0)
    if not missing:
        assert lines[-1] == "everything the board driver needs is here"


def test_tools_present_here_match_shutil():
    assert prereqs.CHECKS["qemu-aarch64"].run()[0] == bool(shutil.which("qemu-aarch64"))
