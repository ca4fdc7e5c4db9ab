#!/usr/bin/env python3
"""CUDA benchmark: the 110M bench models (Q8_0, Q4_0, F16) on the GPU, decode
as a share of the measured memory bandwidth, llama.cpp's CUDA build beside it
when available. See pybind/edgerun/bench/cuda.py. Needs the -Dcuda=enabled
library (EDGERUN_LIB) and the edgerun-cuda-membw tool of the same build."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "pybind"))
from edgerun.bench.cuda import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
