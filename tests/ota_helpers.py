"""Shared by the OTA tests (test_ota_package, test_flash, test_ota_ssh): keys,
bundles, a re-signer for crafted bundles, and running the real swupdate."""
import contextlib
import fcntl
import json
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import threading
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
MODEL = REPO / "models" / "edgerun-add.gguf"
PY_ENV = dict(os.environ, PYTHONPATH=str(REPO / "pybind") + os.pathsep + os.environ.get("PYTHONPATH", ""))


def host_build_dir():
    """The native build when `make build` made one (the host board's runtime is
    the same code; reusing it keeps the tests from compiling a second tree),
    else None: edgerun.boards.build builds build/host."""
    nat = REPO / "build" / "native" / "runtime_c"
    if (nat / "libedgerun.so").is_file() and (nat / "tools" / "edgerun-cli").is_file():
        return REPO / "build" / "native"
    return None


def make_keys(d):
    from edgerun.ota.keygen import keygen
    return keygen(d)


def make_bundle(out, version, key, cert, root, board="host", **kw):
    from edgerun.ota.package import package
    if board == "host":
        kw.setdefault("build_dir", host_build_dir())
    return package(board, MODEL, version, key, cert, out, root=root, **kw)


def resign(src, dst, key, cert, edit_manifest=None, drop_sig=False):
    """A copy of bundle `src` with its manifest changed by edit_manifest(dict)
    and sw-description re-rendered and signed again with (key, cert): a bundle
    that is validly signed but says something else (e.g. a wrong health-check
    expectation)."""
    from edgerun import boards
    from edgerun.ota import cpio, package, swdesc
    with tempfile.TemporaryDirectory() as td:
        td = pathlib.Path(td)
        f, entries = cpio.open_index(src)
        with f:
            for e in entries:
                (td / e.name).write_bytes(cpio.read_entry(f, e))
        desc = swdesc.parse((td / "sw-description").read_text())["software"]
        man = json.loads((td / package.MANIFEST).read_text())
        if edit_manifest:
            edit_manifest(man)
        (td / package.MANIFEST).write_text(json.dumps(man, indent=1) + "\n")
        hw = next(k for k, v in desc.items() if isinstance(v, dict))
        root = desc[hw]["files"][0]["path"].rsplit("/incoming/", 1)[0]
        imgs = [(i["name"], package.sha256_file(td / i["name"]), i["dest"], i["type"] == "archive")
                for i in man["images"]]
        imgs.append((package.MANIFEST, package.sha256_file(td / package.MANIFEST), package.MANIFEST, False))
        text = package.sw_description(man["version"], boards.load(man["board"]), imgs, root, man["slots"], "x")
        (td / "sw-description").write_text(text)
        package.sign(td / "sw-description", key, cert, td / "sw-description.sig")
        with open(dst, "wb") as out:
            w = cpio.Writer(out)
            w.add_file("sw-description", td / "sw-description")
            if not drop_sig:
                w.add_file("sw-description.sig", td / "sw-description.sig")
            for n, *_ in imgs:
                w.add_file(n, td / n)
            w.close()
    return dst


# ------------------------------------------------------------------ swupdate

SWUPDATE = shutil.which("swupdate")
_unshare_ok = None


def _can_unshare():
    """swupdate talks to itself over an abstract unix socket with a fixed name
    (@NotifyServer...); two swupdate processes at once (pytest-xdist, another
    test session) would cross-talk and hang. A private network namespace
    (unshare -n, root only) gives each its own abstract socket names; without
    it runs are serialised with a lock file."""
    global _unshare_ok
    if _unshare_ok is None:
        try:
            _unshare_ok = subprocess.run(["unshare", "-n", "true"], capture_output=True,
                                         timeout=10).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _unshare_ok = False
    return _unshare_ok


def _run_swupdate(cmd, env, timeout):
    """Runs swupdate in its own process group and returns its output. swupdate
    2022.12 sometimes never exits after it has reported a failure (seen after
    "Checksum WRONG": its installer thread waits on a peer that is gone), so
    once the final verdict line is out it gets half a second to exit, then the group is
    killed; the verdict is in the output either way."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    lines = []

    def pump():
        for raw in proc.stdout:
            lines.append(raw.decode("utf-8", "replace"))

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    deadline = time.monotonic() + timeout
    verdict_at = None
    while proc.poll() is None:
        now = time.monotonic()
        text = "".join(lines)
        if verdict_at is None and ("SWUpdate *failed*" in text or "SWUPDATE successful" in text):
            verdict_at = now
        if now > deadline or (verdict_at is not None and now - verdict_at > 0.5):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.02)
    proc.wait()
    t.join(5)
    return "".join(lines)


def swupdate(bundle, cert, hw, *args, timeout=60):
    """Runs the real swupdate; returns (accepted, output). Accepted means
    swupdate reported success: its exit status alone is not reliable (we saw
    status 1 after 'SWUPDATE successful' when its threads race at exit)."""
    with tempfile.TemporaryDirectory(prefix="edgerun-swupdate-") as tmp:
        # TMPDIR: swupdate extracts sw-description and its IPC socket there
        # (by default /tmp/sockinstctrl, shared by every swupdate on the machine)
        env = dict(os.environ, TMPDIR=tmp)
        cmd = [SWUPDATE, "-k", str(cert), "-H", hw, *args, "-i", str(bundle)]
        if _can_unshare():
            out = _run_swupdate(["unshare", "-n"] + cmd, env, timeout)
        else:
            lock = pathlib.Path(tempfile.gettempdir()) / "edgerun-swupdate.lock"
            with open(lock, "w") as lf:
                fcntl.flock(lf, fcntl.LOCK_EX)
                out = _run_swupdate(cmd, env, timeout)
    ok = "SWUPDATE successful" in out and "SWUPDATE failed" not in out
    return ok, out


def tree(root):
    """{relative path: sha256 or '->target'} of every file and link under root."""
    from edgerun.ota.package import sha256_file
    out = {}
    root = pathlib.Path(root)
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_symlink():
            out[rel] = "->" + os.readlink(p)
        elif p.is_file():
            out[rel] = sha256_file(p)
    return out
