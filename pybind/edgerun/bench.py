"""Benchmark: edgerun and llama.cpp on the same GGUF file, in the same run.

Each engine runs in its own child process (`python -m edgerun.bench --worker
ENGINE ...`) so that its peak RSS (VmHWM) is its own and not the sum of both,
and so that one engine's threads and caches cannot slow the other.

Both workers follow the same protocol, so the figures compare like with like:
  * the prompt is the same `prompt_tokens` ids (seeded, drawn from the vocabulary);
  * a short warm-up pass first, so that first-touch page faults on the mapped
    weights are not charged to one engine only;
  * prefill tok/s = prompt tokens / time of the batched forward pass;
  * TTFT = prefill + choosing the first token (greedy);
  * decode tok/s = single-token forward passes / their time (sampling excluded),
    over `gen_tokens` steps that ignore end-of-text, so every run does the same work;
  * peak RSS is VmHWM at the end; base RSS is the interpreter before the model opens.
"""
import argparse
import importlib.util
import json
import os
import pathlib
import random
import resource
import subprocess
import sys
import time

ENGINES = ("edgerun", "llama.cpp")
LLAMA_MISSING = "llama.cpp: not installed (pip install llama-cpp-python)"


# --------------------------------------------------------------------------- memory
def _proc_status_kib(field):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def peak_rss_bytes():
    kib = _proc_status_kib("VmHWM")
    if kib is None:   # not Linux: ru_maxrss is KiB on Linux/BSD, bytes on macOS
        r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(r if sys.platform == "darwin" else r * 1024)
    return kib * 1024


def rss_bytes():
    kib = _proc_status_kib("VmRSS")
    return kib * 1024 if kib is not None else peak_rss_bytes()


def prompt_ids(n_vocab, n, seed=1234):
    """The benchmark prompt: the same ids for every engine given the same vocabulary."""
    rng = random.Random(seed)
    return [rng.randrange(n_vocab) for _ in range(n)]


def fit_to_context(n_ctx, prompt_tokens, gen_tokens):
    """Shrinks the workload to the context a model can hold (tiny embedded models)."""
    if prompt_tokens + gen_tokens + 1 <= n_ctx:
        return prompt_tokens, gen_tokens
    p = max(1, min(prompt_tokens, n_ctx // 3))
    g = max(1, min(gen_tokens, n_ctx - p - 1))
    return p, g


# --------------------------------------------------------------------------- workers
def _worker_edgerun(a):
    import edgerun
    from edgerun._ffi import ffi, lib
    Model = edgerun.Model   # the lazy import happens here, outside the timed open

    base = rss_bytes()
    t0 = time.perf_counter()
    m = Model(a.model, n_ctx=a.ctx, n_threads=a.threads, n_batch=a.batch)
    open_ms = (time.perf_counter() - t0) * 1e3
    p, g = fit_to_context(m.n_ctx, a.prompt_tokens, a.gen_tokens)
    ids = prompt_ids(m.n_vocab, p)
    # Warm-up: touches every weight page once.
    for _ in m.generate(ids[:min(p, 8)], max_tokens=2, stream=True, stop_at_eos=False):
        pass
    best = None
    for _ in range(a.repeat):
        n = sum(1 for _ in m.generate(ids, max_tokens=g + 1, stream=True, stop_at_eos=False))
        s = m.stats()
        run = {"prefill_tokens_per_s": s["prefill_tokens_per_s"], "decode_tokens_per_s": s["decode_tokens_per_s"],
               "ttft_ms": s["ttft_ms"], "n_generated": n}
        best = run if best is None else _best(best, run)
    st = m.stats()
    out = {
        "engine": "edgerun", "version": ffi.string(lib.er_version()).decode(), "isa": m.isa,
        "threads": a.threads, "batch": a.batch, "n_ctx": m.n_ctx, "prompt_tokens": p, "gen_tokens": g,
        "open_ms": open_ms, "arena_bytes": st["arena_total"],
        "arena_sections": {k: v["bytes"] for k, v in st["arena"].items()},
        **best,
    }
    m.close()
    out["base_rss_bytes"] = base
    out["peak_rss_bytes"] = peak_rss_bytes()
    return out


def _llama_logits(llm, n_vocab):
    import numpy as np
    ptr = llm._ctx.get_logits()
    return np.ctypeslib.as_array(ptr, shape=(n_vocab,))


def _worker_llama(a):
    import llama_cpp

    base = rss_bytes()
    t0 = time.perf_counter()
    llm = llama_cpp.Llama(model_path=a.model, n_ctx=a.ctx, n_batch=a.batch, n_ubatch=a.batch,
                          n_threads=a.threads, n_threads_batch=a.threads, logits_all=False,
                          verbose=False)
    open_ms = (time.perf_counter() - t0) * 1e3
    n_vocab = llm.n_vocab()
    p, g = fit_to_context(llm.n_ctx(), a.prompt_tokens, a.gen_tokens)
    ids = prompt_ids(n_vocab, p)
    llm.eval(ids[:min(p, 8)])
    llm.eval([int(_llama_logits(llm, n_vocab).argmax())])
    best = None
    for _ in range(a.repeat):
        llm.reset()
        ts = time.perf_counter()
        llm.eval(ids)
        tp = time.perf_counter()
        tok = int(_llama_logits(llm, n_vocab).argmax())
        ttft = time.perf_counter() - ts
        decode_s = 0.0
        for _ in range(g):
            td = time.perf_counter()
            llm.eval([tok])
            decode_s += time.perf_counter() - td
            tok = int(_llama_logits(llm, n_vocab).argmax())
        run = {"prefill_tokens_per_s": p / max(tp - ts, 1e-9), "decode_tokens_per_s": g / max(decode_s, 1e-9),
               "ttft_ms": ttft * 1e3, "n_generated": g + 1}
        best = run if best is None else _best(best, run)
    out = {
        "engine": "llama.cpp", "version": getattr(llama_cpp, "__version__", "?"), "isa": "llama.cpp default",
        "threads": a.threads, "batch": a.batch, "n_ctx": llm.n_ctx(), "prompt_tokens": p, "gen_tokens": g,
        "open_ms": open_ms, "arena_bytes": None, **best,
    }
    llm.close()
    out["base_rss_bytes"] = base
    out["peak_rss_bytes"] = peak_rss_bytes()
    return out


def _best(a, b):
    """Best of repeated runs: the fastest figure of each kind (noise only slows a run down)."""
    return {
        "prefill_tokens_per_s": max(a["prefill_tokens_per_s"], b["prefill_tokens_per_s"]),
        "decode_tokens_per_s": max(a["decode_tokens_per_s"], b["decode_tokens_per_s"]),
        "ttft_ms": min(a["ttft_ms"], b["ttft_ms"]),
        "n_generated": b["n_generated"],
    }


def _worker_main(argv):
    ap = argparse.ArgumentParser(prog="edgerun.bench worker")
    ap.add_argument("--worker", choices=ENGINES, required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--ctx", type=int, default=0)
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args(argv)
    fn = _worker_edgerun if a.worker == "edgerun" else _worker_llama
    print(json.dumps(fn(a)))
    return 0


# --------------------------------------------------------------------------- driver
def llama_cpp_available():
    return importlib.util.find_spec("llama_cpp") is not None


def _run_worker(engine, model, threads, batch, ctx, prompt_tokens, gen_tokens, repeat, timeout):
    pkg_parent = str(pathlib.Path(__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, "-m", "edgerun.bench", "--worker", engine, "--model", str(model),
           "--threads", str(threads), "--batch", str(batch), "--ctx", str(ctx),
           "--prompt-tokens", str(prompt_tokens), "--gen-tokens", str(gen_tokens), "--repeat", str(repeat)]
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"engine": engine, "threads": threads, "error": f"timed out after {timeout} s"}
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        err = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        return {"engine": engine, "threads": threads, "error": err}
    return json.loads(lines[-1])


def run(model, threads=(1,), prompt_tokens=64, gen_tokens=128, batch=64, ctx=0, repeat=1,
        peer=True, timeout=900):
    """Runs every engine at every thread count; returns a JSON-ready dict."""
    model = pathlib.Path(model)
    if not model.is_file():
        raise FileNotFoundError(2, "No such file or directory", str(model))
    llama = peer and llama_cpp_available()
    results = []
    for t in threads:
        r = _run_worker("edgerun", model, t, batch, ctx, prompt_tokens, gen_tokens, repeat, timeout)
        results.append(r)
        if llama:
            # The peer gets edgerun's context and workload, so both do the same work.
            c = r.get("n_ctx", ctx) or ctx
            pt = r.get("prompt_tokens", prompt_tokens)
            gt = r.get("gen_tokens", gen_tokens)
            results.append(_run_worker("llama.cpp", model, t, batch, c, pt, gt, repeat, timeout))
    if not peer:
        peer_status = "not run (--no-peer)"
    elif llama:
        peer_status = "installed"
    else:
        peer_status = LLAMA_MISSING
    return {"model": str(model), "file_bytes": model.stat().st_size, "prompt_tokens": prompt_tokens,
            "gen_tokens": gen_tokens, "batch": batch, "repeat": repeat, "llama_cpp": peer_status,
            "results": results}


def _mib(b):
    return "-" if b is None else f"{b / 2**20:.1f}"


def format_table(report):
    """The side-by-side table a person reads."""
    ok = [r for r in report["results"] if "error" not in r]
    p = ok[0]["prompt_tokens"] if ok else report["prompt_tokens"]
    g = ok[0]["gen_tokens"] if ok else report["gen_tokens"]
    lines = [f"model: {report['model']} ({_mib(report['file_bytes'])} MiB); prompt {p} tokens, "
             f"{g} decode steps, batch {report['batch']}, best of {report['repeat']}"]
    head = ("engine", "threads", "prefill tok/s", "decode tok/s", "TTFT ms", "open ms",
            "peak RSS MiB", "RSS-base MiB", "arena MiB")
    rows = []
    for r in report["results"]:
        if "error" in r:
            rows.append((r["engine"], str(r["threads"]), "error: " + r["error"]))
            continue
        rows.append((r["engine"], str(r["threads"]), f"{r['prefill_tokens_per_s']:.1f}",
                     f"{r['decode_tokens_per_s']:.1f}", f"{r['ttft_ms']:.2f}", f"{r['open_ms']:.1f}",
                     _mib(r["peak_rss_bytes"]), _mib(r["peak_rss_bytes"] - r["base_rss_bytes"]),
                     _mib(r["arena_bytes"])))
    full = [row for row in rows if len(row) == len(head)]
    widths = [max([len(head[i])] + [len(row[i]) for row in full]) for i in range(len(head))]
    fmt = lambda cells: "  ".join(c.rjust(widths[i]) if i else c.ljust(widths[i]) for i, c in enumerate(cells))
    lines.append(fmt(head))
    for row in rows:
        lines.append(fmt(row) if len(row) == len(head) else
                     f"{row[0].ljust(widths[0])}  {row[1].rjust(widths[1])}  {row[2]}")
    isas = sorted({r["isa"] for r in ok if r["engine"] == "edgerun"})
    if isas:
        lines.append(f"edgerun kernels: {', '.join(isas)}")
    if report["llama_cpp"] != "installed":
        lines.append(report["llama_cpp"] if report["llama_cpp"].startswith("llama.cpp") else
                     f"llama.cpp: {report['llama_cpp']}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(_worker_main(sys.argv[1:]))
