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
against one thread's row walk.
"""
import numpy as np
import pytest


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


@pytest.mark.parametrize("qtype", ["f32", "q4_0"])
def test_long_decode_identical_for_every_thread_count(tiny, qtype):
    import edgerun
    path = tiny.gguf("llama_untied_theta5e5", qtype)
    ids = [int(v) for v in np.random.RandomState(11).randint(0, 200, 290)]
    got = {}
    for n in (1, 2, 3, 5):
        with edgerun.Model(path, n_ctx=320, n_threads=n) as m:
            with m.session() as s:
                s.decode(ids[:250])
                # positions 250-289: the split starts at 256 cached rows
                got[n] = np.stack([s.decode([tok]) for tok in ids[250:]])
    for n in (2, 3, 5):
        assert np.array_equal(got[n], got[1]), f"{qtype}: long-context decode logits differ at {n} threads"
