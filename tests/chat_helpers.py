"""A tiny chat model for the chat tests: a Qwen2-shaped model trained here, in
seconds, to answer a handful of messages by heart in ChatML, so that its
replies (and the <|im_end|> that ends them) are known; converted with our
converter, which writes tokenizer_config.json's chat template into the file
as `tokenizer.chat_template`; chat-plain.gguf is the same file without that key
(removed by gguf-py's own gguf_new_metadata script).
"""
import json
import subprocess
import sys

CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] "
          "+ '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
          "{% endif %}")

# What the model learns: each user message has one answer, whatever came before.
ANSWERS = {"hello": "hi there", "how are you": "fine thanks", "bye": "see you later",
           "what is red": "a color", "count": "one two three"}
SYSTEMS = (None, "be kind")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
STEPS = 250


def conversations():
    """Training conversations: every system prompt, the questions in several orders."""
    qs = list(ANSWERS)
    orders = [qs, qs[::-1], qs[1::2] + qs[::2]]
    out = []
    for system in SYSTEMS:
        for order in orders:
            msgs = [{"role": "system", "content": system}] if system else []
            for q in order:
                msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": ANSWERS[q]}]
            out.append(msgs)
    return out


def build_chat_model(root, steps=STEPS):
    """root/hf (the HF folder) and root/chat.gguf (with the template); returns the GGUF path."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    from edgerun.chat import render
    from edgerun.convert import convert

    hf = root / "hf"
    hf.mkdir(parents=True, exist_ok=True)
    texts = [render(CHATML, c, add_generation_prompt=False) for c in conversations()]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts * 4 + ["the cat sat on a mat", "once upon a time"], trainer)
    tok.save(str(hf / "tokenizer.json"))
    (hf / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "GPT2Tokenizer", "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
        "unk_token": "<|endoftext|>", "add_bos_token": False, "add_prefix_space": False, "chat_template": CHATML}))
    fast = PreTrainedTokenizerFast(tokenizer_file=str(hf / "tokenizer.json"))
    seqs = [fast(t, add_special_tokens=False)["input_ids"] for t in texts]

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, rms_norm_eps=1e-5,
                      rope_theta=10000.0, tie_word_embeddings=False, bos_token_id=0, eos_token_id=0)
    model = Qwen2ForCausalLM(cfg).float()
    n = max(len(s) for s in seqs)
    ids = torch.zeros((len(seqs), n), dtype=torch.long)
    labels = torch.full((len(seqs), n), -100, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s)
        labels[i, :len(s)] = torch.tensor(s)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    model.train()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)       # a tiny model: more threads only contend (25x slower on a busy machine)
    try:
        for _ in range(steps):
            loss = model(input_ids=ids, labels=labels).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        torch.set_num_threads(threads)
    model.eval()
    model.save_pretrained(str(hf))
    out = root / "chat.gguf"
    convert(hf, out, "f32", quiet=True)        # the template from tokenizer_config.json
    (root / "chatml.jinja").write_text(CHATML)
    plain = root / "chat-plain.gguf"
    subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", str(out), str(plain),
                    "--remove-metadata", "tokenizer.chat_template", "--force"],
                   check=True, capture_output=True)
    return out, float(loss.detach()) if steps else None


def chat_model_path(tmp_path_factory):
    """The chat model, built once per test session (shared by the chat test files)."""
    root = tmp_path_factory.getbasetemp() / "chat_model"
    out = root / "chat.gguf"
    if not out.exists():
        build_chat_model(root)
    return out


class Reference:
    """transformers on the chat model's HF folder: the template's token ids and
    greedy replies, stopping where the vocabulary ends a turn."""

    def __init__(self, gguf_path):
        from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast
        hf = gguf_path.parent / "hf"
        self.tok = PreTrainedTokenizerFast(tokenizer_file=str(hf / "tokenizer.json"), bos_token="<|endoftext|>",
                                           eos_token="<|endoftext|>")
        self.model = AutoModelForCausalLM.from_pretrained(str(hf), dtype="float32").eval()
        self.stop_ids = [self.tok.convert_tokens_to_ids(t) for t in ("<|endoftext|>", "<|im_end|>")]

    def prompt_ids(self, messages, template=CHATML):
        out = self.tok.apply_chat_template(messages, chat_template=template, tokenize=True,
                                           add_generation_prompt=True)
        return list(out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out)

    def reply(self, messages, max_tokens=64, template=CHATML):
        import torch
        ids = self.prompt_ids(messages, template)
        x = torch.tensor([ids])
        out = []
        with torch.no_grad():
            for _ in range(max_tokens):
                t = int(self.model(input_ids=x).logits[0, -1].argmax())
                if t in self.stop_ids:
                    break
                out.append(t)
                x = torch.cat([x, torch.tensor([[t]])], dim=1)
        return self.tok.decode(out)


def rambler_path(tmp_path_factory):
    """The chat model with the output rows of its end-of-turn tokens zeroed:
    it answers as the chat model does and then never ends its turn (their
    logits stay 0 while the best of the others is positive), so a test has a
    reply that runs as long as it likes and can interrupt it."""
    chat = chat_model_path(tmp_path_factory)
    root = chat.parent / "rambler"
    out = root / "rambler.gguf"
    if out.exists():
        return out
    import shutil

    import torch
    from transformers import AutoModelForCausalLM

    from edgerun.convert import convert
    src = chat.parent / "hf"
    hf = root / "hf"
    hf.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(src / name, hf / name)
    model = AutoModelForCausalLM.from_pretrained(str(src), dtype="float32")
    with torch.no_grad():
        for i in range(len(SPECIALS)):      # the specials are ids 0..2: end-of-text, im_start, im_end
            model.lm_head.weight[i].zero_()
    model.save_pretrained(str(hf))
    plain = root / "rambler-plain.gguf"
    convert(hf, plain, "f32", quiet=True)
    (root / "chatml.jinja").write_text(CHATML)
    subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", str(plain), str(out),
                    "--chat-template-file", str(root / "chatml.jinja"), "--force"], check=True, capture_output=True)
    return out
