"""`edgerun tokenize [MODEL] TEXT`: the token ids and pieces a model's tokenizer gives for a text."""
import json
import sys

from .options import formatter

EPILOG = """\
examples:
  edgerun tokenize "0012+0034="                         # the embedded model's tokenizer
  edgerun tokenize model.gguf "Hello world"             # index, id, piece per token
  edgerun tokenize model.gguf "Hello" --no-special      # without BOS/EOS
  edgerun tokenize model.gguf "<|im_start|>user" --parse-special
  echo "from stdin" | edgerun tokenize model.gguf -     # '-' reads the text from stdin
  edgerun tokenize model.gguf "Hello" --json            # {"ids": [...], "pieces": [...]}

Only the vocabulary is loaded (no weights), so this is fast on any model size.
"""


def register(sub):
    p = sub.add_parser("tokenize", help="text -> token ids with a model's tokenizer", description=__doc__,
                       epilog=EPILOG, formatter_class=formatter())
    p.add_argument("args", nargs="+", metavar="[MODEL] TEXT",
                   help="GGUF file with a tokenizer (default: the embedded model) and the text ('-' reads stdin)")
    p.add_argument("--no-special", dest="add_special", action="store_false",
                   help="do not add BOS/EOS (default: as the file says)")
    p.add_argument("--parse-special", action="store_true",
                   help="match control tokens written in the text, e.g. <|im_end|>")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=main)


def main(args):
    from ..model import default_model_path
    from ..tokenizer import Tokenizer
    from .run import split_model_prompt
    path, text = split_model_prompt(args.args, "tokenize", "TEXT", strip_newline=False)
    with Tokenizer.from_file(path or default_model_path()) as tok:
        ids = tok.encode(text, add_special=args.add_special, parse_special=args.parse_special)
        pieces = [tok.piece(i) for i in ids]
        if args.json:
            print(json.dumps({"ids": ids, "pieces": pieces, "n_tokens": len(ids), "kind": tok.kind,
                              "pre": tok.pre}, ensure_ascii=False))
            return 0
        width = max([len(str(i)) for i in ids] + [2])
        print(f"{'#':>5}  {'id':>{width}}  piece")
        for k, (i, p) in enumerate(zip(ids, pieces)):
            print(f"{k:>5}  {i:>{width}}  {p!r}")
        print(f"{len(ids)} tokens ({tok.kind}, pre-tokenizer {tok.pre})")
    return 0
