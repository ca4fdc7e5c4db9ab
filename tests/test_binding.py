"""The binding (edgerun/_ffi.py): the compiled module (cffi API mode) that meson
builds beside libedgerun, its ABI-mode fallback, and Tokenizer.encode's kept
per-thread buffers. Both modes must give the same answers; which one is faster
and by how much is for `edgerun bench-tokenizer --per-call`, not for here.
"""
import os
import pathlib
import subprocess
import sys
import threading

import pytest

from edgerun import errors as edgerun_errors

REPO = pathlib.Path(__file__).resolve().parent.parent
VECTORS = REPO.parent / "shared" / "data" / "tokenizers" / "vectors"
FILES = [VECTORS / "ggml-vocab-llama-spm.gguf", VECTORS / "ggml-vocab-qwen2.gguf"]

needs_vectors = pytest.mark.skipif(not FILES[0].exists(), reason="tokenizer vectors absent")

TEXTS = ["", "hi", "Hello world", "  leading spaces", "tabs\tand\nnewlines\n\n", "ünïcödé ✓ 日本語 🙂",
         "x" * 300, "def f(x):\n    return x + 1  # comment\n", "<|im_start|>user\nhi<|im_end|>", "a" * 70000]


def _run(code, **env):
    e = dict(os.environ, **env)
    e["PYTHONPATH"] = str(REPO / "pybind") + os.pathsep + e.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_compiled_module_is_used_where_it_was_built():
    from edgerun import _ffi
    from edgerun._cdef import MODULE
    import importlib.machinery
    beside = [_ffi.LIBRARY.resolve().parent / (MODULE + s) for s in importlib.machinery.EXTENSION_SUFFIXES]
    if not any(p.is_file() for p in beside):
        pytest.skip(f"no {MODULE} beside {_ffi.LIBRARY} (built without cffi or Python headers)")
    assert _ffi.MODE == "api"
    assert _run("import edgerun._ffi as f; print(f.MODE)", EDGERUN_FFI="abi").strip() == "abi"


@needs_vectors
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_both_modes_give_the_same_ids(path):
    code = ("import json, sys\nfrom edgerun import Tokenizer\n"
            f"t = Tokenizer.from_file({str(path)!r})\n"
            f"texts = {TEXTS!r}\n"
            "out = [[t.encode(x, a, p) for a in (True, False) for p in (True, False)] for x in texts]\n"
            "out.append([t.encode(x.encode()) for x in texts])\n"
            "print(json.dumps(out))\n")
    assert _run(code) == _run(code, EDGERUN_FFI="abi")


@needs_vectors
def test_kept_buffers_across_lengths_threads_and_types():
    import numpy as np

    from edgerun import Tokenizer
    from edgerun.tokenizer import KEEP_BYTES
    tok = Tokenizer.from_file(FILES[1])
    # each text on a fresh tokenizer (no buffers kept yet) is the reference
    want = {}
    for x in TEXTS:
        with Tokenizer.from_file(FILES[1]) as fresh:
            want[x] = fresh.encode(x)
    # long, short, long again on one tokenizer: the buffers grow, never give stale ids
    for x in TEXTS + TEXTS[::-1]:
        assert tok.encode(x) == want[x], x[:20]
        ids = tok.encode(x, as_numpy=True)
        assert ids.dtype == np.int32 and ids.tolist() == want[x]
    assert tok._tls.b[0] <= KEEP_BYTES            # the 70 KB text got buffers for that call only
    errors = []

    def worker(k):
        try:
            for i in range(200):
                x = TEXTS[(i + k) % len(TEXTS)]
                if tok.encode(x) != want[x]:
                    errors.append((k, x[:20]))
        except Exception as e:       # a failure in a thread must fail the test
            errors.append((k, repr(e)))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert tok.encode_batch(TEXTS, num_threads=3) == [want[x] for x in TEXTS]
    tok.close()
    with pytest.raises(edgerun_errors.StateError, match="closed"):
        tok.encode("hi")
    with pytest.raises(TypeError):
        Tokenizer.from_file(FILES[1]).encode(12)


HF = REPO.parent / "shared" / "data" / "tokenizers" / "hf"


@pytest.mark.skipif(not (HF / "gpt2").is_dir(), reason="shared tokenizers absent")
def test_per_call_report():
    """`edgerun bench-tokenizer --per-call`'s report on a small workload: every
    engine exact on every line, a figure per size, and the generate overhead."""
    from edgerun.bench import calls
    rep = calls.run(families="gpt2", data_dir=HF, repeat=1, calls=50, line_bytes=3000)
    r = rep["families"]["gpt2"]
    assert rep["binding"] in ("api", "abi") and r["reference"] == "hf"
    assert r["exact"] and all(r["exact"].values()), r["exact"]
    for eng, pc in r["per_call_us"].items():
        assert set(pc) == {str(s) for s in calls.SIZES} and all(v > 0 for v in pc.values()), eng
        assert r["lines_mb_per_cpu_s"][eng] > 0
    g = rep["generate"]
    assert g["c_step_us"] > 0 and g["generate_ids_us"] > 0 and g["tokens"] > 0
    text = calls.format_table(rep)
    assert "gpt2" in text and "edgerun" in text and "Python adds" in text
    assert [len(x.encode()) for x in calls.fragments(calls.code_lines(3000), 16)][:5] == [16] * 5
