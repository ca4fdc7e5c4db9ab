"""`edgerun bench --board B`: latency of the cross-built runtime under qemu-user, with gates.

For each qemu CPU model the board lists, in one job:
  1. edgerun-calibrate (runtime_c/tools/calibrate.c, built for the board, not
     vectorized) runs a fixed workload under the same qemu and -cpu and reports
     its rate (Mops/s);
  2. `repeat` times: edgerun-cli runs the model with --timings (one line per
     decode step), --ignore-eos and fixed prompt ids, so every run does the same
     work, after an untimed warm-up in the same process (--warmup); then the
     calibration runs again.
Single-threaded runs are timed by the emulating thread's CPU time (the time
qemu sat descheduled on a busy host is not the board's); both clocks are kept.

Emulated time is host time: a faster or busier host moves every figure. So
besides the raw figures each one is normalized by the calibration rate measured
beside it: best tokens/s ÷ best calibration Mops/s ("normalized tokens/s", see
summarize()), and latencies × mean Mops/s (in calibration Mops). A stored
baseline (benchmarks/baselines/<board>.json) keeps the normalized tokens/s of a
known-good run.

Per-step latency: for each decode step, the median of that step over the
repeats. A step that is slow in every run (the runtime's own behaviour: a
stall, a growing attention cost) stays; a step slowed in one run by another
process on the host is emulation noise and drops out. The pooled percentiles
of all runs are reported beside it.

Gates, from the board file's `latency` block:
  * stability: p99/p50 of the per-step latencies ≤ latency.p99_over_p50_max;
  * regression: normalized tokens/s ≥ baseline × latency.min_normalized_tokens_per_s_ratio
    (skipped, and said so, when no baseline matches the model and workload).
"""
import datetime
import hashlib
import json
import os
import pathlib
import platform
import re
import subprocess

from .. import console
from ..errors import BoardError

CALIBRATE_ROUNDS = 11
DEFAULT_PROMPT_TOKENS = 16
DEFAULT_GEN_TOKENS = 48
DEFAULT_REPEAT = 5
# Untimed decode steps each run makes first (edgerun-cli --warmup): qemu
# translates the decode kernels on a run's first steps, which then took
# 1.5-3x a steady step in every run; the per-step median kept them and the
# p99/p50 gate refused 2 of 5 idle CI-size chains (1.55-2.24 against 1.5).
WARMUP_STEPS = 8


class BenchError(BoardError):
    """A benchmark step failed (one line for the user)."""


# --------------------------------------------------------------------------- parsing
def parse_timings(text):
    """The --timings file of edgerun-cli (format in runtime_c/tools/cli_timings.c)."""
    out = {"steps_us": [], "steps_cpu_us": []}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if parts[0] == "step" and len(parts) == 4:
            out["steps_us"].append(float(parts[2]))
            out["steps_cpu_us"].append(float(parts[3]))
        elif parts[0] in ("prompt_tokens", "steps") and len(parts) == 2:
            out[parts[0]] = int(parts[1])
        elif parts[0] in ("prefill_us", "ttft_us", "prefill_cpu_us") and len(parts) == 2:
            out[parts[0]] = float(parts[1])
    if "ttft_us" not in out or out.get("steps") != len(out["steps_us"]):
        raise BenchError("edgerun-cli wrote an incomplete --timings file")
    return out


_STATS = re.compile(r"arena (\d+) bytes.*\| isa (\S+) \| threads (\d+)")


def parse_stats_line(stderr):
    """arena bytes, ISA and threads from edgerun-cli's statistics line."""
    m = _STATS.search(stderr)
    if not m:
        raise BenchError(f"no statistics line from edgerun-cli: {stderr.strip()[-300:]}")
    return {"arena_bytes": int(m.group(1)), "isa": m.group(2), "threads": int(m.group(3))}


def parse_calibration(stdout):
    """edgerun-calibrate's line: `calibrate vN key value key value ...`."""
    m = re.search(r"^calibrate v(\d+) (.*)$", stdout, re.M)
    if not m:
        raise BenchError(f"edgerun-calibrate printed no result: {stdout.strip()[-200:]}")
    words = m.group(2).split()
    out = {"version": int(m.group(1))}
    for k, v in zip(words[0::2], words[1::2]):
        out[k] = v if k == "checksum" else float(v)
    for need in ("mops_per_s", "wall_mops_per_s", "ops", "rounds"):
        if need not in out:
            raise BenchError(f"edgerun-calibrate's line has no {need}: {m.group(0)}")
    return out


def parse_info(stdout):
    """n_vocab and the trained context from `edgerun-cli info`."""
    m = re.search(r"vocab (\d+),", stdout)
    c = re.search(r"context \(trained\) (\d+)", stdout)
    if not m or not c:
        raise BenchError("could not read the vocabulary size and context from edgerun-cli info")
    return {"n_vocab": int(m.group(1)), "n_ctx_train": int(c.group(1))}


# --------------------------------------------------------------------------- statistics
def percentile(values, q):
    """Linear-interpolation percentile (numpy's default), q in [0, 100]."""
    if not values:
        raise ValueError("percentile of no values")
    v = sorted(values)
    pos = (len(v) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def median(values):
    return percentile(values, 50)


def per_step_median(runs):
    """Step i's latency = the median of step i over the runs (runs of equal length)."""
    n = min(len(r) for r in runs)
    return [median([r[i] for r in runs]) for i in range(n)]


def latency_summary(steps_us):
    p50, p90, p99 = (percentile(steps_us, q) for q in (50, 90, 99))
    total = sum(steps_us)
    return {"p50_us": p50, "p90_us": p90, "p99_us": p99, "mean_us": total / len(steps_us),
            "p99_over_p50": p99 / p50 if p50 > 0 else float("inf"),
            "tokens_per_s": len(steps_us) / (total / 1e6) if total > 0 else 0.0}


def summarize(timings, stats, cals, clock="cpu"):
    """One CPU model's result from its runs (parsed --timings files), the
    statistics line and the calibrations run around them: cals[k] before run k,
    cals[k + 1] after it. clock: "cpu" measures steps and calibration by the
    emulating thread's CPU time (single-threaded runs: the time qemu was
    descheduled on a busy host is left out), "wall" by wall time.

    Normalized tokens/s = the fastest run's tokens/s ÷ the fastest calibration's
    rate. Another process on the host only ever slows a run down, so best-of-N
    estimates the unloaded speed of both, and their ratio stays put while the
    host's load comes and goes (measured here: under a load average of 20 on 2
    cores, per-run ratios spread by 30%, best-of-5 ratios by under 5%)."""
    if len(cals) != len(timings) + 1:
        raise ValueError("need one calibration before each run and one after the last")
    key, cal_key = ("steps_cpu_us", "mops_per_s") if clock == "cpu" else ("steps_us", "wall_mops_per_s")
    series = per_step_median([t[key] for t in timings])
    wall_series = per_step_median([t["steps_us"] for t in timings])
    pooled = [x for t in timings for x in t[key]]
    lat = latency_summary(series)
    rates = [c[cal_key] for c in cals]
    cal = sum(rates) / len(rates)
    per_run = []
    for k, t in enumerate(timings):
        tps = len(t[key]) / (sum(t[key]) / 1e6) if sum(t[key]) > 0 else 0.0
        around = (rates[k] + rates[k + 1]) / 2
        per_run.append({"tokens_per_s": tps, "calibration_mops_per_s": around})
    best_tps, best_cal = max(r["tokens_per_s"] for r in per_run), max(rates)
    ttft = median([t["ttft_us"] for t in timings])
    prefill = median([t["prefill_us"] for t in timings])
    n_prompt = timings[0].get("prompt_tokens", 0)
    res = {
        "raw": {"ttft_ms": ttft / 1e3, "prefill_tokens_per_s": n_prompt / (prefill / 1e6) if prefill else 0.0,
                "decode_p50_ms": lat["p50_us"] / 1e3, "decode_p90_ms": lat["p90_us"] / 1e3,
                "decode_p99_ms": lat["p99_us"] / 1e3, "tokens_per_s": lat["tokens_per_s"],
                "p99_over_p50": lat["p99_over_p50"]},
        "pooled": latency_summary(pooled),
        "wall": latency_summary(wall_series),
        "clock": clock,
        "calibration": {"mops_per_s": cal, "best_mops_per_s": best_cal, "runs": cals,
                        "spread": (max(rates) - min(rates)) / cal if cal else 0.0},
        "per_run": per_run,
        "arena_bytes": stats["arena_bytes"], "isa": stats["isa"], "threads": stats["threads"],
        "steps_us": series, "steps_wall_us": wall_series, "runs": len(timings), "decode_steps": len(series),
        "prompt_tokens": n_prompt,
    }
    # Latency in calibration Mops = seconds × Mops/s: the same number on a
    # host twice as fast, if emulation scales like the calibration does.
    res["normalized"] = {
        "tokens_per_s": best_tps / best_cal if best_cal else 0.0,
        "best_tokens_per_s": best_tps,
        "ttft_cal_mops": ttft / 1e6 * cal,
        "decode_p50_cal_mops": lat["p50_us"] / 1e6 * cal,
        "decode_p90_cal_mops": lat["p90_us"] / 1e6 * cal,
        "decode_p99_cal_mops": lat["p99_us"] / 1e6 * cal,
    }
    return res


# --------------------------------------------------------------------------- gates
def _over(value, limit):
    return (value / limit - 1.0) * 100.0 if limit else float("inf")


def gates(report, board_latency, baseline):
    """Evaluates the board's gates for every CPU model of `report`. Returns a
    list of {gate, cpu, ok, value, limit, message}; ok is None for a gate that
    could not be applied (the message says why)."""
    out = []
    budget = board_latency.get("p99_over_p50_max")
    ratio = board_latency.get("min_normalized_tokens_per_s_ratio")
    match = baseline_matches(baseline, report) if baseline else (False, "no baseline stored")
    for cpu, res in report["cpus"].items():
        r = res["raw"]["p99_over_p50"]
        if budget is not None:
            ok = r <= budget
            msg = (f"p99/p50 on {cpu}: {r:.3f} <= budget {budget:g}" if ok else
                   f"p99/p50 on {cpu}: {r:.3f} > budget {budget:g} ({_over(r, budget):.1f}% over)")
            out.append({"gate": "p99_over_p50", "cpu": cpu, "ok": ok, "value": r, "limit": budget, "message": msg})
        if ratio is None:
            continue
        norm = res["normalized"]["tokens_per_s"]
        base = (baseline or {}).get("cpus", {}).get(cpu, {}).get("normalized_tokens_per_s")
        if not match[0] or base is None:
            why = match[1] if not match[0] else f"the baseline has no entry for {cpu}"
            out.append({"gate": "normalized_tokens_per_s", "cpu": cpu, "ok": None, "value": norm, "limit": None,
                        "message": f"normalized tokens/s on {cpu}: {norm:.4g}, not gated: {why} "
                                   f"(record one with --update-baseline)"})
            continue
        floor = base * ratio
        ok = norm >= floor
        msg = (f"normalized tokens/s on {cpu}: {norm:.4g} >= {ratio:g} x baseline {base:.4g} = {floor:.4g}" if ok
               else f"normalized tokens/s on {cpu}: {norm:.4g} < {ratio:g} x baseline {base:.4g} = {floor:.4g} "
                    f"({(1 - norm / floor) * 100:.1f}% below the floor, {(1 - norm / base) * 100:.1f}% below "
                    f"the baseline)")
        where, here = (baseline.get("measured") or {}), report.get("host") or {}
        if not ok and where.get("cpu_id") != here.get("cpu_id"):
            msg += (f"; the baseline was measured on {where.get('cpu_id', 'an unrecorded host CPU')}, this host is "
                    f"{here.get('cpu_id', '?')}: if the code is unchanged, re-record it with --update-baseline")
        out.append({"gate": "normalized_tokens_per_s", "cpu": cpu, "ok": ok, "value": norm, "limit": floor,
                    "message": msg})
    return out


# The workload a baseline is comparable with: the same model bytes, prompt and
# decode lengths, threads and calibration program.
WORKLOAD_KEYS = ("model_sha256", "prompt_tokens", "gen_tokens", "threads", "clock", "calibrate_version")


def baseline_matches(baseline, report):
    for k in WORKLOAD_KEYS:
        if baseline.get("workload", {}).get(k) != report["workload"].get(k):
            return False, (f"the baseline was measured with {k} = {baseline.get('workload', {}).get(k)!r}, "
                           f"this run has {report['workload'].get(k)!r}")
    return True, ""


def baseline_from(report):
    return {
        "board": report["board"],
        "workload": report["workload"],
        "cpus": {cpu: {"normalized_tokens_per_s": r["normalized"]["tokens_per_s"],
                       "tokens_per_s": r["raw"]["tokens_per_s"],
                       "calibration_mops_per_s": r["calibration"]["mops_per_s"],
                       "decode_p50_ms": r["raw"]["decode_p50_ms"], "p99_over_p50": r["raw"]["p99_over_p50"]}
                 for cpu, r in report["cpus"].items()},
        "measured": report["host"],
    }


# --------------------------------------------------------------------------- running
def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Runner:
    """Runs the board's programs: under its qemu with one CPU model (edgerun.boards.qemu
    decides the command and sysroot), or directly for the host board."""

    def __init__(self, board, cpu, timeout=600):
        from ..boards import qemu
        self.board, self.cpu, self.timeout, self._qemu = board, cpu, timeout, qemu

    def __call__(self, argv, what):
        argv = self._qemu.command(self.board, argv)
        env = self._qemu.environment(self.board, None if self.board.is_native else self.cpu)
        # A sanitizer preload would instrument the emulator, not the program measured.
        env.pop("LD_PRELOAD", None)
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout, env=env)
        except subprocess.TimeoutExpired:
            raise BenchError(f"{what} did not finish in {self.timeout} s on {self.board.name}/{self.cpu}") from None
        if r.returncode != 0:
            raise BenchError(f"{what} failed on {self.board.name}/{self.cpu} (exit {r.returncode}): "
                             f"{(r.stderr or r.stdout).strip()[-400:]}")
        return r


def bench_cpu(run, cli, calibrate, model, ids, n_predict, threads, repeat, workdir, clock="cpu"):
    """Runs the calibration, then `repeat` times a model run followed by the
    calibration, with `run` (a Runner). Returns summarize()'s dict."""
    def calibration():
        return parse_calibration(run([calibrate, str(CALIBRATE_ROUNDS)], "edgerun-calibrate").stdout)
    cals = [calibration()]
    timings, stats = [], None
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    for k in range(repeat):
        tfile = workdir / f"timings-{k}.txt"
        tfile.unlink(missing_ok=True)
        r = run([cli, "run", str(model), "--ids", ",".join(map(str, ids)), "-n", str(n_predict),
                 "--ignore-eos", "--no-echo", "--print-ids", "-t", str(threads), "--timings", str(tfile),
                 "--warmup", str(WARMUP_STEPS)],
                "edgerun-cli run")
        timings.append(parse_timings(tfile.read_text()))
        stats = parse_stats_line(r.stderr)
        cals.append(calibration())
    return summarize(timings, stats, cals, clock=clock)


def host_cpu():
    """The host CPU's name and identity (x86: vendor, family, model; Arm:
    implementer and part). A VM's model name can be just "AMD EPYC" for
    different generations, and how fast qemu runs vector code against the
    scalar calibration differs between them, so a gate failure says on which
    CPU its baseline was measured."""
    fields = {}
    try:
        for line in open("/proc/cpuinfo"):
            k, _, v = line.partition(":")
            fields.setdefault(k.strip(), v.strip())
            if not line.strip():
                break
    except OSError:
        pass
    if "vendor_id" in fields:
        ident = f"{fields['vendor_id']} family {fields.get('cpu family', '?')} model {fields.get('model', '?')}"
    elif "CPU implementer" in fields:
        ident = f"implementer {fields['CPU implementer']} part {fields.get('CPU part', '?')}"
    else:
        ident = "?"
    return {"cpu": fields.get("model name", "?"), "cpu_id": ident}


def host_info(qemu_binary):
    qv = "native (no emulator)"
    if qemu_binary:
        try:
            qv = subprocess.run([qemu_binary, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
        except (OSError, IndexError):
            qv = "?"
    return {"machine": platform.machine(), **host_cpu(), "cores": os.cpu_count(), "qemu": qv,
            "python": platform.python_version(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def bench_board(board, build_dir, model, out_dir, prompt_tokens=DEFAULT_PROMPT_TOKENS,
                gen_tokens=DEFAULT_GEN_TOKENS, threads=1, repeat=DEFAULT_REPEAT, cpus=None, log=print):
    """The whole benchmark for one board (an edgerun.boards.Board) from its
    build dir; every CPU model of the board unless `cpus` names some."""
    # CPU time only measures a step when one thread does all of its work.
    clock = "cpu" if threads == 1 else "wall"
    from .engines import fit_to_context, prompt_ids
    build_dir = pathlib.Path(build_dir)
    cli = build_dir / "runtime_c" / "tools" / "edgerun-cli"
    calibrate = build_dir / "runtime_c" / "tools" / "edgerun-calibrate"
    for exe in (cli, calibrate):
        if not exe.exists():
            raise BenchError(f"{exe} is missing; build it: edgerun build --board {board.name}")
    cpus = list(cpus or board.qemu_cpus or ["native"])
    model = pathlib.Path(model)
    info = parse_info(Runner(board, cpus[0])([str(cli), "info", str(model), "-t", "1"], "edgerun-cli info").stdout)
    p, g = fit_to_context(info["n_ctx_train"], prompt_tokens, gen_tokens)
    ids = prompt_ids(info["n_vocab"], p)
    report = {
        "board": board.name,
        "model": str(model),
        "workload": {"model": model.name, "model_sha256": file_sha256(model), "prompt_tokens": p,
                     "gen_tokens": g, "threads": threads, "repeat": repeat, "clock": clock,
                     "calibrate_version": None},
        "host": host_info(board.qemu_binary),
        "cpus": {},
    }
    out_dir = pathlib.Path(out_dir)
    with console.progress(f"edgerun bench --board {board.name}", total=len(cpus)) as bar:
        for cpu in cpus:
            log(f"bench {board.name}: {cpu}: calibration, then {repeat} x ({p} prompt + {g} decode steps, "
                "calibration)")
            bar.update(description=cpu)
            safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", cpu)
            res = bench_cpu(Runner(board, cpu), str(cli), str(calibrate), model, ids, g + 1, threads, repeat,
                            out_dir / "runs" / safe, clock=clock)
            report["workload"]["calibrate_version"] = res["calibration"]["runs"][0]["version"]
            report["cpus"][cpu] = res
            bar.advance(1)
    return report


# --------------------------------------------------------------------------- output
def format_table(report, gate_list):
    rows = [("cpu", "TTFT ms", "p50 ms", "p90 ms", "p99 ms", "p99/p50", "tok/s", "cal Mops/s", "norm tok/s",
             "arena")]
    for cpu, r in report["cpus"].items():
        raw = r["raw"]
        rows.append((cpu, f"{raw['ttft_ms']:.2f}", f"{raw['decode_p50_ms']:.3f}", f"{raw['decode_p90_ms']:.3f}",
                     f"{raw['decode_p99_ms']:.3f}", f"{raw['p99_over_p50']:.3f}", f"{raw['tokens_per_s']:.1f}",
                     f"{r['calibration']['mops_per_s']:.1f}", f"{r['normalized']['tokens_per_s']:.4g}",
                     f"{r['arena_bytes']}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in rows]
    w = report["workload"]
    head = (f"edgerun bench --board {report['board']}: {w['model']}, {w['prompt_tokens']} prompt ids, "
            f"{w['gen_tokens']} decode steps x {w['repeat']} runs, {w['threads']} thread(s), {w['clock']} time, "
            f"under {report['host']['qemu']}")
    out = [head, *lines, ""]
    for gt in gate_list:
        tag = "ok  " if gt["ok"] else ("FAIL" if gt["ok"] is False else "skip")
        out.append(f"  [{tag}] {gt['message']}")
    return "\n".join(out)


def cpu_label(cpu):
    """'max,sve-default-vector-length=32' -> 'max SVE-256': short enough for a plot axis."""
    from ..boards import vector_bits
    try:
        bits = vector_bits(cpu)
    except ValueError:
        bits = None
    return f"{cpu.split(',')[0]} SVE-{bits}" if bits else cpu


def plot(report, gate_list, path):
    """PNG: per-step decode latency per CPU model (with p50/p99), and normalized
    tokens/s beside the baseline floor."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [2, 1]})
    cpus = list(report["cpus"])
    for cpu in cpus:
        r = report["cpus"][cpu]
        steps = [x / 1e3 for x in r["steps_us"]]
        line, = ax1.plot(range(len(steps)), steps, marker=".", linewidth=1, label=cpu_label(cpu))
        ax1.axhline(r["raw"]["decode_p99_ms"], color=line.get_color(), linestyle=":", linewidth=1)
    ax1.set_xlabel("decode step")
    ax1.set_ylabel(f"{report['workload']['clock']} time per step (ms, median over runs)")
    ax1.set_title(f"{report['board']}: per-token latency under qemu (dotted: p99)")
    ax1.grid(alpha=0.3)
    ax1.legend(fontsize=7)
    vals = [report["cpus"][c]["normalized"]["tokens_per_s"] for c in cpus]
    ax2.bar(range(len(cpus)), vals, color="tab:blue")
    floors = {g["cpu"]: g["limit"] for g in gate_list if g["gate"] == "normalized_tokens_per_s" and g["limit"]}
    for i, c in enumerate(cpus):
        if c in floors:
            ax2.hlines(floors[c], i - 0.4, i + 0.4, colors="tab:red", linestyles="--")
    ax2.set_xticks(range(len(cpus)))
    ax2.set_xticklabels([cpu_label(c) for c in cpus], fontsize=8)
    ax2.set_ylabel("tokens/s per calibration Mops/s")
    ax2.set_title("normalized tokens/s (red: gate floor)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_outputs(report, gate_list, out_dir):
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    js = out_dir / f"bench-{report['board']}.json"
    png = out_dir / f"bench-{report['board']}.png"
    doc = dict(report, gates=gate_list, passed=all(g["ok"] is not False for g in gate_list))
    js.write_text(json.dumps(doc, indent=1) + "\n")
    plot(report, gate_list, png)
    return js, png


# --------------------------------------------------------------------------- the command
def baseline_path(board_name):
    from ..boards import repo_root
    return repo_root() / "benchmarks" / "baselines" / f"{board_name}.json"


def load_baseline(path):
    try:
        return json.loads(pathlib.Path(path).read_text())
    except FileNotFoundError:
        return None
    except ValueError as e:
        raise BenchError(f"{path}: not valid JSON ({e}); fix it or rewrite it with --update-baseline") from None


def main(args):
    """`edgerun bench --board B ...` (options in cli/bench.py). Exit 1 when a gate fails."""
    import sys
    from .. import boards
    from ..boards import build, prereqs
    board = boards.load(args.board)
    # Fail before minutes of emulation, not when drawing the plot at the end.
    prereqs.require("matplotlib", *prereqs.for_run(board))
    if args.model and args.model_pos and args.model != args.model_pos:
        raise BenchError(f"two models given ({args.model_pos} and --model {args.model}); pass one")
    model = args.model or args.model_pos
    if model is None:
        # The embedded model, found without loading the host's libedgerun.so
        # (a board benchmark needs only the cross build).
        model = boards.repo_root() / "models" / "edgerun-add.gguf"
    if not pathlib.Path(model).is_file():
        raise FileNotFoundError(2, "No such file or directory", str(model))
    threads = args.threads if isinstance(args.threads, int) else int(str(args.threads).split(",")[0])
    quiet = args.json
    log = (lambda *a: print(*a, file=sys.stderr)) if quiet else print
    log(f"bench {board.name}: building (edgerun build --board {board.name})")
    bdir = build.ensure_built(board, log=sys.stderr if not quiet else None)
    out_dir = pathlib.Path(args.out_dir) if args.out_dir else bdir / "bench"
    report = bench_board(board, bdir, model, out_dir, prompt_tokens=args.prompt_tokens or DEFAULT_PROMPT_TOKENS,
                         gen_tokens=args.gen_tokens or DEFAULT_GEN_TOKENS, threads=threads,
                         repeat=args.repeat or DEFAULT_REPEAT, cpus=args.cpu or None, log=log)
    bpath = pathlib.Path(args.baseline) if getattr(args, "baseline", None) else baseline_path(board.name)
    if args.update_baseline:
        bpath.parent.mkdir(parents=True, exist_ok=True)
        bpath.write_text(json.dumps(baseline_from(report), indent=1) + "\n")
        log(f"bench {board.name}: baseline written to {bpath}")
    gate_list = gates(report, board.latency, load_baseline(bpath))
    js, png = write_outputs(report, gate_list, out_dir)
    if quiet:
        print(json.dumps(json.loads(js.read_text()), indent=1))
    else:
        print(format_table(report, gate_list))
        print(f"\nwrote {js} and {png}")
    failed = [g for g in gate_list if g["ok"] is False]
    for g in failed:
        print(f"edgerun: bench --board {board.name}: gate failed: {g['message']}", file=sys.stderr)
    return 1 if failed else 0
