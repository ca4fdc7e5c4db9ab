#!/usr/bin/env python3
"""Latency stability of token generation (a benchmark: it reports, it does not fail).

    python scripts/bench_latency.py [MODEL] [--tokens 1000] [--threads 1] [--json]

1. Per-token latency, steady state: one greedy token at a time (er_decode of
   the previous token + er_sample, what a streaming client waits for between
   two tokens), timed with a monotonic clock around the C calls only, over
   --tokens tokens. The session restarts from a short prompt whenever it
   reaches --window positions, so every token sees the same range of context
   lengths and the spread measures jitter, not a growing attention span.
   Reported: p50, p90, p99, max and p99/p50 (target <= 1.3 on an idle machine).
2. First request vs steady state: --opens times, the model is opened afresh
   (new mapping, new arena, new worker threads: what a service pays after a
   restart) and one request (prefill of the prompt + --request-tokens greedy
   tokens) is timed; then --requests more requests on the warm model give the
   steady p50/p99. Reported: the median first-request time over p99
   (target <= 2). With --cold the model file is evicted from the page cache
   before each open (posix_fadvise DONTNEED), as after a reboot: the first
   request then also pays for reading the weights from storage, unless open
   did (see docs/PERFORMANCE.md).

3. Machine jitter, measured beside the tokens: after each timed token the
   same fixed piece of work that never touches the runtime (--reference: a
   float sum over an L2-resident buffer, repeated to take about half a
   token's time) is timed the same way. Its p99/p50 is the floor this machine
   can show in that minute (a VM's steal time and frequency changes slow
   both alike); and because each reference sample sits next to a token, the
   report counts how many slow tokens (> 1.3 x p50) had a slow neighbour
   reference too: near 100% means the machine, not the runtime, made them
   slow.

4. With one thread, each token's CPU time of the calling thread beside its
   wall time: the same work without the time the thread was not running
   (preempted, or the vCPU descheduled by the host where the guest kernel
   accounts steal time). Where its spread is as wide as the wall clock's,
   slow tokens were slow while running: a slower core (frequency, another
   tenant's cache and memory traffic), not preemption. On the 2-vCPU VM of
   docs/PERFORMANCE.md the two spreads were equal.

Python's garbage collector is off while timing: its pauses are not the runtime's.
"""
import argparse
import gc
import json
import os
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "pybind"))

import edgerun  # noqa: E402
from edgerun.bench import interference  # noqa: E402
from edgerun._ffi import check, ffi, lib  # noqa: E402


def pct(xs, p):
    """Nearest-rank percentile of a non-empty list."""
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(round(p / 100 * len(s) + 0.5)) - 1))
    return s[k]


def prompt_ids(m, n=8):
    """A short prompt the model's vocabulary can take (ids, no tokenizer needed)."""
    return [1 + (7 * i) % (m.n_vocab - 1) for i in range(n)]


def make_reference(target_us):
    """A fixed piece of CPU work independent of the runtime, sized once to take
    about target_us: repeated sums over a 64 KiB buffer (in L2 on every CPU we
    run on, so it measures the core's speed, not memory contention)."""
    import numpy as np
    buf = np.random.default_rng(0).random(16384, dtype=np.float32)

    def work(reps):
        acc = 0.0
        for _ in range(reps):
            acc += float(buf.sum())
        return acc

    reps, clock = 1, time.perf_counter_ns
    while True:
        t0 = clock()
        work(reps)
        dt = (clock() - t0) / 1e3
        if dt >= target_us or reps > 1 << 20:
            break
        reps *= 2
    reps = max(1, int(reps * target_us / max(dt, 1e-3)))
    return lambda: work(reps)


def token_latencies(m, n_tokens, window, reference=None):
    """(per-token microseconds, the position each token was decoded at, with
    `reference` the reference work's microseconds timed right after each
    token (else []), and each token's CPU time of this thread in
    microseconds)."""
    ptr_out = ffi.new("er_session **")
    check(lib.er_session_new(m._ptr, ptr_out))
    s = ptr_out[0]
    prompt = prompt_ids(m)
    arr = ffi.new("int32_t[]", prompt)
    one = ffi.new("int32_t[1]")
    tok = ffi.new("int32_t *")
    window = min(window, m.n_ctx)
    lat, at, ref, cpu = [], [], [], []
    clock, cpu_clock = time.perf_counter_ns, time.thread_time_ns
    try:
        while len(lat) < n_tokens:
            check(lib.er_session_reset(s))
            check(lib.er_decode(s, arr, len(prompt), ffi.NULL))
            check(lib.er_sample(s, ffi.NULL, tok))
            while lib.er_session_pos(s) < window and len(lat) < n_tokens:
                one[0] = tok[0]
                at.append(lib.er_session_pos(s))
                c0, t0 = cpu_clock(), clock()
                rc = lib.er_decode(s, one, 1, ffi.NULL)
                rc2 = lib.er_sample(s, ffi.NULL, tok) if rc == 0 else 0
                t1, c1 = clock(), cpu_clock()
                check(rc)
                check(rc2)
                lat.append((t1 - t0) / 1e3)
                cpu.append((c1 - c0) / 1e3)
                if reference:
                    t0 = clock()
                    reference()
                    ref.append((clock() - t0) / 1e3)
    finally:
        lib.er_session_free(s)
    return lat, at, ref, cpu


def by_position(lat, at, width=32):
    """Splits the spread into what the context length explains and the rest.
    Decode cost grows with the position (attention reads every cached row:
    on a 15M model the KV rows at position 256 are a fifth of the weight
    bytes), so raw p99/p50 over a window mixes that deterministic growth with
    jitter. Each token is divided by the median of its position bucket
    (`width` positions); the p99/p50 of those ratios is the jitter alone."""
    buckets = {}
    for x, p in zip(lat, at):
        buckets.setdefault(p // width, []).append(x)
    med = {k: statistics.median(v) for k, v in buckets.items()}
    norm = [x / med[p // width] for x, p in zip(lat, at)]
    first, last = min(med), max(med)
    return {"bucket_positions": width, "growth_last_over_first": med[last] / med[first],
            "first_bucket_p50_us": med[first], "last_bucket_p50_us": med[last],
            "jitter_p99_over_p50": pct(norm, 99) / pct(norm, 50), "jitter_p90_over_p50": pct(norm, 90) / pct(norm, 50)}


def jitter_report(lat, ref, slow=1.3):
    """The reference's spread, and how often a slow token sits next to a slow
    reference sample (the one just before or just after it)."""
    p50, r50 = pct(lat, 50), pct(ref, 50)
    slow_tok = [i for i, x in enumerate(lat) if x > slow * p50]
    slow_ref = {i for i, x in enumerate(ref) if x > slow * r50}
    near = sum(1 for i in slow_tok if i in slow_ref or i - 1 in slow_ref)
    frac_ref = len(slow_ref) / len(ref)
    return {"p50": r50, "p99": pct(ref, 99), "p99_over_p50": pct(ref, 99) / r50, "slow_tokens": len(slow_tok),
            "slow_tokens_with_slow_reference": near,
            "expected_by_chance": len(slow_tok) * (1 - (1 - frac_ref) ** 2)}


def request_time(m, prompt, n_new):
    """Seconds for one request: prefill + n_new greedy tokens, on a fresh session."""
    out = ffi.new("er_session **")
    arr = ffi.new("int32_t[]", prompt)
    one = ffi.new("int32_t[1]")
    tok = ffi.new("int32_t *")
    t0 = time.perf_counter_ns()
    check(lib.er_session_new(m._ptr, out))
    s = out[0]
    try:
        check(lib.er_decode(s, arr, len(prompt), ffi.NULL))
        for i in range(n_new):
            check(lib.er_sample(s, ffi.NULL, tok))
            if i + 1 < n_new and lib.er_session_pos(s) < m.n_ctx:
                one[0] = tok[0]
                check(lib.er_decode(s, one, 1, ffi.NULL))
    finally:
        lib.er_session_free(s)
    return (time.perf_counter_ns() - t0) / 1e3


def evict(path):
    """Drops the file's clean pages from the page cache (no root needed)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def first_vs_steady(path, opts, opens, requests, n_new, cold):
    firsts, steady, open_us = [], [], []
    for k in range(opens):
        if cold:
            evict(path)
        t0 = time.perf_counter_ns()
        with edgerun.Model(path, **opts) as m:
            open_us.append((time.perf_counter_ns() - t0) / 1e3)
            prompt = prompt_ids(m)
            firsts.append(request_time(m, prompt, n_new))
            if k == 0:
                steady = [request_time(m, prompt, n_new) for _ in range(requests)]
    return firsts, steady, open_us


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", default=None, help="GGUF file (default: the embedded model)")
    ap.add_argument("--tokens", type=int, default=1000, help="timed tokens (default 1000)")
    ap.add_argument("--window", type=int, default=256, help="restart the session at this position (default 256)")
    ap.add_argument("--threads", type=int, default=1, help="worker threads (default 1)")
    ap.add_argument("--opens", type=int, default=5, help="fresh opens for the first-request figure (default 5)")
    ap.add_argument("--requests", type=int, default=100, help="steady requests after the first (default 100)")
    ap.add_argument("--request-tokens", type=int, default=16, help="tokens per request (default 16)")
    ap.add_argument("--cold", action="store_true", help="evict the model from the page cache before each open")
    ap.add_argument("--no-reference", dest="reference", action="store_false",
                    help="skip the machine-jitter reference timed beside each token")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args(argv)

    path = a.model or edgerun.default_model_path()
    opts = dict(n_threads=a.threads)
    gc_was = gc.isenabled()
    gc.disable()
    try:
        with edgerun.Model(path, **opts) as m:
            warm = token_latencies(m, min(100, a.tokens), a.window)[0]   # warm the model first
            reference = make_reference(statistics.median(warm) / 2) if a.reference else None
            before = interference.snapshot()
            lat, at, ref, cpu = token_latencies(m, a.tokens, a.window, reference)
            others = interference.measure(before)
            isa = m.isa
        firsts, steady, open_us = first_vs_steady(path, opts, a.opens, a.requests, a.request_tokens, a.cold)
    finally:
        if gc_was:
            gc.enable()

    p50, p90, p99, mx = pct(lat, 50), pct(lat, 90), pct(lat, 99), max(lat)
    s50, s99 = pct(steady, 50), pct(steady, 99)
    first = statistics.median(firsts)
    res = {
        "model": str(path), "isa": isa, "threads": a.threads, "tokens": len(lat), "window": a.window,
        "token_us": {"p50": p50, "p90": p90, "p99": p99, "max": mx, "mean": statistics.fmean(lat)},
        "p99_over_p50": p99 / p50,
        "by_position": by_position(lat, at),
        "request": {"tokens": a.request_tokens, "first_us": firsts, "first_median_us": first,
                    "steady_p50_us": s50, "steady_p99_us": s99, "cold": a.cold,
                    "open_median_us": statistics.median(open_us)},
        "first_over_p99": first / s99, "first_over_p50": first / s50,
        "machine_reference": jitter_report(lat, ref) if a.reference else None,
        # With one thread the caller does all of a token's work, so its CPU
        # time is the token without the time the thread was not running
        # (see 4. above); with more, the workers' share is not in it.
        "cpu_time": ({"p50": pct(cpu, 50), "p99": pct(cpu, 99), "p99_over_p50": pct(cpu, 99) / pct(cpu, 50),
                      "jitter_p99_over_p50": by_position(cpu, at)["jitter_p99_over_p50"]}
                     if a.threads == 1 and pct(cpu, 50) > 0 else None),
        "cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        # other processes' CPU use and the hypervisor's steal over the timed
        # tokens: what a p99 beyond target may owe to the machine
        "interference": others,
    }
    if a.json:
        print(json.dumps(res))
        return 0
    print(f"model {pathlib.Path(path).name}  isa {isa}  threads {a.threads}  "
          f"load {res['load_avg_1m']:.2f} on {res['cpus']} CPUs"
          + (f"; over the timed tokens: {interference.describe(others)}"
             + (" (busy)" if others["busy"] else "") if others else ""))
    print(f"per-token latency over {len(lat)} tokens (us): p50 {p50:.1f}  p90 {p90:.1f}  p99 {p99:.1f}  "
          f"max {mx:.1f}   p99/p50 {p99 / p50:.2f} (target <= 1.3 idle)")
    bp = res["by_position"]
    print(f"  of which the context length: p50 {bp['first_bucket_p50_us']:.1f} us at the window's first "
          f"{bp['bucket_positions']} positions, {bp['last_bucket_p50_us']:.1f} at its last "
          f"({bp['growth_last_over_first']:.2f}x); jitter at equal positions: p99/p50 "
          f"{bp['jitter_p99_over_p50']:.2f}, p90/p50 {bp['jitter_p90_over_p50']:.2f}")
    if res["cpu_time"]:
        c = res["cpu_time"]
        print(f"  the thread's CPU time per token (us): p50 {c['p50']:.1f}  p99 {c['p99']:.1f}  p99/p50 "
              f"{c['p99_over_p50']:.2f}; at equal positions {c['jitter_p99_over_p50']:.2f} "
              f"(time the thread was not running left out)")
    if a.reference:
        r = res["machine_reference"]
        print(f"machine jitter beside them: fixed reference work p50 {r['p50']:.1f} us  p99 {r['p99']:.1f}  "
              f"p99/p50 {r['p99_over_p50']:.2f}; slow tokens (> 1.3 x p50): {r['slow_tokens']}, of which "
              f"{r['slow_tokens_with_slow_reference']} next to a slow reference "
              f"(chance alone: {r['expected_by_chance']:.1f})")
    print(f"request of {a.request_tokens} tokens (us): first after open {first:.0f} (median of {a.opens}: "
          + ", ".join(f"{x:.0f}" for x in firsts) + f"), steady p50 {s50:.0f} p99 {s99:.0f}   "
          f"first/p99 {first / s99:.2f} (target <= 2), first/p50 {first / s50:.2f}")
    print(f"open: median {statistics.median(open_us) / 1e3:.1f} ms" + (" (page cache evicted first)" if a.cold else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
