"""Soak through the Python API: generate requests back to back on the embedded
model, as a service would, and watch resident memory.

Requests mix what the package does on a request path: text in and out
(tokenizer, streaming detokenizer), greedy and seeded sampling, streaming with
a stop string, id prompts, sessions with a snapshot save and load. After a
warm-up (a tenth of the run, at least 100), RSS may grow by at most 1 MiB.
Greedy answers must not change over the run.

The short run (500 requests, a few seconds) is part of `make test`; the full
one (10,000) is `make soak` (-m long). The C side's leaks are LeakSanitizer's
job: runtime_c/tests/test_soak.c under ASan (`make soak`, `make test-asan`).
"""
import gc
import os
import sys

import pytest

import edgerun

RSS_SLACK = 1 << 20
PROMPTS = [f"{(k * 613) % 10000:04d}+{(k * 281) % 10000:04d}=" for k in range(16)]


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def one_request(m, i, snap):
    p = PROMPTS[i % len(PROMPTS)]
    kind = i % 5
    if kind == 0:
        return "greedy", p, m.generate(p, max_tokens=8)
    if kind == 1:
        return "sampled", p, m.generate(p, max_tokens=8, temperature=0.8, top_k=8, seed=i)
    if kind == 2:
        return "stream", p, "".join(m.generate(p, max_tokens=8, stream=True, stop=["9"]))
    if kind == 3:
        ids = m.tokenizer.encode(p)
        return "ids", p, m.generate(ids, max_tokens=8)
    with m.session() as s:
        out = s.generate(p, max_tokens=4)
        if i % 50 == 4:
            s.save(snap)
            s.load(snap)
        return "session", p, out + s.generate("", max_tokens=4)


def soak(n, tmp_path):
    if not os.path.exists("/proc/self/statm"):
        pytest.skip("RSS is read from /proc (Linux)")
    snap = tmp_path / "soak.snap"
    warm = max(100, n // 10)
    answers, wrong = {}, []
    with edgerun.Model(n_threads=2) as m:
        for i in range(n):
            kind, p, out = one_request(m, i, snap)
            if kind in ("greedy", "ids", "session"):
                key = (kind, p)
                if answers.setdefault(key, out) != out:
                    wrong.append((i, key, out, answers[key]))
            if i + 1 == warm:
                gc.collect()
                before = rss_bytes()
        gc.collect()
        after = rss_bytes()
    growth = after - before
    print(f"soak: {n} requests; RSS {before >> 10} KiB after {warm} warm-up requests, "
          f"{after >> 10} KiB at the end ({growth / 1024:+.0f} KiB)", file=sys.stderr)
    assert not wrong, wrong[:3]
    # the greedy answer is also right: the model adds (digits reversed)
    a, b = PROMPTS[0][:4], PROMPTS[0][5:9]
    assert answers[("greedy", PROMPTS[0])] == str(int(a) + int(b)).zfill(5)[::-1]
    assert growth <= RSS_SLACK, f"RSS grew by {growth / 1024:.0f} KiB over {n - warm} requests"


def test_soak_short(tmp_path):
    soak(500, tmp_path)


@pytest.mark.long
def test_soak_10000(tmp_path):
    soak(10_000, tmp_path)
