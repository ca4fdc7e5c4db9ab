"""`edgerun trace [MODEL] PROMPT -o trace.json`: time every op of a generation
and write Chrome trace-event JSON (open it in https://ui.perfetto.dev)."""
import pathlib
import sys

from ..bench.trace import MAX_EVENTS, OPS_OUTSIDE_LAYERS, OPS_PER_LAYER, OPS_PER_RANGE, ring_events  # noqa: F401
from .options import add_model_options, formatter, model_kwargs

EPILOG = """\
examples:
  edgerun trace "0012+0034=" -o add.json                  # the embedded model
  edgerun trace model.gguf "Once upon a time" -n 32 --threads 4 -o story.json
  edgerun trace model.gguf "Once upon a time" -n 128 --summary  # and a table per op

Each op (embed, attn_norm, qkv, rope, kv_store, attention, attn_out, ffn_norm,
ffn_gate_up, silu_mul or, in a GeGLU model such as gemma3, gelu_mul, ffn_down,
output_norm, lm_head) is one slice on the caller's track, with each pool
worker's share on its own track; args hold the layer and shape. An LFM2 layer
without attention runs its short-convolution block instead of qkv .. attn_out:
conv_in (in_proj), shortconv (the gated convolution), conv_out (out_proj).
Where a decode step runs qkv, rope, kv_store and attention per K/V head range
in one dispatch, those four are slices of each thread's ranges on its own
track, the caller's included. The ring is sized for the whole run, so nothing
is dropped.
"""

def register(sub):
    p = sub.add_parser("trace", help="write a Perfetto/Chrome trace of a generation", description=__doc__,
                       epilog=EPILOG, formatter_class=formatter())
    p.add_argument("args", nargs="+", metavar="[MODEL] PROMPT",
                   help="GGUF file (default: the embedded model) and the prompt")
    p.add_argument("-o", "--output", default="trace.json", metavar="FILE",
                   help="trace file to write (default: trace.json)")
    p.add_argument("-n", "--max-tokens", type=int, default=16, metavar="N", help="tokens to generate (default 16)")
    p.add_argument("--summary", action="store_true",
                   help="also print where a step's time goes: per operation and thread, the median event and "
                        "the time per step, prefill and decode apart (edgerun/bench/trace_summary.py)")
    add_model_options(p)
    p.set_defaults(func=main)


def main(args):
    from ..bench.trace import record
    from .run import split_model_prompt
    path, prompt = split_model_prompt(args.args, "trace")
    if args.max_tokens < 0:
        raise ValueError(f"-n must be >= 0, got {args.max_tokens}")
    folder = pathlib.Path(args.output).parent
    if not folder.is_dir():
        # checked before the generation it would otherwise throw away
        raise ValueError(f"-o {args.output}: folder {folder} does not exist; create it first")
    r = record(path, prompt, args.output, args.max_tokens, **model_kwargs(args))
    ev, out, isa, plan, events = r["events"], r["output"], r["isa"], r["plan"], r["capacity"]
    sys.stdout.write(out if out.endswith("\n") else out + "\n")
    if args.summary:
        from ..bench.trace_summary import render, summarize
        # Times depend on these as much as on the code: an F32 cache doubles
        # attention's reads against F16's (what `edgerun bench` runs), so a
        # summary pasted without them cannot be compared with another.
        sys.stdout.write(f"{path or 'embedded model'}: kernels {isa}, {plan['n_threads']} thread(s), "
                         f"context {plan['n_ctx']}, K/V {plan['kv_type']}\n")
        sys.stdout.write(render(summarize(ev)))
    threads = len({e["thread"] for e in ev})
    span_ms = (max(e["end_ns"] for e in ev) - min(e["start_ns"] for e in ev)) / 1e6 if ev else 0.0
    full = " (ring full: the oldest were overwritten)" if len(ev) >= events else ""
    print(f"edgerun: wrote {len(ev)} events{full} on {threads} thread(s), {span_ms:.2f} ms, to {args.output}; "
          "open it in https://ui.perfetto.dev", file=sys.stderr)
    return 0
