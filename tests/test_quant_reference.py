"""The numpy reference's dequantizers and activation quantizer, checked on their own.

The conformance tests trust edgerun.convert.reference to say what a quantized file
means; here it is checked against hand-built blocks (the layout spelled out in
bytes) and against the `gguf` package's independent implementation.
"""
import struct

import numpy as np
import pytest

from edgerun.convert import reference as ref


def f16_bytes(x):
    return np.float16(x).tobytes()


def test_q8_0_hand_block():
    # d = 0.5, q = -128..-97 (as int8) -> values q * 0.5
    q = np.arange(-128, -96, dtype=np.int8)
    raw = f16_bytes(0.5) + q.tobytes()
    np.testing.assert_array_equal(ref.dequantize(raw, ref.Q8_0, [32]), q.astype(np.float32) * 0.5)


def test_q4_0_hand_block_nibble_order():
    # byte j holds element j in its low nibble and element j+16 in its high nibble.
    lo = np.arange(16, dtype=np.uint8)            # elements 0..15 -> nibbles 0..15
    hi = (15 - np.arange(16)).astype(np.uint8)    # elements 16..31 -> nibbles 15..0
    raw = f16_bytes(2.0) + (lo | (hi << 4)).astype(np.uint8).tobytes()
    want = np.concatenate([lo, hi]).astype(np.float32) - 8
    np.testing.assert_array_equal(ref.dequantize(raw, ref.Q4_0, [32]), want * 2.0)


def test_f16_bf16_f32_hand():
    assert ref.dequantize(f16_bytes(-1.5) + f16_bytes(65504), ref.F16, [2]).tolist() == [-1.5, 65504.0]
    # bf16 0x3FC0 = 1.5, 0xC040 = -3.0
    assert ref.dequantize(struct.pack("<HH", 0x3FC0, 0xC040), ref.BF16, [2]).tolist() == [1.5, -3.0]
    assert ref.dequantize(struct.pack("<ff", 3.25, -0.0), ref.F32, [2]).tolist() == [3.25, -0.0]


@pytest.mark.parametrize("name", ["F16", "BF16", "Q8_0", "Q4_0"])
def test_dequantizers_agree_with_gguf_package(name):
    from gguf import GGMLQuantizationType, quants
    qt = GGMLQuantizationType[name]
    x = (np.random.RandomState(0).standard_normal((6, 96)) * 3).astype(np.float32)
    x[2, :32] = 0.0                      # an all-zero block (d = 0)
    packed = quants.quantize(x, qt)
    ours = ref.dequantize(packed.tobytes(), int(qt), [96, 6])
    theirs = quants.dequantize(packed, qt)
    np.testing.assert_array_equal(ours, theirs.reshape(6, 96))
    # and the values are what the type can represent of x
    bound = {"F16": 2e-3, "BF16": 1e-2, "Q8_0": 0.03, "Q4_0": 0.3}[name]
    assert np.abs(ours - x).max() <= bound * np.abs(x).max()


def test_quantized_rounding_bounds():
    """Q8_0 is within half a step of the input (d/2, d = max|x|/127 per block),
    plus what storing d as float16 moves the largest code (127 * |d16 - d|)."""
    from gguf import GGMLQuantizationType, quants
    x = np.random.RandomState(1).uniform(-4, 4, (4, 64)).astype(np.float32)
    deq = ref.dequantize(quants.quantize(x, GGMLQuantizationType.Q8_0).tobytes(), ref.Q8_0, [64, 4])
    d = np.abs(x.reshape(-1, 32)).max(axis=1, keepdims=True) / 127
    d16 = d.astype(np.float16).astype(np.float32)
    bound = d / 2 + 127 * np.abs(d16 - d) + 1e-6
    assert (np.abs(deq.reshape(-1, 32) - x.reshape(-1, 32)) <= bound).all()


def test_activation_quantizer_matches_q8_0_reference_rounding():
    """quantize_act_q8_0 rounds exactly as llama.cpp's quantize_row_q8_0_ref
    (which the gguf package reproduces bit for bit), including halfway cases."""
    from gguf import GGMLQuantizationType, quants
    rng = np.random.RandomState(2)
    x = rng.standard_normal((5, 64)).astype(np.float32)
    x[0, :32] = np.arange(32) - 15.5          # x/d lands on .5 boundaries
    x[0, 0] = 127.0 * 0.25
    x[1, 32:] = 0
    via_gguf = quants.dequantize(quants.quantize(x, GGMLQuantizationType.Q8_0), GGMLQuantizationType.Q8_0)
    np.testing.assert_array_equal(ref.quantize_act_q8_0(x), via_gguf.astype(np.float64))


def test_dequantize_rejects_short_or_partial_input():
    with pytest.raises(ValueError):
        ref.dequantize(b"\0" * 33, ref.Q8_0, [32])
    with pytest.raises(ValueError):
        ref.dequantize(b"\0" * 34, ref.Q8_0, [16])
    with pytest.raises(ValueError):
        ref.dequantize(b"\0" * 83, ref.Q2_K, [256])
    with pytest.raises(NotImplementedError):
        ref.dequantize(b"\0" * 100, 16, [256])   # IQ2_XXS: no dequantizer


def test_rope_variants_rotate_the_right_pairs():
    """Interleaved RoPE on a permuted vector equals NEOX RoPE on the original:
    the identity that lets the converter permute llama's Q/K."""
    from edgerun.convert.hf import permute_qk
    rng = np.random.RandomState(3)
    hd, nh = 16, 2
    w = rng.standard_normal((nh * hd, 8))
    x = rng.standard_normal((5, 8))
    pos = np.arange(5) * 7
    neox = ref.rope((x @ w.T).reshape(5, nh, hd), pos, 10000.0, hd, True)
    inter = ref.rope((x @ permute_qk(w, nh).T).reshape(5, nh, hd), pos, 10000.0, hd, False)
    # the interleaved result is the NEOX result with each head's rows permuted the same way
    want = permute_qk(neox.reshape(5, nh * hd).T, nh).T
    np.testing.assert_allclose(inter.reshape(5, -1), want, atol=1e-12)
