"""`edgerun bench [MODEL]`: prefill and decode tokens/s, TTFT, peak RSS and arena bytes,
for edgerun and for llama.cpp (llama-cpp-python, when installed) on the same file.

`edgerun bench --board B`: the board's cross build under qemu, per CPU model:
TTFT, per-token latency p50/p90/p99, tokens/s, arena bytes, raw and normalized
by a calibration workload; JSON + PNG; the board's latency gates (edgerun/bench/board.py).

`edgerun bench --qemu-isa`: each Arm kernel table's speed over generic on the
emulated CPU models that can run it, and its greedy tokens against generic's
(edgerun/bench/isa.py).

`edgerun bench --footprint`: stripped bytes of the rpi5 build's aarch64
edgerun-cli (budget 1 MB) and of the host's libedgerun.so and edgerun-cli,
beside llama.cpp's libraries from llama-cpp-python (edgerun/bench/footprint.py)."""
import json
import pathlib
import sys

from .. import console
from .options import formatter

EPILOG = """\
examples:
  edgerun bench                                   # the embedded default model
  edgerun bench model.gguf --threads 1,2 --prompt-tokens 128 --gen-tokens 64
  edgerun bench model.gguf --json > bench.json    # for machines
  edgerun bench model.gguf --no-peer              # edgerun only
  edgerun bench --board rpi5                      # cross build under qemu, gated
  edgerun bench --board neoverse-v1 --update-baseline -o out/
  edgerun bench --qemu-isa                        # Arm tables vs generic under qemu -> docs/PERFORMANCE.md
  edgerun bench --qemu-isa --quick --doc none     # Q8_0 on cortex-a76 and SVE-128 only
  edgerun bench --footprint                       # stripped sizes beside llama.cpp's libraries

Each engine runs in its own process on the same prompt ids, after a warm-up
pass. Decode steps ignore end-of-text so every run does the same work. The peer
is llama.cpp through the optional `llama-cpp-python` package
(pip install llama-cpp-python, or `make bench`).

With --board, the board's edgerun-cli runs under qemu-user for each CPU model
the board file lists, beside a calibration program run under the same qemu in
the same job; the gates (p99/p50 budget, normalized tokens/s against
benchmarks/baselines/<board>.json) come from the board file. A failed gate exits 1.

With --qemu-isa, a plain Armv8.0-A build (build/armv8-a, built when missing)
runs the 15M benchmark models under qemu-aarch64 on cortex-a72, cortex-a76
and `max` with SVE at 128/256/512 bits, once per kernel table each CPU model
runs (EDGERUN_ISA), one thread, timed by CPU time; the speed-up of a table is
over generic on the same CPU model. Emulated speed is not hardware speed: the
ratios catch kernel regressions and tables that fall back to generic. A table
whose greedy tokens differ from generic's, or a failed run, exits 1.
"""


def _thread_list(text):
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        vals = []
    if not vals or min(vals) < 1:
        raise ValueError(f"--threads expects a comma-separated list of positive integers, got {text!r}")
    return vals


def register(sub):
    p = sub.add_parser("bench", help="speed and memory, edgerun beside llama.cpp", description=__doc__,
                       epilog=EPILOG, formatter_class=formatter())
    p.add_argument("model_pos", nargs="?", default=None, metavar="MODEL",
                   help="GGUF file (default: the embedded model)")
    p.add_argument("--threads", "-t", default="1", metavar="LIST", help="thread counts, e.g. 1,2 (default 1)")
    p.add_argument("--prompt-tokens", type=int, default=None, metavar="N",
                   help="prompt length (default 64; 16 with --board)")
    p.add_argument("--gen-tokens", type=int, default=None, metavar="N",
                   help="decode steps (default 128; 48 with --board)")
    p.add_argument("--batch", type=int, default=64, metavar="N", help="prefill chunk for both engines (default 64)")
    p.add_argument("--ctx", type=int, default=0, metavar="N",
                   help="context length (default: edgerun's default for the model; the peer is asked for the same, "
                        "which llama.cpp rounds up to a multiple of 256)")
    p.add_argument("--repeat", type=int, default=None, metavar="N",
                   help="runs per engine; the median is reported, the spread beside it (default 1; with --board: 5, "
                        "per-step median)")
    p.add_argument("--no-peer", action="store_true", help="skip llama.cpp")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cuda: the CUDA backend on GPU 0 (prefill/decode tok/s, weight GB/s; "
                        "scripts/bench_cuda.py runs the full GPU benchmark)")
    p.add_argument("--out", default=None, metavar="FILE.json", help="also write the JSON report to FILE.json")
    b = p.add_argument_group("board benchmark (under qemu-user)")
    b.add_argument("--board", metavar="B", help="benchmark the cross build for board B (boards/B.yaml)")
    b.add_argument("--model", metavar="M", help="GGUF file for --board (default: the embedded model)")
    b.add_argument("--cpu", action="append", metavar="SPEC", help="only this qemu CPU model (repeatable)")
    b.add_argument("--update-baseline", action="store_true",
                   help="rewrite benchmarks/baselines/<board>.json from this run")
    b.add_argument("--baseline", metavar="FILE.json",
                   help="baseline to gate against (and --update-baseline writes) instead of the stored one")
    b.add_argument("-o", "--out-dir", metavar="DIR", help="where the JSON and PNG go (default build/<board>/bench)")
    mx = p.add_argument_group("benchmark matrix (make bench)")
    mx.add_argument("--matrix", action="store_true",
                    help="both engines over the 15M and 110M shapes, F32/Q8_0/Q4_0/Q4_K, and on 110M the "
                         "files llama.cpp's quantizer makes (Q4_1 Q5_0 Q5_1 IQ4_NL IQ4_XS Q2_K Q3_K_S/M/L "
                         "Q4_K_S/M Q5_K_S/M Q6_K), --threads (default 1,2), "
                         "with the machine's read bandwidth; writes --doc and a PNG beside it")
    mx.add_argument("--types", metavar="T,T", default=None,
                    help="--matrix over these weight types only (e.g. q4_1,iq4_xs; default: all of them)")
    mx.add_argument("--quick", action="store_true", help="--matrix on the 15M shape only")
    mx.add_argument("--families", action="store_true",
                    help="--matrix on real families' shapes (Gemma-3-270M, Qwen3-0.6B; seeded weights) in Q8_0 "
                         "and Q4_K_M, into their own section of --doc and BENCH_DIR/families.json")
    mx.add_argument("--bench-dir", default="build/bench", metavar="DIR",
                    help="benchmark models and matrix.json (default build/bench)")
    mx.add_argument("--doc", default="docs/PERFORMANCE.md", metavar="FILE.md",
                    help="report to write (default docs/PERFORMANCE.md; 'none' to skip)")
    fp = p.add_argument_group("footprint (make bench)")
    fp.add_argument("--footprint", action="store_true",
                    help="stripped sizes: the rpi5 build's aarch64 edgerun-cli (built when needed; budget 1 MB), "
                         "the host libedgerun.so and edgerun-cli, and llama.cpp's libraries from llama-cpp-python "
                         "(uses --json, --out)")
    q = p.add_argument_group("Arm kernel tables under qemu (make bench-qemu-isa)")
    q.add_argument("--qemu-isa", action="store_true",
                   help="speed-up of each Arm kernel table over generic on emulated CPU models (uses --bench-dir, "
                        "--doc, --json, --repeat [default 2], --quick: Q8_0 on cortex-a76 and SVE-128, --cpu, "
                        "--out [default BENCH_DIR/qemu_isa.json], MODEL instead of the 15M models)")
    p.set_defaults(func=main)


def main(args):
    for name in ("prompt_tokens", "gen_tokens", "batch", "repeat"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1")
    threads = _thread_list(args.threads)
    if args.footprint:
        return _footprint(args)
    if args.qemu_isa:
        return _qemu_isa(args, threads)
    if args.board:
        from ..bench import board as board_bench
        args.threads = threads[0]
        return board_bench.main(args)
    for flag in ("model", "cpu", "update_baseline", "out_dir", "baseline"):
        if getattr(args, flag):
            raise ValueError(f"--{flag.replace('_', '-')} needs --board")
    if args.matrix or args.quick or args.families:
        return _matrix(args, threads)
    if args.device == "cuda":
        return _cuda(args)
    from ..bench import engines as bench
    args.prompt_tokens = args.prompt_tokens or 64
    args.gen_tokens = args.gen_tokens or 128
    args.repeat = args.repeat or 1
    from ..model import default_model_path, plan
    model = args.model_pos if args.model_pos is not None else default_model_path()
    # A file edgerun cannot open is one error line here, not a table of
    # failed rows after the workers have each tried it.
    plan(model, n_ctx=args.ctx, n_batch=args.batch)
    report = bench.run(model, threads=threads, prompt_tokens=args.prompt_tokens, gen_tokens=args.gen_tokens,
                       batch=args.batch, ctx=args.ctx, repeat=args.repeat, peer=not args.no_peer)
    _emit(args, report, lambda: bench.format_table(report), lambda: _table(bench, report))
    # A failed engine is a failed benchmark: scripts must not record half a table.
    return 1 if any("error" in r for r in report["results"]) else 0


def _emit(args, report, text, table=None):
    """--out FILE.json gets the report; stdout gets it as JSON with --json, else
    text(), or on a terminal table() where there is one."""
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
    if args.json:
        print(json.dumps(report, indent=2))
    elif table is not None and console.is_terminal(sys.stdout):
        table()
    else:
        print(text())


def _table(bench, report):
    title, rows, notes = bench.table_parts(report)
    # A failed engine's row has its error in the third column and blanks after.
    rows = [r if len(r) == len(bench.TABLE_HEAD) else r + ("",) * (len(bench.TABLE_HEAD) - len(r)) for r in rows]
    console.table(bench.TABLE_HEAD, rows, title=title, right=bench.TABLE_HEAD[1:])
    for line in notes:
        print(line)


def _matrix(args, threads):
    """`--matrix` / `--quick`: see bench.matrix."""
    from ..bench import engines as bench
    if args.model_pos:
        raise ValueError("--matrix makes its own benchmark models; do not pass MODEL")
    if args.threads == "1":   # the option's default: the matrix compares 1 and 2 threads
        threads = [1, 2]
    everything = bench.MATRIX_TYPES + tuple(bench.MIX_TYPES)
    types = everything
    if args.types:
        types = tuple(t.strip().lower() for t in args.types.split(",") if t.strip())
        unknown = [t for t in types if t not in everything]
        if unknown:
            raise ValueError(f"--types: unknown type(s) {', '.join(unknown)}; the matrix has {', '.join(everything)}")
    shapes = ("15m",) if args.quick else bench.SHAPES
    if args.families:
        shapes = tuple(bench.FAMILY_SHAPES)
    rep = bench.matrix(args.bench_dir, shapes=shapes, types=types, threads=threads,
                       repeat=args.repeat or 3, prompt_tokens=args.prompt_tokens or 64,
                       gen_tokens=args.gen_tokens or 128, peer=not args.no_peer)
    out = args.out or (pathlib.Path(args.bench_dir) / "families.json" if args.families else None)
    doc, png = bench.write_matrix(rep, args.bench_dir, out, None if args.doc == "none" else args.doc)
    if doc:
        print(f"edgerun: wrote {doc}" + (f" and {png}" if png else " (no plot: matplotlib missing)"))
    if args.json:
        print(json.dumps(rep, indent=2))
    return 1 if any("error" in r for r in rep["results"]) else 0


def _qemu_isa(args, threads):
    """`--qemu-isa`: see edgerun/bench/isa.py."""
    for flag in ("board", "matrix", "model", "update_baseline", "baseline", "out_dir", "no_peer"):
        if getattr(args, flag):
            raise ValueError(f"--{flag.replace('_', '-')} does not apply to --qemu-isa")
    if threads != [1]:
        # per-step CPU time measures a step only when one thread does all of its work
        raise ValueError("--qemu-isa runs one thread (it is timed by the thread's CPU time); drop --threads")
    if args.device != "cpu":
        raise ValueError("--qemu-isa measures the CPU kernel tables; drop --device")
    from ..bench import isa as bench_isa
    return bench_isa.main(args)


def _footprint(args):
    """`--footprint`: see edgerun/bench/footprint.py."""
    if args.model_pos:
        raise ValueError("--footprint measures the builds and llama.cpp's libraries; do not pass MODEL")
    for flag in ("board", "matrix", "qemu_isa", "families", "quick"):
        if getattr(args, flag):
            raise ValueError(f"--{flag.replace('_', '-')} does not apply to --footprint")
    from ..bench import footprint
    rep = footprint.measure()
    _emit(args, rep, lambda: footprint.format_table(rep))
    # A row we own that could not be measured fails the benchmark; llama.cpp absent does not.
    return 1 if any("error" in r for r in rep["rows"]) else 0


def _cuda(args):
    """`--device cuda`: one model on the GPU (edgerun/bench/cuda.py)."""
    from ..bench import cuda as bench_cuda
    model = args.model_pos
    if model is None:
        from ..model import default_model_path
        model = default_model_path()
    r = bench_cuda.run_one(model, prompt=args.prompt_tokens or bench_cuda.PROMPT,
                           gen=args.gen_tokens or bench_cuda.GEN, repeat=args.repeat or 3, n_ctx=args.ctx or 512)
    _emit(args, r, lambda: f"edgerun on {r['isa_reason']}\n  {r['model']}: prefill {r['prefill_tokens_per_s']:.0f} "
                           f"tok/s, decode {r['decode_tokens_per_s']:.0f} tok/s ({r['weight_gbps']:.1f} GB/s of weights)")
    return 0
