"""er_decode_batch (Model.decode_batch): one forward step for several sessions
gives each session the logits er_decode gives it alone, bit for bit.

Each case runs a schedule of steps over 1, 2, 4 or 8 slots that join at
different steps: a slot first prefills its prompt in chunks, then decodes one
token a step, so a step mixes prompt chunks and single tokens at different
positions. Every slot's chunks are decoded again alone, on a second session of
the same model, and the two logits must be the same floats. Every kernel table
this CPU runs, at 1 and 2 threads; llama (the embedded model, a tiny
converted one in F32/Q8_0/Q4_0, one with K/V head ranges in decode), and the
per-layer families gemma3 (sliding-window rings) and lfm2 (convolution state)."""
import numpy as np
import pytest

import edgerun
from edgerun import errors

from family_files import llamacpp_file

EMBEDDED = "models/edgerun-add.gguf"
ISAS = ("generic", "avx2", "avx512vnni")


def _isas(path):
    ok = []
    for isa in ISAS:
        try:
            edgerun.Model(path, isa=isa).close()
            ok.append(isa)
        except errors.EdgerunError:
            pass
    assert "generic" in ok
    return ok


def _schedule(n_slots, n_vocab, chunk, steps, seed):
    """[[(slot, ids)]] per step: slot i joins at step i with a prompt of its own
    length, prefilled `chunk` tokens a step, then one token a step."""
    rng = np.random.default_rng(seed)
    prompts = [list(rng.integers(0, n_vocab, size=int(rng.integers(1, 3 * chunk)))) for _ in range(n_slots)]
    out = []
    for step in range(steps):
        work = []
        for i in range(n_slots):
            if step < i:
                continue
            if prompts[i]:
                ids, prompts[i] = prompts[i][:chunk], prompts[i][chunk:]
            else:
                ids = [int(rng.integers(0, n_vocab))]
            work.append((i, ids))
        out.append(work)
    return out


def _check(path, n_slots, isa, threads, chunk=5, steps=9, seed=0, kv_type="f32"):
    n_batch = chunk * n_slots
    with edgerun.Model(path, n_ctx=128, n_batch=n_batch, n_threads=threads, n_sessions=2 * n_slots, isa=isa,
                       kv_type=kv_type) as m:
        batched = [m.session() for _ in range(n_slots)]
        alone = [m.session() for _ in range(n_slots)]
        for k, work in enumerate(_schedule(n_slots, m.n_vocab, chunk, steps, seed + n_slots)):
            got = m.decode_batch([(batched[i], ids) for i, ids in work])
            for (i, ids), g in zip(work, got):
                want = alone[i].decode(ids)
                assert batched[i].pos == alone[i].pos
                bad = np.flatnonzero(g.view(np.uint32) != want.view(np.uint32))
                assert bad.size == 0, (f"{path.name if hasattr(path, 'name') else path} {isa} t{threads} "
                                       f"{n_slots} slots, step {k} slot {i} ({len(ids)} ids at pos "
                                       f"{alone[i].pos - len(ids)}): {bad.size} logits differ, first "
                                       f"{g[bad[0]]} != {want[bad[0]]}")


@pytest.mark.parametrize("n_slots", [1, 2, 4, 8])
def test_embedded_every_table(repo_root, n_slots):
    path = repo_root / EMBEDDED
    for isa in _isas(path):
        for threads in (1, 2):
            _check(path, n_slots, isa, threads)


@pytest.mark.parametrize("variant,qtype", [("llama_untied_theta5e5", "f32"), ("llama_tied", "q8_0"),
                                           ("llama_tied", "q4_0"), ("qwen2_8kv", "f32"), ("qwen2_8kv", "q4_0")])
def test_tiny_converted(tiny, variant, qtype):
    path = tiny.gguf(variant, qtype)
    for isa in _isas(path):
        for threads in (1, 2):
            for n_slots in (1, 2, 4, 8):
                _check(path, n_slots, isa, threads, steps=7)


def test_kquant(kmodel, tmp_path):
    from edgerun.convert import convert
    path = tmp_path / "k.gguf"
    convert(kmodel[0], path, "q4_k_m", quiet=True)
    for isa in _isas(path):
        for threads in (1, 2):
            _check(path, 4, isa, threads, steps=6)


@pytest.mark.parametrize("fam", ["gemma3", "lfm2"])
def test_families(shared_data, fam):
    path = llamacpp_file(shared_data, fam)
    for isa in _isas(path):
        for threads in (1, 2):
            for n_slots in (1, 2, 4, 8):
                # past gemma3's window on every slot: rings that wrap
                _check(path, n_slots, isa, threads, chunk=4, steps=8 if n_slots < 8 else 6)


def test_f16_cache(repo_root):
    _check(repo_root / EMBEDDED, 4, None, 2, kv_type="f16")


def test_bad_arguments(repo_root):
    with edgerun.Model(repo_root / EMBEDDED, n_ctx=32, n_batch=8, n_sessions=3) as m, edgerun.Model(repo_root / EMBEDDED) as o:
        a, b = m.session(), m.session()
        other = o.session()
        with pytest.raises(errors.InvalidArgumentError, match="same"):
            m.decode_batch([(a, [1]), (a, [2])])
        with pytest.raises(errors.InvalidArgumentError):
            m.decode_batch([(a, [1]), (other, [2])])
        with pytest.raises(errors.InvalidArgumentError):
            m.decode_batch([(a, [1]), (b, [m.n_vocab])])
        with pytest.raises(errors.EdgerunError, match="n_batch"):
            m.decode_batch([(a, [1] * 5), (b, [2] * 4)])
        with pytest.raises(errors.InvalidArgumentError):
            m.decode_batch([])
        assert a.pos == 0 and b.pos == 0              # a refused step appends nothing
        a.decode([1] * (a.n_ctx - 1))
        with pytest.raises(errors.ContextFullError):
            m.decode_batch([(b, [1]), (a, [1, 2])])
        assert b.pos == 0 and a.pos == a.n_ctx - 1
        got = m.decode_batch([(b, [1, 2, 3]), (a, [4])])
        assert a.pos == a.n_ctx and b.pos == 3 and len(got) == 2
