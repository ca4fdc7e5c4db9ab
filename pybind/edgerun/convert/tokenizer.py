"""Tokenizer metadata for GGUF files, from a Hugging Face model folder.

`edgerun convert` calls ``add_tokenizer(writer, hf_dir)``; tests call
``tokenizer_kv(hf_dir)`` to see the keys, or ``write_vocab_gguf(hf_dir, path)``
for a vocabulary-only file.

Two sources, tried in this order:
  - ``tokenizer.json`` whose model is byte-level BPE (GPT-2, Llama 3, Qwen2, ...)
    -> ``tokenizer.ggml.model = "gpt2"`` with merges, the pre-tokenizer name
    identified from the file's pre_tokenizer (see PRE_TOKENIZERS), NFC when the
    file normalizes, and ``ignore_merges`` as the model says;
  - ``tokenizer.model`` (a SentencePiece BPE model, read directly from its
    protobuf) -> ``tokenizer.ggml.model = "llama"`` with scores, piece types,
    ``add_space_prefix`` and ``remove_extra_whitespaces`` from its normalizer;
    the table has config.json's vocab_size rows and the folder's added tokens
    (added_tokens.json, added_tokens_decoder) as llama.cpp's converter lays
    them out.

Both write ``tokenizer.ggml.lstrip_token_ids`` / ``rstrip_token_ids`` (the
added tokens' AddedToken strip flags) when any token strips, and
``add_tokenizer`` adds ``tokenizer.chat_template`` (chat_template_kv).

Besides llama.cpp's keys we write ``tokenizer.ggml.normalizer`` ("none"/"nfc"),
``tokenizer.ggml.ignore_merges`` and ``tokenizer.ggml.remove_extra_whitespaces``
(and the strip id lists, and ``edgerun.tokenizer.prepend_scheme`` = "first"
for SentencePiece folders marked ``legacy: false``, see _prepend_kv) so that
the runtime reproduces Hugging Face /
sentencepiece exactly; readers that do not know them ignore them. Anything we
cannot reproduce exactly (Unigram models, other normalizers, unknown
pre-tokenizer regexes, single_word added tokens) is refused with an error
saying what it was, rather than converted approximately.
"""
from __future__ import annotations

import json
import pathlib

from gguf import GGUFValueType as T

from .hf import ConvertError

# GGUF token types (llama.cpp numbering).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


class TokenizerConversionError(ConvertError, ValueError):
    """The folder's tokenizer cannot be converted exactly."""


# ---------------------------------------------------------------- pre-tokenizers

GPT2_RE = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
             r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
            r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Llama 3's regex as some exports spell it (without the inline case flag).
LLAMA3_RE_CASED = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|"
                   r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Qwen3.5: letters take their combining marks (\p{M}) along; digits one by one.
QWEN35_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|"
             r" ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# OpenAI's o200k split (Phi-4-mini's tokenizer.json): case-aware words with a
# trailing contraction, digits in threes, '/' kept with punctuation runs.
GPT4O_RE = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"
            r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}|"
            r" ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
DS_CODER = ["[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+", r"\p{N}"]

# A pre_tokenizer is reduced to a tuple of stages (see _stages); each known
# tuple names the pre-tokenizer the runtime implements for it.
PRE_TOKENIZERS = {
    (("bytelevel", True),): "gpt-2",
    (("split", GPT2_RE), ("bytelevel", False)): "gpt-2",
    (("split", LLAMA3_RE), ("bytelevel", False)): "llama-bpe",
    (("split", LLAMA3_RE_CASED), ("bytelevel", False)): "llama-bpe",
    (("split", QWEN2_RE), ("bytelevel", False)): "qwen2",
    (("split", QWEN35_RE), ("bytelevel", False)): "qwen35",
    (("split", GPT4O_RE), ("bytelevel", False)): "gpt-4o",
    (("digits", True), ("bytelevel", True)): "starcoder",
    tuple(("split", r) for r in DS_CODER) + (("bytelevel", False),): "deepseek-coder",
}


def _stages(pre):
    if pre is None:
        raise TokenizerConversionError("tokenizer.json has no pre_tokenizer: not a byte-level BPE tokenizer")
    kind = pre.get("type")
    if kind == "Sequence":
        out = []
        for p in pre["pretokenizers"]:
            out.extend(_stages(p))
        return tuple(out)
    if kind == "ByteLevel":
        if pre.get("add_prefix_space"):
            raise TokenizerConversionError("ByteLevel pre-tokenizer with add_prefix_space=true is not supported")
        return (("bytelevel", bool(pre.get("use_regex", True))),)
    if kind == "Split":
        pat = pre.get("pattern", {})
        if pre.get("behavior", "").lower() != "isolated" or pre.get("invert"):
            raise TokenizerConversionError(f"Split pre-tokenizer with behavior={pre.get('behavior')!r} "
                                           f"invert={pre.get('invert')!r} is not supported")
        if "Regex" in pat:
            return (("split", pat["Regex"]),)
        raise TokenizerConversionError(f"Split pre-tokenizer on a plain string {pat!r} is not supported")
    if kind == "Digits":
        return (("digits", bool(pre.get("individual_digits"))),)
    raise TokenizerConversionError(f"pre-tokenizer type {kind!r} is not supported")


def identify_pre(pre_tokenizer: dict) -> str:
    """The GGUF `tokenizer.ggml.pre` name for a tokenizer.json pre_tokenizer."""
    st = _stages(pre_tokenizer)
    name = PRE_TOKENIZERS.get(st)
    if name is None:
        raise TokenizerConversionError(
            "unknown pre-tokenizer (no edgerun splitter reproduces it exactly): "
            + json.dumps(pre_tokenizer)[:400])
    return name


# ---------------------------------------------------------------- tokenizer.json


def _token_name(v):
    if isinstance(v, dict):
        return v.get("content")
    return v


def _special_ids(hf_dir, vocab_lookup):
    """bos/eos/unk/pad ids named in tokenizer_config.json / special_tokens_map.json."""
    out = {}
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        p = hf_dir / name
        if not p.exists():
            continue
        cfg = json.loads(p.read_text(encoding="utf-8"))
        for key in ("bos", "eos", "unk", "pad"):
            tok = _token_name(cfg.get(f"{key}_token"))
            if key not in out and tok is not None and tok in vocab_lookup:
                out[key] = vocab_lookup[tok]
    return out


def _template_specials(post):
    """(add_bos, add_eos, bos_id, eos_id) from a TemplateProcessing post-processor."""
    if post is None:
        return False, False, None, None
    if post.get("type") == "Sequence":
        res = (False, False, None, None)
        for p in post.get("processors", []):
            r = _template_specials(p)
            if r[0] or r[1]:
                res = r
        return res
    if post.get("type") != "TemplateProcessing":
        return False, False, None, None
    single = post.get("single", [])
    specials = post.get("special_tokens", {})

    def sid(item):
        name = item["SpecialToken"]["id"]
        ids = specials.get(name, {}).get("ids", [])
        return ids[0] if ids else None

    add_bos = bool(single) and "SpecialToken" in single[0]
    add_eos = bool(single) and "SpecialToken" in single[-1] and len(single) > 1
    return add_bos, add_eos, sid(single[0]) if add_bos else None, sid(single[-1]) if add_eos else None


def _strip_kv(added):
    """lstrip/rstrip_token_ids from added tokens' AddedToken flags (Phi-3's chat
    tokens eat the whitespace after them); without these keys the runtime would
    keep that whitespace and tokenize differently from Hugging Face. Keys are
    left out when no token strips, so files stay as llama.cpp's otherwise.
    `added`: [(id, AddedToken dict)]."""
    lstrip, rstrip = [], []
    for i, a in added:
        if a.get("single_word"):
            raise TokenizerConversionError(
                f"added token {a.get('content')!r} (id {i}) has single_word=true, which the edgerun "
                "tokenizer does not implement (it would match inside words where Hugging Face does not)")
        if a.get("lstrip"):
            lstrip.append(int(i))
        if a.get("rstrip"):
            rstrip.append(int(i))
    kv = []
    if lstrip:
        kv.append(("tokenizer.ggml.lstrip_token_ids", sorted(set(lstrip)), T.ARRAY))
    if rstrip:
        kv.append(("tokenizer.ggml.rstrip_token_ids", sorted(set(rstrip)), T.ARRAY))
    return kv


def _bpe_kv(hf_dir, tj):
    model = tj["model"]
    if model.get("type") != "BPE":
        raise TokenizerConversionError(f"tokenizer.json model {model.get('type')!r} is not supported "
                                       "(byte-level BPE only; SentencePiece models via tokenizer.model)")
    if model.get("byte_fallback") or model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
        raise TokenizerConversionError("BPE with byte_fallback / subword prefixes is not byte-level BPE")
    if (tj.get("decoder") or {}).get("type") not in ("ByteLevel", None):
        raise TokenizerConversionError(f"decoder {tj['decoder'].get('type')!r} is not byte-level")
    pre = identify_pre(tj.get("pre_tokenizer"))
    norm = tj.get("normalizer")
    if norm is None:
        normalizer = "none"
    elif norm.get("type") == "NFC":
        normalizer = "nfc"
    elif norm.get("type") == "Sequence" and not norm.get("normalizers"):
        normalizer = "none"
    else:
        raise TokenizerConversionError(f"normalizer {json.dumps(norm)[:200]} is not supported (none, NFC)")

    vocab = dict(model["vocab"])
    added = tj.get("added_tokens", [])
    n = max([*vocab.values(), *(a["id"] for a in added)]) + 1
    tokens = [None] * n
    types = [NORMAL] * n
    for tok, i in vocab.items():
        tokens[i] = tok
    for a in added:
        tokens[a["id"]] = a["content"]
        types[a["id"]] = CONTROL if a.get("special") else USER_DEFINED
    for i in range(n):
        if tokens[i] is None:  # holes in the id space: unreachable placeholders
            tokens[i] = f"[PAD{i}]"
            types[i] = UNUSED
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]

    lookup = {t: i for i, t in enumerate(tokens)}
    ids = _special_ids(hf_dir, lookup)
    add_bos, add_eos, tb, te = _template_specials(tj.get("post_processor"))
    if tb is not None:
        ids.setdefault("bos", tb)
    if te is not None:
        ids.setdefault("eos", te)

    kv = [
        ("tokenizer.ggml.model", "gpt2", T.STRING),
        ("tokenizer.ggml.pre", pre, T.STRING),
        ("tokenizer.ggml.tokens", tokens, T.ARRAY),
        ("tokenizer.ggml.token_type", types, T.ARRAY),
        ("tokenizer.ggml.merges", merges, T.ARRAY),
        ("tokenizer.ggml.normalizer", normalizer, T.STRING),
        ("tokenizer.ggml.ignore_merges", bool(model.get("ignore_merges", False)), T.BOOL),
        ("tokenizer.ggml.add_bos_token", add_bos, T.BOOL),
        ("tokenizer.ggml.add_eos_token", add_eos, T.BOOL),
    ]
    return kv + _strip_kv([(a["id"], a) for a in added]) + _id_kv(ids)


def _id_kv(ids):
    names = {"bos": "bos_token_id", "eos": "eos_token_id", "unk": "unknown_token_id", "pad": "padding_token_id"}
    return [(f"tokenizer.ggml.{names[k]}", int(v), T.UINT32) for k, v in ids.items() if v is not None and v >= 0]


# ---------------------------------------------------------------- tokenizer.model


def _varint(b, i):
    r = s = 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return r, i


def _fields(b):
    """Protobuf wire fields of one message: [(field, wire type, value)]."""
    i, out = 0, []
    while i < len(b):
        key, i = _varint(b, i)
        f, t = key >> 3, key & 7
        if t == 0:
            v, i = _varint(b, i)
        elif t == 1:
            v, i = b[i:i + 8], i + 8
        elif t == 2:
            ln, i = _varint(b, i)
            v, i = b[i:i + ln], i + ln
        elif t == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise TokenizerConversionError(f"tokenizer.model: unsupported protobuf wire type {t}")
        out.append((f, t, v))
    return out


def read_sentencepiece(path: pathlib.Path) -> dict:
    """The parts of a SentencePiece ModelProto the runtime needs (no protobuf package)."""
    import struct

    data = path.read_bytes()
    pieces, trainer, norm = [], {}, {}
    for f, t, v in _fields(data):
        if f == 1 and t == 2:  # SentencePiece {piece=1, score=2, type=3}
            p = {"piece": "", "score": 0.0, "type": NORMAL}
            for ff, tt, vv in _fields(v):
                if ff == 1:
                    p["piece"] = bytes(vv).decode("utf-8")
                elif ff == 2 and tt == 5:
                    p["score"] = struct.unpack("<f", vv)[0]
                elif ff == 3:
                    p["type"] = vv
            pieces.append(p)
        elif f == 2 and t == 2:
            trainer = {ff: vv for ff, tt, vv in _fields(v)}
        elif f == 3 and t == 2:
            norm = {ff: vv for ff, tt, vv in _fields(v)}
    signed = lambda x: x - (1 << 64) if x >= (1 << 63) else x  # noqa: E731
    return {
        "pieces": pieces,
        "model_type": trainer.get(3, 1),          # 1 UNIGRAM (default), 2 BPE
        "byte_fallback": bool(trainer.get(35, 0)),
        "unk_id": signed(trainer.get(40, 0)),
        "bos_id": signed(trainer.get(41, 1)),
        "eos_id": signed(trainer.get(42, 2)),
        "pad_id": signed(trainer.get(43, (1 << 64) - 1)),
        "normalizer": bytes(norm.get(1, b"nmt_nfkc")).decode(),
        "add_dummy_prefix": bool(norm.get(3, 1)),
        "remove_extra_whitespaces": bool(norm.get(4, 1)),
    }


def _looks_special(text):
    """Added tokens llama.cpp types CONTROL although the folder does not call
    them special (Gemma's <mask>/<unusedN>, <|...|> chat markers)."""
    return (text in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
            or (text.startswith("<|") and text.endswith("|>"))
            or (text.startswith("<\uff5c") and text.endswith("\uff5c>"))
            or (text.startswith("<unused") and text.endswith(">")))


def _spm_added(hf_dir):
    """The folder's added tokens over a SentencePiece model, in llama.cpp's order
    of authority: added_tokens.json ({content: id}, user-defined), then
    tokenizer_config.json's added_tokens_decoder ({id: AddedToken}); that one
    absent, tokenizer.json's added_tokens (the same records, a list).
    Returns [(id, AddedToken dict, from_added_tokens_json)]."""
    out = []
    p = hf_dir / "added_tokens.json"
    if p.exists():
        for content, i in json.loads(p.read_text(encoding="utf-8")).items():
            out.append((int(i), {"content": content}, True))
    decoder = None
    p = hf_dir / "tokenizer_config.json"
    if p.exists():
        decoder = json.loads(p.read_text(encoding="utf-8")).get("added_tokens_decoder")
    if decoder is not None:
        out += [(int(i), a, False) for i, a in decoder.items()]
    elif (hf_dir / "tokenizer.json").exists():
        tj = json.loads((hf_dir / "tokenizer.json").read_text(encoding="utf-8"))
        out += [(int(a["id"]), a, False) for a in tj.get("added_tokens", [])]
    return out


def _spm_kv(hf_dir, config=None):
    sp = read_sentencepiece(hf_dir / "tokenizer.model")
    if sp["model_type"] != 2:
        raise TokenizerConversionError("tokenizer.model is a Unigram SentencePiece model; edgerun runs BPE ones")
    if sp["normalizer"] not in ("identity", ""):
        raise TokenizerConversionError(f"SentencePiece normalizer {sp['normalizer']!r} is not supported "
                                       "(train with normalization_rule_name='identity')")
    add_bos, add_eos = True, False
    cfg = {}
    cfg_path = hf_dir / "tokenizer_config.json"
    if cfg_path.exists():
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
        add_bos = bool(cfg.get("add_bos_token", add_bos))
        add_eos = bool(cfg.get("add_eos_token", add_eos))
    # The embedding has config.json's vocab_size rows, often more than the
    # SentencePiece model's pieces (Phi-3-mini: 32000 pieces, 32064 rows, its
    # chat tokens at 32000+). As llama.cpp does, the table gets one entry per
    # row: pieces past it are dropped, rows past the pieces are "[PADi]" UNUSED
    # placeholders (score -10000) unless an added token claims them.
    vocab_size = (config or {}).get("vocab_size")
    if not isinstance(vocab_size, int) or vocab_size <= 0:
        vocab_size = len(sp["pieces"])
    tokens = [f"[PAD{i}]" for i in range(vocab_size)]
    scores = [-10000.0] * vocab_size
    types = [UNUSED] * vocab_size
    for i, p in enumerate(sp["pieces"][:vocab_size]):
        tokens[i], scores[i], types[i] = p["piece"], float(p["score"]), int(p["type"])
    # Added tokens override the model's pieces. Special ones are CONTROL: Gemma's
    # <start_of_turn>/<end_of_turn> are user-defined pieces in tokenizer.model;
    # left so, they would be matched without parse_special and <end_of_turn>
    # would not end generation. Non-special ones stay USER_DEFINED with "▁"
    # written as the space it stands for, as llama.cpp writes them.
    added = [(i, a, j) for i, a, j in _spm_added(hf_dir) if 0 <= i < vocab_size]
    for i, a, from_json in added:
        text = a["content"]
        if from_json:
            types[i] = USER_DEFINED
        elif a.get("special") or _looks_special(text):
            types[i] = CONTROL
        else:
            text = text.replace("\u2581", " ")
            types[i] = USER_DEFINED
        tokens[i], scores[i] = text, -1000.0
    ids = {k: sp[f"{k}_id"] for k in ("bos", "eos", "unk", "pad")}
    ids = {k: v for k, v in ids.items() if 0 <= v < vocab_size}
    return [
        ("tokenizer.ggml.model", "llama", T.STRING),
        ("tokenizer.ggml.pre", "default", T.STRING),
        ("tokenizer.ggml.tokens", tokens, T.ARRAY),
        ("tokenizer.ggml.scores", scores, T.ARRAY),
        ("tokenizer.ggml.token_type", types, T.ARRAY),
        ("tokenizer.ggml.add_bos_token", add_bos, T.BOOL),
        ("tokenizer.ggml.add_eos_token", add_eos, T.BOOL),
        ("tokenizer.ggml.add_space_prefix", sp["add_dummy_prefix"], T.BOOL),
        ("tokenizer.ggml.remove_extra_whitespaces", sp["remove_extra_whitespaces"], T.BOOL),
    ] + _prepend_kv(cfg, sp) + _strip_kv([(i, a) for i, a, j in added if not j]) + _id_kv(ids)


def _prepend_kv(cfg, sp):
    """``edgerun.tokenizer.prepend_scheme = "first"`` when the folder's
    tokenizer_config.json says ``legacy: false`` (Phi-3, Phi-3.5): there
    transformers gives the dummy-prefix "▁" only to the text at the start of
    the input, not to text after a special token ("<|user|>\\nHi" -> "Hi").
    transformers 5 (LlamaTokenizer: Metaspace prepend_scheme "first") and
    transformers 4's sentencepiece-backed LlamaTokenizer agree on this; the
    flag is what they read, whatever tokenizer.json says. Without the flag,
    or with ``legacy: true``, every piece of text gets it (sentencepiece on
    each piece, llama.cpp, transformers 4's default) and no key is written,
    so the file stays as llama.cpp's converter writes it. llama.cpp ignores
    the key: run there, such a file tokenizes text after a special token
    with the prefix."""
    if sp["add_dummy_prefix"] and cfg.get("legacy") is False:
        return [("edgerun.tokenizer.prepend_scheme", "first", T.STRING)]
    return []


# ---------------------------------------------------------------- chat template


def _template_name(name):
    # llama.cpp keeps key names to [A-Za-z0-9_]
    return "".join(c if c.isascii() and c.isalnum() else "_" for c in name)


def chat_template_kv(hf_dir) -> list:
    """``tokenizer.chat_template`` (and named templates) as llama.cpp's
    converter writes them, so `edgerun chat` finds the model's template in the
    file. Sources: tokenizer_config.json's ``chat_template``, else
    chat_template.jinja (with additional_chat_templates/*.jinja as named ones),
    else chat_template.json. A list of {name, template} gives
    ``tokenizer.chat_template`` (the one named "default") plus
    ``tokenizer.chat_template.<name>`` and the list of names in
    ``tokenizer.chat_templates``."""
    hf_dir = pathlib.Path(hf_dir)
    alt = None
    jinja, js = hf_dir / "chat_template.jinja", hf_dir / "chat_template.json"
    if jinja.is_file():
        alt = jinja.read_text(encoding="utf-8")
        extra = sorted((hf_dir / "additional_chat_templates").glob("*.jinja"))
        if extra:
            alt = [{"name": "default", "template": alt}] + [
                {"name": p.stem, "template": p.read_text(encoding="utf-8")} for p in extra]
    elif js.is_file():
        alt = json.loads(js.read_text(encoding="utf-8")).get("chat_template")
    cfg_path = hf_dir / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8")) if cfg_path.is_file() else {}
    tmpl = cfg.get("chat_template", alt)
    if tmpl is None:
        return []
    if isinstance(tmpl, str):
        return [("tokenizer.chat_template", tmpl, T.STRING)]
    if not isinstance(tmpl, list) or not all(isinstance(c, dict) for c in tmpl):
        raise TokenizerConversionError(f"{cfg_path}: chat_template is a {type(tmpl).__name__}, "
                                       "neither a string nor a list of {name, template}")
    default, named = None, {}
    for choice in tmpl:
        name, text = _template_name(choice.get("name", "")), choice.get("template")
        if not name or not isinstance(text, str):
            continue
        if name == "default":
            default = text
        else:
            named[name] = text
    kv = [(f"tokenizer.chat_template.{n}", t, T.STRING) for n, t in named.items()]
    if named:
        kv.append(("tokenizer.chat_templates", list(named), T.ARRAY))
    if default is not None:
        kv.append(("tokenizer.chat_template", default, T.STRING))
    return kv


# ---------------------------------------------------------------- entry points


def tokenizer_kv(hf_dir, config: dict | None = None) -> list:
    """[(key, value, GGUFValueType)] describing the folder's tokenizer.

    A byte-level BPE tokenizer.json wins; otherwise tokenizer.model. Raises
    TokenizerConversionError for tokenizers the runtime cannot reproduce, and
    FileNotFoundError when the folder has neither file. `config` (config.json)
    gives a SentencePiece vocabulary its size (vocab_size rows).
    """
    hf_dir = pathlib.Path(hf_dir)
    tj_path, sp_path = hf_dir / "tokenizer.json", hf_dir / "tokenizer.model"
    if tj_path.exists():
        tj = json.loads(tj_path.read_text(encoding="utf-8"))
        is_bpe_bytelevel = tj.get("model", {}).get("type") == "BPE" and not tj["model"].get("byte_fallback")
        if is_bpe_bytelevel or not sp_path.exists():
            return _bpe_kv(hf_dir, tj)
    if sp_path.exists():
        return _spm_kv(hf_dir, config)
    raise FileNotFoundError(f"{hf_dir} has neither tokenizer.json nor tokenizer.model")


def add_tokenizer(writer, hf_dir, config: dict | None = None, arch: str | None = None) -> None:
    """Writes the tokenizer keys of `hf_dir` into a gguf.GGUFWriter.

    `config` (the model's config.json, optional) supplies the bos/eos/padding
    ids the tokenizer files do not name, as llama.cpp's converter takes them;
    `arch` the family's own rules (Gemma: no dummy space prefix). The chat
    template travels with it (chat_template_kv).
    """
    kv = _with_config_ids(tokenizer_kv(hf_dir, config), hf_dir, config or {}) + chat_template_kv(hf_dir)
    if arch == "gemma3":
        # Gemma's SentencePiece models add no dummy prefix; llama.cpp writes
        # False for gemma3 whatever the model file says, and so do we
        kv = [(k, False if k == "tokenizer.ggml.add_space_prefix" else v, t) for k, v, t in kv
              if k != "edgerun.tokenizer.prepend_scheme"]  # no prefix at all: nothing to qualify
    for key, value, vtype in kv:
        if vtype == T.ARRAY:
            writer.add_array(key, value)
        else:
            writer.add_key_value(key, value, vtype)


def _with_config_ids(kv, hf_dir, config):
    """The special ids in llama.cpp's order of authority: tokens named in
    tokenizer_config.json / special_tokens_map.json, then config.json's
    bos/eos/pad_token_id; a SentencePiece model's own ids only where neither
    names one (llama.cpp then falls back to the same 1/2/0 defaults)."""
    names = {"bos": "bos_token_id", "eos": "eos_token_id", "unk": "unknown_token_id", "pad": "padding_token_id"}
    d = {k: (v, t) for k, v, t in kv}
    tokens = d["tokenizer.ggml.tokens"][0]
    n = len(tokens)
    ids = {k: d[f"tokenizer.ggml.{names[k]}"][0] for k in names if f"tokenizer.ggml.{names[k]}" in d}
    named = _special_ids(hf_dir, {t: i for i, t in enumerate(tokens)})
    spm = d["tokenizer.ggml.model"][0] == "llama"
    for k in ("bos", "eos", "pad"):
        v = config.get(f"{k}_token_id")
        if k in named or not isinstance(v, int) or not 0 <= v < n:
            continue
        if spm or k not in ids:
            ids[k] = v
    ids.update(named)
    out = [(k, v, t) for k, v, t in kv if not k.endswith("_token_id")]
    return out + _id_kv({k: ids[k] for k in names if k in ids})


def write_vocab_gguf(hf_dir, path, arch: str = "llama") -> pathlib.Path:
    """A vocabulary-only GGUF (no tensors) at `path`, as Tokenizer.from_file reads."""
    import gguf

    path = pathlib.Path(path)
    w = gguf.GGUFWriter(str(path), arch)
    add_tokenizer(w, hf_dir)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
