"""Greedy tokens of every model family equal on the Arm kernel tables under
qemu-aarch64 (neon on cortex-a72, neon-dotprod on cortex-a76, sve at 128 and
256 bits) and the native generic table. Marked long: the static aarch64 CLI
takes scripts/test_isa_greedy_qemu.sh's build (~2 minutes on 2 cores) and
each emulated run ~8 s. Skipped without the cross tools, qemu or the shared
data. Run with `pytest -m long tests/test_families_qemu.py`.
"""
import os
import pathlib
import shutil
import subprocess

import pytest

from family_files import FAMILIES, llamacpp_file

REPO = pathlib.Path(__file__).resolve().parent.parent
CPUS = (("cortex-a72", "neon"), ("cortex-a76", "neon-dotprod"), ("max,sve128=on", "sve"), ("max,sve256=on", "sve"))

pytestmark = pytest.mark.long


def _native_cli():
    p = os.environ.get("EDGERUN_CLI")
    return pathlib.Path(p) if p else REPO / "build" / "native" / "runtime_c" / "tools" / "edgerun-cli"


@pytest.fixture(scope="module")
def arm_cli(tmp_path_factory):
    if not (shutil.which("qemu-aarch64") and shutil.which("aarch64-linux-gnu-gcc")):
        pytest.skip("qemu-aarch64 or aarch64-linux-gnu-gcc is not installed")
    build = tmp_path_factory.mktemp("families-qemu")
    r = subprocess.run(["sh", str(REPO / "scripts" / "test_isa_greedy_qemu.sh")], capture_output=True, text=True,
                       env=dict(os.environ, BUILD=str(build), EDGERUN_CLI=str(_native_cli())), timeout=1200)
    if r.returncode == 77:
        pytest.skip(r.stdout.strip())
    assert (build / "edgerun-cli").is_file(), r.stdout + r.stderr
    return build / "edgerun-cli"


def _ids(cmd, path, isa):
    r = subprocess.run([*cmd, "run", str(path), "Once upon a time", "-n", "16", "--print-ids", "--no-echo", "-t", "2",
                        "--isa", isa], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


@pytest.mark.parametrize("fam", FAMILIES)
def test_arm_tables_give_native_generic_tokens(shared_data, arm_cli, fam):
    path = llamacpp_file(shared_data, fam)
    want = _ids([str(_native_cli())], path, "generic")
    assert len(want) == 16
    for cpu, isa in CPUS:
        assert _ids(["qemu-aarch64", "-cpu", cpu, str(arm_cli)], path, isa) == want, (cpu, isa)
