"""The addition task of the embedded default model: problems, text format, answer checking.

Shared by the training script (scripts/train_default_model.py), the demo (scripts/demo.py)
and the tests (tests/test_default_model.py), so all three agree on what a problem looks like
and which 200 problems are held out.

Text format, one problem per sequence:

    prompt:  "0123+0456="        both operands zero-padded to N_DIGITS digits
    answer:  "97500"             the sum zero-padded to N_DIGITS+1 digits, written REVERSED
                                  (least significant digit first), then EOS

Why reversed: a left-to-right decoder that writes the least significant digit first only
needs the two operand digits at that position and the carry it has just produced, so a
model of under a million parameters learns the task in minutes on a CPU. Written most
significant digit first, every output digit depends on the whole carry chain below it and
the same model needs far more training. The reversal is part of the answer format, not
hidden: `parse_answer` reverses the digits back, and the demo prints both the raw model
output and the number it means.

Why zero-padded: every prompt then has the same length and digit i of each operand sits at
a fixed offset, which is what lets so small a model align the operand digits.
"""
import random

N_DIGITS = 4            # operands 0 .. 9999; the sum has at most N_DIGITS+1 digits
ANSWER_DIGITS = N_DIGITS + 1
# Generation budget: the answer's digits plus the EOS that ends it. A model that does not
# stop in time writes an extra digit, which parse_answer turns into a wrong number.
MAX_NEW_TOKENS = ANSWER_DIGITS + 1
HELD_OUT_SEED = 20240611
HELD_OUT_COUNT = 200
ALPHABET = "0123456789+="


def _operand(rng):
    # Draw the digit count first, then the number: uniform over 0..10^N-1 would make almost
    # every operand N digits long and leave short numbers (and their carries into zero
    # padding) nearly untested.
    k = rng.randint(1, N_DIGITS)
    lo = 0 if k == 1 else 10 ** (k - 1)
    return rng.randint(lo, 10 ** k - 1)


def _draw(n, rng, exclude):
    out = []
    while len(out) < n:
        a, b = _operand(rng), _operand(rng)
        if (a, b) not in exclude:
            out.append((a, b))
    return out


_held_out_cache = None


def held_out():
    """The fixed 200 test problems: distinct pairs, the same on every machine."""
    global _held_out_cache
    if _held_out_cache is None:
        rng = random.Random(HELD_OUT_SEED)
        seen, probs = set(), []
        while len(probs) < HELD_OUT_COUNT:
            a, b = _operand(rng), _operand(rng)
            if (a, b) not in seen:
                seen.add((a, b))
                probs.append((a, b))
        _held_out_cache = probs
    return list(_held_out_cache)


def held_out_keys():
    """Set of pairs training must never see: each held-out (a, b) and its mirror (b, a),
    so the model cannot pass the test by having memorised the commuted problem."""
    keys = set()
    for a, b in held_out():
        keys.add((a, b))
        keys.add((b, a))
    return keys


def make_problems(n, seed, split):
    """n problems (a, b) drawn with `seed`.

    split="test": the held-out set (seed must be HELD_OUT_SEED, n at most 200; the first n).
    split="train": problems drawn from the same distribution, never one of the held-out
    pairs or their mirrors.
    """
    if split == "test":
        if seed != HELD_OUT_SEED:
            raise ValueError(f"the test split is fixed: seed must be HELD_OUT_SEED ({HELD_OUT_SEED})")
        if not 0 <= n <= HELD_OUT_COUNT:
            raise ValueError(f"the test split has {HELD_OUT_COUNT} problems, asked for {n}")
        return held_out()[:n]
    if split == "train":
        return _draw(n, random.Random(seed), held_out_keys())
    raise ValueError(f"split must be 'train' or 'test', not {split!r}")


def prompt(a, b):
    """The text given to the model for a + b."""
    if not (0 <= a < 10 ** N_DIGITS and 0 <= b < 10 ** N_DIGITS):
        raise ValueError(f"operands must be in 0..{10 ** N_DIGITS - 1}")
    return f"{a:0{N_DIGITS}d}+{b:0{N_DIGITS}d}="


def answer_text(a, b):
    """What the model is trained to generate after prompt(a, b) (before EOS)."""
    return str(a + b).zfill(ANSWER_DIGITS)[::-1]


def parse_answer(generated_text):
    """The number a generated answer means, or None when it holds no answer.

    Takes the run of digits at the start of the text (the tokenizer's word-boundary mark
    and spaces are ignored) and un-reverses it. Anything else after the digits (a second
    problem, junk) is ignored; extra or missing digits change the number and so count as
    wrong.
    """
    text = generated_text.replace("\u2581", " ").lstrip()
    digits = []
    for ch in text:
        if ch.isdigit() and ch in "0123456789":
            digits.append(ch)
        else:
            break
    if not digits:
        return None
    return int("".join(reversed(digits)))


def is_correct(a, b, generated_text):
    return parse_answer(generated_text) == a + b


def training_corpus(n, seed):
    """Lines of full examples (prompt + answer) for training the tokenizer."""
    return [prompt(a, b) + answer_text(a, b) for a, b in make_problems(n, seed, "train")]
