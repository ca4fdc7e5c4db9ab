"""`edgerun tokenize` and the Python Tokenizer's edges (bad ids, closed objects, bytes input)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
SPM = REPO.parent / "shared" / "data" / "tokenizers" / "vectors" / "ggml-vocab-llama-spm.gguf"
QWEN = REPO.parent / "shared" / "data" / "tokenizers" / "vectors" / "ggml-vocab-qwen2.gguf"

needs_vectors = pytest.mark.skipif(not SPM.exists(), reason="tokenizer vectors absent")


def cli(*args, stdin=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "pybind") + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "edgerun", *args], capture_output=True, text=True,
                          input=stdin, env=env, timeout=120)


@needs_vectors
def test_cli_table():
    r = cli("tokenize", str(SPM), "Hello world")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "'<s>'" in lines[1] and "15043" in lines[2] and "'▁Hello'" in lines[2]
    assert lines[-1].startswith("3 tokens")


@needs_vectors
def test_cli_json_and_flags():
    r = cli("tokenize", str(QWEN), "<|im_start|>hi", "--parse-special", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["ids"][0] == 151644 and d["pieces"][0] == "<|im_start|>"
    r = cli("tokenize", str(SPM), "Hello", "--no-special", "--json")
    assert json.loads(r.stdout)["ids"] == [15043]
    r = cli("tokenize", str(SPM), "-", "--json", stdin="Hello")
    assert json.loads(r.stdout)["ids"] == [1, 15043]


@needs_vectors
def test_cli_bad_file(tmp_path):
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"not a gguf file at all")
    r = cli("tokenize", str(bad), "hi")
    assert r.returncode == 1 and r.stderr.startswith("edgerun: error:") and "Traceback" not in r.stderr


@needs_vectors
def test_python_edges():
    from edgerun import Tokenizer, errors
    tok = Tokenizer.from_file(SPM)
    assert tok.encode(b"Hello", add_special=False) == [15043]
    with pytest.raises(errors.InvalidArgumentError):
        tok.decode([32000])
    with pytest.raises(IndexError):
        tok.piece(-1)
    assert tok.piece(13) == "<0x0A>" and tok.decode([13]) == "\n"
    assert tok.encode_batch(["a", "b c"]) == [tok.encode("a"), tok.encode("b c")]
    big = "word " * 20000
    assert tok.decode(tok.encode(big, add_special=False)) == big
    tok.close()
    with pytest.raises(errors.StateError, match="closed"):
        tok.encode("x")


def test_nfc_tables_are_current():
    """nfc_tables.c is what scripts/gen_nfc_tables.py generates (same Unicode version only)."""
    import re
    import unicodedata
    text = (REPO / "runtime_c" / "src" / "tokenizer" / "nfc_tables.c").read_text()
    version = re.search(r"Unicode version: (\S+)", text).group(1)
    if version != unicodedata.unidata_version:
        pytest.skip(f"tables are Unicode {version}, this Python has {unicodedata.unidata_version}")
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_nfc_tables.py"), "--check"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
