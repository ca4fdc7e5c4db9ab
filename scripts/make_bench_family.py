#!/usr/bin/env python3
"""Writes a benchmark model of a real family's shape: seeded random weights in a
Hugging Face folder, converted to F16 GGUF by `edgerun convert`, then quantized by
llama.cpp's own quantizer (llama_model_quantize), as published GGUF files are made.

Two shapes, the published configs' dimensions (config.json of the Hugging Face
releases, and the GGUF metadata llama.cpp writes for them):
  gemma3-270m: hidden 640, 18 layers, 4 heads on 1 K/V head of 256, FFN 2048,
               vocab 262144, sliding window 512 on 5 of every 6 layers (RoPE base
               10000 there, 1000000 on the global layers), query_pre_attn_scalar 256
  qwen3-0.6b:  hidden 1024, 28 layers, 16 heads on 8 K/V heads of 128, FFN 3072,
               vocab 151936, RoPE base 1000000, QK norm
Both tie the output to the embeddings, so the large vocabularies (a 262144 x 640
and a 151936 x 1024 matrix) are read by every decode step, as with the real
models. The weights mean nothing; only speed and memory are measured on them.

The tokenizer is a synthetic SentencePiece BPE model of the real vocabulary size
(byte tokens, then filler words): the benchmark feeds token ids, so what matters is
the vocabulary's size, not its pieces.

    python scripts/make_bench_family.py build/bench/qwen3-0.6b-q8_0.gguf --shape qwen3-0.6b --type q8_0

The F16 file is cached beside the output (SHAPE-f16.gguf); the Hugging Face folder
is removed once converted.
"""
import argparse
import pathlib
import shutil
import struct
import subprocess
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "pybind"))
sys.path.insert(0, str(ROOT / "scripts"))

SHAPES = {
    "gemma3-270m": dict(
        cls="Gemma3TextConfig", arch="Gemma3ForCausalLM", vocab_size=262144, hidden_size=640,
        num_hidden_layers=18, num_attention_heads=4, num_key_value_heads=1, head_dim=256,
        intermediate_size=2048, max_position_embeddings=32768, rms_norm_eps=1e-6,
        query_pre_attn_scalar=256, sliding_window=512, hidden_activation="gelu_pytorch_tanh",
        layer_types=["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(18)],
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
        tie_word_embeddings=True),
    "qwen3-0.6b": dict(
        cls="Qwen3Config", arch="Qwen3ForCausalLM", vocab_size=151936, hidden_size=1024,
        num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
        intermediate_size=3072, max_position_embeddings=40960, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, tie_word_embeddings=True),
}
# llama.cpp's LLAMA_FTYPE_MOSTLY_* for the types the bench rows use
FTYPES = {"q8_0": 7, "q4_k_m": 15}


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(num, wire, payload):
    key = _varint((num << 3) | wire)
    if wire == 2:
        return key + _varint(len(payload)) + payload
    return key + payload


def write_spm(path, n_vocab):
    """A SentencePiece BPE ModelProto of n_vocab pieces (<unk> <s> </s>, 256 byte
    pieces, filler words; identity normalizer, byte fallback) written with the
    protobuf wire format directly, so no protobuf package is needed."""
    from make_bench_model import synthetic_vocab
    tokens, scores, types = synthetic_vocab(n_vocab)
    spm_type = {1: 1, 2: 2, 3: 3, 6: 6}   # gguf TokenType and SentencePiece's enum agree on these
    out = bytearray()
    for tok, sc, ty in zip(tokens, scores, types):
        piece = _field(1, 2, tok.encode()) + _field(2, 5, struct.pack("<f", sc)) + _field(3, 0, _varint(spm_type[int(ty)]))
        out += _field(1, 2, piece)
    trainer = (_field(3, 0, _varint(2)) + _field(35, 0, _varint(1)) + _field(40, 0, _varint(0))
               + _field(41, 0, _varint(1)) + _field(42, 0, _varint(2)))
    out += _field(2, 2, trainer)
    out += _field(3, 2, _field(1, 2, b"identity") + _field(3, 0, _varint(0)) + _field(4, 0, _varint(0)))
    pathlib.Path(path).write_bytes(bytes(out))


def write_hf(folder, shape, seed=0):
    """A Hugging Face folder of `shape`: config.json from transformers' own config
    class, seeded random F16 weights under the names the model class gives them."""
    import torch
    import transformers
    from safetensors.numpy import save_file

    s = dict(SHAPES[shape])
    cls, arch = s.pop("cls"), s.pop("arch")
    cfg = getattr(transformers, cls)(bos_token_id=1, eos_token_id=2, pad_token_id=0, **s)
    cfg.architectures = [arch]
    with torch.device("meta"):
        model = getattr(transformers, arch)(cfg)
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cfg.save_pretrained(folder)
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, p in model.state_dict().items():
        if name == "lm_head.weight":
            continue   # tied
        shape_ = tuple(p.shape)
        if "norm" in name:
            # RMSNorm gains: Gemma stores w with (1 + w) applied, the others w itself
            arr = np.zeros(shape_, np.float16) if shape == "gemma3-270m" else np.ones(shape_, np.float16)
        else:
            arr = (rng.standard_normal(shape_, dtype=np.float32) * 0.02).astype(np.float16)
        tensors[name] = arr
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    write_spm(folder / "tokenizer.model", s["vocab_size"])


def llama_quantize(src, dst, ftype):
    """dst: src quantized to llama.cpp file type `ftype` by llama.cpp itself, in a
    child process so its library and logs stay out of this one."""
    code = ("import ctypes, sys, llama_cpp\n"
            "p = llama_cpp.llama_model_quantize_default_params()\n"
            "p.ftype = int(sys.argv[3])\n"
            "sys.exit(llama_cpp.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), ctypes.byref(p)))\n")
    r = subprocess.run([sys.executable, "-c", code, str(src), str(dst), str(ftype)], capture_output=True, text=True,
                       timeout=1800)
    if r.returncode != 0:
        tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"llama.cpp's quantizer failed on {src} (file type {ftype}): {tail}; "
                           f"the family rows need llama-cpp-python (pip install llama-cpp-python)")


def f16_file(out_dir, shape, log=print):
    """out_dir/SHAPE-f16.gguf, made (seeded HF folder -> edgerun convert) when missing."""
    from edgerun.convert.hf import convert
    out_dir = pathlib.Path(out_dir)
    path = out_dir / f"{shape}-f16.gguf"
    if path.is_file():
        return path
    hf = out_dir / f"hf-{shape}"
    shutil.rmtree(hf, ignore_errors=True)
    log(f"make_bench_family: writing {hf} (seeded weights)")
    write_hf(hf, shape)
    tmp = path.with_name(path.name + ".part")
    log(f"make_bench_family: edgerun convert {hf} -> {path.name}")
    convert(hf, tmp, "f16", name=f"edgerun-bench-{shape}", quiet=True)
    tmp.replace(path)
    shutil.rmtree(hf, ignore_errors=True)
    return path


def build(path, shape, wtype, log=print):
    path = pathlib.Path(path)
    if wtype == "f16":
        src = f16_file(path.parent, shape, log)
        if src != path:
            shutil.copyfile(src, path)
        return path
    src = f16_file(path.parent, shape, log)
    log(f"make_bench_family: llama.cpp quantize {src.name} -> {path.name}")
    llama_quantize(src, path, FTYPES[wtype])
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=pathlib.Path, help="GGUF file to write")
    ap.add_argument("--shape", choices=sorted(SHAPES), required=True)
    ap.add_argument("--type", choices=("f16",) + tuple(FTYPES), default="q8_0")
    a = ap.parse_args(argv)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    build(a.out, a.shape, a.type)
    print(f"make_bench_family: wrote {a.out} ({a.out.stat().st_size / 2**20:.1f} MiB, {a.shape} {a.type})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
