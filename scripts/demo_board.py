#!/usr/bin/env python3
"""`make demo`: the embedded model on a Raspberry Pi 5 build, under emulation and natively.

Cross-builds edgerun for a board (default rpi5: gcc, -mcpu=cortex-a76) and for this
machine (the `host` board), runs both builds' edgerun-cli on the held-out addition
problems of scripts/addition_task.py (the board build under qemu-aarch64 with the
board's CPU model), and prints the answers side by side, the accuracy of each and a
short latency table. Emulated time says nothing about the real board's speed (qemu
translates every instruction); the table shows what the runtime measured, so the
two columns differ by the emulation cost, not by the board.
"""
import argparse
import pathlib
import statistics
import sys

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "pybind"))
import addition_task as task  # noqa: E402
from edgerun import boards  # noqa: E402
from edgerun.boards import build, tests as board_test  # noqa: E402
from edgerun.errors import EdgerunError  # noqa: E402


def pct(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


def latency(rows, seconds):
    ttft = [r["ttft_ms"] for r in rows]
    per_tok = [r["decode_ms"] / (r["n_gen"] - 1) for r in rows if r["n_gen"] > 1]
    return {"TTFT p50 (ms)": pct(ttft, 50), "TTFT p90 (ms)": pct(ttft, 90),
            "per token p50 (ms)": pct(per_tok, 50), "per token p90 (ms)": pct(per_tok, 90),
            "problems / s (wall)": len(rows) / seconds if seconds else float("nan")}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--board", default="rpi5", help="board to cross-build for (default rpi5)")
    ap.add_argument("--cpu", default=None, help="qemu CPU model (default: the board's first)")
    ap.add_argument("--problems", type=int, default=task.HELD_OUT_COUNT, help="held-out problems (max 200)")
    ap.add_argument("--show", type=int, default=10, help="examples to print")
    ap.add_argument("--min-accuracy", type=float, default=0.99, help="exit 1 below this accuracy")
    args = ap.parse_args(argv)

    try:
        board = boards.load(args.board)
        if board.is_native:
            raise EdgerunError("pick a cross board (e.g. rpi5); the native side runs anyway")
        cpu = args.cpu or board.qemu_cpus[0]
        print(f"building {board.name} ({' '.join(board.cflags)}) and host ...", file=sys.stderr, flush=True)
        bdir = build.ensure_built(board, log=sys.stderr)
        hdir = build.ensure_built("host", log=sys.stderr)
        prompts = bdir / "edgerun-test" / "demo-prompts.txt"
        problems = board_test.write_prompts(prompts, args.problems)
        runs = {}
        for label, b, c, d in (("native (x86-64)", "host", None, hdir), (f"qemu {cpu}", board, cpu, bdir)):
            print(f"running {label} ...", file=sys.stderr, flush=True)
            header, rows, secs = board_test.run_eval(b, c, d, prompts, logits=False)
            runs[label] = (header, rows, secs)
    except EdgerunError as e:
        print(f"demo: error: {e}", file=sys.stderr)
        return 1

    labels = list(runs)
    print(f"edgerun demo: the embedded {task.N_DIGITS}-digit addition model, built for {board.name} "
          f"({board.description})")
    print("The model writes the sum least-significant digit first; both builds run the same file.\n")
    w = len(task.prompt(0, 0))
    shown = list(range(min(args.show, len(problems))))
    shown += [i for i in range(len(problems)) if i not in shown
              and any(not task.is_correct(*problems[i], runs[x][1][i]["text"]) for x in labels)][:5]
    table = []
    for i in shown:
        a, b = problems[i]
        cells = []
        for x in labels:
            t = runs[x][1][i]["text"]
            cells.append(f"{t!r} = {task.parse_answer(t)} {'✓' if task.is_correct(a, b, t) else '✗'}")
        table.append((task.prompt(a, b), cells, a + b))
    cw = max([len(x) for x in labels] + [len(c) for _, cells, _ in table for c in cells])
    print(f"  {'prompt':<{w}}  " + "  ".join(f"{x:<{cw}}" for x in labels) + "  expected")
    for p, cells, total in table:
        print(f"  {p:<{w}}  " + "  ".join(f"{c:<{cw}}" for c in cells) + f"  {total}")

    print()
    accs = {}
    for x in labels:
        correct = sum(task.is_correct(a, b, r["text"]) for (a, b), r in zip(problems, runs[x][1]))
        accs[x] = correct / len(problems)
        print(f"  accuracy {x:<{cw}}  {correct}/{len(problems)} = {accs[x] * 100:.1f}%  "
              f"(kernels: {runs[x][0]['isa']})")
    same = all(r1["ids"] == r2["ids"] for r1, r2 in zip(runs[labels[0]][1], runs[labels[1]][1]))
    print(f"  the two builds generated {'identical' if same else 'DIFFERENT'} tokens for every problem")

    print(f"\n  {'latency (greedy, runtime timers)':<32}  " + "  ".join(f"{x:>{cw}}" for x in labels))
    lat = {x: latency(runs[x][1], runs[x][2]) for x in labels}
    for k in lat[labels[0]]:
        print(f"  {k:<32}  " + "  ".join(f"{lat[x][k]:>{cw}.3f}" for x in labels))
    print(f"\n  {runs[labels[1]][0]['model']}, {len(problems)} problems, arena "
          f"{runs[labels[0]][0]['arena_bytes']} bytes; emulated time is not board time")
    return 0 if all(a >= args.min_accuracy for a in accs.values()) and same else 1


if __name__ == "__main__":
    sys.exit(main())
