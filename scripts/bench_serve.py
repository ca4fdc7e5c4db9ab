#!/usr/bin/env python3
"""`edgerun serve` under load (a benchmark: it reports, it does not fail).

    python scripts/bench_serve.py [MODEL] [--parallel 4] [--threads 1] [--json OUT]

The server runs in this process (Server.start_in_thread, loopback); clients
are streaming HTTP clients in threads, timing each token as it arrives.

1. Batched throughput: k clients (k = 1, 2, ... --parallel) each generate
   --gen-tokens tokens (ignore_eos) over and over for --seconds; reported:
   aggregate tokens/s and its ratio to k = 1. Until the runtime has
   er_decode_batch, one scheduler step decodes the slots one after another,
   so the aggregate stays near the one-slot figure; with it, the weights are
   streamed once per step for all slots (the issue's goal: >= 3x at 4 slots).
2. The burst test: 3 clients generate continuously; after --seconds of
   baseline, a --burst-tokens prompt (max_tokens 1) arrives every --interval
   seconds for --bursts bursts. Reported: the generating clients' per-token
   latency (time between two streamed tokens) p50 / p99 in the baseline and
   during the bursts, and the p99 ratio (the issue's target: <= 1.5). The
   long prompt is prefilled in chunks between the others' decode steps, each
   chunk taking at most --prefill-share of the time of their decode tokens
   (at most --prefill-chunk tokens); one burst test per share given: smaller
   is fairer to the running clients and slower for the long prompt.

Needs a model with a context of at least --burst-tokens + 1; `make
bench-serve` makes build/bench/llama110m-q4_0.gguf (the 110M shape, Q4_0,
n_ctx 1024) with scripts/make_bench_model.py.
"""
import argparse
import json
import pathlib
import statistics
import sys
import threading
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "pybind"))

DEFAULT_MODEL = REPO / "build" / "bench" / "llama110m-q4_0.gguf"


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


class Generator(threading.Thread):
    """A client that streams completions back to back until stopped,
    recording (arrival time, gap since the previous token) per token."""

    def __init__(self, base, model_id, prompt_ids, gen_tokens):
        super().__init__(daemon=True)
        import httpx
        self.http = httpx.Client(timeout=600)
        self.url = f"{base}/v1/completions"
        self.body = {"model": model_id, "prompt": prompt_ids, "max_tokens": gen_tokens, "temperature": 0,
                     "stream": True, "ignore_eos": True}
        self.gaps = []          # (t, seconds since the previous token of the same request)
        self.tokens = 0
        self.stop = threading.Event()
        self.error = None

    def run(self):
        try:
            while not self.stop.is_set():
                last = None
                with self.http.stream("POST", self.url, json=self.body) as r:
                    if r.status_code != 200:
                        raise RuntimeError(f"HTTP {r.status_code}: {r.read()[:200]!r}")
                    for line in r.iter_lines():
                        if not line.startswith("data: ") or line == "data: [DONE]":
                            continue
                        ev = json.loads(line[6:])
                        if not ev["choices"] or ev["choices"][0]["finish_reason"] is not None:
                            continue
                        now = time.perf_counter()
                        self.tokens += 1
                        if last is not None:
                            self.gaps.append((now, now - last))
                        last = now
                        if self.stop.is_set():
                            break
        except Exception as e:     # noqa: BLE001 -- reported by the caller
            self.error = e


def throughput(base, model_id, prompt, k, seconds, gen_tokens):
    gens = [Generator(base, model_id, prompt, gen_tokens) for _ in range(k)]
    for g in gens:
        g.start()
    time.sleep(min(2.0, seconds / 4))        # past the first prefill
    t0, n0 = time.perf_counter(), sum(g.tokens for g in gens)
    time.sleep(seconds)
    t1, n1 = time.perf_counter(), sum(g.tokens for g in gens)
    for g in gens:
        g.stop.set()
    for g in gens:
        g.join()
        if g.error:
            raise g.error
    return (n1 - n0) / (t1 - t0)


def burst(base, model_id, prompt, long_ids, seconds, interval, bursts, gen_tokens):
    import httpx
    gens = [Generator(base, model_id, prompt, gen_tokens) for _ in range(3)]
    for g in gens:
        g.start()
    time.sleep(2.0)
    t_base0 = time.perf_counter()
    time.sleep(seconds)
    t_base1 = time.perf_counter()
    windows, prefill_s = [], []
    http = httpx.Client(timeout=600)
    for _ in range(bursts):
        t = time.perf_counter()
        r = http.post(f"{base}/v1/completions", json={"model": model_id, "prompt": long_ids, "max_tokens": 1,
                                                       "temperature": 0})
        done = time.perf_counter()
        if r.status_code != 200:
            raise RuntimeError(f"burst request: HTTP {r.status_code}: {r.text[:200]}")
        windows.append((t, done))
        prefill_s.append(done - t)
        time.sleep(max(0.0, interval - (done - t)))
    for g in gens:
        g.stop.set()
    for g in gens:
        g.join()
        if g.error:
            raise g.error
    gaps = [x for g in gens for x in g.gaps]
    base_gaps = [d for t, d in gaps if t_base0 <= t < t_base1]
    burst_gaps = [d for t, d in gaps if any(a <= t <= b + 0.5 for a, b in windows)]
    return {"baseline": {"n": len(base_gaps), "p50_ms": pct(base_gaps, 50) * 1e3, "p99_ms": pct(base_gaps, 99) * 1e3},
            "burst": {"n": len(burst_gaps), "p50_ms": pct(burst_gaps, 50) * 1e3, "p99_ms": pct(burst_gaps, 99) * 1e3},
            "p99_ratio": pct(burst_gaps, 99) / pct(base_gaps, 99),
            "long_prompt_s": statistics.median(prefill_s)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", default=str(DEFAULT_MODEL))
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ctx", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=10.0, help="measuring time per throughput point / baseline")
    ap.add_argument("--gen-tokens", type=int, default=128, help="tokens per generating request")
    ap.add_argument("--burst-tokens", type=int, default=1000)
    ap.add_argument("--interval", type=float, default=10.0)
    ap.add_argument("--bursts", type=int, default=3)
    ap.add_argument("--prefill-chunk", type=int, default=64, help="the most prompt tokens per step")
    ap.add_argument("--prefill-share", type=float, nargs="+", default=[0.5], help="one burst test per value")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--skip-burst", action="store_true")
    ap.add_argument("--json", metavar="OUT", help="also write the results as JSON")
    args = ap.parse_args()

    import edgerun
    from edgerun.serve import Server
    path = pathlib.Path(args.model)
    if not path.is_file():
        sys.exit(f"bench_serve: {path} does not exist; `make bench-serve` makes the default model "
                 f"(python scripts/make_bench_model.py {DEFAULT_MODEL} --type q4_0 --shape 110m)")
    out = {"model": path.name, "threads": args.threads, "parallel": args.parallel}
    with edgerun.Model(path, n_ctx=args.ctx, n_threads=args.threads, n_sessions=args.parallel) as m:
        if m.n_ctx < args.burst_tokens + 1:
            sys.exit(f"bench_serve: {path.name} has a context of {m.n_ctx}; the burst needs "
                     f"{args.burst_tokens + 1} (pass a model with a longer context or --burst-tokens)")
        tok = m.tokenizer
        prompt = tok.encode("Once upon a time")[:8]
        filler = tok.encode(" the quick brown fox jumps over the lazy dog" * 200, add_special=False)
        long_ids = filler[:args.burst_tokens]
        print(f"bench_serve: {path.name}, {args.threads} thread(s), {args.parallel} slots, n_ctx {m.n_ctx}, "
              f"isa {m.isa}")
        for i, share in enumerate(args.prefill_share):
            srv = Server(m, parallel=args.parallel, queue_size=8, prefill_chunk=args.prefill_chunk,
                         prefill_share=share)
            port = srv.start_in_thread()
            base = f"http://127.0.0.1:{port}"
            try:
                if i == 0 and not args.skip_throughput:
                    rows = []
                    k = 1
                    while k <= args.parallel:
                        tps = throughput(base, m.path.stem, prompt, k, args.seconds, args.gen_tokens)
                        rows.append({"slots": k, "tokens_per_s": tps})
                        ratio = tps / rows[0]["tokens_per_s"]
                        print(f"  throughput: {k} slot(s) {tps:8.1f} tok/s  ({ratio:.2f}x one slot)")
                        k *= 2
                    out["throughput"] = rows
                if not args.skip_burst:
                    res = burst(base, m.path.stem, prompt, long_ids, args.seconds, args.interval, args.bursts,
                                args.gen_tokens)
                    res["prefill_chunk"] = args.prefill_chunk
                    res["prefill_share"] = share
                    out.setdefault("burst", []).append(res)
                    print(f"  burst (prefill share {share:g}): per-token p50/p99 {res['baseline']['p50_ms']:.1f}/"
                          f"{res['baseline']['p99_ms']:.1f} ms -> {res['burst']['p50_ms']:.1f}/"
                          f"{res['burst']['p99_ms']:.1f} ms during {args.burst_tokens}-token prompts: "
                          f"p99 x{res['p99_ratio']:.2f} (target <= 1.5); the long prompt took "
                          f"{res['long_prompt_s']:.1f} s")
            finally:
                srv.stop()
    if args.json:
        pathlib.Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
