"""A context that slides instead of failing (er_options.ctx_strategy).

A session is fed to 5x n_ctx in prefill chunks and single decodes; the
runtime's history is checked after every step against a Python mirror of
the rule (keep the first ctx_keep tokens and the most recent half of the
rest), and:
- "slide_prefill": after each shift the logits equal a fresh session's
  prefilled with the kept tokens (at their new positions), within 1e-4 of
  the largest logit (F32 cache), on the embedded llama model and on every
  family in ../shared/data/models/families;
- "slide" (rows rotated in place): the same run with the same histories; the
  kept recent rows still carry what those tokens attended to before the
  shift, so the logits are compared with the re-prefilled run only loosely
  (same top token on most shifts), F32 and F16 caches;
- bad strategies and keeps are refused at open.
"""
import numpy as np
import pytest

import edgerun
from edgerun import errors

from family_files import FAMILIES, llamacpp_file

N_CTX, N_BATCH, KEEP = 64, 16, 5


def stream(n_vocab, n, seed=0):
    return [int(x) for x in np.random.RandomState(seed).randint(1, min(n_vocab, 3000), n)]


def mirror_slide(hist, keep):
    keep = min(keep, len(hist))
    rest = len(hist) - keep
    drop = rest - rest // 2
    return hist[:keep] + hist[keep + drop:]


def run(path, strategy, kv_type="f32", check_fresh=False, total=5 * N_CTX):
    """Feeds `total` tokens; returns [(history after the shift, logits)] per
    step whose decode shifted, and checks each against a fresh session when
    asked (returns the largest relative difference seen)."""
    worst = 0.0
    shifts = []
    with edgerun.Model(path, n_ctx=N_CTX, n_batch=N_BATCH, n_sessions=2, kv_type=kv_type,
                       ctx_strategy=strategy, ctx_keep=KEEP) as m:
        toks = stream(m.n_vocab, total)
        s = m.session()
        fresh = m.session()
        mirror = []
        i, step = 0, 0
        while i < total:
            # prefill chunks of 1 to 23 tokens: some cross n_batch, some the context end
            n = 1 if step % 3 else 1 + (step * 7) % 23
            n = min(n, total - i)
            chunk = toks[i:i + n]
            shifted = False
            # decode cuts the call in n_batch chunks, and in a full context slides first
            done = 0
            while done < n:
                if len(mirror) == N_CTX:   # it fills up, then slides
                    mirror = mirror_slide(mirror, KEEP)
                    shifted = True
                c = min(n - done, N_BATCH, N_CTX - len(mirror))
                mirror += chunk[done:done + c]
                done += c
            logits = s.decode(chunk)
            assert s.history() == mirror
            assert s.pos == len(mirror)
            if shifted:
                shifts.append((list(mirror), logits))
                if check_fresh:
                    fresh.reset()
                    ref = fresh.decode(mirror)
                    d = float(np.max(np.abs(logits - ref)) / np.max(np.abs(ref)))
                    worst = max(worst, d)
            i += n
            step += 1
    assert len(shifts) >= 8, "5x n_ctx should slide many times"
    return shifts, worst


def test_slide_prefill_equals_fresh_embedded():
    _, worst = run(edgerun.default_model_path(), "slide_prefill", check_fresh=True)
    assert worst <= 1e-4, worst


@pytest.mark.parametrize("fam", FAMILIES)
def test_slide_prefill_equals_fresh_families(shared_data, fam):
    p = llamacpp_file(shared_data, fam)
    if not p.is_file():
        pytest.skip(f"{p.name} is not in the shared data")
    _, worst = run(p, "slide_prefill", check_fresh=True)
    assert worst <= 1e-4, (fam, worst)


def snapshot_rows(path, kv_row, n_layer, n_vocab, kv_type):
    """(history, K [layer][pos][kv_row], V) of a snapshot (snapshot.c's
    layout: a 128-byte header, history, logits, per layer K then V rows)."""
    raw = open(path, "rb").read()
    pos = int(np.frombuffer(raw, np.int32, 1, 40)[0])
    dt = np.float32 if kv_type == "f32" else np.float16
    off = 128
    hist = np.frombuffer(raw, np.int32, pos, off).tolist()
    off += 4 * pos + 4 * n_vocab
    n = pos * kv_row
    if len(raw) - off != n_layer * 2 * n * np.dtype(dt).itemsize:
        return hist, None, None   # rings or a convolution state: not plain rows
    rows = np.frombuffer(raw, dt, 2 * n_layer * n, off).astype(np.float32).reshape(n_layer, 2, pos, kv_row)
    return hist, rows[:, 0], rows[:, 1]


def in_place_check(path, kv_type, tmp_path):
    """One shift from a full cache. The kept rows are where they belong:
    the first KEEP as they were; the recent ones moved down by `drop` with V
    unchanged and each K head's pair norms unchanged (a rotation); and in
    layer 0, whose rows depend only on the token and its position, K and V
    equal a fresh session's over the kept tokens."""
    with edgerun.Model(path, n_ctx=N_CTX, n_batch=N_BATCH, n_sessions=2, kv_type=kv_type,
                       ctx_strategy="slide", ctx_keep=KEEP) as m:
        hp = m.hparams
        kv_row = hp["n_head_kv"] * hp["head_dim"]
        toks = stream(m.n_vocab, N_CTX + 1)
        s = m.session()
        s.decode(toks[:N_CTX])
        s.save(tmp_path / "a.snap")
        s.decode(toks[N_CTX:])
        s.save(tmp_path / "b.snap")
        fresh = m.session()
        fresh.decode(s.history())
        fresh.save(tmp_path / "c.snap")
        args = (kv_row, hp["n_layer"], m.n_vocab, kv_type)
        ha, ka, va = snapshot_rows(tmp_path / "a.snap", *args)
        hb, kb, vb = snapshot_rows(tmp_path / "b.snap", *args)
        hc, kc, vc = snapshot_rows(tmp_path / "c.snap", *args)
    drop = (N_CTX - KEEP) - (N_CTX - KEEP) // 2
    n_new = N_CTX - drop
    assert hb == ha[:KEEP] + ha[KEEP + drop:] + toks[N_CTX:] == hc
    if kb is None:
        return False
    tol = 1e-4 if kv_type == "f32" else 2e-3
    scale = float(np.max(np.abs(ka)))
    np.testing.assert_array_equal(kb[:, :KEEP], ka[:, :KEEP])
    np.testing.assert_array_equal(vb[:, :KEEP], va[:, :KEEP])
    np.testing.assert_array_equal(vb[:, KEEP:n_new], va[:, KEEP + drop:])
    if hp["arch"] == "llama":  # adjacent pairs: (2i, 2i+1) keep their norm under RoPE
        a = ka[:, KEEP + drop:].reshape(hp["n_layer"], -1, kv_row // 2, 2)
        b = kb[:, KEEP:n_new].reshape(hp["n_layer"], -1, kv_row // 2, 2)
        np.testing.assert_allclose(np.hypot(b[..., 0], b[..., 1]), np.hypot(a[..., 0], a[..., 1]),
                                   atol=tol * scale)
    np.testing.assert_allclose(kb[0], kc[0], atol=tol * scale)
    np.testing.assert_allclose(vb[0], vc[0], atol=tol * float(np.max(np.abs(va))))
    return True


@pytest.mark.parametrize("kv_type", ["f32", "f16"])
def test_slide_in_place_rows(kv_type, tmp_path):
    assert in_place_check(edgerun.default_model_path(), kv_type, tmp_path)


@pytest.mark.parametrize("fam", FAMILIES)
def test_slide_in_place_rows_families(shared_data, fam, tmp_path):
    p = llamacpp_file(shared_data, fam)
    if not p.is_file():
        pytest.skip(f"{p.name} is not in the shared data")
    if not in_place_check(p, "f32", tmp_path):
        pytest.skip(f"{fam}'s cache has rings or a convolution state: it slides by prefilling again "
                    "(test_slide_prefill_equals_fresh_families)")


@pytest.mark.parametrize("kv_type", ["f32", "f16"])
def test_slide_in_place_runs_on(kv_type):
    path = edgerun.default_model_path()
    rot, _ = run(path, "slide", kv_type=kv_type)
    ref, _ = run(path, "slide_prefill", kv_type=kv_type)
    assert [h for h, _ in rot] == [h for h, _ in ref]
    assert all(np.isfinite(lg).all() for _, lg in rot)


@pytest.mark.parametrize("fam", FAMILIES)
def test_slide_in_place_families(shared_data, fam):
    p = llamacpp_file(shared_data, fam)
    if not p.is_file():
        pytest.skip(f"{p.name} is not in the shared data")
    run(p, "slide")


def test_fail_is_default_and_bad_options_refused():
    path = edgerun.default_model_path()
    with edgerun.Model(path, n_ctx=32) as m:
        s = m.session()
        s.decode(stream(m.n_vocab, 30))
        with pytest.raises(errors.ContextFullError):
            s.decode(stream(m.n_vocab, 3, seed=1))
        assert s.pos == 30
    with pytest.raises(errors.InvalidArgumentError):
        edgerun.Model(path, n_ctx=32, ctx_strategy="slide", ctx_keep=31)
    with pytest.raises(errors.InvalidArgumentError):
        edgerun.Model(path, n_ctx=32, ctx_strategy="sideways")


# ---------------------------------------------------------------- edgerun.yaml and the CLI

def test_device_config_kv_cache(tmp_path):
    from edgerun.ota import device_config as dc
    hc = {"prompt": "1+1=", "expect": "2"}
    cfg = dc.validate({"model": {"path": str(edgerun.default_model_path()), "n_ctx": 32},
                       "kv_cache": {"strategy": "sliding_window", "keep": 4}, "health_check": hc})
    assert cfg.model_kwargs()["ctx_strategy"] == "slide" and cfg.model_kwargs()["ctx_keep"] == 4
    assert dc.validate({"model": {"path": "m.gguf"}, "health_check": hc}).model_kwargs()["ctx_strategy"] == "fail"
    for bad, field in (({"strategy": "ring"}, "kv_cache.strategy"), ({"keep": -1}, "kv_cache.keep"),
                       ({"keep": "4"}, "kv_cache.keep"), ({"strategy": "sliding_window", "keep": 31}, "kv_cache.keep"),
                       ({"window": 3}, "kv_cache.window")):
        with pytest.raises(errors.ConfigError) as e:
            dc.validate({"model": {"path": "m.gguf", "n_ctx": 32}, "kv_cache": bad, "health_check": hc})
        assert field in str(e.value)
    with dc.open_model(cfg) as m:
        s = m.session()
        s.decode(stream(m.n_vocab, 40))   # past n_ctx 32: slid, not failed
        assert s.pos < 32 and s.history()[:4] == stream(m.n_vocab, 40)[:4]


def test_cli_options_reach_the_model():
    import argparse
    from edgerun.cli.options import add_model_options, model_kwargs
    p = argparse.ArgumentParser()
    add_model_options(p)
    kw = model_kwargs(p.parse_args(["--ctx", "32", "--ctx-strategy", "slide", "--keep", "3"]))
    assert kw["ctx_strategy"] == "slide" and kw["ctx_keep"] == 3
    assert "ctx_strategy" not in model_kwargs(p.parse_args([]))
