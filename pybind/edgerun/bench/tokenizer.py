"""Tokenizer throughput: edgerun beside Hugging Face `tokenizers`, tiktoken and
sentencepiece, single-threaded, on the same generated text.

    from edgerun.bench import tokenizer as bench_tokenizer
    report = bench_tokenizer.run(mb=10)          # dict, see below
    print(bench_tokenizer.format_table(report))

The corpus is generated from a seed (nothing is downloaded): English-like
prose, source code, numbers, Chinese/Japanese/Korean, Arabic and Hebrew,
Cyrillic/Greek/accented Latin, emoji (with ZWJ sequences, flags, skin tones)
and runs of spaces, tabs and newlines, cut into documents of 1-4 KB. Every
engine encodes every document with one call (no special tokens added or
parsed), so a Python-level per-call cost counts against the engine that has
it: that is how a caller sees it. The "edgerun C" column times er_tokenize
through cffi with buffers allocated once and no Python list built: the C
encoder's own speed plus well under a microsecond of call cost per document.

Families, from the real tokenizers in a data folder (``../shared/data/
tokenizers/hf`` in a source checkout): gpt2, llama3 and qwen3 (tokenizer.json,
byte-level BPE) and llama2 (tokenizer.model, SentencePiece BPE). Each is
converted to a vocabulary-only GGUF with edgerun.convert.tokenizer. A family
whose files are absent is skipped and listed under "skipped".

Exactness comes first: edgerun's ids must equal the reference's on every
document (Hugging Face for byte-level BPE, sentencepiece for llama2, whose
fast tokenizer is itself a conversion); tiktoken's must equal Hugging Face's
before its time is reported. Speed is the best of `repeat` passes over the
whole corpus, engines interleaved within each pass so that machine noise hits
them alike. Hugging Face keeps a word cache across calls; it is warm after
the first pass, as it is in a long-running process.

Single-threaded means one core: RAYON_RS_NUM_CPUS=1 and
TOKENIZERS_PARALLELISM=false are set before `tokenizers` is first used, and
only per-document encode() is called (encode_batch is the parallel path);
each engine's process CPU time over wall time is reported to show it.
"""
from __future__ import annotations

import os
import pathlib
import platform
import random
import tempfile
import time

# Must precede the first parallel use of tokenizers' rayon pool (import is fine).
os.environ.setdefault("RAYON_RS_NUM_CPUS", "1")
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

FAMILIES = ("gpt2", "llama3", "qwen3", "llama2")
ALIASES = {"qwen2": "qwen3", "gpt-2": "gpt2", "llama-bpe": "llama3", "llama-spm": "llama2"}

# Targets of issue 3: edgerun at least 2x Hugging Face and at least tiktoken.
TARGET_VS_HF = 2.0
TARGET_VS_TIKTOKEN = 1.0

# GPT-2's pre-tokenizer as a regular expression (the split HF's ByteLevel uses).
GPT2_PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def default_data_dir() -> pathlib.Path:
    """Where the real tokenizers are: $EDGERUN_TOKENIZER_DATA, else the
    source checkout's ../shared/data/tokenizers/hf."""
    env = os.environ.get("EDGERUN_TOKENIZER_DATA")
    if env:
        return pathlib.Path(env)
    repo = pathlib.Path(__file__).resolve().parents[3]
    return repo.parent / "shared" / "data" / "tokenizers" / "hf"


def parse_families(text) -> list[str]:
    """'gpt2,qwen2 llama2' -> ['gpt2', 'qwen3', 'llama2'] (aliases resolved, order kept)."""
    if text is None:
        return list(FAMILIES)
    items = text if isinstance(text, (list, tuple)) else [text]
    out = []
    for item in items:
        for name in str(item).replace(",", " ").split():
            name = ALIASES.get(name.lower(), name.lower())
            if name not in FAMILIES:
                raise ValueError(f"unknown tokenizer family {name!r}; choose from "
                                 f"{', '.join(FAMILIES)} (qwen2 = qwen3)")
            if name not in out:
                out.append(name)
    if not out:
        raise ValueError("--families names no family")
    return out


# ---------------------------------------------------------------- corpus

_WORDS = (
    "the of and to a in is that it for was on are as with his they be at one have this from or had by "
    "not word but what some we can out other were all there when up use your how said an each she which "
    "do their time if will way about many then them write would like so these her long make thing see "
    "him two has look more day could go come did number sound no most people my over know water than "
    "call first who may down side been now find any new work part take get place made live where after "
    "back little only round man year came show every good me give our under name very through just form "
    "sentence great think say help low line differ turn cause much mean before move right boy old too "
    "same tell does set three want air well also play small end put home read hand port large spell add "
    "even land here must big high such follow act why ask men change went light kind off need house "
    "picture try us again animal point mother world near build self earth father head stand own page "
    "should country found answer school grow study still learn plant cover food sun four between state "
    "keep eye never last let thought city tree cross farm hard start might story saw far sea draw left "
    "late run while press close night real life few north open seem together next white children begin "
    "got walk example ease paper group always music those both mark often letter until mile river car "
    "feet care second book carry took science eat room friend began idea fish mountain stop once base "
    "hear horse cut sure watch color face wood main enough plain girl usual young ready above ever red "
    "list though feel talk bird soon body dog family direct pose leave song measure door product black "
    "short numeral class wind question happen complete ship area half rock order fire south problem "
    "piece told knew pass since top whole king space heard best hour better true during hundred five "
    "remember step early hold west ground interest reach fast verb sing listen six table travel less "
    "morning ten simple several vowel toward war lay against pattern slow center love person money serve "
    "appear road map rain rule govern pull cold notice voice unit power town fine certain fly fall lead "
    "cry dark machine note wait plan figure star box noun field rest correct able pound done beauty drive "
    "stood contain front teach week final gave green oh quick develop ocean warm free minute strong "
    "special mind behind clear tail produce fact street inch multiply nothing course stay wheel full "
    "force blue object decide surface deep moon island foot system busy test record boat common gold "
    "possible plane stead dry wonder laugh thousand ago ran check game shape equate hot miss brought "
    "heat snow tire bring yes distant fill east paint language among tokenizer runtime kernel quantized "
    "inference embedding transformer attention gradient throughput latency benchmark"
).split()
_CONTRACTIONS = ("don't", "it's", "we'll", "I'm", "you're", "they've", "she'd", "can't", "won't", "isn't",
                 "I'VE", "He's", "that'll", "We'RE", "o'clock", "rock'n'roll")
_NAMES = ("Alice", "Bob", "McDonald", "O'Neill", "iPhone", "GitHub", "NASA", "Zürich", "São Paulo",
          "Kraków", "Dvořák", "Ångström", "naïve", "café", "façade", "résumé", "Straße", "fiancée")
_OTHER_SCRIPTS = ("Привет, как дела? Это тестовый текст.", "Съешь же ещё этих мягких французских булок.",
                  "Καλημέρα κόσμε, τι κάνεις;", "Ελληνικά γράμματα και λέξεις.", "Tiếng Việt có dấu rất nhiều.",
                  "Türkçe metin: çok güzel şeyler.", "Język polski: zażółć gęślą jaźń.",
                  "हिन्दी में कुछ शब्द लिखे गए हैं।", "ภาษาไทยไม่มีช่องว่างระหว่างคำ", "ქართული ენა", "Հայերեն լեզու")
_CHINESE = ("的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而"
            "能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些"
            "与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相"
            "次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立"
            "马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共"
            "风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快")
_KANA = "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをんアイウエオカキクケコサシスセソタチツテトナニヌネノ"
_HANGUL = ("안녕하세요 반갑습니다 오늘 날씨가 좋네요 한국어 텍스트 토크나이저 시험 문장입니다 "
           "우리는 빠르고 정확한 런타임을 만듭니다").split()
_ARABIC = ("مرحبا بالعالم هذا نص عربي للاختبار السريع والدقيق في كل مكان اللغة العربية جميلة جدا "
           "كتاب قلم مدرسة طالب معلم بيت شمس قمر").split()
_ARABIC_MARKS = ("\u064e", "\u064f", "\u0650", "\u0651", "\u0652")
_HEBREW = ("שלום עולם זה טקסט בעברית לבדיקה מהירה ומדויקת של המערכת ספר בית ילד ים שמש ירח").split()
_EMOJI = ("😀", "😂", "🥲", "😍", "🤖", "🚀", "🔥", "✨", "👍", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵",
          "🇺🇸", "❤️", "✅", "⚡", "🎉", "🙏🏿", "🧑🏻‍🚀", "☕", "🌍", "📦", "🐍", "🦀")
_PUNCT_END = (".", ".", ".", "!", "?", "...", ";", ":", ".\"", "?!")
_CODE_KEYWORDS = ("def", "return", "if", "else", "for", "while", "import", "from", "class", "static",
                  "const", "int", "float", "char", "void", "let", "fn", "struct", "self", "None", "null",
                  "true", "false", "async", "await", "yield", "lambda", "switch", "case", "break")
_CODE_OPS = (" = ", " == ", " != ", " += ", " -> ", " => ", " && ", " || ", " <= ", " >= ", " + ", " * ",
             " / ", " % ", " << ", "::", ".", ", ", ": ")


def _ident(rng):
    a, b = rng.choice(_WORDS), rng.choice(_WORDS)
    style = rng.random()
    if style < 0.4:
        return f"{a}_{b}"
    if style < 0.7:
        return a + b.capitalize()
    if style < 0.8:
        return f"{a.upper()}_{b.upper()}"
    return a + str(rng.randrange(10))


def _prose(rng):
    out = []
    for _ in range(rng.randint(1, 4)):
        n = rng.randint(4, 22)
        words = rng.choices(_WORDS, weights=_ZIPF, k=n)
        for i in range(n):
            r = rng.random()
            if r < 0.05:
                words[i] = rng.choice(_CONTRACTIONS)
            elif r < 0.08:
                words[i] = rng.choice(_NAMES)
            elif r < 0.10:
                words[i] = f"{words[i]},"
            elif r < 0.11:
                words[i] = f'"{words[i]}"'
            elif r < 0.12:
                words[i] = f"({words[i]})"
            elif r < 0.13:
                words[i] = f"{words[i]}-{rng.choice(_WORDS)}"
        words[0] = words[0][:1].upper() + words[0][1:]
        out.append(" ".join(words) + rng.choice(_PUNCT_END))
    return " ".join(out) + rng.choice((" ", " ", "\n", "\n\n"))


def _code(rng):
    lines = []
    indent = 0
    for _ in range(rng.randint(3, 12)):
        pad = rng.choice(("    ", "  ", "\t")) * indent
        r = rng.random()
        if r < 0.25:
            line = f"{rng.choice(_CODE_KEYWORDS)} {_ident(rng)}({_ident(rng)}, {_ident(rng)}):"
            indent = min(indent + 1, 4)
        elif r < 0.55:
            line = f"{_ident(rng)}{rng.choice(_CODE_OPS)}{_ident(rng)}[{rng.randrange(256)}]" \
                   f"{rng.choice(_CODE_OPS)}{rng.randrange(100000)};"
        elif r < 0.7:
            line = f'printf("{rng.choice(_WORDS)} %d\\n", {_ident(rng)}->{_ident(rng)});'
        elif r < 0.8:
            line = f"# {rng.choice(_WORDS)} {rng.choice(_WORDS)}: TODO({rng.choice(_NAMES)}) fix {_ident(rng)}"
        elif r < 0.9:
            line = f"{{ \"{_ident(rng)}\": [{rng.randrange(99)}, {rng.random():.4f}, null], \"ok\": true }},"
            indent = max(indent - 1, 0)
        else:
            line = "}" if rng.random() < 0.5 else ""
            indent = max(indent - 1, 0)
        lines.append(pad + line + (" " * rng.randint(1, 3) if rng.random() < 0.05 else ""))
    return "\n".join(lines) + "\n"


def _numbers(rng):
    parts = []
    for _ in range(rng.randint(2, 8)):
        r = rng.random()
        if r < 0.2:
            parts.append(str(rng.randrange(10 ** rng.randint(1, 12))))
        elif r < 0.35:
            parts.append(f"{rng.uniform(-1000, 1000):.{rng.randint(1, 6)}f}")
        elif r < 0.5:
            parts.append(f"{rng.randint(1900, 2099)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}")
        elif r < 0.6:
            parts.append(f"${rng.randrange(10 ** 7):,}.{rng.randrange(100):02d}")
        elif r < 0.7:
            parts.append(f"{rng.randrange(100)}%")
        elif r < 0.8:
            parts.append(f"0x{rng.randrange(1 << 32):08X}")
        elif r < 0.9:
            parts.append(f"+1 ({rng.randrange(200, 999)}) {rng.randrange(100, 999)}-{rng.randrange(1000, 9999)}")
        else:
            parts.append(f"v{rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 99)}")
    return " ".join(parts) + rng.choice((" ", "\n"))


def _cjk(rng):
    r = rng.random()
    if r < 0.5:
        s = "".join(rng.choices(_CHINESE, k=rng.randint(8, 60)))
        cut = rng.randrange(1, len(s))
        return s[:cut] + "，" + s[cut:] + rng.choice("。！？") + rng.choice(("", " ", "\n"))
    if r < 0.8:
        s = "".join(rng.choice(_KANA) if rng.random() < 0.6 else rng.choice(_CHINESE)
                    for _ in range(rng.randint(8, 40)))
        return s + "。" + rng.choice(("", "\n"))
    return " ".join(rng.choices(_HANGUL, k=rng.randint(3, 10))) + ". "


def _rtl(rng):
    if rng.random() < 0.6:
        words = rng.choices(_ARABIC, k=rng.randint(3, 14))
        if rng.random() < 0.3:
            i = rng.randrange(len(words))
            words[i] = words[i][:1] + rng.choice(_ARABIC_MARKS) + words[i][1:]
        return " ".join(words) + rng.choice((".", "،", "؟")) + " "
    return " ".join(rng.choices(_HEBREW, k=rng.randint(3, 14))) + ". "


def _emoji(rng):
    return " ".join("".join(rng.choices(_EMOJI, k=rng.randint(1, 3))) for _ in range(rng.randint(1, 4))) + " "


def _whitespace(rng):
    runs = ("  ", "    ", "        ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", " \n", "\u00a0", "   \n  ")
    return "".join(rng.choices(runs, k=rng.randint(1, 4)))


def _other(rng):
    return rng.choice(_OTHER_SCRIPTS) + " "


_ZIPF = [1.0 / (i + 8) for i in range(len(_WORDS))]
# (generator, weight): roughly the mix of a multilingual web/code crawl.
_SEGMENTS = ((_prose, 42), (_code, 18), (_numbers, 8), (_cjk, 10), (_rtl, 6), (_other, 5),
             (_emoji, 4), (_whitespace, 7))


def make_corpus(mb: float = 10.0, seed: int = 1234, doc_min: int = 1024, doc_max: int = 4096) -> list[str]:
    """Documents of doc_min..doc_max UTF-8 bytes (a segment may overrun the
    target a little) totalling at least mb * 10^6 bytes; the same seed gives
    the same text on every Python 3."""
    if mb <= 0:
        raise ValueError("--mb must be positive")
    rng = random.Random(seed)
    gens = [g for g, _ in _SEGMENTS]
    weights = [w for _, w in _SEGMENTS]
    target = int(mb * 1e6)
    docs, total = [], 0
    while total < target:
        want = rng.randint(doc_min, doc_max)
        parts, n = [], 0
        while n < want:
            s = rng.choices(gens, weights)[0](rng)
            parts.append(s)
            n += len(s.encode("utf-8"))
        doc = "".join(parts)
        docs.append(doc)
        total += len(doc.encode("utf-8"))
    return docs


# ---------------------------------------------------------------- references


def hf_tokenizer(path):
    import tokenizers
    tok = tokenizers.Tokenizer.from_file(str(path))
    tok.no_truncation()
    tok.no_padding()
    return tok


def hf_from_sentencepiece(model_path):
    """Hugging Face's fast tokenizer for a SentencePiece BPE model, built the
    way transformers' Llama converter builds it (vocabulary and scores from
    the model, merges ordered by the merged piece's score, byte fallback,
    "▁" prepended and spaces replaced); that converter itself needs protobuf,
    which this benchmark does not require. sentencepiece stays the reference
    for exactness; the report counts where this tokenizer differs from it."""
    from tokenizers import AddedToken, Tokenizer, models, normalizers

    from ..convert.tokenizer import NORMAL, read_sentencepiece
    sp = read_sentencepiece(model_path)
    pieces = sp["pieces"]
    vocab = {p["piece"]: i for i, p in enumerate(pieces)}
    merges = []
    for i, p in enumerate(pieces):
        if p["type"] != NORMAL:
            continue
        s = p["piece"]
        for k in range(1, len(s)):
            a, b = s[:k], s[k:]
            ia, ib = vocab.get(a), vocab.get(b)
            if ia is not None and ib is not None and pieces[ia]["type"] == NORMAL and pieces[ib]["type"] == NORMAL:
                merges.append((-p["score"], i, ia, ib, a, b))
    merges.sort()
    unk = pieces[sp["unk_id"]]["piece"] if 0 <= sp["unk_id"] < len(pieces) else None
    tok = Tokenizer(models.BPE(vocab, [(m[4], m[5]) for m in merges], unk_token=unk, fuse_unk=True,
                               byte_fallback=sp["byte_fallback"]))
    norm = [normalizers.Replace(" ", "\u2581")]
    if sp["add_dummy_prefix"]:
        norm.insert(0, normalizers.Prepend("\u2581"))
    tok.normalizer = normalizers.Sequence(norm)
    specials = [pieces[i]["piece"] for i in (sp["unk_id"], sp["bos_id"], sp["eos_id"]) if 0 <= i < len(pieces)]
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    return tok


def _bytes_to_unicode():
    """GPT-2's printable stand-ins for the 256 byte values (the byte map its
    vocabulary is written in): printable Latin-1 bytes stand for themselves,
    the rest take code points from 256 upward in byte order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def tiktoken_gpt2(tokenizer_json):
    """A tiktoken Encoding for GPT-2 built offline from its tokenizer.json:
    GPT-2's ids are its merge order (bytes first, then one id per merge), so
    id = rank, which is what tiktoken's mergeable_ranks expects."""
    import json

    import tiktoken
    tj = json.loads(pathlib.Path(tokenizer_json).read_text(encoding="utf-8"))
    inv = {c: b for b, c in _bytes_to_unicode().items()}
    ranks = {}
    for text, i in tj["model"]["vocab"].items():
        ranks[bytes(inv[c] for c in text)] = i
    specials = {a["content"]: a["id"] for a in tj.get("added_tokens", []) if a["content"] not in tj["model"]["vocab"]}
    specials.setdefault("<|endoftext|>", 50256)
    for name in specials:
        ranks.pop(name.encode("utf-8"), None)
    return tiktoken.Encoding(name="gpt2-offline", pat_str=GPT2_PAT, mergeable_ranks=ranks, special_tokens=specials)


# ---------------------------------------------------------------- engines


class _RawEdgerun:
    """er_tokenize through cffi with buffers made once, documents pre-encoded
    to UTF-8 and ids left in C memory: the C encoder's speed plus the bare
    cost of a cffi call."""

    def __init__(self, tok, docs_bytes):
        from .._ffi import ffi, lib
        self.lib, self.v = lib, tok._vocab()
        longest = max((len(d) for d in docs_bytes), default=1)
        self.scratch_n = lib.er_tokenize_scratch_bytes(self.v, longest)
        alloc = ffi.new_allocator(should_clear_after_alloc=False)
        self.scratch = alloc("char[]", self.scratch_n)
        self.cap = longest + 8
        self.ids = alloc("int32_t[]", self.cap)
        self.n_out = ffi.new("size_t *")

    def run(self, docs_bytes):
        lib, v, ids, cap, n_out, sc, scn = self.lib, self.v, self.ids, self.cap, self.n_out, self.scratch, \
            self.scratch_n
        total = 0
        for d in docs_bytes:
            if lib.er_tokenize(v, d, len(d), 0, ids, cap, n_out, sc, scn) != 0:
                raise RuntimeError("er_tokenize failed in the benchmark")
            total += n_out[0]
        return total


def _engines(family, src, gguf_dir):
    """[(engine name, encode(doc) -> ids)], the reference engine's name, the
    edgerun Tokenizer and notes. A peer whose package is missing is left out
    with a note saying so."""
    from ..convert.tokenizer import write_vocab_gguf
    from ..tokenizer import Tokenizer
    out, notes = [], []
    gguf = write_vocab_gguf(src, gguf_dir / f"{family}.gguf")
    er = Tokenizer.from_file(gguf)
    out.append(("edgerun", lambda d, _e=er.encode: _e(d, add_special=False, parse_special=False)))
    try:
        if family == "llama2":
            hf = hf_from_sentencepiece(src / "tokenizer.model")
        else:
            hf = hf_tokenizer(src / "tokenizer.json")
        out.append(("hf", lambda d, _e=hf.encode: _e(d, add_special_tokens=False).ids))
    except ImportError:
        notes.append("tokenizers is not installed: no Hugging Face column")
    if family == "gpt2":
        try:
            enc = tiktoken_gpt2(src / "tokenizer.json")
            out.append(("tiktoken", enc.encode_ordinary))
        except ImportError:
            notes.append("tiktoken is not installed (pip install tiktoken): no tiktoken column")
    if family == "llama2":
        try:
            import sentencepiece as spm
            sp = spm.SentencePieceProcessor(model_file=str(src / "tokenizer.model"))
            out.append(("sentencepiece", sp.encode))
        except ImportError:
            notes.append("sentencepiece is not installed: llama2 exactness is checked against HF only")
    names = [n for n, _ in out]
    ref = "sentencepiece" if "sentencepiece" in names else ("hf" if "hf" in names else None)
    if ref is None:
        notes.append("no reference tokenizer installed: exactness unchecked, reported as not exact")
    return out, ref, er, notes


def _first_diff(a, b):
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return k
    return min(len(a), len(b))


def _compare(ids, ref_ids, docs):
    """Mismatching documents, with where the first one goes wrong."""
    bad = [i for i, (a, b) in enumerate(zip(ids, ref_ids)) if a != b]
    res = {"mismatched_docs": len(bad)}
    if bad:
        i = bad[0]
        k = _first_diff(ids[i], ref_ids[i])
        res["first"] = {"doc": i, "token": k, "got": ids[i][max(0, k - 2):k + 3],
                        "want": ref_ids[i][max(0, k - 2):k + 3], "doc_head": docs[i][:120]}
    return res


def _n_threads():
    """OS threads in this process now (Linux); None elsewhere. A rayon pool
    started behind our back would show up here."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


def _time_pass(fn, docs):
    t0, c0 = time.perf_counter(), time.process_time()
    out = [fn(d) for d in docs]
    return time.perf_counter() - t0, time.process_time() - c0, out


class _Best:
    """Best wall time and best CPU time over the passes of one engine. CPU
    time (this process only) is the figure to trust on a shared machine:
    being preempted stretches wall time, not CPU time."""

    def __init__(self):
        self.wall = self.cpu = float("inf")
        self.ratio = 0.0       # CPU / wall of the fastest wall-clock pass

    def add(self, wall, cpu):
        if wall < self.wall:
            self.wall, self.ratio = wall, (cpu / wall if wall > 0 else 0.0)
        self.cpu = min(self.cpu, cpu)


def bench_family(family, src, docs, docs_bytes, n_bytes, repeat, gguf_dir, raw_c=True, log=None):
    engines, ref, er_tok, notes = _engines(family, src, gguf_dir)
    # Counted after the set-up (numpy's BLAS pool arrives with the GGUF writer):
    # an engine that adds threads while encoding shows up against this.
    threads_before = _n_threads()
    raw = _RawEdgerun(er_tok, docs_bytes) if raw_c else None
    best = {n: _Best() for n, _ in engines}
    if raw:
        best["edgerun_c"] = _Best()
    ntok, exact, threads = {}, {}, {}
    for _, fn in engines:
        for d in docs[:32]:
            fn(d)
    ref_ids = None
    for r in range(repeat):
        # The reference runs first in the first pass so that everything after it is compared on the fly.
        order = sorted(engines, key=lambda e: e[0] != ref) if r == 0 else engines
        for name, fn in order:
            wall, c, out = _time_pass(fn, docs)
            if r == 0:
                ntok[name] = sum(len(x) for x in out)
                if name == ref:
                    ref_ids = out
                elif ref_ids is not None:
                    exact[name] = _compare(out, ref_ids, docs)
                if name == "hf" and ref == "sentencepiece":
                    exact["hf"]["note"] = "Hugging Face's converted fast tokenizer against sentencepiece"
            best[name].add(wall, c)
            threads[name] = _n_threads()
            del out
        if raw:
            t0, c0 = time.perf_counter(), time.process_time()
            n = raw.run(docs_bytes)
            best["edgerun_c"].add(time.perf_counter() - t0, time.process_time() - c0)
            if r == 0 and "edgerun" in ntok and n != ntok["edgerun"]:
                raise RuntimeError(f"{family}: er_tokenize gave {n} ids, the Python API {ntok['edgerun']}")
            threads["edgerun_c"] = _n_threads()
        if log:
            log(f"  {family} pass {r + 1}/{repeat}: " + ", ".join(
                f"{n} {n_bytes / b.wall / 1e6:.1f} MB/s ({n_bytes / b.cpu / 1e6:.1f} per CPU s)"
                for n, b in best.items()))
    del ref_ids
    rows = {n: {"seconds": round(b.wall, 4), "cpu_seconds": round(b.cpu, 4), "mb_per_s": n_bytes / b.wall / 1e6,
                "mb_per_cpu_s": n_bytes / b.cpu / 1e6, "cpu_per_wall": round(b.ratio, 3)}
            for n, b in best.items()}
    for n, t in ntok.items():
        rows[n]["tokens"] = t
    for n, t in threads.items():
        rows[n]["process_threads"] = t
    res = {"family": family, "reference": ref, "engines": rows, "exactness": exact, "notes": notes,
           "threads_before": threads_before,
           "kind": er_tok.kind, "pre": er_tok.pre, "n_vocab": er_tok.n_vocab}
    er_tok.close()
    return res


_PAIRS = (("edgerun", "hf"), ("edgerun", "tiktoken"), ("edgerun", "sentencepiece"), ("edgerun_c", "hf"),
          ("edgerun_c", "tiktoken"))


def _ratios(res):
    """Speed ratios by wall clock ("edgerun_vs_hf") and by CPU time ("..._cpu")."""
    e = res["engines"]
    out = {}
    for a, b in _PAIRS:
        if a in e and b in e and not e[b].get("invalid"):
            out[f"{a}_vs_{b}"] = round(e[a]["mb_per_s"] / e[b]["mb_per_s"], 3)
            out[f"{a}_vs_{b}_cpu"] = round(e[a]["mb_per_cpu_s"] / e[b]["mb_per_cpu_s"], 3)
    return out


def machine_info():
    cpu = platform.processor() or platform.machine()
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {"cpu": cpu, "cores": os.cpu_count(), "machine": platform.machine(),
            "system": f"{platform.system()} {platform.release()}", "python": platform.python_version()}
    for mod in ("tokenizers", "tiktoken", "sentencepiece"):
        try:
            info[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - a missing peer is reported as absent
            info[mod] = None
    from .._ffi import LIBRARY, ffi, lib
    info["edgerun"] = ffi.string(lib.er_version()).decode()
    info["process_threads"] = _n_threads()
    try:
        info["load_average"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        info["load_average"] = None
    info["library"] = str(LIBRARY)
    return info


def run(mb: float = 10.0, families=None, repeat: int = 3, seed: int = 1234, data_dir=None,
        raw_c: bool = True, log=None) -> dict:
    """Runs the benchmark; returns the report (see format_table)."""
    if repeat < 1:
        raise ValueError("--repeat must be at least 1")
    fams = parse_families(families)
    data = pathlib.Path(data_dir) if data_dir else default_data_dir()
    t0 = time.perf_counter()
    docs = make_corpus(mb, seed)
    docs_bytes = [d.encode("utf-8") for d in docs]
    n_bytes = sum(len(d) for d in docs_bytes)
    lens = sorted(len(d) for d in docs_bytes)
    report = {
        "machine": machine_info(),
        "corpus": {"seed": seed, "mb": n_bytes / 1e6, "bytes": n_bytes, "chars": sum(len(d) for d in docs),
                   "documents": len(docs), "doc_bytes_min": lens[0], "doc_bytes_median": lens[len(lens) // 2],
                   "doc_bytes_max": lens[-1], "generate_seconds": round(time.perf_counter() - t0, 2)},
        "method": "single-threaded; one encode call per document, no special tokens; best of "
                  f"{repeat} passes; MB = 10^6 bytes of UTF-8",
        "repeat": repeat, "data_dir": str(data), "results": [], "skipped": {},
    }
    with tempfile.TemporaryDirectory(prefix="edgerun-tokbench-") as tmp:
        for fam in fams:
            src = data / fam
            need = src / ("tokenizer.model" if fam == "llama2" else "tokenizer.json")
            if not need.exists():
                report["skipped"][fam] = f"{need} is absent"
                continue
            if log:
                log(f"{fam}: {need}")
            res = bench_family(fam, src, docs, docs_bytes, n_bytes, repeat, pathlib.Path(tmp), raw_c, log)
            _check_tiktoken(res)
            res["ratios"] = _ratios(res)
            # "exact" is edgerun's verdict; the peers' own agreement is reported beside it.
            res["exact"] = "edgerun" in res["exactness"] and res["exactness"]["edgerun"]["mismatched_docs"] == 0
            report["results"].append(res)
    try:
        report["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    report["targets"] = {"edgerun_vs_hf": TARGET_VS_HF, "edgerun_vs_tiktoken": TARGET_VS_TIKTOKEN}
    report["total_seconds"] = round(time.perf_counter() - t0, 1)
    return report


def _check_tiktoken(res):
    """tiktoken's ids were compared with the family's reference (Hugging Face
    for gpt2); a tiktoken that differs has no speed worth reporting."""
    ex = res["exactness"].get("tiktoken")
    if ex and ex["mismatched_docs"]:
        res["engines"]["tiktoken"]["invalid"] = True
        res["notes"].append(f"tiktoken differs from Hugging Face on {ex['mismatched_docs']} documents: "
                            "its speed is not comparable")


# ---------------------------------------------------------------- report


def _fmt(x, spec=".1f"):
    return "-" if x is None else format(x, spec)


def format_table(report, clock: str = "wall") -> str:
    """The side-by-side table; clock "wall" (MB per second) or "cpu" (MB per
    CPU-second of this process: the fairer figure on a loaded machine)."""
    if clock not in ("wall", "cpu"):
        raise ValueError(f"clock must be 'wall' or 'cpu', not {clock!r}")
    key, suffix = ("mb_per_s", "") if clock == "wall" else ("mb_per_cpu_s", "_cpu")
    c = report["corpus"]
    m = report["machine"]
    lines = [f"corpus: {c['mb']:.2f} MB in {c['documents']} documents "
             f"({c['doc_bytes_min']}-{c['doc_bytes_max']} B, median {c['doc_bytes_median']}), seed {c['seed']}",
             f"machine: {m['cpu']}, {m['cores']} cores, load average {m.get('load_average')} -> {m.get('load_average_end')}; python {m['python']}, "
             f"tokenizers {m['tokenizers']}, tiktoken {m['tiktoken']}, sentencepiece {m['sentencepiece']}",
             f"method: {report['method']}", ""]
    head = (f"{'family':<8} {'MB':>6} {'edgerun':>8} {'C':>8} {'HF':>8} {'tiktoken':>8} {'spm':>8} "
            f"{'er/HF':>6} {'C/HF':>6} {'er/tik':>6} {'exact':>5}")
    unit = "MB/s" if clock == "wall" else "MB per CPU-second"
    lines += [head + f"   ({unit})", "-" * len(head)]
    for r in report["results"]:
        e = r["engines"]
        g = lambda n: e[n][key] if n in e and not e[n].get("invalid") else None  # noqa: E731
        ra = r["ratios"]
        lines.append(f"{r['family']:<8} {c['mb']:>6.2f} {_fmt(g('edgerun')):>8} {_fmt(g('edgerun_c')):>8} "
                     f"{_fmt(g('hf')):>8} {_fmt(g('tiktoken')):>8} {_fmt(g('sentencepiece')):>8} "
                     f"{_fmt(ra.get('edgerun_vs_hf' + suffix), '.2f'):>6} "
                     f"{_fmt(ra.get('edgerun_c_vs_hf' + suffix), '.2f'):>6} "
                     f"{_fmt(ra.get('edgerun_vs_tiktoken' + suffix), '.2f'):>6} {'yes' if r['exact'] else 'NO':>5}")
    lines.append("")
    lines.append("edgerun = Python API (Tokenizer.encode -> list of ids); C = er_tokenize through cffi, no list; "
                 "HF = tokenizers.Tokenizer.encode(...).ids; tiktoken = Encoding.encode_ordinary (GPT-2 ranks); "
                 "spm = sentencepiece (llama2's reference)")
    met = [r["ratios"].get("edgerun_vs_hf" + suffix, 0) >= TARGET_VS_HF
           and r["ratios"].get("edgerun_vs_tiktoken" + suffix, TARGET_VS_TIKTOKEN) >= TARGET_VS_TIKTOKEN
           for r in report["results"]]
    lines.append(f"targets (edgerun >= {TARGET_VS_HF:g}x HF and >= tiktoken, {clock} clock): "
                 + ", ".join(f"{r['family']} {'met' if ok else 'MISSED'}" for r, ok in zip(report["results"], met)))
    for r in report["results"]:
        for name, ex in r["exactness"].items():
            if ex["mismatched_docs"]:
                lines.append(f"{r['family']}: {name} differs from {r['reference']} on {ex['mismatched_docs']} "
                             f"of {c['documents']} documents; first: {ex.get('first')}"
                             + (f" ({ex['note']})" if ex.get("note") else ""))
        for note in r["notes"]:
            lines.append(f"{r['family']}: {note}")
        cpus = ", ".join(f"{n} {v['cpu_per_wall']:.2f}" for n, v in r["engines"].items())
        lines.append(f"{r['family']}: CPU time / wall time (1.00 = one busy core, less = preempted): {cpus}")
    grew = [f"{r['family']}/{n}" for r in report["results"] for n, v in r["engines"].items()
            if None not in (v.get("process_threads"), r.get("threads_before"))
            and v["process_threads"] > r["threads_before"]]
    lines.append("OS threads in the process: no engine started any" if not grew
                 else f"OS threads in the process grew during: {', '.join(grew)}")
    for fam, why in report["skipped"].items():
        lines.append(f"{fam}: skipped ({why})")
    return "\n".join(lines)
