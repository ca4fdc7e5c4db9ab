"""`edgerun bench --board`: the statistics and gates on given numbers, and a real
short benchmark of the rpi5 cross build under qemu (skipped without the cross
compiler, qemu-user or matplotlib)."""
import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "pybind"))

from edgerun.bench import board as bb  # noqa: E402


# --------------------------------------------------------------------------- parsing
TIMINGS = """# edgerun-cli timings v1 (microseconds)
prompt_tokens 16
prefill_us 50214.609
ttft_us 50470.137
prefill_cpu_us 40000.5
steps 3
step 0 4631.449 4200.0
step 1 4556.147 4100.5
step 2 9000.000 4300.0
"""


def test_parse_timings_reads_every_step():
    t = bb.parse_timings(TIMINGS)
    assert t["prompt_tokens"] == 16
    assert t["ttft_us"] == pytest.approx(50470.137)
    assert t["steps_us"] == [4631.449, 4556.147, 9000.0]
    assert t["steps_cpu_us"] == [4200.0, 4100.5, 4300.0]


def test_parse_timings_rejects_a_truncated_file():
    cut = TIMINGS.rsplit("step 2", 1)[0]      # a run killed after two steps
    with pytest.raises(bb.BenchError, match="incomplete"):
        bb.parse_timings(cut)


def test_parse_calibration_and_stats_line():
    cal = bb.parse_calibration("calibrate v3 rounds 11 ops 1376256 cpu_best_ms 16.9 cpu_median_ms 18.6 "
                               "wall_median_ms 48.1 mops_per_s 74.002 wall_mops_per_s 28.592 checksum 1124\n")
    assert cal["version"] == 3 and cal["mops_per_s"] == pytest.approx(74.002) and cal["checksum"] == "1124"
    with pytest.raises(bb.BenchError):
        bb.parse_calibration("segmentation fault\n")
    st = bb.parse_stats_line("edgerun-cli: prompt 12 tok, generated 50 tok (limit) | TTFT 50.47 ms | prefill 239.0 "
                             "tok/s | decode 213.1 tok/s | arena 612288 bytes (0.58 MiB) | isa neon-dotprod | threads 1\n")
    assert st == {"arena_bytes": 612288, "isa": "neon-dotprod", "threads": 1}


# --------------------------------------------------------------------------- statistics
def test_percentile_matches_numpy_linear():
    np = pytest.importorskip("numpy")
    vals = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0, 8.0]
    for q in (0, 10, 50, 90, 99, 100):
        assert bb.percentile(vals, q) == pytest.approx(float(np.percentile(vals, q)))


def test_per_step_median_drops_a_one_off_stall_but_keeps_a_repeated_one():
    # Step 1 stalls in one run only (host noise); step 3 is slow in every run
    # (the runtime's own behaviour) and must survive.
    runs = [[1.0, 9.0, 1.0, 5.0], [1.1, 1.0, 1.0, 5.2], [0.9, 1.1, 1.0, 4.9]]
    assert bb.per_step_median(runs) == [1.0, 1.1, 1.0, 5.0]


def test_summarize_normalizes_best_run_by_best_calibration():
    # Run 1 ran while the host was twice as slow: its steps took twice as long
    # and so did the calibration after it. Best-of-N keeps the unloaded figures.
    def timing(step):
        return {"steps_us": [step] * 4, "steps_cpu_us": [step] * 4, "ttft_us": 10 * step, "prefill_us": 8 * step,
                "prompt_tokens": 8}
    def cal(rate):
        return {"version": 3, "mops_per_s": rate, "wall_mops_per_s": rate / 2}
    stats = {"arena_bytes": 1000, "isa": "neon", "threads": 1}
    res = bb.summarize([timing(1000.0), timing(2000.0)], stats, [cal(100.0), cal(100.0), cal(50.0)])
    assert [r["tokens_per_s"] for r in res["per_run"]] == pytest.approx([1000.0, 500.0])
    assert [r["calibration_mops_per_s"] for r in res["per_run"]] == pytest.approx([100.0, 75.0])
    assert res["normalized"]["tokens_per_s"] == pytest.approx(1000.0 / 100.0)
    assert res["normalized"]["best_tokens_per_s"] == pytest.approx(1000.0)
    assert res["calibration"]["best_mops_per_s"] == pytest.approx(100.0)
    assert res["raw"]["decode_p50_ms"] == pytest.approx(1.5)      # per-step median of 1 and 2 ms
    assert res["calibration"]["spread"] == pytest.approx(50 / (250 / 3))
    with pytest.raises(ValueError):
        bb.summarize([timing(1.0)], stats, [cal(1.0)])


def _result(steps_us, tokens_per_s_norm):
    lat = bb.latency_summary(steps_us)
    return {"raw": {"p99_over_p50": lat["p99_over_p50"]}, "normalized": {"tokens_per_s": tokens_per_s_norm}}


def _report(cpus, **workload):
    w = {"model_sha256": "abc", "prompt_tokens": 16, "gen_tokens": 47, "threads": 1, "clock": "cpu",
         "calibrate_version": 3}
    w.update(workload)
    return {"board": "rpi5", "workload": w, "cpus": cpus}


LAT = {"p99_over_p50_max": 1.5, "min_normalized_tokens_per_s_ratio": 0.9}


def test_gate_fails_when_p99_over_p50_exceeds_the_budget():
    steps = [1000.0] * 90 + [2000.0] * 10            # p99/p50 = 2.0
    rep = _report({"cortex-a76": _result(steps, 3.0)})
    g = bb.gates(rep, LAT, None)
    stab = [x for x in g if x["gate"] == "p99_over_p50"][0]
    assert stab["ok"] is False
    assert stab["value"] == pytest.approx(2.0)
    assert "2.000 > budget 1.5" in stab["message"] and "33.3% over" in stab["message"]


def test_gate_passes_a_steady_series():
    rep = _report({"cortex-a76": _result([1000.0 + i for i in range(50)], 3.0)})
    stab = [x for x in bb.gates(rep, LAT, None) if x["gate"] == "p99_over_p50"][0]
    assert stab["ok"] is True


def test_normalized_tokens_gate_against_the_baseline():
    base = {"workload": _report({})["workload"], "cpus": {"cortex-a76": {"normalized_tokens_per_s": 4.0}}}
    steady = [1000.0] * 20
    # floor = 0.9 * 4.0 = 3.6
    ok = bb.gates(_report({"cortex-a76": _result(steady, 3.7)}), LAT, base)
    bad = bb.gates(_report({"cortex-a76": _result(steady, 3.0)}), LAT, base)
    ok_g = [x for x in ok if x["gate"] == "normalized_tokens_per_s"][0]
    bad_g = [x for x in bad if x["gate"] == "normalized_tokens_per_s"][0]
    assert ok_g["ok"] is True and ok_g["limit"] == pytest.approx(3.6)
    assert bad_g["ok"] is False
    assert "3 < 0.9 x baseline 4 = 3.6" in bad_g["message"]
    assert "16.7% below the floor" in bad_g["message"] and "25.0% below the baseline" in bad_g["message"]


def test_failed_gate_names_the_host_cpu_its_baseline_came_from():
    """Emulated vector and scalar code speed up differently from one host CPU
    to the next, so a failure on another CPU says so; on the same CPU it
    does not."""
    base = {"workload": _report({})["workload"], "cpus": {"cortex-a76": {"normalized_tokens_per_s": 4.0}},
            "measured": {"cpu_id": "AuthenticAMD family 26 model 2"}}
    for here, named in (("AuthenticAMD family 25 model 17", True), ("AuthenticAMD family 26 model 2", False)):
        rep = dict(_report({"cortex-a76": _result([1000.0] * 20, 3.0)}), host={"cpu_id": here})
        g = [x for x in bb.gates(rep, LAT, base) if x["gate"] == "normalized_tokens_per_s"][0]
        assert g["ok"] is False
        assert ("measured on AuthenticAMD family 26 model 2, this host is " + here in g["message"]) == named


def test_host_cpu_has_an_identity():
    h = bb.host_cpu()
    assert h["cpu"] and h["cpu_id"]
    if pathlib.Path("/proc/cpuinfo").is_file():
        assert h["cpu_id"] != "?" and ("family" in h["cpu_id"] or "part" in h["cpu_id"]), h


def test_baseline_of_another_workload_is_not_applied():
    base = {"workload": _report({}, model_sha256="other")["workload"],
            "cpus": {"cortex-a76": {"normalized_tokens_per_s": 100.0}}}
    g = [x for x in bb.gates(_report({"cortex-a76": _result([1.0] * 5, 3.0)}), LAT, base)
         if x["gate"] == "normalized_tokens_per_s"][0]
    assert g["ok"] is None and "model_sha256" in g["message"]
    g = [x for x in bb.gates(_report({"cortex-a76": _result([1.0] * 5, 3.0)}), LAT, None)
         if x["gate"] == "normalized_tokens_per_s"][0]
    assert g["ok"] is None and "no baseline" in g["message"]


def test_stored_baselines_are_well_formed():
    """Every committed baseline names a board file, a workload the gate checks
    and a positive normalized rate per CPU model the board lists."""
    yaml = pytest.importorskip("yaml")
    found = sorted((ROOT / "benchmarks" / "baselines").glob("*.json"))
    for path in found:
        b = json.loads(path.read_text())
        board = yaml.safe_load((ROOT / "boards" / f"{path.stem}.yaml").read_text())
        assert b["board"] == path.stem
        for k in bb.WORKLOAD_KEYS:
            assert k in b["workload"], (path, k)
        assert set(b["cpus"]) == set(board["qemu"]["cpus"]), path
        assert all(v["normalized_tokens_per_s"] > 0 for v in b["cpus"].values())


# --------------------------------------------------------------------------- edgerun-cli --timings
def _native_cli():
    p = os.environ.get("EDGERUN_CLI")
    p = pathlib.Path(p) if p else ROOT / "build" / "native" / "runtime_c" / "tools" / "edgerun-cli"
    if not p.is_file():
        pytest.skip(f"{p} is not built (make build)")
    return p


def test_cli_timings_file_has_one_line_per_decode_step(tmp_path):
    cli, tfile = _native_cli(), tmp_path / "t.txt"
    # 0012+0034= ends with EOS after 5 digits; --ignore-eos keeps going to -n.
    r = subprocess.run([str(cli), "run", str(ROOT / "models" / "edgerun-add.gguf"), "0012+0034=", "-n", "20",
                        "--ignore-eos", "--print-ids", "--no-echo", "-t", "1", "--timings", str(tfile)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.split()) == 20 and "generated 20 tok (limit)" in r.stderr
    t = bb.parse_timings(tfile.read_text())
    assert t["steps"] == 19 and len(t["steps_us"]) == 19        # the last token needs no forward pass
    assert t["prompt_tokens"] == 12 and t["ttft_us"] >= t["prefill_us"] > 0
    assert all(x > 0 for x in t["steps_us"]) and all(x >= 0 for x in t["steps_cpu_us"])
    # One thread does the work: its CPU time cannot exceed the wall time by
    # more than the clocks' granularity.
    assert sum(t["steps_cpu_us"]) <= sum(t["steps_us"]) * 1.05 + 200
    without = subprocess.run([str(cli), "run", str(ROOT / "models" / "edgerun-add.gguf"), "0012+0034=", "-n", "20",
                              "--print-ids", "--no-echo"], capture_output=True, text=True, timeout=60)
    assert "(end of text)" in without.stderr and len(without.stdout.split()) == 5


def test_cli_warmup_times_only_the_run_after_it_and_changes_no_token(tmp_path):
    """--warmup N decodes the prompt and N steps first, untimed, then starts
    over: the timed run's steps and tokens are those of a run without it,
    sampled ones included (the seed is set again)."""
    cli = _native_cli()
    base = [str(cli), "run", str(ROOT / "models" / "edgerun-add.gguf"), "0012+0034=", "-n", "12", "--ignore-eos",
            "--print-ids", "--no-echo", "-t", "1", "--temp", "0.9", "--seed", "7"]
    runs = {}
    for w in (0, 5):
        tfile = tmp_path / f"t{w}.txt"
        r = subprocess.run(base + ["--warmup", str(w), "--timings", str(tfile)], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        runs[w] = (r.stdout.split(), bb.parse_timings(tfile.read_text()))
    assert runs[5][0] == runs[0][0] and len(runs[0][0]) == 12
    assert runs[5][1]["steps"] == runs[0][1]["steps"] == 11 and runs[5][1]["prompt_tokens"] == 12
    r = subprocess.run(base + ["--warmup", "-2"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--warmup expects an integer" in r.stderr.splitlines()[0]


def test_cli_timings_to_an_unwritable_path_fails_with_one_line(tmp_path):
    cli = _native_cli()
    bad = tmp_path / "no-such-dir" / "t.txt"
    r = subprocess.run([str(cli), "run", str(ROOT / "models" / "edgerun-add.gguf"), "0012+0034=", "-n", "3",
                        "--timings", str(bad)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert f"--timings {bad}: No such file or directory" in r.stderr


# --------------------------------------------------------------------------- the real thing
def _cross_ready():
    missing = [t for t in ("aarch64-linux-gnu-gcc", "qemu-aarch64") if not shutil.which(t)]
    if not pathlib.Path("/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1").exists():
        missing.append("libc6-arm64-cross")
    for mod in ("matplotlib", "yaml", "mesonbuild"):
        if importlib.util.find_spec(mod) is None:
            missing.append(mod)
    return missing


cross = pytest.mark.skipif(bool(_cross_ready()), reason=f"board benchmark needs: {', '.join(_cross_ready())}")


def _bench(*args, timeout=900):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "pybind"))
    env.pop("LD_PRELOAD", None)
    return subprocess.run([sys.executable, "-m", "edgerun", "bench", "--board", "rpi5", *args],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=str(ROOT))


@cross
def test_short_rpi5_bench_writes_json_png_and_gates(tmp_path):
    base = tmp_path / "baseline.json"
    out = tmp_path / "out"
    r = _bench("--gen-tokens", "12", "--repeat", "2", "--baseline", str(base), "--update-baseline",
               "-o", str(out))
    doc = json.loads((out / "bench-rpi5.json").read_text())
    png = (out / "bench-rpi5.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert doc["board"] == "rpi5" and doc["workload"]["gen_tokens"] == 12
    res = doc["cpus"]["cortex-a76"]
    assert res["decode_steps"] == 12 and len(res["steps_us"]) == 12 and res["runs"] == 2
    raw = res["raw"]
    assert 0 < raw["decode_p50_ms"] <= raw["decode_p90_ms"] <= raw["decode_p99_ms"]
    assert raw["ttft_ms"] > 0 and raw["tokens_per_s"] > 0
    assert res["arena_bytes"] > 0 and res["isa"].startswith("neon")
    assert res["calibration"]["mops_per_s"] > 0
    # Normalized: the fastest run's tokens/s over the fastest calibration's rate.
    assert len(res["calibration"]["runs"]) == 3 and len(res["per_run"]) == 2
    best = max(r["tokens_per_s"] for r in res["per_run"])
    best_cal = max(c["mops_per_s"] for c in res["calibration"]["runs"])
    assert res["normalized"]["tokens_per_s"] == pytest.approx(best / best_cal)
    names = {(g["gate"], g["cpu"]) for g in doc["gates"]}
    assert names == {("p99_over_p50", "cortex-a76"), ("normalized_tokens_per_s", "cortex-a76")}
    # The baseline was written from this run and applied to it: the gate is live.
    assert json.loads(base.read_text())["cpus"]["cortex-a76"]["normalized_tokens_per_s"] == \
        pytest.approx(res["normalized"]["tokens_per_s"])
    norm = [g for g in doc["gates"] if g["gate"] == "normalized_tokens_per_s"][0]
    assert norm["ok"] is True
    failed = [g for g in doc["gates"] if g["ok"] is False]
    assert r.returncode == (1 if failed else 0), r.stderr
    assert doc["passed"] == (not failed)

    # A baseline no run can reach: the regression gate fails, exit 1, and the
    # message says which gate and by how much.
    b = json.loads(base.read_text())
    b["cpus"]["cortex-a76"]["normalized_tokens_per_s"] = 1e6
    base.write_text(json.dumps(b))
    r = _bench("--gen-tokens", "12", "--repeat", "1", "--baseline", str(base), "-o", str(out))
    assert r.returncode == 1
    assert "gate failed: normalized tokens/s on cortex-a76" in r.stderr
    assert "% below the floor" in r.stderr
