"""What `edgerun info` reports about an open model, as one dict: hyper-parameters,
tensor types, the arena plan, the tokenizer, the kernel table and the CUDA devices.
`edgerun info --json` prints it as it is."""
from . import cuda
from ._ffi import ffi, lib


def describe(m):
    """Everything info reports, as a dict."""
    tensors = m.tensors()
    types = {}
    for t in tensors:
        e = types.setdefault(t["type"], {"count": 0, "bytes": 0})
        e["count"] += 1
        e["bytes"] += t["nbytes"]
    tok = None
    if m.tokenizer is not None:
        v = m._vocab
        tok = {"kind": {1: "spm", 2: "bpe"}.get(lib.er_vocab_kind(v), "none"),
               "n_tokens": lib.er_vocab_n_tokens(v), "bos": lib.er_vocab_bos(v), "eos": lib.er_vocab_eos(v),
               "pre": ffi.string(lib.er_vocab_pre(v)).decode()}
    features = ffi.string(lib.er_cpu_features()).decode()
    return {"path": str(m.path), "hparams": m.hparams, "types": types, "tensors": tensors,
            "isa": m.isa, "isa_reason": m.isa_reason, "cpu_features": features, "plan": m.plan(),
            "tokenizer": tok, "cuda": cuda_info()}


def cuda_info():
    """The CUDA devices this library can use, or why there are none."""
    return {"devices": cuda.devices(), "why_none": cuda.why_none()}
