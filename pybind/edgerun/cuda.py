"""CUDA devices as the runtime's CUDA backend sees them (er_cuda_device_count/get).

    edgerun.cuda.devices()   -> [{"index", "name", "compute_capability", "integrated", "n_sm", "total_bytes"}]
    edgerun.cuda.why_none()  -> "" when a device is usable, else the reason (no backend in this
                                build, no driver, no GPU), as the C library words it

A library built without -Dcuda=enabled (the default, and `pip install .`)
reports every call as "no CUDA backend"; nothing here needs a GPU to run.
"""
from . import errors
from ._ffi import check, ffi, lib


def devices():
    """The usable CUDA devices; [] when none (see why_none() for the reason)."""
    try:
        n = check(lib.er_cuda_device_count())
    except errors.UnsupportedError:
        return []
    out = []
    d = ffi.new("er_cuda_device *")
    for i in range(n):
        check(lib.er_cuda_device_get(i, d))
        out.append({"index": i, "name": ffi.string(d.name).decode("utf-8", "replace"),
                    "compute_capability": f"{d.major}.{d.minor}", "integrated": bool(d.integrated),
                    "n_sm": int(d.n_sm), "total_bytes": int(d.total_bytes)})
    return out


def why_none():
    """'' when at least one CUDA device is usable, else the runtime's reason."""
    try:
        check(lib.er_cuda_device_count())
        return ""
    except errors.UnsupportedError as e:
        return str(e)


def available():
    return not why_none()
