#!/usr/bin/env python3
"""Decode speed of two builds of the runtime, in pairs, told apart by where the
host put the vCPUs (a benchmark: it reports, it does not fail).

    python scripts/ab_pairs.py LIB_A LIB_B [MODEL] [--threads 2] [--pairs 100] [--json]
                               [--isa-a NAME] [--isa-b NAME]

On a VM the 2-thread figure of one build moves by +-15% from minute to minute,
more than most changes it is meant to judge, and the host moves the two vCPUs
between cores that share a last-level cache ("near": a cache line's round trip
of tens of ns) and cores that do not ("far": hundreds), where the same build
decodes at a different speed (docs/PERFORMANCE.md, "Two threads on far-apart
vCPUs"). So: two processes hold the model, one per build (EDGERUN_LIB), and
take turns generating (--gen-tokens greedy steps after a --prompt-tokens
prompt, decode tokens/s as edgerun's stats time it), in alternating order; a
pair is kept only when edgerun-corelat's round trip before and after it says
the same placement. Reported per placement: the pairs kept, each build's
median, and the median and range of B/A over the pairs. --isa-a/--isa-b
force a side's kernel table (EDGERUN_ISA), so one build can be set against
itself table by table (LIB_A and LIB_B the same file). One CPU, or no
edgerun-corelat built: every pair counts as "unknown".
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "pybind"))

# Round trips on the VM of docs/PERFORMANCE.md come in two clusters, 60-150 ns
# and 320-600 ns; a pair between the two bounds (or astride them) is dropped.
NEAR_NS, FAR_NS = 200.0, 250.0

WORKER = """
import sys, edgerun
path, threads, p, g = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
m = edgerun.Model(path, n_threads=threads, kv_type="f16")
p = min(p, m.n_ctx // 2)
g = min(g, m.n_ctx - p - 1)  # a small model's context holds the prompt and every step
ids = [1 + i % (m.n_vocab - 1) for i in range(p)]
m.generate(ids, max_tokens=4, stop_at_eos=False)
print("ready", m.isa, flush=True)
for _ in sys.stdin:
    m.generate(ids, max_tokens=g + 1, stop_at_eos=False)
    print(m.stats()["decode_tokens_per_s"], flush=True)
"""


def placement(before, after):
    if before is None or after is None:
        return "unknown"
    if before < NEAR_NS and after < NEAR_NS:
        return "near"
    if before > FAR_NS and after > FAR_NS:
        return "far"
    return None


def summarize(pairs):
    """{placement: {"pairs", "a", "b", "ratio", "ratio_range"}} from (placement, a, b) tuples."""
    out = {}
    for kind in ("near", "far", "unknown"):
        ab = [(a, b) for k, a, b in pairs if k == kind]
        if ab:
            r = sorted(b / a for a, b in ab)
            out[kind] = {"pairs": len(ab), "a": statistics.median(a for a, _ in ab),
                         "b": statistics.median(b for _, b in ab), "ratio": statistics.median(r),
                         "ratio_range": [r[0], r[-1]]}
    return out


def main(argv=None):
    from edgerun import model
    from edgerun.bench import engines as bench
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("lib_a", help="libedgerun.so of build A")
    ap.add_argument("lib_b", help="libedgerun.so of build B")
    ap.add_argument("model", nargs="?", help="GGUF file (default: the embedded model)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pairs", type=int, default=100, help="pairs run (kept: those whose placement held)")
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    ap.add_argument("--isa-a", metavar="NAME", help="kernel table of side A (default: the automatic choice)")
    ap.add_argument("--isa-b", metavar="NAME", help="kernel table of side B (default: the automatic choice)")
    a = ap.parse_args(argv)
    for lib in (a.lib_a, a.lib_b):
        if not os.path.isfile(lib):
            ap.error(f"{lib}: no such library (build one with `make test`, copy it aside, rebuild)")
    path = a.model or model.default_model_path()
    procs, isas = [], []
    for lib, isa in ((a.lib_a, a.isa_a), (a.lib_b, a.isa_b)):
        env = dict(os.environ, EDGERUN_LIB=lib, PYTHONPATH=str(ROOT / "pybind"))
        if isa:
            env["EDGERUN_ISA"] = isa
        p = subprocess.Popen([sys.executable, "-c", WORKER, str(path), str(a.threads), str(a.prompt_tokens),
                              str(a.gen_tokens)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = p.stdout.readline().split()
        if ready[:1] != ["ready"]:
            sys.exit(f"ab_pairs: the worker for {lib}{' with table ' + isa if isa else ''} did not start "
                     "(run it alone to see why)")
        procs.append(p)
        isas.append(ready[1] if len(ready) > 1 else "?")

    def run(p):
        p.stdin.write("go\n")
        p.stdin.flush()
        return float(p.stdout.readline())

    pairs, dropped = [], 0
    try:
        for k in range(a.pairs):
            before = bench.measure_core_latency()
            r = [0.0, 0.0]
            for i in ((0, 1) if k % 2 == 0 else (1, 0)):
                r[i] = run(procs[i])
            kind = placement(before, bench.measure_core_latency())
            if kind is None:
                dropped += 1
            else:
                pairs.append((kind, r[0], r[1]))
    finally:
        for p in procs:
            p.stdin.close()
            p.wait()
    res = {"model": str(path), "threads": a.threads, "lib_a": a.lib_a, "lib_b": a.lib_b, "isa_a": isas[0],
           "isa_b": isas[1], "pairs_run": a.pairs,
           "dropped": dropped, "by_placement": summarize(pairs)}
    if a.json:
        print(json.dumps(res))
        return 0
    print(f"{path}, {a.threads} threads, decode tok/s; {a.pairs} pairs, {dropped} dropped (placement changed); "
          f"tables A {isas[0]}, B {isas[1]}")
    for kind, s in res["by_placement"].items():
        print(f"{kind:8s} {s['pairs']:4d} pairs  A {s['a']:8.1f}  B {s['b']:8.1f}  B/A {s['ratio']:.3f} "
              f"[{s['ratio_range'][0]:.3f}-{s['ratio_range'][1]:.3f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
