"""`edgerun release`: the chain (build, test, bench gates, package, publish) with
the test and bench reports a board matrix made passed in, the update server's
layout and index, and the hawkbit section of the device config."""
import json
import subprocess
import sys
import time

import pytest

import ota_helpers as H
from edgerun import boards
from edgerun.bench import board as bb
from edgerun.errors import ConfigError, OtaError
from edgerun.ota import device_config, publish, release


def _bench_report(board, p99_factor=1.0):
    steps = [1000.0 + i for i in range(40)]
    if p99_factor != 1.0:
        steps = [1000.0] * 90 + [1000.0 * p99_factor] * 10
    lat = bb.latency_summary(steps)
    res = {"steps_us": steps, "raw": dict(lat, decode_p99_ms=max(steps) / 1e3),
           "normalized": {"tokens_per_s": 3.0}}
    return {"board": board, "workload": {"model_sha256": "0" * 64, "prompt_tokens": 16, "gen_tokens": 40,
                                         "threads": 1, "clock": "cpu", "calibrate_version": 3},
            "cpus": {"native": res}}


def _test_report(board, ok=True):
    return {"board": board, "ok": ok, "results": [
        {"cpu": "native", "check": "c-tests", "ok": True, "detail": "31 passed", "seconds": 1.0},
        {"cpu": "native", "check": "answers", "ok": ok, "detail": "32/32" if ok else "30/32 right", "seconds": 1.0}]}


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    if H.host_build_dir() is None:
        pytest.skip("no native build (make build)")
    d = tmp_path_factory.mktemp("release")
    key, cert = H.make_keys(d / "keys")
    (d / "test.json").write_text(json.dumps(_test_report("host")))
    (d / "bench.json").write_text(json.dumps(_bench_report("host")))
    (d / "bench-bad.json").write_text(json.dumps(_bench_report("host", p99_factor=2.0)))
    (d / "test-bad.json").write_text(json.dumps(_test_report("host", ok=False)))
    return {"dir": d, "key": key, "cert": cert}


def _release(env, version, to, rd, **kw):
    kw.setdefault("test_report", env["dir"] / "test.json")
    kw.setdefault("bench_report", env["dir"] / "bench.json")
    return release.release("host", H.MODEL, version, env["key"], env["cert"], to, rd,
                           build_dir=H.host_build_dir(), log=None, **kw)


def test_release_chain_publishes_and_keeps_every_report(env, tmp_path):
    www = tmp_path / "www"
    doc = _release(env, "1.0.0", www, tmp_path / "r1")
    assert doc["ok"] and [s["step"] for s in doc["steps"]] == ["build", "test", "bench", "package", "publish"]
    for name in ("build.json", "test.json", "bench-host.json", "bench-host.png", "package.json",
                 "publish.json", "release.json"):
        assert (tmp_path / "r1" / name).is_file(), name
    idx = publish.parse_index((www / "index.json").read_text())
    (e,) = idx["releases"]
    assert (e["board"], e["version"], e["hardware"], e["revision"]) == ("host", "1.0.0", "host", "1.0")
    assert e["path"] == "host/1.0.0/edgerun-host-1.0.0.swu"
    assert publish.sha256_file(www / e["path"]) == e["sha256"] == doc["sha256"]
    # what is published is the signed bundle, as the device's verifier sees it
    from edgerun import ota
    with ota.verify(www / e["path"], env["cert"], hardware="host", revision="1.0") as b:
        assert b.manifest["version"] == "1.0.0"
    # a second release keeps the first; the same bundle again changes nothing,
    # a rebuilt one under the same version (other bytes: its date, its signature) is refused
    two = _release(env, "1.1.0", f"file://{www}", tmp_path / "r2")
    again = publish.publish(two["bundle"], json.loads((tmp_path / "r2" / "package.json").read_text()), www)
    assert again["added"] is False
    # bundles are byte-reproducible but for the manifest's `created` second:
    # on an idle machine a rebuild within the same second is the same bundle
    # (and rightly not refused), so the rebuild starts in a later second
    time.sleep(1.05)
    with pytest.raises(release.ReleaseError, match="publish: release 1.1.0 for board host is already published"):
        _release(env, "1.1.0", www, tmp_path / "r3")
    idx = publish.parse_index((www / "index.json").read_text())
    assert [r["version"] for r in idx["releases"]] == ["1.0.0", "1.1.0"]
    assert publish.sha256_file(www / "host/1.0.0/edgerun-host-1.0.0.swu") == e["sha256"]
    assert idx["releases"][1]["sha256"] == two["sha256"] != e["sha256"]
    assert not list(www.rglob(".*.tmp"))


def test_a_failed_gate_or_test_stops_before_the_bundle(env, tmp_path):
    www = tmp_path / "www"
    with pytest.raises(release.ReleaseError, match=r"bench gate failed: p99/p50 on native: 2\.000 > budget 1\.5"):
        _release(env, "2.0.0", www, tmp_path / "r", bench_report=env["dir"] / "bench-bad.json")
    rd = tmp_path / "r"
    assert not list(rd.glob("*.swu")) and not www.exists()
    rep = json.loads((rd / "release.json").read_text())
    assert rep["ok"] is False and rep["steps"][-1]["step"] == "bench" and "gate failed" in rep["reason"]
    assert (rd / "bench-host.png").is_file()              # the plot of the failed run is kept
    with pytest.raises(release.ReleaseError, match="test: answers failed on native: 30/32 right"):
        _release(env, "2.0.0", www, tmp_path / "r2", test_report=env["dir"] / "test-bad.json")
    assert not list((tmp_path / "r2").glob("*.swu")) and not www.exists()
    (tmp_path / "other.json").write_text(json.dumps(_test_report("rpi5")))
    with pytest.raises(release.ReleaseError, match="for board rpi5, not host"):
        _release(env, "2.0.0", www, tmp_path / "r3", test_report=tmp_path / "other.json")


def test_cli_release_one_line_on_failure(env, tmp_path):
    r = subprocess.run([sys.executable, "-m", "edgerun", "release", "--board", "host", "--model", H.MODEL,
                        "--version", "3.0.0", "--key", env["key"], "--cert", env["cert"], "--to", tmp_path / "www",
                        "--report-dir", tmp_path / "r", "--build-dir", H.host_build_dir(),
                        "--test-report", env["dir"] / "test.json", "--bench-report", env["dir"] / "bench-bad.json"],
                       capture_output=True, text=True, env=H.PY_ENV, timeout=300)
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("edgerun: ") and "bench gate failed" in last, r.stderr


def _manifest(board="host", version="1.0.0", hw="host", rev="1.0"):
    return {"board": board, "version": version, "hardware": hw, "revision": rev}


def test_index_is_immutable_and_checked(tmp_path):
    b = tmp_path / "a.swu"
    b.write_bytes(b"bundle one")
    publish.publish(b, _manifest(), tmp_path / "www")
    b.write_bytes(b"bundle two")
    with pytest.raises(OtaError, match="already published with other contents"):
        publish.publish(b, _manifest(), tmp_path / "www")
    assert (tmp_path / "www/host/1.0.0/edgerun-host-1.0.0.swu").read_bytes() == b"bundle one"
    with pytest.raises(OtaError, match="unsupported publish target"):
        publish.publish(b, _manifest("host", "1.0.1"), "ftp://x/y")
    for bad, msg in (("{", "not valid JSON"), ('{"format": "x", "releases": []}', "not an edgerun release index"),
                     (json.dumps({"format": publish.FORMAT, "releases": [dict(publish.entry_for(
                         _manifest(), "0" * 64, 1), path="../../etc/passwd")]}), "expected a relative path")):
        with pytest.raises(OtaError, match=msg):
            publish.parse_index(bad)


def test_pick_the_newest_release_of_the_board():
    idx = publish.empty_index()
    for v in ("1.2.0", "1.10.0", "1.9.3"):
        idx, _ = publish.merge(idx, publish.entry_for(_manifest(version=v), "0" * 64, 1))
    idx, _ = publish.merge(idx, publish.entry_for(_manifest("rpi5", "9.0.0", "raspberrypi5"), "1" * 64, 1))
    host = boards.load("host")
    assert publish.pick(idx, host)["version"] == "1.10.0"          # by number, not text
    assert publish.pick(idx, host, "1.2.0")["version"] == "1.2.0"
    with pytest.raises(OtaError, match="no release 7.0.0"):
        publish.pick(idx, host, "7.0.0")
    with pytest.raises(OtaError, match="no release for board cortex-a53 .it has: host, rpi5"):
        publish.pick(idx, boards.load("cortex-a53"))


# ------------------------------------------------------------------ hawkbit

HB = {"url": "https://hawkbit.example:8443", "tenant": "DEFAULT", "device_id": "edge-0042", "poll_s": 60}


def _cfg(**hb):
    raw = {"model": {"path": "m.gguf"}, "health_check": {"prompt": "1", "expect": "2"}}
    if hb:
        raw["hawkbit"] = hb
    return device_config.validate(raw)


def test_hawkbit_section_validates_and_renders_suricatta():
    assert "hawkbit" not in _cfg().data and device_config.suricatta_cfg(_cfg()) is None
    cfg = _cfg(**HB)
    text = device_config.suricatta_cfg(cfg)
    for line in ('tenant = "DEFAULT";', 'url = "https://hawkbit.example:8443";', 'id = "edge-0042";',
                 "polldelay = 60;", "retry = 5;", "nocheckcert = false;"):
        assert f"\t{line}" in text
    assert "id =" not in device_config.suricatta_cfg(_cfg(**dict(HB, device_id=None)))
    # the section survives a dump and load
    again = device_config.loads(cfg.to_yaml())
    assert again.data["hawkbit"] == cfg.data["hawkbit"]
    for field, bad, msg in (("url", "hawkbit.example", "expected http"), ("tenant", "a b", "tenant name"),
                            ("device_id", 'x"; evil = "1', "controller id"), ("poll_s", 0, "integer"),
                            ("check_cert", "no", "true or false"), ("token", "s3cret", "unknown setting")):
        with pytest.raises(ConfigError, match=f"hawkbit.{field}: .*{msg}"):
            _cfg(**dict(HB, **{field: bad}))


def test_bundle_carries_swupdate_cfg_with_the_suricatta_section(env, tmp_path):
    conf = tmp_path / "edgerun.yaml"
    conf.write_text(device_config.make("models/edgerun-add.gguf", "0012+0034=", "?", health_max_tokens=6,
                                       hawkbit=HB).to_yaml())
    man = H.make_bundle(tmp_path / "hb.swu", "1.0.0", env["key"], env["cert"], "/opt/edgerun", config=conf)
    assert "swupdate.cfg" in man["files"] and any(i["name"] == "swupdate.cfg" for i in man["images"])
    from edgerun import ota
    dev = tmp_path / "dev"
    dev.mkdir()
    from edgerun.ota import flash
    flash.flash(tmp_path / "hb.swu", "host", str(dev), env["cert"])
    text = (dev / "current" / "swupdate.cfg").read_text()
    assert 'tenant = "DEFAULT";' in text and 'id = "edge-0042";' in text
    assert ota.active_slot(ota.LocalTarget(dev)) == "rootfs-a"


@pytest.mark.skipif(H.SWUPDATE is None, reason="swupdate is not installed (apt-get install swupdate)")
def test_swupdate_suricatta_reads_the_rendered_config(env, tmp_path):
    """The real swupdate starts suricatta from the rendered swupdate.cfg and
    polls the URL it names (nothing listens there: no hawkBit is faked)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = tmp_path / "swupdate.cfg"
    cfg.write_text(device_config.suricatta_cfg(_cfg(**dict(HB, url=f"http://127.0.0.1:{port}"))))
    # its own network namespace where it can have one (see ota_helpers.swupdate)
    pre = ["unshare", "-n"] if H._can_unshare() else []
    out = H._run_swupdate(pre + [H.SWUPDATE, "-v", "-k", str(env["cert"]), "-f", str(cfg), "-u", ""],
                          dict(__import__("os").environ, TMPDIR=str(tmp_path)), 6)
    assert "entering suricatta main loop" in out, out
    assert "Couldn't connect to server" in out, out
