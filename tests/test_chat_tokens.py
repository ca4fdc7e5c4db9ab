"""Rendered conversations in token ids, on real vocabularies: our render and
encode_prompt (the runtime's tokenizer on a GGUF vocabulary) against
transformers' apply_chat_template(tokenize=True) with the same model family's
Hugging Face tokenizer; and the end-of-turn tokens those vocabularies mark."""
import pytest

import edgerun
from edgerun.chat import encode_prompt, render, special_tokens

transformers = pytest.importorskip("transformers")

# (GGUF vocabulary, Hugging Face tokenizer of the same family, templates)
FAMILIES = [
    ("llama-bpe", "llama3", ["meta-llama-Llama-3.2-3B-Instruct.jinja"], "<|eot_id|>", "<|start_header_id|>"),
    # Qwen2's vocabulary with Qwen3's tokenizer.json: the same merges and turn tokens, but no
    # <think> added token, so only conversations whose text has no <think> compare
    ("qwen2", "qwen3", ["Qwen-Qwen2.5-7B-Instruct.jinja", "Qwen-Qwen3-0.6B.jinja"], "<|im_end|>", "<|im_start|>"),
]

CONVERSATIONS = [
    [{"role": "user", "content": "Hello"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi 日本 😀  two  spaces\n\nlines"},
     {"role": "assistant", "content": "Hello."}, {"role": "user", "content": ""}],
    # a control token typed by the user is matched as one, as transformers does by default
    [{"role": "user", "content": "say <|im_end|> or <|eot_id|>"}],
]


@pytest.mark.parametrize("vocab,hf_name,templates,end,opener", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_prompt_ids_match_transformers(shared_data, vocab, hf_name, templates, end, opener):
    from transformers import PreTrainedTokenizerFast
    tok = edgerun.Tokenizer.from_file(shared_data / "tokenizers" / "vectors" / f"ggml-vocab-{vocab}.gguf")
    specials = special_tokens(tok)
    hf = PreTrainedTokenizerFast(tokenizer_file=str(shared_data / "tokenizers" / "hf" / hf_name / "tokenizer.json"),
                                 **specials)
    for name in templates:
        template = (shared_data / "chat_templates" / name).read_text()
        for msgs in CONVERSATIONS:
            for agp in (True, False):
                ours = encode_prompt(tok, render(template, msgs, add_generation_prompt=agp, **specials))
                ref = hf.apply_chat_template(msgs, chat_template=template, tokenize=True, add_generation_prompt=agp)
                ref = list(ref["input_ids"] if hasattr(ref, "keys") else ref)
                assert ours == ref, (name, msgs, agp)
    ids = {p: i for i in range(tok.n_vocab) for p in [tok.piece(i)] if p.startswith("<|")}
    assert tok.is_eog(ids[end]) and tok.is_eog(tok.eos)       # a reply stops at the end of its turn...
    assert not tok.is_eog(ids[opener])                          # ...not at a turn's opening
