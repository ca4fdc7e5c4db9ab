"""Signing key and self-signed certificate for SWUpdate bundles, made with the
openssl command line (the same tool that signs and verifies them).

SWUpdate, as Debian builds it, verifies `sw-description.sig` as a CMS
(PKCS#7) signature and, by default, asks that the signer's certificate be fit
for S/MIME signing ("emailProtection"), so the certificate carries that
extended key usage and the digitalSignature key usage. The device trusts
exactly this certificate (`swupdate -k cert.pem`); for a fleet, sign with a
key from your own CA instead and give the devices the CA.
"""
import os
import pathlib
import shutil
import subprocess

KEY_NAME = "signing-key.pem"
CERT_NAME = "signing-cert.pem"


class KeygenError(RuntimeError):
    pass


def openssl():
    exe = shutil.which("openssl")
    if not exe:
        raise KeygenError("openssl is not installed; install it (apt-get install openssl)")
    return exe


def keygen(out_dir, kind="rsa", cn="edgerun update signer", days=3650, force=False):
    """Writes DIR/signing-key.pem (mode 0600) and DIR/signing-cert.pem; returns
    (key_path, cert_path). kind: "rsa" (3072 bits) or "ec" (P-256)."""
    out = pathlib.Path(out_dir)
    key, cert = out / KEY_NAME, out / CERT_NAME
    if not force and (key.exists() or cert.exists()):
        raise KeygenError(f"{key if key.exists() else cert} already exists; pass --force to replace the "
                          "key (bundles signed with the old key will no longer verify with the new cert)")
    if kind == "rsa":
        newkey = ["-newkey", "rsa:3072"]
    elif kind == "ec":
        newkey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
    else:
        raise KeygenError(f"key kind must be 'rsa' or 'ec', got {kind!r}")
    if "/" in cn or not cn.strip():
        raise KeygenError(f"the common name must be non-empty and without '/', got {cn!r}")
    out.mkdir(parents=True, exist_ok=True)
    tmp_key = out / f".{KEY_NAME}.tmp"
    tmp_cert = out / f".{CERT_NAME}.tmp"
    # The key is created private from its first byte: a umask-wide window
    # where it is world-readable would defeat the point of a signing key.
    fd = os.open(tmp_key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.close(fd)
    try:
        r = subprocess.run(
            [openssl(), "req", "-x509", *newkey, "-nodes", "-sha256", "-days", str(int(days)),
             "-keyout", str(tmp_key), "-out", str(tmp_cert), "-subj", f"/CN={cn}",
             "-addext", "keyUsage=critical,digitalSignature",
             "-addext", "extendedKeyUsage=emailProtection"],
            capture_output=True, text=True)
        if r.returncode != 0:
            raise KeygenError(f"openssl req failed: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
        os.chmod(tmp_key, 0o600)
        os.replace(tmp_key, key)
        os.replace(tmp_cert, cert)
    finally:
        for p in (tmp_key, tmp_cert):
            if p.exists():
                p.unlink()
    return key, cert


def fingerprint(cert_path):
    """SHA-256 fingerprint of a certificate, as openssl prints it (AA:BB:...)."""
    r = subprocess.run([openssl(), "x509", "-in", str(cert_path), "-noout", "-fingerprint", "-sha256"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise KeygenError(f"{cert_path}: not a PEM certificate ({r.stderr.strip()})")
    return r.stdout.strip().split("=", 1)[-1]
