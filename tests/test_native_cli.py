"""The native `edgerun-cli` (runtime_c/tools): run and info on the embedded model,
agreement with the Python binding, and one-line errors on bad input.

The binary comes from $EDGERUN_CLI (set by the Makefile for the native and the
ASan builds) or build/native/runtime_c/tools/edgerun-cli; tests skip without it.
"""
import os
import pathlib
import re
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
MODEL = REPO / "models" / "edgerun-add.gguf"


def _cli_path():
    p = os.environ.get("EDGERUN_CLI")
    return pathlib.Path(p) if p else REPO / "build" / "native" / "runtime_c" / "tools" / "edgerun-cli"


@pytest.fixture(scope="module")
def cli():
    p = _cli_path()
    if not p.is_file():
        pytest.skip(f"{p} is not built (make build)")
    return p


@pytest.fixture(scope="module")
def model():
    if not MODEL.is_file():
        pytest.skip(f"{MODEL} is absent (python scripts/train_default_model.py)")
    return MODEL


def run(cli, *args, timeout=120):
    return subprocess.run([str(cli), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def one_line_error(r, code=1):
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("edgerun-cli: error: "), r.stderr
    assert len(lines[0]) > len("edgerun-cli: error: ") + 5
    return lines[0]


STATS = re.compile(r"prompt (\d+) tok, generated (\d+) tok \(([a-z ]+)\) \| TTFT ([\d.]+) ms \| "
                   r"prefill ([\d.]+) tok/s \| decode ([\d.]+) tok/s \| arena (\d+) bytes")


def stats(r):
    m = STATS.search(r.stderr)
    assert m, r.stderr
    return {"prompt": int(m[1]), "generated": int(m[2]), "stop": m[3], "ttft": float(m[4]),
            "prefill": float(m[5]), "decode": float(m[6]), "arena": int(m[7])}


# ------------------------------------------------------------------ usage
def test_help_and_version(cli):
    r = run(cli, "--help")
    assert r.returncode == 0 and "usage: edgerun-cli run" in r.stdout and "info" in r.stdout
    r = run(cli, "--version")
    assert r.returncode == 0
    import edgerun
    assert r.stdout.strip() == f"edgerun-cli {edgerun.__version__}"


@pytest.mark.parametrize("args,needle", [
    (["frobnicate", "x.gguf"], "unknown command"),
    (["run", "x.gguf", "p", "--bogus"], "unknown option '--bogus'"),
    (["run", "x.gguf", "p", "-n", "abc"], "-n expects an integer"),
    (["run", "x.gguf", "p", "--temp", "-1"], "--temp expects a number"),
    (["run", "x.gguf", "p", "--top-p", "1.5"], "--top-p expects a number"),
    (["run", "x.gguf", "p", "--kv", "f8"], "--kv expects f32 or f16"),
    (["run", "x.gguf", "p", "--threads"], "needs a value"),
    (["run", "x.gguf"], "needs a PROMPT or --ids"),
    (["info"], "needs a MODEL.gguf path"),
])
def test_usage_errors(cli, args, needle):
    line = one_line_error(run(cli, *args), code=2)
    assert needle in line


# ------------------------------------------------------------------ bad input
def test_missing_file(cli, tmp_path):
    line = one_line_error(run(cli, "info", tmp_path / "nope.gguf"))
    assert "nope.gguf" in line


def test_not_a_gguf(cli, tmp_path):
    p = tmp_path / "text.gguf"
    p.write_text("this is not a model file at all, just words\n" * 10)
    one_line_error(run(cli, "info", p))
    one_line_error(run(cli, "run", p, "hello"))


@pytest.mark.parametrize("cut", [0, 4, 8, 23, 100, 1000, -1000, -1])
def test_truncated_model(cli, model, tmp_path, cut):
    data = model.read_bytes()
    p = tmp_path / "cut.gguf"
    p.write_bytes(data[:cut] if cut >= 0 else data[:len(data) + cut])
    one_line_error(run(cli, "run", p, "0012+0034=", "-n", "4"))


def test_bad_ids(cli, model):
    line = one_line_error(run(cli, "run", model, "--ids", "1 x 3"), code=2)
    assert "--ids" in line
    one_line_error(run(cli, "run", model, "--ids", "-5"), code=2)
    # In range for the parser, out of range for the vocabulary: the runtime refuses it.
    one_line_error(run(cli, "run", model, "--ids", "99999999", "-n", "2"))


def test_prompt_longer_than_context(cli, model):
    ids = " ".join(["1"] * 20)
    one_line_error(run(cli, "run", model, "--ids", ids, "--ctx", "8", "-n", "2"))


def test_arena_option_limits(cli, model):
    one_line_error(run(cli, "run", model, "--ids", "1", "--threads", "0"), code=2)


# ------------------------------------------------------------------ behaviour
def test_info(cli, model):
    r = run(cli, "info", model, "--threads", "1")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "arch llama" in out
    assert re.search(r"tensors: \d+", out)
    assert re.search(r"arena: \d+ bytes", out)
    assert "persistent" in out and "scratch" in out
    assert re.search(r"kernels: \w+", out)
    import edgerun
    with edgerun.Model(model, n_threads=1) as m:
        hp, plan = m.hparams, m.plan()
        n_tensors = len(m.tensors())
    assert f"layers {hp['n_layer']}" in out and f"vocab {hp['n_vocab']}" in out
    assert f"tensors: {n_tensors}" in out
    assert f"arena: {plan['total_bytes']} bytes" in out
    for sec in plan["sections"]:
        assert re.search(rf"{re.escape(sec['name'])}\s+\w+\s+{sec['bytes']}\b", out), sec


def test_run_text_matches_python(cli, model):
    """The C tokenize -> decode -> sample -> detokenize path gives exactly what the
    Python binding gives for the same greedy request."""
    import edgerun
    prompt = "0012+0034="
    r = run(cli, "run", model, prompt, "-n", "8", "--threads", "1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(prompt)
    with edgerun.Model(model, n_threads=1) as m:
        expect = m.generate(prompt, max_tokens=8)
        arena = m.plan()["total_bytes"]
    assert r.stdout == prompt + expect + "\n"
    s = stats(r)
    assert s["arena"] == arena
    assert s["prompt"] >= 1 and 1 <= s["generated"] <= 8
    assert s["ttft"] > 0 and s["prefill"] > 0


def test_run_no_echo(cli, model):
    r1 = run(cli, "run", model, "0107+0250=", "-n", "6", "--threads", "1")
    r2 = run(cli, "run", model, "0107+0250=", "-n", "6", "--threads", "1", "--no-echo")
    assert r1.returncode == r2.returncode == 0
    assert r1.stdout == "0107+0250=" + r2.stdout


def test_run_ids_matches_python(cli, model):
    import edgerun
    r = run(cli, "run", model, "--ids", "1,2 3", "-n", "5", "--print-ids", "--no-echo", "--threads", "1")
    assert r.returncode == 0, r.stderr
    got = [int(x) for x in r.stdout.split()]
    with edgerun.Model(model, n_threads=1) as m:
        expect = m.generate([1, 2, 3], max_tokens=5)
    assert got == expect


def test_context_full_stops_cleanly(cli, model):
    r = run(cli, "run", model, "--ids", "1 2 3", "--ctx", "16", "-n", "100", "--print-ids", "--no-echo",
            "--threads", "1")
    assert r.returncode == 0, r.stderr
    s = stats(r)
    n = len(r.stdout.split())
    assert n == s["generated"]
    if s["stop"] == "context full":
        # 13 forward passes fill positions 3..15; the 14th token is sampled from the last logits.
        assert n == 16 - 3 + 1
    else:
        assert s["stop"] == "end of text" and n < 14


def test_seeded_sampling_repeats(cli, model):
    args = ["run", model, "0999+0001=", "-n", "8", "--temp", "1.5", "--top-k", "8", "--top-p", "0.95",
            "--min-p", "0.01", "--repeat-penalty", "1.1", "--seed", "7", "--threads", "1"]
    a, b = run(cli, *args), run(cli, *args)
    assert a.returncode == b.returncode == 0, a.stderr
    assert a.stdout == b.stdout


def test_threads_do_not_change_greedy_output(cli, model):
    outs = {run(cli, "run", model, "4321+1234=", "-n", "7", "--threads", t).stdout for t in (1, 2)}
    assert len(outs) == 1
