"""scripts/bench_serve.py (`make bench-serve`): it runs against live servers
and reports real measurements, for edgerun and, where llama-cpp-python's
server extra is installed, for llama.cpp's server beside it; without that,
the llama.cpp column is skipped with the reason. Speeds are not checked."""
import importlib.machinery
import json
import math
import pathlib
import subprocess
import sys

import pytest

from serve_helpers import REPO, need_serve

need_serve()
import bench_serve                                   # noqa: E402  (serve_helpers put scripts/ on sys.path)
from edgerun.bench import llama_server              # noqa: E402

MODEL = REPO / "models" / "edgerun-add.gguf"


def _real(x):
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def test_bench_serve_reports_both_servers(tmp_path):
    out = tmp_path / "serve.json"
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_serve.py"), str(MODEL), "--parallel", "2",
                        "--seconds", "0.5", "--gen-tokens", "8", "--prompt", "12+34=", "--burst-tokens", "40",
                        "--bursts", "1", "--interval", "0.5", "--json", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    rep = json.loads(out.read_text())
    assert [row["clients"] for row in rep["throughput"]] == [1, 2]
    for row in rep["throughput"]:
        assert _real(row["tokens_per_s"]) and row["ttft_n"] > 0 and _real(row["ttft_p99_ms"])
    b = rep["burst"][0]
    assert b["baseline"]["n"] > 0 and b["burst"]["n"] > 0 and _real(b["p99_ratio"]) and _real(b["long_prompt_s"])
    assert 38 <= rep["burst_prompt_tokens"] <= 41
    assert "same workload on both servers" in r.stdout
    peer = rep["llama_cpp_server"]
    if llama_server.missing() is None:
        assert peer["version"] == llama_server.version()
        assert [row["clients"] for row in peer["throughput"]] == [1, 2]
        assert all(_real(row["tokens_per_s"]) for row in peer["throughput"])
        assert _real(peer["burst"]["long_prompt_s"])
        assert "one request at a time" in r.stdout
    else:
        assert "not installed" in peer["skipped"] and "not installed" in r.stdout


def test_missing_names_the_absent_modules(monkeypatch):
    real = llama_server.importlib.util.find_spec
    monkeypatch.setattr(llama_server.importlib.util, "find_spec",
                        lambda name, *a: None if name == "sse_starlette" else real(name, *a))
    why = llama_server.missing()
    assert why is not None and "sse_starlette" in why and "llama-cpp-python[server]" in why


def test_peer_server_command_matches_our_settings():
    cmd = llama_server.command(MODEL, 8123, "edgerun-add", 64, 2, 64, "f16")
    args = dict(zip(cmd[3::2], cmd[4::2]))
    assert cmd[1:3] == ["-m", "llama_cpp.server"]
    assert args["--n_ctx"] == "64" and args["--n_threads"] == args["--n_threads_batch"] == "2"
    assert args["--type_k"] == args["--type_v"] == "1"
    assert args["--logits_all"] == "false" and args["--interrupt_requests"] == "false"
    assert args["--model_alias"] == "edgerun-add"


def test_side_by_side_without_peer():
    ours = {"throughput": [{"clients": 1, "tokens_per_s": 50.0, "ttft_p50_ms": 10.0, "ttft_p99_ms": 20.0}],
            "burst": {"p99_ratio": 1.1, "long_prompt_s": 2.0, "baseline": {"ttft_p99_ms": 30.0},
                      "burst": {"ttft_p99_ms": 40.0}}}
    text = bench_serve.side_by_side(ours, None, "llama.cpp server", 4)
    lines = text.splitlines()
    assert "edgerun serve (4 slots)" in lines[0] and "llama.cpp server" in lines[0]
    assert lines[1].split()[-2:] == ["50.0", "-"] and "30 -> 40" in text


def test_no_eos_bias_covers_end_of_generation_tokens():
    import edgerun
    with edgerun.Model(MODEL) as m:
        bias = bench_serve.no_eos_bias(m.tokenizer)
        assert bias and all(m.tokenizer.is_eog(int(i)) and v <= -1e9 for i, v in bias.items())
