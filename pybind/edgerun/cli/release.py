"""`edgerun release --board B --model M --version V --key K --cert C --to DIR|URL`:
build, test under qemu, bench against the board's gates, package the signed
bundle and publish it with its index on the update server (edgerun/ota/release.py)."""
import json
import sys

from .options import formatter

EPILOG = """\
examples:
  edgerun release --board rpi5 --model models/edgerun-add.gguf --version 1.2.0 \\
      --key keys/signing-key.pem --cert keys/signing-cert.pem --to /srv/www/edgerun
  edgerun release ... --to https://updates.example/edgerun/          # WebDAV PUT + MOVE
  edgerun release ... --test-report test-rpi5.json --bench-report bench-rpi5/bench-rpi5.json

Steps: build, test, bench, package, publish; the first failure stops the
release with one line (a failed gate: no bundle is made). Every step's report
lands in --report-dir (default release-<board>-<version>/): build.json,
test.json, bench-<board>.json and .png, package.json, publish.json, release.json.

--to DIR is the web root of the update server: <board>/<version>/*.swu and
index.json, replaced atomically; earlier releases stay. Devices pull with
  swupdate -k cert.pem -H <hardware>:<rev> -e stable,slot-b -d "-u URL/<board>/<version>/<file>.swu"
  edgerun flash --from URL --board B --target DIR --cert cert.pem
For an http(s) URL, credentials come from the URL or EDGERUN_PUBLISH_AUTH=user:password,
and --ca names the CA an https server must chain to (default: the system's, or
SSL_CERT_FILE). Publishers to one server take turns under a lock collection
(.edgerun-publish.lock/) on it, so concurrent releases keep every index entry.
"""


def register(sub):
    p = sub.add_parser("release", help="build, test, bench, package and publish a board's release",
                       description=__doc__, epilog=EPILOG, formatter_class=formatter())
    p.add_argument("--board", "-b", required=True, help="board name (boards/<name>.yaml)")
    p.add_argument("--model", "-m", required=True, metavar="GGUF", help="the model to ship")
    p.add_argument("--version", required=True, help="release version, 1-4 dot-separated numbers")
    p.add_argument("--key", required=True, help="signing key (PEM)")
    p.add_argument("--cert", required=True, help="certificate of the key (PEM)")
    p.add_argument("--to", required=True, metavar="DIR|URL", help="update server: web root folder, file:// "
                   "or http(s):// (WebDAV)")
    p.add_argument("--ca", metavar="PEM", help="for an https:// --to: the CA the server's certificate must chain "
                   "to (default: the system's, or SSL_CERT_FILE)")
    p.add_argument("--report-dir", metavar="DIR", help="where every step's report goes")
    p.add_argument("--config", metavar="YAML", help="device configuration to ship (default: generated)")
    p.add_argument("--build-dir", metavar="DIR", help="take the runtime from this build dir (no build)")
    p.add_argument("--test-report", metavar="JSON", help="use this `edgerun test --json` report (checked)")
    p.add_argument("--bench-report", metavar="JSON", help="use this `edgerun bench --board` report "
                   "(gates evaluated again)")
    p.add_argument("--problems", type=int, metavar="N", help="held-out problems per CPU model for the test")
    p.add_argument("--bench-repeat", type=int, metavar="N", help="bench runs per CPU model (default 5; the "
                   "gates compare the same workload with fewer runs)")
    p.add_argument("--cpu", action="append", default=None, metavar="MODEL", help="only this qemu CPU model")
    p.add_argument("--json", action="store_true", help="print release.json")
    p.set_defaults(func=main)


def main(args):
    from ..ota.release import release
    rd = args.report_dir or f"release-{args.board}-{args.version}"
    doc = release(args.board, args.model, args.version, args.key, args.cert, args.to, rd,
                  test_report=args.test_report, bench_report=args.bench_report, build_dir=args.build_dir,
                  config=args.config, problems=args.problems, cpus=args.cpu,
                  bench_repeat=args.bench_repeat, ca=args.ca, log=sys.stderr)
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        print(f"released {doc['board']} {doc['version']}: {doc['url']} (sha256 {doc['sha256'][:12]}...); "
              f"reports in {rd}")
    return 0
