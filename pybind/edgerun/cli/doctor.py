"""`edgerun doctor`: checks everything the board driver needs and says how to fix what is missing."""
import json
import sys

from .. import console
from ..boards.prereqs import diagnose
from .options import formatter


def register(sub):
    p = sub.add_parser("doctor", help="check compilers, meson, qemu, sysroot, Python packages",
                       description=__doc__, formatter_class=formatter(),
                       epilog="Exit status 1 when a required piece is missing (optional ones only warn).\n"
                              "`make setup` (scripts/setup.sh) installs all of them on Debian.")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=main)


def main(args):
    rows = diagnose()
    missing = [r for r in rows if not r["ok"] and not r["optional"]]
    if args.json:
        print(json.dumps({"ok": not missing, "checks": rows}, indent=1))
        return 1 if missing else 0
    status = lambda r: "ok" if r["ok"] else ("optional" if r["optional"] else "MISSING")
    text = lambda r: r["detail"] if r["ok"] else f"{r['what']}: {r['fix']}"
    if console.is_terminal(sys.stdout):
        console.table(("check", "status", "detail"), [(r["name"], status(r), text(r)) for r in rows])
    else:
        w = max(len(r["name"]) for r in rows)
        for r in rows:
            print(f"  {r['name']:<{w}}  {status(r):<8}  {text(r)}")
    if missing:
        print(f"\n{len(missing)} required piece{'s' if len(missing) > 1 else ''} missing: "
              + "; ".join(f"{r['name']} ({r['fix']})" for r in missing))
        return 1
    print("\neverything the board driver needs is here")
    return 0
