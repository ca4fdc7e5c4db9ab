"""Broken GGUF files: each gives its own typed error and message, never a crash.

One small valid llama file is written with the `gguf` package; every case
derives a broken file from it, either by rebuilding it with one thing wrong
(missing key, wrong shape, ...) or by patching bytes at offsets found by
walking the file's layout (truncation, bad magic, absurd counts, ...).
CI runs this file under ASan+UBSan, so an out-of-bounds read is a failure
even where it would not crash.
"""
import re
import struct

import numpy as np
import pytest

import edgerun
from edgerun import errors

E = dict(n_embd=32, n_head=4, n_kv=2, n_ff=64, n_layer=2, n_vocab=48, n_ctx=64)

# GGUF value types and GGML tensor types used below
T_STR, T_ARR = 8, 9
G_F32, G_Q4_0, G_Q8_0 = 0, 2, 8


# ---------------------------------------------------------------- the valid file

def base_spec():
    """(keys, tensors): keys {name: (kind, value)}, tensors {name: (np array, ggml type)}."""
    rng = np.random.RandomState(0)
    d, ff, v = E["n_embd"], E["n_ff"], E["n_vocab"]
    kv_dim = d // E["n_head"] * E["n_kv"]
    keys = {
        "general.name": ("str", "bad-input-base"),
        "general.alignment": ("u32", 32),
        "edgerun.test.flag": ("bool", True),
        "edgerun.test.list": ("arr", ["alpha", "beta"]),
        "llama.context_length": ("u32", E["n_ctx"]),
        "llama.embedding_length": ("u32", d),
        "llama.block_count": ("u32", E["n_layer"]),
        "llama.feed_forward_length": ("u32", ff),
        "llama.attention.head_count": ("u32", E["n_head"]),
        "llama.attention.head_count_kv": ("u32", E["n_kv"]),
        "llama.attention.layer_norm_rms_epsilon": ("f32", 1e-5),
        "llama.rope.freq_base": ("f32", 10000.0),
    }

    def w(*shape):
        return (rng.standard_normal(shape) * 0.3).astype(np.float32)

    t = {"token_embd.weight": (w(v, d), G_F32)}
    for L in range(E["n_layer"]):
        p = f"blk.{L}."
        t[p + "attn_norm.weight"] = (1 + w(d), G_F32)
        t[p + "attn_q.weight"] = (w(d, d), G_Q8_0)
        t[p + "attn_k.weight"] = (w(kv_dim, d), G_F32)
        t[p + "attn_v.weight"] = (w(kv_dim, d), G_F32)
        t[p + "attn_output.weight"] = (w(d, d), G_F32)
        t[p + "ffn_norm.weight"] = (1 + w(d), G_F32)
        t[p + "ffn_gate.weight"] = (w(ff, d), G_F32)
        t[p + "ffn_up.weight"] = (w(ff, d), G_F32)
        t[p + "ffn_down.weight"] = (w(d, ff), G_Q4_0)
    t["output_norm.weight"] = (1 + w(d), G_F32)
    t["output.weight"] = (w(v, d), G_F32)
    return keys, t


def write_gguf(path, keys, tensors, arch="llama"):
    import gguf
    wr = gguf.GGUFWriter(str(path), arch if arch is not None else "llama")
    if arch is None:
        del wr.kv_data[0]["general.architecture"]
    for k, (kind, val) in keys.items():
        {"u32": wr.add_uint32, "u64": wr.add_uint64, "f32": wr.add_float32, "str": wr.add_string,
         "bool": wr.add_bool, "arr": wr.add_array, "i32": wr.add_int32}[kind](k, val)
    for name, (arr, gt) in tensors.items():
        if gt == G_F32:
            wr.add_tensor(name, arr)
        else:
            q = gguf.quants.quantize(arr, gguf.GGMLQuantizationType(gt))
            wr.add_tensor(name, q, raw_dtype=gguf.GGMLQuantizationType(gt))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    return path


class Layout:
    """Offsets inside a GGUF file, found by walking it (independent of the runtime)."""

    def __init__(self, b):
        self.b = b
        self.n_tensors, self.n_kv = struct.unpack_from("<QQ", b, 8)
        o = 24
        self.kv = {}                      # key -> (key_off, type_off, value_off)
        for _ in range(self.n_kv):
            (n,) = struct.unpack_from("<Q", b, o)
            key = b[o + 8:o + 8 + n].decode()
            t_off = o + 8 + n
            (vt,) = struct.unpack_from("<I", b, t_off)
            self.kv[key] = (o, t_off, t_off + 4)
            o = self._skip(t_off + 4, vt)
        self.kv_end = o
        self.tensors = {}                 # name -> dict of offsets
        for _ in range(self.n_tensors):
            (n,) = struct.unpack_from("<Q", b, o)
            name = b[o + 8:o + 8 + n].decode()
            nd_off = o + 8 + n
            (nd,) = struct.unpack_from("<I", b, nd_off)
            ne_off = nd_off + 4
            type_off = ne_off + 8 * nd
            self.tensors[name] = {"start": o, "n_dims": nd_off, "ne": ne_off, "type": type_off,
                                  "offset": type_off + 4}
            o = type_off + 12
        self.ti_end = o
        self.data = (o + 31) // 32 * 32

    def _skip(self, o, vt):
        sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
        if vt in sizes:
            return o + sizes[vt]
        if vt == T_STR:
            (n,) = struct.unpack_from("<Q", self.b, o)
            return o + 8 + n
        et, cnt = struct.unpack_from("<IQ", self.b, o)
        o += 12
        for _ in range(cnt):
            o = self._skip(o, et)
        return o


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    keys, tensors = base_spec()
    p = write_gguf(tmp_path_factory.mktemp("bad") / "base.gguf", keys, tensors)
    return p.read_bytes()


def test_base_file_is_valid(base, tmp_path):
    p = tmp_path / "ok.gguf"
    p.write_bytes(base)
    with edgerun.Model(p, n_ctx=16) as m:
        assert m.hparams["n_layer"] == 2 and m.hparams["n_vocab"] == E["n_vocab"]
        assert np.isfinite(m.logits([1, 2, 3])).all()
    lay = Layout(base)
    assert lay.data < len(base) and "blk.1.ffn_down.weight" in lay.tensors


# ---------------------------------------------------------------- byte patches

def put(b, off, fmt, *vals):
    b = bytearray(b)
    struct.pack_into(fmt, b, off, *vals)
    return bytes(b)


CUT = r"cut off by end of file|exceeds file|more than the file"
PAST = r"past end of file"


def byte_cases(b):
    """(id, bytes, exception class, message regex)."""
    L = Layout(b)
    kv, ti = L.kv, L.tensors
    q = ti["blk.0.attn_q.weight"]
    cases = []
    # truncation at many offsets, each judged by the region it lands in
    for cut in (1, 3, 4, 8, 16, 23):
        cases.append((f"trunc@{cut}", b[:cut], errors.CorruptModelError, r"too small"))
    for cut in (24, 28, 40, kv["llama.block_count"][0] + 3, kv["edgerun.test.list"][2] + 9,
                L.kv_end - 1, L.kv_end + 5, q["ne"] + 3, L.ti_end - 1):
        cases.append((f"trunc@{cut}", b[:cut], errors.CorruptModelError, CUT))
    for cut in (L.data, L.data + 100, len(b) // 2, len(b) - 1):
        cases.append((f"trunc@{cut}", b[:cut], errors.CorruptModelError, PAST))
    cases += [
        ("empty", b"", errors.CorruptModelError, r"empty|too small"),
        ("magic", b"GGUX" + b[4:], errors.CorruptModelError, r"bad magic"),
        ("magic-zero", b"\0\0\0\0" + b[4:], errors.CorruptModelError, r"bad magic"),
        ("version-1", put(b, 4, "<I", 1), errors.UnsupportedError, r"version 1\b"),
        ("version-4", put(b, 4, "<I", 4), errors.UnsupportedError, r"version 4\b"),
        ("version-swapped", put(b, 4, "<I", 0x03000000), errors.UnsupportedError, r"byte-swapped"),
        ("n_tensors-huge", put(b, 8, "<Q", 1 << 62), errors.CorruptModelError, r"tensors; this reader accepts"),
        ("n_kv-huge", put(b, 16, "<Q", 1 << 40), errors.CorruptModelError, r"kvs; this reader accepts"),
        ("n_kv-too-many", put(b, 16, "<Q", 30000), errors.CorruptModelError, r"more than the file"),
        ("key-len-huge", put(b, kv["general.name"][0], "<Q", 1 << 62), errors.CorruptModelError,
         r"key length \d+ exceeds the limit"),
        ("key-len-zero", put(b, kv["general.name"][0], "<Q", 0), errors.CorruptModelError, r"empty key"),
        ("value-type-99", put(b, kv["general.name"][1], "<I", 99), errors.CorruptModelError,
         r"invalid value type 99"),
        ("string-len-huge", put(b, kv["general.name"][2], "<Q", 1 << 40), errors.CorruptModelError,
         r"general.name.*exceeds file"),
        ("bool-7", put(b, kv["edgerun.test.flag"][2], "<B", 7), errors.CorruptModelError,
         r"bool value 7 is not 0 or 1"),
        ("array-type-99", put(b, kv["edgerun.test.list"][2], "<I", 99), errors.CorruptModelError,
         r"invalid array element type 99"),
        ("array-nested", put(b, kv["edgerun.test.list"][2], "<I", T_ARR), errors.UnsupportedError,
         r"nested arrays"),
        ("array-count-huge", put(b, kv["edgerun.test.list"][2] + 4, "<Q", 1 << 50), errors.CorruptModelError,
         r"array count \d+ of strings exceeds file"),
        # "llama.context_length" and "general.architecture" have the same length (20)
        ("duplicate-key", b[:kv["llama.context_length"][0] + 8] + b"general.architecture"
         + b[kv["llama.context_length"][1]:], errors.CorruptModelError, r"duplicate key 'general.architecture'"),
        ("alignment-3", put(b, kv["general.alignment"][2], "<I", 3), errors.CorruptModelError,
         r"alignment 3 is not a nonzero power of two"),
        ("alignment-type", put(b, kv["general.alignment"][1], "<I", 5), errors.CorruptModelError,
         r"general.alignment has type"),
        ("n_dims-0", put(b, q["n_dims"], "<I", 0), errors.CorruptModelError, r"n_dims 0 is outside"),
        ("n_dims-9", put(b, q["n_dims"], "<I", 9), errors.CorruptModelError, r"n_dims 9 is outside"),
        ("ne0-zero", put(b, q["ne"], "<Q", 0), errors.CorruptModelError, r"attn_q.weight.*ne\[0\] is 0"),
        ("ne-overflow", put(put(b, q["ne"], "<Q", 1 << 40), q["ne"] + 8, "<Q", 1 << 40), errors.CorruptModelError,
         r"overflows int64"),
        ("ne-absurd-past-end", put(b, q["ne"] + 8, "<Q", 1 << 30), errors.CorruptModelError, PAST),
        ("ne0-not-block", put(b, q["ne"], "<Q", 48), errors.CorruptModelError,
         r"ne\[0\] = 48 is not a multiple of the Q8_0 block size 32"),
        ("type-99", put(b, q["type"], "<I", 99), errors.UnsupportedError, r"unsupported tensor type 99"),
        ("offset-misaligned", put(b, q["offset"], "<Q", struct.unpack_from("<Q", b, q["offset"])[0] + 1),
         errors.CorruptModelError, r"not a multiple of the alignment 32"),
        ("offset-past-end", put(b, q["offset"], "<Q", 1 << 40), errors.CorruptModelError,
         r"attn_q.weight.*past end of file"),
        ("name-len-zero", put(b, q["start"], "<Q", 0), errors.CorruptModelError, r"empty tensor name"),
        ("name-len-huge", put(b, q["start"], "<Q", 1 << 33), errors.CorruptModelError, r"name length \d+ exceeds"),
        # blk.0.attn_q.weight / blk.0.attn_k.weight: same length, renamed into a duplicate
        ("duplicate-tensor", b[:ti["blk.0.attn_k.weight"]["start"] + 8] + b"blk.0.attn_q.weight"
         + b[ti["blk.0.attn_k.weight"]["n_dims"]:], errors.CorruptModelError,
         r"duplicate tensor name 'blk.0.attn_q.weight'"),
    ]
    return cases


def _byte_case_ids():
    keys, tensors = base_spec()
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        import pathlib
        b = write_gguf(pathlib.Path(d) / "b.gguf", keys, tensors).read_bytes()
    return b, [c[0] for c in byte_cases(b)]


_BASE_BYTES, _BYTE_IDS = _byte_case_ids()


@pytest.mark.parametrize("case", _BYTE_IDS)
def test_byte_patched_file(tmp_path, case):
    cases = {c[0]: c for c in byte_cases(_BASE_BYTES)}
    _, data, cls, pattern = cases[case]
    p = tmp_path / f"{case}.gguf"
    p.write_bytes(data)
    _expect(p, cls, pattern)


def _expect(p, cls, pattern, plan_too=True):
    with pytest.raises(cls) as ei:
        edgerun.Model(p, n_ctx=16)
    assert re.search(pattern, str(ei.value)), f"message {str(ei.value)!r} lacks /{pattern}/"
    assert ei.value.status == cls.status
    if plan_too:
        # er_plan validates the same header without allocating
        with pytest.raises(cls):
            edgerun.plan(p, n_ctx=16)


# ---------------------------------------------------------------- rebuilt with one thing wrong

def _drop(d, k):
    d = dict(d)
    del d[k]
    return d


def _set(d, k, v):
    d = dict(d)
    d[k] = v
    return d


def model_cases():
    keys, t = base_spec()
    rng = np.random.RandomState(1)
    f = lambda *s: (rng.standard_normal(s).astype(np.float32), G_F32)   # noqa: E731
    C, U = errors.CorruptModelError, errors.UnsupportedError
    cases = []
    for k in ("embedding_length", "block_count", "feed_forward_length", "attention.head_count"):
        cases.append((f"missing-{k}", _drop(keys, f"llama.{k}"), t, "llama", C,
                      rf"required key 'llama\.{k}' is missing", True))
    cases += [
        ("missing-architecture", keys, t, None, C, r"general\.architecture", True),
        ("arch-gpt2", keys, t, "gpt2", U, r"architecture 'gpt2' is not supported", True),
        ("block_count-string", _set(keys, "llama.block_count", ("str", "two")), t, "llama", C,
         r"llama\.block_count' has the wrong type", True),
        ("block_count-0", _set(keys, "llama.block_count", ("u32", 0)), t, "llama", C,
         r"llama\.block_count' = 0 is out of range", True),
        ("block_count-huge", _set(keys, "llama.block_count", ("u32", 1 << 30)), t, "llama", C,
         r"llama\.block_count' = \d+ is out of range", True),
        ("embedding-absurd", _set(keys, "llama.embedding_length", ("u32", 0xFFFFFFFF)), t, "llama", C,
         r"embedding_length' = \d+ is out of range", True),
        ("context-0", _set(keys, "llama.context_length", ("u32", 0)), t, "llama", C,
         r"context_length' = 0 is out of range", True),
        ("heads-not-dividing", _set(keys, "llama.attention.head_count", ("u32", 3)), t, "llama", C,
         r"embedding_length 32 is not a multiple of head_count 3", True),
        ("kv-heads-not-dividing", _set(keys, "llama.attention.head_count_kv", ("u32", 3)), t, "llama", C,
         r"head_count 4 is not a multiple of head_count_kv 3", True),
        ("eps-zero", _set(keys, "llama.attention.layer_norm_rms_epsilon", ("f32", 0.0)), t, "llama", C,
         r"layer_norm_rms_epsilon' = 0 is out of range", True),
        ("eps-string", _set(keys, "llama.attention.layer_norm_rms_epsilon", ("str", "tiny")), t, "llama", C,
         r"layer_norm_rms_epsilon' is not a number", True),
        ("rope-negative", _set(keys, "llama.rope.freq_base", ("f32", -1.0)), t, "llama", C,
         r"rope\.freq_base' must be positive", True),
        ("partial-rotary", _set(keys, "llama.rope.dimension_count", ("u32", 4)), t, "llama", U,
         r"partial rotary", True),
        ("value-length", _set(keys, "llama.attention.value_length", ("u32", 16)), t, "llama", U,
         r"value_length 16 differs", True),
        ("missing-token_embd", keys, _drop(t, "token_embd.weight"), "llama", C,
         r"required tensor 'token_embd\.weight' is missing", True),
        ("token_embd-shape", keys, _set(t, "token_embd.weight", f(48, 16)), "llama", C,
         r"'token_embd\.weight' has shape \[16, 48\]", True),
        ("missing-ffn_up", keys, _drop(t, "blk.1.ffn_up.weight"), "llama", C,
         r"required tensor 'blk\.1\.ffn_up\.weight' is missing", False),
        ("missing-output_norm", keys, _drop(t, "output_norm.weight"), "llama", C,
         r"required tensor 'output_norm\.weight' is missing", False),
        ("missing-attn_norm", keys, _drop(t, "blk.0.attn_norm.weight"), "llama", C,
         r"required tensor 'blk\.0\.attn_norm\.weight' is missing", False),
        ("attn_q-shape", keys, _set(t, "blk.0.attn_q.weight", f(16, 32)), "llama", C,
         r"'blk\.0\.attn_q\.weight' has shape \[32, 16\]", False),
        ("attn_k-3d", keys, _set(t, "blk.1.attn_k.weight", f(2, 8, 32)), "llama", C,
         r"'blk\.1\.attn_k\.weight' has shape", False),
        ("ffn_down-transposed", keys, _set(t, "blk.0.ffn_down.weight", f(64, 32)), "llama", C,
         r"'blk\.0\.ffn_down\.weight' has shape \[32, 64\]", False),
        ("norm-length", keys, _set(t, "blk.0.ffn_norm.weight", f(16)), "llama", C,
         r"'blk\.0\.ffn_norm\.weight' has 1 dims and 16 elements, want a vector of 32", False),
        ("norm-2d", keys, _set(t, "output_norm.weight", f(2, 32)), "llama", C,
         r"'output_norm\.weight' has 2 dims", False),
        ("norm-quantized", keys, _set(t, "blk.1.attn_norm.weight", (t["blk.1.attn_norm.weight"][0], G_Q8_0)),
         "llama", U, r"vector 'blk\.1\.attn_norm\.weight' has type Q8_0", False),
        ("output-shape", keys, _set(t, "output.weight", f(47, 32)), "llama", C,
         r"'output\.weight' has shape \[32, 47\]", False),
        ("qwen2-missing-bias", {k.replace("llama.", "qwen2."): v for k, v in keys.items()}, t, "qwen2", C,
         r"required tensor 'blk\.0\.attn_q\.bias' is missing", False),
    ]
    return cases


_MODEL_IDS = [c[0] for c in model_cases()]


@pytest.mark.parametrize("case", _MODEL_IDS)
def test_rebuilt_file(tmp_path, case):
    c = {c[0]: c for c in model_cases()}[case]
    _, keys, tensors, arch, cls, pattern, plan_checks_it = c
    p = write_gguf(tmp_path / f"{case}.gguf", keys, tensors, arch=arch)
    _expect(p, cls, pattern, plan_too=plan_checks_it)


def test_case_count():
    """The issue asks for dozens of distinct broken files."""
    assert len(_BYTE_IDS) + len(_MODEL_IDS) >= 40


# ---------------------------------------------------------------- not a file / random damage

def test_missing_file_and_directory(tmp_path):
    with pytest.raises(errors.FileAccessError, match="no such model file"):
        edgerun.Model(tmp_path / "nope.gguf")
    with pytest.raises(errors.FileAccessError, match="not a regular file"):
        edgerun.Model(tmp_path)


def test_random_byte_damage_never_crashes(tmp_path):
    """Seeded single- and multi-byte damage anywhere in the header: every outcome
    is either a model that runs or a typed error, never a crash or a hang."""
    rng = np.random.RandomState(1234)
    L = Layout(_BASE_BYTES)
    outcomes = {"ok": 0, "error": 0}
    p = tmp_path / "fuzz.gguf"
    for i in range(150):
        b = bytearray(_BASE_BYTES)
        for _ in range(rng.randint(1, 4)):
            off = rng.randint(0, L.data)           # header, kvs and tensor infos
            b[off] = rng.randint(0, 256)
        p.write_bytes(bytes(b))
        try:
            with edgerun.Model(p, n_ctx=8) as m:
                m.logits([0, 1])
            outcomes["ok"] += 1
        except errors.EdgerunError:
            outcomes["error"] += 1
    assert outcomes["error"] > 0 and sum(outcomes.values()) == 150
