"""The C pre-tokenizers against Hugging Face `tokenizers`, span for span.

The C sources (unicode.c, unicode_tables.c, pretokenize.c) are compiled here
into a small shared library of their own and called through ctypes, so these
tests need only a C compiler, not the whole runtime build.

The reference for every pre-tokenizer name is what HF itself runs: a Sequence
of Split(Regex(r), behavior="isolated") over the regexes the name stands for
(llama.cpp's table of `tokenizer.ggml.pre` values; for Llama 3 and Qwen2 the
original tokenizer.json regex with `(?i:...)`), and for GPT-2 the ByteLevel
pre-tokenizer with its built-in regex. HF reports character offsets; the C
code byte offsets, converted here.
"""
import ctypes
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

hypothesis = pytest.importorskip("hypothesis")
tokenizers = pytest.importorskip("tokenizers")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from tokenizers import Regex  # noqa: E402
from tokenizers import pre_tokenizers as pt  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parent.parent
SRC = REPO / "runtime_c" / "src" / "tokenizer"
VECTORS = REPO.parent / "shared" / "data" / "tokenizers" / "vectors"

# ------------------------------------------------------------------ regexes

GPT2_RE = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
             r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
            r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Written with escapes: a copy through an editor or web page can NFC-normalize
# the literal characters (U+1F7D, U+1FBE, U+2126, U+212A... have singleton
# decompositions), which silently changes the class.
DS_LETTERS = (
    "\u0041-\u005a\u0061-\u007a\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf"
    "\u01c4-\u0293\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a"
    "\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5"
    "\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a"
    "\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d"
    "\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3"
    "\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115"
    "\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149"
    "\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d"
    "\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17"
    "\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb"
    "\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943")
DS_PUNCT = "!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002"
DS_CJK = "\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff"
PORO_RE = " ?[^(\\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+"
# Qwen3.5 (llama.cpp's `qwen35`): Qwen2's regex with \p{M} joining letters.
QWEN35_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|"
             r" ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# o200k as GPT-4o-style tokenizer.json files (Phi-4-mini; llama.cpp's `gpt-4o`) write it.
GPT4O_RE = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"
            r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}|"
            r" ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")

REFERENCE = {
    "gpt2": None,  # ByteLevel(use_regex=True): the regex built into HF
    "llama3": [LLAMA3_RE],
    "qwen2": [QWEN2_RE],
    "deepseek-llm": ["[\r\n]", f"\\s?[{DS_LETTERS}]+", f"\\s?[{DS_PUNCT}]+", r"\s+$",
                     f"[{DS_CJK}]+", r"\p{N}+"],
    "deepseek-coder": ["[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", f"[{DS_CJK}]+", r"\p{N}"],
    "falcon": [r"[\p{P}\$\+<=>\^~\|`]+", GPT2_RE, "[0-9][0-9][0-9]"],
    # llama.cpp's default (LLAMA_VOCAB_PRE_TYPE_DEFAULT) for "default" or no pre key;
    # test_tokenizer_default_pre.py checks the ids against llama.cpp itself
    "default": [r"[\p{P}\$\+<=>\^~\|]+", GPT2_RE, r"\p{N}+", "[0-9][0-9][0-9]"],
    "starcoder": [r"\p{N}", GPT2_RE],
    "poro": [PORO_RE],
    "viking": [PORO_RE, r"\p{N}"],
    "qwen35": [QWEN35_RE],
    "gpt-4o": [GPT4O_RE],
    # SmolLM/SmolLM2's own tokenizer.json: Digits(individual_digits) then the
    # GPT-2 ByteLevel regex; llama.cpp's `smollm` runs the starcoder pair.
    "smollm": "digits+bytelevel",
}

# Names that must resolve to each family (a sample of the name table; llama.cpp's spellings).
ALIASES = {
    "gpt2": ["gpt-2", "gpt2", "mpt", "olmo", "jais", "phi-2", "roberta-bpe"],
    "default": ["default", ""],
    "llama3": ["llama-bpe", "llama3", "llama-v3", "dbrx", "smaug-bpe", "falcon3", "chatglm-bpe"],
    "qwen2": ["qwen2", "stablelm2", "deepseek-r1-qwen", "megrez"],
    "deepseek-llm": ["deepseek-llm"],
    "deepseek-coder": ["deepseek-coder"],
    "falcon": ["falcon"],
    "starcoder": ["starcoder", "refact", "command-r", "smollm", "codeshell", "exaone"],
    "poro": ["poro-chat", "bloom", "gpt3-finnish"],
    "viking": ["viking"],
    "qwen35": ["qwen35"],
    "gpt-4o": ["gpt-4o"],
}


def hf_pretokenizer(name):
    regs = REFERENCE[name]
    if regs is None:
        return pt.ByteLevel(add_prefix_space=False, use_regex=True)
    if regs == "digits+bytelevel":
        return pt.Sequence([pt.Digits(individual_digits=True),
                            pt.ByteLevel(add_prefix_space=False, use_regex=True)])
    return pt.Sequence([pt.Split(Regex(r), behavior="isolated", invert=False) for r in regs])


_HF = {}


def hf_spans(name, text):
    if name not in _HF:
        _HF[name] = hf_pretokenizer(name)
    return [off for _, off in _HF[name].pre_tokenize_str(text)]


# ------------------------------------------------------------------ the C library


class Lib:
    def __init__(self, path):
        lib = ctypes.CDLL(str(path))
        self.lib = lib

        class Span(ctypes.Structure):
            _fields_ = [("off", ctypes.c_uint32), ("len", ctypes.c_uint32)]

        self.Span = Span
        lib.er_pretokenize.restype = ctypes.c_size_t
        lib.er_pretokenize.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t,
                                       ctypes.POINTER(Span), ctypes.c_size_t]
        lib.er_pre_from_name.restype = ctypes.c_int
        lib.er_pre_from_name.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        lib.er_pre_name.restype = ctypes.c_char_p
        lib.er_pre_name.argtypes = [ctypes.c_int]
        lib.er_unicode_category.restype = ctypes.c_int
        lib.er_unicode_category.argtypes = [ctypes.c_uint32]
        lib.er_unicode_is_whitespace.restype = ctypes.c_int
        lib.er_unicode_is_whitespace.argtypes = [ctypes.c_uint32]
        lib.er_unicode_version.restype = ctypes.c_char_p

    def pre_id(self, name):
        b = name.encode()
        return self.lib.er_pre_from_name(b, len(b))

    def spans(self, pre, data: bytes):
        n = self.lib.er_pretokenize(pre, data, len(data), None, 0)
        assert n <= max(len(data), 0), "more spans than bytes"
        buf = (self.Span * max(n, 1))()
        m = self.lib.er_pretokenize(pre, data, len(data), buf, n)
        assert m == n
        return [(buf[i].off, buf[i].off + buf[i].len) for i in range(n)]


def _compiler():
    for cc in (os.environ.get("CC"), "gcc", "cc", "clang"):
        if cc and shutil.which(cc):
            return cc
    return None


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    cc = _compiler()
    if cc is None:
        pytest.skip("no C compiler")
    out = tmp_path_factory.mktemp("pretok") / "libpretok.so"
    srcs = [SRC / "unicode.c", SRC / "unicode_tables.c", SRC / "pretokenize.c"]
    # EXTRA_CFLAGS lets a sanitizer run reuse these tests, e.g.
    # EXTRA_CFLAGS="-fsanitize=address,undefined" LD_PRELOAD=$(gcc -print-file-name=libasan.so)
    cmd = [cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-fPIC", "-shared",
           *os.environ.get("EXTRA_CFLAGS", "").split(), "-o", str(out)] + [str(s) for s in srcs]
    subprocess.run(cmd, check=True)
    return Lib(out)


def char_spans(data: bytes, spans):
    """Byte spans -> character spans, where each invalid UTF-8 byte counts as
    one character (what Python's surrogateescape decoding yields, too)."""
    text = data.decode("utf-8", "surrogateescape")
    byte_at_char = []
    pos = 0
    for ch in text:
        byte_at_char.append(pos)
        o = ord(ch)
        pos += 1 if 0xDC80 <= o <= 0xDCFF else len(ch.encode("utf-8"))
    byte_at_char.append(pos)
    index = {b: i for i, b in enumerate(byte_at_char)}
    out = []
    for a, b in spans:
        assert a in index and b in index, f"span {a}:{b} cuts a character"
        out.append((index[a], index[b]))
    return out


def check_same(lib, name, text):
    data = text.encode("utf-8")
    got = lib.spans(lib.pre_id(name), data)
    want = hf_spans(name, text)
    # invariants first: ordered, non-empty, covering everything
    pos = 0
    for a, b in got:
        assert a == pos and b > a, (name, text, got)
        pos = b
    assert pos == len(data)
    got_c = char_spans(data, got)
    if got_c != want:
        pieces_got = [text[a:b] for a, b in got_c]
        pieces_want = [text[a:b] for a, b in want]
        pytest.fail(f"{name}: {text!r}\n  C : {pieces_got}\n  HF: {pieces_want}")


NAMES = sorted(REFERENCE)

# ------------------------------------------------------------------ tests


def test_tables_are_current():
    """The committed unicode_tables.c is what the generator makes today."""
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_unicode_tables.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_names(lib):
    for family, names in ALIASES.items():
        fid = lib.pre_id(family)
        assert fid > 0, family
        assert lib.lib.er_pre_name(fid).decode() == family
        for n in names:
            assert lib.pre_id(n) == fid, n
    assert lib.pre_id("none") == 0
    assert lib.lib.er_pre_name(0) == b"none"
    for bad in ("llama", "gpt-2 ", "GPT-2", "qwen", "x" * 100):
        assert lib.pre_id(bad) == -1, bad
    assert lib.lib.er_pre_name(-1) is None
    assert lib.lib.er_pre_name(1000) is None
    # the name is taken by length, not up to a NUL: "qwen2" inside "qwen2x"
    assert lib.lib.er_pre_from_name(b"qwen2x", 5) == lib.pre_id("qwen2")


def test_classes_match_hf_engine(lib):
    """Every code point's class (\\p{L}, \\p{N}, \\p{P}, \\p{M}, \\s) agrees with
    HF's regex engine, which is what the pre-tokenizers must imitate."""
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    text = "".join(map(chr, cps))
    cat = lib.lib.er_unicode_category
    ours = [cat(c) for c in cps]
    # enum er_ucat ranges (see unicode.h): L 1-5, M 6-8, N 9-11, P 12-18
    groups = {r"\p{L}": range(1, 6), r"\p{M}": range(6, 9), r"\p{N}": range(9, 12), r"\p{P}": range(12, 19)}
    for rx, rng in groups.items():
        not_in = set()
        for _, (a, b) in pt.Split(Regex(rx), behavior="removed").pre_tokenize_str(text):
            not_in.update(range(a, b))
        bad = [hex(cps[i]) for i in range(len(cps)) if (ours[i] in rng) == (i in not_in)]
        assert not bad, f"{rx}: {len(bad)} code points differ, e.g. {bad[:10]}"
    not_ws = set()
    for _, (a, b) in pt.Split(Regex(r"\s"), behavior="removed").pre_tokenize_str(text):
        not_ws.update(range(a, b))
    ws = lib.lib.er_unicode_is_whitespace
    bad = [hex(cps[i]) for i in range(len(cps)) if bool(ws(cps[i])) == (i in not_ws)]
    assert not bad, f"\\s: differs at {bad[:10]}"


TRICKY = [
    "", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r\n\r\n", " \n", "\n ", " \r\n x", "a\r\n\r\nb",
    "Hello world", " Hello world", "Hello World", " Hello World!", "Hello, world!", "   leading",
    "trailing   ", "a  b   c    d", "x\t\ty", "x \t y", "tab\tthen", "\u00a0\u00a0x", "x\u00a0",
    "\u3000\u3000日本\u3000語", "a\u2029b\u2028c", "\u0085\u0085z", "\u000b\u000cq",
    "I'm you're he's we've she'll they'd it't", "I'M YOU'RE HE'S WE'VE SHE'LL THEY'D",
    "'s 'S '\u017f \u017f '\u212a 'k '\ufb06 '\ufb05", "it'ſ x'ſx X'\u017fT a'\u212a", "don\u2019t won\u2019t", "''''s", "x'", "'", "' s", "'ss", "'Re'vE'lL",
    "123", "1234567", " 12345 ", "1 2 3", "3.14159", "1,000,000", "٣٤٥٦ ٧", "①②③④", "Ⅷ Ⅸ", "²³",
    "½ 0x1F 1e10", "12abc34", "abc123def", "🙂", "👩‍💻 dev", "👨‍👩‍👧‍👦👍🏽", "🇺🇸🇩🇪", "😀😀 😀",
    "中文字符", "日本語のテキスト", "한국어 텍스트", "ภาษาไทย", "مرحبا بالعالم ١٢٣", "שלום עולם",
    "e\u0301 n\u0303 a\u0308\u0304", "\u0301abc", "x\u20dd", "Ελληνικά ᾳ ᾼ \u1fbe ῼ a\u1fbeb", "Ω K Å ℮",
    "Ａｂｃ　ｘｙｚ！？", "µ ſ ƺ ƻ Ƽ", "\u0000\u0001\u001f\u007f\u0080\u009f", "\ufeffBOM", "\ufffd",
    "a\u200bb\u200dc", "mixed русский English 中文 123 !!!", "<|endoftext|>", "<s> </s>", "```py\nx=1\n```",
    "def f(x):\n    return x**2  # sq\n", "    \n    \n", "  \t\n\r  x", "x  \n  ", "$+<=>^~|`", "...,,,!!!",
    "«quotes» “curly” ‘single’", "a—b–c", "#hashtag @user", "e-mail@ex.com", "C++ C# F#", "\\n\\t",
    " ?!", " (x)", "hi.How", "你好，世界。", "a…b", "ए। ب، c۔", "\U0001d400\U0001d7ce", "\U00010400x",
    "\U0001e900 \U000e0001", "\U0010fffd", "\u0378\u0379", "\u0800\u4e00\u9fa5\u9fa6\uac00\ud7ff",
    "ÀÖ×ØöøƺƻƼ", "\u1f5f\u1f7d\u1f7e", "\u2126\u2127\u212a", "x" * 300, " " * 300 + "x",
    "7" * 100, "\n" * 50 + "a", "ab" + "\r\n" * 20, "'" * 40,
]


@pytest.mark.parametrize("name", NAMES)
def test_tricky_strings(lib, name):
    for text in TRICKY:
        check_same(lib, name, text)


def _class_edges():
    """Every code point at or next to an edge of the explicit character classes
    (deepseek letters/punctuation/CJK, poro's excluded set), in contexts where
    class membership changes the pieces."""
    cps = set()
    for cls in (DS_LETTERS, DS_PUNCT, DS_CJK):
        i = 0
        while i < len(cls):
            lo = hi = ord(cls[i])
            if i + 2 < len(cls) and cls[i + 1] == "-":
                hi = ord(cls[i + 2])
                i += 3
            else:
                i += 1
            cps.update((lo - 1, lo, lo + 1, hi - 1, hi, hi + 1))
    cps.update(map(ord, "(|.,!?)\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c$+<=>^~`"))
    cps = sorted(c for c in cps if 0 <= c <= 0x10FFFF and not 0xD800 <= c <= 0xDFFF)
    # 'é' rather than 'a' around c: ASCII letters also sit in deepseek's punctuation class.
    return "".join(f"\u00e9{chr(c)}\u00e9 a{chr(c)}a {chr(c)}1{chr(c)}\u4e00{chr(c)}!{chr(c)} " for c in cps)


@pytest.mark.parametrize("name", NAMES)
def test_class_edges(lib, name):
    check_same(lib, name, _class_edges())


def _vector_texts():
    if not VECTORS.is_dir():
        return []
    texts = []
    for f in sorted(VECTORS.glob("*.inp")):
        raw = f.read_text(encoding="utf-8")
        texts += raw.split("\n__ggml_vocab_test__\n")
    return texts


@pytest.mark.parametrize("name", NAMES)
def test_vector_inputs(lib, name):
    texts = _vector_texts()
    if not texts:
        pytest.skip("tokenizer vectors (../shared/data/tokenizers/vectors) are not present")
    for text in texts:
        check_same(lib, name, text)
    # and all of them at once: longer context, pieces at distance
    check_same(lib, name, "\n".join(texts))


# Characters that exercise every class boundary the splitters know about,
# mixed with arbitrary code points.
_SPECIAL = list(" \t\n\r\x0b\x0c\x85\xa0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000\u200b\x1c\x1f"
                "'sStTmMdDrReEvVlLſKk\u212aaA0159٣①Ⅷ².,!?()|$+<=>^~`…。，、।۔،!-/:~！／："
                "‘’“”\u2019µÀÖ×Øöø\u01bb\u0294\u0377\u0378\u1f7d\u1fbe\u2126\u212a\uff21\uff5a"
                "中日本語\u9fa5\u9fa6\u0800\u07ff가\ud7ff\ud7b0ä\u0301\u0308\u20dd😀👍🏽\u200d🇺🇸\ufeff\ufffd\x00\x7f")
_CHAR = st.one_of(st.sampled_from(_SPECIAL), st.sampled_from(_SPECIAL), st.characters(codec="utf-8"))
_TEXT = st.lists(st.one_of(_CHAR, st.sampled_from(["'s", "'LL", " 123", "  \n", "\r\n", "    ", "1234"])),
                 max_size=40).map("".join)


def _random_case(lib, name, text):
    check_same(lib, name, text)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_TEXT)
def test_random_text(lib, name, text):
    _random_case(lib, name, text)


@pytest.mark.long
@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=20000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_TEXT)
def test_random_text_long(lib, name, text):
    _random_case(lib, name, text)


# An invalid UTF-8 byte is a character of category Cn for the C code: not a
# letter, number, punctuation or space, in no explicit class. U+0378 is an
# unassigned code point with exactly those properties, so HF splitting the
# text with U+0378 in place of each invalid byte must give the same pieces.
_STANDIN = "\u0378"


def _check_bytes(lib, name, data):
    got = lib.spans(lib.pre_id(name), data)
    pos = 0
    for a, b in got:
        assert a == pos and b > a
        pos = b
    assert pos == len(data)
    decoded = data.decode("utf-8", "surrogateescape")
    standin = "".join(_STANDIN if 0xDC80 <= ord(c) <= 0xDCFF else c for c in decoded)
    want = hf_spans(name, standin)
    assert char_spans(data, got) == want, (name, data)


_BYTES = st.lists(st.one_of(st.binary(max_size=3), st.sampled_from(
    [b"\xe2\x82", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xf0\x9f\x98", b"\x80", b"\xff",
     b" ", b"'", b"s", b"1", b"\n", b"ab", "中".encode(), "é".encode()])), max_size=30).map(b"".join)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=_BYTES)
def test_invalid_utf8(lib, name, data):
    _check_bytes(lib, name, data)


def test_none_and_capacity(lib):
    data = "Hello world, 123!".encode()
    assert lib.spans(0, data) == [(0, len(data))]
    assert lib.spans(0, b"") == []
    gid = lib.pre_id("gpt2")
    assert lib.spans(gid, b"") == []
    full = lib.spans(gid, data)
    assert [data[a:b] for a, b in full] == [b"Hello", b" world", b",", b" 123", b"!"]
    # a short buffer gets the first spans and the full count, nothing past cap
    buf = (lib.Span * 4)()
    for i in range(4):
        buf[i].off, buf[i].len = 0xDEAD, 0xBEEF
    n = lib.lib.er_pretokenize(gid, data, len(data), buf, 2)
    assert n == len(full)
    assert [(buf[i].off, buf[i].off + buf[i].len) for i in range(2)] == full[:2]
    assert (buf[2].off, buf[2].len) == (0xDEAD, 0xBEEF)
    # unknown ids do not split
    assert lib.spans(99, data) == [(0, len(data))]
    assert lib.spans(-5, data) == [(0, len(data))]


def test_long_runs_are_linear(lib):
    """Whitespace and digit runs of a megabyte split in well under a second
    (a quadratic matcher would take minutes)."""
    import time
    for name in NAMES:
        pid = lib.pre_id(name)
        for data in (b" " * 1_000_000 + b"x", b"7" * 1_000_000, b"\n " * 500_000, b"'" * 1_000_000):
            t = time.perf_counter()
            n = lib.lib.er_pretokenize(pid, data, len(data), None, 0)
            assert n >= 1
            assert time.perf_counter() - t < 2.0, (name, data[:4])
