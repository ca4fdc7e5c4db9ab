"""`edgerun keygen -o DIR`: a signing key and self-signed certificate for update bundles."""
from .options import formatter

EPILOG = """\
examples:
  edgerun keygen -o keys/                 # keys/signing-key.pem (0600), keys/signing-cert.pem
  edgerun keygen -o keys/ --ec            # P-256 instead of RSA-3072

The device trusts the certificate (`swupdate -k signing-cert.pem`, or
`edgerun flash --cert`); keep the key off the device. Bundles: edgerun package.
"""


def register(sub):
    p = sub.add_parser("keygen", help="signing key + certificate for update bundles",
                       description=__doc__, epilog=EPILOG, formatter_class=formatter())
    p.add_argument("-o", "--out", required=True, metavar="DIR", help="folder to write the key and certificate to")
    p.add_argument("--ec", action="store_true", help="EC P-256 key instead of RSA-3072")
    p.add_argument("--cn", default="edgerun update signer", help="certificate common name")
    p.add_argument("--days", type=int, default=3650, help="validity in days (default 3650)")
    p.add_argument("--force", action="store_true", help="replace an existing key and certificate")
    p.set_defaults(func=main)


def main(args):
    from ..ota.keygen import KeygenError, fingerprint, keygen
    try:
        key, cert = keygen(args.out, "ec" if args.ec else "rsa", args.cn, args.days, args.force)
        print(f"key:  {key}\ncert: {cert}\nsha256 fingerprint: {fingerprint(cert)}")
    except KeygenError as e:
        raise ValueError(str(e)) from None
    return 0
