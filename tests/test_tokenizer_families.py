"""The tokenizers of the families edge users run (Llama 3.x, Qwen3, Qwen3.5,
Gemma 3, Phi-3.5 / Phi-4-mini, SmolLM2 / SmolLM3, LFM2 / LFM2.5) against
Hugging Face, id for id.

Byte-level BPE: each `tokenizer.ggml.pre` value llama.cpp's
convert_hf_to_gguf.py writes for these families is tested on a real
tokenizer.json (../shared/data/tokenizers/hf) whose pre_tokenizer is set to
what that family's tokenizer.json holds; Hugging Face `tokenizers` running that
file is the reference. The vocabulary-only GGUF is written the way llama.cpp's
converter writes it: no `tokenizer.ggml.normalizer` / `ignore_merges` keys, so
the runtime's defaults for the name are what is tested (and once more with the
keys our converter adds).

Gemma 3: a SentencePiece BPE model trained here with Gemma's settings (no
dummy prefix, whitespace kept, byte fallback, split digits, Gemma's id layout,
user-defined whitespace runs and HTML tags, control turn markers) is loaded
by transformers' GemmaTokenizer, the reference; the GGUF is written both as
llama.cpp's converter writes Gemma files (user-defined pieces with their "▁"
as spaces, `add_space_prefix` false) and by edgerun's converter.

Which pre value each family gets (llama.cpp, convert_hf_to_gguf.py's
get_vocab_base_pre and published files): Llama 3.x `llama-bpe`; Qwen3
`qwen2`; Qwen3.5 `qwen35`; SmolLM2 `smollm`; SmolLM3 `smaug-bpe`; LFM2 and
LFM2.5 `lfm2`; Phi-4-mini `gpt-4o`. Gemma 3 and Phi-3.5-mini are
SentencePiece (`tokenizer.ggml.model` "llama", pre "default", which
SentencePiece files do not use).
"""
import json
import pathlib
import random

import pytest

tokenizers = pytest.importorskip("tokenizers")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402

from edgerun import Tokenizer  # noqa: E402
from edgerun.convert_tokenizer import tokenizer_kv  # noqa: E402
from edgerun.errors import UnsupportedError  # noqa: E402

from test_pretokenize import GPT4O_RE, LLAMA3_RE, QWEN35_RE  # noqa: E402
from test_tokenizer_hf import FUZZ_N, FUZZ_TEXT, HARD, HFRef, corpus  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parent.parent
HF = REPO.parent / "shared" / "data" / "tokenizers" / "hf"
VECTORS = REPO.parent / "shared" / "data" / "tokenizers" / "vectors"

GGUF_NORMAL, GGUF_UNKNOWN, GGUF_CONTROL, GGUF_USER_DEFINED, GGUF_UNUSED, GGUF_BYTE = 1, 2, 3, 4, 5, 6

EXTRA = [
    "HelloWorld camelCase HTTPServer iPhone XMLHttpRequest ÀÉÎõü ǅungla ǈ ǋ",
    "I'M HE'S they'RE we'Ve it'D you'LL ÉCOLE'S don't",
    "naïve café e\u0301te\u0301 \u0915\u094d\u0937\u093f \u0e01\u0e34\u0e19 \u05e9\u05c1\u05b8\u05dc\u05d5\u05b9\u05dd",
    "path/to/file.txt a//b ://x \n/\n/ ?/\n",
    "x = [1, 22, 333, 4444, 55555]\nfor i in range(10):\n\tprint(i)  # ok\n",
    "ʰʲ ˈstress ᵃ ꜰ ǀǁ 々 〻 ー",
    "Ⅻ ⅻ ⑫ ¼ ٣٤ ߁ 𝟙𝟚",
    "    four\n        eight\n\t\ttabs\t\n\n\n\n\n\nsix newlines",
    " " * 33 + "x" + " " * 17 + "y\n" + "\t" * 9,
]


def vector_texts():
    if not VECTORS.is_dir():
        return []
    out = []
    for f in sorted(VECTORS.glob("*.inp")):
        out += f.read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    return out


def texts():
    return HARD + EXTRA + vector_texts()


# ---------------------------------------------------------------- GGUF files


def write_gguf(path, kv):
    import gguf
    from gguf import GGUFValueType as T
    w = gguf.GGUFWriter(str(path), "llama")
    for key, value, vtype in kv:
        if vtype == T.ARRAY:
            w.add_array(key, value)
        else:
            w.add_key_value(key, value, vtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def with_keys(kv, drop=(), **set_):
    """kv with the keys in `drop` removed and string/bool keys in `set_`
    (tokenizer.ggml.<name>, dashes for dots) set."""
    from gguf import GGUFValueType as T
    out = [(k, v, t) for k, v, t in kv if k not in drop]
    for name, value in set_.items():
        key = "tokenizer.ggml." + name
        out = [(k, v, t) for k, v, t in out if k != key]
        out.append((key, value, T.BOOL if isinstance(value, bool) else T.STRING))
    return out


# ---------------------------------------------------------------- BPE families

# family -> (base tokenizer.json, its pre_tokenizer, ignore_merges, NFC, pre value)
# Each pre_tokenizer is what that family's tokenizer.json holds (the byte-level
# step after the regex is ByteLevel(use_regex=False)); ignore_merges and NFC
# are what the runtime assumes for the name when the file is silent, as
# llama.cpp does (Qwen's NFC: the tokenizer.json of Qwen2 and later).
def _split_then_bytes(regex):
    return {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}


BPE_FAMILIES = {
    "llama3.x": ("llama3", _split_then_bytes(LLAMA3_RE), True, False, "llama-bpe"),
    "qwen3": ("qwen3", None, False, True, "qwen2"),
    "qwen3.5": ("qwen3", _split_then_bytes(QWEN35_RE), False, True, "qwen35"),
    "smollm2": ("gpt2", {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
        False, False, "smollm"),
    "smollm3": ("llama3", _split_then_bytes(LLAMA3_RE), False, False, "smaug-bpe"),
    "lfm2": ("llama3", _split_then_bytes(LLAMA3_RE), True, False, "lfm2"),
    "phi4-mini": ("llama3", _split_then_bytes(GPT4O_RE), False, False, "gpt-4o"),
}


class BpeFamily:
    def __init__(self, root, name, explicit_keys):
        base, pre_tok, ignore_merges, nfc, pre = BPE_FAMILIES[name]
        src = HF / base
        if not (src / "tokenizer.json").exists():
            pytest.skip(f"{src} is absent")
        tj = json.loads((src / "tokenizer.json").read_text(encoding="utf-8"))
        # the kv of the unmodified folder: tokens, types, merges, special ids
        kv = tokenizer_kv(src)
        if pre_tok is not None:
            tj["pre_tokenizer"] = pre_tok
        tj["model"]["ignore_merges"] = ignore_merges
        tj["normalizer"] = {"type": "NFC"} if nfc else None
        tj["truncation"] = None
        d = root / f"{name}-{explicit_keys}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "tokenizer.json").write_text(json.dumps(tj), encoding="utf-8")
        self.ref = HFRef(d / "tokenizer.json")
        drop = {"tokenizer.ggml.normalizer", "tokenizer.ggml.ignore_merges"}
        if explicit_keys:
            kv = with_keys(kv, drop, pre=pre, normalizer="nfc" if nfc else "none", ignore_merges=ignore_merges)
        else:
            kv = with_keys(kv, drop, pre=pre)
        self.ours = Tokenizer.from_file(write_gguf(d / "vocab.gguf", kv))
        self.pre = pre


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    root = tmp_path_factory.mktemp("bpe-families")
    cache = {}

    def get(name, explicit_keys=False):
        key = (name, explicit_keys)
        if key not in cache:
            cache[key] = BpeFamily(root, name, explicit_keys)
        return cache[key]

    return get


def first_differences(fam, items, n=3):
    bad = []
    for text in items:
        want = fam.ref.encode(text)
        got = fam.ours.encode(text, add_special=False)
        if got != want:
            bad.append((text[:80], got[:16], want[:16]))
            if len(bad) >= n:
                break
    return bad


@pytest.mark.parametrize("explicit_keys", [False, True], ids=["llamacpp-keys", "edgerun-keys"])
@pytest.mark.parametrize("name", sorted(BPE_FAMILIES))
def test_bpe_family_matches_hf(bpe, name, explicit_keys):
    fam = bpe(name, explicit_keys)
    assert fam.ours.pre != "none"
    items = texts()
    bad = first_differences(fam, items)
    assert not bad, f"{name} ({fam.pre}): {bad}"
    # all of them as one text: pieces at distance, long context
    joined = "\n".join(items)
    assert fam.ours.encode(joined, add_special=False) == fam.ref.encode(joined)
    for text in items[:60]:
        ids = fam.ref.encode(text)
        assert fam.ours.decode(ids) == fam.ref.decode(ids), (name, text)


@pytest.mark.parametrize("name", sorted(BPE_FAMILIES))
def test_bpe_family_fuzz(bpe, name):
    fam = bpe(name)
    bad = []

    @settings(max_examples=FUZZ_N, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(FUZZ_TEXT)
    def run(text):
        want = fam.ref.encode(text)
        if fam.ours.encode(text, add_special=False) != want and len(bad) < 3:
            bad.append((text, want))

    run()
    assert not bad, f"{name} ({fam.pre}): {bad}"


@pytest.mark.parametrize("name", ["llama3.x", "qwen3", "lfm2"])
def test_bpe_family_special_tokens(bpe, name):
    fam = bpe(name)
    specials = {"llama3": "<|begin_of_text|>x<|eot_id|>", "qwen3": "<|im_start|>user\nhi<|im_end|>"}
    text = specials[BPE_FAMILIES[name][0]] + " tail 123"
    for parse in (False, True):
        assert fam.ours.encode(text, add_special=False, parse_special=parse) == \
            fam.ref.encode(text, parse_special=parse)


def test_pre_names_resolve(tmp_path):
    """Each family's pre value opens, and names the splitter it runs."""
    if not (HF / "gpt2").is_dir():
        pytest.skip("gpt2 tokenizer absent")
    want = {"llama-bpe": "llama3", "qwen2": "qwen2", "qwen35": "qwen35", "smollm": "starcoder",
            "smaug-bpe": "llama3", "lfm2": "llama3", "gpt-4o": "gpt-4o"}
    kv = tokenizer_kv(HF / "gpt2")
    for name, canon in want.items():
        tok = Tokenizer.from_file(write_gguf(tmp_path / f"{name}.gguf", with_keys(kv, (), pre=name)))
        assert tok.pre == canon, name


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize("pre", ["no-such-pre", "gemma4", "tekken", "deepseek-v3", "llama4x", "GPT-4O"])
def test_unknown_pre_is_refused_naming_it(tmp_path, pre):
    if not (HF / "gpt2").is_dir():
        pytest.skip("gpt2 tokenizer absent")
    kv = with_keys(tokenizer_kv(HF / "gpt2"), (), pre=pre)
    path = write_gguf(tmp_path / "v.gguf", kv)
    with pytest.raises(UnsupportedError, match=pre.replace(".", r"\.")):
        Tokenizer.from_file(path)


def test_unknown_model_is_refused_naming_it(tmp_path):
    """Gemma 4's own BPE model ("gemma4") is not SentencePiece: refused, not guessed."""
    if not (HF / "gpt2").is_dir():
        pytest.skip("gpt2 tokenizer absent")
    from gguf import GGUFValueType as T
    kv = [(k, v, t) for k, v, t in tokenizer_kv(HF / "gpt2") if k != "tokenizer.ggml.model"]
    kv.append(("tokenizer.ggml.model", "gemma4", T.STRING))
    with pytest.raises(UnsupportedError, match="gemma4"):
        Tokenizer.from_file(write_gguf(tmp_path / "v.gguf", kv))


# ---------------------------------------------------------------- Gemma 3 (SentencePiece)

GEMMA_WS = ["\n" * k for k in range(1, 5)] + ["\t" * k for k in range(1, 4)] + ["▁" * k for k in range(2, 9)]
GEMMA_HTML = ["<table>", "</table>", "<tr>", "</tr>", "<td>", "</td>", "<h1>", "</h1>", "<p>", "</p>", "<br>"]


def train_gemma_like(out_dir):
    """A SentencePiece BPE model with Gemma's normalizer and trainer settings,
    its id layout (<pad> 0, <eos> 1, <bos> 2, <unk> 3, <mask> 4) and kinds of
    user-defined pieces; plus the tokenizer_config.json of a Gemma folder."""
    import sentencepiece as spm
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(7)
    code = ["def f(x):\n    return x + 1\n", "if a:\n\tb()\n\t\tc()\n", "<table><tr><td>x</td></tr></table>",
            "  two  spaces   three    four", "<h1>Title</h1>\n\n<p>para</p><br>", "日本語のテキスト 😀 naïve"]
    lines = corpus(3) + [rng.choice(code) for _ in range(600)]
    (out_dir / "corpus.txt").write_text("\n".join(lines), encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(out_dir / "corpus.txt"), model_prefix=str(out_dir / "tokenizer"), model_type="bpe",
        vocab_size=1400, hard_vocab_limit=False, byte_fallback=True, normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=False, split_digits=True,
        allow_whitespace_only_pieces=True, character_coverage=0.9995,
        pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>", eos_piece="<eos>", bos_piece="<bos>",
        unk_piece="<unk>", control_symbols=["<mask>", "<start_of_turn>", "<end_of_turn>"],
        user_defined_symbols=GEMMA_WS + GEMMA_HTML, minloglevel=2)
    (out_dir / "tokenizer.model.vocab").unlink(missing_ok=True)
    (out_dir / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "GemmaTokenizer", "add_bos_token": True, "add_eos_token": False,
        "bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>",
        "mask_token": "<mask>"}), encoding="utf-8")
    return out_dir


def llamacpp_spm_kv(hf_dir, hf_tok):
    """The tokenizer keys llama.cpp's converter writes for a Gemma 3 folder
    (Gemma3Model.set_vocab: _set_vocab_sentencepiece, then add_space_prefix
    false): piece types from the SentencePiece model, then each added token of
    the folder typed CONTROL when special (or when it looks special: <pad>,
    <mask>, <|...|>, <unused...>), otherwise USER_DEFINED with its "▁" written
    as spaces; scores -1000 for added tokens."""
    import sentencepiece as spm
    from gguf import GGUFValueType as T
    sp = spm.SentencePieceProcessor(model_file=str(hf_dir / "tokenizer.model"))
    n = sp.vocab_size()
    tokens, scores, types = [], [], []
    for i in range(n):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        t = GGUF_NORMAL
        if sp.is_unknown(i):
            t = GGUF_UNKNOWN
        elif sp.is_control(i):
            t = GGUF_CONTROL
        elif sp.is_unused(i):
            t = GGUF_UNUSED
        elif sp.is_byte(i):
            t = GGUF_BYTE
        types.append(t)
    for a in json.loads(hf_tok.backend_tokenizer.to_str())["added_tokens"]:
        i, text = a["id"], a["content"]
        looks = text in ("<pad>", "<mask>", "<2mass>", "[@BOS@]") or (text.startswith("<|") and text.endswith("|>")) \
            or (text.startswith("<unused") and text.endswith(">"))
        if a["special"] or looks:
            types[i] = GGUF_CONTROL
        else:
            text = text.replace("\u2581", " ")
            types[i] = GGUF_USER_DEFINED
        tokens[i], scores[i] = text, -1000.0
    return [
        ("tokenizer.ggml.model", "llama", T.STRING),
        ("tokenizer.ggml.pre", "default", T.STRING),
        ("tokenizer.ggml.tokens", tokens, T.ARRAY),
        ("tokenizer.ggml.scores", scores, T.ARRAY),
        ("tokenizer.ggml.token_type", types, T.ARRAY),
        ("tokenizer.ggml.bos_token_id", 2, T.UINT32),
        ("tokenizer.ggml.eos_token_id", 1, T.UINT32),
        ("tokenizer.ggml.unknown_token_id", 3, T.UINT32),
        ("tokenizer.ggml.padding_token_id", 0, T.UINT32),
        ("tokenizer.ggml.add_bos_token", True, T.BOOL),
        ("tokenizer.ggml.add_eos_token", False, T.BOOL),
        ("tokenizer.ggml.add_space_prefix", False, T.BOOL),
    ]


class TfRef:
    """transformers' tokenizer for a folder; its backend (the tokenizers
    object the class builds) with special-token parsing switched like ours."""

    def __init__(self, hf_dir):
        transformers = pytest.importorskip("transformers")
        pytest.importorskip("google.protobuf")  # transformers reads tokenizer.model with it
        self.tf = transformers.AutoTokenizer.from_pretrained(str(hf_dir))
        self.tok = self.tf.backend_tokenizer

    def encode(self, text, add_special=False, parse_special=False):
        self.tok.encode_special_tokens = not parse_special
        return self.tok.encode(text, add_special_tokens=add_special).ids

    def decode(self, ids, skip_special=False):
        return self.tok.decode(ids, skip_special_tokens=skip_special)


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    pytest.importorskip("sentencepiece")
    root = tmp_path_factory.mktemp("gemma")
    hf_dir = train_gemma_like(root / "hf")
    ref = TfRef(hf_dir)
    assert type(ref.tf).__name__ == "GemmaTokenizer"
    from edgerun.convert_tokenizer import write_vocab_gguf
    files = {"llamacpp": write_gguf(root / "llamacpp.gguf", llamacpp_spm_kv(hf_dir, ref.tf)),
             "edgerun": write_vocab_gguf(hf_dir, root / "edgerun.gguf")}
    return ref, {k: Tokenizer.from_file(p) for k, p in files.items()}


GEMMA_TEXTS = [
    "hello world", " leading space", "no  dummy   prefix", "a" + " " * 9 + "b", "x" + " " * 20,
    "tab\tnew\nline\n\n\n\n\nfive", "\t\t\t\t\tdeep", "<table><tr><td>cell</td></tr></table>",
    "<h1>Title</h1>\n\n<p>para</p><br>", "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n",
    "literal ▁▁ marks ▁ and ▁▁▁▁▁▁▁▁▁ nine", "digits 1234567 split", "emoji 😀🤖 and 中文字符 ॐ",
    "def f(x):\n    return x + 1\n\n\nclass A:\n        pass\n", "<mask><pad><bos><eos><unk>",
] + [" " * k + "w" + " " * k for k in range(1, 41)] + ["\n" * k + "w" for k in range(1, 10)]


@pytest.mark.parametrize("flavour", ["llamacpp", "edgerun"])
def test_gemma_spm_matches_transformers(gemma, flavour):
    ref, ours = gemma[0], gemma[1][flavour]
    bad = []
    for text in GEMMA_TEXTS + texts():
        for parse in (False, True):
            want = ref.encode(text, parse_special=parse)
            got = ours.encode(text, add_special=False, parse_special=parse)
            if got != want and len(bad) < 3:
                bad.append((text[:60], parse, got[:20], want[:20]))
    assert not bad, f"{flavour}: {bad}"
    for text in GEMMA_TEXTS + HARD:
        ids = ref.encode(text)
        assert ours.decode(ids) == ref.decode(ids), (flavour, text)
        assert ours.decode(ids, skip_special=True) == ref.decode(ids, skip_special=True), (flavour, text)
    assert ours.encode("hi", add_special=True) == ref.encode("hi", add_special=True)
    assert ours.bos == 2 and ours.eos == 1


@pytest.mark.parametrize("flavour", ["llamacpp", "edgerun"])
def test_gemma_spm_fuzz(gemma, flavour):
    ref, ours = gemma[0], gemma[1][flavour]
    bad = []
    ws = hypothesis.strategies.sampled_from([" " * k for k in range(1, 12)] + ["\n\n", "\t", "▁", "<td>", "<p>"])

    @settings(max_examples=FUZZ_N, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(hypothesis.strategies.lists(hypothesis.strategies.one_of(FUZZ_TEXT, ws), max_size=6).map("".join))
    def run(text):
        want = ref.encode(text)
        if ours.encode(text, add_special=False) != want and len(bad) < 3:
            bad.append((text, want))

    run()
    assert not bad, f"{flavour}: {bad}"


# ---------------------------------------------------------------- added tokens that strip whitespace

STRIP_TEXTS = [
    "<|user|>\nHello<|end|>\n<|assistant|>\n", "<|user|>  \t\n  spaced <|end|>   \n\n<|assistant|>",
    "a <|end|> b", "x   <|lft|>   y", "<|lft|>", "   <|lft|>", "<|both|>", " \u3000\u00a0<|both|>\u2029\u0085 z",
    "<|sep|>  after", "before  <|sep|>", "<|user|><|end|><|assistant|>", "<|lft|><|lft|>  <|both|>  <|both|>",
    "nothing special here", "<|end|>" + " " * 40 + "tail", "\n\n<|lft|>\n\n<|both|>\n\n",
]


@pytest.fixture(scope="module")
def stripping(tmp_path_factory):
    """Phi-3's chat tokens are rstrip=true in its tokenizer.json (and </s> is a
    non-special rstrip token); lstrip exists too. A real tokenizer.json with
    such added tokens (<|sep|> plays </s>) is the reference; the GGUF names them in
    tokenizer.ggml.lstrip_token_ids / rstrip_token_ids."""
    from gguf import GGUFValueType as T
    from tokenizers import AddedToken
    src = HF / "qwen3"
    if not (src / "tokenizer.json").exists():
        pytest.skip(f"{src} is absent")
    root = tmp_path_factory.mktemp("strip")
    tok = tokenizers.Tokenizer.from_file(str(src / "tokenizer.json"))
    tok.add_special_tokens([AddedToken("<|user|>", rstrip=True, normalized=False),
                            AddedToken("<|end|>", rstrip=True, normalized=False),
                            AddedToken("<|assistant|>", rstrip=True, normalized=False),
                            AddedToken("<|lft|>", lstrip=True, normalized=False),
                            AddedToken("<|both|>", lstrip=True, rstrip=True, normalized=False)])
    tok.add_tokens([AddedToken("<|sep|>", rstrip=True, normalized=False, special=False)])
    d = root / "hf"
    d.mkdir()
    tok.save(str(d / "tokenizer.json"))
    kv = tokenizer_kv(d)
    ids = {t: tok.token_to_id(t) for t in ("<|user|>", "<|end|>", "<|assistant|>", "<|lft|>", "<|both|>", "<|sep|>")}
    kv += [("tokenizer.ggml.lstrip_token_ids", [ids["<|lft|>"], ids["<|both|>"]], T.ARRAY),
           ("tokenizer.ggml.rstrip_token_ids", [ids[t] for t in ("<|user|>", "<|end|>", "<|assistant|>", "<|both|>",
                                                                 "<|sep|>")], T.ARRAY)]
    return HFRef(d / "tokenizer.json"), Tokenizer.from_file(write_gguf(root / "strip.gguf", kv)), kv


def test_added_tokens_strip_whitespace_as_hf(stripping):
    ref, ours, _ = stripping
    for text in STRIP_TEXTS:
        for parse in (False, True):
            assert ours.encode(text, add_special=False, parse_special=parse) == \
                ref.encode(text, parse_special=parse), (text, parse)


def test_strip_ids_must_name_added_tokens(stripping, tmp_path):
    from gguf import GGUFValueType as T
    from edgerun.errors import CorruptModelError
    kv = [(k, v, t) for k, v, t in stripping[2] if k != "tokenizer.ggml.rstrip_token_ids"]
    for bad in ([9906], [10 ** 7]):  # "Hello", a normal piece; past the vocabulary
        path = write_gguf(tmp_path / f"bad{bad[0]}.gguf", kv + [("tokenizer.ggml.rstrip_token_ids", bad, T.ARRAY)])
        with pytest.raises(CorruptModelError, match="rstrip_token_ids"):
            Tokenizer.from_file(path)
