"""`edgerun release --board rpi5` with every step real: the cross build
(build/rpi5, shared with `make test-boards`), `edgerun test` under qemu-user
(C tests, held-out answers, logits against the host build), the bench gates on
qemu measurements against benchmarks/baselines/rpi5.json, the signed bundle,
publishing to a folder; then a device pulls it from there with
`edgerun flash --from`, whose health check runs the slot's aarch64 CLI under
qemu. No report is passed in.

Two sizes of the same chain: the CI one (4 held-out problems, 3 bench runs;
the gates still compare the baseline's workload; marker qemu, so `make
test-qemu` runs it in .ci/run after test-boards has made the builds) and, marked `long`, the
release defaults (32 problems, 5 bench runs), after which the flashed device
serves its model with `edgerun serve --config` under the board's Python. The
qemu C tests dominate both (~100-125 s of ~150-165 s on a loaded 2-core VM
with the builds cached); the long one is `long` for the board's Python: a
126 MiB sysroot that needs deb.debian.org and PyPI the first time.
"""
import json
import os
import subprocess
import sys

import pytest

import ota_helpers as H
from edgerun import boards
from edgerun.boards import prereqs
from edgerun.ota import publish

BOARD = "rpi5"


def _missing_tools():
    b = boards.load(BOARD)
    try:
        prereqs.require(*prereqs.for_build(b), *prereqs.for_run(b))
    except Exception as e:       # noqa: BLE001 - the one-line reason is the skip message
        return str(e)
    return None


_MISSING = _missing_tools()
pytestmark = pytest.mark.skipif(bool(_MISSING), reason=f"the rpi5 chain cannot run here: {_MISSING}")


def _cli(*args, timeout=1800):
    return subprocess.run([sys.executable, "-m", "edgerun", *map(str, args)], capture_output=True, text=True,
                          env=H.PY_ENV, timeout=timeout)


def _elf_machine(path):
    with open(path, "rb") as f:
        head = f.read(20)
    assert head[:4] == b"\x7fELF", path
    return int.from_bytes(head[18:20], "little")


def _real_chain(tmp_path, version, extra):
    key, cert = H.make_keys(tmp_path / "keys")
    www, dev = tmp_path / "www", tmp_path / "device"
    for attempt in (1, 2):
        rd = tmp_path / f"report-{attempt}"
        r = _cli("release", "--board", BOARD, "--model", H.MODEL, "--version", version, "--key", key,
                 "--cert", cert, "--to", www, "--report-dir", rd, "--json", *extra)
        last = (r.stderr.strip().splitlines() or [""])[-1]
        if r.returncode == 0 or attempt == 2 or "bench gate failed: " not in last:
            break
        # Emulated timings on a shared host: a busy minute can push either
        # gate over its limit (seen on a VM with load 12-15: p99/p50 1.61
        # against 1.5, normalized tokens/s 1.8% under the floor). The refusal
        # is checked for what it must be (one line, no bundle, nothing
        # published, the plot kept), and a second run decides.
        rep = json.loads((rd / "release.json").read_text())
        assert rep["ok"] is False and rep["steps"][-1]["step"] == "bench", rep
        assert not list(rd.glob("*.swu")) and not www.exists() and (rd / f"bench-{BOARD}.png").is_file()
    assert r.returncode == 0, r.stderr[-4000:]
    doc = json.loads(r.stdout)
    assert doc["ok"] and [s["step"] for s in doc["steps"]] == ["build", "test", "bench", "package", "publish"]
    assert all(s["ok"] for s in doc["steps"])

    # build: the board's own cross build, an aarch64 library
    build = json.loads((rd / "build.json").read_text())
    bdir = H.REPO / "build" / BOARD
    assert build["build_dir"] == str(bdir)
    assert _elf_machine(bdir / "runtime_c" / "libedgerun.so") == 183          # EM_AARCH64
    assert build["libedgerun_sha256"] == publish.sha256_file(bdir / "runtime_c" / "libedgerun.so")

    # test: run here under qemu, every check of every CPU model the board lists
    test = json.loads((rd / "test.json").read_text())
    cpus = boards.load(BOARD).qemu_cpus
    assert test["board"] == BOARD and test["ok"] and test["build_dir"] == str(bdir)
    assert {(x["cpu"], x["check"]) for x in test["results"]} == {(c, k) for c in cpus
                                                                 for k in ("c-tests", "answers", "logits")}
    answers = [x for x in test["results"] if x["check"] == "answers"]
    assert all(x["isa"] != "avx2" and x["detail"].startswith(f"{test['problems']}/{test['problems']} correct")
               for x in answers), answers

    # bench: measured under qemu now, both gates evaluated; the regression gate
    # against the stored baseline applied (the workload matches it), not skipped
    bench = json.loads((rd / f"bench-{BOARD}.json").read_text())
    assert bench["board"] == BOARD and set(bench["cpus"]) == set(cpus)
    gates = bench["gates"]
    assert {(g["gate"], g["cpu"]) for g in gates} == {(k, c) for c in cpus
                                                      for k in ("p99_over_p50", "normalized_tokens_per_s")}
    assert all(g["ok"] is True for g in gates), [g["message"] for g in gates]
    assert (rd / f"bench-{BOARD}.png").stat().st_size > 1000

    # package + publish: the signed bundle carries the build the test and bench ran
    man = json.loads((rd / "package.json").read_text())
    assert man["board"] == BOARD and man["version"] == version
    idx = publish.parse_index((www / "index.json").read_text())
    (e,) = idx["releases"]
    assert (e["board"], e["version"], e["hardware"]) == (BOARD, version, "raspberrypi5")
    assert publish.sha256_file(www / e["path"]) == e["sha256"] == doc["sha256"]

    # a device installs it from the folder; the health check runs the slot's
    # aarch64 edgerun-cli under qemu on the slot's model
    dev.mkdir()
    r = _cli("flash", "--from", www, "--board", BOARD, "--target", dev, "--cert", cert, "--json", "-q",
             timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    ev = json.loads(r.stdout)
    assert (ev["slot"], ev["version"]) == ("rootfs-a", version)
    assert os.readlink(dev / "current") == "rootfs-a"
    slot = dev / "rootfs-a"
    assert publish.sha256_file(slot / "lib" / "libedgerun.so") == build["libedgerun_sha256"]
    assert _elf_machine(slot / "bin" / "edgerun-cli") == 183
    from edgerun import ota
    hist = ota.history(ota.LocalTarget(dev))
    assert hist and hist[-1]["action"] == "activate" and hist[-1]["version"] == version, hist
    return doc, dev


def _serve_on_the_device(dev):
    """`edgerun serve --config DEVICE_ROOT` as the board runs it: the board's
    Python (the sysroot, under qemu), the active slot's library, model and
    edgerun.yaml."""
    from edgerun.boards import device_python, sysroot
    b = boards.load(BOARD)
    root = boards.repo_root()
    sysroot.assemble(b.arch, root=root, log=lambda *a: None)
    sroot = sysroot.sysroot_dir(b.arch, root)
    env = device_python.environment(sroot, root, dev / "current" / "lib" / "libedgerun.so")
    ok, detail, out = device_python.run_serve([b.qemu_binary, "-L", str(sroot), "-cpu", b.qemu_cpus[0],
                                               str(sysroot.python_path(sroot))], env, root,
                                              serve_args=["--config", str(dev)])
    assert ok, f"{detail}\n{out[-3000:]}"


@pytest.mark.qemu
def test_release_rpi5_real_chain_ci_size(tmp_path):
    """The whole chain, sized for CI: 4 problems, 3 bench runs (the median of
    3 per step keeps one slow run on a shared CI machine off the p99 gate)."""
    _real_chain(tmp_path, "1.0.0", ["--problems", "4", "--bench-repeat", "3"])


@pytest.mark.long
def test_release_rpi5_real_chain_defaults(tmp_path):
    """The release a tag's CI job runs: 32 held-out problems, 5 bench runs;
    then the installed device serves its model over HTTP (edgerun serve
    --config under the board's Python; assembles the sysroot when needed,
    which needs deb.debian.org and PyPI the first time)."""
    _, dev = _real_chain(tmp_path, "1.0.0", [])
    _serve_on_the_device(dev)
