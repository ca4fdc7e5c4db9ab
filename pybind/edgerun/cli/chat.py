"""`edgerun chat [MODEL]`: talk to a model in the terminal, each reply streamed as it comes."""
import json
import pathlib
import signal
import sys

from .options import add_model_options, formatter, human_bytes, model_kwargs, note_context_past_training

HELP = """\
  /reset        forget the conversation (the system prompt stays)
  /save FILE    save the session: FILE (the KV cache) and FILE.chat.json (the conversation)
  /load FILE    continue a saved session
  /stats        tokens, prefill and decode speed, cache use
  /help         this list
  Ctrl-C stops a reply (the chat goes on); Ctrl-D quits."""

EPILOG = f"""\
in the chat:
{HELP}

examples:
  edgerun chat qwen2.5-0.5b-instruct-q8_0.gguf
  edgerun chat model.gguf --system "Answer in one sentence." --temp 0.7 --seed 1
  edgerun chat model.gguf --chat-template chat_template.jinja     # a file without its template
  edgerun chat qwen3-0.6b.gguf --var enable_thinking=false

The conversation is rendered with the model's chat template (the GGUF key
tokenizer.chat_template, or --chat-template), and every turn prefills only
the tokens the KV cache does not already hold.
"""


def register(sub):
    p = sub.add_parser("chat", help="talk to a model in the terminal", description=__doc__, epilog=EPILOG,
                       formatter_class=formatter())
    p.add_argument("model", nargs="?", default=None, metavar="MODEL",
                   help="GGUF file (default: the embedded model, which has no chat template)")
    p.add_argument("--system", default=None, metavar="TEXT", help="system prompt (the conversation's first message)")
    p.add_argument("--chat-template", default=None, metavar="FILE",
                   help="Jinja chat template to use instead of the file's: a template file (chat_template.jinja) "
                        "or a model's tokenizer_config.json")
    p.add_argument("--var", action="append", default=[], metavar="NAME=VALUE",
                   help="a variable for the template, e.g. enable_thinking=false (VALUE is JSON, else text; "
                        "repeatable)")
    p.add_argument("-n", "--max-tokens", type=int, default=512, metavar="N",
                   help="most tokens in one reply (default 512)")
    g = p.add_argument_group("sampling (default: greedy)")
    g.add_argument("--temp", type=float, default=0.0, help="temperature; 0 = greedy")
    g.add_argument("--top-k", type=int, default=0, help="keep the k most likely tokens; 0 = off")
    g.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass; 1 = off")
    g.add_argument("--min-p", type=float, default=0.0, help="drop tokens below min-p x the best; 0 = off")
    g.add_argument("--repeat-penalty", type=float, default=1.0, help="penalty on repeated tokens; 1 = off")
    g.add_argument("--repeat-last-n", type=int, default=0, help="window of the penalty; 0 = whole history")
    g.add_argument("--seed", type=int, default=None, help="RNG seed (the same seed gives the same replies)")
    add_model_options(p)
    p.set_defaults(func=main)


def read_template(path):
    """The Jinja text of --chat-template: a template file, or a model's
    tokenizer_config.json (its "chat_template": the text, or the one named
    "default" of a list of named templates)."""
    text = pathlib.Path(path).read_text(encoding="utf-8")
    if not str(path).endswith(".json"):
        return text
    try:
        t = json.loads(text).get("chat_template")
    except (ValueError, AttributeError):
        raise ValueError(f"--chat-template {path}: not a tokenizer_config.json (JSON object)") from None
    if isinstance(t, list):
        t = next((x.get("template") for x in t if isinstance(x, dict) and x.get("name") == "default"), None)
    if not isinstance(t, str):
        raise ValueError(f"--chat-template {path}: no \"chat_template\" text in it")
    return t


def parse_vars(specs):
    out = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name.isidentifier():
            raise ValueError(f"--var {spec!r}: expected NAME=VALUE, e.g. enable_thinking=false")
        try:
            out[name] = json.loads(value)
        except ValueError:
            out[name] = value
    return out


def stats_text(st):
    last = st["last_turn"]
    lines = [f"tokens: {st['cache_tokens']} in the cache of {st['n_ctx']} ({100 * st['cache_use']:.1f}% used); "
             f"{st['turns']} turns, {st['messages']} messages",
             f"prefilled {st['prefilled']} tokens (reused {st['reused']} from the cache), generated {st['generated']}",
             f"prefill {st['prefill_tokens_per_s']:.1f} tok/s; decode {st['decode_tokens_per_s']:.1f} tok/s"]
    if last:
        lines.append(f"last turn: {last['n_prompt']} prompt tokens ({last['n_reused']} reused, {last['n_prefilled']} "
                     f"prefilled in {last['prefill_ms']:.1f} ms), {last['n_generated']} generated, "
                     f"stopped: {last['stopped']}")
    return "\n".join(lines)


class _Interrupt:
    """While a reply streams, Ctrl-C only raises a flag: the reply stops at the
    next token, between two runtime calls, and never half way through the
    bookkeeping of the session."""

    def __init__(self):
        self.hit = False

    def __enter__(self):
        self.hit = False
        self._old = signal.signal(signal.SIGINT, self._on)
        return self

    def _on(self, *_):
        self.hit = True

    def __exit__(self, *exc):
        signal.signal(signal.SIGINT, self._old)


def _error(out, line):
    """A failure inside the chat: one line on stderr, and the chat goes on."""
    out.flush()
    print(line, file=sys.stderr, flush=True)


def command(chat, line, out):
    """Runs a /command; False for an unknown one."""
    from ..cli import error_line
    from .. import errors
    name, _, arg = line.strip().partition(" ")
    arg = arg.strip()
    try:
        if name == "/reset":
            chat.reset()
            out.write("(conversation cleared)\n")
        elif name == "/stats":
            out.write(stats_text(chat.stats()) + "\n")
        elif name in ("/save", "/load"):
            if not arg:
                out.write(f"usage: {name} FILE\n")
            elif name == "/save":
                chat.save(arg)
                size = pathlib.Path(arg).stat().st_size
                out.write(f"(saved {arg}, {human_bytes(size)}, and {arg}.chat.json)\n")
            else:
                chat.load(arg)
                out.write(f"(loaded {arg}: {len(chat.messages)} messages, {len(chat.cached_tokens)} tokens)\n")
        elif name in ("/help", "/?"):
            out.write(HELP + "\n")
        else:
            out.write(f"unknown command {name}; /help lists them\n")
    except (errors.EdgerunError, OSError, ValueError) as e:
        _error(out, error_line(e))


def loop(chat, gen_kw, out=sys.stdout):
    stop = _Interrupt()
    while True:
        try:
            if turn(chat, gen_kw, out, stop):
                return 0
        except KeyboardInterrupt:
            # at the prompt, or between two lines: a Ctrl-C typed just as a
            # command's output ends lands before input() is reading again,
            # and must not end the chat either
            out.write("\n(Ctrl-D quits)\n")


def turn(chat, gen_kw, out, stop):
    """One line from the user and its answer; True at end of input."""
    from ..cli import error_line
    from .. import errors
    try:
        line = input("> ")
    except EOFError:
        out.write("\n")
        return True
    if not line.strip():
        return False
    if line.startswith("/"):
        command(chat, line, out)
        return False
    stream = None
    try:
        with stop:
            stream = chat.send(line, stream=True, **gen_kw)
            for piece in stream:
                out.write(piece)
                out.flush()
                if stop.hit:
                    break
            stream.close()
        if chat.turn.get("stopped") == "interrupted":
            out.write(" [stopped]")
    except (errors.EdgerunError, ValueError) as e:
        if stream is not None:
            stream.close()
            out.write("\n")
        _error(out, error_line(e))
        return False
    out.write("\n")
    out.flush()
    return False


def main(args):
    from ..chat import ChatSession
    from ..model import Model
    try:
        import readline  # noqa: F401  (line editing and history for input())
    except ImportError:
        pass
    template = read_template(args.chat_template) if args.chat_template else None
    variables = parse_vars(args.var)
    gen_kw = dict(max_tokens=args.max_tokens, temperature=args.temp, top_k=args.top_k, top_p=args.top_p,
                  min_p=args.min_p, repeat_penalty=args.repeat_penalty, repeat_last_n=args.repeat_last_n)
    if args.max_tokens < 0:
        raise ValueError(f"--max-tokens must be >= 0, got {args.max_tokens}")
    with Model(args.model, **model_kwargs(args)) as m:
        note_context_past_training(m)
        with ChatSession(m, system=args.system, chat_template=template, variables=variables) as chat:
            if args.seed is not None:
                chat._session.seed(args.seed)
            print(f"edgerun chat: {m.path.name}, context {m.n_ctx} tokens. /help lists the commands; "
                  "Ctrl-D quits.", flush=True)
            return loop(chat, gen_kw)
