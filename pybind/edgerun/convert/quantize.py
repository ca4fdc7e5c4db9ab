"""One entry point over the quantizers: a float32 array -> the raw blocks of a
GGML type, as llama.cpp's quantizer (without an importance matrix) writes them.

    kquants     Q4_K, Q5_K, Q6_K
    quants_k23  Q2_K, Q3_K
    quants_iq4  IQ4_NL, IQ4_XS
    gguf.quants BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1: the gguf package's
                quantizers for these give llama.cpp's bytes exactly
                (tests/test_convert_quant_types.py checks it against libggml)

The last dimension of the array is a row; it must be a multiple of the type's
block (mix.py picks types that fit). Returns uint8 with the last dimension
replaced by bytes per row.
"""
import numpy as np


def _ours():
    from . import kquants, quants_iq4, quants_k23
    return {**kquants.QUANTIZERS, **quants_k23.QUANTIZERS, **quants_iq4.QUANTIZERS}


GGUF_TYPES = ("BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1")


def quantize(data, type_name):
    ours = _ours()
    if type_name in ours:
        return ours[type_name](data)
    if type_name in GGUF_TYPES:
        from gguf import GGMLQuantizationType, quants
        return quants.quantize(np.ascontiguousarray(data, dtype=np.float32), GGMLQuantizationType[type_name])
    raise ValueError(f"no quantizer for GGML type {type_name}")
