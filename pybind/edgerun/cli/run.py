"""`edgerun run [MODEL] PROMPT`: generate, streaming text to stdout as it comes."""
import json
import os
import sys

from .options import add_model_options, formatter, human_bytes, model_kwargs, note_context_past_training

EPILOG = """\
examples:
  edgerun run "0012+0034="                              # embedded model: sum, reversed
  edgerun run model.gguf "Once upon a time" -n 128
  edgerun run model.gguf "Once upon a time" --temp 0.8 --top-p 0.95 --seed 42
  edgerun run model.gguf "1 415 2277" --ids -n 16       # token ids in, ids out
  edgerun run model.gguf "Hello" --json                 # one JSON object with text and stats
  edgerun run model.gguf "Hello" --stats                # timing summary on stderr
  echo "Once upon a time" | edgerun run model.gguf -    # '-' reads the prompt from stdin

Generation stops at -n tokens, at the model's end-of-generation token, at a
--stop string, or when the context (--ctx) is full (a note on stderr says so).
"""


def register(sub):
    p = sub.add_parser("run", help="generate from a prompt", description=__doc__, epilog=EPILOG,
                       formatter_class=formatter())
    p.add_argument("args", nargs="+", metavar="[MODEL] PROMPT",
                   help="GGUF file (default: the embedded model) and the prompt ('-' reads stdin, less its "
                        "final newline)")
    p.add_argument("-n", "--max-tokens", type=int, default=64, metavar="N", help="tokens to generate (default 64)")
    g = p.add_argument_group("sampling (default: greedy)")
    g.add_argument("--temp", type=float, default=0.0, help="temperature; 0 = greedy")
    g.add_argument("--top-k", type=int, default=0, help="keep the k most likely tokens; 0 = off")
    g.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass; 1 = off")
    g.add_argument("--min-p", type=float, default=0.0, help="drop tokens below min-p x the best; 0 = off")
    g.add_argument("--repeat-penalty", type=float, default=1.0, help="penalty on repeated tokens; 1 = off")
    g.add_argument("--repeat-last-n", type=int, default=0, help="window of the penalty; 0 = whole history")
    g.add_argument("--seed", type=int, default=None, help="RNG seed (the same seed gives the same tokens)")
    p.add_argument("--stop", action="append", default=[], metavar="TEXT", help="stop at this text (repeatable)")
    p.add_argument("--ids", action="store_true", help="the prompt is space-separated token ids; print ids")
    p.add_argument("--no-special", action="store_true", help="do not add BOS/EOS to a text prompt")
    p.add_argument("--json", action="store_true", help="print one JSON object (output and stats)")
    p.add_argument("--stats", action="store_true", help="print a timing summary line on stderr")
    add_model_options(p)
    p.add_argument("--config", metavar="YAML", help="device configuration (edgerun.yaml): the model, threads, "
                   "core pinning, arena budget and sampling defaults; then give only the PROMPT")
    p.set_defaults(func=main)


def split_model_prompt(words, verb, what="PROMPT", strip_newline=True):
    """[MODEL] TEXT -> (model path or None for the embedded model, text); '-'
    reads the text from stdin, less the one final newline `echo` adds unless
    strip_newline is off. One word that names a GGUF file is a model whose
    text is missing: taken as the prompt, it would quietly run the embedded
    model instead of the one asked for."""
    if len(words) == 1:
        word = words[0]
        if word.endswith(".gguf") or (word != "-" and os.path.isfile(word)):
            raise ValueError(f"{word} looks like a model file but no {what} follows; "
                             f"run `edgerun {verb} MODEL {what}`")
        path, text = None, word
    elif len(words) == 2:
        path, text = words
    else:
        raise ValueError(f"expected [MODEL] {what}, got {len(words)} arguments; quote the {what.lower()}")
    if text == "-":
        text = sys.stdin.read()
        if strip_newline and text.endswith("\n"):
            text = text[:-1]
    return path, text


def stats_line(st):
    return (f"edgerun: {st['n_prompt']} prompt + {st['n_generated']} generated tokens "
            f"(stopped: {st['stopped']}); TTFT {st['ttft_ms']:.1f} ms; "
            f"prefill {st['prefill_tokens_per_s']:.1f} tok/s; decode {st['decode_tokens_per_s']:.1f} tok/s; "
            f"arena {human_bytes(st['arena_total'])}")


def main(args):
    from ..model import Model
    cfg = None
    if getattr(args, "config", None):
        from ..ota.device_config import apply_to_run_args
        cfg = apply_to_run_args(args.config, args)
    path, prompt = split_model_prompt(args.args, "run")
    if args.ids:
        try:
            prompt = [int(x) for x in prompt.split()]
        except ValueError:
            raise ValueError(f"--ids expects space-separated integers, got {prompt!r}") from None
    gen_kw = dict(max_tokens=args.max_tokens, temperature=args.temp, top_k=args.top_k, top_p=args.top_p,
                  min_p=args.min_p, repeat_penalty=args.repeat_penalty, repeat_last_n=args.repeat_last_n,
                  seed=args.seed)
    if not args.ids:
        gen_kw.update(stop=args.stop or None, add_special=not args.no_special)
    elif args.stop:
        raise ValueError("--stop needs a text prompt; drop --ids")
    if cfg is not None:
        from ..ota.device_config import open_model
        opened = open_model(cfg)
    else:
        opened = Model(path, **model_kwargs(args))
    with opened as m:
        note_context_past_training(m)
        if args.json:
            out = m.generate(prompt, **gen_kw)
            st = m.stats()
            doc = {"model": str(m.path), ("ids" if args.ids else "text"): out, "stats": st}
            print(json.dumps(doc))
        else:
            last = ""
            for piece in m.generate(prompt, stream=True, **gen_kw):
                last = f"{piece} " if args.ids else piece
                sys.stdout.write(last)
                sys.stdout.flush()
            if not last.endswith("\n"):
                sys.stdout.write("\n")
            sys.stdout.flush()
            st = m.stats()
        if args.stats:
            print(stats_line(st), file=sys.stderr)
        elif st.get("stopped") == "context":
            print(f"edgerun: note: stopped after {st['n_generated']} tokens: the context of {m.n_ctx} is full; "
                  "raise --ctx, or --ctx-strategy slide to keep going", file=sys.stderr)
    return 0
