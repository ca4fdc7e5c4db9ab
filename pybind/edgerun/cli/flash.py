"""`edgerun flash BUNDLE --board B --target DIR|ssh://user@host:port/path`: install a
signed bundle into the device's inactive slot, health-check it, switch to it."""
import json
import sys

from .. import console
from .options import formatter

EPILOG = """\
examples:
  edgerun flash app.swu --board rpi5 --target /mnt/sdcard/opt/edgerun --cert keys/signing-cert.pem
  edgerun flash app.swu --board host --target ssh://pi@10.0.0.7:22/opt/edgerun --cert cert.pem \\
      --identity ~/.ssh/id_ed25519
  edgerun flash app.swu ... --no-downgrade      # refuse a version older than the active one
  edgerun flash --status --board rpi5 --target DIR
  edgerun flash --from http://updates.example/edgerun/ --board rpi5 --target DIR --cert cert.pem
      # the newest release for rpi5 in the server's index.json (--version V for another)
  edgerun flash --from https://updates.example/edgerun/ --ca update-ca.pem ...
      # an https server checked against its own CA

The active slot is never written. If anything fails (bad signature, another
board, no space, failed health check, interruption), the device stays on the
slot it was running. `edgerun rollback` goes back to the other slot.
"""


def add_target_options(p):
    p.add_argument("--board", "-b", required=True, help="board name (boards/<name>.yaml)")
    p.add_argument("--target", "-T", required=True, help="device root: a folder, or ssh://[user@]host[:port]/path")
    p.add_argument("--identity", "-i", metavar="KEY", help="ssh private key for an ssh:// target")
    p.add_argument("--ssh-option", "-o", action="append", default=[], metavar="OPT",
                   help="extra ssh -o option (repeatable), e.g. UserKnownHostsFile=known_hosts")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def register(sub):
    p = sub.add_parser("flash", help="A/B install a bundle onto a device (folder or ssh)",
                       description=__doc__, epilog=EPILOG, formatter_class=formatter())
    p.add_argument("bundle", nargs="?", help="the .swu bundle (from edgerun package)")
    p.add_argument("--from", dest="from_url", metavar="URL|DIR",
                   help="pull the release from an update server (its root or index.json; http(s)://, file:// or "
                        "the folder `edgerun release --to` wrote) instead of BUNDLE")
    p.add_argument("--version", help="with --from: this release instead of the newest")
    p.add_argument("--ca", metavar="PEM", help="with --from https://: the CA the server's certificate must chain "
                   "to (default: the system's, or SSL_CERT_FILE)")
    p.add_argument("--cert", help="certificate the bundle must be signed with")
    p.add_argument("--no-downgrade", action="store_true", help="refuse a version older than the active one")
    p.add_argument("--status", action="store_true", help="only report the slots and the history")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    add_target_options(p)
    p.set_defaults(func=main)


def main(args):
    from ..ota import flash
    if args.status:
        rep = flash.status(args.board, args.target, args.identity, args.ssh_option)
        if args.json:
            print(json.dumps(rep, indent=1))
        else:
            print(f"{rep['root']}: active slot {rep['active'] or '(none)'}")
            for s, info in rep["slots"].items():
                what = "empty" if info is None else f"{info['version']} ({info['model']}, board {info['board']})"
                print(f"  {s}{' *' if s == rep['active'] else '  '} {what}")
        return 0
    if bool(args.bundle) == bool(args.from_url) or not args.cert:
        raise ValueError("flash needs a BUNDLE or --from URL, and --cert (or --status)")
    with console.progress("edgerun flash") as bar:
        def say(m):
            # On a terminal the bar names the step and the line prints above it.
            bar.update(description=m)
            if not args.quiet:
                print(f"edgerun flash: {m}", file=sys.stderr, flush=True)
        if args.from_url:
            ev = flash.flash_from(args.from_url, args.board, args.target, args.cert, args.version,
                                  args.no_downgrade, args.identity, args.ssh_option, progress=say, ca=args.ca)
        else:
            ev = flash.flash(args.bundle, args.board, args.target, args.cert, args.no_downgrade, args.identity,
                             args.ssh_option, progress=say)
    print(json.dumps(ev) if args.json else
          f"{args.target}: now on {ev['slot']} (version {ev['version']}), was {ev['from_slot'] or 'empty'}")
    return 0
