"""`edgerun sysroot --board B`: assemble the board's Python (aarch64 python3 with cffi, numpy, rich and jinja2)
in build/sysroot/<arch>/ from Debian's packages and PyPI wheels, changing nothing on the host."""
import json

from .options import formatter

EPILOG = """\
examples:
  edgerun sysroot --board rpi5            # build/sysroot/aarch64/ (about 115 MiB; idempotent)
  edgerun sysroot --board rpi5 --force    # assemble again from scratch
  edgerun sysroot --board rpi5 --path     # just print where it is
  edgerun test --board rpi5 --python      # run examples/device/*.py with it under qemu

Debian packages come from deb.debian.org (the host's Debian release; override
with EDGERUN_DEBIAN_SUITE / EDGERUN_DEBIAN_MIRROR) through a private apt state
folder under build/sysroot/.cache/: no `dpkg --add-architecture`, nothing under
/etc/apt or /var/lib/dpkg changes. Wheels come from PyPI via pip download.
Run a script with it:
  qemu-aarch64 -L build/sysroot/aarch64 build/sysroot/aarch64/usr/bin/python3 script.py
"""


def register(sub):
    p = sub.add_parser("sysroot", help="assemble the board's Python (aarch64 python3 + cffi + numpy + rich)",
                       description=__doc__, epilog=EPILOG, formatter_class=formatter())
    p.add_argument("--board", required=True, metavar="B", help="board name (boards/B.yaml); its arch decides")
    p.add_argument("--force", action="store_true", help="assemble again even when up to date")
    p.add_argument("--path", action="store_true", help="print the sysroot folder and exit")
    p.add_argument("--json", action="store_true", help="print the sysroot's stamp (packages, wheels, size) as JSON")
    p.set_defaults(func=main)


def main(args):
    from .. import boards
    from ..boards import sysroot
    board = boards.load(args.board)
    sysroot.arch_info(board.arch)           # the host board: a clear "not needed"
    if args.path:
        print(sysroot.sysroot_dir(board.arch, boards.repo_root()))
        return 0
    log = (lambda *a: None) if args.json else print
    st = sysroot.assemble(board.arch, root=boards.repo_root(), force=args.force, log=log)
    if args.json:
        print(json.dumps(st, indent=1))
    return 0
