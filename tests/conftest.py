"""Shared fixtures: the package on sys.path, third-party data, tiny HF models.

Tiny models are built here from seeded random weights with transformers, saved
with save_pretrained next to a small byte-level BPE tokenizer trained in the
test (so nothing depends on downloaded data), and converted with our converter.
Everything is cached per test session: building and converting costs seconds.
"""
import json
import pathlib
import sys

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent

try:
    import edgerun  # noqa: F401  (installed package)
except ImportError:
    sys.path.insert(0, str(REPO / "pybind"))


def pytest_configure(config):
    config.addinivalue_line("markers", "long: slow tests (minutes); excluded by default")
    config.addinivalue_line("markers", "bench: benchmarks; excluded by default")
    config.addinivalue_line("markers", "qemu: a board cross build under qemu-user; excluded by default "
                                       "(make test-qemu)")


@pytest.fixture(scope="session")
def repo_root():
    return REPO


@pytest.fixture(scope="session")
def shared_data():
    """<repo>/../shared/data: third-party models and tokenizers (absent in a user's clone)."""
    p = REPO.parent / "shared" / "data"
    if not p.is_dir():
        pytest.skip("third-party test data (../shared/data) is not present")
    return p


# ---------------------------------------------------------------- tiny tokenizer

_WORDS = ("the cat dog sat on a mat and ran to big small red blue house tree one two three four "
          "five apple banana hello world edge run model token text once upon time there was little "
          "girl boy who liked play with ball sun moon star sky green day night happy sad").split()


def _corpus(n=400, seed=0):
    rng = np.random.RandomState(seed)
    lines = []
    for _ in range(n):
        k = rng.randint(3, 12)
        s = " ".join(_WORDS[i] for i in rng.randint(0, len(_WORDS), k))
        lines.append(s.capitalize() + rng.choice([".", "!", "?", ", 12+34=46.", " é ü ñ 日本 😀."]))
    return lines


def build_tokenizer(out_dir, vocab_size=384):
    """A GPT-2-style byte-level BPE (tokenizer.json + tokenizer_config.json);
    returns its vocabulary size. `<|endoftext|>` is id 0 and serves as BOS/EOS."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_corpus(), trainer)
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(out_dir / "tokenizer.json"))
    (out_dir / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "GPT2Tokenizer", "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
        "unk_token": "<|endoftext|>", "add_bos_token": False, "add_prefix_space": False}))
    return tok.get_vocab_size()


# ---------------------------------------------------------------- tiny models

# name -> (arch, tie_word_embeddings, rope_theta). All have hidden 64, 2 layers,
# 4 query heads over 2 KV heads (GQA), intermediate 128.
VARIANTS = {
    "llama_tied": ("llama", True, 10000.0),
    "llama_untied_theta5e5": ("llama", False, 500000.0),
    "qwen2_untied": ("qwen2", False, 1000000.0),
    "qwen2_tied": ("qwen2", True, 10000.0),
}

# Models outside VARIANTS (whose tests assume the shape above): name -> (arch,
# tied, rope_theta, config overrides). qwen2_8kv has 8 K/V heads of 32 (16
# query heads, groups of 2) and Q/K/V biases: enough K/V heads for a decode
# step to take head ranges at 1 and 2 threads (model.h, er_att_heads), the
# path of forward.c's one-dispatch attention block. llama_1kv has Gemma 3's
# grouping, 4 query heads on one K/V head: fewer K/V heads than threads.
SHAPED = {
    "qwen2_8kv": ("qwen2", False, 1000000.0, dict(hidden_size=512, num_attention_heads=16, num_key_value_heads=8)),
    "llama_1kv": ("llama", False, 500000.0, dict(num_attention_heads=4, num_key_value_heads=1)),
}


def build_hf(out_dir, arch, tied, rope_theta, seed=0, shape=None):
    """Saves a seeded random-init model; returns (model, vocab size).

    Weights are drawn with std 0.2 (not HF's 0.02): near-uniform logits would
    make greedy comparisons hinge on ties; these give peaked distributions."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM
    n_vocab = build_tokenizer(out_dir)
    kw = dict(vocab_size=n_vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5,
              rope_theta=rope_theta, tie_word_embeddings=tied, bos_token_id=0, eos_token_id=0,
              initializer_range=0.2)
    kw.update(shape or {})
    torch.manual_seed(seed)
    if arch == "llama":
        model = LlamaForCausalLM(LlamaConfig(**kw))
    else:
        model = Qwen2ForCausalLM(Qwen2Config(**kw))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))   # non-trivial norm gains
            elif name.endswith(".bias"):
                p.copy_(0.5 * torch.randn_like(p))         # qwen2: biases that matter
    model = model.float().eval()
    model.save_pretrained(str(out_dir))
    return model, n_vocab


class TinyModels:
    """Session cache of tiny HF folders and their GGUF conversions."""

    def __init__(self, root):
        self.root = root
        self._hf = {}
        self._gguf = {}

    def hf(self, variant):
        if variant not in self._hf:
            arch, tied, theta, shape = SHAPED[variant] if variant in SHAPED else VARIANTS[variant] + (None,)
            d = self.root / variant / "hf"
            model, n_vocab = build_hf(d, arch, tied, theta, shape=shape)
            self._hf[variant] = (d, model, n_vocab)
        return self._hf[variant]

    def gguf(self, variant, qtype="f32"):
        key = (variant, qtype)
        if key not in self._gguf:
            from edgerun.convert import convert
            d, _, _ = self.hf(variant)
            out = self.root / variant / f"{variant}-{qtype}.gguf"
            convert(d, out, qtype, quiet=True)
            self._gguf[key] = out
        return self._gguf[key]


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    return TinyModels(tmp_path_factory.mktemp("tiny"))


def hf_logits(model, ids):
    import torch
    # Models this small run fastest on one thread; torch's default pool of
    # all cores only contends with everything else on a busy CI machine.
    torch.set_num_threads(1)
    with torch.no_grad():
        return model(torch.tensor([list(ids)])).logits[0].double().numpy()


def hf_greedy(model, ids, n_new):
    """Greedy continuation with transformers, one full forward per step (the
    model is tiny; no cache, no generation-config surprises such as EOS stops)."""
    seq = list(ids)
    for _ in range(n_new):
        seq.append(int(np.argmax(hf_logits(model, seq)[-1])))
    return seq[len(ids):]


def rel_err(a, b):
    """max|a-b| / max|b|: the error relative to the logits' scale."""
    return float(np.abs(np.asarray(a, np.float64) - b).max() / np.abs(b).max())


def logits_repacked_and_not(path, ids, monkeypatch, **open_kw):
    """(isa, the plan's "repacked" section, logits with the interleaved
    layouts, logits with $EDGERUN_REPACK=0): one model file both ways."""
    import edgerun
    with edgerun.Model(path, **open_kw) as m:
        isa = m.isa
        repacked = {s["name"]: s for s in m.plan()["sections"]}["repacked"]
        got = m.logits(ids)
    with monkeypatch.context() as mp:
        mp.setenv("EDGERUN_REPACK", "0")
        with edgerun.Model(path, **open_kw) as m:
            off = {s["name"]: s for s in m.plan()["sections"]}["repacked"]
            want = m.logits(ids)
    assert off["bytes"] == 0
    return isa, repacked, got, want


KQ_LAYERS = 8


@pytest.fixture(scope="session")
def kmodel(tmp_path_factory):
    """(folder, n_vocab): a tiny seeded Hugging Face Llama wide enough for
    K-quant super-blocks (hidden 256, intermediate 512, KQ_LAYERS layers),
    for the K-quant conversion tests and the CUDA ones."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    d = tmp_path_factory.mktemp("kq") / "hf"
    n_vocab = build_tokenizer(d)
    cfg = LlamaConfig(vocab_size=n_vocab, hidden_size=256, intermediate_size=512, num_hidden_layers=KQ_LAYERS,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128, rms_norm_eps=1e-5,
                      tie_word_embeddings=False, bos_token_id=0, eos_token_id=0, initializer_range=0.05)
    torch.manual_seed(5)
    model = LlamaForCausalLM(cfg).float().eval()
    # Non-trivial norm gains. With gains of exactly 1, the first layer's input
    # is a common multiple of quantized embedding values, whose ratios are
    # small fractions: 127 * x / max|x| then lands exactly on .5 for some
    # elements, and float32-vs-float64 noise decides the Q8_K rounding there
    # (a systematic flip, measured at 3e-2 for one token).
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
    model.save_pretrained(str(d))
    return d, n_vocab
