"""Hugging Face -> GGUF: the converter, the tokenizer's metadata, the K-quant
quantizers and the numpy reference that tests judge the runtime against.

    from edgerun.convert import convert
    convert("./TinyLlama-1.1B", "model-q8_0.gguf", "q8_0")

    hf          convert(), TYPES: safetensors folder -> GGUF, llama.cpp's layout
    tokenizer   add_tokenizer(), write_vocab_gguf(): tokenizer.json / tokenizer.model -> GGUF keys
    mix         tensor_type(): llama.cpp's per-tensor type for each file type, with its fallbacks
    quantize    quantize(): float32 -> any type's blocks (the modules below, gguf's legacy quantizers)
    kquants     Q4_K / Q5_K / Q6_K quantizers in numpy
    quants_k23  Q2_K / Q3_K quantizers in numpy
    quants_iq4  IQ4_NL / IQ4_XS quantizers in numpy
    reference   GGUFModel, forward(), greedy(): dequantizers and a float64 forward pass

Imports only the runtime's errors, never the C library: converting works
before libedgerun is built (tests/test_layering.py checks it).
"""
from .hf import TYPES, ConvertError, convert

__all__ = ["convert", "TYPES", "ConvertError"]


def __getattr__(name):
    # The rest of what `edgerun.convert` held when it was one module (hf.py now).
    import importlib   # not `from . import`: that would ask this __getattr__ again
    hf = importlib.import_module(f"{__name__}.hf")
    if not name.startswith("_") and hasattr(hf, name):
        return getattr(hf, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
