"""`edgerun test --board B --python`: the on-device control scripts under the board's own Python.

Each script in examples/device/ runs as it would on the board: the aarch64
Python of `edgerun sysroot` (Debian's python3 with cffi and numpy wheels),
under qemu-aarch64 with that sysroot as -L and with the board's CPU model, the
`edgerun` package from pybind/ on PYTHONPATH and EDGERUN_LIB pointing at the
board's cross-built libedgerun.so. A script passes when it exits 0 and prints
its `RESULT` line with what is expected (every answer right, the stats present,
model A unchanged after switching), and when the kernels it reports are the
aarch64 ones (proof that the cross build, not the host's library, ran).

Then `edgerun serve` starts the same way (`python3 -m edgerun serve` on the
embedded model, starlette and uvicorn from the sysroot) on a free port of
127.0.0.1; it passes when GET /health answers ok and a greedy completion of
"0012+0034=" is "64000" (the sum, digits reversed).
"""
import json
import os
import pathlib
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

from ..errors import BoardError

# The second model for switch_models.py: a real pretrained model from the
# shared test data when present (its greedy ids are known), else a Q8_0 copy of
# the embedded model written here (a different file, weight type and kernels).
SHARED_MODEL = "models/babyllama-tok105/babyllama-tok105-f32.gguf"
SHARED_REFERENCE = "models/babyllama-tok105/greedy_reference.json"
N_REFERENCE_IDS = 24


class DevicePythonError(BoardError):
    pass


def write_q8_0_copy(src, dst):
    """Writes `src` (an F32 GGUF) to `dst` with every matrix whose rows are a
    multiple of 32 quantized to Q8_0 and everything else (norms, metadata,
    tokenizer) as it was. Uses the gguf package on the host."""
    import gguf
    import numpy as np
    r = gguf.GGUFReader(str(src))
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(str(dst), arch)
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        val = f.contents()
        if key == "general.file_type":
            val = int(gguf.LlamaFileType.MOSTLY_Q8_0)
        vtype = f.types[0]
        sub = f.types[1] if vtype == gguf.GGUFValueType.ARRAY and len(f.types) > 1 else None
        w.add_key_value(key, val, vtype, sub_type=sub)
    for t in r.tensors:
        data = np.array(t.data)
        if t.tensor_type != gguf.GGMLQuantizationType.F32:
            raise DevicePythonError(f"{src}: tensor {t.name} is {t.tensor_type.name}, expected F32")
        if data.ndim == 2 and data.shape[-1] % 32 == 0:
            q = gguf.quants.quantize(data.astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(t.name, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(t.name, data.astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def examples_dir(root):
    return pathlib.Path(root) / "examples" / "device"


def second_model(root, work):
    """(spec for switch_models.py, description): `path:prompt:expected ids`."""
    import json
    shared = pathlib.Path(root).parent / "shared" / "data"
    m, ref = shared / SHARED_MODEL, shared / SHARED_REFERENCE
    if m.is_file() and ref.is_file():
        once = json.loads(ref.read_text())["once_upon"]
        ids = ",".join(map(str, once["greedy_ids_after_prompt"][:N_REFERENCE_IDS]))
        return f"{m}:{once['prompt']}:{ids}", f"{m.name} (shared test data; greedy ids checked)"
    dst = pathlib.Path(work) / "edgerun-add-q8_0.gguf"
    src = pathlib.Path(root) / "models" / "edgerun-add.gguf"
    if not dst.is_file() or dst.stat().st_mtime < src.stat().st_mtime:
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_suffix(".tmp")
        write_q8_0_copy(src, tmp)
        tmp.replace(dst)
    # 4821 + 5179 = 10000, written reversed: the ids of "0", "0", "0", "0", "1".
    import gguf
    tokens = [bytes(t).decode() if not isinstance(t, str) else t
              for t in gguf.GGUFReader(str(dst)).fields["tokenizer.ggml.tokens"].contents()]
    ids = ",".join(str(tokens.index(ch)) for ch in "00001")
    return (f"{dst}:4821+5179=:{ids}",
            f"{dst.name} (Q8_0 copy of the embedded model, written here; its answer checked)")


def cases(root, work):
    """(script, args, checks) for each example: checks are regexes its output must match."""
    embedded = pathlib.Path(root) / "models" / "edgerun-add.gguf"
    spec_b, desc_b = second_model(root, work)
    isa = r"isa (neon|sve)"
    return [
        ("answer.py", [str(embedded)], [isa, r"RESULT answer 5/5 correct"], ""),
        ("stream_stats.py", [str(embedded), "4821+5179="],
         [r'STATS \{.*"isa": "(neon|sve)', r'"text": "00001"', r"RESULT stream_stats \d+ tokens"], ""),
        ("switch_models.py", [f"{embedded}:0012+0034=", spec_b], [isa, r"RESULT switch_models A -> B -> A"],
         desc_b),
    ]


def environment(sysroot, root, lib):
    """A clean environment: the host's PYTHON* variables and preloads would
    steer (or break) the aarch64 interpreter."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "QEMU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
    env.update({
        "PYTHONHOME": str(pathlib.Path(sysroot) / "usr"),
        "PYTHONPATH": str(pathlib.Path(root) / "pybind"),
        "PYTHONNOUSERSITE": "1",
        # The pybind/ tree is shared with the host's Python: do not mix in .pyc
        # files written by another interpreter build.
        "PYTHONDONTWRITEBYTECODE": "1",
        "EDGERUN_LIB": str(lib),
        "LANG": "C.UTF-8",
    })
    return env


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http(url, body=None, timeout=60):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, json.loads(r.read())


def run_serve(qemu_cmd, env, root, timeout=300, serve_args=None):
    """`edgerun serve` under the board's Python (qemu_cmd: qemu, -L, -cpu and
    the interpreter): (ok, detail, output). Stops the server either way.
    serve_args: what to serve (default: the embedded model's file; e.g.
    ["--config", DEVICE_ROOT] for a flashed device's active slot)."""
    port = _free_port()
    what = serve_args or [str(pathlib.Path(root) / "models" / "edgerun-add.gguf")]
    cmd = [*qemu_cmd, "-m", "edgerun", "serve", *what, "--host", "127.0.0.1", "--port", str(port),
           "--log-level", "warning"]
    log_path = pathlib.Path(root) / "build" / f".edgerun-serve-{port}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    base = f"http://127.0.0.1:{port}"
    with open(log_path, "w+") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=str(root), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            deadline = time.monotonic() + timeout
            health = None
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    health = _http(base + "/health", timeout=5)
                    break
                except (urllib.error.URLError, OSError, ValueError):
                    time.sleep(0.5)
            if health is None:
                why = f"exited {proc.returncode}" if proc.poll() is not None else f"no answer within {timeout} s"
                return False, f"/health: {why}", _read(out)
            st, h = health
            if st != 200 or h.get("status") != "ok":
                return False, f"/health answered {st} {h}", _read(out)
            st, c = _http(base + "/v1/completions", {"model": h.get("model", ""), "prompt": "0012+0034=",
                                                    "max_tokens": 8, "temperature": 0}, timeout=timeout)
            text = c["choices"][0]["text"]
            if st != 200 or text != "64000":
                return False, f"/v1/completions: HTTP {st}, text {text!r}, expected '64000'", _read(out)
            return True, f"RESULT serve /health ok, 0012+0034= -> {text!r} (model {h.get('model')})", _read(out)
        except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError) as e:
            return False, f"request failed: {e}", _read(out)
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            log_path.unlink(missing_ok=True)


def _read(f):
    f.flush()
    f.seek(0)
    return f.read()


def run_examples(board, cpus=None, build_dir=None, sysroot=None, timeout=600, log=print, only=None,
                 build_kwargs=None):
    """Runs every examples/device/*.py case for `board` (name or Board) on each
    of its CPU models. Returns a list of result dicts (script, cpu, ok, seconds,
    detail). Builds the board and assembles the sysroot when needed."""
    from . import board as boards, build, prereqs, sysroot as sysroot_mod
    board = boards.load(board)
    if board.is_native:
        raise DevicePythonError(f"board {board.name} is the host: run examples/device/*.py with this Python")
    prereqs.require(*prereqs.for_run(board))
    root = boards.repo_root()
    bdir = pathlib.Path(build_dir) if build_dir else build.ensure_built(board, **(build_kwargs or {}))
    lib = bdir / "runtime_c" / "libedgerun.so"
    if not lib.is_file():
        raise DevicePythonError(f"{lib} is missing; run: edgerun build --board {board.name}")
    if sysroot:
        sroot = pathlib.Path(sysroot)
        if not sysroot_mod.is_ready(sroot):
            raise DevicePythonError(f"{sroot} is not an assembled sysroot; run: edgerun sysroot --board {board.name}")
    else:
        # Always through assemble: a no-op (checked offline against the
        # stamp) when the sysroot is current, a rebuild when its recipe or
        # wheel list changed since; a sysroot that merely exists would run the
        # scripts without the packages added since it was made.
        sysroot_mod.assemble(board.arch, root=root, log=log)
        sroot = sysroot_mod.sysroot_dir(board.arch, root)
    python = sysroot_mod.python_path(sroot)
    env = environment(sroot, root, lib)
    work = bdir / "device-python"
    results = []
    for cpu in list(cpus or board.qemu_cpus):
        for script, args, checks, note in cases(root, work):
            if only and script not in only:
                continue
            path = examples_dir(root) / script
            cmd = [board.qemu_binary, "-L", str(sroot), "-cpu", cpu, str(python), str(path), *args]
            t0 = time.monotonic()
            try:
                r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=str(root))
                out, rc = r.stdout + r.stderr, r.returncode
            except subprocess.TimeoutExpired as e:
                partial = e.stdout or ""
                out = partial.decode(errors="replace") if isinstance(partial, bytes) else partial
                rc = None
            secs = time.monotonic() - t0
            missing = [c for c in checks if not re.search(c, out)]
            ok = rc == 0 and not missing
            if rc is None:
                detail = f"timed out after {timeout} s"
            elif rc != 0:
                detail = f"exit {rc}: {out.strip()[-600:]}"
            elif missing:
                detail = f"output lacks /{missing[0]}/: {out.strip()[-600:]}"
            else:
                detail = next((ln for ln in out.splitlines() if ln.startswith("RESULT")), "")
                if note:
                    detail += f" [B = {note}]"
            results.append({"script": script, "cpu": cpu, "ok": ok, "seconds": round(secs, 1), "detail": detail,
                            "output": out})
            log(f"  {'PASS' if ok else 'FAIL'}  {script:<18} {cpu:<36} {secs:5.1f}s  {detail.splitlines()[0] if detail else ''}")
        if only and "serve" not in only:
            continue
        t0 = time.monotonic()
        ok, detail, out = run_serve([board.qemu_binary, "-L", str(sroot), "-cpu", cpu, str(python)], env, root,
                                    timeout=timeout)
        secs = time.monotonic() - t0
        results.append({"script": "serve", "cpu": cpu, "ok": ok, "seconds": round(secs, 1),
                        "detail": detail if ok else f"{detail}: {out.strip()[-600:]}", "output": out})
        log(f"  {'PASS' if ok else 'FAIL'}  {'edgerun serve':<18} {cpu:<36} {secs:5.1f}s  {detail}")
    return results


def main(board, cpus=None, log=print, build_kwargs=None):
    """For `edgerun test --board B --python`: runs the examples, prints a
    summary, returns the exit status (0 all passed, 1 otherwise)."""
    from . import board as boards
    b = boards.load(board)
    log(f"on-device Python for {b.name}: examples/device/*.py under {b.qemu_binary} with the sysroot's python3")
    res = run_examples(b, cpus=cpus, log=log, build_kwargs=build_kwargs)
    bad = [r for r in res if not r["ok"]]
    log(f"device python: {len(res) - len(bad)} passed, {len(bad)} failed")
    for r in bad:
        print(f"--- {r['script']} on {r['cpu']} ---\n{r['output'].strip()[-2000:]}", file=sys.stderr)
    return 1 if bad else 0
