"""Slots under pressure, on a tiny random model with an 8,192-token context
(so one request can run for seconds): a client that disconnects cancels its
request and frees its slot at once, streamed or plain; a full wait queue
answers 429 with Retry-After; and the scheduler interleaves a long prompt's
prefill chunks with the other slots' decode steps."""
import json

import pytest

from serve_helpers import client, http, metric, need_serve, served, wait_for

openai = need_serve()
LONG = 8000


@pytest.fixture(scope="module")
def long_model(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import conftest
    from edgerun.convert import convert
    d = tmp_path_factory.mktemp("serve_long")
    conftest.build_hf(d / "hf", "llama", True, 10000.0, shape=dict(max_position_embeddings=8192))
    convert(d / "hf", d / "long.gguf", "f32", quiet=True)
    return d / "long.gguf"


def long_body(stream):
    return {"model": "long", "prompt": "Once upon a time", "max_tokens": LONG, "temperature": 0, "stream": stream,
            "ignore_eos": True}


def first_data(lines):
    """The first event of a stream. Keep `lines` referenced while the stream
    should stay open: an iterator dropped half way closes its connection
    (httpcore does), which is a disconnect."""
    for line in lines:
        if line.startswith("data: "):
            return json.loads(line[6:])
    raise AssertionError("the stream ended before its first event")


def test_disconnect_cancels_stream_and_frees_slot(long_model):
    with served(long_model, parallel=1, n_ctx=8192) as (srv, base):
        with http().stream("POST", f"{base}/v1/completions", json=long_body(True)) as r:
            assert r.status_code == 200
            lines = r.iter_lines()
            first_data(lines)
            assert metric(base, "slots_busy") == 1
        # Leaving the block closed the connection mid-stream.
        wait_for(lambda: metric(base, "jobs_total", reason="cancelled") == 1, what="the job to be cancelled")
        wait_for(lambda: metric(base, "slots_busy") == 0, what="the slot to free")
        assert metric(base, "generation_tokens_total") < LONG
        # The one slot serves the next request.
        r = client(base).completions.create(model="long", prompt="Hello", max_tokens=4, temperature=0,
                                            extra_body={"ignore_eos": True})
        assert r.usage.completion_tokens == 4


def test_disconnect_cancels_plain_request(long_model):
    import httpx
    with served(long_model, parallel=1, n_ctx=8192) as (srv, base):
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{base}/v1/completions", json=long_body(False), timeout=0.5)
        wait_for(lambda: metric(base, "jobs_total", reason="cancelled") == 1, what="the job to be cancelled")
        wait_for(lambda: metric(base, "slots_busy") == 0, what="the slot to free")
        assert metric(base, "generation_tokens_total") < LONG


def test_full_queue_is_429_with_retry_after(long_model):
    with served(long_model, parallel=1, n_ctx=8192, queue_size=1) as (srv, base):
        with http().stream("POST", f"{base}/v1/completions", json=long_body(True)) as running:
            lines = running.iter_lines()
            first_data(lines)                                # the slot is busy
            with http().stream("POST", f"{base}/v1/completions", json=long_body(True)) as waiting:
                assert waiting.status_code == 200
                wait_for(lambda: metric(base, "queue_depth") == 1, what="the second request to queue")
                r = http().post(f"{base}/v1/completions", json=long_body(False))
                assert r.status_code == 429
                assert r.headers["Retry-After"] == "1"
                assert r.json()["error"]["code"] == "queue_full"
                with pytest.raises(openai.RateLimitError):
                    client(base).completions.create(model="long", prompt="Hello", max_tokens=4)
                assert metric(base, "rejected_total") == 2
                assert metric(base, "slots_busy") == 1 and metric(base, "jobs_total", reason="cancelled") == 0
            del lines
        wait_for(lambda: metric(base, "slots_busy") == 0 and metric(base, "queue_depth") == 0,
                 what="both requests to be cancelled")
        assert metric(base, "jobs_total", reason="cancelled") == 2


def test_long_prompt_prefills_in_chunks_between_decode_steps(long_model):
    """3 slots generate while a 1,000-token prompt arrives: every step of its
    prefill carries at most prefill_chunk prompt tokens and one token of each
    generating slot, so the others never wait for the whole prompt."""
    import edgerun
    from edgerun.serve.scheduler import Job, Scheduler

    steps = []

    class Recording(Scheduler):
        def step(self, work):
            steps.append([(s.index, len(ids), bool(s.job.pending)) for s, ids in work])
            super().step(work)

    done = {}

    def collector(name):
        def emit(ev):
            if ev[0] != "piece":
                done[name] = ev
        return emit

    with edgerun.Model(long_model, n_ctx=8192, n_sessions=4) as m:
        sched = Recording(m, parallel=4, queue_size=4, prefill_chunk=32)
        try:
            tok = m.tokenizer
            for i in range(3):
                sched.submit(Job(tok.encode(f"Short {i}"), 400, 0.0, 1.0, None, [], collector(i), ignore_eos=True))
            wait_for(lambda: len(steps) > 20, what="the short jobs to start generating")
            long_ids = [int(x) % (m.n_vocab - 1) + 1 for x in range(1000)]
            sched.submit(Job(long_ids, 4, 0.0, 1.0, None, [], collector("long"), ignore_eos=True))
            wait_for(lambda: len(done) == 4, timeout=60, what="every job to finish")
        finally:
            sched.close()
    assert all(ev[0] == "done" for ev in done.values()), done
    prefill_steps = [st for st in steps if any(pending for _, _, pending in st)]
    assert len(prefill_steps) >= 1000 // 32
    for st in prefill_steps:
        assert sum(n for _, n, pending in st if pending) <= 32       # one chunk of prompt per step
        assert all(n == 1 for _, n, pending in st if not pending)    # and one token of every generating slot
    overlap = [st for st in prefill_steps if sum(1 for _, _, pending in st if not pending) == 3]
    assert len(overlap) >= 1000 // 32 - 1, "the long prompt's chunks did not run between the short jobs' steps"


def test_short_prompt_is_prefilled_before_a_long_one_finishes(long_model):
    """A short request that arrives while a 1,000-token prompt is being
    prefilled gets its whole prompt into the next step and starts generating
    while the long prompt is still coming in (the fewest-tokens-left prompt
    goes first), instead of waiting behind the long one's remaining chunks."""
    import edgerun
    from edgerun.serve.scheduler import Job, Scheduler

    steps = []
    late = []                   # the short job, submitted from the scheduler's own thread

    class Recording(Scheduler):
        def step(self, work):
            steps.append({s.index: (len(ids), len(s.job.pending)) for s, ids in work})
            super().step(work)
            # after the long prompt's third chunk, whatever the machine's
            # speed (a client thread polling for that moment raced the
            # whole prefill on an idle machine)
            if len(steps) == 3 and late:
                self.submit(late.pop())

    done, first_piece = {}, {}

    def collector(name):
        def emit(ev):
            if ev[0] == "piece":
                first_piece.setdefault(name, len(steps))
            else:
                done[name] = ev
        return emit

    with edgerun.Model(long_model, n_ctx=8192, n_sessions=2) as m:
        sched = Recording(m, parallel=2, queue_size=2, prefill_chunk=32)
        try:
            long_ids = [int(x) % (m.n_vocab - 1) + 1 for x in range(1000)]
            late.append(Job(m.tokenizer.encode("Short"), 4, 0.0, 1.0, None, [], collector("short"), ignore_eos=True))
            sched.submit(Job(long_ids, 4, 0.0, 1.0, None, [], collector("long"), ignore_eos=True))
            wait_for(lambda: len(done) == 2, timeout=60, what="both jobs to finish")
        finally:
            sched.close()
    assert all(ev[0] == "done" for ev in done.values()), done
    # the step that finished the long prompt's prefill
    long_slot = next(i for i, (n, left) in steps[0].items())
    last_long_chunk = max(k for k, st in enumerate(steps) if long_slot in st and st[long_slot][1] > 1)
    assert first_piece["short"] < last_long_chunk, (first_piece, last_long_chunk)
    short_prefill = [k for k, st in enumerate(steps) for i, (n, left) in st.items() if i != long_slot and n > 1]
    assert len(short_prefill) == 1, "the short prompt went in one step"
