#!/usr/bin/env python3
"""Writes a benchmark model: a Llama GGUF of a real shape with seeded random weights.

Two shapes, those of the "stories" Llamas (tied embeddings, vocab 32000):
  15m:  dim 288, 6 layers, 6 heads, hidden 768   (~15M parameters)
  110m: dim 768, 12 layers, 12 heads, hidden 2048 (~110M parameters)
and 110m-gqa, the 110M shape with 4 K/V heads and a 2048-token context
(`make bench-long`).
Big enough that decode streams tens to hundreds of megabytes of weights per
token. The weights mean nothing; only speed and memory are measured on them.

Q4_K needs rows that are a multiple of 256 elements. The 15M shape's rows of
288 are not, so there — as llama.cpp's quantizer falls back to a legacy type
for such tensors — the 288-wide matrices are Q4_0 (the same 4.5 bits per
weight) and only ffn_down (rows of 768) is Q4_K. A SentencePiece
vocabulary of synthetic pieces (<unk>, <s>, </s>, the 256 byte tokens, then
filler words) makes the file loadable by llama.cpp as well as by edgerun.

    python scripts/make_bench_model.py build/bench/llama15m-f32.gguf --type f32
    python scripts/make_bench_model.py build/bench/llama15m-q8_0.gguf --type q8_0
    python scripts/make_bench_model.py build/bench/llama110m-q4_k.gguf --type q4_k --shape 110m
"""
import argparse
import pathlib
import sys

import numpy as np

try:
    import gguf
except ImportError:  # pragma: no cover - depends on the environment
    sys.exit("make_bench_model: the `gguf` package is needed: pip install gguf")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "pybind"))
from edgerun.convert import kquants  # noqa: E402  (numpy only; the C library is not loaded)

SHAPES = {
    "15m": dict(n_vocab=32000, dim=288, n_layer=6, n_head=6, n_head_kv=6, hidden=768, n_ctx=512),
    "110m": dict(n_vocab=32000, dim=768, n_layer=12, n_head=12, n_head_kv=12, hidden=2048, n_ctx=1024),
    # `make bench-long`: the 110M shape with grouped-query attention (3 query heads per K/V
    # head, as in Llama 3.2 3B and SmolLM2) and a 2048-token context
    "110m-gqa": dict(n_vocab=32000, dim=768, n_layer=12, n_head=12, n_head_kv=4, hidden=2048, n_ctx=2048),
}
SHAPE = SHAPES["15m"]
T = gguf.GGMLQuantizationType
TYPES = {"f32": T.F32, "f16": T.F16, "q8_0": T.Q8_0, "q4_0": T.Q4_0, "q4_k": T.Q4_K}
FILE_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 7, "q4_k": 15}   # llama.cpp's general.file_type values


def synthetic_vocab(n_vocab):
    """SentencePiece-style pieces: specials, byte fallback tokens, unique filler words."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + \
        [gguf.TokenType.BYTE] * 256
    letters = "abcdefghijklmnopqrstuvwxyz"
    i = 0
    while len(tokens) < n_vocab:
        word, k = "", i
        while True:
            word = letters[k % 26] + word
            k = k // 26 - 1
            if k < 0:
                break
        # Alternate word-initial ("▁word") and continuation pieces, as real vocabularies mix them.
        tokens.append(("\u2581" + word) if i % 2 == 0 else word)
        types.append(gguf.TokenType.NORMAL)
        i += 1
    scores = [0.0] * 259 + [-float(j) for j in range(n_vocab - 259)]
    return tokens, scores, types


def build(path, wtype, seed=0, shape="15m"):
    s = SHAPES[shape]
    rng = np.random.default_rng(seed)
    head_dim = s["dim"] // s["n_head"]

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(f"edgerun-bench-{shape.upper()}-{wtype}")
    w.add_context_length(s["n_ctx"])
    w.add_embedding_length(s["dim"])
    w.add_block_count(s["n_layer"])
    w.add_feed_forward_length(s["hidden"])
    w.add_head_count(s["n_head"])
    w.add_head_count_kv(s["n_head_kv"])
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(head_dim)
    w.add_vocab_size(s["n_vocab"])
    w.add_file_type(FILE_TYPES[wtype])

    tokens, scores, types = synthetic_vocab(s["n_vocab"])
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)

    def weight(name, rows, cols):
        data = (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float32)
        q = TYPES[wtype]
        if q == T.Q4_K and cols % kquants.QK_K:
            q = T.Q4_0
        if q == T.Q4_K:
            w.add_tensor(name, kquants.quantize(data, "Q4_K"), raw_dtype=q)
        elif q == T.F32:
            w.add_tensor(name, data)
        elif q == T.F16:
            w.add_tensor(name, data.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(data, q), raw_dtype=q)

    def norm(name, n):
        w.add_tensor(name, np.ones(n, dtype=np.float32))

    d, h, kv = s["dim"], s["hidden"], s["n_head_kv"] * head_dim
    weight("token_embd.weight", s["n_vocab"], d)     # tied: no output.weight
    for i in range(s["n_layer"]):
        p = f"blk.{i}."
        norm(p + "attn_norm.weight", d)
        weight(p + "attn_q.weight", d, d)
        weight(p + "attn_k.weight", kv, d)
        weight(p + "attn_v.weight", kv, d)
        weight(p + "attn_output.weight", d, d)
        norm(p + "ffn_norm.weight", d)
        weight(p + "ffn_gate.weight", h, d)
        weight(p + "ffn_up.weight", h, d)
        weight(p + "ffn_down.weight", d, h)
    norm("output_norm.weight", d)

    path.parent.mkdir(parents=True, exist_ok=True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=pathlib.Path, help="GGUF file to write")
    ap.add_argument("--type", choices=sorted(TYPES), default="f32", help="type of the 2-D weights")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="15m", help="model shape (default 15m)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    build(a.out, a.type, a.seed, a.shape)
    print(f"make_bench_model: wrote {a.out} ({a.out.stat().st_size / 2**20:.1f} MiB, {a.shape} {a.type})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
