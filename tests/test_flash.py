"""edgerun flash / rollback on a device root that is a folder: A/B writes, health
check, atomic switch, history, and safety under bad input and SIGKILL."""
import json
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest

import ota_helpers as H
from edgerun import ota
from edgerun.errors import OtaError


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("flash")
    key, cert = H.make_keys(d / "keys")
    b1, b2 = d / "v1.swu", d / "v2.swu"
    H.make_bundle(b1, "1.0.0", key, cert, "/opt/edgerun")
    H.make_bundle(b2, "1.1.0", key, cert, "/opt/edgerun")
    return {"dir": d, "key": key, "cert": cert, "v1": b1, "v2": b2}


def cli(*args, check=False):
    r = subprocess.run([sys.executable, "-m", "edgerun", *map(str, args)], capture_output=True, text=True,
                       env=H.PY_ENV, timeout=300)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def state(root):
    """(active slot, its version) after checking that it is complete and healthy."""
    t = ota.LocalTarget(root)
    active = ota.active_slot(t)
    assert active is not None, f"{root}: no active slot"
    ok, msg = ota.health_check(t, active)
    assert ok, msg
    return active, json.loads((pathlib.Path(root) / active / "manifest.json").read_text())["version"]


def fresh_device(tmp_path, env, name="dev"):
    dev = tmp_path / name
    dev.mkdir()
    cli("flash", env["v1"], "--board", "host", "--target", dev, "--cert", env["cert"], "-q", check=True)
    assert state(dev) == ("rootfs-a", "1.0.0")
    return dev


def test_flash_switch_rollback_history(env, tmp_path):
    dev = fresh_device(tmp_path, env)
    r = cli("flash", env["v2"], "--board", "host", "--target", dev, "--cert", env["cert"], "-q", check=True)
    assert "now on rootfs-b (version 1.1.0), was rootfs-a" in r.stdout
    assert os.readlink(dev / "current") == "rootfs-b"
    assert state(dev) == ("rootfs-b", "1.1.0")
    assert (dev / "rootfs-a" / "manifest.json").exists()            # the old slot is kept
    rep = json.loads(cli("flash", "--status", "--board", "host", "--target", dev, "--json", check=True).stdout)
    assert rep["active"] == "rootfs-b" and rep["slots"]["rootfs-a"]["version"] == "1.0.0"
    cli("rollback", "--board", "host", "--target", dev, check=True)
    assert state(dev) == ("rootfs-a", "1.0.0")
    # --no-downgrade: 1.0.0 over the active 1.1.0 is refused, the same version is fine
    cli("rollback", "--board", "host", "--target", dev, check=True)
    r = cli("flash", env["v1"], "--board", "host", "--target", dev, "--cert", env["cert"], "--no-downgrade")
    assert r.returncode == 1 and "older than the installed 1.1.0" in r.stderr
    assert state(dev) == ("rootfs-b", "1.1.0")
    actions = [(e["action"], e["slot"]) for e in ota.history(ota.LocalTarget(dev))]
    assert actions == [("install", "rootfs-a"), ("activate", "rootfs-a"), ("install", "rootfs-b"),
                       ("activate", "rootfs-b"), ("rollback", "rootfs-a"), ("rollback", "rootfs-b")]
    # the slot runs through the Python API too, from its own config
    from edgerun.ota import device_config
    cfg = device_config.load(dev / "current" / "edgerun.yaml")
    with device_config.open_model(cfg) as m:
        assert device_config.generate(cfg, m, max_tokens=cfg["health_check"]["max_tokens"]) == \
            cfg["health_check"]["expect"]


def test_failed_health_check_keeps_the_active_slot(env, tmp_path):
    dev = fresh_device(tmp_path, env)
    bad = H.resign(env["v2"], tmp_path / "bad.swu", env["key"], env["cert"],
                   edit_manifest=lambda m: m["health_check"].update(expect="99999"))
    before = H.tree(dev / "rootfs-a")
    r = cli("flash", bad, "--board", "host", "--target", dev, "--cert", env["cert"], "-q")
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert "health check failed" in r.stderr and "generated '64000'" in r.stderr and "expected '99999'" in r.stderr
    assert state(dev) == ("rootfs-a", "1.0.0") and H.tree(dev / "rootfs-a") == before
    assert ota.history(ota.LocalTarget(dev))[-1]["action"] == "health-failed"


@pytest.mark.parametrize("case", ["corrupt", "unsigned", "foreign-key", "other-board", "missing-bundle"])
def test_bad_bundles_leave_the_device_untouched(env, tmp_path, case):
    dev = fresh_device(tmp_path, env)
    before = H.tree(dev)
    bundle, board, want = env["v2"], "host", None
    if case == "corrupt":
        data = bytearray(env["v2"].read_bytes())
        data[len(data) // 2] ^= 0xFF                                     # inside the model
        bundle = tmp_path / "corrupt.swu"
        bundle.write_bytes(data)
        want = "damaged"
    elif case == "unsigned":
        bundle = H.resign(env["v2"], tmp_path / "unsigned.swu", env["key"], env["cert"], drop_sig=True)
        want = "unsigned"
    elif case == "foreign-key":
        from edgerun.ota.keygen import keygen
        k2, c2 = keygen(tmp_path / "k2")
        bundle = H.resign(env["v2"], tmp_path / "foreign.swu", k2, c2)
        want = "signature does not verify"
    elif case == "other-board":
        board, want = "rpi5", "is for hardware 'host', this device is 'raspberrypi5'"
    else:
        bundle, want = tmp_path / "nope.swu", "no such bundle file"
    r = cli("flash", bundle, "--board", board, "--target", dev, "--cert", env["cert"], "-q")
    assert r.returncode == 1, r.stdout
    assert r.stderr.startswith("edgerun: error: ") and r.stderr.count("\n") == 1, r.stderr
    assert want in r.stderr, r.stderr
    assert H.tree(dev) == before                  # not a byte written, history included
    assert state(dev) == ("rootfs-a", "1.0.0")


def test_missing_model_in_a_slot_is_refused(env, tmp_path):
    dev = fresh_device(tmp_path, env)
    cli("flash", env["v2"], "--board", "host", "--target", dev, "--cert", env["cert"], "-q", check=True)
    (dev / "rootfs-a" / "models" / "edgerun-add.gguf").unlink()
    r = cli("rollback", "--board", "host", "--target", dev)
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert "cannot roll back to rootfs-a: rootfs-a/models/edgerun-add.gguf is missing" in r.stderr
    assert state(dev) == ("rootfs-b", "1.1.0")


def _try_mount_tmpfs(path, size):
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    return r.returncode == 0


def test_full_disk(env, tmp_path):
    dev = tmp_path / "small"
    dev.mkdir()
    with ota.verify(env["v1"], env["cert"]) as b:
        slot_bytes = sum(i["bytes"] for i in b.manifest["files"].values())
    # room for one slot, not two
    if not _try_mount_tmpfs(dev, f"{int(slot_bytes * 1.6) // 1024}k"):
        pytest.skip("cannot mount a tmpfs here (needs root and CAP_SYS_ADMIN)")
    try:
        cli("flash", env["v1"], "--board", "host", "--target", dev, "--cert", env["cert"], "-q", check=True)
        before = H.tree(dev / "rootfs-a")
        r = cli("flash", env["v2"], "--board", "host", "--target", dev, "--cert", env["cert"], "-q")
        assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
        assert "not enough space for slot rootfs-b" in r.stderr and "rootfs-a is untouched" in r.stderr
        assert state(dev) == ("rootfs-a", "1.0.0") and H.tree(dev / "rootfs-a") == before
        # the up-front estimate is not the only guard: with it out of the way the
        # writes run into ENOSPC midway, and that too ends cleanly
        t = ota.LocalTarget(dev)
        t.free_bytes = lambda: None            # "unknown", as a device without statvfs would say
        with ota.verify(env["v2"], env["cert"]) as b, pytest.raises(OtaError, match="disk filled up"):
            ota.install(b, t)
        assert not (dev / ".rootfs-b.partial").exists()
        assert state(dev) == ("rootfs-a", "1.0.0") and H.tree(dev / "rootfs-a") == before
    finally:
        subprocess.run(["umount", str(dev)], check=False)


def _kill_loop(env, dev, board, n, seed, state=state):
    """Starts `edgerun flash` and SIGKILLs it after a random delay, n times,
    alternating the two bundles; after every kill the active slot must be
    complete and pass its health check."""
    rng = random.Random(seed)
    argv = [sys.executable, "-m", "edgerun", "flash", "--board", board, "--target", str(dev), "--cert",
            str(env["cert"]), "-q"]
    full = 0.0
    for b in (env["v2"], env["v1"]):          # how long a whole flash takes here, now
        t0 = time.monotonic()
        subprocess.run(argv + [str(b)], env=H.PY_ENV, check=True, capture_output=True)
        full = max(full, time.monotonic() - t0)
    outcomes = {"old": 0, "new": 0}
    for i in range(n):
        before = state(dev)
        bundle = env["v1"] if before[1] == "1.1.0" else env["v2"]
        p = subprocess.Popen(argv + [str(bundle)], env=H.PY_ENV, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        # up to 1.3x: on a busy machine a run can take longer than the measured one
        time.sleep(rng.uniform(0.0, full * 1.3))
        p.send_signal(signal.SIGKILL)
        p.wait()
        after = state(dev)                 # complete and healthy, whichever slot it is
        outcomes["old" if after == before else "new"] += 1
    # the kills landed before and after the switch; a last, uninterrupted flash
    # cleans up whatever a kill left behind and works
    r = subprocess.run(argv + [str(env["v2"] if state(dev)[1] == "1.0.0" else env["v1"])], env=H.PY_ENV,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert not any(p.name.endswith((".partial", ".old")) for p in dev.iterdir())
    return outcomes


def test_sigkill_at_random_points_host(env, tmp_path):
    dev = fresh_device(tmp_path, env)
    outcomes = _kill_loop(env, dev, "host", 50, seed=6)
    assert outcomes["old"] > 0 and outcomes["new"] > 0, outcomes


@pytest.fixture(scope="module")
def rpi5_env(env, tmp_path_factory):
    from edgerun.errors import BoardError
    d = tmp_path_factory.mktemp("flash_rpi5")
    out = dict(env)
    try:
        for name, v in (("v1", "1.0.0"), ("v2", "1.1.0")):
            H.make_bundle(d / f"{name}.swu", v, env["key"], env["cert"], "/opt/edgerun", board="rpi5")
            out[name] = d / f"{name}.swu"
    except BoardError as e:          # MissingToolError included: no cross compiler, qemu or sysroot
        pytest.skip(f"cannot build for rpi5 here: {e}")
    return out


def test_rpi5_under_qemu_with_kills(rpi5_env, tmp_path):
    """The Arm board: the health check runs the slot's aarch64 CLI under
    qemu-aarch64; fewer kills than the host variant (each run costs emulation)."""
    dev = tmp_path / "pi"
    dev.mkdir()
    cli("flash", rpi5_env["v1"], "--board", "rpi5", "--target", dev, "--cert", rpi5_env["cert"], "-q", check=True)
    from edgerun.boards.build import elf_machine
    assert elf_machine(dev / "current" / "bin" / "edgerun-cli") == "aarch64"
    t = ota.LocalTarget(dev)                       # no qemu runner: an aarch64 binary cannot run here directly
    ok, msg = ota.health_check(t, "rootfs-a")
    assert not ok and "cannot run the slot's runtime: Exec format error" in msg
    from edgerun.ota import flash
    ok, msg = ota.health_check(flash.open_target(dev, "rpi5"), "rootfs-a")
    assert ok, msg
    r = cli("flash", H.REPO / "x.swu", "--board", "rpi5", "--target", dev, "--cert", rpi5_env["cert"])
    assert r.returncode == 1
    # a host bundle is refused by an rpi5 device
    r = cli("flash", rpi5_env["v2"], "--board", "host", "--target", dev, "--cert", rpi5_env["cert"])
    assert r.returncode == 1 and "is for hardware 'raspberrypi5', this device is 'host'" in r.stderr

    def qstate(root):
        tq = flash.open_target(root, "rpi5")
        active = ota.active_slot(tq)
        ok, msg = ota.health_check(tq, active)
        assert ok, msg
        return active, json.loads((root / active / "manifest.json").read_text())["version"]

    outcomes = _kill_loop(rpi5_env, dev, "rpi5", 8, seed=5, state=qstate)
    assert sum(outcomes.values()) == 8


# ------------------------------------------------------------------ device configuration

def test_device_config_errors_name_the_field(tmp_path):
    from edgerun.ota import device_config
    from edgerun.errors import ConfigError
    good = {"model": {"path": "m.gguf"}, "health_check": {"prompt": "p", "expect": "e"}}
    assert device_config.validate(good)["threads"]["count"] == 1
    cases = [
        ({"threads": {"count": 0}}, "threads.count"),
        ({"threads": {"pin": [0, "x"]}}, "threads.pin[1]"),
        ({"threads": {"pin": [1, 1]}}, "threads.pin"),
        ({"sampling": {"top_p": 1.5}}, "sampling.top_p"),
        ({"model": {"path": "m.gguf", "kv_type": "q8"}}, "model.kv_type"),
        ({"model": {"path": None}}, "model.path"),
        ({"arena": {"budget_mib": 0}}, "arena.budget_mib"),
        ({"arena": {"budget_mib": "big"}}, "arena.budget_mib"),
        ({"slots": {"root": "relative/dir"}}, "slots.root"),
        ({"slots": {"names": ["a", "a"]}}, "slots.names"),
        ({"slots": {"names": ["a", "../b"]}}, "slots.names[1]"),
        ({"health_check": {"prompt": "p", "expect": ""}}, "health_check.expect"),
        ({"sampling": {"temprature": 1}}, "sampling.temprature"),
    ]
    for patch, field in cases:
        raw = {k: dict(v) for k, v in good.items()}
        for sec, vals in patch.items():
            raw.setdefault(sec, {}).update(vals)
        with pytest.raises(ConfigError) as ei:
            device_config.validate(raw, "edgerun.yaml")
        assert ei.value.field == field and f"edgerun.yaml: {field}: " in str(ei.value), (field, str(ei.value))
    p = tmp_path / "edgerun.yaml"
    p.write_text("model: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        device_config.load(p)
    with pytest.raises(ConfigError, match="no such configuration file"):
        device_config.load(tmp_path / "absent.yaml")


def test_run_with_config_and_budget(env, tmp_path):
    """`edgerun run --config` takes model, threads and sampling from edgerun.yaml;
    the arena budget is enforced before anything is allocated."""
    dev = fresh_device(tmp_path, env)
    cfg = dev / "current" / "edgerun.yaml"
    lib_env = dict(H.PY_ENV, EDGERUN_LIB=str(dev / "current" / "lib" / "libedgerun.so"))
    r = subprocess.run([sys.executable, "-m", "edgerun", "run", "--config", str(cfg), "0099+0001="],
                       capture_output=True, text=True, env=lib_env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "00100"                    # 99 + 1 = 100, reversed and zero-padded
    small = tmp_path / "small.yaml"
    small.write_text(cfg.read_text().replace("budget_mib: 4096", "budget_mib: 0.1"))
    assert "budget_mib: 0.1" in small.read_text()
    small_model = tmp_path / "models"
    small_model.symlink_to(dev / "current" / "models")
    r = subprocess.run([sys.executable, "-m", "edgerun", "run", "--config", str(small), "0099+0001="],
                       capture_output=True, text=True, env=lib_env, timeout=120)
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert "arena.budget_mib" in r.stderr and "more than the budget" in r.stderr


def test_on_device_example_script(env, tmp_path):
    """examples/device/ota_update.py, run with the Python package and library of
    the active slot itself, installs the next bundle and serves its model."""
    dev = fresh_device(tmp_path, env)
    ex = H.REPO / "examples" / "device" / "ota_update.py"
    slot_env = dict(os.environ, PYTHONPATH=str(dev / "current" / "python"))
    slot_env.pop("EDGERUN_LIB", None)
    r = subprocess.run([sys.executable, str(ex), str(env["v2"]), "--root", str(dev), "--cert", str(env["cert"]),
                        "--hardware", "host", "--revision", "1.0", "--serve-check"],
                       capture_output=True, text=True, env=slot_env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "now on rootfs-b (version 1.1.0)" in r.stdout and "-> '64000'" in r.stdout
    r = subprocess.run([sys.executable, str(ex), "--rollback", "--root", str(dev)], capture_output=True,
                       text=True, env=slot_env, timeout=120)
    assert r.returncode == 0 and state(dev) == ("rootfs-a", "1.0.0")
