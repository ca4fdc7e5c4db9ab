"""What `edgerun info` reports about an open model, as one dict: hyper-parameters,
the layers' kinds, the RoPE scaling, tensor types, the arena plan, the tokenizer,
the kernel table and the CUDA devices. `edgerun info --json` prints it as it is."""
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
    hp = m.hparams
    per_layer = layers(m)
    return {"path": str(m.path), "hparams": hp, "layers": per_layer,
            "rope_scaling": rope_scaling(m.path, hp, tensors, per_layer),
            "types": types, "tensors": tensors, "isa": m.isa, "isa_reason": m.isa_reason, "cpu_features": features,
            "plan": m.plan(), "tokenizer": tok, "cuda": cuda_info()}


def layers(m):
    """Per layer, as the runtime runs it (er_model_layer): {"block":
    "attention" or "shortconv" (LFM2), "rope": "model" (the hyper-parameters'
    base and scaling), "local" (gemma3's sliding-window layers: their own
    base, unscaled) or None, "window": the positions its queries see (0:
    all)}, and for a short convolution "kernel" (taps)."""
    info = ffi.new("er_layer_info *")
    out = []
    for layer in range(m.hparams["n_layer"]):
        if lib.er_model_layer(m._ptr, layer, info) != 0:
            raise RuntimeError(ffi.string(lib.er_last_error()).decode())
        if info.block == lib.ER_BLOCK_SHORTCONV:
            out.append({"block": "shortconv", "kernel": info.conv_kernel, "rope": None, "window": 0})
        else:
            out.append({"block": "attention", "rope": (None, "model", "local")[info.rope], "window": info.window})
    return out


def rope_scaling(path, hp, tensors, per_layer):
    """How RoPE's frequencies are scaled: {"type": "none"}, {"type": "linear",
    "factor"}, {"type": "llama3", "factors"} (rope_freqs.weight's
    per-frequency divisors) or {"type": "longrope", "set": "short" or "long",
    "original_context", "factors"} (the set chosen at open); each with
    "attn_factor", which scales cos and sin, and "layers": "all", or "global"
    where the sliding-window layers keep a RoPE of their own (gemma3)."""
    if hp["rope_longrope"]:
        which = "long" if hp["rope_longrope"] == 2 else "short"
        out = {"type": "longrope", "set": which,
               "original_context": hp["rope_orig_ctx"],
               "factors": _vector(path, tensors, f"rope_factors_{which}.weight")}
    elif hp["rope_freq_factors"]:
        out = {"type": "llama3", "factors": _vector(path, tensors, "rope_freqs.weight")}
    elif hp["rope_scale"] != 1.0:
        out = {"type": "linear", "factor": hp["rope_scale"]}
    else:
        out = {"type": "none"}
    out["attn_factor"] = hp["rope_attn_factor"]
    out["layers"] = "global" if any(lay["rope"] == "local" for lay in per_layer) else "all"
    return out


def _vector(path, tensors, name):
    """The values of a vector of the file in the types the runtime reads it
    in (F32, F16, BF16), or None where the file has no such tensor."""
    import numpy as np
    t = next((t for t in tensors if t["name"] == name), None)
    if t is None or t["type"] not in ("F32", "F16", "BF16"):
        return None
    with open(path, "rb") as f:
        f.seek(t["offset"])
        raw = f.read(t["nbytes"])
    if t["type"] == "BF16":   # the upper half of an F32
        v = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
    else:
        v = np.frombuffer(raw, "<f4" if t["type"] == "F32" else "<f2")
    return [float(x) for x in v]


def cuda_info():
    """The CUDA devices this library can use, or why there are none."""
    return {"devices": cuda.devices(), "why_none": cuda.why_none()}
