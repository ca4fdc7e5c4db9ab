"""Hugging Face folder -> GGUF, laid out the way llama.cpp's converter lays it out.

The runtime must treat our files and llama.cpp's files alike, so this module
follows the same conventions: the same tensor names, Q/K rows of `llama`
models permuted from Hugging Face's half-split RoPE layout to interleaved
pairs, 1-D tensors kept in F32, llama.cpp's per-tensor type mix (mix.py) and
its quantizers' rounding (quantize.py).

Weights are read straight from the safetensors files with numpy memory maps
(no torch), one tensor at a time, and written as soon as they are converted,
so converting needs about one tensor's worth of memory beyond the output.
"""
import json
import math
import os
import pathlib
import struct
import sys

import numpy as np

from .. import console, errors
from .families import FAMILIES, LLAMA_LAYER_NAMES, TOP_NAMES, permute_qk

from .mix import FTYPES

TYPES = tuple(FTYPES)

# Architectures we convert: HF class name -> GGUF arch. What each one writes
# is in families.py.
ARCHS = {name: fam.arch for name, fam in FAMILIES.items()}
_LAYER_NAMES = LLAMA_LAYER_NAMES
_TOP_NAMES = TOP_NAMES

# safetensors dtype -> numpy dtype as stored; BF16 is read as uint16 and widened.
_ST_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
}


class ConvertError(errors.EdgerunError):
    """The Hugging Face folder cannot be converted (message says why and what to do)."""


# ---------------------------------------------------------------- safetensors

class _SafetensorsFile:
    """Memory-mapped view of one .safetensors file (format: u64 header length,
    JSON header of {name: {dtype, shape, data_offsets}}, raw little-endian data)."""

    def __init__(self, path):
        self.path = pathlib.Path(path)
        size = self.path.stat().st_size
        with open(self.path, "rb") as f:
            head = f.read(8)
            if len(head) != 8:
                raise ConvertError(f"{self.path}: not a safetensors file (shorter than 8 bytes); "
                                   "re-download or re-save the model")
            (n,) = struct.unpack("<Q", head)
            if n > size - 8:
                raise ConvertError(f"{self.path}: header length {n} exceeds the file; "
                                   "the file is truncated, re-download it")
            try:
                self.header = json.loads(f.read(n))
            except ValueError as e:
                raise ConvertError(f"{self.path}: bad safetensors header ({e}); re-download it") from None
        if not isinstance(self.header, dict):
            raise ConvertError(f"{self.path}: bad safetensors header (JSON {type(self.header).__name__}, "
                               "not an object); re-download it")
        self.data_start = 8 + n
        self.header.pop("__metadata__", None)
        self._check(size - self.data_start)
        self._map = np.memmap(self.path, dtype=np.uint8, mode="r") if size > self.data_start else None

    def _check(self, n_data):
        """Every tensor's bytes inside the file and as many as dtype x shape
        take: checked at open, because a truncated download otherwise shows
        up tensors later as a numpy reshape error that names neither."""
        def bad(name, what):
            return ConvertError(f"{self.path}: tensor {name!r} {what}; the file is truncated or damaged, "
                                "re-download it")

        def ints(v, n=None):
            return isinstance(v, list) and (n is None or len(v) == n) and \
                all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v)

        for name, info in self.header.items():
            if not (isinstance(info, dict) and isinstance(info.get("dtype"), str) and ints(info.get("shape"))
                    and ints(info.get("data_offsets"), 2)):
                raise bad(name, "has no valid dtype, shape and data_offsets in the header")
        # By offset, so that a cut file names the first tensor the cut reaches.
        for name, info in sorted(self.header.items(), key=lambda kv: kv[1]["data_offsets"]):
            begin, end = info["data_offsets"]
            if begin > end or end > n_data:
                raise bad(name, f"needs bytes {begin}..{end} but the file has {n_data} after its header")
            dtype = _ST_DTYPES.get(info["dtype"])
            if dtype is not None:   # others are refused by load(), if the model needs them at all
                need = math.prod(info["shape"]) * np.dtype(dtype).itemsize
                if end - begin != need:
                    raise bad(name, f"is {info['dtype']} {info['shape']} ({need} bytes) but its data_offsets "
                                    f"{begin}..{end} hold {end - begin}")

    def names(self):
        return list(self.header)

    def shape(self, name):
        return tuple(self.header[name]["shape"])

    def load(self, name):
        """The tensor as float32 (or its own integer dtype)."""
        info = self.header[name]
        dtype = info["dtype"]
        if dtype not in _ST_DTYPES:
            raise ConvertError(f"{self.path}: tensor {name} has dtype {dtype}, which edgerun convert "
                               "does not read; save the model as float32, float16 or bfloat16")
        begin, end = info["data_offsets"]
        shape = tuple(info["shape"])
        raw = self._map[self.data_start + begin:self.data_start + end] if end > begin else np.zeros(0, np.uint8)
        arr = raw.view(_ST_DTYPES[dtype]).reshape(shape)
        if dtype == "BF16":
            # bfloat16 is the top half of a float32.
            return (arr.astype(np.uint32) << 16).view(np.float32)
        if arr.dtype.kind == "f":
            return arr.astype(np.float32)
        return np.array(arr)


def _open_weights(hf_dir):
    files = sorted(hf_dir.glob("*.safetensors"))
    if not files:
        extra = " (found PyTorch .bin files: re-save with save_pretrained(safe_serialization=True))" \
            if list(hf_dir.glob("*.bin")) else ""
        raise ConvertError(f"{hf_dir}: no *.safetensors files{extra}; "
                           "edgerun convert reads safetensors weights only")
    where = {}
    for p in files:
        st = _SafetensorsFile(p)
        for n in st.names():
            where[n] = st
    return where


# ---------------------------------------------------------------- layout

def gguf_name(hf_name):
    """GGUF tensor name for a Llama-shaped HF parameter name, or None for
    tensors we drop (each family's own map: families.Family.gguf_name)."""
    if hf_name in _TOP_NAMES:
        return _TOP_NAMES[hf_name]
    parts = hf_name.split(".")
    if len(parts) >= 5 and parts[0] == "model" and parts[1] == "layers" and parts[2].isdigit():
        stem = ".".join(parts[3:-1])
        if stem in _LAYER_NAMES:
            return f"blk.{int(parts[2])}.{_LAYER_NAMES[stem]}.{parts[-1]}"
    return None


class HParams:
    """The config.json facts the GGUF header needs."""

    def __init__(self, cfg, hf_dir):
        archs = cfg.get("architectures") or []
        known = [a for a in archs if a in ARCHS]
        if not known:
            raise ConvertError(f"{hf_dir}/config.json: architecture {archs or '(none)'} is not supported; "
                               f"edgerun converts {', '.join(sorted(ARCHS))}")
        self.hf_arch = known[0]
        self.arch = ARCHS[self.hf_arch]
        self.permute = FAMILIES[self.hf_arch].permute

        def need(key):
            if key not in cfg:
                raise ConvertError(f"{hf_dir}/config.json lacks '{key}'; the file is incomplete")
            return cfg[key]

        self.n_embd = int(need("hidden_size"))
        self.n_layer = int(need("num_hidden_layers"))
        self.n_head = int(need("num_attention_heads"))
        self.n_head_kv = int(cfg.get("num_key_value_heads") or self.n_head)
        self.n_ff = int(need("intermediate_size"))
        self.n_vocab = int(need("vocab_size"))
        self.n_ctx = int(cfg.get("max_position_embeddings") or 2048)
        self.eps = float(cfg.get("rms_norm_eps", cfg.get("norm_eps", 1e-6)))
        # transformers >= 5 nests RoPE settings in rope_parameters; older configs
        # keep rope_theta/rope_scaling at the top level.
        rp = cfg.get("rope_parameters") or {}
        self.rope_theta = float(rp.get("rope_theta", cfg.get("rope_theta", 10000.0)))
        self.head_dim = int(cfg.get("head_dim") or self.n_embd // self.n_head)
        self.tied = bool(cfg.get("tie_word_embeddings", False))
        if self.n_head % self.n_head_kv:
            raise ConvertError(f"{hf_dir}/config.json: num_attention_heads {self.n_head} is not a multiple of "
                               f"num_key_value_heads {self.n_head_kv}; the file is inconsistent")
        if self.head_dim % 2:
            raise ConvertError(f"{hf_dir}/config.json: head_dim {self.head_dim} is odd; RoPE needs it even")
        self.name = cfg.get("_name_or_path") or hf_dir.name
        # what the family writes, and what it refuses (hidden_act, RoPE scaling, ...)
        self.family = FAMILIES[self.hf_arch](cfg, self, hf_dir)
        self.family.check()


# ---------------------------------------------------------------- types

def _qtype(name):
    from gguf import GGMLQuantizationType as Q
    return Q[name.upper()]


def _file_type(name):
    from gguf import LlamaFileType as F
    return F[FTYPES[name][1]]


def tensor_type(shape, out_type, gguf_name=None, n_layer=1, tied=False, n_gqa=1):
    """(GGML type name, note or None) a tensor of `shape` is stored as for the
    requested file type: llama.cpp's choice, by name, layer and shape, with its
    fallback for rows that do not split into the type's blocks (mix.py)."""
    from . import mix
    return mix.tensor_type(shape, out_type, gguf_name or "", n_layer, tied, n_gqa)


def _encode(arr, ttype):
    """(bytes-array to write, GGML type) for a float32 array."""
    from . import quantize
    q = _qtype(ttype)
    if ttype == "f32":
        return np.ascontiguousarray(arr, dtype=np.float32), q
    if ttype == "f16":
        return np.ascontiguousarray(arr, dtype=np.float16), q
    return quantize.quantize(arr, ttype.upper()), q


def _nbytes(shape, ttype):
    from gguf import GGML_QUANT_SIZES
    block, size = GGML_QUANT_SIZES[_qtype(ttype)]
    n = 1
    for d in shape:
        n *= d
    return n // block * size


# ---------------------------------------------------------------- main entry

def convert(hf_dir, out_path, out_type="f32", *, name=None, quiet=False, log=None):
    """Converts a Hugging Face folder of one of the ARCHS into a GGUF file.

    Returns a summary dict: path, arch, type, n_tensors, bytes (file size),
    types ({ggml type: count}), notes (list of strings).
    """
    import gguf

    log = log or sys.stderr
    out_type = out_type.lower()
    if out_type not in TYPES:
        raise ConvertError(f"unknown output type '{out_type}'; choose one of {', '.join(TYPES)}")
    hf_dir = pathlib.Path(hf_dir)
    out_path = pathlib.Path(out_path)
    cfg_path = hf_dir / "config.json"
    if not hf_dir.is_dir():
        raise FileNotFoundError(f"{hf_dir}: no such directory; pass a Hugging Face model folder")
    if not cfg_path.exists():
        raise ConvertError(f"{hf_dir}: no config.json; pass a Hugging Face model folder "
                           "(the one save_pretrained writes)")
    try:
        cfg = json.loads(cfg_path.read_text())
    except ValueError as e:
        raise ConvertError(f"{cfg_path}: not valid JSON ({e}); fix or re-download it") from None
    hp = HParams(cfg, hf_dir)
    where = _open_weights(hf_dir)

    # Plan every tensor first: the header (with each tensor's type and size) is
    # written before any data, which lets the data stream out one tensor at a time.
    fam = hp.family
    plan, notes = [], []
    # llama.cpp quantizes token_embd as the output projection whenever the
    # file has no output.weight: tied, or an untied config without lm_head
    embd_is_output = hp.tied or "lm_head.weight" not in where
    for name, arr in fam.extra_tensors():
        plan.append((None, name, arr.shape, "f32"))
    for hf_name in sorted(where, key=lambda n: _order_key(n, fam)):
        g = fam.gguf_name(hf_name)
        if g is None:
            if hf_name.endswith("rotary_emb.inv_freq"):
                continue
            if hf_name.startswith("model.layers."):
                # a layer weight no step reads: the model computes something the runtime would not
                raise ConvertError(f"{hf_dir}: {hf_name} is a layer tensor the runtime's {hp.arch} does not "
                                   "read; converting without it would give a model that computes something "
                                   "else")
            notes.append(f"skipped {hf_name} (not used by the {hp.arch} runtime)")
            continue
        if g == "output.weight" and hp.tied:
            continue   # tied: the runtime reuses token_embd, as llama.cpp does
        if g.endswith(".bias") and g.split(".")[2] not in fam.biases:
            # the runtime would ignore it and silently compute something else
            raise ConvertError(f"{hf_dir}: {hf_name} is a bias the {hp.arch} runtime does not apply "
                               "(attention_bias/mlp_bias models are not supported)")
        shape = fam.out_shape(g, where[hf_name].shape(hf_name))
        ttype, note = tensor_type(shape, out_type, g, hp.n_layer, embd_is_output, hp.n_head // hp.n_head_kv)
        if fam.keep_f32(g):
            ttype, note = "f32", None
        if note:
            notes.append(f"{g}: {note}")
        plan.append((hf_name, g, shape, ttype))
    _check_complete(hp, [p[1] for p in plan], hf_dir)

    if not hp.tied and "output.weight" not in {p[1] for p in plan}:
        notes.append("no lm_head.weight: the output projection reuses token_embd")

    tmp_path = out_path.with_name(out_path.name + ".part")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(tmp_path), hp.arch)
    try:
        _write_header(w, hp, name or hp.name, out_type, hf_dir, notes)
        for hf_name, g, shape, ttype in plan:
            w.add_tensor_info(g, shape, np.dtype(np.float32), _nbytes(shape, ttype), raw_dtype=_qtype(ttype))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        total = sum(_nbytes(p[2], p[3]) for p in plan)
        extra = dict(fam.extra_tensors())
        with console.progress(f"convert {out_type}", total=total, unit="bytes") as prog:
            for hf_name, g, shape, ttype in plan:
                arr = extra[g] if hf_name is None else fam.transform(g, where[hf_name].load(hf_name))
                data, _ = _encode(arr, ttype)
                w.write_tensor_data(data)
                prog.advance(data.nbytes, g)
        w.close()
        os.replace(tmp_path, out_path)
    except BaseException:
        w.close()
        tmp_path.unlink(missing_ok=True)
        raise

    types = {}
    for p in plan:
        types[p[3].upper()] = types.get(p[3].upper(), 0) + 1
    summary = {"path": str(out_path), "arch": hp.arch, "type": out_type.upper(), "n_tensors": len(plan),
               "bytes": out_path.stat().st_size, "types": types, "notes": notes}
    if not quiet:
        for n in notes:
            print(f"note: {n}", file=log)
    return summary


def _order_key(hf_name, fam):
    """llama.cpp's order: token_embd, then blocks in order, then output_norm/output."""
    g = fam.gguf_name(hf_name) or hf_name
    if g.startswith("token_embd"):
        return (0, 0, g)
    if g.startswith("blk."):
        return (1, int(g.split(".")[1]), g)
    return (2, 0, g)


def _check_complete(hp, names, hf_dir):
    have = set(names)
    need = ["token_embd.weight", "token_embd_norm.weight" if hp.arch == "lfm2" else "output_norm.weight"]
    for i in range(hp.n_layer):
        need += hp.family.required(i)
    missing = [n for n in need if n not in have]
    if missing:
        raise ConvertError(f"{hf_dir}: the safetensors lack {len(missing)} tensor(s) the {hp.arch} model needs "
                           f"(first: {missing[0]}); the download is incomplete")


def _write_header(w, hp, name, out_type, hf_dir, notes):
    from gguf import GGML_QUANT_VERSION
    w.add_name(str(name))
    hp.family.header(w)
    w.add_uint32("general.file_type", int(_file_type(out_type)))
    # llama.cpp writes it on float files too
    w.add_quantization_version(GGML_QUANT_VERSION)
    if (hf_dir / "tokenizer.json").exists() or (hf_dir / "tokenizer.model").exists():
        from .tokenizer import add_tokenizer
        add_tokenizer(w, hf_dir, hp.family.cfg, arch=hp.arch)
    else:
        notes.append("no tokenizer.json or tokenizer.model: the file has no tokenizer (ids in, ids out)")
