"""What the command line says when a user gets something wrong, or when it
does something the user might not expect: one line, naming the flag the
user typed and the --help of the verb they ran, and notes on stderr where
the output alone would mislead (a full context, a context past training)."""
import os
import pathlib
import subprocess
import sys

import pytest

from edgerun import errors
from edgerun.cli.app import error_line

PYBIND = pathlib.Path(__file__).resolve().parent.parent / "pybind"


def cli(*args, stdin=None, env_extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PYBIND) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("EDGERUN_DEBUG", None)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "edgerun", *map(str, args)], capture_output=True, text=True,
                          env=env, input=stdin, timeout=120)


def one_error_line(r, status=1):
    assert r.returncode == status, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("edgerun: error: "), r.stderr
    return lines[0]


def test_a_model_path_without_a_prompt_is_refused(tmp_path):
    """One word that names a GGUF file used to become the embedded model's
    prompt: the user got an answer from a model they did not ask for."""
    for word in ("missing.gguf", str(tmp_path / "weights.bin")):
        if word.endswith(".bin"):
            pathlib.Path(word).write_bytes(b"x")
        line = one_error_line(cli("run", word, "-n", "2"))
        assert word in line and "no PROMPT follows" in line and "edgerun run MODEL PROMPT" in line
    line = one_error_line(cli("tokenize", "missing.gguf"))
    assert "no TEXT follows" in line and "edgerun tokenize MODEL TEXT" in line


def test_prompt_from_stdin_equals_the_argument():
    want = cli("run", "0012+0034=", "-n", "6")
    assert want.returncode == 0, want.stderr
    got = cli("run", "-", "-n", "6", stdin="0012+0034=\n")
    assert got.returncode == 0, got.stderr
    assert got.stdout == want.stdout


def test_tokenize_defaults_to_the_embedded_model():
    r = cli("tokenize", "0012+0034=", "--json")
    assert r.returncode == 0, r.stderr
    assert '"ids"' in r.stdout and '"n_tokens"' in r.stdout


@pytest.mark.parametrize("args, flag", [
    (("--top-p", "2"), "--top-p 2 must be in (0, 1]"),
    (("--temp", "-1"), "--temp -1 must be"),
    (("-n", "-5"), "--max-tokens must be an integer >= 0"),
    (("--ctx", "-1"), "--ctx must be an integer >= 0"),
    (("--ctx", "100000000"), "--ctx 100000000 is out of range [0, 1048576]"),
    (("--batch", "100000"), "--batch 100000 is out of range [1, 65536]"),
])
def test_library_checks_name_the_flag_and_the_verbs_help(args, flag):
    line = one_error_line(cli("run", "0012+0034=", *args))
    assert flag in line and line.endswith("see `edgerun run --help`"), line


def test_usage_mistakes_point_to_the_verbs_help():
    line = one_error_line(cli("run", "0012+0034=", "--frob"), status=2)
    assert "unrecognized arguments: --frob" in line and line.endswith("see `edgerun run --help`")
    line = one_error_line(cli("run", "0012+0034=", "--threads", "0"), status=2)
    assert "--threads" in line and "at least 1" in line
    line = one_error_line(cli("boards", "bogus"), status=2)
    assert "ACTION" in line and "'bogus'" in line


def test_a_full_context_says_so():
    r = cli("run", "0012+0034=", "--ctx", "14", "-n", "20")
    assert r.returncode == 0, r.stderr
    assert "stopped after" in r.stderr and "the context of 14 is full" in r.stderr and "--ctx" in r.stderr


def test_a_context_past_training_says_so():
    """The embedded model was trained on 64 positions."""
    r = cli("run", "0012+0034=", "--ctx", "100", "-n", "2")
    assert r.returncode == 0, r.stderr
    assert "--ctx 100 is past the 64 positions" in r.stderr
    assert "past the" not in cli("run", "0012+0034=", "--ctx", "64", "-n", "2").stderr


def test_bench_refuses_a_damaged_file_before_timing_anything(tmp_path, tiny):
    src = pathlib.Path(tiny.gguf("qwen2_tied", "q8_0"))
    bad = tmp_path / "cut.gguf"
    bad.write_bytes(src.read_bytes()[: src.stat().st_size // 2])
    r = cli("bench", bad, "--no-peer", "--prompt-tokens", "4", "--gen-tokens", "2")
    line = one_error_line(r)
    assert "extends past end of file" in line and r.stdout == ""


def test_a_bad_library_path_names_the_variable():
    line = one_error_line(cli("run", "0012+0034=", env_extra={"EDGERUN_LIB": "/no/such/libedgerun.so"}))
    assert "$EDGERUN_LIB is /no/such/libedgerun.so" in line


def test_an_unknown_architecture_lists_the_families_once(tmp_path):
    gguf = pytest.importorskip("gguf")
    import numpy as np
    path = tmp_path / "mamba.gguf"
    w = gguf.GGUFWriter(str(path), "mamba")
    w.add_tensor("x", np.zeros(4, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    line = one_error_line(cli("info", path))
    assert "architecture 'mamba' is not supported" in line and line.count("qwen3") == 1


def test_c_function_names_stay_out_of_the_line():
    e = errors.FileAccessError("er_session_save: cannot create '/x/y': No such file or directory", -2)
    assert error_line(e, "chat") == ("edgerun: error: cannot create '/x/y': No such file or directory; "
                                     "check the path and its permissions")


def test_trace_checks_its_output_folder_before_generating(tmp_path):
    line = one_error_line(cli("trace", "0012+0034=", "-o", tmp_path / "missing" / "t.json"))
    assert "folder" in line and "does not exist" in line
