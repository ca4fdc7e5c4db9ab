"""Work split over threads changes who computes a row, never its value.

Matrix products cut their rows into chunks; each thread claims chunks from
its own contiguous range first and then from the others' (forward.c,
mm_worker). A row is computed by one kernel call whichever thread claims it,
so logits must be bit-identical for every thread count: 3 threads give ranges
of unequal length, and 5 threads on a smaller machine leave workers that
start late, whose ranges the others take over. A chunk computed twice or
skipped shows up here as a difference (a skipped row keeps stale values from
the previous step).

Attention claims (token block, K/V head) items, or single (token, head)
queries when that would leave threads idle; a decode step on one thread
(or with 4 or more K/V heads per thread) takes ranges of K/V heads instead.
These models have 2 K/V heads, so 1 to 3 threads run the prefill chunks
through attention_multi's blocked path (16 queries per K/V head). Decode at
1 thread reads both K/V heads row by row (attention_heads, the 2 query heads
of each group together); at 2 threads it takes attention_multi's few-query
path (the 2 heads of a group together), and 3 and 5 threads take one query
at a time. Equal logits across thread counts therefore also check that those
paths agree with the one-query kernel bit for bit.

From 256 cached positions a decode step with fewer than 4 K/V heads per
thread is split in two instead (model.h, er_att_split): ranges of K rows
scored by whichever thread takes them, then ranges of K/V heads for the
softmax and V sums. The second test decodes there, at 2, 3 and 5 threads,
against one thread's row walk. With fewer K/V heads than threads (its second
model: one K/V head of 4 query heads, as Gemma 3), the sums go in pieces of
a head's query heads instead: 2 and 2 at 2 and 3 threads, 1 each at 5.

The last tests' model has 8 K/V heads, so a decode step at 1 and 2 threads
takes K/V head ranges and runs them as one dispatch: each range's Q/K/V
rows, biases, RoPE, cache store and attention together (forward.c,
attention_block). 3 and 5 threads run the operations one after another. At
2 threads the cache is kept in two blocks of 4 heads (model.h, er_kv_col),
at the other counts as whole rows; a session snapshot is whole rows either
way, so one saved at 2 threads resumes at 1 and 3 and the other way round.
"""
import numpy as np
import pytest

from conftest import hf_logits, rel_err


@pytest.mark.parametrize("n_batch", [16, 32])
@pytest.mark.parametrize("qtype", ["f32", "q8_0", "q4_0"])
def test_logits_identical_for_every_thread_count(tiny, qtype, n_batch):
    import edgerun
    path = tiny.gguf("llama_untied_theta5e5", qtype)
    ids = [int(v) for v in np.random.RandomState(7).randint(0, 200, 40)]
    got = {}
    for n in (1, 2, 3, 5):
        # the 40 ids run as prefill chunks of 16, 16, 8 (n_batch 16) or 32, 8:
        # a chunk of 32 rows also spreads its row-wise work (norms, RoPE,
        # K/V stores, SiLU, quantization) over the threads (forward.c each_row)
        with edgerun.Model(path, n_ctx=64, n_threads=n, n_batch=n_batch) as m:
            prefill = m.logits(ids)
            with m.session() as s:
                s.decode(ids[:24])
                # decode: one token at a time after a 24-token prompt
                steps = [s.decode([tok]) for tok in ids[24:32]]
            got[n] = (prefill, np.stack(steps))
    for n in (2, 3, 5):
        assert np.array_equal(got[n][0], got[1][0]), f"{qtype}: prefill logits differ at {n} threads"
        assert np.array_equal(got[n][1], got[1][1]), f"{qtype}: decode logits differ at {n} threads"


def decode_logits(path, ids, n_prompt, n_ctx, n_threads):
    """Logits of decoding ids[n_prompt:] one token at a time after a prompt of
    ids[:n_prompt], at each thread count: {n_threads: array}."""
    import edgerun
    got = {}
    for n in n_threads:
        with edgerun.Model(path, n_ctx=n_ctx, n_threads=n) as m:
            with m.session() as s:
                s.decode(ids[:n_prompt])
                got[n] = np.stack([s.decode([tok]) for tok in ids[n_prompt:]])
    return got


@pytest.mark.parametrize("variant", ["llama_untied_theta5e5", "llama_1kv"])
@pytest.mark.parametrize("qtype", ["f32", "q4_0"])
def test_long_decode_identical_for_every_thread_count(tiny, qtype, variant):
    path = tiny.gguf(variant, qtype)
    ids = [int(v) for v in np.random.RandomState(11).randint(0, 200, 290)]
    # positions 250-289: the split starts at 256 cached rows
    got = decode_logits(path, ids, 250, 320, (1, 2, 3, 5))
    for n in (2, 3, 5):
        assert np.array_equal(got[n], got[1]), f"{variant} {qtype}: long-context decode logits differ at {n} threads"


@pytest.mark.parametrize("qtype", ["f32", "q8_0", "q4_0"])
def test_decode_block_by_head_ranges(tiny, qtype):
    path = tiny.gguf("qwen2_8kv", qtype)
    _, model, n_vocab = tiny.hf("qwen2_8kv")
    ids = [int(v) for v in np.random.RandomState(5).randint(0, n_vocab, 40)]
    got = decode_logits(path, ids, 24, 64, (1, 2, 3, 5))
    for n in (2, 3, 5):
        assert np.array_equal(got[n], got[1]), f"{qtype}: decode logits differ at {n} threads"
    if qtype == "f32":
        # and the block is the model: every decoded position against transformers
        err = rel_err(got[2], hf_logits(model, ids)[24:])
        assert err <= 1e-4, err


def test_snapshot_moves_between_cache_layouts(tiny, tmp_path):
    import edgerun
    path = tiny.gguf("qwen2_8kv", "q8_0")
    _, _, n_vocab = tiny.hf("qwen2_8kv")
    ids = [int(v) for v in np.random.RandomState(9).randint(0, n_vocab, 30)]
    want = {}
    for n in (1, 2, 3):
        with edgerun.Model(path, n_ctx=64, n_threads=n) as m:
            with m.session() as s:
                s.decode(ids[:20])
                s.save(tmp_path / f"t{n}.snap")
                want[n] = np.stack([s.decode([tok]) for tok in ids[20:]])
    for n in (1, 2, 3):
        with edgerun.Model(path, n_ctx=64, n_threads=n) as m:
            for saved in (1, 2, 3):
                with m.session() as s:
                    s.load(tmp_path / f"t{saved}.snap")
                    got = np.stack([s.decode([tok]) for tok in ids[20:]])
                assert np.array_equal(got, want[n]), f"saved at {saved} threads, resumed at {n}"
