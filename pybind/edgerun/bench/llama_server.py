"""llama.cpp's OpenAI server as the serve benchmark's peer: llama-cpp-python's
`python -m llama_cpp.server` (its `server` extra: fastapi, sse-starlette,
starlette-context, pydantic-settings, uvicorn) in a process of its own on
loopback, over the same GGUF file as `edgerun serve`.

Settings chosen so both servers do the same work per request:
  * the same context, threads (prompt and decode), K/V cache type and prompt
    batch as edgerun's side of the benchmark;
  * logits kept for the last position only (the server's default keeps them
    for every prompt token, a cost edgerun's server does not pay);
  * interrupt_requests off: by default a new request stops the one streaming,
    which would cut every concurrent client short.

llama-cpp-python's server has one model context and serves one request at a
time (an asyncio lock around it): concurrent clients queue. That is the
server people get from `pip install 'llama-cpp-python[server]'`; llama.cpp's
C++ `llama-server` (with --parallel slots) is not part of that package.
"""
import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time

from .engines import GGML_KV_TYPES

MODULES = ("llama_cpp", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings", "uvicorn")


def missing():
    """None when the server can run here, else why not (one line)."""
    gone = [m for m in MODULES if importlib.util.find_spec(m) is None]
    if not gone:
        return None
    return (f"llama.cpp's server: not installed ({', '.join(gone)} missing; "
            "pip install 'llama-cpp-python[server]')")


def version():
    try:
        from importlib.metadata import version as v
        return v("llama_cpp_python")
    except Exception:      # noqa: BLE001 -- a label only
        return "?"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(model, port, model_id, n_ctx, threads, batch, kv_type):
    kv = str(GGML_KV_TYPES[kv_type])
    return [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", model_id,
            "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx),
            "--n_threads", str(threads), "--n_threads_batch", str(threads),
            "--n_batch", str(batch), "--n_ubatch", str(batch), "--type_k", kv, "--type_v", kv,
            "--logits_all", "false", "--interrupt_requests", "false", "--verbose", "false"]


@contextlib.contextmanager
def serving(model, model_id, n_ctx, threads, batch=64, kv_type="f16", timeout=120.0):
    """The base URL of llama.cpp's server on `model`, for the with-block."""
    import httpx
    port = _free_port()
    # A file, not a pipe: uvicorn logs every request, and a full pipe nobody
    # reads would stall the server mid-benchmark.
    log = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen(command(model, port, model_id, n_ctx, threads, batch, kv_type),
                            stdout=subprocess.DEVNULL, stderr=log, text=True, env=dict(os.environ))
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                log.seek(0)
                err = log.read().strip().splitlines()
                raise RuntimeError(f"llama.cpp's server exited with {proc.returncode}: "
                                   f"{err[-1] if err else 'no message'}")
            try:
                if httpx.get(f"{base}/v1/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama.cpp's server did not answer within {timeout:.0f} s")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
