"""K-quant conversion: `edgerun convert --type q4_k_m|q5_k_m|q6_k`.

A tiny seeded Llama wide enough for K-quant super-blocks (hidden 256,
intermediate 512, 8 layers) is converted to each K-quant file type, then:

* the per-tensor types follow llama.cpp's mix (output/tied embedding Q6_K;
  in the _M mixes attn_v and ffn_down Q6_K in the layers its use_more_bits
  rule picks: 0, 3, 6, 7 of 8);
* our quantizers' blocks decode identically with the `gguf` package's
  independent dequantizer, and stay within the error each type can represent;
* the C runtime's logits (generic table, and the best table this CPU has)
  match the numpy reference that dequantizes the very same blocks and rounds
  activations to Q8_K as the runtime does, within K_TOL below.
"""
import numpy as np
import pytest

from conftest import KQ_LAYERS as N_LAYER, logits_repacked_and_not, rel_err

# Runtime vs reference on the same K-quant file. Every super-block dot is an
# exact integer sum with one float tail, the reference dequantizes the same
# blocks in float64 and rounds activations to Q8_K by the same rule, so what
# is left is float32 vs float64 arithmetic elsewhere (norms, attention,
# summation over super-blocks): measured 2e-7..3e-7 (Q4_K_M, Q5_K_M).
# But float noise can move one activation across a rounding boundary; one
# such flip in a K/V row was measured at 1.7e-2 (Q6_K, from that position on,
# every position after it seeing the flipped row through attention). So:
#  - the first positions, before any flip had a chance, within K_TOL_EXACT:
#    a wrong layout, scale or min is wrong at position 0 already, by ~1;
#  - all positions within K_TOL, which allows a flip or two.
K_TOL_EXACT = 1e-5
K_EXACT_POSITIONS = 3
K_TOL = 3e-2
# Against float activations the Q8_K rounding of activations itself shows.
K_TOL_FLOAT_ACT = 0.1


@pytest.fixture(scope="module")
def converted(kmodel):
    from edgerun.convert import convert
    d, _ = kmodel
    out = {}
    for t in ("q4_k_m", "q5_k_m", "q6_k"):
        path = d.parent / f"k-{t}.gguf"
        out[t] = (path, convert(d, path, t, quiet=True))
    return out


def _types(path):
    from edgerun.convert import reference
    m = reference.GGUFModel(path)
    return {name: reference.TYPE_NAMES[t] for name, t in m.tensor_types.items()}


@pytest.mark.parametrize("ftype", ["q4_k_m", "q5_k_m", "q6_k"])
def test_mix_follows_llama_cpp(converted, ftype):
    path, summary = converted[ftype]
    types = _types(path)
    base = {"q4_k_m": "Q4_K", "q5_k_m": "Q5_K", "q6_k": "Q6_K"}[ftype]
    assert types["output.weight"] == "Q6_K"
    assert types["token_embd.weight"] == base
    more_bits = {0, 3, 6, 7}
    for i in range(N_LAYER):
        for kind in ("attn_v", "ffn_down"):
            want = "Q6_K" if ftype != "q6_k" and i in more_bits else base
            assert types[f"blk.{i}.{kind}.weight"] == want, (ftype, i, kind)
        for kind in ("attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"):
            assert types[f"blk.{i}.{kind}.weight"] == base
        assert types[f"blk.{i}.attn_norm.weight"] == "F32"
    assert summary["type"] == ftype.upper()


def test_rows_not_multiple_of_256_fall_back():
    from edgerun.convert.hf import tensor_type
    # llama.cpp's fallbacks: Q4_K -> Q5_0, Q6_K -> Q8_0 (Q5_K -> Q5_1: test_convert_quant_types.py)
    assert tensor_type((64, 288), "q4_k_m", "blk.0.attn_q.weight", 8)[0] == "q5_0"
    assert tensor_type((64, 288), "q6_k", "blk.0.attn_q.weight", 8)[0] == "q8_0"
    assert tensor_type((64, 48), "q6_k", "blk.0.attn_q.weight", 8)[0] == "f16"
    assert tensor_type((64, 512), "q4_k_m", "blk.7.ffn_down.weight", 8)[0] == "q6_k"
    assert tensor_type((64, 512), "q4_k_m", "token_embd.weight", 8, tied=True)[0] == "q6_k"


@pytest.mark.parametrize("name,bound", [("Q4_K", 0.12), ("Q5_K", 0.06), ("Q6_K", 0.03)])
def test_quantizer_blocks_decode_like_gguf_package(name, bound):
    from gguf import GGMLQuantizationType, quants
    from edgerun.convert import kquants, reference
    x = (np.random.RandomState(0).standard_normal((8, 512)) * 0.05).astype(np.float32)
    x[1, :256] = 0.0                     # an all-zero super-block
    x[2, :32] = 0.0                      # an all-zero sub-block
    x[3] += 0.1                          # all positive (min clamps to 0)
    raw = kquants.quantize(x, name)
    assert raw.shape == (8, 512 // 256 * kquants.BLOCK_BYTES[name])
    qt = GGMLQuantizationType[name]
    theirs = quants.dequantize(raw, qt).reshape(8, 512)
    ours = reference.dequantize(raw.tobytes(), int(qt), [512, 8])
    np.testing.assert_array_equal(ours, theirs)
    assert (ours[1, :256] == 0).all()
    rms = np.sqrt(((ours - x) ** 2).mean() / (x ** 2).mean())
    assert rms <= bound, f"{name}: relative RMS error {rms:.3f}"


@pytest.mark.parametrize("ftype", ["q4_k_m", "q5_k_m", "q6_k"])
def test_runtime_matches_reference(kmodel, converted, ftype):
    import edgerun
    from edgerun.convert import reference
    _, n_vocab = kmodel
    path, _ = converted[ftype]
    ids = [int(v) for v in np.random.RandomState(3).randint(0, n_vocab, 24)]
    ref = reference.GGUFModel(path)
    want = reference.forward(ref, ids, act_q8=True)
    with edgerun.Model(path, n_ctx=32, isa="generic") as m:
        generic = m.logits(ids)
    k = K_EXACT_POSITIONS
    err = rel_err(generic[:k], want[:k])
    assert err <= K_TOL_EXACT, f"{ftype} generic vs reference, first {k} positions: {err:.2e}"
    err = rel_err(generic, want)
    assert err <= K_TOL, f"{ftype} generic vs reference: {err:.2e}"
    err_float = rel_err(generic, reference.forward(ref, ids))
    assert err_float <= K_TOL_FLOAT_ACT, f"{ftype} vs float-activation reference: {err_float:.2e}"
    with edgerun.Model(path, n_ctx=32, n_threads=2) as m:
        best, isa = m.logits(ids), m.isa
    err = rel_err(best[:k], want[:k])
    assert err <= K_TOL_EXACT, f"{ftype} {isa} vs reference, first {k} positions: {err:.2e}"
    err = rel_err(best, want)
    assert err <= K_TOL, f"{ftype} {isa} vs reference: {err:.2e}"


_PROJECTIONS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


@pytest.mark.parametrize("ftype", ["q4_k_m", "q5_k_m", "q6_k"])
def test_repacked_kquants_equal_file_layout(converted, ftype, monkeypatch):
    """The interleaved K-quant layouts (kernels/x86/repack_q*_k_avx2.c,
    kernels/neon/repack_q*_k_neon.c) return generic's bits, like the
    row-wise kernels on the file layout: with and without repacking the
    whole model's logits are identical, and every projection matrix of the
    file is in the repacked section where the table has layouts for all
    three K-quant types."""
    from edgerun.convert import reference
    path, _ = converted[ftype]
    ids = [int(v) for v in np.random.RandomState(7).randint(0, 200, 20)]
    isa, repacked, got, want = logits_repacked_and_not(path, ids, monkeypatch, n_ctx=32, n_threads=2)
    assert np.array_equal(got, want)
    if isa not in ("avx2", "avx512vnni", "neon", "neon-dotprod", "neon-i8mm"):
        pytest.skip(f"table {isa} keeps the file layout")
    ref = reference.GGUFModel(path)
    mats = [n for n in ref.raw if n == "output.weight" or n.split(".")[-2] in _PROJECTIONS]
    assert repacked["bytes"] == repacked["used"] >= sum(len(ref.raw[n]) for n in mats) > 0
