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

3. llama.cpp's server beside ours, where llama-cpp-python's server extra is
   installed (edgerun/bench/llama_server.py; --no-peer skips it): the same
   GGUF file, the same prompt texts, max_tokens, client counts, threads, K/V
   type and prompt batch, run against `python -m llama_cpp.server` in a
   process of its own, printed side by side. Both servers run throughout;
   each measurement (a client count, the burst test) runs on ours and then
   on llama.cpp's before the next, so a machine whose load changes over the
   run tilts both alike. Both generate through end of
   text (ours: ignore_eos; llama.cpp's: its end-of-generation tokens biased
   to -1e9, the same greedy tokens otherwise). llama-cpp-python's server
   runs one request at a time, so its clients queue: its aggregate stays at
   one client's and its time to first token grows with the clients.

Needs a model with a context of at least --burst-tokens + 1; `make
bench-serve` makes build/bench/llama110m-q4_0.gguf (the 110M shape, Q4_0,
n_ctx 1024) with scripts/make_bench_model.py.
"""
import argparse
import contextlib
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

    def __init__(self, base, model_id, prompt, gen_tokens, no_eos):
        super().__init__(daemon=True)
        import httpx
        self.http = httpx.Client(timeout=600)
        self.url = f"{base}/v1/completions"
        self.body = {"model": model_id, "prompt": prompt, "max_tokens": gen_tokens, "temperature": 0,
                     "stream": True, **no_eos}
        self.gaps = []          # (t, seconds since the previous token of the same request)
        self.ttfts = []         # (t, seconds from sending the request to its first token)
        self.tokens = 0
        self.stop = threading.Event()
        self.error = None

    def run(self):
        try:
            while not self.stop.is_set():
                last = None
                sent = time.perf_counter()
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
                        else:
                            self.ttfts.append((now, now - sent))
                        last = now
                        if self.stop.is_set():
                            break
        except Exception as e:     # noqa: BLE001 -- reported by the caller
            self.error = e


def throughput(base, model_id, prompt, k, seconds, gen_tokens, no_eos):
    """Aggregate tokens/s of k streaming clients, and their time to first
    token (p50, p99) in the measured window."""
    gens = [Generator(base, model_id, prompt, gen_tokens, no_eos) for _ in range(k)]
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
    ttft = [d for g in gens for t, d in g.ttfts if t0 <= t < t1]
    return {"clients": k, "tokens_per_s": (n1 - n0) / (t1 - t0), "ttft_p50_ms": pct(ttft, 50) * 1e3,
            "ttft_p99_ms": pct(ttft, 99) * 1e3, "ttft_n": len(ttft)}


def burst(base, model_id, prompt, long_prompt, seconds, interval, bursts, gen_tokens, no_eos):
    import httpx
    gens = [Generator(base, model_id, prompt, gen_tokens, no_eos) for _ in range(3)]
    for g in gens:
        g.start()
    time.sleep(2.0)
    t_base0 = time.perf_counter()
    time.sleep(seconds)
    t_base1 = time.perf_counter()
    windows, prefill_s = [], []
    http = httpx.Client(timeout=600)
    for i in range(bursts):
        t = time.perf_counter()
        # Each burst starts differently: both servers reuse a cached prefix,
        # and a repeated prompt would be prefilled once, not once per burst.
        r = http.post(f"{base}/v1/completions", json={"model": model_id, "prompt": f"{i}{long_prompt}",
                                                       "max_tokens": 1, "temperature": 0})
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
    # A server that queues requests holds the others' next request back
    # instead of slowing their tokens: that shows in time to first token.
    ttfts = [x for g in gens for x in g.ttfts]
    base_ttft = [d for t, d in ttfts if t_base0 <= t < t_base1]
    burst_ttft = [d for t, d in ttfts if any(a <= t <= b + 0.5 for a, b in windows)]
    return {"baseline": {"n": len(base_gaps), "p50_ms": pct(base_gaps, 50) * 1e3, "p99_ms": pct(base_gaps, 99) * 1e3,
                         "ttft_n": len(base_ttft), "ttft_p99_ms": pct(base_ttft, 99) * 1e3},
            "burst": {"n": len(burst_gaps), "p50_ms": pct(burst_gaps, 50) * 1e3, "p99_ms": pct(burst_gaps, 99) * 1e3,
                      "ttft_n": len(burst_ttft), "ttft_p99_ms": pct(burst_ttft, 99) * 1e3},
            "p99_ratio": pct(burst_gaps, 99) / pct(base_gaps, 99),
            "long_prompt_s": statistics.median(prefill_s)}


PROMPT = "Once upon a time"


def no_eos_bias(tok):
    """logit_bias that keeps llama.cpp off every end-of-generation token:
    its server has no ignore_eos."""
    return {str(i): -1e9 for i in range(tok.n_vocab) if tok.is_eog(i)}


def say_throughput(name, row, one):
    print(f"  {name:<9} throughput: {row['clients']} client(s) {row['tokens_per_s']:8.1f} tok/s "
          f"({row['tokens_per_s'] / one:.2f}x one), first token p50/p99 "
          f"{row['ttft_p50_ms']:.0f}/{row['ttft_p99_ms']:.0f} ms", flush=True)


def say_burst(name, res, burst_tokens):
    share = res.get("prefill_share")
    print(f"  {name:<9} burst{'' if share is None else f' (prefill share {share:g})'}: per-token p50/p99 "
          f"{res['baseline']['p50_ms']:.1f}/{res['baseline']['p99_ms']:.1f} ms -> {res['burst']['p50_ms']:.1f}/"
          f"{res['burst']['p99_ms']:.1f} ms during {burst_tokens}-token prompts: "
          f"p99 x{res['p99_ratio']:.2f} (target <= 1.5); first token p99 {res['baseline']['ttft_p99_ms']:.0f} -> "
          f"{res['burst']['ttft_p99_ms']:.0f} ms; the long prompt took {res['long_prompt_s']:.1f} s", flush=True)


def measure(servers, model_id, prompt, long_prompt, args, throughput_too=True):
    """servers: [(name, base URL, no-EOS fields, prefill share or None)].
    Each measurement runs on every server in turn before the next one, so
    the two servers' figures are minutes apart at most, not a whole run."""
    res = {name: {} for name, *_ in servers}
    if throughput_too and not args.skip_throughput:
        k = 1
        while k <= args.parallel:
            for name, base, no_eos, _ in servers:
                row = throughput(base, model_id, prompt, k, args.seconds, args.gen_tokens, no_eos)
                rows = res[name].setdefault("throughput", [])
                rows.append(row)
                say_throughput(name, row, rows[0]["tokens_per_s"])
            k *= 2
    if not args.skip_burst:
        for name, base, no_eos, share in servers:
            b = burst(base, model_id, prompt, long_prompt, args.seconds, args.interval, args.bursts,
                      args.gen_tokens, no_eos)
            b["prefill_chunk"] = args.prefill_chunk
            if share is not None:
                b["prefill_share"] = share
            res[name]["burst"] = b
            say_burst(name, b, args.burst_tokens)
    return res


def side_by_side(ours, peer, peer_label, parallel):
    """The two servers' headline figures in one table (plain text)."""
    def fmt(v, spec):
        return "-" if v is None or v != v else format(v, spec)

    rows = []
    for i, r in enumerate(ours.get("throughput", [])):
        p = peer["throughput"][i] if peer and "throughput" in peer else {}
        k = r["clients"]
        rows.append((f"{k} client{'s' if k > 1 else ''}: tok/s", fmt(r["tokens_per_s"], ".1f"),
                     fmt(p.get("tokens_per_s"), ".1f")))
        rows.append((f"{k} client{'s' if k > 1 else ''}: first token p50/p99 ms",
                     f"{fmt(r['ttft_p50_ms'], '.0f')}/{fmt(r['ttft_p99_ms'], '.0f')}",
                     f"{fmt(p.get('ttft_p50_ms'), '.0f')}/{fmt(p.get('ttft_p99_ms'), '.0f')}" if p else "-"))
    b, pb = ours.get("burst"), (peer or {}).get("burst")
    if b:
        rows.append(("burst: per-token p99 ratio", fmt(b["p99_ratio"], ".2f"), fmt(pb and pb["p99_ratio"], ".2f")))
        rows.append(("burst: others' first token p99 ms",
                     f"{b['baseline']['ttft_p99_ms']:.0f} -> {b['burst']['ttft_p99_ms']:.0f}",
                     f"{pb['baseline']['ttft_p99_ms']:.0f} -> {pb['burst']['ttft_p99_ms']:.0f}" if pb else "-"))
        rows.append(("burst: the long prompt s", fmt(b["long_prompt_s"], ".1f"), fmt(pb and pb["long_prompt_s"], ".1f")))
    head = ("", f"edgerun serve ({parallel} slots)", peer_label)
    w = [max(len(str(x[i])) for x in rows + [head]) for i in range(3)]
    lines = ["  " + "  ".join(str(c).ljust(w[i]) if i == 0 else str(c).rjust(w[i]) for i, c in enumerate(r))
             for r in [head] + rows]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", default=str(DEFAULT_MODEL))
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ctx", type=int, default=0)
    ap.add_argument("--kv-type", choices=("f16", "f32"), default="f16",
                    help="K/V cache type of both servers (llama.cpp's default is f16)")
    ap.add_argument("--seconds", type=float, default=10.0, help="measuring time per throughput point / baseline")
    ap.add_argument("--gen-tokens", type=int, default=128, help="tokens per generating request")
    ap.add_argument("--prompt", default=PROMPT, help="the generating clients' prompt; the long prompt repeats it")
    ap.add_argument("--burst-tokens", type=int, default=1000)
    ap.add_argument("--interval", type=float, default=10.0)
    ap.add_argument("--bursts", type=int, default=3)
    ap.add_argument("--prefill-chunk", type=int, default=64, help="the most prompt tokens per step")
    ap.add_argument("--prefill-share", type=float, nargs="+", default=[0.5], help="one burst test per value")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--skip-burst", action="store_true")
    ap.add_argument("--no-peer", action="store_true", help="skip llama.cpp's server")
    ap.add_argument("--json", metavar="OUT", help="also write the results as JSON")
    args = ap.parse_args()

    import edgerun
    from edgerun.bench import llama_server
    from edgerun.serve import Server
    path = pathlib.Path(args.model)
    if not path.is_file():
        sys.exit(f"bench_serve: {path} does not exist; `make bench-serve` makes the default model "
                 f"(python scripts/make_bench_model.py {DEFAULT_MODEL} --type q4_0 --shape 110m)")
    out = {"model": path.name, "threads": args.threads, "parallel": args.parallel, "kv_type": args.kv_type,
           "gen_tokens": args.gen_tokens, "prompt": args.prompt, "burst_tokens": args.burst_tokens}
    with edgerun.Model(path, n_ctx=args.ctx, n_threads=args.threads, n_sessions=args.parallel,
                       kv_type=args.kv_type) as m:
        if m.n_ctx < args.burst_tokens + 1:
            sys.exit(f"bench_serve: {path.name} has a context of {m.n_ctx}; the burst needs "
                     f"{args.burst_tokens + 1} (pass a model with a longer context or --burst-tokens)")
        tok = m.tokenizer
        model_id = m.path.stem
        # Both servers get text, so both tokenize it themselves; the long
        # prompt is text that is --burst-tokens tokens long for this file.
        filler = tok.encode(f" {args.prompt}" * args.burst_tokens, add_special=False)
        long_prompt = tok.decode(filler[:args.burst_tokens - 1])
        out["prompt_tokens"] = len(tok.encode(args.prompt))
        out["burst_prompt_tokens"] = len(tok.encode(long_prompt))
        print(f"bench_serve: {path.name}, {args.threads} thread(s), {args.parallel} slots, n_ctx {m.n_ctx}, "
              f"isa {m.isa}, K/V {args.kv_type}; prompt {args.prompt!r} ({out['prompt_tokens']} tokens), "
              f"{args.gen_tokens} tokens per request")
        n_ctx, eos_bias = m.n_ctx, no_eos_bias(tok)
        peer, why = None, llama_server.missing()
        peer_label = f"llama.cpp server (llama-cpp-python {llama_server.version()}, one request at a time)"
        if args.no_peer:
            why = "llama.cpp's server: skipped (--no-peer)"
        with contextlib.ExitStack() as stack:
            peer_base = None
            if why is None:
                try:
                    peer_base = stack.enter_context(llama_server.serving(
                        path, model_id, n_ctx, args.threads, batch=args.prefill_chunk, kv_type=args.kv_type))
                except RuntimeError as e:
                    why = f"llama.cpp's server: {e}"
            print(f"  edgerun: edgerun serve, in this process; "
                  + (f"llama.cpp: {peer_label}, in a process of its own" if peer_base else why))
            ours = {}
            for i, share in enumerate(args.prefill_share):
                srv = Server(m, parallel=args.parallel, queue_size=8, prefill_chunk=args.prefill_chunk,
                             prefill_share=share)
                port = srv.start_in_thread()
                servers = [("edgerun", f"http://127.0.0.1:{port}", {"ignore_eos": True}, share)]
                if i == 0 and peer_base is not None:
                    servers.append(("llama.cpp", peer_base, {"logit_bias": eos_bias}, None))
                try:
                    res = measure(servers, model_id, args.prompt, long_prompt, args, throughput_too=i == 0)
                finally:
                    srv.stop()
                if "throughput" in res["edgerun"]:
                    ours["throughput"] = out["throughput"] = res["edgerun"]["throughput"]
                if "burst" in res["edgerun"]:
                    out.setdefault("burst", []).append(res["edgerun"]["burst"])
                    ours.setdefault("burst", res["edgerun"]["burst"])
                if "llama.cpp" in res:
                    peer = res["llama.cpp"]
    out["llama_cpp_server"] = ({"version": llama_server.version(), **peer} if peer is not None
                               else {"skipped": why})
    print()
    print(f"serve, same workload on both servers ({path.name}, {args.threads} thread(s), K/V {args.kv_type}, "
          f"{args.gen_tokens} tokens per request):")
    print(side_by_side(ours, peer, peer_label if peer is not None else "llama.cpp server", args.parallel))
    if peer is None:
        print(f"  {why}")
    if args.json:
        pathlib.Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
