"""`edgerun package`: a signed SWUpdate bundle (.swu) with the runtime, the Python
package, a model, its device configuration and a manifest, for one board."""
import json
import sys

from .options import formatter

EPILOG = """\
examples:
  edgerun keygen -o keys/
  edgerun package --board rpi5 --model models/edgerun-add.gguf --version 1.0.0 \\
      --key keys/signing-key.pem --cert keys/signing-cert.pem -o edgerun-rpi5-1.0.0.swu
  edgerun package --board rpi5 --model my.gguf --version 1.1.0 --config edgerun.yaml ...

The runtime comes from build/<board>/ (built if needed). The expected
health-check output is what that runtime generates for the prompt (under qemu
for Arm boards); the bundle records it and the device must reproduce it.
Check a bundle with the real SWUpdate:
  swupdate -k signing-cert.pem -H raspberrypi5:1.0 -c -e stable,slot-b -i bundle.swu
"""


def register(sub):
    p = sub.add_parser("package", help="signed SWUpdate bundle for a board", description=__doc__,
                       epilog=EPILOG, formatter_class=formatter())
    p.add_argument("--board", "-b", required=True, help="board name (boards/<name>.yaml)")
    p.add_argument("--model", "-m", required=True, metavar="GGUF", help="the model to ship")
    p.add_argument("--version", required=True, help="bundle version, 1-4 dot-separated numbers")
    p.add_argument("--key", required=True, help="signing key (PEM), from edgerun keygen")
    p.add_argument("--cert", required=True, help="certificate of the key (PEM)")
    p.add_argument("-o", "--out", required=True, metavar="FILE.swu", help="bundle to write")
    p.add_argument("--config", metavar="YAML", help="device configuration to ship (default: generated)")
    p.add_argument("--root", metavar="PATH", help="device folder holding the slots (default: slots.root "
                   "of the config, /opt/edgerun)")
    p.add_argument("--build-dir", metavar="DIR", help="take the runtime from this build dir")
    p.add_argument("--health-prompt", metavar="TEXT", help="health-check prompt (default: 0012+0034=)")
    p.add_argument("--health-tokens", type=int, metavar="N", help="tokens the health check generates")
    p.add_argument("--threads", type=int, metavar="N", help="threads.count of the generated config")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")
    p.set_defaults(func=main)


def main(args):
    from ..ota.package import package
    man = package(args.board, args.model, args.version, args.key, args.cert, args.out, config=args.config,
                  root=args.root, build_dir=args.build_dir, health_prompt=args.health_prompt,
                  health_max_tokens=args.health_tokens, threads=args.threads, log=sys.stderr)
    if args.json:
        print(json.dumps(man, indent=1))
    else:
        hc = man["health_check"]
        print(f"{args.out}: {man['board']} ({man['hardware']}:{man['revision']}) bundle {man['version']}, "
              f"{len(man['files'])} files; health check {hc['prompt']!r} -> {hc['expect']!r}")
    return 0
