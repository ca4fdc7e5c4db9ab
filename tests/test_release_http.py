"""Devices pulling published releases over plain HTTP from a real lighttpd on
127.0.0.1: the real swupdate's downloader (`swupdate -d -u URL`) and
`edgerun flash --from URL`; a transfer cut by killing the server leaves the
device on its working slot and the retry succeeds; tampered bundles are
refused; publishing to the server over WebDAV (PUT + MOVE)."""
import json
import os
import shutil
import subprocess
import sys
import threading

import pytest

import ota_helpers as H
import release_helpers as R
from edgerun import ota
from edgerun.errors import OtaError
from edgerun.ota import flash, publish

pytestmark = pytest.mark.skipif(R.LIGHTTPD is None, reason="lighttpd is not installed (apt-get install lighttpd)")
needs_swupdate = pytest.mark.skipif(H.SWUPDATE is None, reason="swupdate is not installed (apt-get install swupdate)")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    if H.host_build_dir() is None:
        pytest.skip("no native build (make build)")
    d = tmp_path_factory.mktemp("release_http")
    key, cert = H.make_keys(d / "keys")
    # the bundles' device root is the folder swupdate installs into
    dev = d / "swdev"
    mans = {}
    for v in ("1.0.0", "1.1.0"):
        mans[v] = H.make_bundle(d / f"{v}.swu", v, key, cert, dev)
    www = d / "www"
    for v in mans:
        publish.publish(d / f"{v}.swu", mans[v], www)
    return {"dir": d, "key": key, "cert": cert, "www": www, "dev": dev, "manifests": mans}


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "edgerun", *map(str, args)], capture_output=True, text=True,
                          env=H.PY_ENV, timeout=300)


def _on_v1(env, dev):
    """A device running 1.0.0 from slot A (what the field has before the update)."""
    if dev.exists():
        shutil.rmtree(dev)
    dev.mkdir()
    flash.flash(env["dir"] / "1.0.0.swu", "host", str(dev), env["cert"])
    assert ota.active_slot(ota.LocalTarget(dev)) == "rootfs-a"
    return H.tree(dev / "rootfs-a")


def _still_on_a(dev, before):
    t = ota.LocalTarget(dev)
    assert os.readlink(dev / "current") == "rootfs-a"
    assert H.tree(dev / "rootfs-a") == before
    ok, msg = ota.health_check(t, "rootfs-a")
    assert ok, msg


def _cut_after(server, seconds):
    t = threading.Timer(seconds, server.stop)
    t.start()
    return t


def _bundle_url(server, v):
    return server.url + publish.bundle_relpath("host", v)


# ------------------------------------------------------------------ swupdate's downloader

@needs_swupdate
def test_swupdate_downloads_verifies_and_installs(env, tmp_path):
    dev = env["dev"]
    before = _on_v1(env, dev)
    with R.Lighttpd(env["www"], tmp_path / "srv") as srv:
        idx = json.loads(R.get(srv.url + "index.json"))
        rel = publish.pick(idx, __import__("edgerun").boards.load("host"))
        assert rel["version"] == "1.1.0"
        ok, out = R.swupdate_download(srv.url + rel["path"], env["cert"], "host:1.0", "-e", "stable,slot-b")
    assert ok, out
    _still_on_a(dev, before)                       # swupdate writes slot B only
    after = H.tree(dev)
    for rel_path, info in env["manifests"]["1.1.0"]["files"].items():
        assert after[f"rootfs-b/{rel_path}"] == info["sha256"], rel_path
    ok, msg = ota.health_check(ota.LocalTarget(dev), "rootfs-b")
    assert ok, msg


@needs_swupdate
def test_swupdate_download_cut_midway_then_retried(env, tmp_path):
    dev = env["dev"]
    before = _on_v1(env, dev)
    slow = R.Lighttpd(env["www"], tmp_path / "slow", kbps=32).start()
    try:
        timer = _cut_after(slow, 1.5)              # ~50 KB of a multi-megabyte bundle
        ok, out = R.swupdate_download(_bundle_url(slow, "1.1.0"), env["cert"], "host:1.0", "-e", "stable,slot-b",
                                      retries=1, timeout=90)
        timer.join()
    finally:
        slow.stop()
    assert not ok, out
    # refused because the transfer broke (the downloader gives up, the partial image fails its hash)
    assert "failed download attempts" in out or "HASH mismatch" in out, out
    _still_on_a(dev, before)
    with R.Lighttpd(env["www"], tmp_path / "again", port=slow.port) as srv:
        ok, out = R.swupdate_download(_bundle_url(srv, "1.1.0"), env["cert"], "host:1.0", "-e", "stable,slot-b")
    assert ok, out
    ok, msg = ota.health_check(ota.LocalTarget(dev), "rootfs-b")
    assert ok, msg


@needs_swupdate
def test_swupdate_refuses_a_tampered_bundle_on_the_server(env, tmp_path):
    dev = env["dev"]
    before = _on_v1(env, dev)
    www = tmp_path / "www"
    shutil.copytree(env["www"], www)
    p = www / publish.bundle_relpath("host", "1.1.0")
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0x01                   # inside the model image
    p.write_bytes(bytes(data))
    foreign_key, foreign_cert = H.make_keys(tmp_path / "foreign")
    H.resign(env["dir"] / "1.1.0.swu", www / "foreign.swu", foreign_key, foreign_cert)
    with R.Lighttpd(www, tmp_path / "srv") as srv:
        for name in (publish.bundle_relpath("host", "1.1.0"), "foreign.swu"):
            ok, out = R.swupdate_download(srv.url + name, env["cert"], "host:1.0", "-e", "stable,slot-b")
            assert not ok, f"{name}:\n{out}"
    _still_on_a(dev, before)


# ------------------------------------------------------------------ edgerun flash --from

def test_flash_from_url_installs_the_newest_release(env, tmp_path):
    dev = tmp_path / "dev"
    dev.mkdir()
    with R.Lighttpd(env["www"], tmp_path / "srv") as srv:
        r = _cli("flash", "--from", srv.url, "--board", "host", "--target", dev, "--cert", env["cert"], "-q")
        assert r.returncode == 0, r.stderr
        assert "now on rootfs-a (version 1.1.0)" in r.stdout
        r = _cli("flash", "--from", srv.url + "index.json", "--version", "1.0.0", "--board", "host",
                 "--target", dev, "--cert", env["cert"], "-q", "--json")
        assert r.returncode == 0, r.stderr
        ev = json.loads(r.stdout)
        assert ev["slot"] == "rootfs-b" and ev["version"] == "1.0.0" and ev["url"].endswith("edgerun-host-1.0.0.swu")
        r = _cli("flash", "--from", srv.url, "--board", "rpi5", "--target", dev, "--cert", env["cert"], "-q")
        assert r.returncode == 1 and "no release for board rpi5 (it has: host)" in r.stderr


def test_flash_from_cut_midway_then_retried(env, tmp_path):
    before = _on_v1(env, tmp_path / "dev")
    dev = tmp_path / "dev"
    slow = R.Lighttpd(env["www"], tmp_path / "slow", kbps=32).start()
    try:
        timer = _cut_after(slow, 1.5)
        with pytest.raises(OtaError, match="download broke off|does not match the index"):
            flash.flash_from(slow.url, "host", str(dev), env["cert"])
        timer.join()
    finally:
        slow.stop()
    _still_on_a(dev, before)
    with R.Lighttpd(env["www"], tmp_path / "again", port=slow.port) as srv:
        ev = flash.flash_from(srv.url, "host", str(dev), env["cert"])
    assert (ev["slot"], ev["version"]) == ("rootfs-b", "1.1.0")


def test_download_resumes_a_cut_transfer(env, tmp_path):
    """A transfer cut midway continues where it stopped (HTTP Range) once the
    server is back, and the result matches the index."""
    rel = [r for r in publish.parse_index((env["www"] / "index.json").read_text())["releases"]
           if r["version"] == "1.1.0"][0]
    part = tmp_path / "b.swu"
    slow = R.Lighttpd(env["www"], tmp_path / "slow", kbps=64).start()
    try:
        timer = _cut_after(slow, 1.0)
        with pytest.raises(OtaError):
            publish.download(slow.url + rel["path"], part, rel["sha256"], rel["bytes"], retries=0)
        timer.join()
    finally:
        slow.stop()
    assert 0 < part.stat().st_size < rel["bytes"]        # the part that came stays, to be resumed
    with R.Lighttpd(env["www"], tmp_path / "again", port=slow.port) as srv:
        publish.download(srv.url + rel["path"], part, rel["sha256"], rel["bytes"])
    assert publish.sha256_file(part) == rel["sha256"]


def test_flash_from_refuses_tampered_bundles_before_writing(env, tmp_path):
    before = _on_v1(env, tmp_path / "dev")
    dev = tmp_path / "dev"
    www = tmp_path / "www"
    shutil.copytree(env["www"], www)
    p = www / publish.bundle_relpath("host", "1.1.0")
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0x01
    p.write_bytes(bytes(data))
    with R.Lighttpd(www, tmp_path / "srv") as srv:
        with pytest.raises(OtaError, match="does not match the index"):
            flash.flash_from(srv.url, "host", str(dev), env["cert"])
        _still_on_a(dev, before)
        # the attacker replaces the bundle with one of their own signing and
        # rewrites the index to match: the signature check still refuses it
        fkey, fcert = H.make_keys(tmp_path / "foreign")
        H.resign(env["dir"] / "1.1.0.swu", p, fkey, fcert)
        idx = json.loads((www / "index.json").read_text())
        for r in idx["releases"]:
            if r["version"] == "1.1.0":
                r.update(sha256=publish.sha256_file(p), bytes=p.stat().st_size)
        (www / "index.json").write_text(json.dumps(idx))
        with pytest.raises(OtaError, match="signature does not verify"):
            flash.flash_from(srv.url, "host", str(dev), env["cert"])
    _still_on_a(dev, before)
    assert not (dev / "rootfs-b").exists() or not (dev / "rootfs-b" / "manifest.json").exists()


# ------------------------------------------------------------------ publishing over WebDAV

@pytest.mark.skipif(not R.has_webdav(), reason="lighttpd's mod_webdav is not installed (apt-get install lighttpd-mod-webdav)")
def test_publish_over_webdav_then_pull(env, tmp_path):
    root = tmp_path / "webroot"
    root.mkdir()
    with R.Lighttpd(root, tmp_path / "dav", webdav=True) as srv:
        for v in ("1.0.0", "1.1.0"):
            res = publish.publish(env["dir"] / f"{v}.swu", env["manifests"][v], srv.url + "edgerun/")
            assert res["added"] and res["url"] == srv.url + "edgerun/" + publish.bundle_relpath("host", v)
        again = publish.publish(env["dir"] / "1.1.0.swu", env["manifests"]["1.1.0"], srv.url + "edgerun/")
        assert again["added"] is False
        idx = publish.parse_index(R.get(srv.url + "edgerun/index.json"))
        assert [r["version"] for r in idx["releases"]] == ["1.0.0", "1.1.0"]
        assert not [p for p in (root / "edgerun").iterdir() if p.name.endswith(".tmp")]
        dev = tmp_path / "dev"
        dev.mkdir()
        ev = flash.flash_from(srv.url + "edgerun/", "host", str(dev), env["cert"])
        assert ev["version"] == "1.1.0"
    # a server without WebDAV answers the MKCOL with an error: one line, nothing claimed
    (tmp_path / "plain").mkdir()
    with R.Lighttpd(tmp_path / "plain", tmp_path / "plainsrv") as srv:
        with pytest.raises(OtaError, match="MKCOL .* HTTP"):
            publish.publish(env["dir"] / "1.0.0.swu", env["manifests"]["1.0.0"], srv.url)


@pytest.mark.skipif(not R.has_webdav(), reason="lighttpd's mod_webdav is not installed (apt-get install lighttpd-mod-webdav)")
def test_concurrent_publishers_lose_no_release(env, tmp_path):
    """Four publishers at once to one WebDAV server, twice: each reads, merges
    and replaces index.json under the server's lock collection, so every
    version ends up in the index (without the lock, 2 of the 8 survived)."""
    root = tmp_path / "webroot"
    root.mkdir()
    versions = [f"2.{i}.0" for i in range(8)]
    bundles = {}
    for v in versions:
        bundles[v] = H.make_bundle(tmp_path / f"{v}.swu", v, env["key"], env["cert"], env["dev"])
    with R.Lighttpd(root, tmp_path / "dav", webdav=True) as srv:
        for batch in (versions[:4], versions[4:]):
            go = threading.Barrier(len(batch))
            errors, results = [], {}

            def one(v):
                try:
                    go.wait()
                    results[v] = publish.publish(tmp_path / f"{v}.swu", bundles[v], srv.url + "edgerun/")
                except Exception as e:       # noqa: BLE001 - collected and asserted below
                    errors.append(f"{v}: {e!r}")
            threads = [threading.Thread(target=one, args=(v,)) for v in batch]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            assert not errors, errors
            assert all(results[v]["added"] for v in batch)
        idx = publish.parse_index(R.get(srv.url + "edgerun/index.json"))
        assert sorted(r["version"] for r in idx["releases"]) == versions
        for r in idx["releases"]:
            assert publish.sha256_file(root / "edgerun" / r["path"]) == r["sha256"]
        assert not (root / "edgerun" / ".edgerun-publish.lock").exists()


@pytest.mark.skipif(not R.has_webdav(), reason="lighttpd's mod_webdav is not installed (apt-get install lighttpd-mod-webdav)")
def test_publish_lock_waits_times_out_and_breaks_a_stale_one(env, tmp_path):
    from edgerun.ota import dav_lock
    root = tmp_path / "webroot"
    (root / "edgerun").mkdir(parents=True)
    lock = root / "edgerun" / ".edgerun-publish.lock"
    with R.Lighttpd(root, tmp_path / "dav", webdav=True) as srv:
        base = srv.url + "edgerun/"
        # a live holder: the publisher waits, then gives up naming the holder
        with dav_lock.held(publish._request, base) as owner:
            assert lock.is_dir() and owner["pid"] == os.getpid()
            with pytest.raises(OtaError, match=r"another publish holds the lock \(.* pid \d+ since .*\) and did "
                                               r"not release it within 1 s"):
                publish.publish(env["dir"] / "1.0.0.swu", env["manifests"]["1.0.0"], base, lock_timeout_s=1)
        assert not lock.exists()
        # a holder that died an hour ago (owner.json's Last-Modified, by the server's clock)
        lock.mkdir()
        (lock / "owner.json").write_text('{"host": "gone", "pid": 1, "time": "2026-01-01T00:00:00Z"}')
        old = lock.stat().st_mtime - 3600
        os.utime(lock / "owner.json", (old, old))
        res = publish.publish(env["dir"] / "1.0.0.swu", env["manifests"]["1.0.0"], base, lock_timeout_s=30)
        assert res["added"] and not lock.exists()
        # a lock with a fresh owner is not stale: it is waited for, not broken
        lock.mkdir()
        (lock / "owner.json").write_text('{"host": "busy", "pid": 2, "time": "now"}')
        with pytest.raises(OtaError, match=r"\(busy pid 2 since now\)"):
            publish.publish(env["dir"] / "1.1.0.swu", env["manifests"]["1.1.0"], base, lock_timeout_s=1)
        assert (lock / "owner.json").is_file()
        idx = publish.parse_index(R.get(base + "index.json"))
        assert [r["version"] for r in idx["releases"]] == ["1.0.0"]
