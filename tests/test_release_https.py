"""The update server over https: Debian's nginx on 127.0.0.1 with a CA and a
server certificate made here with openssl (started and stopped by the test).

- `edgerun flash --from https://...` checks the server against --ca (or
  SSL_CERT_FILE) and refuses a server its CA did not sign, before writing;
- `edgerun release`/publish PUTs and MOVEs over https to nginx's WebDAV
  (dav_methods), checked against the same CA;
- `swupdate -d -u https://...` installs from it. swupdate 2022.12's
  downloader has no CA option and does not check the server's certificate at
  all (its [download] settings take url, authentication, retries, retrywait and
  timeout; strictssl/cafile there are ignored): the test pins that down, and
  that the bundle's signature (-k) is what refuses a foreign bundle.
"""
import json
import os
import shutil
import subprocess
import sys
import threading

import pytest

import ota_helpers as H
import release_helpers as R
from edgerun.errors import OtaError
from edgerun.ota import flash, publish

pytestmark = pytest.mark.skipif(R.NGINX is None, reason="nginx is not installed (apt-get install nginx-light)")
needs_swupdate = pytest.mark.skipif(H.SWUPDATE is None, reason="swupdate is not installed (apt-get install swupdate)")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    if H.host_build_dir() is None:
        pytest.skip("no native build (make build)")
    d = tmp_path_factory.mktemp("release_https")
    key, cert = H.make_keys(d / "keys")
    dev = d / "swdev"
    mans = {v: H.make_bundle(d / f"{v}.swu", v, key, cert, dev) for v in ("1.0.0", "1.1.0")}
    www = d / "www"
    for v in mans:
        publish.publish(d / f"{v}.swu", mans[v], www)
    ca, srv_cert, srv_key = R.make_tls(d / "pki")
    other_ca, _, _ = R.make_tls(d / "other-pki")
    return {"dir": d, "key": key, "cert": cert, "www": www, "dev": dev, "manifests": mans, "ca": ca,
            "srv_cert": srv_cert, "srv_key": srv_key, "other_ca": other_ca}


def _cli(*args, env=None):
    e = dict(H.PY_ENV, **(env or {}))
    for k in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        if env is None or k not in env:
            e.pop(k, None)
    return subprocess.run([sys.executable, "-m", "edgerun", *map(str, args)], capture_output=True, text=True,
                          env=e, timeout=300)


def _nginx(env, root, work, **kw):
    return R.Nginx(root, work, env["srv_cert"], env["srv_key"], **kw)


def test_flash_from_https_checks_the_server_against_the_ca(env, tmp_path):
    dev = tmp_path / "dev"
    dev.mkdir()
    with _nginx(env, env["www"], tmp_path / "srv") as srv:
        assert srv.url.startswith("https://")
        r = _cli("flash", "--from", srv.url, "--board", "host", "--target", dev, "--cert", env["cert"],
                 "--ca", env["ca"], "-q")
        assert r.returncode == 0, r.stderr
        assert "now on rootfs-a (version 1.1.0)" in r.stdout
        # the system's store does not hold the test CA, and another CA is not it:
        # refused in one line, before anything is written
        for extra in ([], ["--ca", env["other_ca"]]):
            r = _cli("flash", "--from", srv.url, "--version", "1.0.0", "--board", "host", "--target", dev,
                     "--cert", env["cert"], "-q", *extra)
            assert r.returncode == 1, r.stdout
            assert len(r.stderr.strip().splitlines()) == 1 and "certificate does not verify" in r.stderr, r.stderr
            assert os.readlink(dev / "current") == "rootfs-a" and not (dev / "rootfs-b").exists()
        # SSL_CERT_FILE, as OpenSSL reads it, instead of --ca
        r = _cli("flash", "--from", srv.url + "index.json", "--version", "1.0.0", "--board", "host", "--target",
                 dev, "--cert", env["cert"], "-q", "--json", env={"SSL_CERT_FILE": str(env["ca"])})
        assert r.returncode == 0, r.stderr
        ev = json.loads(r.stdout)
        assert (ev["slot"], ev["version"]) == ("rootfs-b", "1.0.0") and ev["url"].startswith(srv.url)


def test_publish_over_https_webdav_then_pull(env, tmp_path):
    root = tmp_path / "webroot"
    root.mkdir()
    base_dir = root / "edgerun"
    with _nginx(env, root, tmp_path / "dav", webdav=True) as srv:
        base = srv.url + "edgerun/"
        with pytest.raises(OtaError, match="certificate does not verify"):
            publish.publish(env["dir"] / "1.0.0.swu", env["manifests"]["1.0.0"], base, ca=env["other_ca"])
        assert not base_dir.exists()
        for v in ("1.0.0", "1.1.0"):
            res = publish.publish(env["dir"] / f"{v}.swu", env["manifests"][v], base, ca=env["ca"])
            assert res["added"] and res["url"] == base + publish.bundle_relpath("host", v)
        again = publish.publish(env["dir"] / "1.1.0.swu", env["manifests"]["1.1.0"], base, ca=env["ca"])
        assert again["added"] is False
        idx = publish.parse_index((base_dir / "index.json").read_text())
        assert [r["version"] for r in idx["releases"]] == ["1.0.0", "1.1.0"]
        for r in idx["releases"]:
            assert publish.sha256_file(base_dir / r["path"]) == r["sha256"]
        assert not (base_dir / ".edgerun-publish.lock").exists()
        assert not [p for p in base_dir.iterdir() if p.name.endswith(".tmp")]
        dev = tmp_path / "dev"
        dev.mkdir()
        ev = flash.flash_from(base, "host", str(dev), env["cert"], ca=env["ca"])
        assert ev["version"] == "1.1.0"


@needs_swupdate
def test_swupdate_downloads_over_https_and_the_signature_decides(env, tmp_path):
    dev = env["dev"]
    if dev.exists():
        shutil.rmtree(dev)
    dev.mkdir()
    flash.flash(env["dir"] / "1.0.0.swu", "host", str(dev), env["cert"])
    www = tmp_path / "www"
    shutil.copytree(env["www"], www)
    fkey, fcert = H.make_keys(tmp_path / "foreign")
    H.resign(env["dir"] / "1.1.0.swu", www / "foreign.swu", fkey, fcert)
    with _nginx(env, www, tmp_path / "srv") as srv:
        url = srv.url + publish.bundle_relpath("host", "1.1.0")
        # served under a CA this machine does not trust (none is given to
        # swupdate, it has no option for one), the install still succeeds:
        # swupdate's downloader does not check the server. If a later swupdate
        # starts to, this fails, and the docs' advice changes.
        ok, out = R.swupdate_download(url, env["cert"], "host:1.0", "-e", "stable,slot-b")
        assert ok, out
        ok, out = R.swupdate_download(srv.url + "foreign.swu", env["cert"], "host:1.0", "-e", "stable,slot-b")
        assert not ok, out
    after = H.tree(dev)
    for rel_path, info in env["manifests"]["1.1.0"]["files"].items():
        assert after[f"rootfs-b/{rel_path}"] == info["sha256"], rel_path


def test_concurrent_publishers_over_https_keep_every_release(env, tmp_path):
    """The publish lock on nginx's WebDAV too (its MKCOL of an existing
    collection answers 405 as lighttpd's does): four publishers at once
    (without the lock one entry of the four survived, in two runs of two)."""
    root = tmp_path / "webroot"
    root.mkdir()
    versions = [f"3.{i}.0" for i in range(4)]
    mans = {v: H.make_bundle(tmp_path / f"{v}.swu", v, env["key"], env["cert"], env["dev"]) for v in versions}
    with _nginx(env, root, tmp_path / "dav", webdav=True) as srv:
        go = threading.Barrier(len(versions))
        errors = []

        def one(v):
            try:
                go.wait()
                publish.publish(tmp_path / f"{v}.swu", mans[v], srv.url + "edgerun/", ca=env["ca"])
            except Exception as e:       # noqa: BLE001 - collected and asserted below
                errors.append(f"{v}: {e!r}")
        threads = [threading.Thread(target=one, args=(v,)) for v in versions]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
    idx = publish.parse_index((root / "edgerun" / "index.json").read_text())
    assert sorted(r["version"] for r in idx["releases"]) == versions
    assert not (root / "edgerun" / ".edgerun-publish.lock").exists()
