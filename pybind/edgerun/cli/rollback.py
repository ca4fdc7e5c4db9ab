"""`edgerun rollback --board B --target DIR|ssh://...`: switch the device back to its
other slot, after checking that slot's files and health."""
import json

from .options import formatter
from .flash import add_target_options


def register(sub):
    p = sub.add_parser("rollback", help="switch a device back to its other slot", description=__doc__,
                       formatter_class=formatter())
    add_target_options(p)
    p.add_argument("--no-check", action="store_true", help="skip the health check (files are still checked)")
    p.set_defaults(func=main)


def main(args):
    from ..ota import flash
    ev = flash.rollback(args.board, args.target, args.identity, args.ssh_option, check=not args.no_check)
    print(json.dumps(ev) if args.json else
          f"{args.target}: rolled back to {ev['slot']} (version {ev['version']}), was {ev['from_slot']}")
    return 0
