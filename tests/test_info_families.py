"""`edgerun info` on the family files (../shared/data/models/families): the
plain text names what sets each family apart (the settings below were only in
--json, or nowhere), and --json holds the per-layer kinds.

Expected values come from the file itself, read with gguf-py, not from the
code under test: LFM2's per-layer K/V head counts, gemma3's window and local
RoPE base, phi3's rotary dimensions, llama3's rope_freqs.weight.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import edgerun
from family_files import llamacpp_file, rewrite

gguf = pytest.importorskip("gguf")
vt = gguf.GGUFValueType


def _info(path, *args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-m", "edgerun", "info", str(path), *args], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _settings(text):
    """{setting: text} of the "family settings:" block."""
    lines = text.split("family settings:\n", 1)[1].splitlines()
    out = {}
    for line in lines:
        if not line.startswith("  "):
            break
        out[line[2:17].strip()] = line[18:]
    return out


def _fields(path):
    r = gguf.GGUFReader(str(path))
    return {k: f.contents() for k, f in r.fields.items()}, {t.name: np.array(t.data) for t in r.tensors}


def test_lfm2_layer_layout(shared_data):
    path = llamacpp_file(shared_data, "lfm2")
    kv, _ = _fields(path)
    heads = [int(x) for x in kv["lfm2.attention.head_count_kv"]]
    conv = [l for l, n in enumerate(heads) if n == 0]
    assert conv and len(conv) < len(heads)
    s = _settings(_info(path))
    kinds = " ".join("c" if n == 0 else "a" for n in heads)
    assert s["layers"] == (f"{len(conv)} short-convolution (kernel {kv['lfm2.shortconv.l_cache']}), "
                           f"{len(heads) - len(conv)} attention: {kinds}")
    assert "no rope" not in s and "sliding window" not in s and s["rope scaling"] == "none"
    d = json.loads(_info(path, "--json"))
    assert [x["block"] for x in d["layers"]] == ["shortconv" if n == 0 else "attention" for n in heads]
    assert {x["kernel"] for x in d["layers"] if x["block"] == "shortconv"} == {kv["lfm2.shortconv.l_cache"]}


def test_lfm2_layers_agree_with_the_trace(shared_data):
    """describe() mirrors the runtime's per-layer rule; the trace shows what
    the runtime ran: the short-convolution ops on the same layers."""
    from edgerun.describe import describe
    with edgerun.Model(str(llamacpp_file(shared_data, "lfm2")), n_ctx=64, trace_events=5000) as m:
        d = describe(m)
        events = m.trace("Once upon", max_tokens=1)
    assert {e["layer"] for e in events if e["op"] == "shortconv"} == \
        {i for i, x in enumerate(d["layers"]) if x["block"] == "shortconv"}


def test_smollm3_layers_without_rope(shared_data):
    path = llamacpp_file(shared_data, "smollm3")
    kv, _ = _fields(path)
    n = int(kv["smollm3.block_count"])
    nope = list(range(3, n, 4))
    assert nope
    s = _settings(_info(path))
    assert s["no rope"] == "every 4th layer: " + ", ".join(map(str, nope))
    assert s["rope"] == f"on all {kv['smollm3.rope.dimension_count']} dims per head, base " \
        f"{int(kv['smollm3.rope.freq_base'])}"
    d = json.loads(_info(path, "--json"))
    assert [l for l, x in enumerate(d["layers"]) if not x["rope"]] == nope
    assert {x["block"] for x in d["layers"]} == {"attention"}


def test_gemma3_sliding_window(shared_data):
    path = llamacpp_file(shared_data, "gemma3")
    kv, _ = _fields(path)
    n, w = int(kv["gemma3.block_count"]), int(kv["gemma3.attention.sliding_window"])
    glob = list(range(5, n, 6))
    assert n > 6 and glob
    s = _settings(_info(path))
    assert s["sliding window"] == (f"{w} positions on 5 of every 6 layers ({n - len(glob)} of {n}; global: "
                                   f"{', '.join(map(str, glob))}), local RoPE base "
                                   f"{int(kv['gemma3.rope.freq_base_swa'])}")
    assert "logit softcap" not in s and s["rope scaling"] == "none"
    d = json.loads(_info(path, "--json"))
    assert [x["window"] for x in d["layers"]] == [0 if l in glob else w for l in range(n)]


def test_phi3_partial_rope(shared_data):
    path = llamacpp_file(shared_data, "phi3")
    kv, _ = _fields(path)
    rot = int(kv["phi3.rope.dimension_count"])
    hd = int(kv["phi3.embedding_length"]) // int(kv["phi3.attention.head_count"])
    assert rot < hd
    s = _settings(_info(path))
    assert s["rope"] == f"on {rot} of {hd} dims per head, base {int(kv['phi3.rope.freq_base'])}"
    assert "sliding window" not in s          # the file's window is 0: none


def test_llama3_rope_freqs(shared_data):
    path = llamacpp_file(shared_data, "llama3-rope-scaling")
    f = _fields(path)[1]["rope_freqs.weight"]
    s = _settings(_info(path))
    assert s["rope scaling"] == (f"llama3 (rope_freqs.weight): {len(f)} per-frequency divisors from "
                                 f"{f.min():.4g} to {f.max():.4g}")
    d = json.loads(_info(path, "--json"))
    assert d["rope_scaling"]["type"] == "llama3"
    np.testing.assert_array_equal(np.array(d["rope_scaling"]["factors"], np.float32), f)


def test_qwen3_has_nothing_special(shared_data):
    s = _settings(_info(llamacpp_file(shared_data, "qwen3")))
    assert s == {"rope": "on all 32 dims per head, base 10000", "rope scaling": "none"}


def test_planted_softcap_linear_scaling_and_longrope(shared_data, tmp_path):
    """Keys the tiny files lack, planted as llama.cpp's converter writes them."""
    g = rewrite(llamacpp_file(shared_data, "gemma3"), tmp_path / "g.gguf",
                set_keys={"gemma3.final_logit_softcapping": (vt.FLOAT32, 30.0),
                          "gemma3.rope.scaling.type": (vt.STRING, "linear"),
                          "gemma3.rope.scaling.factor": (vt.FLOAT32, 8.0)})
    s = _settings(_info(g))
    assert s["logit softcap"] == "30: logits = 30 * tanh(logits / 30)"
    # gemma3's local layers keep their own RoPE: the scaling is the global ones'
    assert s["rope scaling"] == "linear, factor 8 (positions divided by it), on the global layers"
    p = rewrite(llamacpp_file(shared_data, "phi3"), tmp_path / "p.gguf",
                set_keys={"phi3.rope.scaling.original_context_length": (vt.UINT32, 32),
                          "phi3.rope.scaling.attn_factor": (vt.FLOAT32, 1.25),
                          "phi3.attention.sliding_window": (vt.UINT32, 2047)},
                add_tensors={"rope_factors_short.weight": np.linspace(1.0, 1.5, 6),
                             "rope_factors_long.weight": np.linspace(2.0, 8.0, 6)})
    s = _settings(_info(p, "--ctx", "32"))
    assert s["rope scaling"] == ("LongRoPE, the short set (n_ctx 32 <= original context 32): 6 per-frequency "
                                 "divisors from 1 to 1.5; cos and sin scaled by 1.25")
    assert s["sliding window"] == "2047 positions on every layer"
    s = _settings(_info(p, "--ctx", "64"))
    assert s["rope scaling"].startswith("LongRoPE, the long set (n_ctx 64 > original context 32): 6 per-frequency "
                                        "divisors from 2 to 8")
    d = json.loads(_info(p, "--ctx", "64", "--json"))
    assert d["rope_scaling"]["set"] == "long" and d["rope_scaling"]["original_context"] == 32
    np.testing.assert_allclose(d["rope_scaling"]["factors"], np.linspace(2.0, 8.0, 6), rtol=1e-6)


def test_factor_vectors_in_every_type_the_runtime_reads(tmp_path):
    """rope_freqs.weight and the LongRoPE sets may be F32, F16 or BF16 (the
    runtime widens them at open); info shows the same values from each."""
    from edgerun.describe import _vector
    want = np.array([1.0, 1.5, 2.0, 8.0], np.float32)
    bf16 = (want.view(np.uint32) >> 16).astype("<u2")     # exact: these need no rounding
    blobs = {"F32": want.astype("<f4").tobytes(), "F16": want.astype("<f2").tobytes(), "BF16": bf16.tobytes()}
    path = tmp_path / "blob"
    path.write_bytes(b"x" * 3 + b"".join(blobs.values()))
    tensors, off = [], 3
    for ty, raw in blobs.items():
        tensors.append({"name": f"v_{ty}", "type": ty, "offset": off, "nbytes": len(raw)})
        off += len(raw)
    for ty in blobs:
        assert _vector(path, tensors, f"v_{ty}") == want.tolist(), ty
    assert _vector(path, tensors, "absent") is None
