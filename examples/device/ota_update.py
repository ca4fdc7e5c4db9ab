#!/usr/bin/env python3
"""On-device update with edgerun.ota: verify a bundle, install it into the
inactive slot (health check included), move the running model over, report.

    python3 ota_update.py update.swu --root /opt/edgerun --cert /etc/edgerun/cert.pem \
        --hardware raspberrypi5 --revision 1.0
    python3 ota_update.py --rollback --root /opt/edgerun
    python3 ota_update.py --report --root /opt/edgerun

Run it with the Python package of the active slot (PYTHONPATH=/opt/edgerun/current/python).
A service that keeps an edgerun.LiveModel open would call ota.swap(live, ...)
after install(): requests in flight finish on the old weights, new ones use
the model the new slot's edgerun.yaml names.
"""
import argparse
import json
import sys

import edgerun.ota as ota
from edgerun.errors import EdgerunError


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundle", nargs="?")
    ap.add_argument("--root", required=True, help="device folder with the slots")
    ap.add_argument("--cert", help="the certificate bundles must be signed with")
    ap.add_argument("--hardware", help="this device's OTA hardware name (board ota.hardware)")
    ap.add_argument("--revision", help="this device's hardware revision")
    ap.add_argument("--no-downgrade", action="store_true")
    ap.add_argument("--rollback", action="store_true")
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--serve-check", action="store_true",
                    help="after switching, open the new slot's model from its edgerun.yaml and answer "
                         "its health-check prompt through the Python API")
    a = ap.parse_args()
    try:
        if a.report:
            print(json.dumps(ota.report(a.root), indent=1))
            return 0
        if a.rollback:
            ev = ota.rollback(a.root)
            print(f"rolled back to {ev['slot']} ({ev['version']})")
            return 0
        if not (a.bundle and a.cert):
            ap.error("give a BUNDLE and --cert (or --report / --rollback)")
        active = ota.report(a.root)
        current = active["slots"].get(active["active"]) if active["active"] else None
        min_version = current["version"] if (a.no_downgrade and current) else None
        with ota.verify(a.bundle, a.cert, hardware=a.hardware, revision=a.revision,
                        min_version=min_version) as b:
            print(f"verified {b.path.name}: version {b.version} for {b.hardware} "
                  f"({b.manifest['model']['file']})")
            ev = ota.install(b, a.root, progress=lambda m: print(f"  {m}"))
        print(f"now on {ev['slot']} (version {ev['version']})")
        if a.serve_check:
            # the Python way of moving a service to the new slot's model
            cfg_path = f"{a.root}/current/edgerun.yaml"
            from edgerun.ota import device_config
            cfg = device_config.load(cfg_path)
            model = ota.swap(None, cfg)
            try:
                text = device_config.generate(cfg, model, max_tokens=cfg["health_check"]["max_tokens"])
            finally:
                model.close()
            print(f"serving {cfg['model']['path']}: {cfg['health_check']['prompt']!r} -> {text!r}")
            if text != cfg["health_check"]["expect"]:
                print("unexpected answer; rolling back", file=sys.stderr)
                ota.rollback(a.root)
                return 1
        return 0
    except EdgerunError as e:
        print(f"ota_update: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
