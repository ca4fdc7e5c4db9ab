#!/usr/bin/env python3
"""Train edgerun's embedded default model: a tiny Llama that adds two 4-digit numbers.

Everything comes from this script: the training problems are generated on the fly (the
task is defined in scripts/addition_task.py), the SentencePiece tokenizer is trained on
generated text, the model is a `transformers.LlamaForCausalLM` trained from a seeded random
init on CPU, and the result is written as a Hugging Face folder, evaluated on the 200
held-out problems and (with --gguf) converted to the GGUF file that ships as
models/edgerun-add.gguf.

    python scripts/train_default_model.py --gguf models/edgerun-add.gguf

The same seed and step count on the same machine give the same weights, bit for bit
(torch CPU kernels with a fixed thread count are deterministic).
"""
import argparse
import io
import json
import math
import os
import pathlib
import platform
import sys
import time

import torch

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import addition_task as task  # noqa: E402

UNK_ID, BOS_ID, EOS_ID = 0, 1, 2


# ---- tokenizer ------------------------------------------------------------------------

def train_tokenizer(seed):
    """A SentencePiece BPE model over the task's text, returned as serialized bytes.

    The vocabulary comes out as the 3 specials, the 12 characters of ALPHABET and the
    word-boundary mark "▁": with split_digits no digit may merge with anything, and no
    other pair is frequent enough to earn a merge before the vocabulary is full.
    Training reads an iterator, not a file, so no temporary path ends up inside the
    model and the bytes are reproducible.
    """
    import sentencepiece as spm
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(task.training_corpus(4000, seed)),
        model_writer=buf,
        model_type="bpe",
        vocab_size=3 + len(task.ALPHABET) + 1,
        split_digits=True,
        byte_fallback=False,
        # The runtime implements no Unicode normalization; the task text is ASCII, so
        # "identity" loses nothing (and keeps the 240 KB NFKC table out of the file).
        normalization_rule_name="identity",
        character_coverage=1.0,
        unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID, pad_id=-1,
        num_threads=1,
        minloglevel=2,
    )
    return buf.getvalue()


class Codec:
    """Builds token-id tensors for batches of problems without calling SentencePiece per
    problem, and checks once that its ids equal SentencePiece's own encoding."""

    def __init__(self, sp):
        self.sp = sp
        self.digit = torch.tensor([sp.piece_to_id(str(d)) for d in range(10)])
        self.plus = sp.piece_to_id("+")
        self.eq = sp.piece_to_id("=")
        self.space = sp.piece_to_id("\u2581")
        for pid in (*self.digit.tolist(), self.plus, self.eq, self.space):
            if pid == UNK_ID:
                raise SystemExit("tokenizer is missing a character of the task alphabet")
        # BOS ▁ a(N) + b(N) =
        self.prompt_len = 1 + 1 + task.N_DIGITS + 1 + task.N_DIGITS + 1
        self.seq_len = self.prompt_len + task.ANSWER_DIGITS + 1  # + answer + EOS

    def _digits(self, x, n, reverse):
        pows = 10 ** torch.arange(n - 1, -1, -1) if not reverse else 10 ** torch.arange(n)
        return self.digit[(x[:, None] // pows) % 10]

    def batch(self, a, b):
        """[B, seq_len] ids of BOS + prompt + reversed answer + EOS."""
        B = a.shape[0]
        col = lambda v: torch.full((B, 1), v, dtype=torch.long)  # noqa: E731
        return torch.cat([
            col(BOS_ID), col(self.space),
            self._digits(a, task.N_DIGITS, False), col(self.plus),
            self._digits(b, task.N_DIGITS, False), col(self.eq),
            self._digits(a + b, task.ANSWER_DIGITS, True), col(EOS_ID)], dim=1)

    def self_check(self, problems):
        a = torch.tensor([p[0] for p in problems])
        b = torch.tensor([p[1] for p in problems])
        ids = self.batch(a, b)
        for row, (x, y) in zip(ids.tolist(), problems):
            want = [BOS_ID] + self.sp.encode(task.prompt(x, y) + task.answer_text(x, y)) + [EOS_ID]
            if row != want:
                raise SystemExit(f"codec disagrees with sentencepiece on {x}+{y}: {row} vs {want}")
            if self.sp.encode(task.prompt(x, y)) != row[1:self.prompt_len]:
                raise SystemExit(f"prompt of {x}+{y} does not tokenize as a prefix of the example")


class ProblemStream:
    """Endless seeded batches from the task distribution, minus the held-out pairs."""

    def __init__(self, seed):
        self.gen = torch.Generator().manual_seed(seed)
        keys = task.held_out_keys()
        self.held = torch.tensor(sorted(a * 10 ** task.N_DIGITS + b for a, b in keys))

    def _operands(self, n):
        # Same distribution as addition_task._operand: digit count uniform, then the value.
        k = torch.randint(1, task.N_DIGITS + 1, (n,), generator=self.gen)
        lo = torch.where(k == 1, torch.zeros_like(k), 10 ** (k - 1))
        hi = 10 ** k
        u = torch.rand(n, generator=self.gen, dtype=torch.float64)
        return lo + (u * (hi - lo)).long().clamp(max=hi - lo - 1)

    def next(self, n):
        a, b = self._operands(n + n // 8 + 8), self._operands(n + n // 8 + 8)
        keep = ~torch.isin(a * 10 ** task.N_DIGITS + b, self.held)
        a, b = a[keep][:n], b[keep][:n]
        if a.shape[0] < n:  # practically never: held-out pairs are 400 of 10^8
            more_a, more_b = self.next(n - a.shape[0])
            a, b = torch.cat([a, more_a]), torch.cat([b, more_b])
        return a, b


# ---- model ----------------------------------------------------------------------------

def build_model(args, vocab_size, seq_len):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=args.hidden,
        intermediate_size=args.hidden * 4,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        max_position_embeddings=max(64, seq_len),
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        hidden_act="silu",
        tie_word_embeddings=False,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        attention_bias=False,
        mlp_bias=False,
        initializer_range=0.02,
    )
    torch.manual_seed(args.seed)
    return LlamaForCausalLM(cfg)


def lr_at(step, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    t = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * t)))


def train(model, codec, args, log):
    stream = ProblemStream(args.seed + 1)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98),
                            weight_decay=0.01)
    P = codec.prompt_len
    model.train()
    losses = []
    t0, c0 = time.time(), time.process_time()
    for step in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args)
        a, b = stream.next(args.batch)
        ids = codec.batch(a, b)
        logits = model(input_ids=ids).logits
        # Loss only where the model predicts an answer digit or the closing EOS: the
        # operands are random, so predicting them would only add noise to the gradient.
        pred = logits[:, P - 1:-1].reshape(-1, logits.shape[-1])
        loss = torch.nn.functional.cross_entropy(pred, ids[:, P:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if step % args.log_every == 0 or step == args.steps - 1:
            log(f"step {step:5d}  loss {losses[-1]:.4f}  lr {lr_at(step, args):.2e}  "
                f"{time.time() - t0:6.1f}s")
    model.eval()
    return time.time() - t0, time.process_time() - c0, losses


# ---- evaluation -----------------------------------------------------------------------

@torch.no_grad()
def greedy(model, prompt_ids, max_new):
    """Greedy continuation of same-length prompts; each row stops at its first EOS.
    Returns the generated ids per row, EOS excluded."""
    seqs = torch.tensor(prompt_ids)
    done = torch.zeros(seqs.shape[0], dtype=torch.bool)
    outs = [[] for _ in prompt_ids]
    for _ in range(max_new):
        nxt = model(input_ids=seqs).logits[:, -1].argmax(-1)
        for i, t in enumerate(nxt.tolist()):
            if not done[i]:
                if t == EOS_ID:
                    done[i] = True
                else:
                    outs[i].append(t)
        seqs = torch.cat([seqs, nxt[:, None]], dim=1)
        if bool(done.all()):
            break
    return outs


def evaluate(model, sp, problems):
    """Exact-match accuracy through the text interface the runtime will use: prompts
    encoded by SentencePiece (with BOS), greedy ids decoded by SentencePiece, then parsed."""
    prompt_ids = [[BOS_ID] + sp.encode(task.prompt(a, b)) for a, b in problems]
    outs = greedy(model, prompt_ids, task.MAX_NEW_TOKENS)
    rows = []
    for (a, b), pids, gen in zip(problems, prompt_ids, outs):
        text = sp.decode(gen)
        rows.append({"a": a, "b": b, "prompt": task.prompt(a, b), "prompt_ids": pids,
                     "output_ids": gen, "output_text": text, "value": task.parse_answer(text),
                     "correct": task.is_correct(a, b, text)})
    acc = sum(r["correct"] for r in rows) / len(rows)
    return acc, rows


# ---- main -----------------------------------------------------------------------------

def convert_to_gguf(hf_dir, out, gtype, log):
    sys.path.insert(0, str(REPO / "pybind"))
    try:
        from edgerun.convert import convert
    except Exception as e:  # the package needs its native library; say what is missing
        raise SystemExit(f"--gguf: cannot import edgerun.convert ({e}); the HF folder is at "
                         f"{hf_dir}, convert it later with `edgerun convert {hf_dir} {out} "
                         f"--type {gtype}`")
    out = pathlib.Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    convert(str(hf_dir), str(out), gtype, quiet=True)
    log(f"wrote {out} ({out.stat().st_size} bytes, {gtype})")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--out", default=str(REPO / "build" / "default-model"),
                    help="output dir: hf/ (the Hugging Face folder) and report.json go here")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    # One thread by default: on this 2-core machine two threads gain little when it is idle
    # and run 3x slower when other jobs share it (threads spin waiting for each other), and
    # a single thread's float sums do not depend on how many cores the machine has.
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--log-every", type=int, default=100)
    ap.add_argument("--gguf", metavar="OUT", help="also convert to GGUF at OUT "
                    "(the shipped file is models/edgerun-add.gguf)")
    ap.add_argument("--gguf-type", default="f32", choices=["f32", "f16", "q8_0"])
    ap.add_argument("--min-accuracy", type=float, default=0.0,
                    help="exit with status 1 when held-out accuracy is below this")
    args = ap.parse_args(argv)

    import sentencepiece as spm
    import transformers

    torch.set_num_threads(args.threads)
    out = pathlib.Path(args.out)
    hf = out / "hf"
    hf.mkdir(parents=True, exist_ok=True)
    log = lambda s: print(s, flush=True)  # noqa: E731
    t_start = time.time()

    sp_bytes = train_tokenizer(args.seed)
    (hf / "tokenizer.model").write_bytes(sp_bytes)
    sp = spm.SentencePieceProcessor(model_proto=sp_bytes)
    log("tokenizer: " + " ".join(sp.id_to_piece(i) for i in range(sp.get_piece_size())))
    codec = Codec(sp)
    held = task.make_problems(task.HELD_OUT_COUNT, task.HELD_OUT_SEED, "test")
    codec.self_check(held + task.make_problems(200, args.seed, "train"))

    model = build_model(args, sp.get_piece_size(), codec.seq_len)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: {n_params} parameters, {args.layers} layers, hidden {args.hidden}")

    train_s, train_cpu_s, losses = train(model, codec, args, log)
    log(f"training took {train_s:.1f}s wall, {train_cpu_s:.1f}s CPU")

    model.save_pretrained(hf, safe_serialization=True)
    (hf / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "LlamaTokenizer",
        "add_bos_token": True, "add_eos_token": False,
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "model_max_length": codec.seq_len * 2,
        "clean_up_tokenization_spaces": False, "legacy": True,
    }, indent=2) + "\n")

    # Evaluate the saved folder, not the in-memory model, so the number describes what ships.
    from transformers import LlamaForCausalLM
    saved = LlamaForCausalLM.from_pretrained(hf, torch_dtype=torch.float32)
    saved.eval()
    acc, rows = evaluate(saved, sp, held)
    log(f"held-out accuracy: {acc * 100:.1f}% ({sum(r['correct'] for r in rows)}/{len(rows)}), "
        "torch greedy")
    for r in rows[:8]:
        log(f"  {r['prompt']:<12} -> {r['output_text']:<8} = {r['value']}  "
            f"(expected {r['a'] + r['b']}) {'ok' if r['correct'] else 'WRONG'}")
    for r in [r for r in rows if not r["correct"]][:10]:
        log(f"  wrong: {r['prompt']} -> {r['output_text']!r} (expected {r['a'] + r['b']})")

    report = {
        "task": f"{task.N_DIGITS}-digit + {task.N_DIGITS}-digit addition, answer reversed",
        "held_out_accuracy": acc,
        "held_out_correct": sum(r["correct"] for r in rows),
        "held_out_count": len(rows),
        "parameters": n_params,
        "train_seconds": round(train_s, 1),
        # CPU seconds over all threads: on a shared machine the wall time depends on the
        # neighbours, this does much less.
        "train_cpu_seconds": round(train_cpu_s, 1),
        # Mean answer-token loss over the first and the last 10% of the steps.
        "loss_start": sum(losses[:max(1, len(losses) // 10)]) / max(1, len(losses) // 10),
        "loss_end": sum(losses[-max(1, len(losses) // 10):]) / max(1, len(losses) // 10),
        "total_seconds": round(time.time() - t_start, 1),
        "seed": args.seed,
        "hyperparameters": {k: v for k, v in vars(args).items()
                            if k not in ("out", "gguf", "log_every", "min_accuracy")},
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__,
                     "sentencepiece": spm.__version__},
        "machine": {"cpu_count": os.cpu_count(), "threads": args.threads,
                    "platform": platform.platform()},
        # Tokens in, tokens out: what a runtime fed the same ids must reproduce.
        "held_out": [{k: r[k] for k in ("prompt", "prompt_ids", "output_ids", "output_text",
                                        "correct")} for r in rows],
    }
    if args.gguf:
        g = convert_to_gguf(hf, args.gguf, args.gguf_type, log)
        report["gguf"] = {"file": g.name, "bytes": g.stat().st_size, "type": args.gguf_type}
    # One held-out problem per line keeps the file short and diffable.
    head = json.dumps({k: v for k, v in report.items() if k != "held_out"}, indent=1)
    text = (head[:-2] + ',\n "held_out": [\n  '
            + ",\n  ".join(json.dumps(r) for r in report["held_out"]) + "\n ]\n}\n")
    json.loads(text)
    (out / "report.json").write_text(text)
    log(f"report: {out / 'report.json'}")
    if args.gguf:
        # Ship the tokenizer and the report beside the GGUF file: the tests check the
        # runtime against SentencePiece with this tokenizer, and against the ids above.
        stem = g.with_suffix("")
        stem.with_name(stem.name + ".tokenizer.model").write_bytes(sp_bytes)
        stem.with_name(stem.name + ".json").write_text(text)
        log(f"wrote {stem}.tokenizer.model and {stem}.json")
    return 0 if acc >= args.min_accuracy else 1


if __name__ == "__main__":
    sys.exit(main())
