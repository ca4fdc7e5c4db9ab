"""`edgerun bench`: the report's figures are real measurements of real runs.

Runs the benchmark on the embedded model with a short workload (seconds); the
llama.cpp column is checked only where llama-cpp-python is installed.
"""
import json
import os
import pathlib
import subprocess
import sys

import pytest

from edgerun.bench import engines as bench

REPO = pathlib.Path(__file__).resolve().parent.parent
MODEL = REPO / "models" / "edgerun-add.gguf"


def test_fit_to_context():
    assert bench.fit_to_context(2048, 64, 128) == (64, 128)
    p, g = bench.fit_to_context(64, 64, 128)
    assert p + g + 1 <= 64 and p >= 1 and g >= 1
    assert bench.fit_to_context(4, 64, 128) == (1, 2)
    # one token too many: the prompt gives up just that, the decode steps stay
    assert bench.fit_to_context(1024, 896, 128) == (895, 128)
    # decode steps that leave the prompt less than a third: the split
    p, g = bench.fit_to_context(256, 200, 200)
    assert (p, g) == (85, 170) and p + g + 1 <= 256


def test_prompt_ids_are_shared_and_in_range():
    a, b = bench.prompt_ids(100, 50), bench.prompt_ids(100, 50)
    assert a == b and len(a) == 50 and all(0 <= i < 100 for i in a)
    assert len(set(a)) > 10


def test_table_reports_errors_and_missing_peer():
    rep = {"model": "m.gguf", "file_bytes": 2 ** 20, "prompt_tokens": 8, "gen_tokens": 4, "batch": 64,
           "repeat": 1, "llama_cpp": bench.LLAMA_MISSING,
           "results": [{"engine": "edgerun", "threads": 1, "error": "boom"}]}
    text = bench.format_table(rep)
    assert "error: boom" in text and bench.LLAMA_MISSING in text
    assert "during the run" not in text  # an older report, or no /proc/stat
    rep["interference"] = {"seconds": 3.0, "other_cpus": 0.7, "steal_share": 0.0, "busy": True}
    assert "during the run: other processes 0.70 CPUs on average" in bench.format_table(rep)
    assert "(busy: figures are pessimistic and noisy)" in bench.format_table(rep)
    assert "core round trip" not in bench.format_table(rep)  # 1 thread, or an older report
    rep["core_round_trip_ns_before_after"] = [84.4, None]
    assert "core round trip before/after: 84 ns / -" in bench.format_table(rep)


def _cli(*args):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "pybind") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, "-m", "edgerun", "bench", *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=600)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    if not MODEL.is_file():
        pytest.skip("models/edgerun-add.gguf is absent")
    out = tmp_path_factory.mktemp("bench") / "r.json"
    r = _cli(MODEL, "--threads", "1,2", "--prompt-tokens", "8", "--gen-tokens", "6", "--out", out)
    assert r.returncode == 0, r.stderr
    return r.stdout, json.loads(out.read_text())


def test_edgerun_figures(report):
    text, rep = report
    ours = [r for r in rep["results"] if r["engine"] == "edgerun"]
    assert [r["threads"] for r in ours] == [1, 2]
    # 2 threads ran: which cores they had (edgerun-corelat, where built and two CPUs are ours)
    core = rep["core_round_trip_ns_before_after"]
    assert len(core) == 2
    if bench.measure_core_latency() is not None:
        assert all(c > 0 for c in core) and "core round trip before/after: " in text
    # what other work took the machine meanwhile (edgerun/bench/interference.py), where Linux says
    if pathlib.Path("/proc/stat").exists():
        cpu = rep["interference"]
        assert cpu["other_cpus"] >= 0 and 0 <= cpu["steal_share"] <= 1 and "during the run: other processes" in text
    import edgerun
    # the bench runs both engines with an F16 KV cache (llama.cpp's default)
    assert rep["kv_type"] == "f16"
    with edgerun.Model(MODEL, n_threads=1, n_batch=64, kv_type="f16") as m:
        arena = m.plan()["total_bytes"]
    for r in ours:
        assert "error" not in r, r
        assert r["prompt_tokens"] == 8 and r["gen_tokens"] == 6
        assert r["prefill_tokens_per_s"] > 0 and r["decode_tokens_per_s"] > 0
        assert 0 < r["ttft_ms"] < 10_000
        assert r["peak_rss_bytes"] >= r["base_rss_bytes"] > 0
        # The total is the sections plus alignment padding.
        assert r["arena_bytes"] >= sum(r["arena_sections"].values()) > 0
        # The n_generated count proves every decode step ran (end-of-text is ignored).
        assert r["n_generated"] == 7
    assert ours[0]["arena_bytes"] == arena
    assert "edgerun" in text and "prefill tok/s" in text


def test_peer_column(report):
    text, rep = report
    peers = [r for r in rep["results"] if r["engine"] == "llama.cpp"]
    if bench.llama_cpp_available():
        assert rep["llama_cpp"] == "installed"
        assert len(peers) == 2
        for r in peers:
            assert "error" not in r, r
            assert r["prompt_tokens"] == 8 and r["gen_tokens"] == 6
            assert r["prefill_tokens_per_s"] > 0 and r["decode_tokens_per_s"] > 0
    else:
        assert peers == []
        assert bench.LLAMA_MISSING in text


def test_no_peer_and_bad_args():
    if not MODEL.is_file():
        pytest.skip("models/edgerun-add.gguf is absent")
    r = _cli(MODEL, "--no-peer", "--json", "--prompt-tokens", "4", "--gen-tokens", "2")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert {x["engine"] for x in rep["results"]} == {"edgerun"}
    r = _cli(MODEL, "--threads", "0")
    assert r.returncode == 1 and r.stderr.startswith("edgerun: error:") and "--threads" in r.stderr
    r = _cli(REPO / "no-such.gguf")
    assert r.returncode == 1 and "no-such.gguf" in r.stderr
