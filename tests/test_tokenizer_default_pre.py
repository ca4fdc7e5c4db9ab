"""A byte-level BPE file whose `tokenizer.ggml.pre` is "default", or that has
no such key (files written before llama.cpp had it), is split as llama.cpp
splits it (LLAMA_VOCAB_PRE_TYPE_DEFAULT: punctuation runs, then GPT-2's
regex, then numbers, then ASCII digit triples), not by GPT-2's regex alone.

Reference: llama.cpp itself (llama-cpp-python) on the same vocabulary-only
file; GPT-2's real vocabulary from ../shared/data, its key rewritten.
"""
import pytest

llama_cpp = pytest.importorskip("llama_cpp")

from edgerun import Tokenizer  # noqa: E402
from family_files import rewrite  # noqa: E402
from test_tokenizer_families import VECTORS, texts  # noqa: E402

SRC = VECTORS / "ggml-vocab-gpt-2.gguf"

# where the default set and GPT-2's regex part: punctuation before letters,
# contractions, symbols, numbers after a space, long digit runs, non-ASCII
# punctuation and numbers
EXTRA = [
    "x+=1234567; y<>z don't `a` 3.14 \u00bd",
    "\u00abBonjour\u00bb, dit-il\u2026 \u00bfQu\u00e9? \u00a1S\u00ed! \u2014 2024\u5e7412\u6708 \uffe5100 \u20ac5 \u00a9\u00ae\u2122 \u00a73",
    "a$b+c<d=e>f^g~h|i`j", "1234567890 12 \u0661\u0662\u0663\u0664\u0665 \u0663\u066b\u0665 \u216b \u00bd\u00be",
    "can't won't I'm you're 'tis ''", "  \t\n\u00a0\u3000x \u2028y",
]


@pytest.fixture(scope="module", params=["default", "absent"])
def pair(request, tmp_path_factory):
    if not SRC.exists():
        pytest.skip(f"{SRC} is absent")
    from gguf import GGUFValueType as T
    path = tmp_path_factory.mktemp("defpre") / "v.gguf"
    if request.param == "default":
        rewrite(SRC, path, set_keys={"tokenizer.ggml.pre": (T.STRING, "default")})
    else:
        rewrite(SRC, path, drop_keys=("tokenizer.ggml.pre",))
    ref = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    yield Tokenizer.from_file(str(path)), ref
    ref.close()


def test_default_pre_tokenizes_as_llama_cpp(pair):
    ours, ref = pair
    items = texts() + EXTRA
    assert len(items) > 200
    bad = []
    for text in items:
        want = ref.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        got = ours.encode(text, add_special=False, parse_special=False)
        if got != want and len(bad) < 3:
            bad.append((text[:60], got[:20], want[:20]))
    assert not bad, bad


def test_default_is_not_gpt2(pair):
    """The same vocabulary under pre "gpt-2" splits differently: the test
    above would catch a file given GPT-2's regex."""
    ours, _ = pair
    gpt2 = Tokenizer.from_file(str(SRC))
    assert ours.encode("x+=1234567", add_special=False) != gpt2.encode("x+=1234567", add_special=False)
