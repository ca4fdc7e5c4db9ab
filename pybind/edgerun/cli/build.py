"""`edgerun build --board B`: cross-build the runtime for a board into build/B/."""
import json
import sys

from .options import formatter

EPILOG = """\
examples:
  edgerun build --board rpi5                      # -> build/rpi5/ (release, gcc)
  edgerun build --board rpi5 --compiler clang     # -> build/rpi5-clang/
  edgerun build --board armv9-sve2 --buildtype debug --sanitize address,undefined
  edgerun build --board host                      # native build, same layout

Incremental: the same options again only recompile what changed; changed board
flags configure the build dir afresh. `edgerun boards` lists the boards.
"""


def register(sub):
    p = sub.add_parser("build", help="cross-build for a board (meson + toolchains/)",
                       description=__doc__, epilog=EPILOG, formatter_class=formatter())
    add_build_options(p)
    p.add_argument("--json", action="store_true", help="print the build report as JSON")
    p.set_defaults(func=main)


def add_build_options(p):
    """--board/--buildtype/--sanitize/--compiler, shared with `edgerun test`."""
    p.add_argument("--board", "-b", required=True, help="board name (boards/<name>.yaml)")
    p.add_argument("--buildtype", choices=("release", "debug", "debugoptimized"), default="release")
    p.add_argument("--sanitize", default="", metavar="LIST",
                   help="comma-separated sanitizers: address, undefined")
    p.add_argument("--compiler", choices=("gcc", "clang"), default=None,
                   help="compiler family (default: the board's toolchain)")


def build_kwargs(args):
    return {"buildtype": args.buildtype, "compiler": args.compiler,
            "sanitize": tuple(s.strip() for s in args.sanitize.split(",") if s.strip())}


def main(args):
    from ..boards import build
    report = build.build(args.board, log=sys.stderr, **build_kwargs(args))
    print(json.dumps(report, indent=1) if args.json else build.format_report(report))
    return 0
