"""edgerun keygen / package: the bundle's structure, and the real SWUpdate
(Debian's swupdate, CMS signing compiled in) checking and installing it."""
import concurrent.futures
import json
import os
import random
import stat
import subprocess
import sys

import pytest

import ota_helpers as H
from edgerun.ota import cpio, package, swdesc, updater as ota
from edgerun.errors import OtaError

needs_swupdate = pytest.mark.skipif(H.SWUPDATE is None, reason="swupdate is not installed (apt-get install swupdate)")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("ota_pkg")
    key, cert = H.make_keys(d / "keys")
    root = d / "device"
    bundle = d / "v1.swu"
    man = H.make_bundle(bundle, "1.2.0", key, cert, root)
    return {"dir": d, "key": key, "cert": cert, "root": root, "bundle": bundle, "manifest": man}


# ------------------------------------------------------------------ units

def test_cpio_round_trip_and_canonical_form(tmp_path):
    p = tmp_path / "a.cpio"
    (tmp_path / "x").write_bytes(b"hello world")
    with open(p, "wb") as f:
        w = cpio.Writer(f)
        w.add_bytes("first", b"")
        w.add_file("second", tmp_path / "x")
        w.add_bytes("third", bytes(range(256)) * 3)
        w.close()
    fh, entries = cpio.open_index(p)
    with fh:
        assert [e.name for e in entries] == ["first", "second", "third"]
        assert cpio.read_entry(fh, entries[1]) == b"hello world"
        assert cpio.read_entry(fh, entries[2]) == bytes(range(256)) * 3
    data = p.read_bytes()
    assert data[:6] == b"070702" and data.endswith(b"TRAILER!!!\0\0\0\0")
    # every single-byte change outside the names is caught by the strict reader
    # (names are checked one level up: a bundle's members must be exactly the
    # ones its signed sw-description lists)
    fh, entries = cpio.open_index(p)
    fh.close()
    names = set()
    for e in entries:
        names.update(range(e.header_offset + 110, e.header_offset + 110 + len(e.name)))
    names.update(range(len(data) - 16, len(data) - 6))       # "TRAILER!!!"
    for off in sorted(set(range(len(data))) - names):
        bad = bytearray(data)
        bad[off] ^= 0x20
        q = tmp_path / "bad.cpio"
        q.write_bytes(bad)
        with pytest.raises(cpio.CpioError):
            f, _ = cpio.open_index(q)
            f.close()
    with pytest.raises(cpio.CpioError, match="after the trailer"):
        q.write_bytes(data + b"\0" * 4)
        cpio.open_index(q)
    with pytest.raises(cpio.CpioError, match="truncated"):
        q.write_bytes(data[:-20])
        cpio.open_index(q)


def test_swdesc_round_trip():
    doc = {"version": "1.0", "hw": {"hardware-compatibility": ["1.0", "2"], "stable": {
        "slot-a": {"files": [{"filename": "a", "path": "/x/\"q\"", "sha256": "00", "n": 3, "b": True}]}}}}
    text = swdesc.render("software", doc)
    assert swdesc.parse(text) == {"software": doc}
    # libconfig syntax SWUpdate's own examples use: ':' separators, comments, ( ) lists
    assert swdesc.parse('software = { version = "0.1"; /* c */ hardware-compatibility: [ "revA" ];\n'
                        '# x\n images: ( { filename = "a" "b"; }, ); };') == \
        {"software": {"version": "0.1", "hardware-compatibility": ["revA"], "images": [{"filename": "ab"}]}}
    with pytest.raises(swdesc.SwDescriptionError, match="line 2"):
        swdesc.parse('a = 1;\nb = ;')


def test_keygen(env, tmp_path):
    from edgerun.ota.keygen import KeygenError, keygen
    key, cert = env["key"], env["cert"]
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    text = subprocess.run(["openssl", "x509", "-in", str(cert), "-noout", "-text"], capture_output=True,
                          text=True, check=True).stdout
    assert "E-mail Protection" in text and "Digital Signature" in text
    with pytest.raises(KeygenError, match="already exists"):
        keygen(key.parent)
    k2, c2 = keygen(tmp_path / "ec", kind="ec")
    assert "id-ecPublicKey" in subprocess.run(["openssl", "x509", "-in", str(c2), "-noout", "-text"],
                                              capture_output=True, text=True).stdout


# ------------------------------------------------------------------ bundle structure

def test_bundle_layout(env):
    f, entries = cpio.open_index(env["bundle"])
    with f:
        names = [e.name for e in entries]
        assert names[:2] == ["sw-description", "sw-description.sig"]
        assert set(names[2:]) == {"runtime-host.tar.gz", "python.tar.gz", "edgerun-add.gguf", "edgerun.yaml",
                                  "manifest.json"}
        desc = swdesc.parse(cpio.read_entry(f, entries[0]).decode())["software"]
        man = json.loads(cpio.read_entry(f, entries[names.index("manifest.json")]))
        assert desc["version"] == "1.2.0"
        node = desc["host"]
        assert node["hardware-compatibility"] == ["1.0"]
        for mode, slot in (("slot-a", "rootfs-a"), ("slot-b", "rootfs-b")):
            files = node["stable"][mode]["files"]
            assert {i["filename"] for i in files} == set(names[2:])
            for i in files:
                e = entries[names.index(i["filename"])]
                assert i["sha256"] == ota._sha256_entry(f, e)          # a sha256 for every image
                assert i["path"].startswith(f"{env['root']}/{slot}")
    # the manifest: versions, sizes, hashes, and the expected health-check output,
    # which for the addition model is the true (reversed) sum 12 + 34 = 46
    sys.path.insert(0, str(H.REPO / "scripts"))
    import addition_task
    assert man["health_check"] == {"prompt": "0012+0034=", "expect": addition_task.answer_text(12, 34),
                                   "max_tokens": 6}
    assert man["version"] == "1.2.0" and man["board"] == "host" and man["hardware"] == "host"
    assert man["model"]["bytes"] == H.MODEL.stat().st_size
    assert man["model"]["sha256"] == package.sha256_file(H.MODEL)
    for rel in ("bin/edgerun-cli", "lib/libedgerun.so", "python/edgerun/ota/updater.py", "python/edgerun/edgerun.h",
                "models/edgerun-add.gguf", "edgerun.yaml"):
        assert rel in man["files"], rel
    assert man["files"]["bin/edgerun-cli"]["mode"] == 0o755


def test_verify_accepts_and_names_every_refusal(env, tmp_path):
    with ota.verify(env["bundle"], env["cert"], hardware="host", revision="1.0") as b:
        assert b.version == "1.2.0" and b.manifest["board"] == "host"
    with pytest.raises(OtaError, match="is for hardware 'host', this device is 'raspberrypi5'"):
        ota.verify(env["bundle"], env["cert"], hardware="raspberrypi5")
    with pytest.raises(OtaError, match="revision"):
        ota.verify(env["bundle"], env["cert"], hardware="host", revision="2.0")
    with pytest.raises(OtaError, match="older than the installed 1.3"):
        ota.verify(env["bundle"], env["cert"], min_version="1.3")
    from edgerun.ota.keygen import keygen
    _, other_cert = keygen(tmp_path / "other")
    with pytest.raises(OtaError, match="signature does not verify"):
        ota.verify(env["bundle"], other_cert)
    unsigned = H.resign(env["bundle"], tmp_path / "unsigned.swu", env["key"], env["cert"], drop_sig=True)
    with pytest.raises(OtaError, match="unsigned"):
        ota.verify(unsigned, env["cert"])


def test_package_refuses_bad_input(env, tmp_path):
    r = subprocess.run([sys.executable, "-m", "edgerun", "package", "--board", "host", "--model",
                        str(tmp_path / "missing.gguf"), "--version", "1.0", "--key", str(env["key"]),
                        "--cert", str(env["cert"]), "-o", str(tmp_path / "x.swu")],
                       capture_output=True, text=True, env=H.PY_ENV)
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "missing.gguf: no such model file" in r.stderr
    assert not (tmp_path / "x.swu").exists()
    with pytest.raises(OtaError, match="1 to 4 dot-separated numbers"):
        H.make_bundle(tmp_path / "y.swu", "1.0-beta", env["key"], env["cert"], env["root"])
    from edgerun.ota.keygen import keygen
    other_key, _ = keygen(tmp_path / "other")
    with pytest.raises(OtaError, match="does not match|signing with"):
        H.make_bundle(tmp_path / "z.swu", "1.0", other_key, env["cert"], env["root"])


# ------------------------------------------------------------------ the real SWUpdate

@needs_swupdate
def test_swupdate_checks_the_bundle(env):
    ok, out = H.swupdate(env["bundle"], env["cert"], "host:1.0", "-c")
    assert ok, out
    ok, out = H.swupdate(env["bundle"], env["cert"], "host:1.0", "-c", "-e", "stable,slot-b")
    assert ok, out


@needs_swupdate
def test_swupdate_installs_slot_b_and_nothing_else(env):
    root = env["root"]
    if root.exists():
        import shutil
        shutil.rmtree(root)
    root.mkdir()
    (root / "sentinel").write_text("untouched")
    before = H.tree(root)
    ok, out = H.swupdate(env["bundle"], env["cert"], "host:1.0", "-e", "stable,slot-b")
    assert ok, out
    after = H.tree(root)
    new = {k: v for k, v in after.items() if k not in before}
    assert before.items() <= after.items()                         # nothing changed ...
    assert new and all(k.startswith("rootfs-b/") for k in new)     # ... and only slot B was added
    man = env["manifest"]
    for rel, info in man["files"].items():
        assert after[f"rootfs-b/{rel}"] == info["sha256"], rel
    assert os.access(root / "rootfs-b/bin/edgerun-cli", os.X_OK)
    # what SWUpdate installed passes the slot health check (its runtime runs its model)
    ok, msg = ota.health_check(ota.LocalTarget(root), "rootfs-b")
    assert ok, msg


@needs_swupdate
def test_swupdate_rejects_wrong_hardware_and_downgrade(env):
    for hw in ("raspberrypi5:1.0", "host:2.0"):
        ok, out = H.swupdate(env["bundle"], env["cert"], hw, "-c", "-e", "stable,slot-b")
        assert not ok, out
    ok, out = H.swupdate(env["bundle"], env["cert"], "host:1.0", "-c", "-e", "stable,slot-b", "-N", "2.0.0")
    assert not ok and "No downgrading allowed" in out, out
    ok, out = H.swupdate(env["bundle"], env["cert"], "host:1.0", "-c", "-e", "stable,slot-b", "-N", "1.0.0")
    assert ok, out


@needs_swupdate
def test_swupdate_rejects_unsigned_and_foreign_signatures(env, tmp_path):
    unsigned = H.resign(env["bundle"], tmp_path / "unsigned.swu", env["key"], env["cert"], drop_sig=True)
    ok, out = H.swupdate(unsigned, env["cert"], "host:1.0", "-c", "-e", "stable,slot-b")
    assert not ok, out
    from edgerun.ota.keygen import keygen
    k2, c2 = keygen(tmp_path / "other")
    foreign = H.resign(env["bundle"], tmp_path / "foreign.swu", k2, c2)
    ok, out = H.swupdate(foreign, env["cert"], "host:1.0", "-c", "-e", "stable,slot-b")
    assert not ok, out
    ok, out = H.swupdate(foreign, c2, "host:1.0", "-c", "-e", "stable,slot-b")
    assert ok, out          # the same bundle is fine for a device that trusts that key


def _unchecked_by_swupdate(path):
    """Offsets SWUpdate never looks at: the cpio header fields it does not parse
    (inode, mode, uid, gid, nlink, mtime, device numbers: it reads only magic,
    file size, name size and checksum), the NUL padding, and the trailer."""
    f, entries = cpio.open_index(path)
    f.close()
    size = path.stat().st_size
    skip = set()
    starts = [e.header_offset for e in entries]
    trailer = entries[-1].offset + entries[-1].size + ((-entries[-1].size) % 4)
    for h in starts:
        skip.update(range(h + 6, h + 54))          # c_ino .. c_mtime
        skip.update(range(h + 62, h + 94))         # c_devmajor .. c_rdevminor
    for e in entries:
        name_end = e.header_offset + 110 + len(e.name) + 1
        skip.update(range(name_end, e.offset))
        skip.update(range(e.offset + e.size, e.offset + e.size + ((-e.size) % 4)))
    skip.update(range(trailer, size))
    return skip


@needs_swupdate
def test_flipped_bytes_are_always_rejected(env, tmp_path):
    """One flipped byte at 64 offsets spread over the whole bundle (evenly, plus
    at least one in each member and header): swupdate rejects each one that it
    covers, and edgerun.ota.verify rejects every one, including the few bytes
    SWUpdate by design never reads (see _unchecked_by_swupdate)."""
    data = env["bundle"].read_bytes()
    f, entries = cpio.open_index(env["bundle"])
    f.close()
    rng = random.Random(1234)
    offsets = {int(i * (len(data) - 1) / 47) for i in range(48)}
    for e in entries:
        offsets.add(e.header_offset + rng.randrange(0, 110))       # its header
        if e.size:
            offsets.add(e.offset + rng.randrange(0, e.size))        # its data
    offsets.add(len(data) - 20)                                     # the trailer
    offsets = sorted(offsets)
    assert len(offsets) >= 50
    unchecked = _unchecked_by_swupdate(env["bundle"])
    to_swupdate = []
    for off in offsets:
        bad = bytearray(data)
        bad[off] ^= 0x01
        p = tmp_path / f"flip-{off}.swu"
        p.write_bytes(bad)
        with pytest.raises(OtaError):
            ota.verify(p, env["cert"], hardware="host", revision="1.0").close()
        if off in unchecked:
            p.unlink()
        else:
            to_swupdate.append((off, p))

    def run(item):
        off, p = item
        ok, out = H.swupdate(p, env["cert"], "host:1.0", "-c", "-e", "stable,slot-b")
        p.unlink()
        return off, ok, out

    # each rejection of a damaged image costs swupdate about a second (it polls
    # its installer once a second), so the runs go in parallel where each can
    # have its own network namespace (see ota_helpers.swupdate)
    workers = 8 if H._can_unshare() else 1
    with concurrent.futures.ThreadPoolExecutor(workers) as ex:
        results = list(ex.map(run, to_swupdate))
    for off, ok, out in results:
        assert not ok, f"swupdate accepted a flipped byte at offset {off}:\n{out}"
    swu_checked = len(results)
    assert swu_checked >= 50


def test_bytes_swupdate_ignores_are_caught_by_verify(env, tmp_path):
    """The regions SWUpdate skips (every header's unparsed fields, the padding,
    the trailer; 300 of their bytes, drawn evenly): a change there does not
    alter what gets installed, but edgerun.ota.verify still refuses the bundle."""
    data = env["bundle"].read_bytes()
    skip = sorted(_unchecked_by_swupdate(env["bundle"]))
    assert 0 < len(skip) < 2000
    for off in skip[::max(1, len(skip) // 300)]:
        bad = bytearray(data)
        bad[off] = (bad[off] + 1) % 256
        p = tmp_path / "flip.swu"
        p.write_bytes(bad)
        with pytest.raises(OtaError):
            ota.verify(p, env["cert"]).close()
