"""Soak (-m long; `make soak-serve`): 2,000 requests through the openai client
against `edgerun serve` in a process of its own -- completions and chat, plain
and streamed, a bad request now and then, 4 client threads on 4 slots.
0 failed, and the server's resident memory grows by at most 1 MB from after a
warm-up to the end."""
import os
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from serve_helpers import PLAIN_TEMPLATE, client, http, metric, need_serve, served_process

import addition_task as task  # noqa: E402  isort: skip  (serve_helpers put scripts/ on sys.path)

openai = need_serve()
MODEL = "edgerun-add"
N_REQUESTS = int(os.environ.get("EDGERUN_SERVE_SOAK", "2000"))
WARMUP = 200
MAX_GROWTH_KB = 1024


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.long
def test_soak_2000_requests(tmp_path):
    if not os.path.exists("/proc/self/status"):
        pytest.skip("needs /proc to read the server's RSS")
    tpl = tmp_path / "plain.jinja"
    tpl.write_text(PLAIN_TEMPLATE)
    problems = task.make_problems(task.HELD_OUT_COUNT, task.HELD_OUT_SEED, "test")
    with served_process("--parallel", "4", "--threads", "1", "--chat-template", tpl) as (proc, base):
        api = client(base)

        def one(i):
            a, b = problems[i % len(problems)]
            kind = i % 5
            if kind == 4:           # a bad request: answered 400, costs nothing
                r = http().post(f"{base}/v1/completions", json={"model": MODEL, "prompt": "1", "max_tokens": -1})
                return r.status_code == 400
            kw = dict(model=MODEL, max_tokens=task.MAX_NEW_TOKENS, temperature=0)
            if kind == 0:
                text = api.completions.create(prompt=task.prompt(a, b), **kw).choices[0].text
            elif kind == 1:
                text = "".join(c.choices[0].text for c in api.completions.create(prompt=task.prompt(a, b),
                                                                                  stream=True, **kw))
            elif kind == 2:
                text = api.chat.completions.create(messages=[{"role": "user", "content": task.prompt(a, b)}],
                                                   **kw).choices[0].message.content
            else:
                text = "".join(c.choices[0].delta.content or "" for c in api.chat.completions.create(
                    messages=[{"role": "user", "content": task.prompt(a, b)}], stream=True, **kw) if c.choices)
            return task.is_correct(a, b, text)

        def run(n, start):
            with ThreadPoolExecutor(4) as pool:
                return list(pool.map(one, range(start, start + n)))

        assert all(run(WARMUP, 0))
        before = rss_kb(proc.pid)
        t0 = time.perf_counter()
        ok = run(N_REQUESTS, WARMUP)
        dt = time.perf_counter() - t0
        after = rss_kb(proc.pid)
        failed = ok.count(False)
        print(f"\nserve soak: {N_REQUESTS} requests in {dt:.1f} s ({N_REQUESTS / dt:.0f}/s), failed {failed}, "
              f"RSS {before} -> {after} kB ({after - before:+d} kB)")
        assert failed == 0
        assert after - before <= MAX_GROWTH_KB, f"RSS grew {after - before} kB over {N_REQUESTS} requests"
        assert metric(base, "jobs_total", reason="error") == 0
        assert metric(base, "slots_busy") == 0
