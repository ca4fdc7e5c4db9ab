"""One module per `edgerun` verb; each has register(subparsers) and main(args).

Helpers shared by the verbs that open a model live here so the options mean
the same thing everywhere.
"""
import argparse
import os
import sys


def human_bytes(n):
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def default_threads():
    # More threads than cores only adds contention; beyond 4 the small models
    # we target stop scaling on the boards we run on.
    return max(1, min(4, os.cpu_count() or 1))


def at_least_one(text):
    """argparse type of a count that has no "0 = default" meaning (--threads: the
    library would quietly take 0 as 1)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {v}")
    return v


def add_model_options(p, isa_flag="--isa"):
    """--ctx/--threads/--batch/--kv-type/--isa, as er_options takes them."""
    g = p.add_argument_group("model options")
    g.add_argument("--ctx", type=int, default=0, metavar="N",
                   help="context length, at most 1048576 (default 0: the model's, at most 2048)")
    g.add_argument("--threads", "-t", type=at_least_one, default=default_threads(), metavar="N",
                   help="worker threads, 1 to 512 (default: %(default)s)")
    g.add_argument("--batch", type=int, default=0, metavar="N",
                   help="prefill chunk in tokens, at most 65536 (default 0: 64)")
    g.add_argument("--kv-type", choices=("f32", "f16"), default="f32",
                   help="KV cache element type (default f32). f16 halves the cache's bytes, and with them what "
                        "each decode step reads: 110M Q4_0 at 1,600 positions on 1 thread took 4.5 instead of "
                        "8.2 ms a step. llama.cpp's default, and what `edgerun bench` times")
    g.add_argument(isa_flag, dest="isa", default=None, metavar="NAME",
                   help="force a kernel table (generic, avx2, neon, ...)")
    g.add_argument("--pin", default=None, metavar="CPUS",
                   help="pin the worker threads and this process to CPUs: a list such as 4-7 or 0,2, "
                        "or a board's cluster such as rk3588:big")
    g.add_argument("--ctx-strategy", choices=("fail", "slide", "slide_prefill"), default="fail",
                   help="what a full context does: fail (default: a prompt that does not fit is an error, "
                        "generation stops at the last position), or slide: keep the first --keep tokens and the "
                        "most recent half of the rest, the cache rotated in place (slide) or prefilled again "
                        "(slide_prefill, exact)")
    g.add_argument("--keep", type=int, default=0, metavar="N",
                   help="tokens a sliding context always keeps at the start (default 0)")
    g.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="where the model runs: cpu (default) or cuda (GPU 0; needs a -Dcuda=enabled build)")


def parse_pin(spec):
    """CPU numbers for --pin: "4-7", "0,2,5-6" or "BOARD:big|little" (the
    cluster's CPUs from boards/BOARD.yaml). ValueError says what is wrong."""
    if ":" in spec:
        from ..boards import load
        board, cluster = spec.split(":", 1)
        return load(board).cpus(cluster)
    cpus = []
    for part in spec.split(","):
        lo, sep, hi = part.strip().partition("-")
        try:
            a, b = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise ValueError(f"--pin {spec!r}: expected CPU numbers like 4-7 or 0,2, or BOARD:big") from None
        if a < 0 or b < a or b > 63:
            raise ValueError(f"--pin {spec!r}: '{part}' is not a range of CPUs within 0-63")
        cpus.extend(range(a, b + 1))
    return cpus


def apply_pin(args):
    """Pins this process (the calling thread takes part in every step) and
    returns the CPU list for Model(cpu_mask=...), or None without --pin."""
    if not getattr(args, "pin", None):
        return None
    cpus = parse_pin(args.pin)
    have = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    try:
        os.sched_setaffinity(0, set(cpus))
    except (AttributeError, OSError) as e:
        where = f"; this process may run on CPUs {','.join(map(str, have))}" if have else ""
        raise ValueError(f"--pin {args.pin}: cannot run on CPUs {cpus} here ({e.strerror or e}){where}") from None
    return cpus


def model_kwargs(args):
    kw = {"n_ctx": args.ctx, "n_threads": args.threads, "n_batch": args.batch,
          "kv_type": args.kv_type, "isa": args.isa, "cpu_mask": apply_pin(args)}
    if getattr(args, "ctx_strategy", "fail") != "fail":
        kw.update(ctx_strategy=args.ctx_strategy, ctx_keep=args.keep)
    if getattr(args, "device", "cpu") != "cpu":
        kw["device"] = args.device
    return kw


def note_context_past_training(m):
    """A note on stderr when --ctx reaches past the positions the model was
    trained on: it runs, and the text past them degrades, which looks like a
    runtime bug unless someone says why (llama.cpp warns here too)."""
    train = m.hparams.get("n_ctx_train") or 0
    if train and m.n_ctx > train:
        print(f"edgerun: note: --ctx {m.n_ctx} is past the {train} positions {m.path.name} was trained on; "
              "text past them may degrade", file=sys.stderr)


def formatter():
    return argparse.RawDescriptionHelpFormatter
