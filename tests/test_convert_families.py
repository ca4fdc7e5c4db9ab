"""`edgerun convert` on the model families of ../shared/data/models/families
(skipped when absent): what it writes against what llama.cpp's own converter
wrote from the same Hugging Face folder, what the runtime computes from it
against transformers, and, where llama-cpp-python is installed, against
llama.cpp on the same files, float and quantized by llama.cpp's quantizer.

Deliberate differences from llama.cpp's files, each checked exactly:
  - general.name / general.type / general.size_label: naming metadata
    (llama.cpp derives "Hf" and a size label from the folder name and
    parameter count; we write the config's name or the folder's);
  - tokenizer keys llama.cpp leaves out and its runtime then defaults: we write
    the default explicitly (SentencePiece: add_bos_token true, add_eos_token
    false, add_space_prefix true, bos 1, eos 2, unk 0), plus our own keys
    normalizer, ignore_merges, remove_extra_whitespaces and the added tokens'
    lstrip_token_ids / rstrip_token_ids;
  - gemma3's norm weights: the file stores 1 + w. llama.cpp adds the 1 in the
    checkpoint's float16, rounding to 2^-11; we add it in float32, which is what
    transformers computes in float32 (so our file needs no correction in the
    conformance test below).
"""
import json
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

import edgerun
from family_files import FAMILIES, family_dir, llamacpp_file

# lfm2 is compared with llama.cpp's file here; the runtime tests take it from
# family_files.FAMILIES once the runtime runs it
ALL = tuple(dict.fromkeys(FAMILIES + ("lfm2",)))
N_TOKENS = 40                       # > 2 x gemma3's sliding window of 16
TOL = 1e-4

NAMING = {"general.name", "general.type", "general.size_label"}
# lstrip/rstrip_token_ids: added tokens' AddedToken strip flags, which llama.cpp's
# GGUF files have no key for (its runtime sets them for a few models by token text);
# edgerun.tokenizer.prepend_scheme: "first" for a legacy=false SentencePiece folder
OURS_ONLY = {"tokenizer.ggml.normalizer", "tokenizer.ggml.ignore_merges", "tokenizer.ggml.remove_extra_whitespaces",
             "tokenizer.ggml.lstrip_token_ids", "tokenizer.ggml.rstrip_token_ids",
             "edgerun.tokenizer.prepend_scheme"}
# what llama.cpp assumes for a SentencePiece ("llama") vocabulary whose file omits the key
SPM_DEFAULTS = {"tokenizer.ggml.add_bos_token": True, "tokenizer.ggml.add_eos_token": False,
                "tokenizer.ggml.add_space_prefix": True, "tokenizer.ggml.bos_token_id": 1,
                "tokenizer.ggml.eos_token_id": 2, "tokenizer.ggml.unknown_token_id": 0}

_FILES = {}
_PARSED = {}


def ours(shared_data, fam, ftype, tmp_path_factory):
    """Our conversion of the family's hf/ folder, made once per session."""
    key = (fam, ftype)
    if key not in _FILES:
        from edgerun.convert import convert
        out = tmp_path_factory.mktemp("convfam") / f"{fam}-{ftype}.gguf"
        convert(family_dir(shared_data, fam) / "hf", out, ftype, quiet=True)
        _FILES[key] = out
    return _FILES[key]


def parsed(path):
    """({key: value}, {tensor name: (type name, shape, raw data)}), read once
    per session by read_gguf (test_fast_reader_agrees_with_gguf_py holds it to
    gguf-py's reader, which takes seconds per 32,000-token vocabulary)."""
    if str(path) not in _PARSED:
        _PARSED[str(path)] = read_gguf(path)
    return _PARSED[str(path)]


def read_gguf(path):
    """A plain GGUF v3 reader: keys with their values (arrays as lists), and each
    tensor's type name, numpy-order shape and data (a view of the file's bytes as
    float32/float16 for float types, uint8 blocks otherwise)."""
    import struct

    import gguf
    buf = memoryview(pathlib.Path(path).read_bytes())
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, buf, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = bytes(buf[pos:pos + n]).decode("utf-8")
        pos += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            sub, n = take("I"), take("Q")
            return [value(sub) for _ in range(n)]
        return take(scalar[t])

    assert bytes(buf[:4]) == b"GGUF"
    pos = 4
    take("I")
    n_tensors, n_kv = take("Q"), take("Q")
    kv = {}
    for _ in range(n_kv):
        k = string()
        kv[k] = value(take("I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        ne = [take("Q") for _ in range(take("I"))]
        infos.append((name, ne, gguf.GGMLQuantizationType(take("I")), take("Q")))
    align = kv.get("general.alignment", 32)
    start = (pos + align - 1) // align * align
    ts = {}
    for name, ne, tt, off in infos:
        block, size = gguf.GGML_QUANT_SIZES[tt]
        n = int(np.prod(ne))
        raw = np.frombuffer(buf, np.uint8, n // block * size, start + off)
        dt = {"F32": np.float32, "F16": np.float16}.get(tt.name)
        shape = list(reversed(ne))
        data = raw.view(dt).reshape(shape) if dt else raw.reshape(shape[:-1] + [-1])
        ts[name] = (tt.name, shape, data)
    return kv, ts


def test_fast_reader_agrees_with_gguf_py(shared_data):
    import family_files
    path = llamacpp_file(shared_data, "lfm2")    # string, int32 and float arrays, conv tensors
    arch, kvs, tensors = family_files._parsed(path)
    kv, ts = read_gguf(path)
    assert kv["general.architecture"] == arch
    assert {k: kv[k] for k, _, _, _ in kvs} == {k: v for k, _, _, v in kvs}
    assert sorted(ts) == sorted(t[0] for t in tensors)
    for name, data, shape, tt in tensors:
        assert ts[name][0] == tt.name and ts[name][1] == shape
        assert np.array_equal(ts[name][2].view(np.uint8).reshape(-1), data.view(np.uint8).reshape(-1))


def checkpoint(shared_data, fam):
    """{HF name: float32 array} of the family's safetensors."""
    from edgerun.convert.hf import _open_weights
    where = _open_weights(family_dir(shared_data, fam) / "hf")
    return {n: st.load(n) for n, st in where.items()}


def _gemma_norm(name):
    return name.endswith("norm.weight")


# ---------------------------------------------------------------- against llama.cpp's file

@pytest.mark.parametrize("fam", ALL)
def test_keys_match_llamacpp(shared_data, fam, tmp_path_factory):
    mine, _ = parsed(ours(shared_data, fam, "f16", tmp_path_factory))
    ref, _ = parsed(llamacpp_file(shared_data, fam))
    missing = set(ref) - set(mine) - NAMING
    assert not missing, f"keys llama.cpp writes and we do not: {sorted(missing)}"
    for k in set(mine) - set(ref) - NAMING:
        if k in OURS_ONLY:
            continue
        assert ref["tokenizer.ggml.model"] == "llama" and k in SPM_DEFAULTS, f"extra key {k} = {mine[k]!r}"
        assert mine[k] == SPM_DEFAULTS[k], f"{k} = {mine[k]!r}, llama.cpp's default is {SPM_DEFAULTS[k]!r}"
    for k in set(mine) & set(ref) - NAMING:
        assert mine[k] == ref[k], f"{k}: ours {str(mine[k])[:80]}, llama.cpp's {str(ref[k])[:80]}"


@pytest.mark.parametrize("fam", ALL)
def test_tensors_match_llamacpp(shared_data, fam, tmp_path_factory):
    """Same names, types, shapes; data bit-equal in f16, except gemma3's norms."""
    _, mine = parsed(ours(shared_data, fam, "f16", tmp_path_factory))
    _, ref = parsed(llamacpp_file(shared_data, fam))
    assert sorted(mine) == sorted(ref)
    hf_norms = {}
    if fam == "gemma3":
        from edgerun.convert.families import Gemma3
        ck = checkpoint(shared_data, fam)
        for n, w in ck.items():
            g = Gemma3.gguf_name(n)
            if g and _gemma_norm(g):
                hf_norms[g] = w
    for name, (t, shape, data) in mine.items():
        rt, rshape, rdata = ref[name]
        assert (t, shape) == (rt, rshape), name
        if name in hf_norms:
            w = hf_norms[name]
            assert np.array_equal(data, w + np.float32(1.0)), name
            assert np.array_equal(rdata, (w.astype(np.float16) + np.float16(1.0)).astype(np.float32)), name
            assert np.abs(data - rdata).max() <= 2.0 ** -11, name
        else:
            assert np.array_equal(data, rdata), name


@pytest.mark.parametrize("fam", ALL)
def test_f32_conversion_is_the_f16_one_unrounded(shared_data, fam, tmp_path_factory):
    """f32: the same keys (file type 0) and tensors, every one F32, holding the
    checkpoint's float16 values exactly, i.e. llama.cpp's f16 data widened."""
    kv32, t32 = parsed(ours(shared_data, fam, "f32", tmp_path_factory))
    kv16, _ = parsed(ours(shared_data, fam, "f16", tmp_path_factory))
    _, ref = parsed(llamacpp_file(shared_data, fam))
    assert kv32["general.file_type"] == 0 and kv16["general.file_type"] == 1
    assert {k: v for k, v in kv32.items() if k != "general.file_type"} == \
        {k: v for k, v in kv16.items() if k != "general.file_type"}
    assert sorted(t32) == sorted(ref)
    for name, (t, shape, data) in t32.items():
        rt, rshape, rdata = ref[name]
        assert t == "F32" and shape == rshape, name
        if not (fam == "gemma3" and _gemma_norm(name)):
            assert np.array_equal(data, rdata.astype(np.float32)), name


def test_llama3_rope_freqs_are_llamacpps(shared_data, tmp_path_factory):
    """The one tensor computed from the config: bit-equal, and not all ones."""
    _, mine = parsed(ours(shared_data, "llama3-rope-scaling", "f32", tmp_path_factory))
    _, ref = parsed(llamacpp_file(shared_data, "llama3-rope-scaling"))
    assert np.array_equal(mine["rope_freqs.weight"][2], ref["rope_freqs.weight"][2])
    assert mine["rope_freqs.weight"][2].max() == 8.0 and mine["rope_freqs.weight"][2].min() == 1.0


# ---------------------------------------------------------------- refusals

def _variant(shared_data, tmp_path, fam, edit=None, tensors=None):
    """A copy of fam's hf/ folder with config.json edited / tensors replaced."""
    src = family_dir(shared_data, fam) / "hf"
    v = tmp_path / f"{fam}-variant"
    shutil.copytree(src, v)
    cfg = json.loads((v / "config.json").read_text())
    if edit:
        edit(cfg)
    (v / "config.json").write_text(json.dumps(cfg))
    if tensors:
        from safetensors.numpy import load_file, save_file
        t = load_file(str(v / "model.safetensors"))
        t.update(tensors(t))
        save_file(t, str(v / "model.safetensors"))
    return v


def _set(**kw):
    return lambda c: c.update(kw)


def _rope(**kw):
    def edit(c):
        c["rope_parameters"] = {**c["rope_parameters"], **kw}
    return edit


REFUSALS = [
    ("llama3-rope-scaling", _rope(rope_type="yarn"), None, r"rope_scaling 'yarn'"),
    ("llama3-rope-scaling", _rope(rope_type="dynamic"), None, r"rope_scaling 'dynamic'"),
    ("qwen3", _rope(rope_type="yarn", factor=4.0), None, r"rope_scaling 'yarn'"),
    ("qwen3", _set(use_sliding_window=True, sliding_window=16), None, r"sliding_window 16"),
    ("smollm3", _set(no_rope_layers=[1, 1, 0, 1, 1, 1, 0, 1]), None, r"no_rope_layers \[1, 1, 0, 1, 1, 1, 0, 1\]"),
    ("smollm3", _set(no_rope_layers=[1, 1, 1, 0]), None, r"no_rope_layers \[1, 1, 1, 0\].*layers \[3, 7\] of 8"),
    # transformers derives the list from the interval when the list is absent
    ("smollm3", _set(no_rope_layers=None, no_rope_layer_interval=3), None, r"no_rope_layer_interval 3 \(no no_rope"),
    ("smollm3", _set(no_rope_layers=None, no_rope_layer_interval=0), None, r"no_rope_layer_interval 0"),
    ("smollm3", _rope(rope_type="linear", factor=2.0), None, r"rope_scaling 'linear'"),
    ("gemma3", _set(attn_logit_softcapping=50.0), None, r"attn_logit_softcapping"),
    ("gemma3", _set(query_pre_attn_scalar=64), None, r"query_pre_attn_scalar 64"),
    ("gemma3", _set(layer_types=["sliding_attention"] * 3 + ["full_attention"] * 4), None, r"layer_types"),
    ("gemma3", _set(hidden_activation="gelu"), None, r"hidden_activation 'gelu'"),
    ("gemma3", lambda c: c["rope_parameters"]["sliding_attention"].update(rope_type="linear", factor=2.0), None,
     r"rope_scaling 'linear' on sliding_attention"),
    ("phi3", _rope(rope_type="longrope", long_factor=[1.0] * 5, short_factor=[1.0] * 6), None,
     r"long_factor must list 6 positive numbers"),
    ("phi3", _rope(rope_type="longrope", long_factor=[1.0] * 6, short_factor=[1.0] * 5 + [0.0]), None,
     r"short_factor must list 6"),
    ("phi3", _rope(rope_type="longrope", long_factor=[1.0] * 6, short_factor=[1.0] * 6, attention_factor=1.5), None,
     r"attention_factor 1.5: llama.cpp's phi3 computes"),
    ("phi3", _set(sliding_window=None, hidden_act="gelu_new"), None, r"hidden_act 'gelu_new'"),
    ("lfm2", _set(conv_bias=True), None, r"conv_bias"),
    ("lfm2", _set(layer_types=["conv", "mamba", "conv", "conv", "full_attention"]), None, r"layer_types"),
    ("qwen3", None, lambda t: {"model.layers.1.self_attn.q_proj.bias": np.zeros(128, np.float16)},
     r"q_proj\.bias is a bias"),
    ("gemma3", None, lambda t: {"model.layers.2.self_attn.sinks.weight": np.zeros(4, np.float16)},
     r"self_attn\.sinks\.weight is a layer tensor"),
]


@pytest.mark.parametrize("fam,edit,tensors,pattern", REFUSALS,
                         ids=[f"{r[0]}-{r[3][:24]}" for r in REFUSALS])
def test_convert_refuses_what_the_runtime_would_get_wrong(shared_data, tmp_path, fam, edit, tensors, pattern):
    from edgerun.convert import ConvertError, convert
    v = _variant(shared_data, tmp_path, fam, edit, tensors)
    with pytest.raises(ConvertError, match=pattern):
        convert(v, tmp_path / "x.gguf", "f32", quiet=True)
    assert not (tmp_path / "x.gguf").exists() and not (tmp_path / "x.gguf.part").exists()


def test_smollm3_nope_layers_from_the_default_interval_are_accepted(shared_data, tmp_path):
    """A config with no no_rope_layers list and interval 4 (or none) is the
    runtime's pattern: converted, and the same weights and keys as with the
    list spelled out."""
    from edgerun.convert import convert
    v = _variant(shared_data, tmp_path, "smollm3", lambda c: c.pop("no_rope_layers"))
    convert(v, tmp_path / "a.gguf", "f32", quiet=True)
    v2 = _variant(shared_data, tmp_path / "b", "smollm3",
                  lambda c: [c.pop("no_rope_layers"), c.pop("no_rope_layer_interval")])
    convert(v2, tmp_path / "b.gguf", "f32", quiet=True)
    v3 = _variant(shared_data, tmp_path / "c", "smollm3")
    convert(v3, tmp_path / "c.gguf", "f32", quiet=True)
    assert (tmp_path / "a.gguf").read_bytes() == (tmp_path / "b.gguf").read_bytes() == \
        (tmp_path / "c.gguf").read_bytes()


def test_gemma3_linear_scaling_on_global_layers_is_written(shared_data, tmp_path):
    """Gemma 3 4B+ scale RoPE linearly on the global layers only: written as
    llama.cpp writes it (rope.scaling.*), which the runtime applies to those."""
    from edgerun.convert import convert
    v = _variant(shared_data, tmp_path, "gemma3",
                 lambda c: c["rope_parameters"]["full_attention"].update(rope_type="linear", factor=8.0))
    convert(v, tmp_path / "g.gguf", "f32", quiet=True)
    kv, _ = parsed(tmp_path / "g.gguf")
    assert kv["gemma3.rope.scaling.type"] == "linear" and kv["gemma3.rope.scaling.factor"] == 8.0
    assert kv["gemma3.rope.freq_base_swa"] == 10000.0


# ---------------------------------------------------------------- against transformers

_REF = {}


def reference(shared_data, fam):
    """(ids, logits (N_TOKENS, n_vocab)) from transformers in float32, once per family."""
    if fam not in _REF:
        torch = pytest.importorskip("torch")
        transformers = pytest.importorskip("transformers")
        hf = transformers.AutoModelForCausalLM.from_pretrained(family_dir(shared_data, fam) / "hf",
                                                               dtype=torch.float32)
        hf.eval()
        ids = [int(i) for i in np.random.RandomState(7).randint(3, hf.config.vocab_size, N_TOKENS)]
        with torch.no_grad():
            _REF[fam] = (ids, hf(torch.tensor([ids])).logits[0].numpy().astype(np.float64))
    return _REF[fam]


def _rel(got, ref):
    return float(np.abs(np.asarray(got, np.float64) - ref).max() / np.abs(ref).max())


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("fam", FAMILIES)
def test_our_conversion_prefill_matches_transformers(shared_data, fam, threads, tmp_path_factory):
    ids, ref = reference(shared_data, fam)
    path = ours(shared_data, fam, "f32", tmp_path_factory)
    with edgerun.Model(str(path), n_ctx=64, n_batch=16, n_threads=threads) as m:
        assert _rel(m.logits(ids), ref) < TOL


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("fam", FAMILIES)
def test_our_conversion_decode_matches_transformers(shared_data, fam, threads, tmp_path_factory):
    """A 5-token prompt, then one token per step, well past gemma3's window."""
    ids, ref = reference(shared_data, fam)
    path = ours(shared_data, fam, "f32", tmp_path_factory)
    with edgerun.Model(str(path), n_ctx=64, n_threads=threads) as m:
        with m.session() as s:
            rows = [s.decode(ids[:5])] + [s.decode([t]) for t in ids[5:]]
    assert _rel(np.stack(rows), ref[4:]) < TOL


# ---------------------------------------------------------------- against llama.cpp (llama-cpp-python)

def _llama_cpp_logits(path, ids):
    """llama.cpp's logits after every token of `ids`, one prefill, float32 KV cache."""
    llama_cpp = pytest.importorskip("llama_cpp")
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=64, n_batch=64, n_ubatch=64, logits_all=True,
                          n_threads=2, type_k=0, type_v=0, flash_attn=False, verbose=False)
    try:
        llm.eval(ids)
        return np.array(llm.scores[:len(ids)], dtype=np.float64)
    finally:
        llm.close()


def _edgerun_logits(path, ids):
    with edgerun.Model(str(path), n_ctx=64, n_threads=2) as m:
        return np.asarray(m.logits(ids), np.float64)


# gemma3: ggml computes GELU through a float16 lookup table, which moves its
# logits ~5e-4 of the largest from transformers'; the others agree to ~3e-7.
# On F16 weights ggml's CPU matmul also rounds the activations to float16
# (2^-11 relative; we keep them float32): measured 3-4.5e-4 (gemma3 1.3e-3).
FLOAT_TOL = {("f32", "gemma3"): 2e-3, ("f16", "gemma3"): 3e-3, ("f16", None): 1e-3}


@pytest.mark.parametrize("ftype", ["f32", "f16"])
@pytest.mark.parametrize("fam", FAMILIES)
def test_llama_cpp_runs_our_conversion_as_we_do(shared_data, fam, ftype, tmp_path_factory):
    pytest.importorskip("llama_cpp")
    ids, _ = reference(shared_data, fam)
    path = ours(shared_data, fam, ftype, tmp_path_factory)
    tol = FLOAT_TOL.get((ftype, fam), FLOAT_TOL.get((ftype, None), TOL))
    assert _rel(_edgerun_logits(path, ids), _llama_cpp_logits(path, ids)) < tol


_QUANT = {}


def _llama_quantize(src, dst, ftype):
    """dst: src quantized by llama.cpp's own quantizer (llama_model_quantize),
    in a child process so its log stays out of this one."""
    code = ("import ctypes, sys, llama_cpp\n"
            "p = llama_cpp.llama_model_quantize_default_params()\n"
            "p.ftype = int(sys.argv[3])\n"
            "sys.exit(llama_cpp.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), ctypes.byref(p)))\n")
    r = subprocess.run([sys.executable, "-c", code, str(src), str(dst), str(ftype)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-800:]
    return dst


# Quantized files: both engines read the same quantized weights and, before
# each quantized dot product, round the activations to 8 bits per block with
# the same scale; their logits agree to ~1e-7 at most positions. But a value
# near a rounding boundary can fall on either side: ties (k + 0.5) go away from
# zero in edgerun, as in llama.cpp's reference C, and to even in llama.cpp's
# AVX2/NEON code, and a last-bit difference in summation order moves a value
# across a boundary too (edgerun's own generic and AVX2 tables differ by up to
# 0.7% on these files that way). One activation then moves by one step (1/127
# of its block's largest value), and from then on (through the K/V cache) these random
# 96-wide models carry it to at most ~1.5% of the largest logit (measured:
# 0.1-1.4%, and 0 where nothing crosses), against 1.3-27% that the quantization
# itself moves them from the float model. So: within 3% of the largest logit
# (gemma3: 6%, its float16 GELU table in ggml adds to it from the first token),
# and each engine as far from the float model as the other to within a quarter
# of that distance (a misread scale or layout would break both).
QUANT_TOL = {"gemma3": 0.06}
_FLOAT = {}
FTYPES = {"q8_0": 7, "q4_k_m": 15}


@pytest.mark.parametrize("ftype", list(FTYPES))
@pytest.mark.parametrize("fam", FAMILIES)
def test_llama_cpp_quantized_files_match_llama_cpp(shared_data, fam, ftype, tmp_path_factory):
    pytest.importorskip("llama_cpp")
    ids, _ = reference(shared_data, fam)
    src = ours(shared_data, fam, "f32", tmp_path_factory)
    q = _llama_quantize(src, src.with_name(f"{fam}-{ftype}-llamacpp.gguf"), FTYPES[ftype])
    assert q.stat().st_size < 0.5 * src.stat().st_size   # quantized, not copied
    flt = _FLOAT.get(fam)
    if flt is None:
        flt = _FLOAT[fam] = _llama_cpp_logits(src, ids)
    lc, er = _llama_cpp_logits(q, ids), _edgerun_logits(q, ids)
    assert _rel(er, lc) < QUANT_TOL.get(fam, 0.03)
    d_er, d_lc = _rel(er, flt), _rel(lc, flt)
    assert abs(d_er - d_lc) <= 0.25 * d_lc, (d_er, d_lc)


def _linear(fam):
    if fam == "gemma3":
        return lambda c: c["rope_parameters"]["full_attention"].update(rope_type="linear", factor=4.0)
    return lambda c: c.update(rope_parameters={"rope_type": "linear", "factor": 4.0, "rope_theta": 500000.0})


@pytest.mark.parametrize("fam", ["llama3-rope-scaling", "gemma3"])
def test_linear_rope_scaling_matches_transformers(shared_data, fam, tmp_path):
    """Linear RoPE scaling (Llama; Gemma 3's global layers), converted by us,
    against transformers with the same config, prefill and decode."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from edgerun.convert import convert
    v = _variant(shared_data, tmp_path, fam, _linear(fam))
    convert(v, tmp_path / "lin.gguf", "f32", quiet=True)
    hf = transformers.AutoModelForCausalLM.from_pretrained(v, dtype=torch.float32)
    hf.eval()
    ids = [int(i) for i in np.random.RandomState(3).randint(3, hf.config.vocab_size, N_TOKENS)]
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0].numpy().astype(np.float64)
    with edgerun.Model(str(tmp_path / "lin.gguf"), n_ctx=64, n_threads=2) as m:
        assert _rel(m.logits(ids), ref) < TOL
        with m.session() as s:
            rows = [s.decode(ids[:5])] + [s.decode([t]) for t in ids[5:]]
    assert _rel(np.stack(rows), ref[4:]) < TOL


@pytest.mark.parametrize("n_ctx,n_tokens", [(32, 24), (64, 48)], ids=["short", "long"])
def test_phi3_longrope_conversion_matches_transformers(shared_data, tmp_path, n_ctx, n_tokens):
    """Phi-3.5-mini / Phi-4-mini's LongRoPE converted by us: the two factor
    sets as F32 tensors, the original context and the attention factor as
    llama.cpp's converter writes them; the runtime picks the long set when
    n_ctx exceeds the original context (32), transformers when the sequence
    does, so each case keeps to one side."""
    import math
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from edgerun.convert import convert
    rng = np.random.RandomState(4)
    short = [float(x) for x in rng.uniform(1.0, 1.5, 6)]
    long = [float(x) for x in rng.uniform(2.0, 8.0, 6)]

    def edit(c):
        c["rope_parameters"] = {**c["rope_parameters"], "rope_type": "longrope", "short_factor": short,
                                "long_factor": long, "original_max_position_embeddings": 32}
        c["original_max_position_embeddings"] = 32
    v = _variant(shared_data, tmp_path, "phi3", edit)
    out = tmp_path / "longrope.gguf"
    convert(v, out, "f32", quiet=True)
    keys, tensors = read_gguf(out)
    attn = math.sqrt(1 + math.log(4096 / 32) / math.log(32))
    assert keys["phi3.rope.scaling.original_context_length"] == 32
    assert abs(keys["phi3.rope.scaling.attn_factor"] - attn) < 1e-6
    for name, want in (("rope_factors_long.weight", long), ("rope_factors_short.weight", short)):
        assert tensors[name][0] == "F32" and np.array_equal(tensors[name][2], np.array(want, np.float32))
    hf = transformers.AutoModelForCausalLM.from_pretrained(v, dtype=torch.float32)
    hf.eval()
    ids = [int(i) for i in rng.randint(3, hf.config.vocab_size, n_tokens)]
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0].numpy().astype(np.float64)
    with edgerun.Model(str(out), n_ctx=n_ctx, n_batch=16) as m:
        assert m.hparams["rope_longrope"] == (2 if n_ctx > 32 else 1)
        assert _rel(m.logits(ids), ref) < TOL
        with m.session() as s:
            rows = [s.decode(ids[:4])] + [s.decode([t]) for t in ids[4:]]
    assert _rel(np.stack(rows), ref[3:]) < TOL
