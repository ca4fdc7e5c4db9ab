"""Added tokens through the converter: their AddedToken strip flags become
tokenizer.ggml.lstrip_token_ids / rstrip_token_ids (single_word is refused),
and over a SentencePiece model the folder's added tokens are typed and placed
as llama.cpp's converter places them (_create_vocab_sentencepiece): special
ones CONTROL, the table padded to config.json's vocab_size.

References: Hugging Face's tokenizers / transformers on the same folder; the
files here are written by the converter alone (no key set by hand).
"""
import json
import shutil

import pytest

tokenizers = pytest.importorskip("tokenizers")

from edgerun import Tokenizer  # noqa: E402
from edgerun.convert import ConvertError  # noqa: E402
from edgerun.convert.tokenizer import tokenizer_kv, write_vocab_gguf  # noqa: E402

from test_tokenizer_families import (GEMMA_TEXTS, GGUF_CONTROL, GGUF_NORMAL, GGUF_UNUSED,  # noqa: E402
                                     GGUF_USER_DEFINED, HF, STRIP_TEXTS, TfRef, texts, train_gemma_like)
from test_tokenizer_hf import HFRef  # noqa: E402

STRIPPED = ("<|user|>", "<|end|>", "<|assistant|>", "<|lft|>", "<|both|>", "<|sep|>")


def _qwen3_with(root, tokens_special, tokens_plain=()):
    """A copy of the real Qwen3 tokenizer.json with added tokens."""
    src = HF / "qwen3"
    if not (src / "tokenizer.json").exists():
        pytest.skip(f"{src} is absent")
    tok = tokenizers.Tokenizer.from_file(str(src / "tokenizer.json"))
    if tokens_special:
        tok.add_special_tokens(list(tokens_special))
    if tokens_plain:
        tok.add_tokens(list(tokens_plain))
    root.mkdir(parents=True)
    tok.save(str(root / "tokenizer.json"))
    return tok


@pytest.fixture(scope="module")
def stripping(tmp_path_factory):
    """Phi-3's chat tokens are rstrip=true (and its </s> a non-special rstrip
    token, played here by <|sep|>); lstrip exists too."""
    from tokenizers import AddedToken
    root = tmp_path_factory.mktemp("conv-strip")
    tok = _qwen3_with(root / "hf", [
        AddedToken("<|user|>", rstrip=True, normalized=False), AddedToken("<|end|>", rstrip=True, normalized=False),
        AddedToken("<|assistant|>", rstrip=True, normalized=False),
        AddedToken("<|lft|>", lstrip=True, normalized=False),
        AddedToken("<|both|>", lstrip=True, rstrip=True, normalized=False)],
        [AddedToken("<|sep|>", rstrip=True, normalized=False, special=False)])
    kv = {k: v for k, v, _ in tokenizer_kv(root / "hf")}
    ours = Tokenizer.from_file(write_vocab_gguf(root / "hf", root / "strip.gguf"))
    return HFRef(root / "hf" / "tokenizer.json"), ours, kv, {t: tok.token_to_id(t) for t in STRIPPED}


def test_strip_flags_become_id_lists(stripping):
    _, _, kv, ids = stripping
    assert kv["tokenizer.ggml.lstrip_token_ids"] == sorted(ids[t] for t in ("<|lft|>", "<|both|>"))
    assert kv["tokenizer.ggml.rstrip_token_ids"] == sorted(
        ids[t] for t in ("<|user|>", "<|end|>", "<|assistant|>", "<|both|>", "<|sep|>"))


def test_converted_strip_tokens_tokenize_as_hf(stripping):
    ref, ours, _, _ = stripping
    for text in STRIP_TEXTS + texts()[:40]:
        for parse in (False, True):
            assert ours.encode(text, add_special=False, parse_special=parse) == \
                ref.encode(text, parse_special=parse), (text, parse)


def test_no_strip_keys_without_strip_flags():
    """The real Qwen3 / Llama 3 files have no stripping tokens: no keys, as llama.cpp's files."""
    for name in ("qwen3", "llama3"):
        if not (HF / name / "tokenizer.json").exists():
            pytest.skip(f"{name} tokenizer absent")
        keys = {k for k, _, _ in tokenizer_kv(HF / name)}
        assert not keys & {"tokenizer.ggml.lstrip_token_ids", "tokenizer.ggml.rstrip_token_ids"}, name


def test_single_word_tokens_are_refused(tmp_path):
    from tokenizers import AddedToken
    _qwen3_with(tmp_path / "hf", [AddedToken("<|word|>", single_word=True, normalized=False)])
    with pytest.raises(ConvertError, match=r"single_word.*<\|word\|>|<\|word\|>.*single_word"):
        tokenizer_kv(tmp_path / "hf")


# ---------------------------------------------------------------- SentencePiece: Phi-3-mini's layout

# Phi-3-mini-4k-instruct: Llama 2's 32000-piece tokenizer.model, 32064 embedding
# rows, these added tokens past the model (added_tokens.json and the
# tokenizer_config.json's added_tokens_decoder), its chat tokens rstrip=true.
PHI3_ADDED = {"<|endoftext|>": 32000, "<|assistant|>": 32001, "<|placeholder1|>": 32002, "<|placeholder2|>": 32003,
              "<|placeholder3|>": 32004, "<|placeholder4|>": 32005, "<|system|>": 32006, "<|end|>": 32007,
              "<|placeholder5|>": 32008, "<|placeholder6|>": 32009, "<|user|>": 32010}
PHI3_VOCAB = 32064


def _added_record(content, special, rstrip):
    return {"content": content, "lstrip": False, "normalized": False, "rstrip": rstrip, "single_word": False,
            "special": special}


@pytest.fixture(scope="module")
def phi3(tmp_path_factory):
    pytest.importorskip("sentencepiece")
    model = HF / "llama2" / "tokenizer.model"
    if not model.exists():
        pytest.skip(f"{model} is absent")
    root = tmp_path_factory.mktemp("phi3")
    d = root / "hf"
    d.mkdir()
    shutil.copy(model, d / "tokenizer.model")
    decoder = {"0": _added_record("<unk>", True, False), "1": _added_record("<s>", True, False),
               "2": _added_record("</s>", False, True)}
    for t, i in PHI3_ADDED.items():
        decoder[str(i)] = _added_record(t, True, t != "<|endoftext|>")
    (d / "added_tokens.json").write_text(json.dumps(PHI3_ADDED), encoding="utf-8")
    (d / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "LlamaTokenizer", "add_bos_token": False, "add_eos_token": False, "legacy": False,
        "bos_token": "<s>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "unk_token": "<unk>",
        "added_tokens_decoder": decoder}), encoding="utf-8")
    config = {"vocab_size": PHI3_VOCAB, "bos_token_id": 1, "eos_token_id": 32000, "pad_token_id": 32000}
    (d / "config.json").write_text(json.dumps(config), encoding="utf-8")
    kv = {k: v for k, v, _ in tokenizer_kv(d, config)}
    import gguf
    path = root / "phi3.gguf"
    w = gguf.GGUFWriter(str(path), "phi3")
    from edgerun.convert.tokenizer import add_tokenizer
    add_tokenizer(w, d, config, arch="phi3")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return d, kv, Tokenizer.from_file(path)


def test_phi3_table_is_padded_to_the_embedding(phi3):
    import sentencepiece as spm
    d, kv, ours = phi3
    sp = spm.SentencePieceProcessor(model_file=str(d / "tokenizer.model"))
    tokens, types, scores = kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.token_type"], kv["tokenizer.ggml.scores"]
    assert len(tokens) == len(types) == len(scores) == PHI3_VOCAB == ours.n_vocab
    for t, i in PHI3_ADDED.items():
        assert (tokens[i], types[i], scores[i]) == (t, GGUF_CONTROL, -1000.0)
    for i in range(max(PHI3_ADDED.values()) + 1, PHI3_VOCAB):
        assert (tokens[i], types[i], scores[i]) == (f"[PAD{i}]", GGUF_UNUSED, -10000.0)
    # the model's own pieces keep their text and scores; </s> (special=false in
    # Phi-3's config) is retyped USER_DEFINED as llama.cpp types it
    assert tokens[:sp.vocab_size()] == [sp.id_to_piece(i) for i in range(sp.vocab_size())]
    assert scores[3:sp.vocab_size()] == [sp.get_score(i) for i in range(3, sp.vocab_size())]
    assert (types[0], types[1], types[2]) == (GGUF_CONTROL, GGUF_CONTROL, GGUF_USER_DEFINED)
    assert types[1000] == GGUF_NORMAL
    assert kv["tokenizer.ggml.rstrip_token_ids"] == sorted([2] + [i for t, i in PHI3_ADDED.items()
                                                                   if t != "<|endoftext|>"])
    assert "tokenizer.ggml.lstrip_token_ids" not in kv


def test_phi3_chat_tokens_end_a_turn(phi3):
    _, _, ours = phi3
    assert ours.eos == PHI3_ADDED["<|endoftext|>"]
    assert ours.is_eog(PHI3_ADDED["<|end|>"])
    assert not ours.is_eog(PHI3_ADDED["<|user|>"])


PHI3_CHATS = [
    "<|user|>\nHow are you?<|end|>\n<|assistant|>\nFine.  <|end|>   \n<|endoftext|>",
    "a <|end|> b", "<|system|>  sys<|end|><|user|>x", "<|user|>\n\n\tcode()\n<|end|>\n<|assistant|>",
    "x   </s>   y", "<s><|user|>\nHi<|end|>\n<|assistant|>\n", "<|placeholder3|><|placeholder6|> tail  ",
]


def test_phi3_chat_tokenizes_as_transformers(phi3):
    """The added tokens split, strip and map to their ids as in transformers,
    run on the folder as Phi-3 ships it (tokenizer_config.json: legacy=false):
    text after a special token gets no dummy-prefix space ("<|user|>\nHi":
    "Hi", not "▁Hi"); the converter says so with
    edgerun.tokenizer.prepend_scheme = "first"."""
    d, kv, ours = phi3
    assert kv["edgerun.tokenizer.prepend_scheme"] == "first"
    ref = TfRef(d)
    assert ref.tf.legacy is False
    for t, i in PHI3_ADDED.items():
        assert ref.tf.convert_tokens_to_ids(t) == i
    for text in PHI3_CHATS:
        assert ours.encode(text, add_special=False, parse_special=True) == ref.encode(text, parse_special=True), text
    # the case the key is for: "Hi" right after <|user|> (rstrip took the newline)
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=str(d / "tokenizer.model"))
    hi = ours.encode("<|user|>\nHi", add_special=False, parse_special=True)
    assert hi == [PHI3_ADDED["<|user|>"], sp.piece_to_id("Hi")] and sp.piece_to_id("Hi") != sp.unk_id()


def test_phi3_legacy_true_keeps_the_prefix_after_special_tokens(phi3, tmp_path):
    """legacy=true (and no flag, as llama.cpp's files): every piece of text
    gets the dummy prefix, as transformers does with legacy=true; no key."""
    d, _, _ = phi3
    cfg = json.loads((d / "tokenizer_config.json").read_text(encoding="utf-8"))
    legacy = tmp_path / "hf-legacy"
    shutil.copytree(d, legacy)
    (legacy / "tokenizer_config.json").write_text(json.dumps(dict(cfg, legacy=True)), encoding="utf-8")
    config = json.loads((d / "config.json").read_text(encoding="utf-8"))
    assert "edgerun.tokenizer.prepend_scheme" not in {k for k, _, _ in tokenizer_kv(legacy, config)}
    import gguf
    from edgerun.convert.tokenizer import add_tokenizer
    path = tmp_path / "legacy.gguf"
    w = gguf.GGUFWriter(str(path), "phi3")
    add_tokenizer(w, legacy, config, arch="phi3")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    ours, ref = Tokenizer.from_file(path), TfRef(legacy)
    for text in PHI3_CHATS:
        assert ours.encode(text, add_special=False, parse_special=True) == ref.encode(text, parse_special=True), text
    del cfg["legacy"]
    (legacy / "tokenizer_config.json").write_text(json.dumps(cfg), encoding="utf-8")
    assert "edgerun.tokenizer.prepend_scheme" not in {k for k, _, _ in tokenizer_kv(legacy, config)}


def test_phi3_text_tokenizes_as_sentencepiece(phi3):
    """Text without added tokens in it: the model's pieces, as sentencepiece
    (transformers' BPE conversion of Llama 2's model breaks some ties
    differently, e.g. "  <" as "▁▁"+"<" where sentencepiece has "▁"+"▁<")."""
    import sentencepiece as spm
    d, _, ours = phi3
    sp = spm.SentencePieceProcessor(model_file=str(d / "tokenizer.model"))
    added = list(PHI3_ADDED) + ["<s>", "</s>", "<unk>"]
    items = [t for t in texts() if not any(a in t for a in added)]
    assert len(items) > 100
    bad = []
    for text in items:
        for parse in (False, True):
            got = ours.encode(text, add_special=False, parse_special=parse)
            if got != sp.encode(text) and len(bad) < 3:
                bad.append((text[:60], parse, got[:20], sp.encode(text)[:20]))
    assert not bad, bad


# ---------------------------------------------------------------- SentencePiece: Gemma's turn tokens


@pytest.fixture(scope="module")
def gemma_turns(tmp_path_factory):
    """A Gemma-like SentencePiece model whose <start_of_turn>/<end_of_turn> are
    USER_DEFINED pieces, as in Gemma's own tokenizer.model, and a
    tokenizer_config.json whose added_tokens_decoder marks them special."""
    pytest.importorskip("sentencepiece")
    pb = pytest.importorskip("sentencepiece.sentencepiece_model_pb2")
    root = tmp_path_factory.mktemp("gemma-turns")
    d = train_gemma_like(root / "hf")
    m = pb.ModelProto()
    m.ParseFromString((d / "tokenizer.model").read_bytes())
    ids = {}
    for i, p in enumerate(m.pieces):
        if p.piece in ("<start_of_turn>", "<end_of_turn>"):
            p.type = pb.ModelProto.SentencePiece.USER_DEFINED
            ids[p.piece] = i
    assert len(ids) == 2
    (d / "tokenizer.model").write_bytes(m.SerializeToString())
    cfg = json.loads((d / "tokenizer_config.json").read_text(encoding="utf-8"))
    cfg["added_tokens_decoder"] = {str(i): _added_record(t, True, False) for t, i in ids.items()}
    (d / "tokenizer_config.json").write_text(json.dumps(cfg), encoding="utf-8")
    kv = {k: v for k, v, _ in tokenizer_kv(d)}
    ours = Tokenizer.from_file(write_vocab_gguf(d, root / "g.gguf"))
    return d, ids, kv, ours


def test_gemma_turn_tokens_are_control(gemma_turns):
    d, ids, kv, ours = gemma_turns
    for t, i in ids.items():
        assert kv["tokenizer.ggml.token_type"][i] == GGUF_CONTROL, t
    assert ours.is_eog(ids["<end_of_turn>"])
    # nothing else changes: the table is the model's, no padding (no config.json)
    assert len(kv["tokenizer.ggml.tokens"]) == ours.n_vocab


def test_gemma_turn_tokens_tokenize_as_transformers(gemma_turns):
    d, _, _, ours = gemma_turns
    ref = TfRef(d)
    bad = []
    for text in GEMMA_TEXTS + texts()[:40]:
        for parse in (False, True):
            want = ref.encode(text, parse_special=parse)
            got = ours.encode(text, add_special=False, parse_special=parse)
            if got != want and len(bad) < 3:
                bad.append((text[:60], parse, got[:20], want[:20]))
    assert not bad, bad
