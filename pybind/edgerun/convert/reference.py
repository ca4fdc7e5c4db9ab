"""Numpy reference: dequantizers and a forward pass over a GGUF file.

The tests judge the C runtime against this on the very same file: weights are
dequantized here from the raw block bytes, then one float64 forward pass runs
over them. The runtime's logits must then agree within a tolerance set by the
arithmetic (float32 accumulation, and for quantized weights the runtime's own
quantization of activations), not by the weights' quantization error, which
both sides see identically.

Written to be read: each step is the textbook formula, no fusion, no tricks.
"""
import math
import pathlib

import numpy as np

# GGML type ids (llama.cpp numbering) -> (elements per block, bytes per block).
F32, F16, Q4_0, Q8_0, BF16 = 0, 1, 2, 8, 30
Q4_K, Q5_K, Q6_K = 12, 13, 14
Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, IQ4_NL, IQ4_XS = 3, 6, 7, 10, 11, 20, 23
BLOCKS = {F32: (1, 4), F16: (1, 2), BF16: (1, 2), Q8_0: (32, 34), Q4_0: (32, 18),
          Q4_K: (256, 144), Q5_K: (256, 176), Q6_K: (256, 210),
          Q4_1: (32, 20), Q5_0: (32, 22), Q5_1: (32, 24), IQ4_NL: (32, 18),
          Q2_K: (256, 84), Q3_K: (256, 110), IQ4_XS: (256, 136)}
TYPE_NAMES = {F32: "F32", F16: "F16", BF16: "BF16", Q8_0: "Q8_0", Q4_0: "Q4_0",
              Q4_K: "Q4_K", Q5_K: "Q5_K", Q6_K: "Q6_K",
              Q4_1: "Q4_1", Q5_0: "Q5_0", Q5_1: "Q5_1", IQ4_NL: "IQ4_NL",
              Q2_K: "Q2_K", Q3_K: "Q3_K", IQ4_XS: "IQ4_XS"}
K_QUANTS = (Q4_K, Q5_K, Q6_K)
# What the runtime (and llama.cpp) rounds a matmul's activations to before the
# integer dot, by weight type: Q8_0 blocks of 32 for the 32-element types,
# Q8_K blocks of 256 for the super-block types (kernels.h, ER_ACT_KINDS).
ACT_Q8_0 = (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL)
ACT_Q8_K = K_QUANTS + (Q2_K, Q3_K, IQ4_XS)


# ---------------------------------------------------------------- dequantizers

def dequant_f32(raw, n):
    return np.frombuffer(raw, dtype="<f4", count=n).astype(np.float32)


def dequant_f16(raw, n):
    return np.frombuffer(raw, dtype="<f2", count=n).astype(np.float32)


def dequant_bf16(raw, n):
    # bfloat16 is the upper 16 bits of an IEEE float32.
    u = np.frombuffer(raw, dtype="<u2", count=n).astype(np.uint32) << 16
    return u.view(np.float32)


def dequant_q8_0(raw, n):
    """Q8_0 block (34 bytes): float16 scale d, then 32 int8 q; x = q * d."""
    nb = n // 32
    blocks = np.frombuffer(raw, dtype=np.uint8, count=nb * 34).reshape(nb, 34)
    d = blocks[:, :2].copy().view("<f2").astype(np.float32)          # (nb, 1)
    q = blocks[:, 2:].copy().view(np.int8).astype(np.float32)        # (nb, 32)
    return (q * d).reshape(n)


def dequant_q4_0(raw, n):
    """Q4_0 block (18 bytes): float16 scale d, then 16 bytes; element j is the
    low nibble of byte j, element j+16 the high nibble; x = (nibble - 8) * d."""
    nb = n // 32
    blocks = np.frombuffer(raw, dtype=np.uint8, count=nb * 18).reshape(nb, 18)
    d = blocks[:, :2].copy().view("<f2").astype(np.float32)
    qs = blocks[:, 2:]
    lo = (qs & 0x0F).astype(np.int32) - 8
    hi = (qs >> 4).astype(np.int32) - 8
    q = np.concatenate([lo, hi], axis=1).astype(np.float32)          # (nb, 32)
    return (q * d).reshape(n)


def _dequant_k(ggml_type):
    """K-quant super-blocks of 256 (layouts spelled out in kquants.py)."""
    def f(raw, n):
        from . import kquants
        nb = n // 256
        bb = BLOCKS[ggml_type][1]
        blocks = np.frombuffer(raw, dtype=np.uint8, count=nb * bb)
        return kquants.dequantize(blocks, TYPE_NAMES[ggml_type], 256).reshape(n)
    return f


def _dequant_gguf(ggml_type):
    """The types of issue 25, dequantized by the gguf package (an independent
    implementation of llama.cpp's layouts, bit-exact with it)."""
    def f(raw, n):
        from gguf import GGMLQuantizationType, quants
        be, bb = BLOCKS[ggml_type]
        blocks = np.frombuffer(raw, dtype=np.uint8, count=n // be * bb).reshape(-1, bb)
        return quants.dequantize(blocks, GGMLQuantizationType(ggml_type)).astype(np.float32).reshape(n)
    return f


DEQUANT = {F32: dequant_f32, F16: dequant_f16, BF16: dequant_bf16, Q8_0: dequant_q8_0, Q4_0: dequant_q4_0,
           Q4_K: _dequant_k(Q4_K), Q5_K: _dequant_k(Q5_K), Q6_K: _dequant_k(Q6_K),
           **{t: _dequant_gguf(t) for t in (Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, IQ4_XS)}}


def nbytes(ggml_type, n_elements):
    be, bb = BLOCKS[ggml_type]
    return n_elements // be * bb


def dequantize(raw, ggml_type, ne):
    """Float32 array of numpy shape reversed(ne) (rows of ne[0]) from raw bytes."""
    if ggml_type not in DEQUANT:
        raise NotImplementedError(f"reference has no dequantizer for GGML type {ggml_type}")
    n = int(np.prod(ne))
    be, _ = BLOCKS[ggml_type]
    if n % be:
        raise ValueError(f"{n} elements is not a whole number of {be}-element blocks")
    if len(raw) < nbytes(ggml_type, n):
        raise ValueError("raw tensor data is shorter than its shape requires")
    return DEQUANT[ggml_type](raw, n).reshape(tuple(int(x) for x in reversed(ne)))


# ---------------------------------------------------------------- file

class GGUFModel:
    """Hyper-parameters and dequantized weights of a llama/qwen2 GGUF file."""

    def __init__(self, path):
        from gguf import GGUFReader
        self.path = pathlib.Path(path)
        r = GGUFReader(str(self.path))
        self.fields = {}
        for k, f in r.fields.items():
            try:
                self.fields[k] = f.contents()
            except Exception:    # a field type the reader cannot turn into Python: we don't need it
                pass
        self.arch = self.fields["general.architecture"]
        mm = np.memmap(self.path, dtype=np.uint8, mode="r")
        self.tensor_types = {}
        self.raw = {}
        self.ne = {}
        for t in r.tensors:
            ne = [int(x) for x in t.shape]
            self.ne[t.name] = ne
            self.tensor_types[t.name] = int(t.tensor_type)
            self.raw[t.name] = mm[t.data_offset:t.data_offset + int(t.n_bytes)]
        a = self.arch
        kv = self.fields
        self.n_embd = int(kv[f"{a}.embedding_length"])
        self.n_layer = int(kv[f"{a}.block_count"])
        self.n_head = int(kv[f"{a}.attention.head_count"])
        self.n_head_kv = int(kv.get(f"{a}.attention.head_count_kv", self.n_head))
        self.n_ff = int(kv[f"{a}.feed_forward_length"])
        self.eps = float(kv[f"{a}.attention.layer_norm_rms_epsilon"])
        self.rope_base = float(kv.get(f"{a}.rope.freq_base", 10000.0))
        self.head_dim = int(kv.get(f"{a}.attention.key_length", self.n_embd // self.n_head))
        self.n_rot = int(kv.get(f"{a}.rope.dimension_count", self.head_dim))
        self.n_vocab = self.ne["token_embd.weight"][1]
        # llama files carry Q/K rows permuted to interleaved pairs; qwen2 keeps
        # Hugging Face's half-split (NEOX) order.
        self.rope_neox = a == "qwen2"
        self._cache = {}

    def weight(self, name):
        """Dequantized float64 weight (numpy shape (rows, ne0)), cached."""
        if name not in self._cache:
            self._cache[name] = dequantize(bytes(self.raw[name]), self.tensor_types[name],
                                           self.ne[name]).astype(np.float64)
        return self._cache[name]

    def has(self, name):
        return name in self.raw


# ---------------------------------------------------------------- forward

def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, pos, base, n_rot, neox):
    """Rotates (n, heads, head_dim) by position. Pair i (i < n_rot/2) turns by
    pos * base^(-2i/n_rot); interleaved pairs are (2i, 2i+1), NEOX pairs (i, i + n_rot/2)."""
    half = n_rot // 2
    inv = base ** (-np.arange(half, dtype=np.float64) * 2.0 / n_rot)
    ang = pos[:, None].astype(np.float64) * inv[None, :]             # (n, half)
    c = np.cos(ang)[:, None, :]
    s = np.sin(ang)[:, None, :]
    out = x.copy()
    if neox:
        a, b = x[..., :half], x[..., half:n_rot]
        out[..., :half] = a * c - b * s
        out[..., half:n_rot] = a * s + b * c
    else:
        a, b = x[..., 0:n_rot:2], x[..., 1:n_rot:2]
        out[..., 0:n_rot:2] = a * c - b * s
        out[..., 1:n_rot:2] = a * s + b * c
    return out


def quantize_act_q8_0(x):
    """What a Q8_0/Q4_0 matmul sees of float activations: each row cut into
    32-element blocks, d = max|x|/127 stored as float16, q = round-half-away(x/d)
    (llama.cpp's reference rule, computed as x * (1/d) like it does), value q * d16."""
    shape = x.shape
    b = x.astype(np.float32).reshape(-1, 32)
    d = np.abs(b).max(axis=1, keepdims=True) / np.float32(127)
    with np.errstate(divide="ignore"):
        inv = np.where(d == 0, np.float32(0), np.float32(1) / d).astype(np.float32)
    v = b * inv
    # roundf: half away from zero; adding 0.5 in float64 is exact for these magnitudes.
    q = np.sign(v) * np.floor(np.abs(v).astype(np.float64) + 0.5)
    d16 = d.astype(np.float16).astype(np.float64)
    return (q.astype(np.float64) * d16).reshape(shape)


def quantize_act_q8_k(x):
    """What a K-quant matmul sees of float activations: rows cut into 256-element
    blocks, with m the (first) element of largest magnitude, scale iscale =
    -127/m, q = clamp(round-half-even(iscale * x), -127, 127), value q / iscale
    (the runtime's Q8_K rule, kernels/generic/quant_q8_k.c; a float32 scale)."""
    shape = x.shape
    b = x.astype(np.float32).reshape(-1, 256)
    idx = np.abs(b).argmax(axis=1)
    m = b[np.arange(len(b)), idx][:, None]
    with np.errstate(divide="ignore"):
        iscale = np.where(m == 0, np.float32(0), np.float32(-127) / m).astype(np.float32)
    q = np.clip(np.rint(iscale * b), -127, 127)
    d = np.where(iscale == 0, np.float32(0), np.float32(1) / np.where(iscale == 0, 1, iscale)).astype(np.float32)
    return (q.astype(np.float64) * d.astype(np.float64)).reshape(shape)


def silu(x):
    return x / (1.0 + np.exp(-x))


def forward(model, ids, act_q8=False):
    """Logits (len(ids), n_vocab) as float64 for the token sequence from position 0.

    act_q8=True also rounds the activations entering every matmul of a
    32-element type to Q8_0 blocks, and those entering every super-block type's
    matmul to Q8_K blocks (ACT_Q8_0, ACT_Q8_K), as
    llama.cpp-style integer dot products (and the runtime) do;
    the remaining difference to such a runtime is float summation order only.
    """
    m = model if isinstance(model, GGUFModel) else GGUFModel(model)

    def mm(x, name):
        if act_q8 and m.tensor_types[name] in ACT_Q8_0:
            x = quantize_act_q8_0(x)
        elif act_q8 and m.tensor_types[name] in ACT_Q8_K:
            x = quantize_act_q8_k(x)
        return x @ m.weight(name).T

    ids = np.asarray(ids, dtype=np.int64)
    n = len(ids)
    hd, nh, nkv = m.head_dim, m.n_head, m.n_head_kv
    group = nh // nkv
    pos = np.arange(n)
    x = m.weight("token_embd.weight")[ids]                              # (n, n_embd)
    mask = np.triu(np.full((n, n), -np.inf), k=1)
    for L in range(m.n_layer):
        p = f"blk.{L}."
        h = rms_norm(x, m.weight(p + "attn_norm.weight"), m.eps)

        def proj(t):
            y = mm(h, p + t + ".weight")
            if m.has(p + t + ".bias"):
                y = y + m.weight(p + t + ".bias")
            return y

        q = proj("attn_q").reshape(n, nh, hd)
        k = proj("attn_k").reshape(n, nkv, hd)
        v = proj("attn_v").reshape(n, nkv, hd)
        q = rope(q, pos, m.rope_base, m.n_rot, m.rope_neox)
        k = rope(k, pos, m.rope_base, m.n_rot, m.rope_neox)
        att = np.empty((n, nh, hd))
        for head in range(nh):
            kh, vh = k[:, head // group], v[:, head // group]
            s = q[:, head] @ kh.T / math.sqrt(hd) + mask
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            att[:, head] = s @ vh
        x = x + mm(att.reshape(n, nh * hd), p + "attn_output.weight")
        h = rms_norm(x, m.weight(p + "ffn_norm.weight"), m.eps)
        g = mm(h, p + "ffn_gate.weight")
        u = mm(h, p + "ffn_up.weight")
        x = x + mm(silu(g) * u, p + "ffn_down.weight")
    x = rms_norm(x, m.weight("output_norm.weight"), m.eps)
    return mm(x, "output.weight" if m.has("output.weight") else "token_embd.weight")


def greedy(model, ids, n_new, act_q8=False):
    """Greedy continuation by re-running the full forward (slow; for tiny models)."""
    m = model if isinstance(model, GGUFModel) else GGUFModel(model)
    seq = list(ids)
    out = []
    for _ in range(n_new):
        nxt = int(np.argmax(forward(m, seq, act_q8)[-1]))
        out.append(nxt)
        seq.append(nxt)
    return out
