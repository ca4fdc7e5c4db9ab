"""edgerun flash / rollback over ssh:// against a real OpenSSH server that the
test starts on 127.0.0.1 (unprivileged port, throwaway host and client keys,
its own sshd_config); the device root is a folder the server's user owns."""
import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

import ota_helpers as H
from edgerun import ota

SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)
pytestmark = pytest.mark.skipif(SSHD is None or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None,
                                reason="OpenSSH server/client not installed (apt-get install openssh-server "
                                       "openssh-client)")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    d = tmp_path_factory.mktemp("sshd")
    os.chmod(d, 0o700)
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True)
    (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
    os.chmod(d / "authorized_keys", 0o600)
    port = _free_port()
    user = getpass.getuser()
    (d / "sshd_config").write_text(f"""\
ListenAddress 127.0.0.1
Port {port}
HostKey {d}/host_key
AuthorizedKeysFile {d}/authorized_keys
PidFile {d}/sshd.pid
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
AllowUsers {user}
""")
    # sshd started by root needs its privilege-separation folder; create it only
    # if missing and remove only what we created
    made_run = False
    if os.geteuid() == 0 and not os.path.isdir("/run/sshd"):
        os.makedirs("/run/sshd", mode=0o755)
        made_run = True
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")], stdout=subprocess.DEVNULL,
                            stderr=open(d / "sshd.log", "w"))
    opts = [f"UserKnownHostsFile={d}/known_hosts", "StrictHostKeyChecking=accept-new", "LogLevel=ERROR"]
    base = ["ssh", "-p", str(port), "-i", str(d / "client_key"), "-o", "BatchMode=yes"]
    for o in opts:
        base += ["-o", o]
    deadline = time.monotonic() + 20
    while True:
        r = subprocess.run(base + [f"{user}@127.0.0.1", "true"], capture_output=True, text=True)
        if r.returncode == 0:
            break
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.skip(f"could not start a test sshd: {(d / 'sshd.log').read_text()[-500:]} {r.stderr}")
        time.sleep(0.2)
    yield {"port": port, "user": user, "key": d / "client_key", "opts": opts}
    proc.send_signal(signal.SIGTERM)
    proc.wait(10)
    if made_run:
        shutil.rmtree("/run/sshd", ignore_errors=True)


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    d = tmp_path_factory.mktemp("ssh_bundles")
    key, cert = H.make_keys(d / "keys")
    H.make_bundle(d / "v1.swu", "2.0.0", key, cert, "/opt/edgerun")
    H.make_bundle(d / "v2.swu", "2.1.0", key, cert, "/opt/edgerun")
    return {"key": key, "cert": cert, "v1": d / "v1.swu", "v2": d / "v2.swu"}


def ssh_args(sshd):
    out = ["--identity", str(sshd["key"])]
    for o in sshd["opts"]:
        out += ["--ssh-option", o]
    return out


def cli(*args):
    return subprocess.run([sys.executable, "-m", "edgerun", *map(str, args)], capture_output=True, text=True,
                          env=H.PY_ENV, timeout=300)


def test_flash_and_rollback_over_ssh(sshd, bundles, tmp_path):
    dev = tmp_path / "device root"                     # a space: every remote path must be quoted
    dev.mkdir()
    url = f"ssh://{sshd['user']}@127.0.0.1:{sshd['port']}{dev}"
    for b, slot in ((bundles["v1"], "rootfs-a"), (bundles["v2"], "rootfs-b")):
        r = cli("flash", b, "--board", "host", "--target", url, "--cert", bundles["cert"], "-q", *ssh_args(sshd))
        assert r.returncode == 0, r.stderr
        assert f"now on {slot}" in r.stdout
    # what the ssh target wrote is the same as a local flash writes, and healthy
    t = ota.LocalTarget(dev)
    assert ota.active_slot(t) == "rootfs-b"
    for s in ("rootfs-a", "rootfs-b"):
        ok, msg = ota.health_check(t, s)
        assert ok, msg
    assert os.access(dev / "rootfs-b" / "bin" / "edgerun-cli", os.X_OK)
    rep = json.loads(cli("flash", "--status", "--board", "host", "--target", url, "--json",
                         *ssh_args(sshd)).stdout)
    assert rep["active"] == "rootfs-b" and rep["slots"]["rootfs-a"]["version"] == "2.0.0"
    r = cli("rollback", "--board", "host", "--target", url, *ssh_args(sshd))
    assert r.returncode == 0, r.stderr
    assert os.readlink(dev / "current") == "rootfs-a"
    assert [e["action"] for e in ota.history(t)] == ["install", "activate", "install", "activate", "rollback"]
    # a bundle for another board is refused before anything is sent
    before = H.tree(dev)
    r = cli("flash", bundles["v2"], "--board", "rpi5", "--target", url, "--cert", bundles["cert"], "-q",
            *ssh_args(sshd))
    assert r.returncode == 1 and "is for hardware 'host'" in r.stderr and H.tree(dev) == before


def test_ssh_failures_are_one_clear_line(sshd, bundles, tmp_path):
    url = f"ssh://{sshd['user']}@127.0.0.1:{sshd['port']}{tmp_path}/absent"
    r = cli("flash", bundles["v1"], "--board", "host", "--target", url, "--cert", bundles["cert"], *ssh_args(sshd))
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "does not exist" in r.stderr
    bad = f"ssh://{sshd['user']}@127.0.0.1:1{tmp_path}"
    r = cli("flash", bundles["v1"], "--board", "host", "--target", bad, "--cert", bundles["cert"], *ssh_args(sshd))
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "cannot connect" in r.stderr


def test_sigkill_during_ssh_flash(sshd, bundles, tmp_path):
    """A smaller kill test over ssh: the device stays on a complete, healthy slot."""
    import random
    dev = tmp_path / "dev"
    dev.mkdir()
    url = f"ssh://{sshd['user']}@127.0.0.1:{sshd['port']}{dev}"
    argv = [sys.executable, "-m", "edgerun", "flash", "--board", "host", "--target", url, "--cert",
            str(bundles["cert"]), "-q", *ssh_args(sshd)]
    t0 = time.monotonic()
    subprocess.run(argv + [str(bundles["v1"])], env=H.PY_ENV, check=True, capture_output=True)
    full = time.monotonic() - t0
    rng = random.Random(7)
    t = ota.LocalTarget(dev)
    for i in range(5):
        p = subprocess.Popen(argv + [str(bundles["v2" if i % 2 else "v1"])], env=H.PY_ENV,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        time.sleep(rng.uniform(0, full))
        os.killpg(p.pid, signal.SIGKILL)          # the flasher and its ssh children
        p.wait()
        time.sleep(0.1)                            # let sshd finish the session it was serving
        active = ota.active_slot(t)
        ok, msg = ota.health_check(t, active)
        assert ok, msg
