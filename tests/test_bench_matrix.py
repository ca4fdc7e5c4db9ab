"""The benchmark matrix's parts (pybind/edgerun/bench/engines.py) on small inputs:
medians and spread, weight bytes per token, the bandwidth probe, the report
section and its place in docs/PERFORMANCE.md. The full matrix is `make bench`."""
import json
import os
import pathlib
import shutil
import subprocess

import pytest

from conftest import logits_repacked_and_not
from edgerun.bench import engines as bench

REPO = pathlib.Path(__file__).resolve().parent.parent


def test_summary_is_median_with_spread():
    runs = [{"prefill_tokens_per_s": p, "decode_tokens_per_s": d, "ttft_ms": t, "n_generated": 5}
            for p, d, t in ((10, 100, 3), (30, 50, 1), (20, 70, 2))]
    s = bench._summary(runs)
    assert s["prefill_tokens_per_s"] == 20 and s["decode_tokens_per_s"] == 70 and s["ttft_ms"] == 2
    assert s["spread"]["decode_tokens_per_s"] == [50, 100]
    assert bench._summary(runs[:2])["prefill_tokens_per_s"] == 20      # even count: mean of the middle two
    assert len(s["runs"]) == 3


def test_weight_bytes_per_token_counts_tied_embedding_once(tmp_path):
    import gguf
    import numpy as np
    for tied in (True, False):
        p = tmp_path / f"m{tied}.gguf"
        w = gguf.GGUFWriter(str(p), "llama")
        w.add_tensor("token_embd.weight", np.zeros((10, 32), np.float32))   # 10 rows of 32
        w.add_tensor("blk.0.attn_q.weight", np.zeros((32, 32), np.float32))
        if not tied:
            w.add_tensor("output.weight", np.zeros((10, 32), np.float32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        want = 10 * 32 * 4 + 32 * 32 * 4 if tied else 32 * 4 + 32 * 32 * 4 + 10 * 32 * 4
        assert bench.weight_bytes_per_token(p) == want


def test_kv_bytes_per_token_from_the_file():
    # the embedded model: 2 layers, 128 wide, 4 query heads on 2 K/V heads of 32
    path = pathlib.Path(__file__).resolve().parent.parent / "models" / "edgerun-add.gguf"
    kv_row = 2 * 32
    # steps at positions 8..11 read 9..12 positions: 10.5 on average
    assert bench.kv_bytes_per_token(path, 8, 4) == 2 * 2 * kv_row * 2 * 10.5
    assert bench.kv_bytes_per_token(path, 8, 4, kv_elem=4) == 2 * 2 * kv_row * 4 * 10.5


def test_kv_share_line():
    rep = _fake_report()
    assert "Not counted" not in bench.format_markdown(rep)  # an older report
    for r in rep["results"]:
        if "error" not in r:
            r["kv_bytes_per_token"] = 5 * 2 ** 19  # 2.5 MiB against 10^7 weight bytes
    assert "(15m: 2.50 MiB a step, 26.2% on top of the weights)" in bench.format_markdown(rep)


def test_membw_probe_reports_json():
    exe = bench.membw_binary()
    if exe is None:
        pytest.skip("edgerun-membw is not built (make build)")
    r = subprocess.run([str(exe), "32", "1", "2"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    assert [x["threads"] for x in rows] == [1, 2]
    assert all(x["gb_per_s"] > 0.1 and x["passes"] >= 3 for x in rows)
    # the best pass bounds the median pass from above
    assert all(0.1 < x["median_gb_per_s"] <= x["gb_per_s"] for x in rows)
    bad = subprocess.run([str(exe), "1"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "usage" in bad.stderr


def test_core_latency_probe():
    exe = bench._tool("edgerun-corelat")
    if exe is None:
        pytest.skip("edgerun-corelat is not built (make build)")
    bad = subprocess.run([str(exe), "5"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "usage" in bad.stderr
    if len(os.sched_getaffinity(0)) < 2:
        one = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
        assert one.returncode == 2 and "needs two CPUs" in one.stderr
        assert bench.measure_core_latency() is None
        return
    r = subprocess.run([str(exe), "20000"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(d["cpus"]) == 2 and d["cpus"][0] != d["cpus"][1]
    # a hand-over needs at least a few ns, and the probe gives up after a second
    assert 1 <= d["round_trips"] <= 20000 and d["round_trip_ns"] > 5
    assert bench.measure_core_latency() > 5
    # confined to one CPU, it says so instead of measuring a core with itself
    if shutil.which("taskset"):
        one = subprocess.run(["taskset", "-c", str(d["cpus"][0]), str(exe)], capture_output=True, text=True,
                             timeout=30)
        assert one.returncode == 2 and "needs two CPUs" in one.stderr


def _fake_report():
    rows = []
    for engine, dec in (("edgerun", 120.0), ("llama.cpp", 100.0)):
        rows.append({"engine": engine, "shape": "15m", "type": "q8_0", "threads": 1, "prefill_tokens_per_s": 900.0,
                     "decode_tokens_per_s": dec, "ttft_ms": 5.0, "peak_rss_bytes": 50 << 20,
                     "spread": {"prefill_tokens_per_s": [800.0, 950.0], "decode_tokens_per_s": [dec - 5, dec + 5],
                                "ttft_ms": [4.0, 6.0]},
                     "pct_of_bandwidth": dec / 2, "pct_of_median_bandwidth": dec / 1.6,
                     **({"pct_of_near_bandwidth": dec / 1.5} if engine == "edgerun" else {}),
                     "weight_bytes_per_token": 10 ** 7})
    rows.append({"engine": "llama.cpp", "shape": "15m", "type": "f32", "threads": 1, "error": "boom"})
    return {"machine": {"cpu": "Test CPU", "machine": "x86_64", "cpus": 2}, "date": "today", "seconds": 12.0,
            "load_avg_before": [0.1, 0.2, 0.3], "load_avg_after": [0.2, 0.2, 0.3],
            "bandwidth_gb_per_s": {"1": 20.0}, "median_bandwidth_gb_per_s": {"1": 16.0}, "bandwidth_probe": "test", "prompt_tokens": 64, "gen_tokens": 128,
            "repeat": 3, "ctx": 256, "llama_cpp": "installed", "results": rows}


def test_markdown_section_and_doc_update(tmp_path):
    md = bench.format_markdown(_fake_report(), "performance.png")
    assert md.startswith("## Throughput")
    assert "| 15m | q8_0 | 1 | edgerun | 900.0 [800.0-950.0] | 120.0 [115.0-125.0] | 60% | 75% | 80% | 50.0 | 1.20x |" in md
    # a row without its near-in-time probe (an older report) shows a dash there
    assert "| 15m | q8_0 | 1 | llama.cpp | 900.0 [800.0-950.0] | 100.0 [95.0-105.0] | 50% | 62% | - | 50.0 | - |" in md
    assert "median pass: 1 thread(s): 16.0 GB/s" in md
    assert "| 15m | f32 | 1 | llama.cpp | error: boom |" in md
    assert "![decode tokens/s" in md and "load average" in md
    other = "# Performance\n\n## Latency stability\n\nnumbers\n"
    doc = bench.update_doc(other, md)
    assert "## Latency stability\n\nnumbers" in doc and doc.count(bench.DOC_BEGIN) == 1
    again = bench.update_doc(doc, "## Throughput: new")
    assert "900.0" not in again and "## Throughput: new" in again and "numbers" in again
    assert again.count(bench.DOC_BEGIN) == 1 and again.count(bench.DOC_END) == 1


def test_core_round_trip_line():
    rep = _fake_report()
    assert "round trip" not in bench.format_markdown(rep)  # an older report
    rep["core_round_trip_ns_before_after"] = [62.4, 331.0]
    assert "round trip between the first two CPUs (edgerun-corelat), before and after: 62 ns and 331 ns" in \
        bench.format_markdown(rep)
    rep["core_round_trip_ns_before_after"] = [None, None]  # one CPU, or not built
    assert "round trip" not in bench.format_markdown(rep)


def test_busy_flag_follows_other_work_not_the_runs_own_load():
    rep = _fake_report()
    rep["load_avg_after"] = [1.3, 0.9, 0.5]  # what the run's own engines leave on 2 CPUs
    rep["interference"] = {"seconds": 12.0, "other_cpus": 0.02, "steal_share": 0.004, "busy": False}
    md = bench.format_markdown(rep)
    assert "during the run: other processes 0.02 CPUs on average, hypervisor steal 0.4% of CPU time" in md
    assert "machine was busy" not in md
    rep["interference"] = {"seconds": 12.0, "other_cpus": 0.6, "steal_share": 0.0, "busy": True}
    assert "machine was busy" in bench.format_markdown(rep)
    # an older report without the measure: judged by the load before the run
    rep.pop("interference")
    assert "machine was busy" not in bench.format_markdown(rep)
    rep["load_avg_before"] = [1.5, 1.0, 0.5]
    assert "machine was busy" in bench.format_markdown(rep)


def test_plot_writes_png(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "p.png"
    assert bench.plot(_fake_report(), png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_matrix_rejects_a_model_argument():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "pybind") + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([os.sys.executable, "-m", "edgerun", "bench", "x.gguf", "--matrix"], capture_output=True,
                       text=True, env=env, timeout=60)
    assert r.returncode != 0 and "MODEL" in r.stderr


def test_mix_rows_only_where_super_blocks_fit():
    assert "q4_k_m" not in bench._types_for("15m", bench.MATRIX_TYPES + tuple(bench.MIX_TYPES))
    assert bench._types_for("110m", bench.MATRIX_TYPES + tuple(bench.MIX_TYPES))[-3:] == ["q4_k_m", "q5_k_m", "q6_k"]
    rep = _fake_report()
    rep["results"].append(dict(rep["results"][0], shape="110m", type="q6_k"))
    md = bench.format_markdown(rep)
    assert "| 110m | q6_k | 1 | edgerun |" in md and "llama_model_quantize" in md


def test_family_rows_get_their_own_section(tmp_path):
    """`--matrix --families` rows: only Q8_0 and Q4_K_M, their own section after
    the matrix's (its notes kept with it), the matrix's section untouched."""
    everything = bench.MATRIX_TYPES + tuple(bench.MIX_TYPES)
    assert bench._types_for("gemma3-270m", everything) == ["q8_0", "q4_k_m"]
    assert bench._types_for("qwen3-0.6b", everything) == ["q8_0", "q4_k_m"]
    rep = _fake_report()
    rep["results"] = [dict(r, shape="qwen3-0.6b") for r in rep["results"]]
    doc = tmp_path / "PERFORMANCE.md"
    doc.write_text(f"# Performance\n\n{bench.DOC_BEGIN}\nthe matrix\n{bench.DOC_END}\n\n### its notes\n\n"
                   "## Latency stability\n")
    bench.write_matrix(rep, tmp_path, doc=doc)
    text = doc.read_text()
    assert "the matrix" in text and "| qwen3-0.6b | q8_0 | 1 | edgerun |" in text and "262144" in text
    assert text.index("### its notes") < text.index(bench.FAMILY_DOC_BEGIN) < text.index("## Latency stability")
    bench.write_matrix(rep, tmp_path, doc=doc)   # in place the second time
    assert doc.read_text().count(bench.FAMILY_DOC_BEGIN) == 1


def test_llama_quantizer_failure_is_one_clear_error(tmp_path):
    bad = tmp_path / "not.gguf"
    bad.write_bytes(b"not a model")
    with pytest.raises(RuntimeError, match="llama-cpp-python"):
        bench._llama_quantize(bad, tmp_path / "out.gguf", bench.MIX_TYPES["q4_k_m"])


def test_llama_quantizer_mix_runs_in_edgerun(kmodel, tmp_path, monkeypatch):
    """A Q4_K_M file made by llama.cpp's own quantizer (as the matrix makes
    its mix rows) holds Q4_K and Q6_K matrices, opens in edgerun, and gives
    the same logits with and without the interleaved layouts."""
    pytest.importorskip("llama_cpp")
    import numpy as np
    from edgerun.convert import reference
    from edgerun.convert import convert
    d, n_vocab = kmodel
    f32 = tmp_path / "k-f32.gguf"
    convert(d, f32, "f32", quiet=True)
    mix = tmp_path / "k-q4_k_m.gguf"
    bench._llama_quantize(f32, mix, bench.MIX_TYPES["q4_k_m"])
    types = {reference.TYPE_NAMES[t] for t in reference.GGUFModel(mix).tensor_types.values()}
    assert {"Q4_K", "Q6_K"} <= types
    ids = [int(v) for v in np.random.RandomState(2).randint(0, n_vocab, 12)]
    _, _, got, want = logits_repacked_and_not(mix, ids, monkeypatch, n_ctx=32, n_threads=2)
    assert np.array_equal(got, want) and np.isfinite(got).all()
