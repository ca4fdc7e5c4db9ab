"""`edgerun bench [MODEL]`: prefill and decode tokens/s, TTFT, peak RSS and arena bytes,
for edgerun and for llama.cpp (llama-cpp-python, when installed) on the same file."""
import json

from . import formatter

EPILOG = """\
examples:
  edgerun bench                                   # the embedded default model
  edgerun bench model.gguf --threads 1,2 --prompt-tokens 128 --gen-tokens 64
  edgerun bench model.gguf --json > bench.json    # for machines
  edgerun bench model.gguf --no-peer              # edgerun only

Each engine runs in its own process on the same prompt ids, after a warm-up
pass. Decode steps ignore end-of-text so every run does the same work. The peer
is llama.cpp through the optional `llama-cpp-python` package
(pip install llama-cpp-python, or `make bench`).
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
    p.add_argument("model", nargs="?", default=None, metavar="MODEL",
                   help="GGUF file (default: the embedded model)")
    p.add_argument("--threads", "-t", default="1", metavar="LIST", help="thread counts, e.g. 1,2 (default 1)")
    p.add_argument("--prompt-tokens", type=int, default=64, metavar="N", help="prompt length (default 64)")
    p.add_argument("--gen-tokens", type=int, default=128, metavar="N", help="decode steps (default 128)")
    p.add_argument("--batch", type=int, default=64, metavar="N", help="prefill chunk for both engines (default 64)")
    p.add_argument("--ctx", type=int, default=0, metavar="N",
                   help="context length (default: edgerun's default for the model; the peer gets the same)")
    p.add_argument("--repeat", type=int, default=1, metavar="N", help="runs per engine; best is reported")
    p.add_argument("--no-peer", action="store_true", help="skip llama.cpp")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--out", default=None, metavar="FILE.json", help="also write the JSON report to FILE.json")
    p.set_defaults(func=main)


def main(args):
    from .. import bench
    threads = _thread_list(args.threads)
    for name in ("prompt_tokens", "gen_tokens", "batch", "repeat"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1")
    model = args.model
    if model is None:
        from ..model import default_model_path
        model = default_model_path()
    report = bench.run(model, threads=threads, prompt_tokens=args.prompt_tokens, gen_tokens=args.gen_tokens,
                       batch=args.batch, ctx=args.ctx, repeat=args.repeat, peer=not args.no_peer)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(bench.format_table(report))
    # A failed engine is a failed benchmark: scripts must not record half a table.
    return 1 if any("error" in r for r in report["results"]) else 0
