"""Hugging Face -> GGUF: the converter, the tokenizer's metadata, the K-quant
quantizers and the numpy reference that tests judge the runtime against.

    from edgerun.convert import convert
    convert("./TinyLlama-1.1B", "model-q8_0.gguf", "q8_0")

    hf          convert(), TYPES: safetensors folder -> GGUF, llama.cpp's layout
    tokenizer   add_tokenizer(), write_vocab_gguf(): tokenizer.json / tokenizer.model -> GGUF keys
    kquants     Q4_K / Q5_K / Q6_K quantizers in numpy
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
