"""The converter names the pre-tokenizer of Qwen3.5's and Phi-4-mini's
tokenizer.json (`qwen35`, `gpt-4o`) from the Split regex it holds, and the
file it writes tokenizes as Hugging Face's tokenizers does.

A real tokenizer.json (../shared/data/tokenizers/hf, skipped when absent) gets
the family's pre_tokenizer, normalizer and ignore_merges as that family's own
tokenizer.json has them; the folder then goes through the converter unchanged
(nothing set by hand), and the runtime's ids are compared with tokenizers' on
the shared hard texts, the llama.cpp vocab test inputs and a fuzz run.
"""
import json

import pytest

tokenizers = pytest.importorskip("tokenizers")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402

from edgerun import Tokenizer  # noqa: E402
from edgerun.convert.tokenizer import (TokenizerConversionError, identify_pre, tokenizer_kv,  # noqa: E402
                                       write_vocab_gguf)

from test_pretokenize import GPT4O_RE, QWEN2_RE, QWEN35_RE  # noqa: E402
from test_tokenizer_families import HF, _split_then_bytes, texts  # noqa: E402
from test_tokenizer_hf import FUZZ_N, FUZZ_TEXT, HFRef  # noqa: E402

# family -> (base tokenizer.json, Split regex, NFC normalizer, ignore_merges, the pre name wanted)
FAMILIES = {
    "qwen3.5": ("qwen3", QWEN35_RE, True, False, "qwen35"),
    "phi4-mini": ("llama3", GPT4O_RE, False, False, "gpt-4o"),
}


class Converted:
    def __init__(self, root, name):
        base, regex, nfc, ignore_merges, pre = FAMILIES[name]
        src = HF / base / "tokenizer.json"
        if not src.exists():
            pytest.skip(f"{src} is absent")
        tj = json.loads(src.read_text(encoding="utf-8"))
        tj["pre_tokenizer"] = _split_then_bytes(regex)
        tj["normalizer"] = {"type": "NFC"} if nfc else None
        tj["model"]["ignore_merges"] = ignore_merges
        tj["truncation"] = None
        d = root / name
        d.mkdir()
        (d / "tokenizer.json").write_text(json.dumps(tj), encoding="utf-8")
        for extra in ("tokenizer_config.json",):
            if (src.parent / extra).exists():
                (d / extra).write_text((src.parent / extra).read_text(encoding="utf-8"), encoding="utf-8")
        self.kv = {k: v for k, v, _ in tokenizer_kv(d)}
        self.ref = HFRef(d / "tokenizer.json")
        self.ours = Tokenizer.from_file(write_vocab_gguf(d, root / f"{name}.gguf"))
        self.pre = pre


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    root = tmp_path_factory.mktemp("convert-pre")
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = Converted(root, name)
        return cache[name]

    return get


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_converter_names_the_pre_tokenizer(family, name):
    fam = family(name)
    assert fam.kv["tokenizer.ggml.pre"] == fam.pre
    assert fam.ours.pre == fam.pre


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_converted_file_tokenizes_as_hf(family, name):
    fam = family(name)
    items = texts()
    assert len(items) > 100
    bad = []
    for text in items:
        want = fam.ref.encode(text)
        got = fam.ours.encode(text, add_special=False)
        if got != want and len(bad) < 3:
            bad.append((text[:80], got[:16], want[:16]))
    assert not bad, f"{name}: {bad}"
    joined = "\n".join(items)
    assert fam.ours.encode(joined, add_special=False) == fam.ref.encode(joined)
    for text in items[:60]:
        ids = fam.ref.encode(text)
        assert fam.ours.decode(ids) == fam.ref.decode(ids), (name, text)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_converted_file_fuzz(family, name):
    fam = family(name)
    bad = []

    @settings(max_examples=FUZZ_N, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(FUZZ_TEXT)
    def run(text):
        want = fam.ref.encode(text)
        if fam.ours.encode(text, add_special=False) != want and len(bad) < 3:
            bad.append((text, want))

    run()
    assert not bad, f"{name}: {bad}"


def test_near_misses_are_refused():
    """A regex one character away from a known one is not guessed at: Qwen3.5's
    without the marks in its punctuation class, o200k's without '/'."""
    assert identify_pre(_split_then_bytes(QWEN2_RE)) == "qwen2"
    for regex in (QWEN35_RE.replace(r"[^\s\p{L}\p{M}\p{N}]", r"[^\s\p{L}\p{N}]"),
                  GPT4O_RE.replace(r"[\r\n/]*", r"[\r\n]*")):
        assert regex not in (QWEN35_RE, GPT4O_RE)
        with pytest.raises(TokenizerConversionError, match="unknown pre-tokenizer"):
            identify_pre(_split_then_bytes(regex))
