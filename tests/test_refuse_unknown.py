"""Never silently wrong: a key or tensor that changes the arithmetic is either
applied or the file is refused at open with ER_EUNSUPPORTED naming it.

Each case plants one such key or tensor in an otherwise good file (llama.cpp's
conversions in ../shared/data/models/families, copied with gguf-py) and
expects edgerun.errors.UnsupportedError with the key's or tensor's name in the
message. The unmodified copy must open, so a refusal is the planted thing's.
"""
import re

import numpy as np
import pytest

import edgerun
from edgerun import errors
from family_files import llamacpp_file, rewrite


def _vt():
    import gguf
    return gguf.GGUFValueType


def _open(path):
    with edgerun.Model(str(path), n_ctx=64) as m:
        return m.logits([1, 2, 3])


@pytest.mark.parametrize("fam", ["llama3-rope-scaling", "qwen3", "smollm3", "gemma3", "phi3", "lfm2"])
def test_plain_copy_opens(shared_data, tmp_path, fam):
    src = llamacpp_file(shared_data, fam)
    got = _open(rewrite(src, tmp_path / "copy.gguf"))
    np.testing.assert_array_equal(got, _open(src))


# (family, key, value type name, value): keys that change what is computed
KEYS = [
    ("llama3-rope-scaling", "llama.rope.scaling.type", "STRING", "yarn"),
    ("llama3-rope-scaling", "llama.rope.scaling.factor", "FLOAT32", 4.0),          # a factor without a type
    ("llama3-rope-scaling", "llama.rope.scaling.attn_factor", "FLOAT32", 1.2),
    ("llama3-rope-scaling", "llama.rope.scaling.yarn_log_multiplier", "FLOAT32", 0.1),
    ("llama3-rope-scaling", "llama.attention.sliding_window", "UINT32", 8),
    ("llama3-rope-scaling", "llama.attn_logit_softcapping", "FLOAT32", 50.0),
    ("llama3-rope-scaling", "llama.final_logit_softcapping", "FLOAT32", 30.0),
    ("llama3-rope-scaling", "llama.logit_scale", "FLOAT32", 0.5),
    ("llama3-rope-scaling", "llama.embedding_scale", "FLOAT32", 12.0),
    ("llama3-rope-scaling", "llama.residual_scale", "FLOAT32", 0.2),
    ("llama3-rope-scaling", "llama.attention.scale", "FLOAT32", 0.1),
    ("llama3-rope-scaling", "llama.expert_count", "UINT32", 8),
    ("llama3-rope-scaling", "llama.rope.dimension_count", "UINT32", 12),            # partial rotary
    ("llama3-rope-scaling", "llama.rope.freq_base_swa", "FLOAT32", 10000.0),
    ("llama3-rope-scaling", "llama.use_parallel_residual", "BOOL", True),
    ("qwen3", "qwen3.attention.sliding_window", "UINT32", 8),
    ("qwen3", "qwen3.rope.scaling.type", "STRING", "yarn"),
    ("qwen3", "qwen3.rope.scaling.type", "STRING", "linear"),                       # not checked for qwen3
    ("smollm3", "smollm3.attention.sliding_window", "UINT32", 8),
    ("gemma3", "gemma3.attn_logit_softcapping", "FLOAT32", 50.0),
    ("gemma3", "gemma3.attention.sliding_window_pattern", "UINT32", 4),
    ("gemma3", "gemma3.attention.scale", "FLOAT32", 0.1),
    ("gemma3", "gemma3.rope.scaling.type", "STRING", "yarn"),
    ("phi3", "phi3.rope.scaling.type", "STRING", "longrope"),
    ("phi3", "phi3.rope.dimension_count", "UINT32", 10),                            # not what the file rotates
    ("lfm2", "lfm2.attention.sliding_window", "UINT32", 8),
    ("lfm2", "lfm2.ssm.conv_kernel", "UINT32", 4),
]


@pytest.mark.parametrize("fam,key,vtype,value", KEYS, ids=[f"{k[0]}:{k[1]}={k[3]}" for k in KEYS])
def test_planted_key_is_refused(shared_data, tmp_path, fam, key, vtype, value):
    path = rewrite(llamacpp_file(shared_data, fam), tmp_path / "planted.gguf",
                   set_keys={key: (getattr(_vt(), vtype), value)})
    if key == "phi3.rope.dimension_count":
        # an even part of the head is phi3's partial rotary: it runs, and must
        # then differ from the file's own 12 (it is applied, not ignored)
        assert not np.array_equal(_open(path), _open(llamacpp_file(shared_data, fam)))
        return
    with pytest.raises(errors.UnsupportedError, match=re.escape(key)):
        _open(path)


def test_linear_rope_scaling_is_applied(shared_data, tmp_path):
    """rope.scaling.type linear is understood for llama: it must change the result."""
    vt = _vt()
    src = llamacpp_file(shared_data, "llama3-rope-scaling")
    path = rewrite(src, tmp_path / "linear.gguf", drop_tensors=("rope_freqs.weight",),
                   set_keys={"llama.rope.scaling.type": (vt.STRING, "linear"),
                             "llama.rope.scaling.factor": (vt.FLOAT32, 4.0)})
    plain = rewrite(src, tmp_path / "plain.gguf", drop_tensors=("rope_freqs.weight",))
    assert not np.allclose(_open(path), _open(plain), atol=1e-5)


# (family, tensor name, shape as numpy sees it): tensors no step reads
TENSORS = [
    ("llama3-rope-scaling", "blk.0.attn_q_norm.weight", (24,)),     # a norm the llama step does not apply
    ("llama3-rope-scaling", "blk.1.post_attention_norm.weight", (96,)),
    ("llama3-rope-scaling", "output.bias", (32000,)),
    ("llama3-rope-scaling", "token_embd_norm.weight", (96,)),
    ("llama3-rope-scaling", "blk.0.attn_output.bias", (96,)),
    ("qwen3", "blk.0.post_ffw_norm.weight", (96,)),
    ("qwen3", "rope_freqs.weight", (16,)),
    ("qwen3", "rope_factors_long.weight", (16,)),
    ("smollm3", "blk.3.attn_k_norm.weight", (24,)),
    ("gemma3", "rope_freqs.weight", (16,)),
    ("gemma3", "blk.0.ffn_down.bias", (96,)),
    ("phi3", "rope_factors_short.weight", (6,)),                    # half of LongRoPE's pair
    ("phi3", "blk.0.attn_qkv.bias", (192,)),
    ("phi3", "blk.0.attn_q.weight", (96, 96)),
    ("phi3", "blk.9.attn_norm.weight", (96,)),                      # a layer past block_count
    ("lfm2", "blk.0.shortconv.conv.bias", (96,)),                   # conv_bias: not applied
    ("lfm2", "blk.0.attn_q_norm.weight", (24,)),                    # a conv layer's stray attention norm
    ("lfm2", "output_norm.weight", (96,)),                          # lfm2's final norm is token_embd_norm
]


@pytest.mark.parametrize("fam,name,shape", TENSORS, ids=[f"{t[0]}:{t[1]}" for t in TENSORS])
def test_planted_tensor_is_refused(shared_data, tmp_path, fam, name, shape):
    arr = np.random.RandomState(0).uniform(0.5, 1.5, shape).astype(np.float32)
    path = rewrite(llamacpp_file(shared_data, fam), tmp_path / "planted.gguf", add_tensors={name: arr})
    with pytest.raises(errors.UnsupportedError, match=re.escape(name)):
        _open(path)


@pytest.mark.parametrize("arch", ["gemma2", "mamba", "mistral3", "phi2", "qwen2moe"])
def test_unknown_architecture_is_refused(shared_data, tmp_path, arch):
    src = llamacpp_file(shared_data, "qwen3")
    path = rewrite(src, tmp_path / "arch.gguf", arch=arch)
    with pytest.raises(errors.UnsupportedError, match=f"architecture '{arch}' is not supported"):
        _open(path)


@pytest.mark.parametrize("key", ["adapter.type", "split.count"])
def test_adapter_and_split_files_are_refused(shared_data, tmp_path, key):
    vt = _vt()
    val = (vt.STRING, "lora") if key == "adapter.type" else (vt.UINT16, 2)
    path = rewrite(llamacpp_file(shared_data, "qwen3"), tmp_path / "k.gguf", set_keys={key: val})
    with pytest.raises(errors.UnsupportedError, match=re.escape(key)):
        _open(path)


def test_plan_refuses_keys_too(shared_data, tmp_path):
    """er_plan reads the same keys as open, so it refuses the same files."""
    path = rewrite(llamacpp_file(shared_data, "gemma3"), tmp_path / "p.gguf",
                   set_keys={"gemma3.attn_logit_softcapping": (_vt().FLOAT32, 50.0)})
    with pytest.raises(errors.UnsupportedError, match="attn_logit_softcapping"):
        edgerun.plan(str(path))


def test_per_layer_kv_heads_only_for_lfm2(shared_data, tmp_path):
    """A per-layer head_count_kv array (LFM2's layer kinds) in another family is refused."""
    vt = _vt()
    path = rewrite(llamacpp_file(shared_data, "qwen3"), tmp_path / "k.gguf",
                   set_keys={"qwen3.attention.head_count_kv": (vt.ARRAY, [2, 2, 0, 2])})
    with pytest.raises(errors.UnsupportedError, match="head_count_kv"):
        _open(path)


def test_longrope_needs_both_factor_sets(shared_data, tmp_path):
    path = rewrite(llamacpp_file(shared_data, "phi3"), tmp_path / "l.gguf",
                   add_tensors={"rope_factors_long.weight": np.ones(6, np.float32)})
    with pytest.raises(errors.CorruptModelError, match="rope_factors_short"):
        _open(path)


# Our converter's tokenizer keys (edgerun.tokenizer.*) change the token ids:
# an unknown one, or an unknown value, refuses the file by name.
TOKENIZER_KEYS = [
    ("edgerun.tokenizer.prepend_sheme", "first", "prepend_sheme"),      # a misspelt / newer key
    ("edgerun.tokenizer.prepend_scheme", "never", "'never'"),            # a value we do not implement
]


@pytest.mark.parametrize("key,value,named", TOKENIZER_KEYS, ids=[k[0] + "=" + k[1] for k in TOKENIZER_KEYS])
def test_unknown_tokenizer_key_is_refused(shared_data, tmp_path, key, value, named):
    path = rewrite(llamacpp_file(shared_data, "phi3"), tmp_path / "t.gguf", set_keys={key: (_vt().STRING, value)})
    with pytest.raises(errors.UnsupportedError, match=re.escape(named)):
        _open(path)
    with pytest.raises(errors.UnsupportedError, match=re.escape(named)):
        edgerun.plan(str(path))
    with pytest.raises(errors.UnsupportedError, match=re.escape(named)):
        edgerun.Tokenizer.from_file(str(path))


def test_known_prepend_schemes_open(shared_data, tmp_path):
    """"always" is what a file without the key does; "first" drops the
    prefix after a special token only."""
    src = llamacpp_file(shared_data, "phi3")
    tok = {s: edgerun.Tokenizer.from_file(str(rewrite(
        src, tmp_path / f"{s}.gguf", set_keys={"edgerun.tokenizer.prepend_scheme": (_vt().STRING, s)})))
        for s in ("always", "first")}
    plain = edgerun.Tokenizer.from_file(str(src))
    for text in ("Hello world", "<s>Hello world", "a</s>b"):
        assert tok["always"].encode(text, parse_special=True) == plain.encode(text, parse_special=True)
    assert tok["first"].encode("Hello world") == plain.encode("Hello world")
    first, always = (tok[s].encode("<s>Hello", add_special=False, parse_special=True) for s in ("first", "always"))
    assert first[0] == always[0] == 1 and first[1:] != always[1:]
