"""Shared by the tests/test_serve_*.py files: a live `edgerun serve` on
loopback, in a thread of the test process (Server.start_in_thread) or as a
subprocess (`python -m edgerun serve`), and the official openai client on it."""
import contextlib
import os
import pathlib
import socket
import subprocess
import sys
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

# The embedded model has no chat template; this one hands the last message to
# it as is (BOS first, as its prompts start), so a chat request is an addition.
PLAIN_TEMPLATE = "{{ bos_token }}{{ messages[-1]['content'] }}"


def need_serve():
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    return pytest.importorskip("openai")


@contextlib.contextmanager
def served(path=None, parallel=4, n_ctx=0, **server_kw):
    """(server, base_url) for a model served from a thread of this process."""
    import edgerun
    from edgerun.serve import Server
    with edgerun.Model(path, n_ctx=n_ctx, n_sessions=parallel) as m:
        srv = Server(m, parallel=parallel, **server_kw)
        port = srv.start_in_thread()
        try:
            yield srv, f"http://127.0.0.1:{port}"
        finally:
            srv.stop()


def client(base, **kw):
    import openai
    kw.setdefault("max_retries", 0)
    kw.setdefault("timeout", 60)
    return openai.OpenAI(base_url=f"{base}/v1", api_key="unused", **kw)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def served_process(*args, timeout=60):
    """(Popen, base_url) for `python -m edgerun serve ARGS` on a free port."""
    import httpx
    port = free_port()
    env = dict(os.environ)
    env.setdefault("PYTHONPATH", str(REPO / "pybind"))
    proc = subprocess.Popen([sys.executable, "-m", "edgerun", "serve", *map(str, args), "--port", str(port),
                             "--log-level", "warning"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                out, err = proc.communicate()
                raise AssertionError(f"edgerun serve exited with {proc.returncode}: {err or out}")
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("edgerun serve did not answer /health in time")
            time.sleep(0.1)
        yield proc, base
    finally:
        stop(proc)


def stop(proc):
    """SIGTERM, as a service manager stops the server; SIGKILL after 20 s."""
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


_http = None


def http():
    """One httpx client for all tests: a new one builds an SSL context
    (~0.1 s) even for plain http."""
    global _http
    if _http is None:
        import httpx
        _http = httpx.Client(timeout=30)
    return _http


def metric(base, name, **labels):
    """A sample's value from GET /metrics (0.0 when absent)."""
    want = "edgerun_" + name
    if labels:
        want += "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"
    for line in http().get(f"{base}/metrics").text.splitlines():
        if line.startswith(want + " "):
            return float(line.split()[-1])
    return 0.0


def wait_for(pred, timeout=10.0, what="a condition"):
    """Polls pred() until true; a bounded loop that fails with `what`."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)
