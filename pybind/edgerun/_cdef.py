"""The C declarations cffi needs, read from edgerun.h between its
ER_CDEF_BEGIN/ER_CDEF_END markers, so the header stays the one source of
truth. Both bindings use it: _ffi.py at import (ABI mode) and, at build time,
pybind/gen_cffi_api.py, which writes the C of the compiled module (API mode)."""
import re

from . import errors

MODULE = "_edgerun_cffi"       # the compiled module's name (its PyInit_ symbol)


def cdef_text(header):
    text = header.read_text()
    m = re.search(r"/\* ER_CDEF_BEGIN \*/(.*)/\* ER_CDEF_END \*/", text, re.S)
    if not m:
        raise errors.EdgerunError(f"{header} has no ER_CDEF block")
    return m.group(1).replace("ER_API ", "")
