"""Writes the C source of edgerun's compiled binding (cffi API mode):
`python gen_cffi_api.py edgerun.h OUT.c`. meson runs it (runtime_c/meson.build)
and compiles OUT.c into the extension module _edgerun_cffi beside libedgerun.so.

A call through the compiled module is a direct C call; through cffi's ABI mode
(_ffi.py's fallback, which needs no compiler) it goes through libffi, about
0.3 us more per er_tokenize call (docs/TOKENIZER_BENCH.md, "Per call").
"""
import pathlib
import sys

import cffi

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from edgerun._cdef import MODULE, cdef_text  # noqa: E402  (edgerun/__init__ loads no library)


def main(header, out):
    ffi = cffi.FFI()
    ffi.cdef(cdef_text(pathlib.Path(header)))
    ffi.set_source(MODULE, '#include "edgerun.h"')
    ffi.emit_c_code(out)


if __name__ == "__main__":
    main(*sys.argv[1:])
