"""cffi binding to libedgerun: compiled (API mode) where it was built, else ABI mode.

The declarations come from ``edgerun.h`` between its ER_CDEF_BEGIN/ER_CDEF_END
markers (_cdef.py), so the header stays the one source of truth.

Where the library comes from, first match wins:
  1. ``$EDGERUN_LIB`` — an explicit path (cross builds, sanitizer builds);
  2. ``libedgerun.so`` next to this file (``pip install .``);
  3. ``build/native/runtime_c/libedgerun.so`` in a source checkout (``make build``).

How it is called: the compiled module ``_edgerun_cffi`` that meson builds
beside that library (runtime_c/meson.build) makes every call a direct C call.
It is used only beside the library of its own build (the declarations it was
compiled with are that library's); the library is loaded first, with
RTLD_GLOBAL, and the module's er_* symbols bind to it. Where there is
none (no compiler at build time, a cross or sanitizer build) cffi's ABI mode
dlopens the library and calls through libffi: the same functions, about
0.3 us more per call. ``MODE`` says which; EDGERUN_FFI=abi forces ABI mode
(to compare the two, or to rule the compiled module out).
"""
import ctypes
import importlib.machinery
import importlib.util
import os
import pathlib

from . import errors
from ._cdef import MODULE, cdef_text

_HERE = pathlib.Path(__file__).resolve().parent
_REPO = _HERE.parent.parent


def _find(env, name, candidates):
    if os.environ.get(env):
        path = pathlib.Path(os.environ[env])
        if not path.is_file():
            raise errors.FileAccessError(f"${env} is {path}, which is not a file; point it at the {name} of a "
                                         f"build, or unset it to use the installed one", -2)
        return path
    for c in candidates:
        if c.exists():
            return c
    raise errors.FileAccessError(
        f"cannot find {name}: build the runtime with `make build` or `pip install .`, "
        f"or point ${env} at it", -2)


def _compiled(library):
    """The API-mode module built beside `library`, bound to it, or None."""
    if os.environ.get("EDGERUN_FFI", "").lower() == "abi":
        return None
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = library.resolve().parent / (MODULE + suffix)
        if path.is_file():
            ctypes.CDLL(str(library), mode=os.RTLD_GLOBAL)   # what the module's symbols bind to
            spec = importlib.util.spec_from_file_location(f"{__package__}.{MODULE}", path)
            mod = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(mod)
            except ImportError:      # built for another Python, or a symbol the library lacks
                return None
            return mod
    return None


HEADER = _find("EDGERUN_HEADER", "edgerun.h",
               [_HERE / "edgerun.h", _REPO / "runtime_c" / "include" / "edgerun.h"])
LIBRARY = _find("EDGERUN_LIB", "libedgerun.so",
                [_HERE / "libedgerun.so", _REPO / "build" / "native" / "runtime_c" / "libedgerun.so"])

_api = _compiled(LIBRARY)
if _api is not None:
    MODE = "api"
    ffi, lib = _api.ffi, _api.lib
else:
    import cffi
    MODE = "abi"
    ffi = cffi.FFI()
    ffi.cdef(cdef_text(HEADER))
    lib = ffi.dlopen(str(LIBRARY))


def last_error():
    return ffi.string(lib.er_last_error()).decode("utf-8", "replace")


def check(rc):
    """Raises the typed exception for a negative status; returns rc otherwise."""
    if rc < 0:
        raise errors.from_status(rc, last_error())
    return rc
