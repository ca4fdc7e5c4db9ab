"""On-device control script: switch between models in one process.

Opens model A, generates, closes it (its arena and mapping are released), opens
model B, generates, then reopens A and checks it answers exactly as before, so
nothing of B leaked into A. Each model is given as

    PATH[:PROMPT[:EXPECTED_IDS]]     EXPECTED_IDS: comma-separated greedy ids

and, when EXPECTED_IDS is given, the generated ids must start with them.

    python3 examples/device/switch_models.py models/edgerun-add.gguf:0012+0034= \\
        other.gguf:"Once upon a time":25,3,6,8
"""
import sys

import edgerun


def parse(spec):
    parts = spec.split(":", 2)
    path = parts[0]
    prompt = parts[1] if len(parts) > 1 and parts[1] else "0012+0034="
    expected = [int(x) for x in parts[2].split(",")] if len(parts) > 2 and parts[2] else None
    return path, prompt, expected


def run(path, prompt, expected, n):
    with edgerun.Model(path, n_threads=1) as m:
        ids = m.tokenizer.encode(prompt, add_special=True)
        out = m.generate(ids, max_tokens=n)
        text = m.tokenizer.decode(out)
        st = m.stats()
        print(f"{m.path.name}: {m.hparams['n_params']} params, arena {st['arena_total']} bytes, isa {m.isa}")
        print(f"  {prompt!r} -> {text!r}  ({st['n_generated']} tokens, {st['decode_tokens_per_s']:.1f} tok/s)")
        if expected is not None and out[:len(expected)] != expected[:len(out)]:
            print(f"  MISMATCH: expected ids {expected[:len(out)]}, got {out}")
            return None
        return out


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    a, b = parse(sys.argv[1]), parse(sys.argv[2])
    n = 24
    first = run(*a, n)
    second = run(*b, n)
    again = run(*a, n)
    if first is None or second is None or again is None:
        print("RESULT switch_models FAILED: output differs from the expected ids")
        return 1
    if again != first:
        print(f"RESULT switch_models FAILED: model A answered {first} first and {again} after the switch")
        return 1
    print("RESULT switch_models A -> B -> A, outputs as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
