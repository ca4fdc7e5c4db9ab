"""cffi (ABI mode) binding to libedgerun.

The declarations are read from the installed ``edgerun.h`` between its
ER_CDEF_BEGIN/ER_CDEF_END markers, so the header stays the one source of truth.

Where the library comes from, first match wins:
  1. ``$EDGERUN_LIB`` — an explicit path (cross builds, sanitizer builds);
  2. ``libedgerun.so`` next to this file (``pip install .``);
  3. ``build/native/runtime_c/libedgerun.so`` in a source checkout (``make build``).
"""
import os
import pathlib
import re

import cffi

from . import errors

_HERE = pathlib.Path(__file__).resolve().parent
_REPO = _HERE.parent.parent


def _find(env, name, candidates):
    if os.environ.get(env):
        return pathlib.Path(os.environ[env])
    for c in candidates:
        if c.exists():
            return c
    raise errors.FileAccessError(
        f"cannot find {name}: build the runtime with `make build` or `pip install .`, "
        f"or point ${env} at it", -2)


def _cdef_text(header):
    text = header.read_text()
    m = re.search(r"/\* ER_CDEF_BEGIN \*/(.*)/\* ER_CDEF_END \*/", text, re.S)
    if not m:
        raise errors.EdgerunError(f"{header} has no ER_CDEF block")
    return m.group(1).replace("ER_API ", "")


HEADER = _find("EDGERUN_HEADER", "edgerun.h",
               [_HERE / "edgerun.h", _REPO / "runtime_c" / "include" / "edgerun.h"])
LIBRARY = _find("EDGERUN_LIB", "libedgerun.so",
                [_HERE / "libedgerun.so", _REPO / "build" / "native" / "runtime_c" / "libedgerun.so"])

ffi = cffi.FFI()
ffi.cdef(_cdef_text(HEADER))
lib = ffi.dlopen(str(LIBRARY))


def last_error():
    return ffi.string(lib.er_last_error()).decode("utf-8", "replace")


def check(rc):
    """Raises the typed exception for a negative status; returns rc otherwise."""
    if rc < 0:
        raise errors.from_status(rc, last_error())
    return rc
