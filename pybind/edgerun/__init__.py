"""edgerun — run GGUF Llama-family models from one static arena.

    import edgerun
    with edgerun.Model() as m:                  # the embedded default model
        print(m.generate("0012+0034=", max_tokens=8))   # "64000": 46, digits reversed

    m = edgerun.Model("model.gguf", n_ctx=512, n_threads=4)
    for piece in m.generate("Once upon a time", max_tokens=64, stream=True):
        print(piece, end="", flush=True)

The names that need the C library (Model, plan, Tokenizer, ...) are loaded on
first use, so tools that never run a model — `edgerun convert`, the numpy
reference — work before the library is built.
"""
from . import errors

# Keep in step with project() in meson.build; a test checks it against er_version().
__version__ = "0.1.0"

_LAZY = {
    "Model": ("model", "Model"),
    "Session": ("session", "Session"),
    "LiveModel": ("live", "LiveModel"),
    "plan": ("model", "plan"),
    "aligned_buffer": ("model", "aligned_buffer"),
    "default_model_path": ("model", "default_model_path"),
    "Tokenizer": ("tokenizer", "Tokenizer"),
}

__all__ = ["Model", "Session", "LiveModel", "Tokenizer", "plan", "aligned_buffer", "default_model_path",
           "errors", "__version__"]


def __getattr__(name):
    if name in _LAZY:
        import importlib
        mod, attr = _LAZY[name]
        value = getattr(importlib.import_module(f".{mod}", __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'edgerun' has no attribute {name!r}")
