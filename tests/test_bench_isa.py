"""`edgerun bench --qemu-isa` (edgerun/bench/isa.py): the Arm kernel tables'
speed-up over generic under qemu-aarch64.

Fast, everywhere: the speed-up and check arithmetic on hand-made runs, the
document update (its own section, every other one kept), option errors.
Under qemu (skipped without the aarch64 cross compiler, its libc or
qemu-aarch64): the quick plan (cortex-a76 and SVE-128) on the embedded model
through the real command — about 20 s on 2 cores once build/armv8-a exists,
~15 s more to build it."""
import importlib.util
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from edgerun.bench import engines as bench, isa as bench_isa

ROOT = pathlib.Path(__file__).resolve().parents[1]
MODEL = ROOT / "models" / "edgerun-add.gguf"


def _edgerun(*args, timeout=600):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "pybind"))
    for k in ("LD_PRELOAD", "EDGERUN_ISA"):
        env.pop(k, None)
    return subprocess.run([sys.executable, "-m", "edgerun", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=str(ROOT))


# --------------------------------------------------------------------------- arithmetic
def _run(prefill, decode, isa, ids):
    return {"prefill_tokens_per_s": prefill, "decode_tokens_per_s": decode, "isa": isa, "ids": list(ids)}


def _report(rows, auto):
    return {"results": rows, "automatic": auto}


def _row(cpu, table, runs, wtype="q8_0"):
    return {"cpu": cpu, "label": cpu, "table": table, "type": wtype, "runs": runs, "run_errors": []}


def test_speedup_is_best_rate_over_generic_best_rate():
    g = _row("cortex-a76", "generic", [_run(40.0, 20.0, "generic", [1, 2]), _run(50.0, 18.0, "generic", [1, 2])])
    n = _row("cortex-a76", "neon-dotprod", [_run(60.0, 30.0, "neon-dotprod", [1, 2]),
                                            _run(75.0, 27.0, "neon-dotprod", [1, 2])])
    a = {"cpu": "cortex-a76", "label": "cortex-a76", "expected": "neon-dotprod", "type": "q8_0",
         "runs": [_run(70.0, 25.0, "neon-dotprod", [1, 2])], "run_errors": []}
    rep = bench_isa.finish(_report([g, n], [a]))
    assert rep["errors"] == 0
    assert (g["prefill_tokens_per_s"], g["decode_tokens_per_s"]) == (50.0, 20.0)     # best of each, per figure
    assert (n["prefill_tokens_per_s"], n["decode_tokens_per_s"]) == (75.0, 30.0)
    assert n["prefill_speedup"] == pytest.approx(75.0 / 50.0) and n["decode_speedup"] == pytest.approx(30.0 / 20.0)
    assert g["prefill_speedup"] == g["decode_speedup"] == 1.0
    assert n["same_tokens_as_generic"] is True and a["chosen"] == "neon-dotprod" and "error" not in a
    # finish() twice gives the same report (the command and the tests may both call it)
    assert bench_isa.finish(rep) == rep


def test_differences_and_fallbacks_are_error_rows():
    g = _row("c", "generic", [_run(10.0, 10.0, "generic", [5, 6, 7])])
    other = _row("c", "neon", [_run(12.0, 9.0, "neon", [5, 6, 8])])                # another greedy token
    fallback = _row("c", "sve", [_run(10.0, 10.0, "generic", [5, 6, 7])])         # forced sve, ran generic
    flaky = _row("c", "neon-dotprod", [_run(9.0, 9.0, "neon-dotprod", [5, 6, 7]),
                                       _run(9.0, 9.0, "neon-dotprod", [5, 9, 7])])
    failed = _row("c", "neon-i8mm", [])
    failed["run_errors"].append("edgerun-cli on c with EDGERUN_ISA=neon-i8mm failed (exit -4)")
    a = {"cpu": "c", "label": "c", "expected": "neon", "type": "q8_0",
         "runs": [_run(10.0, 10.0, "generic", [5, 6, 7])], "run_errors": []}
    rep = bench_isa.finish(_report([g, other, fallback, flaky, failed], [a]))
    assert "error" not in g
    assert other["same_tokens_as_generic"] is False and "from step 2" in other["error"]
    assert other["decode_speedup"] == pytest.approx(0.9)         # still measured and shown
    assert "EDGERUN_ISA=sve ran table generic" in fallback["error"]
    assert "differ between repeats" in flaky["error"]
    assert "exit -4" in failed["error"] and failed["prefill_speedup"] is None
    assert "chose generic, the plan expects neon" in a["error"]
    assert rep["errors"] == 5
    text = bench_isa.format_text(rep)
    assert "DIFFER" in text and text.count("ERROR") == 5
    md = bench_isa.format_markdown(dict(rep, **_meta()))
    assert "| c | neon | 1.20 / 0.90 (error) |" in md and "| c | neon-i8mm | error |" in md


def _meta():
    return {"workload": {"prompt_tokens": 16, "gen_tokens": 16, "repeat": 2, "clock": "cpu",
                         "models": {"q8_0": "build/bench/llama15m-q8_0.gguf"}},
            "host": {"qemu": "qemu-aarch64 version 7.2", "cpu": "test CPU", "cores": 2},
            "build": {"cflags": ["-march=armv8-a"]}, "date": "today", "seconds": 1.0,
            "load_avg_before": [0.0, 0.0, 0.0], "load_avg_after": [0.0, 0.0, 0.0]}


def test_plan_quick_and_cpu_filter():
    full = bench_isa.plan()
    assert [p[0] for p in full] == ["cortex-a72", "cortex-a76", bench_isa.SVE128, bench_isa.SVE256, bench_isa.SVE512]
    assert all(p[1][0] == "generic" and p[2] in p[1] for p in full)
    assert [p[0] for p in bench_isa.plan(quick=True)] == ["cortex-a76", bench_isa.SVE128]
    assert bench_isa.plan(cpus=["cortex-a72"]) == [full[0]]
    with pytest.raises(ValueError, match="not in the --qemu-isa plan"):
        bench_isa.plan(cpus=["cortex-a53"])


# --------------------------------------------------------------------------- the document
MATRIX = f"{bench.DOC_BEGIN}\n## Throughput: edgerun and llama.cpp\n\n| a | b |\n{bench.DOC_END}\n"


def test_doc_section_goes_after_the_matrix_and_keeps_everything_else():
    doc = "# Performance\n\nIntro.\n\n" + MATRIX + "\n## Latency stability\n\nHand-written.\n"
    once = bench_isa.update_doc(doc, "## Arm kernels under qemu\n\nfirst")
    assert once.index(bench.DOC_END) < once.index(bench_isa.DOC_BEGIN) < once.index("## Latency stability")
    assert MATRIX in once and "Intro.\n" in once and once.endswith("## Latency stability\n\nHand-written.\n")
    twice = bench_isa.update_doc(once, "## Arm kernels under qemu\n\nsecond")
    assert "first" not in twice and twice.count(bench_isa.DOC_BEGIN) == 1 and "second" in twice
    assert twice.replace("second", "first") == once
    # the matrix's own update leaves this section alone
    again = bench.update_doc(twice, "## Throughput: edgerun and llama.cpp\n\nnew table")
    assert "new table" in again and f"{bench_isa.DOC_BEGIN}\n## Arm kernels under qemu\n\nsecond\n" in again
    # no matrix section: at the end; no file: a title first
    assert bench_isa.update_doc("# P\n\ntext\n", "S").startswith("# P\n\ntext\n\n" + bench_isa.DOC_BEGIN)
    assert bench_isa.update_doc("", "S").startswith("# Performance\n\n" + bench_isa.DOC_BEGIN)


def test_option_errors():
    for args, msg in ((["--threads", "2"], "runs one thread"), (["--board", "rpi5"], "--board does not apply"),
                      (["--matrix"], "--matrix does not apply"), (["--cpu", "cortex-a53"], "not in the --qemu-isa")):
        r = _edgerun("bench", "--qemu-isa", "--doc", "none", *args, timeout=120)
        assert r.returncode != 0 and msg in r.stderr, (args, r.stderr)


# --------------------------------------------------------------------------- under qemu
def _cross_missing():
    missing = [t for t in ("aarch64-linux-gnu-gcc", "qemu-aarch64") if not shutil.which(t)]
    if not pathlib.Path("/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1").exists():
        missing.append("libc6-arm64-cross")
    for mod in ("yaml", "mesonbuild"):
        if importlib.util.find_spec(mod) is None:
            missing.append(mod)
    return missing


@pytest.mark.skipif(bool(_cross_missing()), reason=f"qemu benchmark needs: {', '.join(_cross_missing())}")
def test_quick_plan_on_the_embedded_model(tmp_path):
    doc = tmp_path / "PERFORMANCE.md"
    doc.write_text("# Performance\n\n" + MATRIX + "\n## Latency stability\n\nKept.\n")
    r = _edgerun("bench", "--qemu-isa", "--quick", str(MODEL), "--repeat", "2", "--bench-dir", str(tmp_path),
                 "--doc", str(doc))
    assert r.returncode == 0, r.stderr[-3000:]
    rep = json.loads((tmp_path / "qemu_isa.json").read_text())
    assert rep["errors"] == 0
    rows = rep["results"]
    assert {(x["cpu"], x["table"]) for x in rows} == {
        ("cortex-a76", "generic"), ("cortex-a76", "neon"), ("cortex-a76", "neon-dotprod"),
        (bench_isa.SVE128, "generic"), (bench_isa.SVE128, "neon-dotprod"), (bench_isa.SVE128, "neon-i8mm"),
        (bench_isa.SVE128, "sve")}
    ref = None
    for x in rows:
        assert len(x["runs"]) == 2 and all(run["isa"] == x["table"] for run in x["runs"])
        assert x["prefill_tokens_per_s"] > 0 and x["decode_tokens_per_s"] > 0
        assert x["prefill_tokens_per_s"] == max(run["prefill_tokens_per_s"] for run in x["runs"])
        g = next(y for y in rows if y["cpu"] == x["cpu"] and y["table"] == "generic")
        assert x["prefill_speedup"] == pytest.approx(x["prefill_tokens_per_s"] / g["prefill_tokens_per_s"])
        assert x["decode_speedup"] == pytest.approx(x["decode_tokens_per_s"] / g["decode_tokens_per_s"])
        assert x["same_tokens_as_generic"] is True
        assert len(x["ids"]) == rep["workload"]["gen_tokens"] + 1
        ref = ref or x["ids"]
        assert x["ids"] == ref                      # the same binary's generic on either CPU model, too
    chosen = {a["cpu"]: a["chosen"] for a in rep["automatic"]}
    assert chosen == {"cortex-a76": "neon-dotprod", bench_isa.SVE128: "neon-i8mm"}
    text = doc.read_text()
    assert MATRIX in text and text.endswith("## Latency stability\n\nKept.\n")
    section = text[text.index(bench_isa.DOC_BEGIN):text.index(bench_isa.DOC_END)]
    assert "## Arm kernels under qemu: speed-up over generic" in section
    assert "Emulated speed is not hardware speed" in section
    assert "| cortex-a76 | neon-dotprod \u2605 |" in section and "| max SVE-128 | neon-i8mm \u2605 |" in section
    assert re.search(r"^cortex-a76 +neon-dotprod +edgerun-add .* = generic$", r.stdout, re.M)   # terminal table
