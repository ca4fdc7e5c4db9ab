"""The CUDA backend's benchmark: decode and prefill tokens/s on the GPU, and
decode as a share of the GPU's memory bandwidth measured in the same run.

    python scripts/bench_cuda.py [--out DIR] [--doc docs/PERFORMANCE_CUDA.md]
    edgerun bench MODEL --device cuda

Models: the 110M shape of the CPU benchmark (scripts/make_bench_model.py) in
Q8_0, Q4_0 and F16. Per model: prefill of 64 tokens, then 128 greedy decode
steps (each one er_decode, i.e. one graph launch + logits read-back, plus
er_sample on the device); best of `repeat` runs. Decode is bandwidth-bound:
each token streams every weight byte once (the embedding table excepted: a
look-up reads one row; a tied table is read whole by the output projection),
so bytes/token x tokens/s against the device-to-device copy rate
(edgerun-cuda-membw) is the figure of merit; the target is >= 60%.
llama.cpp's CUDA build runs the same files through llama-cpp-python when it
is installed with GPU offload; otherwise the table says "not available".
"""
import json
import pathlib
import subprocess
import sys
import time

import numpy as np

TYPES = ("q8_0", "q4_0", "f16")
PROMPT, GEN = 64, 128


def weight_bytes_per_token(model):
    tensors = {t["name"]: t for t in model.tensors()}
    total = sum(t["nbytes"] for t in tensors.values())
    tied = "output.weight" not in tensors
    if not tied and "token_embd.weight" in tensors:
        total -= tensors["token_embd.weight"]["nbytes"]
    return total


def _ids(n_vocab, n, seed=0):
    return [int(x) for x in np.random.RandomState(seed).randint(3, n_vocab, n)]


def run_edgerun(path, prompt=PROMPT, gen=GEN, repeat=3, n_ctx=512):
    from ..model import Model
    with Model(path, n_ctx=n_ctx, n_batch=64, device="cuda") as m:
        ids = _ids(m.n_vocab, prompt)
        best = None
        with m.session() as s:
            s.decode(ids[:8])              # first steps after open: nothing lazy left to pay
            for _ in range(repeat):
                s.reset()
                t0 = time.perf_counter()
                s.decode(ids)
                t1 = time.perf_counter()
                tok = s.sample()
                t2 = time.perf_counter()
                for _ in range(gen):
                    s.decode([tok])
                    tok = s.sample()
                t3 = time.perf_counter()
                r = {"prefill_tokens_per_s": prompt / (t1 - t0), "decode_tokens_per_s": gen / (t3 - t2)}
                if best is None or r["decode_tokens_per_s"] > best["decode_tokens_per_s"]:
                    best = r
        best["weight_bytes_per_token"] = weight_bytes_per_token(m)
        best["device_bytes"] = m.plan()["device_bytes"]
        best["isa_reason"] = m.isa_reason
    return best



def run_one(path, prompt=PROMPT, gen=GEN, repeat=3, n_ctx=512):
    """`edgerun bench MODEL --device cuda`: run_edgerun, plus the weight bytes
    decode streams per second (GB/s) and the model's path."""
    r = run_edgerun(path, prompt=prompt, gen=gen, repeat=repeat, n_ctx=n_ctx)
    r["weight_gbps"] = r["weight_bytes_per_token"] * r["decode_tokens_per_s"] / 1e9
    r["model"] = str(path)
    return r

def run_llama_cpp(path, prompt=PROMPT, gen=GEN, n_ctx=512):
    """llama.cpp with every layer on the GPU, or the reason it cannot run."""
    try:
        import llama_cpp
    except ImportError:
        return {"error": "not available (llama-cpp-python is not installed)"}
    if not getattr(llama_cpp, "llama_supports_gpu_offload", lambda: False)():
        return {"error": "not available (llama-cpp-python was built without GPU offload)"}
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=n_ctx, n_batch=64, n_ubatch=64, n_gpu_layers=-1,
                          logits_all=False, verbose=False)
    n_vocab = llm.n_vocab()
    ids = _ids(n_vocab, prompt)

    def argmax():
        ptr = llm._ctx.get_logits()
        return int(np.ctypeslib.as_array(ptr, shape=(n_vocab,)).argmax())

    llm.eval(ids[:8])
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(ids)
    t1 = time.perf_counter()
    tok = argmax()
    t2 = time.perf_counter()
    for _ in range(gen):
        llm.eval([tok])
        tok = argmax()
    t3 = time.perf_counter()
    llm.close()
    return {"prefill_tokens_per_s": prompt / (t1 - t0), "decode_tokens_per_s": gen / (t3 - t2),
            "version": getattr(llama_cpp, "__version__", "?")}


def measure_bandwidth(membw):
    r = subprocess.run([str(membw)], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"{membw} failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def make_models(bench_dir, types=TYPES):
    repo = pathlib.Path(__file__).resolve().parents[3]
    out = {}
    for t in types:
        p = pathlib.Path(bench_dir) / f"llama110m-{t}.gguf"
        if not p.exists():
            p.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([sys.executable, str(repo / "scripts" / "make_bench_model.py"), str(p), "--type", t,
                            "--shape", "110m"], check=True)
        out[t] = p
    return out


def run(bench_dir, membw, types=TYPES, repeat=3, peer=True):
    bw = measure_bandwidth(membw)
    rows = []
    for t, path in make_models(bench_dir, types).items():
        row = {"model": path.name, "type": t}
        try:
            e = run_edgerun(path, repeat=repeat)
            gbps = e["weight_bytes_per_token"] * e["decode_tokens_per_s"] / 1e9
            row.update(e, decode_gbps=gbps, bandwidth_pct=100 * gbps / bw["copy_gbps"])
        except Exception as ex:  # one failed model must not hide the others
            row["error"] = f"{type(ex).__name__}: {ex}"
        row["llama_cpp"] = run_llama_cpp(path) if peer else {"error": "skipped (--no-peer)"}
        rows.append(row)
    return {"device": bw["device"], "copy_gbps": bw["copy_gbps"], "prompt_tokens": PROMPT, "gen_tokens": GEN,
            "target_bandwidth_pct": 60, "results": rows}


def format_markdown(rep):
    lines = [f"GPU: {rep['device']}; device-to-device copy {rep['copy_gbps']:.0f} GB/s (measured in the same run). "
             f"Prefill {rep['prompt_tokens']} tokens, decode {rep['gen_tokens']} greedy tokens, batch 1.", "",
             "| model | edgerun prefill tok/s | edgerun decode tok/s | weights/token | decode GB/s | % of bandwidth "
             "| llama.cpp prefill tok/s | llama.cpp decode tok/s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rep["results"]:
        peer = r["llama_cpp"]
        pp = f"{peer['prefill_tokens_per_s']:.0f}" if "error" not in peer else peer["error"]
        pd = f"{peer['decode_tokens_per_s']:.0f}" if "error" not in peer else "-"
        if "error" in r:
            lines.append(f"| {r['model']} | error: {r['error']} | | | | | {pp} | {pd} |")
            continue
        lines.append(f"| {r['model']} | {r['prefill_tokens_per_s']:.0f} | {r['decode_tokens_per_s']:.0f} | "
                     f"{r['weight_bytes_per_token'] / 2**20:.1f} MiB | {r['decode_gbps']:.0f} | "
                     f"{r['bandwidth_pct']:.0f}% | {pp} | {pd} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench-dir", default="build/bench", help="where the 110M models are made (cached)")
    ap.add_argument("--membw", default="build/cuda/runtime_c/edgerun-cuda-membw", help="the bandwidth tool")
    ap.add_argument("--out", default="build/bench/cuda.json", help="JSON report")
    ap.add_argument("--doc", default="docs/PERFORMANCE_CUDA.md", help="markdown report ('none' to skip)")
    ap.add_argument("--types", default=",".join(TYPES))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-peer", action="store_true")
    a = ap.parse_args(argv)
    rep = run(a.bench_dir, a.membw, types=a.types.split(","), repeat=a.repeat, peer=not a.no_peer)
    pathlib.Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(a.out).write_text(json.dumps(rep, indent=2) + "\n")
    md = format_markdown(rep)
    print(md)
    if a.doc != "none":
        doc = pathlib.Path(a.doc)
        doc.parent.mkdir(parents=True, exist_ok=True)
        doc.write_text("# CUDA backend performance\n\nWritten by `scripts/bench_cuda.py` (`make gpu-check` runs "
                       "it); see pybind/edgerun/bench/cuda.py for the method.\n\n" + md)
    return 1 if any("error" in r for r in rep["results"]) else 0
