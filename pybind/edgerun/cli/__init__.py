"""The `edgerun` command: `edgerun <verb> ...`.

    app         main(): the parser, the dispatch, one line per failure
    options     the model options every verb that opens a model shares
    <verb>.py   one per verb (run, info, convert, ...): register(subparsers)
                adds its parser; main(args) calls into the job's package
                and prints. Nothing else: what a verb computes lives in
                bench/, boards/, ota/, convert/ or the runtime.
"""
from .app import COMMANDS, build_parser, error_line, main

__all__ = ["main", "build_parser", "error_line", "COMMANDS"]


def __getattr__(name):
    # What `edgerun.cli` held when it was one module (app.py now), and what
    # `edgerun.commands`, this folder's old name, held (options.py now). A verb's
    # name is its module: `edgerun.cli.run` is the `run` verb, not app.run.
    import importlib   # not `from . import`: that would ask this __getattr__ again
    app, options = (importlib.import_module(f"{__name__}.{m}") for m in ("app", "options"))
    if not name.startswith("_") and name not in COMMANDS:
        for mod in (app, options):
            if hasattr(mod, name):
                return getattr(mod, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
