"""edgerun — run GGUF language models (Llama, Qwen, Gemma 3, Phi-3, SmolLM3,
LFM2) from one static arena.

    import edgerun
    with edgerun.Model() as m:                  # the embedded default model
        print(m.generate("0012+0034=", max_tokens=8))   # "64000": 46, digits reversed

    m = edgerun.Model("model.gguf", n_ctx=512, n_threads=4)
    for piece in m.generate("Once upon a time", max_tokens=64, stream=True):
        print(piece, end="", flush=True)

The package is laid out by job; imports point one way, down this list
(tests/test_layering.py reads every module's imports and fails on an arrow
the other way):

    cli/        the `edgerun` command: parsing, and one module per verb
    bench/      benchmarks: engines, ISA tables, tokenizers, CUDA, boards
    ota/        signed update bundles, A/B flashing, the device configuration
    boards/     board files, cross builds, qemu, board tests, sysroot
    convert/    Hugging Face -> GGUF, quantizers, the numpy reference
    (top level) the runtime: the cffi binding (_ffi), Model, Session,
                Tokenizer, LiveModel, cuda, errors

The runtime imports none of the folders; convert never loads the C library.
The names that need the C library (Model, plan, Tokenizer, ...) are loaded on
first use, so tools that never run a model — `edgerun convert`, the numpy
reference — work before the library is built.
"""
import importlib
import sys

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

# Where each module of the flat layout (before the package had folders) lives
# now. `import edgerun.reference`, `from edgerun import bench_isa` and
# `edgerun.commands.run` keep working for code written against the old paths:
# the old name is the very same module object, so monkeypatching through it
# reaches the code. Modules inside the package use the new paths (the layering
# test refuses an old one); deleting an entry breaks user code that imports it.
_MOVED = {
    "convert_tokenizer": "convert.tokenizer",
    "kquants": "convert.kquants",
    "reference": "convert.reference",
    "build": "boards.build",
    "qemu": "boards.qemu",
    "board_test": "boards.tests",
    "prereqs": "boards.prereqs",
    "sysroot": "boards.sysroot",
    "device_python": "boards.device_python",
    "cpio": "ota.cpio",
    "swdesc": "ota.swdesc",
    "keygen": "ota.keygen",
    "package": "ota.package",
    "flash": "ota.flash",
    "device_config": "ota.device_config",
    "bench_isa": "bench.isa",
    "bench_tokenizer": "bench.tokenizer",
    "bench_cuda": "bench.cuda",
    "board_bench": "bench.board",
    "interference": "bench.interference",
    "trace_summary": "bench.trace_summary",
    "commands": "cli",
}


class _MovedFinder:
    """Answers `import edgerun.<old name>[.sub]` with the module at its new
    path, registered under both names (one module object, not a copy)."""

    @staticmethod
    def _target(fullname):
        head, _, rest = fullname.partition(".")
        if head != __name__ or not rest:
            return None
        old, _, sub = rest.partition(".")
        new = _MOVED.get(old)
        if new is None:
            return None
        return f"{__name__}.{new}" + (f".{sub}" if sub else "")

    def find_spec(self, fullname, path=None, target=None):
        new = self._target(fullname)
        if new is None:
            return None
        import importlib.machinery
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        # The import system reads sys.modules[name] back after exec_module,
        # so the caller gets the real module, with its own __spec__ untouched.
        sys.modules[module.__name__] = importlib.import_module(self._target(module.__name__))


# First in line: below an old package name (edgerun.commands.trace) the path
# finder would otherwise load a second copy of the module from the new folder.
if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _MovedFinder())


def __getattr__(name):
    if name in _LAZY:
        mod, attr = _LAZY[name]
        value = getattr(importlib.import_module(f".{mod}", __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'edgerun' has no attribute {name!r}")
