"""`edgerun bench --qemu-isa`: the Arm kernel tables' speed over `generic`, under qemu-user.

For each emulated CPU model of the plan, the aarch64 edgerun-cli runs the 15M
benchmark models (F32, Q8_0, Q4_0, Q4_K; bench.bench_model) with the same
16-token prompt and 16 greedy decode steps, one thread, once per kernel table
that CPU can run (EDGERUN_ISA forces it), and once with no EDGERUN_ISA to see
which table the runtime picks by itself.

What is measured: the emulating thread's CPU time, from the CLI's --timings
file (prefill_cpu_us and each decode step's CPU time; board_bench.parse_timings
reads it). With one thread the guest's work all happens on that thread, and
CPU time leaves out the moments qemu sat descheduled on a busy host. Each
configuration runs `repeat` times, the repeats interleaved over the whole plan
(so a burst of host load hits one repeat of many configurations rather than
every repeat of one), and the best run counts: host noise only ever slows a
run down. The speed-up of a table is its best rate over `generic`'s best rate
on the same qemu CPU model and model file.

Every table must also give generic's greedy tokens on the same CPU model (the
same promise tests/test_isa_greedy.py makes for every type, F32 included), and
a forced table must be the one the run reports; either failure is an error row.

The binary: one build of plain Armv8.0-A (build/armv8-a, -march=armv8-a; the
ISA tables carry their own -march per file, runtime_c/src/kernels/meson.build).
A board build will not do: rpi5's -mcpu=cortex-a76 lets the compiler use
Armv8.2 instructions anywhere, so it dies with SIGILL on cortex-a72, and its
`generic` would be auto-vectorized for a newer core than cortex-a72's. One
baseline binary runs on every CPU model of the plan, and `generic` means the
same machine code on each of them.

Emulated speed is not hardware speed: qemu (TCG) runs many vector instructions
through C helper functions, so a NEON or SVE kernel can be slower than scalar
code under qemu and still be several times faster on silicon. What these
numbers are good for is regressions: a kernel change that makes a table slower
under the same qemu, or a table that silently falls back to generic (its
speed-up jumps to 1.00 and the run reports another table), shows up here
without the hardware.
"""
import copy
import json
import os
import pathlib
import re
import subprocess
import sys
import time

from . import board as board_bench
from .board import BenchError
from .. import console

# (qemu -cpu spec, tables to run, the table the runtime should pick by itself)
# The automatic choices follow runtime_c/src/kernels/dispatch.c: SDOT where the
# CPU has it, SMMLA prefill with i8mm, SVE only from 256-bit vectors up (at
# 128 bits it holds what NEON holds and pays for predicates).
SVE128 = "max,sve-default-vector-length=16"
SVE256 = "max,sve-default-vector-length=32"
SVE512 = "max,sve-default-vector-length=64"
PLAN = (
    ("cortex-a72", ("generic", "neon"), "neon"),
    ("cortex-a76", ("generic", "neon", "neon-dotprod"), "neon-dotprod"),
    (SVE128, ("generic", "neon-dotprod", "neon-i8mm", "sve"), "neon-i8mm"),
    (SVE256, ("generic", "sve"), "sve"),
    (SVE512, ("generic", "sve"), "sve"),
)
QUICK_CPUS = ("cortex-a76", SVE128)
TYPES = ("f32", "q8_0", "q4_0", "q4_k")
QUICK_TYPES = ("q8_0",)
SHAPE = "15m"
PROMPT_TOKENS = 16
GEN_TOKENS = 16
REPEAT = 2
RUN_TIMEOUT = 600

# The baseline build: named like a board so that edgerun.boards.build keeps it
# incremental and locked like the board dirs (build/armv8-a).
BASELINE_NAME = "armv8-a"
BASELINE_CFLAGS = ["-march=armv8-a"]

DOC_BEGIN = "<!-- edgerun bench --qemu-isa: begin (generated; edits inside are overwritten) -->"
DOC_END = "<!-- edgerun bench --qemu-isa: end -->"


def plan(quick=False, cpus=None):
    """The (cpu, tables, expected automatic table) list: the full plan, the quick
    one, or the full plan's entries for the given CPU specs."""
    rows = [p for p in PLAN if not quick or p[0] in QUICK_CPUS]
    if cpus:
        known = {p[0] for p in PLAN}
        for c in cpus:
            if c not in known:
                raise ValueError(f"--cpu {c!r} is not in the --qemu-isa plan (known: {', '.join(sorted(known))})")
        rows = [p for p in rows if p[0] in cpus]
    return rows


def baseline_board():
    """A board object for the plain Armv8.0-A build: rpi5's toolchain, qemu and
    sysroot with -march=armv8-a instead of its -mcpu."""
    from .. import boards
    src = boards.load("rpi5")
    data = copy.deepcopy(src.data)
    data.update(name=BASELINE_NAME, cpu="armv8-a", cflags=list(BASELINE_CFLAGS), features=["neon"],
                description="plain Armv8.0-A baseline with every Arm kernel table (edgerun bench --qemu-isa)")
    data["qemu"] = dict(data["qemu"], cpus=[p[0] for p in PLAN])
    return boards.Board(src.path, data)


def ensure_build(log=None):
    """build/armv8-a, configured and built when missing or stale (edgerun.boards.build).
    Raises MissingToolError naming the package when the cross compiler is absent."""
    from ..boards import build
    return build.ensure_built(baseline_board(), log=log)


# --------------------------------------------------------------------------- one run
def parse_ids(stdout):
    """The greedy ids edgerun-cli --print-ids wrote."""
    try:
        return [int(x) for x in stdout.split()]
    except ValueError:
        raise BenchError(f"edgerun-cli --print-ids printed something other than ids: {stdout.strip()[:200]}") from None


def run_once(board, cpu, cli, model, ids, gen_tokens, table, tfile, timeout=RUN_TIMEOUT):
    """One emulated run: `table` forced through EDGERUN_ISA (None: the runtime's
    own choice). Returns prefill/decode tokens/s by CPU time, the table the run
    reports and its greedy ids. Raises BenchError when the run fails."""
    from ..boards import qemu
    env = qemu.environment(board, cpu)
    env.pop("LD_PRELOAD", None)      # a sanitizer preload would instrument qemu, not the guest
    env.pop("EDGERUN_ISA", None)     # the user's choice must not leak into the automatic run
    if table is not None:
        env["EDGERUN_ISA"] = table
    tfile = pathlib.Path(tfile)
    tfile.unlink(missing_ok=True)
    # n = gen_tokens + 1: the first token comes out of prefill, the rest are decode steps
    argv = qemu.command(board, [cli, "run", str(model), "--ids", ",".join(map(str, ids)), "-n", str(gen_tokens + 1),
                                "--ignore-eos", "--no-echo", "--print-ids", "-t", "1", "--timings", str(tfile)])
    what = f"edgerun-cli on {cpu} with " + (f"EDGERUN_ISA={table}" if table else "the automatic table")
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{what} did not finish in {timeout} s") from None
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip()[-300:] or f"killed by signal {-r.returncode}"
        raise BenchError(f"{what} failed (exit {r.returncode}): {tail}")
    t = board_bench.parse_timings(tfile.read_text())
    stats = board_bench.parse_stats_line(r.stderr)
    decode_cpu = sum(t["steps_cpu_us"])
    if t.get("prefill_cpu_us", 0) <= 0 or decode_cpu <= 0:
        raise BenchError(f"{what}: the --timings file has no CPU time (clock_gettime failed under qemu?)")
    return {"prefill_tokens_per_s": t["prompt_tokens"] / (t["prefill_cpu_us"] / 1e6),
            "decode_tokens_per_s": len(t["steps_cpu_us"]) / (decode_cpu / 1e6),
            "prefill_cpu_us": t["prefill_cpu_us"], "decode_cpu_us": decode_cpu,
            "prompt_tokens": t["prompt_tokens"], "decode_steps": len(t["steps_cpu_us"]),
            "isa": stats["isa"], "ids": parse_ids(r.stdout)}


# --------------------------------------------------------------------------- the plan
def _model_workload(board, cpu, cli, model, prompt_tokens, gen_tokens):
    """Prompt ids and decode length for one model: bench.prompt_ids over its
    vocabulary, shrunk to its trained context (the embedded model is small)."""
    from ..boards import qemu
    from .engines import fit_to_context, prompt_ids
    env = qemu.environment(board, cpu)
    env.pop("LD_PRELOAD", None)
    r = subprocess.run(qemu.command(board, [cli, "info", str(model), "-t", "1"]), capture_output=True, text=True,
                       timeout=RUN_TIMEOUT, env=env)
    if r.returncode != 0:
        raise BenchError(f"edgerun-cli info {model} failed under qemu {cpu} (exit {r.returncode}): "
                         f"{(r.stderr or r.stdout).strip()[-300:]}")
    info = board_bench.parse_info(r.stdout)
    p, g = fit_to_context(info["n_ctx_train"], prompt_tokens, gen_tokens)
    return prompt_ids(info["n_vocab"], p), g


def measure(build_dir, models, the_plan, repeat=REPEAT, prompt_tokens=PROMPT_TOKENS, gen_tokens=GEN_TOKENS,
            workdir=None, log=None):
    """Runs the plan. `models`: {type name: GGUF path}. Returns the JSON-ready report
    (speed-ups and checks filled in by finish())."""
    from ..boards import prereqs
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    board = baseline_board()
    prereqs.require(*prereqs.for_run(board))
    build_dir = pathlib.Path(build_dir)
    cli = build_dir / "runtime_c" / "tools" / "edgerun-cli"
    if not cli.is_file():
        raise BenchError(f"{cli} is missing; build it: edgerun bench --qemu-isa builds {build_dir} itself, "
                         f"or run `edgerun build` for a board and pass its dir")
    workdir = pathlib.Path(workdir or build_dir / "bench-qemu-isa")
    workdir.mkdir(parents=True, exist_ok=True)
    t_start = time.time()
    load_before = os.getloadavg()
    work = {}
    for wtype, path in models.items():
        work[wtype] = _model_workload(board, the_plan[0][0], str(cli), path, prompt_tokens, gen_tokens)
    rows = [{"cpu": cpu, "label": board_bench.cpu_label(cpu), "table": table, "type": wtype,
             "model": str(models[wtype]), "runs": [], "run_errors": []}
            for cpu, tables, _ in the_plan for wtype in models for table in tables]
    first = next(iter(models))
    auto = [{"cpu": cpu, "label": board_bench.cpu_label(cpu), "expected": expect, "type": first,
             "model": str(models[first]), "runs": [], "run_errors": []} for cpu, _, expect in the_plan]
    n_runs = repeat * len(rows) + len(auto)
    done = 0
    with console.progress("edgerun bench --qemu-isa", total=n_runs) as bar:
        for k in range(repeat):
            for row in rows:
                ids, g = work[row["type"]]
                try:
                    res = run_once(board, row["cpu"], str(cli), row["model"], ids, g, row["table"],
                                   workdir / "timings.txt")
                    row["runs"].append(res)
                    msg = (f"prefill {res['prefill_tokens_per_s']:7.1f}  "
                           f"decode {res['decode_tokens_per_s']:7.1f} tok/s (ran {res['isa']})")
                except BenchError as e:
                    row["run_errors"].append(str(e))
                    msg = f"error: {e}"
                done += 1
                bar.advance(1, f"{row['label']} {row['table']} {row['type']}")
                log(f"bench --qemu-isa [{done}/{n_runs}] run {k + 1}/{repeat} {row['label']:<16} "
                    f"{row['table']:<12} {row['type']:<5} {msg}")
        for a in auto:
            ids, g = work[a["type"]]
            try:
                res = run_once(board, a["cpu"], str(cli), a["model"], ids, g, None, workdir / "timings.txt")
                a["runs"].append(res)
                msg = f"chose {res['isa']} (expected {a['expected']})"
            except BenchError as e:
                a["run_errors"].append(str(e))
                msg = f"error: {e}"
            done += 1
            bar.advance(1, f"automatic choice on {a['label']}")
            log(f"bench --qemu-isa [{done}/{n_runs}] automatic choice on {a['label']}: {msg}")
    report = {
        "kind": "qemu-isa",
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "seconds": round(time.time() - t_start, 1),
        "load_avg_before": list(load_before), "load_avg_after": list(os.getloadavg()),
        "host": board_bench.host_info(board.qemu_binary),
        "build": {"dir": str(build_dir), "cflags": list(BASELINE_CFLAGS)},
        "workload": {"prompt_tokens": len(next(iter(work.values()))[0]), "gen_tokens": next(iter(work.values()))[1],
                     "threads": 1, "repeat": repeat, "clock": "cpu",
                     "models": {t: str(p) for t, p in models.items()}},
        "plan": [{"cpu": c, "tables": list(t), "expected_automatic": e} for c, t, e in the_plan],
        "results": rows,
        "automatic": auto,
    }
    return finish(report)


def finish(report):
    """Fills in each row's best rates, its speed-up over generic on the same CPU
    model and type, and the checks (forced table honoured, greedy tokens equal
    to generic's, the automatic choice as expected) as "error". Separate from
    measure() so the arithmetic can be checked on a hand-made report; running
    it twice gives the same report."""
    rows = report["results"]
    generic = {}
    for r in rows:
        problems = list(r.get("run_errors", []))
        runs = r["runs"]
        for k in ("prefill_tokens_per_s", "decode_tokens_per_s", "ids", "isa"):
            r.pop(k, None)
        if runs:
            r["prefill_tokens_per_s"] = max(x["prefill_tokens_per_s"] for x in runs)
            r["decode_tokens_per_s"] = max(x["decode_tokens_per_s"] for x in runs)
            r["ids"], r["isa"] = runs[0]["ids"], runs[0]["isa"]
            wrong = sorted({x["isa"] for x in runs if x["isa"] != r["table"]})
            if wrong:
                problems.append(f"EDGERUN_ISA={r['table']} ran table {', '.join(wrong)}")
            if any(x["ids"] != r["ids"] for x in runs):
                problems.append("greedy tokens differ between repeats of the same table")
            if r["table"] == "generic":
                generic[(r["cpu"], r["type"])] = r
        elif not problems:
            problems.append("no run finished")
        r["problems"] = problems
    for r in rows:
        g = generic.get((r["cpu"], r["type"]))
        if g is None or "ids" not in r:
            r["prefill_speedup"] = r["decode_speedup"] = r["same_tokens_as_generic"] = None
        else:
            r["prefill_speedup"] = r["prefill_tokens_per_s"] / g["prefill_tokens_per_s"]
            r["decode_speedup"] = r["decode_tokens_per_s"] / g["decode_tokens_per_s"]
            r["same_tokens_as_generic"] = r["ids"] == g["ids"]
            if not r["same_tokens_as_generic"]:
                step = next(i for i, (a, b) in enumerate(zip(r["ids"] + [None], g["ids"] + [None])) if a != b)
                r["problems"].append(f"greedy tokens differ from generic's from step {step}")
    for a in report["automatic"]:
        problems = list(a.get("run_errors", []))
        a.pop("chosen", None)
        if a["runs"]:
            first = a["runs"][0]
            a["chosen"] = first["isa"]
            a["prefill_tokens_per_s"] = first["prefill_tokens_per_s"]
            a["decode_tokens_per_s"] = first["decode_tokens_per_s"]
            if a["chosen"] != a["expected"]:
                problems.append(f"the runtime chose {a['chosen']}, the plan expects {a['expected']} "
                                f"(runtime_c/src/kernels/dispatch.c)")
            g = generic.get((a["cpu"], a["type"]))
            if g is not None and first["ids"] != g["ids"]:
                problems.append("greedy tokens differ from generic's")
        elif not problems:
            problems.append("the run did not finish")
        a["problems"] = problems
    for r in rows + report["automatic"]:
        r.pop("error", None)
        problems = r.pop("problems")
        if problems:
            r["error"] = "; ".join(dict.fromkeys(problems))
    # `generic` is the same machine code on every CPU model, so its rates
    # should agree across them: how far they spread is this run's noise floor
    # (a speed-up moving by less than that between two runs means nothing).
    spread = {}
    for wtype in dict.fromkeys(r["type"] for r in rows):
        gs = [g for (cpu, t), g in generic.items() if t == wtype]
        if len(gs) > 1:
            spread[wtype] = {k: max(g[k] for g in gs) / min(g[k] for g in gs) - 1.0
                             for k in ("prefill_tokens_per_s", "decode_tokens_per_s")}
    report["generic_spread"] = spread
    report["errors"] = sum(1 for r in rows + report["automatic"] if "error" in r)
    return report


# --------------------------------------------------------------------------- output
def _types(report):
    seen = []
    for r in report["results"]:
        if r["type"] not in seen:
            seen.append(r["type"])
    return seen


def _pairs(report):
    seen = []
    for r in report["results"]:
        if (r["cpu"], r["table"]) not in seen:
            seen.append((r["cpu"], r["table"]))
    return seen


def _row(report, cpu, table, wtype):
    return next(r for r in report["results"] if r["cpu"] == cpu and r["table"] == table and r["type"] == wtype)


def _cell(r, key, fmt):
    v = r.get(key)
    if v is None:
        return "error" if "error" in r else "-"
    return fmt.format(v)


def _auto_by_cpu(report):
    return {a["cpu"]: a for a in report["automatic"]}


def format_text(report):
    """The terminal table: one line per (CPU model, table, type)."""
    head = ("qemu cpu", "table", "type", "prefill tok/s", "x generic", "decode tok/s", "x generic", "tokens")
    rows = [head]
    for r in report["results"]:
        same = r.get("same_tokens_as_generic")
        tokens = "-" if same is None else ("= generic" if same else "DIFFER")
        rows.append((r["label"], r["table"], r["type"], _cell(r, "prefill_tokens_per_s", "{:.1f}"),
                     _cell(r, "prefill_speedup", "{:.2f}"), _cell(r, "decode_tokens_per_s", "{:.1f}"),
                     _cell(r, "decode_speedup", "{:.2f}"), tokens))
    widths = [max(len(x[i]) for x in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in rows]
    for a in report["automatic"]:
        lines.append(f"automatic choice on {a['label']}: {a.get('chosen', '-')} (expected {a['expected']})")
    for r in report["results"] + report["automatic"]:
        if "error" in r:
            lines.append(f"ERROR {r['label']} {r.get('table', 'automatic')} {r['type']}: {r['error']}")
    return "\n".join(lines)


def _type_head(t):
    return t.upper() if t in TYPES else t


def _models_phrase(models):
    names = [pathlib.Path(p).name for p in models.values()]
    if all(re.fullmatch(r"llama15m-[a-z0-9_]+\.gguf", n) for n in names):
        return "the 15M-shape benchmark models (seeded random weights, as in the matrix above)"
    return ", ".join(names)


def format_markdown(report):
    """The docs/PERFORMANCE.md section."""
    w, h = report["workload"], report["host"]
    types = _types(report)
    la, lb = report["load_avg_before"], report["load_avg_after"]
    auto = _auto_by_cpu(report)
    lines = [
        "## Arm kernels under qemu: speed-up over generic",
        "",
        "Written by `make bench` (`edgerun bench --qemu-isa`, pybind/edgerun/bench/isa.py) between the",
        "markers around this section. Raw figures: build/bench/qemu_isa.json.",
        "",
        "**Emulated speed is not hardware speed.** qemu-user translates each Arm instruction to host code,",
        "and it runs many NEON and SVE instructions through C helper functions (SVE ones element by",
        "element, under a predicate), while scalar code maps almost one to one onto host instructions. So",
        "a vector kernel can be slower than `generic` here and still several times faster on the chip;",
        "a speed-up below 1.00 here says nothing about a Raspberry Pi or a Neoverse core. What the",
        "numbers are good for is change: both sides of a ratio run in the same job on the same host and",
        "qemu, so the host's speed cancels out, and a kernel change that slows a table down shows up as a",
        "lower ratio than the last run's. A table that silently falls back to generic code moves to 1.00;",
        "one where the runtime reports another table than the one forced, or whose greedy tokens differ",
        "from generic's, is an error row (and `edgerun bench --qemu-isa` exits 1).",
        "",
        f"* binary: one plain Armv8.0-A build ({' '.join(report['build']['cflags'])}; each kernel table "
        "carries its own -march), the same machine code on every CPU model, so `generic` is the same code "
        "everywhere",
        f"* emulator: {h['qemu']}, host {h['cpu']} ({h['cores']} cores), {report['date']}; load average "
        f"before {la[0]:.2f}, after {lb[0]:.2f}",
        f"* workload: {_models_phrase(w['models'])}, {w['prompt_tokens']}-token prompt, {w['gen_tokens']} "
        "greedy decode steps, 1 thread, the table forced with EDGERUN_ISA",
        f"* clock: the emulating thread's CPU time (edgerun-cli --timings: prefill and each decode step), "
        f"best of {w['repeat']} runs interleaved over the plan (host load only slows a run down)",
        "* every table's greedy tokens equal generic's on the same CPU model, for every type: checked in "
        "the same runs (an error row otherwise)",
        "",
        "Speed-up over `generic` on the same qemu CPU model, prefill / decode (\u2605 = the table the "
        "runtime picks by itself on that CPU model):",
        "",
        "| qemu CPU | table | " + " | ".join(_type_head(t) for t in types) + " |",
        "|---|---|" + "---:|" * len(types),
    ]
    for cpu, table in _pairs(report):
        label = board_bench.cpu_label(cpu)
        star = " \u2605" if auto.get(cpu, {}).get("chosen") == table else ""
        cells = []
        for t in types:
            r = _row(report, cpu, table, t)
            if r.get("prefill_speedup") is None:
                cells.append("error" if "error" in r else "-")
                continue
            c = f"{r['prefill_speedup']:.2f} / {r['decode_speedup']:.2f}"
            cells.append(c + (" (error)" if "error" in r else ""))
        lines.append(f"| {label} | {table}{star} | " + " | ".join(cells) + " |")
    lines += ["", "Measured tokens/s (emulated, CPU time), prefill / decode:", "",
              "| qemu CPU | table | " + " | ".join(_type_head(t) for t in types) + " |",
              "|---|---|" + "---:|" * len(types)]
    for cpu, table in _pairs(report):
        cells = []
        for t in types:
            r = _row(report, cpu, table, t)
            cells.append("error" if r.get("prefill_tokens_per_s") is None else
                         f"{r['prefill_tokens_per_s']:.1f} / {r['decode_tokens_per_s']:.1f}")
        lines.append(f"| {board_bench.cpu_label(cpu)} | {table} | " + " | ".join(cells) + " |")
    spread = report.get("generic_spread") or {}
    if spread:
        lines += ["", "Noise: `generic` runs the same machine code on every CPU model, so its rates should agree "
                  "across them; here they spread by " + ", ".join(
                      f"{_type_head(t)} {v['prefill_tokens_per_s'] * 100:.0f}% / {v['decode_tokens_per_s'] * 100:.0f}%"
                      for t, v in spread.items())
                  + " (prefill / decode, max over min). A ratio that moves by less than that between runs has not "
                  "changed."]
    lines += ["", "Automatic choice (no EDGERUN_ISA): " + "; ".join(
        f"{a['label']}: {a.get('chosen', 'error')}" + ("" if a.get("chosen") == a["expected"]
                                                     else f" (expected {a['expected']})")
        for a in report["automatic"]) + "."]
    errors = [r for r in report["results"] + report["automatic"] if "error" in r]
    if errors:
        lines += ["", "Errors:", ""]
        lines += [f"* {r['label']} {r.get('table', 'automatic')} {r['type']}: {r['error']}" for r in errors]
    lines += ["", f"The qemu runs took {report['seconds']:.0f} s."]
    return "\n".join(lines)


def update_doc(text, section):
    """`text` with this benchmark's section replaced, or added after the
    throughput matrix's section (at the end when there is none); every other
    section is kept (bench.update_doc with this section's markers)."""
    from . import engines as bench
    if not (DOC_BEGIN in text and DOC_END in text):
        empty = f"{DOC_BEGIN}\n{DOC_END}\n"
        if bench.DOC_END in text:
            cut = text.index(bench.DOC_END) + len(bench.DOC_END)
            rest = text[cut:].lstrip("\n")
            text = text[:cut] + "\n\n" + empty + ("\n" + rest if rest else "")
        else:
            text = (text.rstrip("\n") + "\n\n" if text.strip() else "# Performance\n\n") + empty
    return bench.update_doc(text, section, begin=DOC_BEGIN, end=DOC_END)


def write_doc(path, report):
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_text() if path.is_file() else ""
    path.write_text(update_doc(old, format_markdown(report)))


# --------------------------------------------------------------------------- the command
def main(args):
    """`edgerun bench --qemu-isa` (options in cli/bench.py). Exit 1 on an error row."""
    from . import engines as bench
    quiet = args.json
    log = (lambda msg: print(msg, file=sys.stderr, flush=True))
    if args.model_pos:
        model = pathlib.Path(args.model_pos)
        if not model.is_file():
            raise FileNotFoundError(2, "No such file or directory", str(model))
        models = {_type_of(model): model}
    else:
        types = QUICK_TYPES if args.quick else TYPES
        models = {t: bench.bench_model(args.bench_dir, SHAPE, t, log) for t in types}
    the_plan = plan(quick=args.quick, cpus=args.cpu)
    log(f"bench --qemu-isa: building {BASELINE_NAME} (plain Armv8.0-A, every Arm kernel table)")
    bdir = ensure_build(log=sys.stderr)
    out_dir = pathlib.Path(args.bench_dir)
    report = measure(bdir, models, the_plan, repeat=args.repeat or REPEAT,
                     prompt_tokens=args.prompt_tokens or PROMPT_TOKENS, gen_tokens=args.gen_tokens or GEN_TOKENS,
                     workdir=out_dir / "qemu-isa-runs", log=log)
    out = pathlib.Path(args.out) if args.out else out_dir / "qemu_isa.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    if args.doc != "none":
        write_doc(args.doc, report)
    if quiet:
        print(json.dumps(report, indent=1))
    else:
        print(format_text(report))
        print(f"\nwrote {out}" + (f" and the qemu section of {args.doc}" if args.doc != "none" else ""))
    return 1 if report["errors"] else 0


def _type_of(model):
    """'q8_0' for llama15m-q8_0.gguf; otherwise the file's name (a label only)."""
    m = re.search(r"-(f32|f16|q8_0|q4_0|q4_k)\.gguf$", model.name)
    return m.group(1) if m else model.stem
