"""`edgerun test --board B`: C unit tests and model checks of a board build under qemu-user,
on every qemu CPU model the board lists."""
import json
import sys

from .options import formatter
from .build import add_build_options, build_kwargs

EPILOG = """\
checks, per qemu CPU model of the board (SVE boards: 128, 256, 512 bits and more):
  c-tests   meson test (the C unit tests) under qemu-aarch64 -L SYSROOT, QEMU_CPU=<model>
  answers   the cross-built edgerun-cli answers held-out problems of the embedded model
  logits    every step's logits match the host build (build/host) within 1e-3 + 1e-3*|x|

examples:
  edgerun test --board rpi5
  edgerun test --board neoverse-v1 --cpu max,sve-default-vector-length=32
  edgerun test --board armv9-sve2 --json > sve2.json
Exit status: 0 when every check passes, 1 otherwise.
"""


def register(sub):
    p = sub.add_parser("test", help="run the C tests and model checks of a board build under qemu-user",
                       description=__doc__, epilog=EPILOG, formatter_class=formatter())
    add_build_options(p)
    p.add_argument("--cpu", action="append", default=None, metavar="MODEL",
                   help="only this qemu CPU model of the board (repeatable; default: all it lists)")
    p.add_argument("--problems", type=int, default=None, metavar="N",
                   help="held-out problems per CPU model (default 32, at most 200)")
    p.add_argument("--no-c-tests", dest="c_tests", action="store_false", help="skip the C unit tests")
    p.add_argument("--no-model", dest="model_checks", action="store_false", help="skip the model checks")
    p.add_argument("--json", action="store_true", help="print the report as JSON (the table goes to stderr)")
    p.add_argument("--python", action="store_true",
                   help="instead: run examples/device/*.py and `edgerun serve` (GET /health, one completion) "
                        "under qemu with the board's own Python (edgerun sysroot; edgerun/boards/device_python.py)")
    p.set_defaults(func=main)


def main(args):
    if args.python:
        from ..boards import device_python
        return device_python.main(args.board, cpus=args.cpu, build_kwargs=build_kwargs(args))
    from ..boards import tests as board_test
    from ..errors import InvalidArgumentError
    problems = board_test.DEFAULT_PROBLEMS if args.problems is None else args.problems
    if not 1 <= problems <= 200:
        raise InvalidArgumentError(f"--problems must be in 1..200, got {problems}")
    def progress(row):
        # sys.stderr looked up per row: on a terminal the progress bar stands in for
        # it meanwhile and prints the row above itself.
        print(f"  {row['cpu']:<36} {row['check']:<8} {'ok' if row['ok'] else 'FAIL':<4} "
              f"{row['seconds']:6.1f}s  {row['detail']}", file=sys.stderr, flush=True)

    report = board_test.run_board_tests(args.board, cpus=args.cpu, problems=problems, c_tests=args.c_tests,
                                        model_checks=args.model_checks, log=sys.stderr, on_result=progress,
                                        **build_kwargs(args))
    table = board_test.format_table(report)
    if args.json:
        print(table, file=sys.stderr)
        print(json.dumps(report, indent=1))
    else:
        print()
        print(table)
    return 0 if report["ok"] else 1
