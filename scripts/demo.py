#!/usr/bin/env python3
"""`make demo`: the embedded default model adds numbers through edgerun.

Runs models/edgerun-add.gguf (a tiny Llama trained by scripts/train_default_model.py)
through `edgerun.Model` on the 200 held-out problems of scripts/addition_task.py, greedy,
and prints a table of examples, the accuracy and the runtime's own figures.
"""
import argparse
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import addition_task as task  # noqa: E402


def _import_edgerun():
    try:
        import edgerun
    except ImportError:
        # A source checkout that was built but not pip-installed.
        sys.path.insert(0, str(REPO / "pybind"))
        import edgerun
    return edgerun


def open_model(edgerun, path, n_threads):
    kw = {"n_threads": n_threads} if n_threads else {}
    if path:
        return edgerun.Model(path, **kw)
    return edgerun.Model(**kw)   # the embedded default: models/edgerun-add.gguf


def run(model, problems):
    """Generates an answer for each problem; returns rows and the seconds it took."""
    rows = []
    t0 = time.perf_counter()
    stats = []
    for a, b in problems:
        text = model.generate(task.prompt(a, b), max_tokens=task.MAX_NEW_TOKENS, temperature=0)
        stats.append(model.stats())
        rows.append((a, b, text, task.parse_answer(text), task.is_correct(a, b, text)))
    return rows, time.perf_counter() - t0, stats


def _median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else float("nan")


def _fmt_stats(stats):
    """Runtime figures over all generations: medians, since the first calls warm caches."""
    def med(key):
        return _median([s[key] for s in stats if isinstance(s.get(key), (int, float))])
    last = stats[-1] if stats else {}
    lines = [f"  time to first token: {med('ttft_ms'):.3f} ms (median)",
             f"  prefill: {med('prefill_tokens_per_s'):,.0f} tokens/s, "
             f"decode: {med('decode_tokens_per_s'):,.0f} tokens/s (medians)"]
    arena = last.get("arena")
    if isinstance(arena, dict):
        parts = ", ".join(f"{k} {v.get('bytes', v) if isinstance(v, dict) else v}"
                          for k, v in arena.items())
        lines.append(f"  arena: {last.get('arena_total', '?')} bytes ({parts})")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="GGUF file (default: the embedded models/edgerun-add.gguf)")
    ap.add_argument("--threads", type=int, default=0, help="runtime threads (default: runtime's)")
    ap.add_argument("--show", type=int, default=12, help="examples to print")
    ap.add_argument("--min-accuracy", type=float, default=0.99,
                    help="exit with status 1 below this accuracy")
    args = ap.parse_args(argv)

    edgerun = _import_edgerun()
    model = open_model(edgerun, args.model, args.threads)
    problems = task.make_problems(task.HELD_OUT_COUNT, task.HELD_OUT_SEED, "test")
    rows, seconds, stats = run(model, problems)

    print(f"edgerun demo: a {task.N_DIGITS}-digit addition model trained by "
          "scripts/train_default_model.py")
    print("The model writes the sum least-significant digit first; 'means' reads it back.\n")
    w = len(task.prompt(0, 0))
    print(f"  {'prompt':<{w}}  {'model wrote':<11}  {'means':>6}  {'expected':>8}")
    shown = rows[:args.show]
    # Show any mistakes too, so a bad run explains itself.
    shown += [r for r in rows[args.show:] if not r[4]][:5]
    for a, b, text, value, ok in shown:
        print(f"  {task.prompt(a, b):<{w}}  {text!r:<11}  {str(value):>6}  {a + b:>8}  "
              f"{'✓' if ok else '✗'}")
    correct = sum(r[4] for r in rows)
    acc = correct / len(rows)
    print(f"\naccuracy on the {len(rows)} held-out problems (greedy): "
          f"{correct}/{len(rows)} = {acc * 100:.1f}%")
    print(f"wall time for all {len(rows)} problems: {seconds:.2f}s "
          f"({seconds / len(rows) * 1000:.1f} ms per problem)")
    print(f"runtime figures ({model.stats().get('n_prompt', '?')}-token prompts):")
    print("\n".join(_fmt_stats(stats)))
    return 0 if acc >= args.min_accuracy else 1


if __name__ == "__main__":
    sys.exit(main())
