"""Every case of llama.cpp's tokenizer vectors (../shared/data/tokenizers/vectors).

Each family is a vocabulary-only GGUF written by llama.cpp's converter, with
test strings (.inp, separated by `__ggml_vocab_test__` lines) and the ids
Hugging Face `tokenizers` produced for them without special tokens (.out).
The runtime must reproduce every id exactly, and decode them back to the text.
"""
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
VECTORS = REPO.parent / "shared" / "data" / "tokenizers" / "vectors"
FAMILIES = ["llama-spm", "gpt-2", "llama-bpe", "qwen2"]
SEP = "\n__ggml_vocab_test__\n"


def load_cases(family):
    base = VECTORS / f"ggml-vocab-{family}.gguf"
    if not base.exists():
        return None, []
    texts = (base.parent / (base.name + ".inp")).read_text(encoding="utf-8").split(SEP)
    if texts and texts[-1] == "":
        texts.pop()
    outs = (base.parent / (base.name + ".out")).read_text(encoding="utf-8").split("\n")
    return base, [(t, [int(x) for x in o.split()]) for t, o in zip(texts, outs)]


_TOK = {}


def tokenizer(family):
    if family not in _TOK:
        from edgerun import Tokenizer
        _TOK[family] = Tokenizer.from_file(VECTORS / f"ggml-vocab-{family}.gguf")
    return _TOK[family]


CASES = [(fam, i) for fam in FAMILIES for i in range(len(load_cases(fam)[1]))]


@pytest.mark.skipif(not VECTORS.is_dir(), reason="../shared/data/tokenizers/vectors is absent")
@pytest.mark.parametrize("family", FAMILIES)
def test_vector_file_is_complete(family):
    base, cases = load_cases(family)
    assert base is not None and len(cases) == 46
    lines = (base.parent / (base.name + ".out")).read_text(encoding="utf-8").rstrip("\n").split("\n")
    assert len(lines) == len(cases)


@pytest.mark.skipif(not CASES, reason="../shared/data/tokenizers/vectors is absent")
@pytest.mark.parametrize("family,index", CASES, ids=[f"{f}-{i}" for f, i in CASES])
def test_vector_case(family, index):
    text, want = load_cases(family)[1][index]
    tok = tokenizer(family)
    got = tok.encode(text, add_special=False, parse_special=False)
    assert got == want, f"{family} case {index} {text!r}"
    # Byte-level BPE and SentencePiece with byte fallback both round-trip.
    assert tok.decode(got) == text


@pytest.mark.skipif(not CASES, reason="../shared/data/tokenizers/vectors is absent")
@pytest.mark.parametrize("family", FAMILIES)
def test_vector_facts(family):
    tok = tokenizer(family)
    facts = {
        "llama-spm": ("spm", 32000, 1, 2),
        "gpt-2": ("bpe", 50257, 50256, 50256),
        "llama-bpe": ("bpe", 128256, 128000, 128001),
        "qwen2": ("bpe", 151936, 151643, 151643),
    }[family]
    assert (tok.kind, tok.n_vocab, tok.bos, tok.eos) == facts
    # add_special: llama.cpp's files leave add_bos_token out for llama-bpe and
    # gpt-2; the family defaults apply (Llama 3 and SentencePiece add BOS).
    ids = tok.encode("Hello", add_special=True)
    if family in ("llama-spm", "llama-bpe"):
        assert ids[0] == tok.bos and ids[1:] == tok.encode("Hello", add_special=False)
    else:
        assert ids == tok.encode("Hello", add_special=False)
