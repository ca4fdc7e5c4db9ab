"""Conformance of each model family against transformers (float32), on the
file llama.cpp's converter wrote (../shared/data/models/families; skipped
when absent).

The logits after every token must be within 1e-4 of the largest reference
logit, in prefill (in chunks of n_batch) and in decode (one token per step),
at 1, 2 and 3 threads; 40 tokens pass gemma3's sliding window of 16 more than
twice. Greedy generation must give the same tokens on every CPU kernel table
this machine runs.

gemma3: llama.cpp's converter stores Gemma's RMSNorm weights as 1 + w, added
in float16, so the file's norms differ from the checkpoint's by up to 2^-11.
The reference model is given the file's norms (w = file - 1, in float32), so
that what is compared is the arithmetic, not the converter's rounding; the
test also checks the file's norms are that rounding and nothing else.
"""
import numpy as np
import pytest

import edgerun
from family_files import FAMILIES, family_dir, llamacpp_file

N_TOKENS = 40
TOL = 1e-4

_GEMMA_NORMS = {"input_layernorm": "attn_norm", "post_attention_layernorm": "post_attention_norm",
                "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
                "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm"}


def _gguf_name(hf_name):
    if hf_name == "model.norm.weight":
        return "output_norm.weight"
    parts = hf_name.split(".")
    return f"blk.{parts[2]}.{_GEMMA_NORMS['.'.join(parts[3:-1])]}.weight"


def _file_norms_into(hf, path):
    """Gemma: the reference takes the file's 1 + w norms (see the docstring)."""
    import gguf
    import torch
    tensors = {t.name: np.array(t.data) for t in gguf.GGUFReader(str(path)).tensors}
    with torch.no_grad():
        for name, p in hf.state_dict().items():
            if name.endswith("norm.weight"):
                stored = tensors[_gguf_name(name)].astype(np.float32)
                ckpt = p.numpy()
                # the converter's rounding of 1 + w to float16, nothing more
                assert np.array_equal(stored, (1.0 + ckpt).astype(np.float16).astype(np.float32)) or \
                    np.abs(stored - (1.0 + ckpt)).max() <= 2.0 ** -10, name
                p.copy_(torch.from_numpy(stored - 1.0))


_REF = {}


def reference(shared_data, fam):
    """(ids, logits (N_TOKENS, n_vocab)) from transformers in float32, once per family."""
    if fam not in _REF:
        torch = pytest.importorskip("torch")
        transformers = pytest.importorskip("transformers")
        d = family_dir(shared_data, fam)
        hf = transformers.AutoModelForCausalLM.from_pretrained(d / "hf", dtype=torch.float32)
        hf.eval()
        if fam == "gemma3":
            _file_norms_into(hf, llamacpp_file(shared_data, fam))
        ids = [int(i) for i in np.random.RandomState(7).randint(3, hf.config.vocab_size, N_TOKENS)]
        with torch.no_grad():
            logits = hf(torch.tensor([ids])).logits[0].numpy()
        _REF[fam] = (ids, logits)
    return _REF[fam]


def _hp(m):
    """er_hparams of an open model, every field (Model.hparams lists the older ones)."""
    from edgerun._ffi import ffi, lib
    hp = ffi.new("er_hparams *")
    assert lib.er_model_hparams(m._ptr, hp) == 0
    return hp


def _rel(got, ref):
    return float(np.abs(got - ref).max() / np.abs(ref).max())


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("fam", FAMILIES)
def test_prefill_matches_transformers(shared_data, fam, threads):
    ids, ref = reference(shared_data, fam)
    with edgerun.Model(str(llamacpp_file(shared_data, fam)), n_ctx=64, n_batch=16, n_threads=threads) as m:
        got = m.logits(ids)
    assert _rel(got, ref) < TOL


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("fam", FAMILIES)
def test_decode_matches_transformers(shared_data, fam, threads):
    """A short prompt, then one token per step well past gemma3's window."""
    ids, ref = reference(shared_data, fam)
    with edgerun.Model(str(llamacpp_file(shared_data, fam)), n_ctx=64, n_threads=threads) as m:
        with m.session() as s:
            first = 5
            rows = [s.decode(ids[:first])]
            rows += [s.decode([t]) for t in ids[first:]]
    got = np.stack(rows)
    assert _rel(got, ref[first - 1:]) < TOL


def _tables(path):
    """Every kernel table this build and CPU run (generic, avx2, avx512vnni, ...)."""
    from edgerun import errors
    out = []
    for isa in ("generic", "avx2", "avx512vnni", "neon", "neon-dotprod", "neon-i8mm", "sve"):
        try:
            with edgerun.Model(str(path), n_ctx=16, isa=isa):
                out.append(isa)
        except errors.UnsupportedError:
            pass
    return out


@pytest.mark.parametrize("fam", FAMILIES)
def test_greedy_tokens_equal_across_tables(shared_data, fam):
    path = llamacpp_file(shared_data, fam)
    ids, _ = reference(shared_data, fam)
    got = {}
    tables = _tables(path)
    assert "generic" in tables and len(tables) >= 1
    for isa in tables:
        with edgerun.Model(str(path), n_ctx=64, isa=isa, n_threads=2) as m:
            got[isa] = m.generate(ids[:6], max_tokens=40, stop_at_eos=False)
    assert len(set(map(tuple, got.values()))) == 1, got
    assert len(got["generic"]) == 40


def test_llama3_rope_scaling_is_applied(shared_data):
    """Without rope_freqs.weight the same file differs from transformers by
    ~1e-3: the test above would catch it being ignored."""
    ids, ref = reference(shared_data, "llama3-rope-scaling")
    with edgerun.Model(str(llamacpp_file(shared_data, "llama3-rope-scaling")), n_ctx=64) as m:
        assert _hp(m).rope_freq_factors == 1
        assert _rel(m.logits(ids), ref) < TOL


def test_hparams_describe_the_family(shared_data):
    with edgerun.Model(str(llamacpp_file(shared_data, "gemma3")), n_ctx=64) as m:
        hp = _hp(m)
        assert m.hparams["arch"] == "gemma3"
        assert hp.sliding_window == 16 and hp.rope_freq_base_swa == 10000.0 and hp.rope_freq_base == 1e6
        assert hp.final_logit_softcap == 0.0 and hp.rope_scale == 1.0
    with edgerun.Model(str(llamacpp_file(shared_data, "phi3")), n_ctx=64) as m:
        assert _hp(m).n_rot == 12 and m.hparams["head_dim"] == 24


@pytest.mark.parametrize("fam", ["gemma3", "lfm2"])
def test_snapshot_restores_window_and_conv_state(shared_data, tmp_path, fam):
    """Saved mid-sequence (past gemma3's window; lfm2's convolution ring
    holding the last positions) and loaded into a fresh session, decoding
    continues exactly as in the session that never stopped."""
    ids, ref = reference(shared_data, fam)
    with edgerun.Model(str(llamacpp_file(shared_data, fam)), n_ctx=64, n_sessions=2) as m:
        with m.session() as a:
            a.decode(ids[:23])
            a.save(tmp_path / "snap.bin")
            straight = [a.decode([t]) for t in ids[23:30]]
        with m.session() as b:
            b.decode(ids[:7])          # other state first: the load must replace it all
            b.load(tmp_path / "snap.bin")
            resumed = [b.decode([t]) for t in ids[23:30]]
    for x, y in zip(straight, resumed):
        np.testing.assert_array_equal(x, y)
    assert _rel(np.stack(resumed), ref[23:30]) < TOL


@pytest.mark.parametrize("fam", ["gemma3", "lfm2"])
def test_reset_forgets_state(shared_data, fam):
    """After reset, a session computes what a fresh one does (lfm2's ring
    still holds the old positions: they must not be read)."""
    ids, _ = reference(shared_data, fam)
    with edgerun.Model(str(llamacpp_file(shared_data, fam)), n_ctx=64) as m:
        with m.session() as s:
            s.decode(ids[:30])
            s.reset()
            again = s.decode(ids[30:36])
        with m.session() as s:
            fresh = s.decode(ids[30:36])
    np.testing.assert_array_equal(again, fresh)


# ---------------------------------------------------------------- sliding-window rings

N_LONG = 120


def _long_reference(shared_data):
    """gemma3 over 120 tokens: its window of 16 passed seven times."""
    if "gemma3-long" not in _REF:
        torch = pytest.importorskip("torch")
        transformers = pytest.importorskip("transformers")
        hf = transformers.AutoModelForCausalLM.from_pretrained(family_dir(shared_data, "gemma3") / "hf",
                                                               dtype=torch.float32)
        hf.eval()
        _file_norms_into(hf, llamacpp_file(shared_data, "gemma3"))
        ids = [int(i) for i in np.random.RandomState(11).randint(3, hf.config.vocab_size, N_LONG)]
        with torch.no_grad():
            _REF["gemma3-long"] = (ids, hf(torch.tensor([ids])).logits[0].numpy())
    return _REF["gemma3-long"]


def _kv_bytes(m, name):
    return next(s["bytes"] for s in m.plan()["sections"] if s["name"] == name)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("n_batch", [8, 16])
def test_window_ring_past_the_window(shared_data, n_batch, threads):
    """Local layers keep a ring of window + n_batch - 1 positions (written
    twice), not n_ctx: prefill in chunks and decode far past the window
    still match transformers."""
    ids, ref = _long_reference(shared_data)
    path = llamacpp_file(shared_data, "gemma3")
    with edgerun.Model(str(path), n_ctx=256, n_batch=n_batch, n_threads=threads) as m:
        hp = _hp(m)
        ring = 2 * (hp.sliding_window + n_batch - 1)
        # six local layers in rings (their own section), the one global layer at n_ctx; K and V, f32
        row = hp.n_head_kv * hp.head_dim * 4
        assert _kv_bytes(m, "kv_window") == 2 * 6 * ring * row
        assert _kv_bytes(m, "kv_cache") == 2 * 1 * 256 * row
        assert _rel(m.logits(ids), ref) < TOL
        with m.session() as s:
            rows = [s.decode(ids[:37])] + [s.decode([t]) for t in ids[37:]]
    assert _rel(np.stack(rows), ref[36:]) < TOL


def test_window_ring_snapshot_across_batch_sizes(shared_data, tmp_path):
    """A snapshot holds a ring's last window of positions in order, so a model
    opened with another n_batch (another ring size) loads it and goes on."""
    ids, ref = _long_reference(shared_data)
    path = llamacpp_file(shared_data, "gemma3")
    with edgerun.Model(str(path), n_ctx=256, n_batch=8) as m, m.session() as s:
        s.decode(ids[:50])
        for t in ids[50:77]:
            s.decode([t])
        s.save(tmp_path / "ring.snap")
    with edgerun.Model(str(path), n_ctx=200, n_batch=16) as m, m.session() as s:
        s.load(tmp_path / "ring.snap")
        rows = [s.decode([t]) for t in ids[77:]]
    assert _rel(np.stack(rows), ref[77:]) < TOL


def test_phi3_sliding_window_when_set(shared_data, tmp_path):
    """phi3.attention.sliding_window > 0 puts every layer in a window (ring);
    transformers with the same sliding_window is the reference."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from family_files import rewrite
    import gguf
    d = family_dir(shared_data, "phi3")
    hf = transformers.AutoModelForCausalLM.from_pretrained(d / "hf", dtype=torch.float32, sliding_window=8)
    hf.eval()
    ids = [int(i) for i in np.random.RandomState(5).randint(3, hf.config.vocab_size, 48)]
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0].numpy()
    path = rewrite(llamacpp_file(shared_data, "phi3"), tmp_path / "swa.gguf",
                   set_keys={"phi3.attention.sliding_window": (gguf.GGUFValueType.UINT32, 8)})
    for threads in (1, 2):
        with edgerun.Model(str(path), n_ctx=128, n_batch=8, n_threads=threads) as m:
            assert _hp(m).sliding_window == 8
            assert _rel(m.logits(ids), ref) < TOL
            with m.session() as s:
                rows = [s.decode(ids[:3])] + [s.decode([t]) for t in ids[3:]]
            assert _rel(np.stack(rows), ref[2:]) < TOL
    # and the window matters: without it the logits past position 8 differ
    with edgerun.Model(str(llamacpp_file(shared_data, "phi3")), n_ctx=128) as m:
        assert _rel(m.logits(ids), ref) > 100 * TOL


@pytest.mark.parametrize("n_ctx,n_tokens", [(32, 24), (64, 48)], ids=["short", "long"])
def test_phi3_longrope(shared_data, tmp_path, n_ctx, n_tokens):
    """LongRoPE (Phi-3.5, Phi-4-mini) planted as llama.cpp's converter writes
    it: rope_factors_short/long, the original context and the attention
    factor. The long set applies when n_ctx exceeds the original context
    (32 here), as in llama.cpp; transformers takes it for a sequence longer
    than that, so each case keeps to one side."""
    import math
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import gguf
    from family_files import rewrite
    rng = np.random.RandomState(3)
    short = [float(x) for x in rng.uniform(1.0, 1.5, 6)]
    long = [float(x) for x in rng.uniform(2.0, 8.0, 6)]
    d = family_dir(shared_data, "phi3")
    cfg = transformers.AutoConfig.from_pretrained(d / "hf")
    rp = dict(cfg.rope_parameters, rope_type="longrope", short_factor=short, long_factor=long,
              original_max_position_embeddings=32)
    # (Phi3's config keeps a top-level original_max_position_embeddings that
    # overrides the rope parameters' own, so both are set)
    hf = transformers.AutoModelForCausalLM.from_pretrained(d / "hf", dtype=torch.float32, rope_parameters=rp,
                                                           original_max_position_embeddings=32)
    hf.eval()
    attn = math.sqrt(1 + math.log(cfg.max_position_embeddings / 32) / math.log(32))
    assert abs(hf.model.rotary_emb.attention_scaling - attn) < 1e-6
    ids = [int(i) for i in rng.randint(3, cfg.vocab_size, n_tokens)]
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0].numpy()
    vt = gguf.GGUFValueType
    path = rewrite(llamacpp_file(shared_data, "phi3"), tmp_path / "longrope.gguf",
                   set_keys={"phi3.rope.scaling.original_context_length": (vt.UINT32, 32),
                             "phi3.rope.scaling.attn_factor": (vt.FLOAT32, attn)},
                   add_tensors={"rope_factors_short.weight": np.array(short, np.float32),
                                "rope_factors_long.weight": np.array(long, np.float32)})
    with edgerun.Model(str(path), n_ctx=n_ctx, n_batch=16) as m:
        assert _hp(m).rope_longrope == (2 if n_ctx > 32 else 1)
        assert _rel(m.logits(ids), ref) < TOL
        with m.session() as s:
            rows = [s.decode(ids[:4])] + [s.decode([t]) for t in ids[4:]]
    assert _rel(np.stack(rows), ref[3:]) < TOL


def _write_phi3(hf, path, window):
    """A Phi3ForCausalLM written as llama.cpp's converter lays it out (its
    fused qkv_proj and gate_up_proj are attn_qkv and ffn_up as they are;
    no tokenizer: these tests feed ids)."""
    import gguf
    c = hf.config
    hd = c.hidden_size // c.num_attention_heads
    w = gguf.GGUFWriter(str(path), "phi3")
    w.add_uint32("phi3.context_length", c.max_position_embeddings)
    w.add_uint32("phi3.embedding_length", c.hidden_size)
    w.add_uint32("phi3.feed_forward_length", c.intermediate_size)
    w.add_uint32("phi3.block_count", c.num_hidden_layers)
    w.add_uint32("phi3.attention.head_count", c.num_attention_heads)
    w.add_uint32("phi3.attention.head_count_kv", c.num_key_value_heads)
    w.add_float32("phi3.attention.layer_norm_rms_epsilon", c.rms_norm_eps)
    w.add_uint32("phi3.rope.dimension_count", int(hd * c.rope_parameters.get("partial_rotary_factor", 1.0)))
    w.add_float32("phi3.rope.freq_base", c.rope_parameters["rope_theta"])
    w.add_uint32("phi3.attention.sliding_window", window)
    sd = {k: v.detach().float().numpy() for k, v in hf.state_dict().items()}
    names = {"input_layernorm.weight": "attn_norm.weight", "self_attn.qkv_proj.weight": "attn_qkv.weight",
             "self_attn.o_proj.weight": "attn_output.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
             "mlp.gate_up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    for layer in range(c.num_hidden_layers):
        for hn, gn in names.items():
            w.add_tensor(f"blk.{layer}.{gn}", sd[f"model.layers.{layer}.{hn}"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    if not c.tie_word_embeddings:
        w.add_tensor("output.weight", sd["lm_head.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_window_ring_in_blocks_of_heads(tmp_path, threads):
    """8 K/V heads: at 2 threads a decode step takes ranges of 4 K/V heads and
    the cache is cut in blocks of them (model.h, er_kv_col), so the ring
    lives block by block. A seeded transformers Phi3 with a window of 8 (no
    shared data needed) is the reference, past the window, in prefill,
    decode and a snapshot round trip."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.Phi3Config(vocab_size=300, hidden_size=128, intermediate_size=192, num_hidden_layers=2,
                                  num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=256,
                                  sliding_window=8, tie_word_embeddings=False, pad_token_id=0, bos_token_id=1,
                                  eos_token_id=2)
    hf = transformers.Phi3ForCausalLM(cfg).eval()
    with torch.no_grad():
        for n, p in hf.named_parameters():
            p.add_(torch.randn_like(p) * (0.3 if "norm" in n else 0.02))
    path = _write_phi3(hf, tmp_path / "phi3-8kv.gguf", 8)
    ids = [int(i) for i in np.random.RandomState(1).randint(3, 300, 60)]
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0].numpy()
    with edgerun.Model(str(path), n_ctx=128, n_batch=8, n_threads=threads, n_sessions=2) as m:
        assert _rel(m.logits(ids), ref) < TOL
        with m.session() as s:
            rows = [s.decode(ids[:5])] + [s.decode([t]) for t in ids[5:40]]
            s.save(tmp_path / "s.snap")
        with m.session() as s:
            s.load(tmp_path / "s.snap")
            rows += [s.decode([t]) for t in ids[40:]]
    assert _rel(np.stack(rows), ref[4:]) < TOL


@pytest.mark.parametrize("what", ["softcap", "linear"])
def test_gemma3_softcap_and_global_linear_scaling(shared_data, tmp_path, what):
    """Keys real Gemma 3 files carry beyond the tiny one's: a final logit
    softcap, and (4B and up) linear RoPE scaling of the global layers only.
    Planted in llama.cpp's file; transformers with the same config is the
    reference."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import gguf
    from family_files import rewrite
    d = family_dir(shared_data, "gemma3")
    cfg = transformers.AutoConfig.from_pretrained(d / "hf")
    vt = gguf.GGUFValueType
    if what == "softcap":
        kw = {"final_logit_softcapping": 0.5}   # small against these logits (~0.5), so it bites
        keys = {"gemma3.final_logit_softcapping": (vt.FLOAT32, 0.5)}
    else:
        rp = {k: dict(v) for k, v in cfg.rope_parameters.items()}
        rp["full_attention"].update(rope_type="linear", factor=8.0)
        kw = {"rope_parameters": rp}
        keys = {"gemma3.rope.scaling.type": (vt.STRING, "linear"), "gemma3.rope.scaling.factor": (vt.FLOAT32, 8.0)}
    hf = transformers.AutoModelForCausalLM.from_pretrained(d / "hf", dtype=torch.float32, **kw)
    hf.eval()
    _file_norms_into(hf, llamacpp_file(shared_data, "gemma3"))
    ids, plain = reference(shared_data, "gemma3")
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0].numpy()
    assert _rel(ref, plain) > 100 * TOL            # the key changes the result
    path = rewrite(llamacpp_file(shared_data, "gemma3"), tmp_path / f"{what}.gguf", set_keys=keys)
    with edgerun.Model(str(path), n_ctx=64, n_batch=16) as m:
        assert _rel(m.logits(ids), ref) < TOL
