"""`edgerun bench-tokenizer`: single-threaded tokenizer MB/s, edgerun beside Hugging Face
`tokenizers`, tiktoken (GPT-2) and sentencepiece (Llama 2), on generated mixed text."""
import json
import sys

from .options import formatter

EPILOG = """\
examples:
  edgerun bench-tokenizer                          # 10 MB, every family found, table
  edgerun bench-tokenizer --mb 2 --families gpt2   # quicker, one family
  edgerun bench-tokenizer --json --out tok.json    # for machines
  edgerun bench-tokenizer --data ./tokenizers      # folders gpt2/ llama3/ qwen3/ llama2/

Families: gpt2, llama3, qwen3 (alias qwen2) from FAMILY/tokenizer.json, llama2
from llama2/tokenizer.model, in --data (default: $EDGERUN_TOKENIZER_DATA, or
../shared/data/tokenizers/hf beside a source checkout); absent ones are skipped.
Each is converted to a vocabulary-only GGUF first. The text is generated from
--seed (prose, code, numbers, CJK, Arabic/Hebrew, emoji, whitespace runs) and
cut into 1-4 KB documents; every engine encodes each document with one call.
Ids must equal the reference's (HF; sentencepiece for llama2) on every
document: a mismatch makes the exit status 1. Peers: pip install tokenizers
tiktoken sentencepiece.
"""


def register(sub):
    p = sub.add_parser("bench-tokenizer", help="tokenizer MB/s beside HF tokenizers and tiktoken",
                       description=__doc__, epilog=EPILOG, formatter_class=formatter())
    p.add_argument("--mb", type=float, default=10.0, metavar="N", help="corpus size in MB (default 10)")
    p.add_argument("--families", nargs="+", default=None, metavar="NAME",
                   help="gpt2 llama3 qwen3 llama2 (default: all; commas also separate)")
    p.add_argument("--repeat", type=int, default=None, metavar="N",
                   help="passes per engine; best is reported (default 3; 7 with --per-call)")
    p.add_argument("--seed", type=int, default=1234, metavar="N", help="corpus seed (default 1234)")
    p.add_argument("--data", default=None, metavar="DIR", help="folder with one sub-folder per family")
    p.add_argument("--no-c", dest="raw_c", action="store_false",
                   help="skip the er_tokenize-through-cffi column")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="table in MB per wall second, or per CPU-second of the process (fairer on a loaded "
                        "machine); the JSON has both")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--out", default=None, metavar="FILE.json", help="also write the JSON report to FILE.json")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines on stderr")
    p.add_argument("--per-call", action="store_true",
                   help="instead of throughput: CPU us per encode of a 2/16/64-byte text, MB/s over source code "
                        "one line per call, and what Python adds per generated token (edgerun/bench/calls.py)")
    p.set_defaults(func=main)


def main(args):
    from ..bench import tokenizer as bt
    log = None if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    if args.per_call:
        return _per_call(args, log)
    report = bt.run(mb=args.mb, families=args.families, repeat=args.repeat or 3, seed=args.seed,
                    data_dir=args.data, raw_c=args.raw_c, log=log)
    if not report["results"]:
        raise ValueError(f"no tokenizer family found in {report['data_dir']} "
                         f"({'; '.join(report['skipped'].values())}); pass --data DIR")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2, ensure_ascii=False)
            f.write("\n")
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else bt.format_table(report, args.clock))
    # A tokenizer that is fast but wrong has failed the benchmark.
    return 0 if all(r["exact"] for r in report["results"]) else 1


def _per_call(args, log):
    from ..bench import calls
    report = calls.run(families=args.families, data_dir=args.data, repeat=args.repeat or 7, seed=args.seed,
                       log=log)
    if not report["families"]:
        raise ValueError(f"no tokenizer family found ({'; '.join(report['skipped'].values())}); pass --data DIR")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
    print(json.dumps(report, indent=2) if args.json else calls.format_table(report))
    return 0 if all(all(r["exact"].values()) for r in report["families"].values()) else 1
