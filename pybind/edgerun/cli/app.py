"""The `edgerun` command line: `edgerun <verb> ...`, one module per verb in edgerun/commands/.

Each command module has `register(subparsers)`, which adds its parser and sets
`func` to its main(args) (returning the exit status). Failures reach the user as
ONE line on stderr, `edgerun: error: <what>; <how to fix>`, with exit status 1
(2 for a usage mistake), never as a traceback: a traceback tells a user of the
tool nothing they can act on. EDGERUN_DEBUG=1 brings the traceback back.
"""
import argparse
import importlib
import os
import re
import sys

from .. import __version__, errors

COMMANDS = ("run", "chat", "info", "convert", "tokenize", "bench", "bench_tokenizer", "trace", "boards", "build", "test", "doctor", "sysroot",
            "keygen", "package", "release", "flash", "rollback", "serve")

# What to do about each kind of failure, appended when the message has no advice of its own.
_HINTS = {
    errors.CorruptModelError: "the file is damaged or not a GGUF v3 model; re-download or re-convert it",
    errors.UnsupportedError: ("edgerun runs llama, qwen2, qwen3, smollm3, gemma3, phi3 and lfm2 GGUF models with F32, F16, BF16, "
                             "Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q2_K, Q3_K, Q4_K, Q5_K or Q6_K weights"),
    errors.ArenaTooSmallError: "pass a larger arena, or a smaller --ctx",
    errors.OutOfMemoryError: "lower --ctx or --batch, or free memory",
    errors.ContextFullError: "raise --ctx or shorten the prompt",
    errors.FileAccessError: "check the path and its permissions",
    errors.BusyError: "all session slots are in use; open the model with more sessions",
    errors.InvalidArgumentError: "see `edgerun <command> --help`",
}

# The library's parameter names as the command line spells them: an
# InvalidArgumentError from Model/generate names the parameter it checked,
# and the user typed a flag.
_FLAGS = {"n_ctx": "--ctx", "n_threads": "--threads", "n_batch": "--batch", "ctx_keep": "--keep",
          "kv_type": "--kv-type", "ctx_strategy": "--ctx-strategy", "max_tokens": "--max-tokens",
          "temperature": "--temp", "top_k": "--top-k", "top_p": "--top-p", "min_p": "--min-p",
          "repeat_penalty": "--repeat-penalty", "repeat_last_n": "--repeat-last-n"}

EPILOG = """\
commands:
  run       generate text (or ids) from a prompt, streamed as it comes
  chat      talk to a model in the terminal (its chat template, multi-turn, streamed)
  info      hyper-parameters, tensor types, arena plan, ISA of a model
  convert   Hugging Face folder -> GGUF, float or llama.cpp's quantized mixes (--type; see convert --help)
  tokenize  text -> token ids with a model's tokenizer
  bench     prefill/decode speed, TTFT, memory
  bench-tokenizer  tokenizer MB/s beside HF tokenizers and tiktoken
  boards    the target boards (boards/*.yaml), or `boards show NAME`
  build     cross-build for a board: edgerun build --board rpi5
  test      C tests and model checks under qemu-user: edgerun test --board rpi5
  doctor    check the tools the board driver needs
  sysroot   the board's own Python (aarch64 python3 + cffi + numpy + rich) for on-device scripts
  trace     per-op timings of a generation as a Perfetto/Chrome trace
  serve     OpenAI-compatible HTTP API (/v1/chat/completions, /v1/completions) with parallel slots
  keygen    signing key + certificate for update bundles
  package   signed SWUpdate bundle (runtime, Python package, model, config) for a board
  release   build, test, bench, package and publish a board's release in one go
  flash     A/B install a bundle onto a device folder or ssh:// target, with health check
  rollback  switch a device back to its other slot

examples:
  edgerun run "0012+0034="                   # the embedded default model (answers reversed)
  edgerun run model.gguf "Once upon a time" -n 100 --temp 0.8 --seed 1
  edgerun info model.gguf --json
  edgerun convert ./TinyLlama-1.1B model-q8_0.gguf --type q8_0

`edgerun <command> --help` shows each command's options.
"""


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (like every other failure)."""

    def error(self, message):
        self.exit(2, f"edgerun: error: {message}; see `{self.prog} --help`\n")


def build_parser():
    p = ArgumentParser(prog="edgerun",
                       description="Run GGUF language models (Llama, Qwen, Gemma 3, Phi-3, SmolLM3, LFM2) from one "
                                   "static arena.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"edgerun {__version__}")
    sub = p.add_subparsers(dest="command", metavar="<command>")
    for name in COMMANDS:
        importlib.import_module(f".{name}", __package__).register(sub)
    return p


def error_line(exc, command=None, flags=()):
    """The one line the user sees for an exception; command names the verb
    whose --help the hints point to, flags are its option strings."""
    msg = str(exc).strip().replace("\n", " ") or type(exc).__name__
    # the C library names its function first (er_session_save: ...), which
    # tells an API caller where; a command line user ran no such function
    msg = re.sub(r"^er_[a-z0-9_]+: ", "", msg)
    if isinstance(exc, errors.InvalidArgumentError):
        name, _, rest = msg.partition(" ")
        if _FLAGS.get(name) in flags:
            msg = f"{_FLAGS[name]} {rest}"
    if isinstance(exc, errors.EdgerunError):
        if ";" not in msg:
            for cls, hint in _HINTS.items():
                if isinstance(exc, cls):
                    msg = f"{msg}; {hint}"
                    break
        msg = msg.replace("edgerun <command>", f"edgerun {command}" if command else "edgerun")
    elif isinstance(exc, FileNotFoundError):
        name = exc.filename or ""
        msg = f"{name}: no such file or directory; check the path" if name else msg
    elif isinstance(exc, PermissionError):
        msg = f"{exc.filename}: permission denied; check its permissions"
    elif isinstance(exc, IsADirectoryError):
        msg = f"{exc.filename}: is a directory; pass a file"
    return f"edgerun: error: {msg}"


def _subparser(parser, command):
    for action in parser._actions:  # argparse keeps its subparsers nowhere public
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            return action.choices[command]
    return None


def _option_strings(parser, command):
    sub = _subparser(parser, command)
    return {o for a in sub._actions for o in a.option_strings} if sub else set()


def main(argv=None):
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        # argparse reports these from the top parser, whose --help does not list them
        sub = _subparser(parser, getattr(args, "command", None)) or parser
        sub.error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("edgerun: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `edgerun run ... | head`: the reader left; that is not an error of ours.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except (errors.EdgerunError, OSError, ValueError) as e:
        if os.environ.get("EDGERUN_DEBUG"):
            raise
        print(error_line(e, args.command, _option_strings(parser, args.command)), file=sys.stderr)
        return 1


def run():
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    run()
