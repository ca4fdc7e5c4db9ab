"""`python -m edgerun ...` as a user runs it: output, --json, and one-line errors."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

import edgerun

PYBIND = pathlib.Path(__file__).resolve().parent.parent / "pybind"


def cli(*args, check=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PYBIND) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("EDGERUN_DEBUG", None)
    r = subprocess.run([sys.executable, "-m", "edgerun", *map(str, args)], capture_output=True, text=True,
                       env=env, timeout=120)
    if check is not None:
        assert r.returncode == check, (r.returncode, r.stdout, r.stderr)
    return r


def one_error_line(r, status=1):
    assert r.returncode == status, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("edgerun: error: ")
    assert "Traceback" not in r.stderr
    return lines[0]


@pytest.fixture(scope="module")
def path(tiny):
    return tiny.gguf("qwen2_tied", "q8_0")


def test_help_lists_commands_with_examples():
    r = cli("--help", check=0)
    for verb in ("run", "info", "convert", "tokenize", "bench"):
        assert verb in r.stdout
    for verb in ("run", "info", "convert"):
        h = cli(verb, "--help", check=0).stdout
        assert "examples:" in h and f"edgerun {verb}" in h


def test_no_command_prints_help_and_fails():
    r = cli()
    assert r.returncode == 2 and "usage" in r.stderr


def test_info_human_and_json(path):
    r = cli("info", path, "--ctx", "64", check=0)
    for word in ("hyper-parameters", "tensor types", "Q8_0", "arena plan", "isa:", "n_head_kv"):
        assert word in r.stdout
    d = json.loads(cli("info", path, "--ctx", "64", "--json", check=0).stdout)
    assert d["hparams"]["arch"] == "qwen2" and d["hparams"]["has_qkv_bias"]
    assert d["plan"]["n_ctx"] == 64 and d["plan"]["total_bytes"] == edgerun.plan(path, n_ctx=64,
                                                                                      n_threads=d["plan"]["n_threads"])["total_bytes"]
    assert d["types"]["Q8_0"]["count"] == 1 + 7 * 2 and d["n_tensors"] == len(d["tensors"])
    t = cli("info", path, "--tensors", check=0).stdout
    assert "blk.1.attn_v.bias" in t
    isa = cli("info", path, "--isa", check=0).stdout.strip()
    assert isa.startswith("isa: ") and "(" in isa


def test_run_streams_the_same_text_as_the_api(path):
    with edgerun.Model(path, n_ctx=64, n_threads=1) as m:
        want = m.generate("the dog ran", max_tokens=12)
    r = cli("run", path, "the dog ran", "-n", "12", "--ctx", "64", "-t", "1", check=0)
    assert r.stdout == want + ("" if want.endswith("\n") else "\n")
    assert r.stderr == ""


def test_run_ids_json_and_stats(path):
    with edgerun.Model(path, n_ctx=64) as m:
        want = m.generate([5, 6, 7, 8], max_tokens=6, temperature=0.8, seed=3)
    r = cli("run", path, "5 6 7 8", "--ids", "-n", "6", "--temp", "0.8", "--seed", "3", "--ctx", "64", "--json",
            check=0)
    d = json.loads(r.stdout)
    assert d["ids"] == want
    assert d["stats"]["n_prompt"] == 4 and d["stats"]["n_generated"] == len(want)
    r = cli("run", path, "5 6 7 8", "--ids", "-n", "6", "--stats", check=0)
    assert [int(x) for x in r.stdout.split()] == edgerun.Model(path).generate([5, 6, 7, 8], max_tokens=6)
    line = r.stderr.strip().splitlines()
    assert len(line) == 1 and "TTFT" in line[0] and "decode" in line[0]


def test_errors_are_one_line(path, tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_text("this is not a model at all, just some text")
    assert "bad magic" in one_error_line(cli("info", junk))
    assert "no such model file" in one_error_line(cli("run", tmp_path / "nope.gguf", "hi"))
    assert "integers" in one_error_line(cli("run", path, "1 two 3", "--ids"))
    assert "PROMPT" in one_error_line(cli("run", path, "a", "b", "c"))
    assert "config.json" in one_error_line(cli("convert", tmp_path, tmp_path / "o.gguf"))
    assert "no such directory" in one_error_line(cli("convert", tmp_path / "nodir", tmp_path / "o.gguf"))
    # a ';' separates what went wrong from what to do about it
    assert ";" in one_error_line(cli("info", junk))
    # usage mistakes: exit status 2, still one line
    one_error_line(cli("run", path, "hi", "--no-such-flag"), status=2)
    one_error_line(cli("convert", tmp_path, "o.gguf", "--type", "q5_k"), status=2)
    one_error_line(cli("frobnicate"), status=2)


def test_context_overflow_is_one_line(path):
    line = one_error_line(cli("run", path, " ".join(["5"] * 40), "--ids", "--ctx", "32"))
    assert "context" in line
