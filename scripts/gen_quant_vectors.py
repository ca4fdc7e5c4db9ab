#!/usr/bin/env python3
"""Writes dequantization vectors for runtime_c/tests/test_quant_vectors.c.

For each of the types issue 25 added (and the older ones, as a control),
random block bytes with sane scale fields, and the floats gguf-py's
`gguf.quants.dequantize` makes of them: the C dequantizers of every kernel
table must give the same bits. Scales are random f16 of both signs (llama.cpp
stores negative d for Q4_0/Q5_0/IQ4_NL as often as positive), with one
block's scales zero and one's subnormal, so no scale class goes unchecked.

File format (little-endian): b"ERQV", u32 record count; per record u32 GGML
type id, u32 element count n, u32 byte count, the raw blocks, n float32.

    python scripts/gen_quant_vectors.py [OUT] [--seed N]
"""
import argparse
import pathlib
import struct

import numpy as np

# type name -> [(byte offset, kind)] of the f16 scale fields in one block
SCALES = {
    "Q4_0": [(0, "d")], "Q8_0": [(0, "d")],
    "Q4_1": [(0, "d"), (2, "m")], "Q5_0": [(0, "d")], "Q5_1": [(0, "d"), (2, "m")],
    "IQ4_NL": [(0, "d")], "IQ4_XS": [(0, "d")],
    "Q2_K": [(80, "d"), (82, "d")], "Q3_K": [(108, "d")],
    "Q4_K": [(0, "d"), (2, "d")], "Q5_K": [(0, "d"), (2, "d")], "Q6_K": [(208, "d")],
}
TYPES = ["Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "IQ4_XS", "Q3_K", "Q2_K", "Q4_0", "Q8_0", "Q4_K", "Q5_K", "Q6_K"]


def make(name, rng, n_blocks):
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, quants
    qt = GGMLQuantizationType[name]
    be, bb = GGML_QUANT_SIZES[qt]
    raw = rng.integers(0, 256, size=(n_blocks, bb), dtype=np.uint8)
    for b in range(n_blocks):
        for off, kind in SCALES[name]:
            if b == 1:
                v = 0.0                                   # a zero scale
            elif b == 2:
                v = float(rng.uniform(-1, 1)) * 2.0 ** -20  # a subnormal half
            else:
                v = float(rng.uniform(0.0005, 0.05)) * (1 if kind == "m" or rng.random() < 0.5 else -1)
                if kind == "m":
                    v = -v * 8
            raw[b, off:off + 2] = np.frombuffer(np.float16(v).tobytes(), dtype=np.uint8)
    want = quants.dequantize(raw, qt).astype(np.float32).reshape(-1)
    assert want.size == n_blocks * be and np.isfinite(want).all()
    return int(qt), raw.tobytes(), want


def write(path, seed=25, types=TYPES):
    rng = np.random.default_rng(seed)
    recs = []
    for name in types:
        from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
        be, _ = GGML_QUANT_SIZES[GGMLQuantizationType[name]]
        recs.append(make(name, rng, 8 if be == 32 else 4))
    with open(path, "wb") as f:
        f.write(b"ERQV" + struct.pack("<I", len(recs)))
        for t, raw, want in recs:
            f.write(struct.pack("<III", t, want.size, len(raw)) + raw + want.astype("<f4").tobytes())
    return len(recs)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default=str(pathlib.Path(__file__).resolve().parent.parent / "runtime_c" / "tests"
                                                  / "data" / "quant_vectors.bin"))
    ap.add_argument("--seed", type=int, default=25)
    a = ap.parse_args()
    print(f"{write(a.out, a.seed)} records -> {a.out}")
