"""Benchmark: edgerun and llama.cpp on the same GGUF file, in the same run.

Each engine runs in its own child process (`python -m edgerun.bench.engines --worker
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
  * peak RSS is VmHWM at the end; base RSS is the interpreter before the model opens;
  * with repeat > 1 the headline figures are medians, with the [min, max] spread.

`matrix()` (`edgerun bench --matrix`, `make bench`) runs both engines over the
benchmark shapes, weight types and thread counts, measures the machine's read
bandwidth in the same run (runtime_c/tools/membw.c), and writes
docs/PERFORMANCE.md and a plot.
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

from . import interference
from .. import console

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
    """Shrinks the workload to the context a model can hold: a prompt a little
    too long for the decode steps gives up just what does not fit (896 + 128 in
    1024 runs 895 + 128); a context far too small (tiny embedded models) is
    split, a third for the prompt."""
    if prompt_tokens + gen_tokens + 1 <= n_ctx:
        return prompt_tokens, gen_tokens
    if n_ctx - gen_tokens - 1 >= n_ctx // 3 and n_ctx - gen_tokens - 1 >= 1:
        return n_ctx - gen_tokens - 1, gen_tokens
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
    m = Model(a.model, n_ctx=a.ctx, n_threads=a.threads, n_batch=a.batch, kv_type=a.kv_type)
    open_ms = (time.perf_counter() - t0) * 1e3
    p, g = fit_to_context(m.n_ctx, a.prompt_tokens, a.gen_tokens)
    ids = prompt_ids(m.n_vocab, p)
    # Warm-up: touches every weight page once.
    for _ in m.generate(ids[:min(p, 8)], max_tokens=2, stream=True, stop_at_eos=False):
        pass
    runs = []
    for _ in range(a.repeat):
        n = sum(1 for _ in m.generate(ids, max_tokens=g + 1, stream=True, stop_at_eos=False))
        s = m.stats()
        runs.append({"prefill_tokens_per_s": s["prefill_tokens_per_s"], "decode_tokens_per_s": s["decode_tokens_per_s"],
                     "ttft_ms": s["ttft_ms"], "n_generated": n})
    best = _summary(runs)
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
                          type_k=GGML_KV_TYPES[a.kv_type], type_v=GGML_KV_TYPES[a.kv_type],
                          verbose=False)
    open_ms = (time.perf_counter() - t0) * 1e3
    n_vocab = llm.n_vocab()
    p, g = fit_to_context(llm.n_ctx(), a.prompt_tokens, a.gen_tokens)
    ids = prompt_ids(n_vocab, p)
    llm.eval(ids[:min(p, 8)])
    llm.eval([int(_llama_logits(llm, n_vocab).argmax())])
    runs = []
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
        runs.append({"prefill_tokens_per_s": p / max(tp - ts, 1e-9), "decode_tokens_per_s": g / max(decode_s, 1e-9),
                     "ttft_ms": ttft * 1e3, "n_generated": g + 1})
    best = _summary(runs)
    out = {
        "engine": "llama.cpp", "version": getattr(llama_cpp, "__version__", "?"), "isa": "llama.cpp default",
        "threads": a.threads, "batch": a.batch, "n_ctx": llm.n_ctx(), "prompt_tokens": p, "gen_tokens": g,
        "open_ms": open_ms, "arena_bytes": None, **best,
    }
    llm.close()
    out["base_rss_bytes"] = base
    out["peak_rss_bytes"] = peak_rss_bytes()
    return out


FIGURES = ("prefill_tokens_per_s", "decode_tokens_per_s", "ttft_ms")


def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def _summary(runs):
    """Repeated runs -> the median of each figure (the headline numbers), each
    figure's [min, max] spread in "spread", and every run in "runs"."""
    out = {k: _median([r[k] for r in runs]) for k in FIGURES}
    out["n_generated"] = runs[-1]["n_generated"]
    out["spread"] = {k: [min(r[k] for r in runs), max(r[k] for r in runs)] for k in FIGURES}
    out["runs"] = runs
    return out


def _worker_main(argv):
    ap = argparse.ArgumentParser(prog="edgerun.bench.engines worker")
    ap.add_argument("--worker", choices=ENGINES, required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--ctx", type=int, default=0)
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--kv-type", choices=tuple(GGML_KV_TYPES), default="f16")
    a = ap.parse_args(argv)
    fn = _worker_edgerun if a.worker == "edgerun" else _worker_llama
    print(json.dumps(fn(a)))
    return 0


# --------------------------------------------------------------------------- driver
# The KV cache type both engines use: llama.cpp's default is F16 (ggml type
# 1), so the bench runs edgerun with F16 too; comparing F32 against F16
# would charge edgerun twice the attention bytes per token.
GGML_KV_TYPES = {"f32": 0, "f16": 1}


def llama_cpp_available():
    return importlib.util.find_spec("llama_cpp") is not None


def _run_worker(engine, model, threads, batch, ctx, prompt_tokens, gen_tokens, repeat, timeout, kv_type="f16"):
    pkg_parent = str(pathlib.Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, "-m", "edgerun.bench.engines", "--worker", engine, "--model", str(model),
           "--threads", str(threads), "--batch", str(batch), "--ctx", str(ctx),
           "--prompt-tokens", str(prompt_tokens), "--gen-tokens", str(gen_tokens), "--repeat", str(repeat),
           "--kv-type", kv_type]
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
        peer=True, timeout=900, kv_type="f16"):
    """Runs every engine at every thread count; returns a JSON-ready dict."""
    model = pathlib.Path(model)
    if not model.is_file():
        raise FileNotFoundError(2, "No such file or directory", str(model))
    llama = peer and llama_cpp_available()
    results = []
    cpu_before = interference.snapshot()
    # where 2 threads run, which cores they got (a VM's vCPUs move between
    # cores that share a cache and cores that do not, and 2-thread decode
    # differs between the two): the round trip before and after
    several = any(t > 1 for t in threads)
    core_before = measure_core_latency() if several else None
    with console.progress("edgerun bench", total=len(threads) * (2 if llama else 1)) as bar:
        for t in threads:
            bar.update(description=f"edgerun, {t} thread(s)")
            r = _run_worker("edgerun", model, t, batch, ctx, prompt_tokens, gen_tokens, repeat, timeout, kv_type)
            results.append(r)
            bar.advance(1)
            if llama:
                # The peer gets edgerun's context and workload, so both do the same work.
                c = r.get("n_ctx", ctx) or ctx
                pt = r.get("prompt_tokens", prompt_tokens)
                gt = r.get("gen_tokens", gen_tokens)
                bar.update(description=f"llama.cpp, {t} thread(s)")
                results.append(_run_worker("llama.cpp", model, t, batch, c, pt, gt, repeat, timeout, kv_type))
                bar.advance(1)
    if not peer:
        peer_status = "not run (--no-peer)"
    elif llama:
        peer_status = "installed"
    else:
        peer_status = LLAMA_MISSING
    return {"model": str(model), "file_bytes": model.stat().st_size, "prompt_tokens": prompt_tokens,
            "gen_tokens": gen_tokens, "batch": batch, "repeat": repeat, "kv_type": kv_type, "llama_cpp": peer_status,
            "interference": interference.measure(cpu_before),
            "core_round_trip_ns_before_after": [core_before, measure_core_latency()] if several else None,
            "results": results}


def _mib(b):
    return "-" if b is None else f"{b / 2**20:.1f}"


TABLE_HEAD = ("engine", "threads", "prefill tok/s", "decode tok/s", "TTFT ms", "open ms",
              "peak RSS MiB", "RSS-base MiB", "arena MiB")


def table_parts(report):
    """(title, rows, notes) of the table a person reads: rows under TABLE_HEAD
    (a failed engine's row: engine, threads, the error), notes after it."""
    ok = [r for r in report["results"] if "error" not in r]
    p = ok[0]["prompt_tokens"] if ok else report["prompt_tokens"]
    g = ok[0]["gen_tokens"] if ok else report["gen_tokens"]
    title = (f"model: {report['model']} ({_mib(report['file_bytes'])} MiB); prompt {p} tokens, "
             f"{g} decode steps, batch {report['batch']}, median of {report['repeat']}")
    rows = []
    for r in report["results"]:
        if "error" in r:
            rows.append((r["engine"], str(r["threads"]), "error: " + r["error"]))
            continue
        rows.append((r["engine"], str(r["threads"]), f"{r['prefill_tokens_per_s']:.1f}",
                     f"{r['decode_tokens_per_s']:.1f}", f"{r['ttft_ms']:.2f}", f"{r['open_ms']:.1f}",
                     _mib(r["peak_rss_bytes"]), _mib(r["peak_rss_bytes"] - r["base_rss_bytes"]),
                     _mib(r["arena_bytes"])))
    return title, rows, _table_notes(report, ok)


def format_table(report):
    """The side-by-side table a person reads, as plain text (pipes, logs, tests)."""
    title, rows, notes = table_parts(report)
    head = TABLE_HEAD
    lines = [title]
    full = [row for row in rows if len(row) == len(head)]
    widths = [max([len(head[i])] + [len(row[i]) for row in full]) for i in range(len(head))]
    fmt = lambda cells: "  ".join(c.rjust(widths[i]) if i else c.ljust(widths[i]) for i, c in enumerate(cells))
    lines.append(fmt(head))
    for row in rows:
        lines.append(fmt(row) if len(row) == len(head) else
                     f"{row[0].ljust(widths[0])}  {row[1].rjust(widths[1])}  {row[2]}")
    return "\n".join(lines + notes)


def _table_notes(report, ok):
    lines = []
    isas = sorted({r["isa"] for r in ok if r["engine"] == "edgerun"})
    if isas:
        lines.append(f"edgerun kernels: {', '.join(isas)}")
    if report["llama_cpp"] != "installed":
        lines.append(report["llama_cpp"] if report["llama_cpp"].startswith("llama.cpp") else
                     f"llama.cpp: {report['llama_cpp']}")
    cpu = report.get("interference")
    if cpu:
        lines.append(f"during the run: {interference.describe(cpu)}"
                     + (" (busy: figures are pessimistic and noisy)" if cpu["busy"] else ""))
    core = round_trips_text(report, " / ")
    if core:
        lines.append(f"core round trip before/after: {core} (tens of ns: the threads' cores share a cache; "
                     "hundreds: they do not, and 2-thread decode runs at another speed)")
    return lines


# --------------------------------------------------------------------------- matrix
SHAPES = ("15m", "110m")
MATRIX_TYPES = ("f32", "q8_0", "q4_0", "q4_k")
# The file types published models ship in, made from the F32 file by
# llama.cpp's own quantizer (what model hubs publish): its per-tensor mixes
# (Q6_K output; more bits on attn_v/ffn_down/attn_output by layer), the
# 32-element types (Q4_1, Q5_0, Q5_1, IQ4_NL), the 3- and 2-bit K-quants.
# Only where rows hold 256-element super-blocks (the 110M shape; the 15M
# one's 288-wide rows would fall back to legacy types).
# {name: llama.cpp's LLAMA_FTYPE_MOSTLY_*}; the newer types first so the
# long-standing q4_k_m/q5_k_m/q6_k rows keep their place at the end.
MIX_TYPES = {"q4_1": 3, "q5_0": 8, "q5_1": 9, "iq4_nl": 25, "iq4_xs": 30, "q2_k": 10, "q3_k_s": 11, "q3_k_m": 12,
             "q3_k_l": 13, "q4_k_s": 14, "q5_k_s": 16, "q4_k_m": 15, "q5_k_m": 17, "q6_k": 18}
MIX_SHAPES = ("110m",)
# Real families' shapes (scripts/make_bench_family.py): seeded weights in a Hugging
# Face folder of the published config's dimensions, converted by `edgerun convert`
# and quantized by llama.cpp's quantizer to the types people download them in.
# Their vocabularies (262144, 151936) are part of what a decode step reads.
# `edgerun bench --matrix --families` runs them into their own section.
FAMILY_SHAPES = {"gemma3-270m": ("q8_0", "q4_k_m"), "qwen3-0.6b": ("q8_0", "q4_k_m")}
MATRIX_CTX = 256          # both engines: prompt 64 + 128 decode steps fit, KV caches stay small


def _repo():
    return pathlib.Path(__file__).resolve().parents[3]


def bench_model(out_dir, shape, wtype, log=None):
    """The benchmark GGUF of `shape` and `wtype` in out_dir, made (seeded, by
    scripts/make_bench_model.py) when missing."""
    out_dir = pathlib.Path(out_dir)
    if shape in FAMILY_SHAPES:
        return _family_model(out_dir, shape, wtype, log)
    path = out_dir / f"llama{shape}-{wtype}.gguf"
    if path.is_file():
        return path
    script = _repo() / "scripts" / "make_bench_model.py"
    if not script.is_file():
        raise FileNotFoundError(2, "benchmark models are made by scripts/make_bench_model.py (a checkout)",
                                str(script))
    spec = importlib.util.spec_from_file_location("_edgerun_make_bench_model", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if log:
        log(f"bench: making {path.name} ...")
    tmp = path.with_name(path.name + ".part")
    if wtype in MIX_TYPES:
        _llama_quantize(bench_model(out_dir, shape, "f32", log), tmp, MIX_TYPES[wtype])
    else:
        mod.build(tmp, wtype, 0, shape)
    os.replace(tmp, path)
    return path


def _family_model(out_dir, shape, wtype, log=None):
    """out_dir/SHAPE-WTYPE.gguf of a FAMILY_SHAPES shape, made by
    scripts/make_bench_family.py when missing (the F16 file it starts from is
    cached beside it)."""
    path = out_dir / f"{shape}-{wtype}.gguf"
    if path.is_file():
        return path
    script = _repo() / "scripts" / "make_bench_family.py"
    if not script.is_file():
        raise FileNotFoundError(2, "family benchmark models are made by scripts/make_bench_family.py (a checkout)",
                                str(script))
    spec = importlib.util.spec_from_file_location("_edgerun_make_bench_family", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    mod.build(tmp, shape, wtype, log=log or (lambda msg: None))
    os.replace(tmp, path)
    return path


def _llama_quantize(src, dst, ftype):
    """dst: src quantized to llama.cpp file type `ftype` by llama.cpp itself
    (llama-cpp-python's llama_model_quantize), in a child process so its
    library and logs stay out of this one."""
    code = ("import ctypes, sys, llama_cpp\n"
            "p = llama_cpp.llama_model_quantize_default_params()\n"
            "p.ftype = int(sys.argv[3])\n"
            "sys.exit(llama_cpp.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), ctypes.byref(p)))\n")
    r = subprocess.run([sys.executable, "-c", code, str(src), str(dst), str(ftype)], capture_output=True, text=True,
                       timeout=900)
    if r.returncode != 0:
        tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"llama.cpp's quantizer failed on {src} (file type {ftype}): {tail}; "
                           f"the K-quant mix rows need llama-cpp-python (pip install llama-cpp-python)")


def weight_bytes_per_token(path):
    """Bytes of weights one decode step reads: every tensor once, except that an
    untied token_embd contributes only the one row the step looks up."""
    import gguf
    r = gguf.GGUFReader(str(path))
    tensors = {t.name: t for t in r.tensors}
    tied = "output.weight" not in tensors
    total = 0
    for name, t in tensors.items():
        nbytes = int(t.n_bytes)
        if name == "token_embd.weight" and not tied:
            nbytes //= int(t.shape[-1]) if len(t.shape) > 1 else 1
        total += nbytes
    return total


def kv_bytes_per_token(path, prompt_tokens, gen_tokens, kv_elem=2):
    """Bytes of K/V cache the decode steps read on average, beside the weights:
    a step at position p reads the K and V rows of positions [0, p] in every
    layer; the steps run at positions prompt_tokens .. prompt_tokens +
    gen_tokens - 1 (F16 rows by default, as in the matrix)."""
    from ..convert.reference import GGUFModel
    m = GGUFModel(path)  # the hyper-parameters as the reference reads them (nothing dequantized)
    positions = prompt_tokens + (gen_tokens - 1) / 2 + 1  # the mean of p + 1 over the steps
    return int(m.n_layer * 2 * m.n_head_kv * m.head_dim * kv_elem * positions)


def membw_binary():
    """edgerun-membw (runtime_c/tools/membw.c) from $EDGERUN_MEMBW, beside
    $EDGERUN_CLI or $EDGERUN_LIB, or in build/native; None if not built."""
    cands = []
    if os.environ.get("EDGERUN_MEMBW"):
        cands.append(pathlib.Path(os.environ["EDGERUN_MEMBW"]))
    if os.environ.get("EDGERUN_CLI"):
        cands.append(pathlib.Path(os.environ["EDGERUN_CLI"]).parent / "edgerun-membw")
    if os.environ.get("EDGERUN_LIB"):
        cands.append(pathlib.Path(os.environ["EDGERUN_LIB"]).parent / "tools" / "edgerun-membw")
    cands.append(_repo() / "build" / "native" / "runtime_c" / "tools" / "edgerun-membw")
    return next((c for c in cands if c.is_file() and os.access(c, os.X_OK)), None)


NEAR_MIB = 256   # the per-row probe: 20 passes of 256 MiB, under a second


def _tool(name):
    """runtime_c/tools' `name` beside edgerun-membw (same build), or None."""
    membw = membw_binary()
    exe = membw.parent / name if membw else None
    return exe if exe and exe.is_file() and os.access(exe, os.X_OK) else None


def measure_core_latency():
    """A cache line's round trip in ns between the first two CPUs this process
    may run on (edgerun-corelat), or None (not built, one CPU)."""
    exe = _tool("edgerun-corelat")
    if exe is None:
        return None
    try:
        r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return None
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    return float(json.loads(lines[-1])["round_trip_ns"]) if r.returncode == 0 and lines else None


def round_trips_text(report, sep):
    """A report's core round trips before and after ("84 ns", "-" where none
    was measured) joined by sep, or "" when it has none (one thread, one CPU,
    an older report)."""
    core = report.get("core_round_trip_ns_before_after") or []
    if all(c is None for c in core):
        return ""
    return sep.join("-" if c is None else f"{c:.0f} ns" for c in core)


def measure_bandwidth(threads, mib=512, median=None):
    """{threads: GB/s} of streaming reads, and the probe used. The C probe
    (best of several passes) when built; otherwise numpy, one thread, which
    reads slower than the C loop and so overstates % of bandwidth. With the
    C probe, `median` (a dict) also receives each count's median pass."""
    exe = membw_binary()
    if exe is not None:
        r = subprocess.run([str(exe), str(mib), *map(str, threads)], capture_output=True, text=True, timeout=300)
        if r.returncode == 0:
            out = {}
            for line in r.stdout.splitlines():
                if line.startswith("{"):
                    d = json.loads(line)
                    out[int(d["threads"])] = float(d["gb_per_s"])
                    if median is not None and "median_gb_per_s" in d:
                        median[int(d["threads"])] = float(d["median_gb_per_s"])
            if out:
                return out, f"{exe.name} (C, {mib} MiB, best pass)"
    import numpy as np
    a = np.ones((mib << 20) // 8, dtype=np.uint64)
    best = 0.0
    for _ in range(5):
        t0 = time.perf_counter()
        a.sum()
        best = max(best, a.nbytes / (time.perf_counter() - t0) / 1e9)
    return {t: best for t in threads}, f"numpy sum ({mib} MiB, 1 thread, best of 5; C probe not built)"


def machine_info():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "Model name")):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import platform
    return {"cpu": cpu, "machine": platform.machine(), "cpus": os.cpu_count(),
            "python": platform.python_version()}


def _types_for(shape, types):
    if shape in FAMILY_SHAPES:
        return [t for t in types if t in FAMILY_SHAPES[shape]]
    return [t for t in types if t not in MIX_TYPES or shape in MIX_SHAPES]


def matrix(out_dir, shapes=SHAPES, types=MATRIX_TYPES + tuple(MIX_TYPES), threads=(1, 2), repeat=3, prompt_tokens=64,
           gen_tokens=128, peer=True, timeout=900, log=None, kv_type="f16"):
    """Both engines over shapes x types x threads on seeded benchmark models,
    with the read bandwidth measured in the same run. Returns a JSON-ready dict."""
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    t_start = time.time()
    # Every model is made before anything is timed, and written out: a file
    # just made by llama.cpp's quantizer is still being written back while
    # the next rows run, and on a 2-vCPU VM that cost the rows timed beside
    # it up to a third of their decode speed (110M Q5_K_S 228 tok/s in a
    # first matrix run, 342-380 in five runs of the same build afterwards).
    models = {}
    for shape in shapes:
        for wt in _types_for(shape, types):
            try:
                models[shape, wt] = bench_model(out_dir, shape, wt, log)
            except (OSError, RuntimeError) as e:
                models[shape, wt] = e
    os.sync()
    load_before = os.getloadavg()
    cpu_before = interference.snapshot()
    # Measured before and after the engines, keeping the higher figure per
    # thread count: a probe that other processes disturb only reads low, and
    # a low bandwidth would flatter every engine's % of it.
    med = {}
    core_ns = [measure_core_latency()]
    bw, probe = measure_bandwidth(threads, median=med)
    log("bench: read bandwidth " + ", ".join(f"{t} thread(s) {g:.1f} GB/s" for t, g in sorted(bw.items())))
    llama = peer and llama_cpp_available()
    engines = ("edgerun", "llama.cpp") if llama else ("edgerun",)
    rows = []
    n_runs = sum(len(_types_for(s, types)) for s in shapes) * len(threads) * len(engines)
    # On a terminal the log lines print above the bar (rich stands in for stderr).
    with console.progress("edgerun bench --matrix", total=n_runs) as bar:
        for shape in shapes:
            for wt in _types_for(shape, types):
                path = models[shape, wt]
                if isinstance(path, Exception):
                    log(f"bench: {shape} {wt}: skipped: {path}")
                    rows += [{"engine": engine, "shape": shape, "type": wt, "threads": t,
                              "error": f"no model: {path}"} for t in threads for engine in engines]
                    bar.advance(len(threads) * len(engines))
                    continue
                wbytes = weight_bytes_per_token(path)
                try:
                    kvbytes = kv_bytes_per_token(path, prompt_tokens, gen_tokens, 2 if kv_type == "f16" else 4)
                except Exception as e:  # noqa: BLE001 - the reference reader may not know a family's layout
                    log(f"bench: {shape} {wt}: K/V bytes not counted ({e})")
                    kvbytes = None
                for t in threads:
                    # The probe again, smaller, right before and after this row's
                    # engines: on a shared VM the bandwidth drifts by 10-15% within
                    # a run, and a row timed in a slow minute divided by the run's
                    # fastest probe says more about the minute than the engine.
                    near = measure_bandwidth([t], mib=NEAR_MIB)[0].get(t)
                    row = []
                    for engine in engines:
                        bar.update(description=f"{shape} {wt} t={t} {engine}")
                        r = _run_worker(engine, path, t, 64, MATRIX_CTX, prompt_tokens, gen_tokens, repeat,
                                        timeout, kv_type)
                        r.update(shape=shape, type=wt, model=str(path), weight_bytes_per_token=wbytes,
                                 bandwidth_gb_per_s=bw[t])
                        if kvbytes is not None:
                            r["kv_bytes_per_token"] = kvbytes
                        row.append(r)
                        bar.advance(1)
                        if "error" not in r:
                            gbs = r["decode_tokens_per_s"] * wbytes / 1e9
                            r["decode_weight_gb_per_s"] = gbs
                            r["pct_of_bandwidth"] = 100.0 * gbs / bw[t]
                            log(f"bench: {shape:>4} {wt:<5} t={t} {engine:<9} "
                                f"prefill {r['prefill_tokens_per_s']:8.1f}  "
                                f"decode {r['decode_tokens_per_s']:7.1f} tok/s ({r['pct_of_bandwidth']:5.1f}% of "
                                f"bandwidth so far)  peak RSS {_mib(r['peak_rss_bytes'])} MiB")
                        else:
                            log(f"bench: {shape} {wt} t={t} {engine}: error: {r['error']}")
                        rows.append(r)
                    near = max(near or 0.0, measure_bandwidth([t], mib=NEAR_MIB)[0].get(t) or 0.0)
                    for r in row:
                        if "error" not in r and near > 0:
                            r["near_bandwidth_gb_per_s"] = near
                            r["pct_of_near_bandwidth"] = 100.0 * r["decode_weight_gb_per_s"] / near
    med_after = {}
    bw_after, _ = measure_bandwidth(threads, median=med_after)
    core_ns.append(measure_core_latency())
    log("bench: read bandwidth after " + ", ".join(f"{t} thread(s) {g:.1f} GB/s" for t, g in sorted(bw_after.items())))
    bw_before = dict(bw)
    for t in threads:
        bw[t] = max(bw[t], bw_after.get(t, 0.0))
        if t in med or t in med_after:
            med[t] = max(med.get(t, 0.0), med_after.get(t, 0.0))
    for r in rows:
        if "error" not in r:
            r["bandwidth_gb_per_s"] = bw[r["threads"]]
            r["pct_of_bandwidth"] = 100.0 * r["decode_weight_gb_per_s"] / bw[r["threads"]]
            if med.get(r["threads"]):
                r["median_bandwidth_gb_per_s"] = med[r["threads"]]
                r["pct_of_median_bandwidth"] = 100.0 * r["decode_weight_gb_per_s"] / med[r["threads"]]
    if peer and not llama:
        peer_status = LLAMA_MISSING
    else:
        peer_status = "installed" if llama else "not run (--no-peer)"
    return {"kind": "matrix", "machine": machine_info(), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "seconds": round(time.time() - t_start, 1), "load_avg_before": list(load_before),
            "load_avg_after": list(os.getloadavg()), "interference": interference.measure(cpu_before),
            "bandwidth_gb_per_s": {str(k): v for k, v in bw.items()},
            "median_bandwidth_gb_per_s": {str(k): v for k, v in med.items()},
            "bandwidth_before_after": {str(k): [bw_before[k], bw_after.get(k)] for k in bw},
            "core_round_trip_ns_before_after": core_ns,
            "bandwidth_probe": probe, "prompt_tokens": prompt_tokens, "gen_tokens": gen_tokens,
            "repeat": repeat, "ctx": MATRIX_CTX, "kv_type": kv_type, "llama_cpp": peer_status, "results": rows}


def _find(rows, shape, wt, t, engine):
    return next((r for r in rows if r.get("shape") == shape and r.get("type") == wt and r.get("threads") == t
                 and r.get("engine") == engine and "error" not in r), None)


def kv_share_text(rows):
    """Per shape, the K/V bytes a decode step reads on average and their share
    on top of the weight bytes (smallest to largest over the types), or ""
    for reports without kv_bytes_per_token."""
    per = {}
    for r in rows:
        if "kv_bytes_per_token" in r and r.get("weight_bytes_per_token"):
            per.setdefault(r["shape"], {})[r["type"]] = (r["kv_bytes_per_token"], r["weight_bytes_per_token"])
    parts = []
    for shape, by_type in per.items():
        kv = next(iter(by_type.values()))[0]
        shares = sorted(100.0 * k / w for k, w in by_type.values())
        span = f"{shares[0]:.1f}%" if shares[0] == shares[-1] else f"{shares[0]:.1f}-{shares[-1]:.1f}%"
        parts.append(f"{shape}: {kv / 2**20:.2f} MiB a step, {span} on top of the weights")
    return "; ".join(parts)


def _fig(r, key, fmt="{:.1f}"):
    if r is None:
        return "-"
    lo, hi = r["spread"][key]
    return f"{fmt.format(r[key])} [{fmt.format(lo)}-{fmt.format(hi)}]"


def format_markdown(rep, plot_name=None):
    """docs/PERFORMANCE.md from a matrix report."""
    m = rep["machine"]
    la, lb = rep["load_avg_before"], rep["load_avg_after"]
    # Busy by what other work took during the run where it was measured
    # (interference.py); else by the load before it, the after figure being
    # mostly the run's own.
    cpu = rep.get("interference")
    busy = cpu["busy"] if cpu else la[0] > 0.5 * (m["cpus"] or 1)
    bw = ", ".join(f"{t} thread(s): {g:.1f} GB/s" for t, g in sorted(rep["bandwidth_gb_per_s"].items()))
    mbw = ", ".join(f"{t} thread(s): {g:.1f} GB/s"
                    for t, g in sorted(rep.get("median_bandwidth_gb_per_s", {}).items()))
    families = any(r.get("shape") in FAMILY_SHAPES for r in rep["results"])
    lines = [
        "## Throughput on real families' shapes: edgerun and llama.cpp" if families else
        "## Throughput: edgerun and llama.cpp",
        "",
        f"Written by `make bench` (`edgerun bench --matrix{' --families' if families else ''}`, "
        "pybind/edgerun/bench/engines.py) between the markers",
        "around this section; re-run it on an idle machine to refresh every number here. Raw figures:",
        f"build/bench/{'families' if families else 'matrix'}.json.",
        "",
        f"* machine: {m['cpu']} ({m['machine']}, {m['cpus']} CPUs), {rep['date']}",
        f"* load average (1/5/15 min) before: {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}; after: "
        f"{lb[0]:.2f} {lb[1]:.2f} {lb[2]:.2f} (the run's own threads count in it)"
        + (f"; during the run: {interference.describe(cpu)}" if cpu else "")
        + ("  **(machine was busy: figures are pessimistic and noisy)**" if busy else ""),
        f"* read bandwidth measured in the same run, before and after the engines, the higher kept: {bw} "
        f"({rep['bandwidth_probe']})" + (f"; median pass: {mbw}" if mbw else ""),
    ]
    core = round_trips_text(rep, " and ")
    if core:
        lines.append(
            f"* a cache line's round trip between the first two CPUs (edgerun-corelat), before and after: {core}"
            " (tens of ns: cores sharing a last-level cache; hundreds: not, where 2-thread bandwidth can"
            " read far higher than 2-thread decode can use)")
    lines += [
        f"* workload: {rep['prompt_tokens']}-token prompt (prefill, one batch of 64), then {rep['gen_tokens']} "
        f"greedy decode steps; context {rep['ctx']}; KV cache {rep.get('kv_type', 'f32').upper()} in both engines "
        f"(llama.cpp's default); each engine in its own process; "
        f"median of {rep['repeat']} runs, [min-max] beside it",
        f"* peer: llama.cpp through llama-cpp-python ({rep['llama_cpp']}), same GGUF files, same thread counts",
        (f"* models: seeded random weights in Hugging Face folders of the published configs' dimensions"
         f" (scripts/make_bench_family.py), converted to F16 by `edgerun convert` and quantized by llama.cpp's"
         f" own quantizer (llama_model_quantize) to its Q8_0 and Q4_K_M mixes. gemma3-270m: hidden 640, 18"
         f" layers (sliding window 512 on 5 of every 6), 4 heads on 1 K/V head of 256, FFN 2048 (GeGLU), vocab"
         f" 262144; qwen3-0.6b: hidden 1024, 28 layers, 16 heads on 8 K/V heads of 128, QK norm, FFN 3072, vocab"
         f" 151936; both tie the output to the embeddings, so every decode step reads the whole vocabulary"
         f" matrix (Q6_K in the Q4_K_M files, as llama.cpp's mix makes it)") if families else
        (f"* models: seeded random weights, shapes of the stories Llamas (15M: dim 288, 6 layers; 110M: dim 768,"
         f" 12 layers; vocab 32000, tied embeddings). 15M Q4_K: 288-wide rows cannot hold K-quant super-blocks,"
         f" so only ffn_down is Q4_K there and the rest Q4_0 (scripts/make_bench_model.py). 110M"
         f" {', '.join(MIX_TYPES)}: the F32 file quantized by llama.cpp's own quantizer (llama_model_quantize),"
         f" as the files people download are made: its per-tensor mix (Q6_K output, more bits on attn_v/ffn_down"
         f" in the _M/_L mixes)"),
        "",
        "`% BW` = decode tokens/s x weight bytes per token / read bandwidth at the same thread count: how",
        "close decode gets to the memory-bound limit. A 15M file smaller than the last-level cache can",
        "exceed 100% (its weights stay in cache between tokens). `% BW` divides by the probe's best pass,",
        "`% med` by its median pass: on a shared VM one lucky pass can read far above what a pass",
        "typically gets, most of all with two threads. `% near` divides by the best pass of a probe",
        "run right before and right after that row's engines (256 MiB; the higher kept): this VM's",
        "bandwidth drifts by 10-15% within one run, and the whole-run probes catch its fastest minute.",
    ]
    kv = kv_share_text(rep["results"])
    if kv:
        lines += ["Not counted in the weight bytes: the K/V cache every decode step also reads, all earlier",
                  f"positions of every layer, which no engine can skip ({kv})."]
    lines += [
        "",
        "| shape | type | threads | engine | prefill tok/s | decode tok/s | % BW | % med | % near | peak RSS MiB "
        "| decode vs llama.cpp |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = rep["results"]
    for shape in SHAPES + tuple(FAMILY_SHAPES):
        for wt in _types_for(shape, MATRIX_TYPES + tuple(MIX_TYPES)):
            for t in sorted({r["threads"] for r in rows}):
                for engine in ENGINES:
                    r = _find(rows, shape, wt, t, engine)
                    err = next((x for x in rows if x.get("shape") == shape and x.get("type") == wt
                                and x.get("threads") == t and x.get("engine") == engine and "error" in x), None)
                    if r is None and err is None:
                        continue
                    if r is None:
                        lines.append(f"| {shape} | {wt} | {t} | {engine} | error: {err['error']} | | | | | | |")
                        continue
                    ratio = "-"
                    peer = _find(rows, shape, wt, t, "llama.cpp")
                    if engine == "edgerun" and peer:
                        ratio = f"{r['decode_tokens_per_s'] / peer['decode_tokens_per_s']:.2f}x"
                    lines.append(f"| {shape} | {wt} | {t} | {engine} | {_fig(r, 'prefill_tokens_per_s')} | "
                                 f"{_fig(r, 'decode_tokens_per_s')} | {r['pct_of_bandwidth']:.0f}% | "
                                 + (f"{r['pct_of_median_bandwidth']:.0f}%" if "pct_of_median_bandwidth" in r else "-")
                                 + " | "
                                 + (f"{r['pct_of_near_bandwidth']:.0f}%" if "pct_of_near_bandwidth" in r else "-")
                                 + " | "
                                 f"{_mib(r['peak_rss_bytes'])} | {ratio} |")
    if plot_name:
        lines += ["", f"![decode tokens/s and % of bandwidth]({plot_name})"]
    lines += ["", f"Matrix took {rep['seconds']:.0f} s."]
    return "\n".join(lines)


DOC_BEGIN = "<!-- edgerun bench --matrix: begin (generated; edits inside are overwritten) -->"
DOC_END = "<!-- edgerun bench --matrix: end -->"
FAMILY_DOC_BEGIN = "<!-- edgerun bench --matrix --families: begin (generated; edits inside are overwritten) -->"
FAMILY_DOC_END = "<!-- edgerun bench --matrix --families: end -->"


def update_doc(text, section, begin=DOC_BEGIN, end=DOC_END):
    """The document `text` with the generated `section` between `begin` and
    `end` (default: the matrix's markers; other benchmarks pass their own):
    replaced in place when the markers are there, else inserted after
    the title line (or as the whole file when empty). Everything else in the
    file — other benchmarks' sections — is kept."""
    block = f"{begin}\n{section}\n{end}\n"
    if begin in text and end in text:
        a = text.index(begin)
        b = text.index(end) + len(end)
        rest = text[b:]
        return text[:a] + block + (rest[1:] if rest.startswith("\n") else rest)
    if not text.strip():
        return "# Performance\n\n" + block
    lines = text.splitlines(keepends=True)
    if lines and lines[0].startswith("# "):
        return lines[0] + "\n" + block + "\n" + "".join(lines[1:]).lstrip("\n")
    return block + "\n" + text



def write_matrix(rep, out_dir, out=None, doc=None):
    """Writes the matrix's JSON (`out`, default out_dir/matrix.json) and, when
    `doc` names a Markdown file, its section of that file and the plot beside
    it (performance.png). Returns (doc path or None, png path or None: no
    matplotlib)."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out or out_dir / "matrix.json", "w") as f:
        json.dump(rep, f, indent=2)
        f.write("\n")
    if not doc:
        return None, None
    doc = pathlib.Path(doc)
    families = any(r.get("shape") in FAMILY_SHAPES for r in rep["results"])
    png = doc.with_name("performance-families.png" if families else "performance.png")
    has_plot = plot(rep, png)
    doc.parent.mkdir(parents=True, exist_ok=True)
    old = doc.read_text() if doc.is_file() else ""
    marks = (FAMILY_DOC_BEGIN, FAMILY_DOC_END) if families else (DOC_BEGIN, DOC_END)
    if families and marks[0] not in old and DOC_END in old:
        # first run: the families' section goes after the matrix's notes, before the
        # next section (a "## " heading or another benchmark's marker); update_doc
        # alone would put it above the matrix
        after = old.index(DOC_END) + len(DOC_END)
        cuts = [i + 1 for i in (old.find("\n## ", after), old.find("\n<!-- edgerun bench", after)) if i >= 0]
        cut = min(cuts) if cuts else len(old)
        old = old[:cut] + marks[0] + "\n" + marks[1] + "\n\n" + old[cut:]
    doc.write_text(update_doc(old, format_markdown(rep, png.name if has_plot else None), *marks))
    return doc, (png if has_plot else None)

def plot(rep, png_path):
    """Decode tok/s per configuration, both engines, with the spread as error
    bars and % of bandwidth on top; one panel per shape. False without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = rep["results"]
    shapes = [s for s in SHAPES + tuple(FAMILY_SHAPES) if any(r.get("shape") == s for r in rows)]
    threads = sorted({r["threads"] for r in rows})
    types_of = {shape: [wt for wt in _types_for(shape, MATRIX_TYPES + tuple(MIX_TYPES))
                        if any(r.get("shape") == shape and r.get("type") == wt for r in rows)] for shape in shapes}
    # panel widths follow their bar counts, so the 110M panel's many types are as legible as the 15M's four
    bars = [max(1, len(types_of[s]) * len(threads)) for s in shapes]
    fig, axes = plt.subplots(1, len(shapes), figsize=(0.5 * sum(bars) + 1.5 * len(shapes), 4.2), squeeze=False,
                             gridspec_kw={"width_ratios": bars})
    for ax, shape in zip(axes[0], shapes):
        types = types_of[shape]
        labels = [f"{wt}\n{t}T" for wt in types for t in threads]
        width = 0.38
        for k, engine in enumerate(ENGINES):
            xs, ys, err, pct = [], [], [[], []], []
            for i, (wt, t) in enumerate((wt, t) for wt in types for t in threads):
                r = _find(rows, shape, wt, t, engine)
                if r is None:
                    continue
                lo, hi = r["spread"]["decode_tokens_per_s"]
                xs.append(i + (k - 0.5) * width)
                ys.append(r["decode_tokens_per_s"])
                err[0].append(r["decode_tokens_per_s"] - lo)
                err[1].append(hi - r["decode_tokens_per_s"])
                pct.append(r["pct_of_bandwidth"])
            if not xs:
                continue
            ax.bar(xs, ys, width, yerr=err, capsize=2, label=engine)
            for x, y, p in zip(xs, ys, pct):
                ax.text(x, y, f"{p:.0f}%", ha="center", va="bottom", fontsize=6)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_title(f"{shape}: decode tokens/s (label: % of read bandwidth)", fontsize=9)
        ax.set_ylabel("tokens/s")
        ax.legend(fontsize=7)
    la = rep["load_avg_before"][0]
    fig.suptitle(f"{rep['machine']['cpu']}, load avg {la:.1f}, median of {rep['repeat']}", fontsize=9)
    fig.tight_layout()
    pathlib.Path(png_path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png_path, dpi=110)
    plt.close(fig)
    return True


if __name__ == "__main__":
    sys.exit(_worker_main(sys.argv[1:]))
