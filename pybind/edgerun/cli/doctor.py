"""`edgerun doctor`: checks everything the board driver needs and says how to fix what is missing."""
import json

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
    w = max(len(r["name"]) for r in rows)
    for r in rows:
        status = "ok" if r["ok"] else ("optional" if r["optional"] else "MISSING")
        text = r["detail"] if r["ok"] else f"{r['what']}: {r['fix']}"
        print(f"  {r['name']:<{w}}  {status:<8}  {text}")
    if missing:
        print(f"\n{len(missing)} required piece{'s' if len(missing) > 1 else ''} missing: "
              + "; ".join(f"{r['name']} ({r['fix']})" for r in missing))
        return 1
    print("\neverything the board driver needs is here")
    return 0
