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

from serve_request_mix import one_request, problems  # noqa: E402  isort: skip  (serve_helpers put scripts/ on sys.path)

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
    probs = problems()
    with served_process("--parallel", "4", "--threads", "1", "--chat-template", tpl) as (proc, base):
        api = client(base)

        def one(i):
            return one_request(api, http(), base, MODEL, probs, i)

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
