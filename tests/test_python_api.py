"""The Python API: plan and arena, sessions, sampling, streaming, stop conditions, errors."""
import numpy as np
import pytest

import edgerun
from edgerun import errors


@pytest.fixture(scope="module")
def path(tiny):
    return tiny.gguf("llama_untied_theta5e5", "f32")


@pytest.fixture(scope="module")
def model(path):
    with edgerun.Model(path, n_ctx=96) as m:
        yield m


def ids_prompt(n=8, seed=0, n_vocab=300):
    return [int(x) for x in np.random.RandomState(seed).randint(1, n_vocab, n)]


# ---------------------------------------------------------------- versions, facts

def test_version_matches_library():
    from edgerun._ffi import ffi, lib
    assert edgerun.__version__ == ffi.string(lib.er_version()).decode()


def test_facts(model, tiny):
    _, hf, n_vocab = tiny.hf("llama_untied_theta5e5")
    hp = model.hparams
    assert hp["arch"] == "llama" and hp["n_vocab"] == n_vocab and hp["n_layer"] == 2
    assert hp["n_head"] == 4 and hp["n_head_kv"] == 2 and hp["head_dim"] == 16
    assert hp["rope_freq_base"] == pytest.approx(500000.0) and not hp["tied_output"]
    names = {t["name"]: t for t in model.tensors()}
    assert names["blk.0.attn_k.weight"]["shape"] == [64, 32]
    assert names["blk.0.attn_k.weight"]["type"] == "F32"
    assert sum(t["nbytes"] for t in names.values()) == hp["weight_bytes"]
    assert isinstance(model.isa, str) and model.isa and model.isa_reason


# ---------------------------------------------------------------- plan and arena

def test_plan_without_allocation_matches_model(path):
    p = edgerun.plan(path, n_ctx=80, n_threads=2, n_batch=16)
    with edgerun.Model(path, n_ctx=80, n_threads=2, n_batch=16) as m:
        q = m.plan()
    assert p["total_bytes"] == q["total_bytes"]
    assert [(s["name"], s["bytes"]) for s in p["sections"]] == [(s["name"], s["bytes"]) for s in q["sections"]]
    assert all(s["used"] == 0 for s in p["sections"])
    assert sum(s["bytes"] for s in p["sections"]) <= p["total_bytes"]
    assert p["n_ctx"] == 80 and p["n_batch"] == 16 and p["n_threads"] == 2


def test_plan_grows_with_context(path):
    small, big = edgerun.plan(path, n_ctx=32), edgerun.plan(path, n_ctx=96)
    kv = lambda p: next(s["bytes"] for s in p["sections"] if s["name"].startswith("kv"))   # noqa: E731
    assert 2.5 * kv(small) < kv(big) <= 3 * kv(small) + 4096
    assert big["total_bytes"] > small["total_bytes"]


def test_caller_arena_exact_size_works(path):
    need = edgerun.plan(path, n_ctx=32)["total_bytes"]
    buf = edgerun.aligned_buffer(need)
    with edgerun.Model(path, n_ctx=32, arena=buf) as m:
        out = m.generate(ids_prompt(), max_tokens=8, stop_at_eos=False)
        assert len(out) == 8
        used = m.plan()
    assert buf.any()    # the runtime really worked in our buffer
    assert all(s["used"] <= s["bytes"] for s in used["sections"])
    with edgerun.Model(path, n_ctx=32) as m:
        assert m.generate(ids_prompt(), max_tokens=8, stop_at_eos=False) == out


def test_caller_arena_too_small_states_shortfall(path):
    need = edgerun.plan(path, n_ctx=32)["total_bytes"]
    with pytest.raises(errors.ArenaTooSmallError) as ei:
        edgerun.Model(path, n_ctx=32, arena=edgerun.aligned_buffer(need - 1))
    assert str(need) in str(ei.value) and str(need - 1) in str(ei.value)
    with pytest.raises(errors.ArenaTooSmallError, match=r"\b4096\b"):
        edgerun.Model(path, n_ctx=32, arena=edgerun.aligned_buffer(need - 4096))


def test_caller_arena_must_be_aligned_and_writable(path):
    need = edgerun.plan(path, n_ctx=32)["total_bytes"]
    raw = edgerun.aligned_buffer(need + 64)
    with pytest.raises(errors.InvalidArgumentError, match="aligned"):
        edgerun.Model(path, n_ctx=32, arena=raw[1:need + 1])
    with pytest.raises(errors.InvalidArgumentError, match="writable"):
        edgerun.Model(path, n_ctx=32, arena=bytes(need))


def test_stats_report_arena_and_timings(model):
    out = model.generate(ids_prompt(12), max_tokens=10, stop_at_eos=False)
    st = model.stats()
    assert st["n_prompt"] == 12 and st["n_generated"] == len(out) == 10
    assert st["stopped"] == "max_tokens"
    assert st["ttft_ms"] > 0 and st["prefill_tokens_per_s"] > 0 and st["decode_tokens_per_s"] > 0
    plan = model.plan()
    assert st["arena_total"] == plan["total_bytes"]
    assert set(st["arena"]) == {s["name"] for s in plan["sections"]}
    assert any(v["used"] > 0 for v in st["arena"].values())


# ---------------------------------------------------------------- sampling

def test_same_seed_same_tokens(model):
    kw = dict(max_tokens=24, temperature=1.0, stop_at_eos=False)
    a = model.generate(ids_prompt(), seed=7, **kw)
    b = model.generate(ids_prompt(), seed=7, **kw)
    c = model.generate(ids_prompt(), seed=8, **kw)
    assert a == b
    assert a != c


def test_greedy_is_argmax_of_logits(model):
    prompt = ids_prompt(6, seed=3)
    out = model.generate(prompt, max_tokens=6, stop_at_eos=False)
    lg = model.logits(prompt + out)
    assert out == [int(x) for x in lg[len(prompt) - 1:-1].argmax(axis=1)]


@pytest.mark.parametrize("kw", [dict(top_k=1), dict(top_p=1e-6), dict(min_p=1.0)])
def test_filters_that_keep_one_token_are_greedy(model, kw):
    prompt = ids_prompt(seed=4)
    greedy = model.generate(prompt, max_tokens=12, stop_at_eos=False)
    assert model.generate(prompt, max_tokens=12, temperature=1.5, seed=1, stop_at_eos=False, **kw) == greedy


def test_top_k_only_picks_from_the_k_best(model):
    prompt = ids_prompt(seed=5)
    out = model.generate(prompt, max_tokens=16, temperature=2.0, top_k=3, seed=11, stop_at_eos=False)
    lg = model.logits(prompt + out)
    for i, t in enumerate(out):
        row = lg[len(prompt) - 1 + i]
        assert (row > row[t]).sum() < 3, f"token {i} was not among the top 3"


def test_high_temperature_spreads_choices(model):
    prompt = ids_prompt(seed=6)
    firsts = {model.generate(prompt, max_tokens=1, temperature=5.0, seed=s, stop_at_eos=False)[0]
              for s in range(12)}
    assert len(firsts) > 1


def test_repeat_penalty_blocks_repeats(model):
    prompt = ids_prompt(4, seed=7)
    out = model.generate(prompt, max_tokens=24, repeat_penalty=1e6, stop_at_eos=False)
    seen = prompt + out
    assert len(set(seen)) == len(seen), "a penalised token came back"


# ---------------------------------------------------------------- streaming, text, stops

def test_stream_equals_non_stream_ids(model):
    prompt = ids_prompt(seed=8)
    kw = dict(max_tokens=16, temperature=0.9, seed=3, stop_at_eos=False)
    streamed = list(model.generate(prompt, stream=True, **kw))
    assert all(isinstance(t, int) for t in streamed)
    assert streamed == model.generate(prompt, **kw)


def test_text_prompt_and_stream_equality(model):
    text = model.generate("the cat sat on", max_tokens=20, stop_at_eos=False)
    assert isinstance(text, str)
    pieces = list(model.generate("the cat sat on", max_tokens=20, stop=None, stream=True, stop_at_eos=False))
    assert all(isinstance(p, str) for p in pieces)
    assert "".join(pieces) == text
    assert model.stats()["n_generated"] == 20


def test_stop_string_cuts_output(model):
    full = model.generate("hello world", max_tokens=24, stop_at_eos=False)
    assert len(full) >= 6
    stop = full[3:6]
    k = full.find(stop)
    cut = model.generate("hello world", max_tokens=24, stop=[stop], stop_at_eos=False)
    assert cut == full[:k]
    assert model.stats()["stopped"] == "stop"
    assert "".join(model.generate("hello world", max_tokens=24, stop=[stop], stream=True,
                                  stop_at_eos=False)) == full[:k]


def test_eos_stops_generation(model):
    from edgerun._ffi import lib
    eos = lib.er_vocab_eos(model._vocab)
    assert eos >= 0
    prompt = ids_prompt(seed=9)
    # force an EOS soon: the penalty pushes the usual picks down, so search seeds
    # for a sampled run that meets EOS, then check stop_at_eos cuts exactly there
    for seed in range(40):
        out = model.generate(prompt, max_tokens=48, temperature=3.0, seed=seed, stop_at_eos=False)
        if eos in out:
            break
    else:
        pytest.skip("no sampled run of the random model reached EOS")
    short = model.generate(prompt, max_tokens=48, temperature=3.0, seed=seed)
    assert short == out[:out.index(eos)]
    assert model.stats()["stopped"] == "eos"


# ---------------------------------------------------------------- context

def test_prompt_longer_than_context_raises(path):
    with edgerun.Model(path, n_ctx=32) as m:
        with pytest.raises(errors.ContextFullError, match="32"):
            m.generate(ids_prompt(40), max_tokens=4)
        with pytest.raises(errors.ContextFullError):
            m.logits(ids_prompt(33))


def test_generation_stops_at_context_end(path):
    with edgerun.Model(path, n_ctx=32) as m:
        out = m.generate(ids_prompt(20), max_tokens=50, stop_at_eos=False)
        st = m.stats()
    # positions 20..31 take 12 decoded tokens; the 13th is sampled from the last logits
    assert len(out) == 32 - 20 + 1
    assert st["stopped"] == "context"


def test_logits_are_causal_and_session_fresh(model):
    prompt = ids_prompt(20, seed=10)
    full = model.logits(prompt)
    np.testing.assert_allclose(model.logits(prompt[:7]), full[:7], rtol=0, atol=1e-5 * np.abs(full).max())
    # a generate in between must not leak state into the next call
    model.generate(prompt[:5], max_tokens=5)
    np.testing.assert_array_equal(model.logits(prompt), full)


# ---------------------------------------------------------------- sessions and lifetime

def test_sessions_are_limited_and_returned(path):
    with edgerun.Model(path, n_ctx=32, n_sessions=1) as m:
        g = m.generate(ids_prompt(), max_tokens=8, stream=True, stop_at_eos=False)
        next(g)                                            # holds the only slot
        with pytest.raises(errors.BusyError):
            m.logits(ids_prompt())
        g.close()                                          # gives it back
        assert m.logits(ids_prompt()).shape[0] == 8
    with edgerun.Model(path, n_ctx=32, n_sessions=2) as m:
        g = m.generate(ids_prompt(), max_tokens=8, stream=True, stop_at_eos=False)
        next(g)
        assert m.logits(ids_prompt()).shape[0] == 8      # the second slot
        g.close()


def test_closed_model_raises(path):
    m = edgerun.Model(path, n_ctx=16)
    g = m.generate(ids_prompt(), max_tokens=4, stream=True, stop_at_eos=False)
    next(g)
    m.close()                                   # frees the streaming session too
    with pytest.raises(errors.StateError):
        m.logits([1, 2])
    g.close()
    m.close()                                   # idempotent


# ---------------------------------------------------------------- argument errors

def test_typed_errors_for_bad_arguments(model, path, tmp_path):
    with pytest.raises(errors.FileAccessError, match="no such model file"):
        edgerun.Model(tmp_path / "missing.gguf")
    with pytest.raises(errors.FileAccessError):
        edgerun.plan(tmp_path / "missing.gguf")
    with pytest.raises(errors.InvalidArgumentError, match="out of range"):
        model.logits([0, model.n_vocab])
    with pytest.raises(errors.InvalidArgumentError, match="empty"):
        model.generate([], max_tokens=3)
    with pytest.raises(errors.InvalidArgumentError, match="kv_type"):
        edgerun.Model(path, kv_type="q8")
    with pytest.raises(errors.InvalidArgumentError, match="n_ctx"):
        edgerun.Model(path, n_ctx=-5)
    with pytest.raises(errors.InvalidArgumentError, match="n_ctx"):
        edgerun.plan(path, n_ctx=1 << 30)
    with pytest.raises(errors.UnsupportedError):
        edgerun.Model(path, isa="no-such-isa")
    # every typed error is also an EdgerunError carrying the C status
    with pytest.raises(errors.EdgerunError) as ei:
        edgerun.plan(path, n_ctx=1 << 30)
    assert ei.value.status == -1 and ei.value.status_name == "ER_EINVAL"


def test_tokenizer_attached(model):
    tok = model.tokenizer
    assert tok is not None and isinstance(tok, edgerun.Tokenizer)
