"""`edgerun serve` binds its port before it says where it serves: a busy port,
a host that does not resolve, or a port the user may not bind is one line on
stderr and exit status 1 (not uvicorn's log and status 3), and with --port 0
the banner gives the port the system picked."""
import os
import re
import select
import signal
import socket
import subprocess
import sys

import httpx
import pytest

from serve_helpers import REPO, need_serve, stop

need_serve()


def serve(*args, **kw):
    env = dict(os.environ)
    env.setdefault("PYTHONPATH", str(REPO / "pybind"))
    return [sys.executable, "-m", "edgerun", "serve", *map(str, args)], dict(env=env, text=True, **kw)


def serve_fails(*args):
    cmd, kw = serve(*args, "--log-level", "warning")
    r = subprocess.run(cmd, capture_output=True, timeout=60, **kw)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert r.stdout == "", r.stdout  # no banner for a server that never listened
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("edgerun: error: "), r.stderr
    return r.stderr.strip()


def test_busy_port():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        err = serve_fails("--port", port)
    assert err == f"edgerun: error: 127.0.0.1:{port} is already in use; pick another --port (or stop the other server)"


def test_bad_host():
    err = serve_fails("--host", "256.1.1.1", "--port", 0)
    assert err.startswith("edgerun: error: --host 256.1.1.1: "), err
    assert err.endswith("; pass an IP address or a name this machine resolves"), err


def _may_bind_low_ports():
    try:
        start = int(open("/proc/sys/net/ipv4/ip_unprivileged_port_start").read())
    except OSError:
        start = 1024
    return os.geteuid() == 0 or start <= 1


@pytest.mark.skipif(_may_bind_low_ports(), reason="this user may bind ports below 1024")
def test_privileged_port():
    err = serve_fails("--port", 1)
    assert err.startswith("edgerun: error: 127.0.0.1:1: permission denied"), err
    assert "pick a --port of 1024 or more" in err, err


def test_port_0_banner_names_the_port():
    cmd, kw = serve("--port", 0, "--threads", 1, "--log-level", "warning")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "no banner within 60 s"
        banner = proc.stdout.readline()
        m = re.search(r" on http://127\.0\.0\.1:(\d+)/v1$", banner.rstrip("\n"))
        assert m, banner
        port = int(m.group(1))
        assert port != 0
        r = httpx.get(f"http://127.0.0.1:{port}/health", timeout=30)
        assert r.status_code == 200 and r.json()["model"] == "edgerun-add", r.text
    finally:
        stop(proc)
    assert proc.returncode == -signal.SIGTERM, proc.stderr.read()


def test_start_in_thread_busy_port():
    """Server.start_in_thread raises the same OSError, not a RuntimeError that
    leaves the cause in uvicorn's log."""
    import edgerun
    from edgerun.serve import Server
    with socket.socket() as held, edgerun.Model(None, n_sessions=1) as m:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        srv = Server(m, parallel=1)
        with pytest.raises(OSError, match=f"127.0.0.1:{port} is already in use"):
            srv.start_in_thread(port=port)
        srv.stop()
