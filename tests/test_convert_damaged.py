"""`edgerun convert` on a damaged safetensors file (a cut download, a header
that is not JSON, offsets that do not fit the tensor) stops at open with one
line naming the file and the tensor, before anything is written; and an
output path in a folder that does not exist is refused, not created."""
import json
import os
import shutil
import struct
import subprocess
import sys

import pytest

from edgerun.convert import ConvertError, convert
from family_files import family_dir

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def hf(shared_data, tmp_path):
    """A writable copy of the qwen3 family's hf/ folder."""
    d = tmp_path / "hf"
    shutil.copytree(family_dir(shared_data, "qwen3") / "hf", d)
    for p in d.iterdir():
        p.chmod(0o644)  # the shared data is read-only, and so are copies of it
    return d


def split(path):
    """(header dict, tensor data) of a safetensors file."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def join(path, header, data):
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def cli(*args):
    env = dict(os.environ)
    env.setdefault("PYTHONPATH", os.path.join(REPO, "pybind"))
    return subprocess.run([sys.executable, "-m", "edgerun", "convert", *map(str, args)], capture_output=True,
                          text=True, timeout=120, env=env)


def one_error_line(r):
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("edgerun: error: "), r.stderr
    assert "Traceback" not in r.stderr
    return r.stderr.strip()


def test_truncated_file_names_file_and_tensor(hf, tmp_path):
    st = hf / "model.safetensors"
    header, data = split(st)
    n_data = 100_000 - (st.stat().st_size - len(data))
    with open(st, "r+b") as f:
        f.truncate(100_000)
    out = tmp_path / "out.gguf"
    err = one_error_line(cli(hf, out))
    begin, end = header["model.embed_tokens.weight"]["data_offsets"]
    assert err == (f"edgerun: error: {st}: tensor 'model.embed_tokens.weight' needs bytes {begin}..{end} but the "
                   f"file has {n_data} after its header; the file is truncated or damaged, re-download it")
    assert not out.exists() and not out.with_name("out.gguf.part").exists()


def test_cut_names_the_first_tensor_it_reaches(hf, tmp_path):
    """A cut past the embedding names the tensor it falls in, not the first in
    the header, so the message says how far the file got."""
    st = hf / "model.safetensors"
    header, data = split(st)
    by_offset = sorted((v["data_offsets"], k) for k, v in header.items() if k != "__metadata__")
    (begin, end), name = by_offset[len(by_offset) // 2]
    with open(st, "r+b") as f:
        f.truncate(st.stat().st_size - len(data) + (begin + end) // 2)
    with pytest.raises(ConvertError, match=f"tensor '{name}' needs bytes {begin}..{end} but the file has "
                                           f"{(begin + end) // 2} after its header"):
        convert(hf, tmp_path / "out.gguf", "f32", quiet=True)


def test_offsets_not_matching_dtype_and_shape(hf, tmp_path):
    st = hf / "model.safetensors"
    header, data = split(st)
    header["model.norm.weight"]["shape"] = [2 * header["model.norm.weight"]["shape"][0]]
    join(st, header, data)
    with pytest.raises(ConvertError, match=r"tensor 'model.norm.weight' is F16 \[192\] \(384 bytes\) but its "
                                           r"data_offsets \d+\.\.\d+ hold 192; the file is truncated or damaged"):
        convert(hf, tmp_path / "out.gguf", "f32", quiet=True)


@pytest.mark.parametrize("header,msg", [
    (b"this is no JSON at all!!", "bad safetensors header"),
    (b"\xff\xfe" + b"\x00" * 14, "bad safetensors header"),
    (b"[1, 2, 3]               ", r"bad safetensors header \(JSON list, not an object\)"),
    (b'{"w": {"dtype": "F16"}}  ', "tensor 'w' has no valid dtype, shape and data_offsets in the header"),
    (b'{"w": {"dtype": "F16", "shape": [2], "data_offsets": [0, -4]}}', "tensor 'w' has no valid dtype"),
], ids=["text", "binary", "list", "no-offsets", "negative-offset"])
def test_garbage_header(hf, tmp_path, header, msg):
    st = hf / "model.safetensors"
    _, data = split(st)
    st.write_bytes(struct.pack("<Q", len(header)) + header + data)
    r = cli(hf, tmp_path / "out.gguf")
    err = one_error_line(r)
    assert err.startswith(f"edgerun: error: {st}: "), err
    with pytest.raises(ConvertError, match=msg):
        convert(hf, tmp_path / "out.gguf", "f32", quiet=True)


def test_header_length_beyond_the_file(hf, tmp_path):
    st = hf / "model.safetensors"
    st.write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    err = one_error_line(cli(hf, tmp_path / "out.gguf"))
    assert err == (f"edgerun: error: {st}: header length {1 << 40} exceeds the file; the file is truncated, "
                   "re-download it")


def test_output_folder_must_exist(tmp_path):
    missing = tmp_path / "no_such_folder"
    err = one_error_line(cli(tmp_path, missing / "x.gguf"))
    assert err == f"edgerun: error: {missing / 'x.gguf'}: folder {missing} does not exist; create it first"
    assert not missing.exists()
    a_file = tmp_path / "file"
    a_file.write_text("")
    err = one_error_line(cli(tmp_path, a_file / "x.gguf"))
    assert err == f"edgerun: error: {a_file / 'x.gguf'}: {a_file} is not a folder; pass a path in a folder"
