"""Conformance with Hugging Face transformers on tiny seeded random-init models.

Each variant (llama/qwen2, tied/untied output, rope_theta 1e4/5e5/1e6, all GQA,
qwen2 with QKV biases) is built with transformers, saved, converted with
`edgerun convert`, and run by the C runtime:

* F32: logits at every position within 1e-4 of transformers, relative to the
  logits' scale; greedy 32-token continuations identical.
* F16/BF16/Q8_0/Q4_0: logits within the tolerances below of the numpy reference
  (edgerun.convert.reference) dequantizing the very same blocks of the same file.
* KV cache in F16: within a stated tolerance of transformers.
"""
import subprocess
import sys

import numpy as np
import pytest

from conftest import VARIANTS, hf_greedy, hf_logits, rel_err

F32_TOL = 1e-4

# Runtime vs reference on the same quantized file. Both sides use identical
# dequantized weights, so these bound arithmetic, not quantization error:
#  - F16/BF16 weights meet float activations: the runtime differs from the
#    float64 reference by float32 summation only (measured ~1e-6): 1e-5.
#  - Q8_0/Q4_0 use integer dot products on activations rounded to Q8_0 blocks.
#    The reference with act_q8=True rounds activations the same way, so what is
#    left is float32 summation again (measured ~1e-7): 1e-5. A rounding flip of
#    one activation code (float noise moving a value across a .5 boundary)
#    would cost ~1e-3, so this also shows the runtime rounds exactly as
#    llama.cpp's reference quantizer does.
#  - Against the plain float-activation reference, activation rounding itself
#    shows: ~1/254 of each block's range per element, through two layers of
#    weights drawn with std 0.2 (measured 2e-2..5e-2). 0.1 bounds it; a wrong
#    block layout (nibble order, scale) would give errors of order 1.
#  - SIMD tables (avx2, neon, ...) may round activations differently at exact
#    ties (llama.cpp's AVX2 quantizer rounds half to even, its reference half
#    away from zero), so for them a few activation codes can differ by one step;
#    one such flip was measured at 8e-3 on these models. 2e-2 allows a couple
#    while a real layout or scale bug still fails by orders of magnitude.
QUANT_TOL = {"f16": 1e-5, "bf16": 1e-5, "q8_0": 1e-5, "q4_0": 1e-5}
QUANT_TOL_SIMD = {"f16": 1e-5, "bf16": 1e-5, "q8_0": 2e-2, "q4_0": 2e-2}
QUANT_TOL_FLOAT_ACT = {"f16": 1e-5, "bf16": 1e-5, "q8_0": 0.1, "q4_0": 0.1}

# F16 KV cache: K and V rounded to half precision (relative 2^-11 per element)
# before attention; through softmax and two layers it measures 5e-4..1e-3
# against transformers. 3e-3 leaves margin yet fails if the cache were stored
# in a coarser format (bf16 would give ~1e-2).
KV_F16_TOL = 3e-3


def prompt_ids(n_vocab, n, seed=1):
    return [int(x) for x in np.random.RandomState(seed).randint(0, n_vocab, n)]


@pytest.fixture(params=sorted(VARIANTS))
def variant(request):
    return request.param


# ---------------------------------------------------------------- conversion itself

def test_converted_layout(tiny, variant):
    """Names, types and keys as llama.cpp's converter writes them."""
    from gguf import GGUFReader
    arch, tied, theta = VARIANTS[variant]
    d, model, n_vocab = tiny.hf(variant)
    r = GGUFReader(str(tiny.gguf(variant, "q8_0")))
    kv = {k: f.contents() for k, f in r.fields.items() if not k.startswith("tokenizer.ggml.")}
    assert kv["general.architecture"] == arch
    assert kv[f"{arch}.block_count"] == 2 and kv[f"{arch}.embedding_length"] == 64
    assert kv[f"{arch}.attention.head_count"] == 4 and kv[f"{arch}.attention.head_count_kv"] == 2
    assert kv[f"{arch}.feed_forward_length"] == 128
    assert kv[f"{arch}.rope.freq_base"] == pytest.approx(theta)
    assert kv["general.file_type"] == 7   # MOSTLY_Q8_0
    types = {t.name: t.tensor_type.name for t in r.tensors}
    assert ("output.weight" in types) == (not tied)
    for L in range(2):
        for t in ("attn_norm", "ffn_norm"):
            assert types[f"blk.{L}.{t}.weight"] == "F32"
        for t in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"):
            assert types[f"blk.{L}.{t}.weight"] == "Q8_0"
        for t in "qkv":
            assert (f"blk.{L}.attn_{t}.bias" in types) == (arch == "qwen2")
    assert types["output_norm.weight"] == "F32"
    assert any(k.startswith("tokenizer.ggml.") for k in r.fields)


def test_llama_qk_permuted_qwen2_not(tiny, variant):
    """llama Q/K rows are reordered to interleaved RoPE pairs; everything else verbatim."""
    from gguf import GGUFReader

    from edgerun.convert.hf import permute_qk
    arch = VARIANTS[variant][0]
    d, model, _ = tiny.hf(variant)
    r = GGUFReader(str(tiny.gguf(variant, "f32")))
    t = {x.name: np.array(x.data) for x in r.tensors}
    attn = model.model.layers[1].self_attn
    q = attn.q_proj.weight.detach().numpy()
    k = attn.k_proj.weight.detach().numpy()
    if arch == "llama":
        np.testing.assert_array_equal(t["blk.1.attn_q.weight"], permute_qk(q, 4))
        np.testing.assert_array_equal(t["blk.1.attn_k.weight"], permute_qk(k, 2))
        # row 2i of a head comes from row i, row 2i+1 from row i + head_dim/2
        np.testing.assert_array_equal(t["blk.1.attn_q.weight"][16 + 2 * 3], q[16 + 3])
        np.testing.assert_array_equal(t["blk.1.attn_q.weight"][16 + 2 * 3 + 1], q[16 + 8 + 3])
    else:
        np.testing.assert_array_equal(t["blk.1.attn_q.weight"], q)
        np.testing.assert_array_equal(t["blk.1.attn_q.bias"], attn.q_proj.bias.detach().numpy())
    np.testing.assert_array_equal(t["blk.1.ffn_down.weight"], model.model.layers[1].mlp.down_proj.weight.detach())


def test_cli_convert_matches_module(tiny, tmp_path):
    """`edgerun convert` on the command line writes the same bytes as convert()."""
    d, _, _ = tiny.hf("qwen2_untied")
    out = tmp_path / "cli.gguf"
    r = subprocess.run([sys.executable, "-m", "edgerun", "convert", str(d), str(out), "--type", "q4_0"],
                       capture_output=True, text=True, env=_env())
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stdout and "Q4_0" in r.stdout
    # not a tty: no progress bar; only the note that the output projection's
    # Q6_K (llama.cpp's Q4_0 mix) falls back to Q8_0 on these 64-wide rows
    assert r.stderr.splitlines() == ["note: output.weight: row length 64 is not a multiple of 256, "
                                     "Q6_K falls back to Q8_0"]
    assert out.read_bytes() == tiny.gguf("qwen2_untied", "q4_0").read_bytes()


def _env():
    import os
    import pathlib
    env = dict(os.environ)
    pyb = str(pathlib.Path(__file__).resolve().parent.parent / "pybind")
    env["PYTHONPATH"] = pyb + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_reference_matches_transformers(tiny, variant):
    """The numpy reference itself agrees with transformers (float64 vs float32)."""
    from edgerun.convert import reference
    d, model, n_vocab = tiny.hf(variant)
    ids = prompt_ids(n_vocab, 40)
    err = rel_err(reference.forward(tiny.gguf(variant, "f32"), ids), hf_logits(model, ids))
    assert err < 1e-5, err


# ---------------------------------------------------------------- the runtime

@pytest.mark.parametrize("n_batch", [0, 7])
def test_f32_logits_match_transformers(tiny, variant, n_batch):
    """Every position of a 70-token prompt (several prefill chunks), within 1e-4."""
    import edgerun
    d, model, n_vocab = tiny.hf(variant)
    ids = prompt_ids(n_vocab, 70)
    with edgerun.Model(tiny.gguf(variant, "f32"), n_ctx=128, n_batch=n_batch) as m:
        got = m.logits(ids)
    assert got.shape == (70, n_vocab) and got.dtype == np.float32
    ref = hf_logits(model, ids)
    err = rel_err(got, ref)
    assert err <= F32_TOL, f"{variant}: max|diff|/max|ref| = {err:.2e}"
    assert (got.argmax(axis=1) == ref.argmax(axis=1)).all()


def test_greedy_32_tokens_match_transformers(tiny, variant):
    import edgerun
    d, model, n_vocab = tiny.hf(variant)
    ids = prompt_ids(n_vocab, 12, seed=2)
    want = hf_greedy(model, ids, 32)
    with edgerun.Model(tiny.gguf(variant, "f32"), n_ctx=64) as m:
        got = m.generate(ids, max_tokens=32, stop_at_eos=False)
    assert got == want


def test_threads_give_identical_logits(tiny):
    """Threads split output rows; each row's dot product is the same code, so
    the result must not depend on the thread count at all."""
    import edgerun
    d, model, n_vocab = tiny.hf("llama_untied_theta5e5")
    ids = prompt_ids(n_vocab, 20)
    path = tiny.gguf("llama_untied_theta5e5", "f32")
    with edgerun.Model(path, n_ctx=32, n_threads=1) as a, edgerun.Model(path, n_ctx=32, n_threads=3) as b:
        np.testing.assert_array_equal(a.logits(ids), b.logits(ids))


@pytest.mark.parametrize("qtype", ["f16", "bf16", "q8_0", "q4_0"])
def test_quantized_logits_match_reference(tiny, variant, qtype):
    """The generic C table exactly as the reference; the table this CPU gets
    within QUANT_TOL_SIMD of it."""
    import edgerun
    from edgerun.convert import reference
    d, model, n_vocab = tiny.hf(variant)
    path = tiny.gguf(variant, qtype)
    ids = prompt_ids(n_vocab, 24, seed=3)
    ref = reference.GGUFModel(path)
    quant = qtype in ("q8_0", "q4_0")
    want = reference.forward(ref, ids, act_q8=quant)
    with edgerun.Model(path, n_ctx=32, isa="generic") as m:
        generic = m.logits(ids)
    # float32 against the float64 reference can move one activation across a
    # Q8 rounding boundary: measured once in 24 positions (qwen2_tied Q4_0,
    # position 19 at 2.7e-4, every other position 3e-8), so all positions
    # but one within QUANT_TOL, that one within QUANT_TOL_SIMD
    errs = sorted(rel_err(g, w) for g, w in zip(generic, want))
    assert errs[-2] <= QUANT_TOL[qtype], f"{variant} {qtype} generic vs reference: {errs[-2]:.2e}"
    assert errs[-1] <= QUANT_TOL_SIMD[qtype], f"{variant} {qtype} generic vs reference: {errs[-1]:.2e}"
    err_float = rel_err(generic, reference.forward(ref, ids))
    assert err_float <= QUANT_TOL_FLOAT_ACT[qtype], f"{variant} {qtype} vs float-activation reference: {err_float:.2e}"
    with edgerun.Model(path, n_ctx=32) as m:
        best, isa = m.logits(ids), m.isa
    err = rel_err(best, want)
    assert err <= QUANT_TOL_SIMD[qtype], f"{variant} {qtype} {isa} vs reference: {err:.2e}"


def test_quantized_file_differs_from_f32(tiny):
    """Guards the test above against comparing an F32 file with itself: the
    quantized reference must be measurably off the transformers logits."""
    from edgerun.convert import reference
    d, model, n_vocab = tiny.hf("llama_tied")
    ids = prompt_ids(n_vocab, 24, seed=3)
    ref = hf_logits(model, ids)
    assert rel_err(reference.forward(tiny.gguf("llama_tied", "q4_0"), ids), ref) > 1e-3
    assert rel_err(reference.forward(tiny.gguf("llama_tied", "q8_0"), ids), ref) > 1e-5


def test_kv_f16_close_to_transformers(tiny, variant):
    import edgerun
    d, model, n_vocab = tiny.hf(variant)
    ids = prompt_ids(n_vocab, 48, seed=4)
    path = tiny.gguf(variant, "f32")
    with edgerun.Model(path, n_ctx=64, kv_type="f16") as m:
        got = m.logits(ids)
        plan16 = m.plan()
    with edgerun.Model(path, n_ctx=64, kv_type="f32") as m:
        plan32 = m.plan()
    err = rel_err(got, hf_logits(model, ids))
    assert err <= KV_F16_TOL, err
    kv = {p: next(s["bytes"] for s in pl["sections"] if s["name"].startswith("kv")) for p, pl in
          (("16", plan16), ("32", plan32))}
    assert kv["16"] < kv["32"]   # the F16 cache really is smaller


def test_bf16_and_sharded_safetensors(tiny, tmp_path):
    """Checkpoints saved in bfloat16 and split over several files convert to
    the same tensors (read without torch: BF16 is widened from its 16 bits)."""
    import copy
    import shutil

    import torch
    from gguf import GGUFReader

    from edgerun.convert import convert
    d, model, _ = tiny.hf("qwen2_untied")
    bf = tmp_path / "bf16"
    copy.deepcopy(model).to(torch.bfloat16).save_pretrained(str(bf), max_shard_size="100KB")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(d / f, bf / f)
    assert len(list(bf.glob("*.safetensors"))) > 1
    out = convert(bf, tmp_path / "bf16.gguf", "f32", quiet=True)
    t = {x.name: np.array(x.data) for x in GGUFReader(out["path"]).tensors}
    want = model.model.layers[0].mlp.up_proj.weight.detach().to(torch.bfloat16).float().numpy()
    np.testing.assert_array_equal(t["blk.0.ffn_up.weight"], want)
    assert out["n_tensors"] == len(t) == 1 + 12 * 2 + 2


def test_convert_refuses_what_the_runtime_would_get_wrong(tiny, tmp_path):
    import json
    import shutil

    from edgerun.convert import ConvertError, convert
    d, _, _ = tiny.hf("llama_tied")

    def variant(name, edit_cfg=None, drop=None):
        v = tmp_path / name
        shutil.copytree(d, v)
        cfg = json.loads((v / "config.json").read_text())
        if edit_cfg:
            edit_cfg(cfg)
        (v / "config.json").write_text(json.dumps(cfg))
        if drop:
            from safetensors.numpy import load_file, save_file
            st = v / "model.safetensors"
            t = load_file(str(st))
            del t[drop]
            save_file(t, str(st))
        return v

    cases = [
        (variant("gpt2", lambda c: c.update(architectures=["GPT2LMHeadModel"])), r"GPT2LMHeadModel.*not supported"),
        (variant("gelu", lambda c: c.update(hidden_act="gelu")), r"hidden_act 'gelu'"),
        (variant("yarn", lambda c: c.update(rope_parameters={"rope_type": "yarn", "rope_theta": 1e4, "factor": 4})),
         r"rope_scaling 'yarn'"),
        (variant("noheads", lambda c: c.pop("num_attention_heads")), r"lacks 'num_attention_heads'"),
        (variant("gone", drop="model.layers.1.mlp.up_proj.weight"), r"blk\.1\.ffn_up\.weight"),
    ]
    for v, pattern in cases:
        with pytest.raises(ConvertError, match=pattern):
            convert(v, tmp_path / "x.gguf", "f32", quiet=True)
        assert not (tmp_path / "x.gguf").exists() and not (tmp_path / "x.gguf.part").exists()
    with pytest.raises(ConvertError, match="unknown output type"):
        convert(d, tmp_path / "x.gguf", "q5_k", quiet=True)
