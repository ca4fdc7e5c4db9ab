"""edgerun.chat.read_string: one string from a GGUF file's metadata in pure
Python (how a board finds the chat template without gguf-py), against gguf-py
on real files, and refusing damaged ones."""
import struct

import pytest

from edgerun import errors
from edgerun.chat import read_string

gguf = pytest.importorskip("gguf")


def _files(shared_data):
    # gguf-py reads every token into numpy: the small vocabularies keep this quick
    names = ("babyllama-tok105-f32.gguf", "llama-2-tiny-random.gguf", "lfm2-llamacpp-f16.gguf",
             "qwen3-llamacpp-f16.gguf", "ggml-vocab-llama-spm.gguf")
    return sorted(f for f in shared_data.rglob("*.gguf") if f.name in names)


def test_agrees_with_gguf_py(shared_data):
    files = _files(shared_data)
    assert files
    checked = 0
    for f in files:
        r = gguf.GGUFReader(str(f))
        for key, field in r.fields.items():
            if field.types != [gguf.GGUFValueType.STRING]:
                continue
            assert read_string(f, key) == field.contents(), (f.name, key)
            checked += 1
        assert read_string(f, "tokenizer.chat_template.nope") is None
    assert checked > 2 * len(files)


def _kv_file(path, entries):
    def s(b):
        return struct.pack("<Q", len(b)) + b
    body = b"".join(s(k) + v for k, v in entries)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(entries)) + body)
    return path


def test_refuses_damaged_files(tmp_path):
    good = [(b"general.architecture", struct.pack("<I", 8) + struct.pack("<Q", 5) + b"llama"),
            (b"xs", struct.pack("<IIQ", 9, 8, 2) + struct.pack("<Q", 1) + b"a" + struct.pack("<Q", 2) + b"bc"),
            (b"n", struct.pack("<IQ", 10, 7)),
            (b"tokenizer.chat_template", struct.pack("<IQ", 8, len("{{ é }".encode())) + "{{ é }".encode())]
    f = _kv_file(tmp_path / "ok.gguf", good)
    assert read_string(f, "tokenizer.chat_template") == "{{ é }"
    assert read_string(f, "general.architecture") == "llama"
    with pytest.raises(errors.CorruptModelError, match="not a string"):
        read_string(f, "n")
    data = f.read_bytes()
    for n in (3, 23, 30, len(data) - 1):
        (tmp_path / "cut.gguf").write_bytes(data[:n])
        with pytest.raises(errors.CorruptModelError):
            read_string(tmp_path / "cut.gguf", "tokenizer.chat_template")
    (tmp_path / "magic.gguf").write_bytes(b"GGUX" + data[4:])
    with pytest.raises(errors.CorruptModelError, match="not a GGUF"):
        read_string(tmp_path / "magic.gguf", "x")
    (tmp_path / "v2.gguf").write_bytes(data[:4] + struct.pack("<I", 2) + data[8:])
    with pytest.raises(errors.CorruptModelError, match="version 2"):
        read_string(tmp_path / "v2.gguf", "x")
    big = _kv_file(tmp_path / "big.gguf", [(b"a", struct.pack("<IQ", 8, 1 << 60))])
    with pytest.raises(errors.CorruptModelError, match="truncated"):
        read_string(big, "b")
    odd = _kv_file(tmp_path / "odd.gguf", [(b"a", struct.pack("<I", 99))])
    with pytest.raises(errors.CorruptModelError, match="unknown value type"):
        read_string(odd, "b")
    bad_utf8 = _kv_file(tmp_path / "u.gguf", [(b"k", struct.pack("<IQ", 8, 2) + b"\xff\xfe")])
    with pytest.raises(errors.CorruptModelError, match="UTF-8"):
        read_string(bad_utf8, "k")


def test_a_published_template_is_found(shared_data):
    """llama.cpp's Qwen2 vocabulary carries the model's template (after 150k
    tokens and merges: the walk skips them without building anything)."""
    from edgerun.chat import render
    t = read_string(shared_data / "tokenizers" / "vectors" / "ggml-vocab-qwen2.gguf", "tokenizer.chat_template")
    assert t and "<|im_start|>" in t
    text = render(t, [{"role": "user", "content": "hi"}])
    assert text.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
