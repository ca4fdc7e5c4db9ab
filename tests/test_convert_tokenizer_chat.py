"""The converter carries the model's chat template into the GGUF
(`tokenizer.chat_template`, as llama.cpp's converter writes it), so
`edgerun chat` needs no --chat-template on a converted model.

A tiny random Qwen3 with the real Qwen3 tokenizer.json and a real template of
../shared/data/chat_templates in its tokenizer_config.json is converted;
edgerun.chat reads the template back from the file and renders conversations
as transformers' apply_chat_template renders them from the folder. The other
sources (chat_template.jinja, named templates, chat_template.json) are checked
on vocabulary-only files.
"""
import json
import shutil

import pytest

from edgerun.chat import read_string, render
from edgerun.convert import ConvertError
from edgerun.convert.tokenizer import chat_template_kv, write_vocab_gguf

from test_tokenizer_families import HF

transformers = pytest.importorskip("transformers")

CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"},
     {"role": "assistant", "content": "Hey."}, {"role": "user", "content": "Réponds: 日本語 😀 <b>&</b>"}],
]


def _templates(shared_data):
    d = shared_data / "chat_templates"
    if not d.is_dir():
        pytest.skip(f"{d} is absent")
    return d


def _tokenizer_folder(dst, tokenizer_config):
    src = HF / "qwen3"
    if not (src / "tokenizer.json").exists():
        pytest.skip(f"{src} is absent")
    dst.mkdir(parents=True, exist_ok=True)
    shutil.copy(src / "tokenizer.json", dst / "tokenizer.json")
    if tokenizer_config is not None:
        (dst / "tokenizer_config.json").write_text(json.dumps(tokenizer_config), encoding="utf-8")
    return dst


@pytest.fixture(scope="module")
def converted(shared_data, tmp_path_factory):
    torch = pytest.importorskip("torch")
    template = (_templates(shared_data) / "Qwen-Qwen3-0.6B.jinja").read_text(encoding="utf-8")
    root = tmp_path_factory.mktemp("conv-chat")
    hf = _tokenizer_folder(root / "hf", {
        "tokenizer_class": "Qwen2Tokenizer", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
        "bos_token": None, "add_bos_token": False, "chat_template": template})
    n_vocab = json.loads((hf / "tokenizer.json").read_text(encoding="utf-8"))
    n_vocab = max([*n_vocab["model"]["vocab"].values(), *(a["id"] for a in n_vocab["added_tokens"])]) + 1
    torch.manual_seed(0)
    cfg = transformers.Qwen3Config(vocab_size=n_vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                                   max_position_embeddings=256, tie_word_embeddings=True,
                                   eos_token_id=151645, bos_token_id=None)
    transformers.Qwen3ForCausalLM(cfg).save_pretrained(str(hf))
    from edgerun.convert import convert
    out = root / "tiny.gguf"
    convert(hf, out, "f16", quiet=True)
    return hf, out, template


def test_converted_model_carries_its_template(converted):
    import edgerun
    from edgerun.chat import model_template, special_tokens
    hf, path, template = converted
    assert read_string(path, "tokenizer.chat_template") == template
    ref = transformers.AutoTokenizer.from_pretrained(str(hf))
    with edgerun.Model(path, n_ctx=256) as m:
        assert model_template(m) == template                      # no chat_template argument needed
        specials = special_tokens(m)
        for messages in CONVERSATIONS:
            for gen in (True, False):
                for extra in ({}, {"enable_thinking": False}):
                    want = ref.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen, **extra)
                    got = render(model_template(m), messages, add_generation_prompt=gen,
                                 bos_token=specials.get("bos_token"), eos_token=specials.get("eos_token"), **extra)
                    assert got == want, (messages, gen, extra)


def _vocab_file(hf, path):
    return write_vocab_gguf(hf, path)


def test_template_file_and_named_templates(shared_data, tmp_path):
    tdir = _templates(shared_data)
    a = (tdir / "google-gemma-2-2b-it.jinja").read_text(encoding="utf-8")
    b = (tdir / "HuggingFaceTB-SmolLM3-3B.jinja").read_text(encoding="utf-8")
    c = (tdir / "microsoft-Phi-3.5-mini-instruct.jinja").read_text(encoding="utf-8")

    # chat_template.jinja beside a tokenizer_config.json without one
    hf = _tokenizer_folder(tmp_path / "jinja", {"eos_token": "<|im_end|>"})
    (hf / "chat_template.jinja").write_text(a, encoding="utf-8")
    p = _vocab_file(hf, tmp_path / "jinja.gguf")
    assert read_string(p, "tokenizer.chat_template") == a
    # tokenizer_config.json's own template wins over the file, as in llama.cpp's converter
    (hf / "tokenizer_config.json").write_text(json.dumps({"chat_template": b}), encoding="utf-8")
    assert read_string(_vocab_file(hf, tmp_path / "both.gguf"), "tokenizer.chat_template") == b
    # additional_chat_templates/: named ones beside the default
    (hf / "tokenizer_config.json").write_text(json.dumps({}), encoding="utf-8")
    (hf / "additional_chat_templates").mkdir()
    (hf / "additional_chat_templates" / "tool-use.jinja").write_text(c, encoding="utf-8")
    p = _vocab_file(hf, tmp_path / "named.gguf")
    assert read_string(p, "tokenizer.chat_template") == a
    assert read_string(p, "tokenizer.chat_template.tool_use") == c

    # a list of {name, template} in tokenizer_config.json (Cohere's layout)
    hf = _tokenizer_folder(tmp_path / "list", {"chat_template": [
        {"name": "default", "template": a}, {"name": "rag", "template": b}, {"name": "tool use", "template": c}]})
    p = _vocab_file(hf, tmp_path / "list.gguf")
    assert read_string(p, "tokenizer.chat_template") == a
    assert read_string(p, "tokenizer.chat_template.rag") == b
    assert read_string(p, "tokenizer.chat_template.tool_use") == c
    gguf = pytest.importorskip("gguf")
    names = gguf.GGUFReader(str(p)).fields["tokenizer.chat_templates"].contents()
    assert sorted(names) == ["rag", "tool_use"]

    # chat_template.json (older processors' layout)
    hf = _tokenizer_folder(tmp_path / "json", None)
    (hf / "chat_template.json").write_text(json.dumps({"chat_template": b}), encoding="utf-8")
    assert read_string(_vocab_file(hf, tmp_path / "json.gguf"), "tokenizer.chat_template") == b


def test_no_template_no_key_and_bad_types_refused(tmp_path):
    hf = _tokenizer_folder(tmp_path / "none", {"eos_token": "<|im_end|>"})
    assert chat_template_kv(hf) == []
    assert read_string(_vocab_file(hf, tmp_path / "none.gguf"), "tokenizer.chat_template") is None
    (hf / "tokenizer_config.json").write_text(json.dumps({"chat_template": {"default": "x"}}), encoding="utf-8")
    with pytest.raises(ConvertError, match="chat_template"):
        chat_template_kv(hf)
