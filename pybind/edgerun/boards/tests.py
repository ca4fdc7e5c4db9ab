"""`edgerun test --board B`: proves a board build on this machine, once per qemu CPU
model the board lists (SVE boards: several vector lengths).

For every CPU model:
  c-tests   the C unit tests (`meson test`, through the cross file's exe_wrapper,
            qemu-aarch64 -L SYSROOT) with QEMU_CPU set to the model;
  answers   the cross-built edgerun-cli answers held-out problems of the embedded
            model (models/edgerun-add.gguf, scripts/addition_task.py); every answer
            must be right;
  logits    the logits of every generated step agree with the host build's
            (build/host) within LOGITS_ATOL + LOGITS_RTOL * |host|, and the two
            builds generate the same tokens.

Why a tolerance and not equality: the builds run different kernel tables (NEON,
SVE vs AVX2) whose float sums are ordered differently; the model is F32, and
differences of a few ulps per dot product reach ~1e-5 on logits of size ~20. A
wrong kernel shows up as 1e-1 or more, so 1e-3 separates the two by orders.
"""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

from . import board as boards, build, prereqs, qemu
from .. import console
from ..errors import BoardError

LOGITS_ATOL = 1e-3
LOGITS_RTOL = 1e-3
DEFAULT_PROBLEMS = 32
# Emulated tests run several times slower than native ones; meson's per-test
# timeouts are written for native runs.
QEMU_TIMEOUT_MULTIPLIER = 3
# C tests that cannot give a meaningful result under qemu-user, and why. They
# still run in every native build (make test). A test can also opt out itself
# by joining the meson suite NATIVE_ONLY_SUITE in runtime_c/tests/meson.build.
NATIVE_ONLY_SUITE = "native-only"
C_TESTS_NOT_UNDER_QEMU = {
    "failinject": "counts the process's OS threads (/proc/self/status); qemu-user's host thread "
                  "of a joined guest thread can outlive pthread_join, so the count races",
    "snapshot": "its crash-safety part SIGKILLs a writer after wall-clock delays sized for native "
                "speed; emulated, the writer makes too little progress in them",
    "live_swap": "a multi-threaded swap stress sized for native speed; emulated it ran past 4x "
                 "its timeout (8 minutes) here",
    "trace": "measures the cost of tracing over many timed generations: 3-4 minutes emulated, "
             "and its timing assertions assume native speed",
    "soak": "hundreds of requests watching RSS for growth: under qemu-user RSS is the emulator's, "
            "whose translated-code cache grows on its own, and it takes 1-2 minutes per CPU model",
}


def _task():
    """scripts/addition_task.py (the embedded model's task), imported from the checkout."""
    scripts = str(boards.repo_root() / "scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    import addition_task
    return addition_task


def model_path():
    return boards.repo_root() / "models" / "edgerun-add.gguf"


def cli_path(build_dir):
    return pathlib.Path(build_dir) / "runtime_c" / "tools" / "edgerun-cli"


def write_prompts(path, n):
    task = _task()
    problems = task.make_problems(n, task.HELD_OUT_SEED, "test")
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(path).write_text("".join(task.prompt(a, b) + "\n" for a, b in problems))
    return problems


def parse_eval(stdout):
    """edgerun-cli eval output -> (header dict, [per-prompt dicts])."""
    lines = [json.loads(ln) for ln in stdout.splitlines() if ln.strip()]
    if not lines or "isa" not in lines[0]:
        raise BoardError("edgerun-cli eval printed no header line")
    return lines[0], lines[1:]


def run_eval(board, cpu, build_dir, prompts, logits=True, threads=None, timeout=900):
    """Runs edgerun-cli eval of the build (under qemu for aarch64 boards); returns
    (header, rows, seconds)."""
    task = _task()
    argv = [cli_path(build_dir), "eval", model_path(), prompts, "-n", str(task.MAX_NEW_TOKENS)]
    if logits:
        argv.append("--logits")
    if threads:
        argv += ["-t", str(threads)]
    t0 = time.monotonic()
    r = qemu.run(board, cpu, argv, timeout=timeout)
    seconds = time.monotonic() - t0
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise BoardError(f"edgerun-cli eval exited {r.returncode} under {cpu or 'native'}: {last}")
    header, rows = parse_eval(r.stdout)
    return header, rows, seconds


def check_answers(problems, rows):
    """(ok, detail): every problem answered right."""
    task = _task()
    if len(rows) != len(problems):
        return False, f"{len(rows)} answers for {len(problems)} problems"
    wrong = [(a, b, r["text"]) for (a, b), r in zip(problems, rows) if not task.is_correct(a, b, r["text"])]
    detail = f"{len(problems) - len(wrong)}/{len(problems)} correct"
    if wrong:
        a, b, t = wrong[0]
        detail += f"; e.g. {task.prompt(a, b)} -> {t!r} (expected {task.answer_text(a, b)!r})"
    return not wrong, detail


def compare_logits(rows, ref_rows, atol=LOGITS_ATOL, rtol=LOGITS_RTOL):
    """(ok, detail, max_abs_diff): same tokens, logits within atol + rtol*|ref|."""
    if len(rows) != len(ref_rows):
        return False, f"{len(rows)} rows vs {len(ref_rows)} on the host", float("inf")
    worst, worst_excess, where = 0.0, 0.0, None
    for r, h in zip(rows, ref_rows):
        if r["ids"] != h["ids"]:
            return False, f"prompt {r['index']}: tokens {r['ids']} differ from the host's {h['ids']}", float("inf")
        for step, (lr, lh) in enumerate(zip(r["logits"], h["logits"])):
            if len(lr) != len(lh):
                return False, f"prompt {r['index']} step {step}: {len(lr)} logits vs {len(lh)}", float("inf")
            for x, y in zip(lr, lh):
                d = abs(x - y)
                worst = max(worst, d)
                excess = d - (atol + rtol * abs(y))
                if excess > worst_excess:
                    worst_excess, where = excess, (r["index"], step, x, y)
    tol = f"tolerance {atol:g} + {rtol:g}*|host|"
    if where is not None:
        i, step, x, y = where
        return False, f"max |diff| {worst:.3g} > {tol} (prompt {i}, step {step}: {x:.9g} vs host {y:.9g})", worst
    return True, f"max |diff| {worst:.2g} within {tol}", worst


def list_c_tests(build_dir):
    r = subprocess.run(prereqs.meson_command() + ["test", "-C", str(build_dir), "--list"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise BoardError(f"meson test --list failed in {build_dir}: {r.stderr.strip()[-300:]}")
    return [ln.strip() for ln in r.stdout.splitlines() if ln.strip() and ":" in ln]


def run_c_tests(board, cpu, build_dir, keep_log_as=None):
    """meson test under qemu CPU `cpu`. Returns (ok, detail, seconds, per-test list)."""
    board = boards.load(board)
    names = list_c_tests(build_dir)
    skipped = []
    if not board.is_native:
        skipped = [n for n in names if n.split(":")[-1] in C_TESTS_NOT_UNDER_QEMU]
        names = [n for n in names if n not in skipped]
    env = qemu.environment(board, cpu)
    # --no-rebuild: the caller holds the build dir's lock with the build up to
    # date (build.built); a rebuild here would bypass that lock.
    cmd = prereqs.meson_command() + ["test", "-C", str(build_dir), "--no-rebuild", "--print-errorlogs"]
    if not board.is_native:
        cmd += ["--timeout-multiplier", str(QEMU_TIMEOUT_MULTIPLIER), "--no-suite", NATIVE_ONLY_SUITE]
    t0 = time.monotonic()
    r = subprocess.run(cmd + names, capture_output=True, text=True, env=env)
    seconds = time.monotonic() - t0
    log = pathlib.Path(build_dir) / "meson-logs" / "testlog.json"
    tests = []
    if log.is_file():
        for ln in log.read_text().splitlines():
            try:
                d = json.loads(ln)
            except ValueError:
                continue
            tests.append({"name": d.get("name"), "result": d.get("result"), "seconds": d.get("duration")})
        if keep_log_as:
            shutil.copyfile(log, keep_log_as)
            txt = log.with_suffix(".txt")
            if txt.is_file():
                shutil.copyfile(txt, pathlib.Path(keep_log_as).with_suffix(".txt"))
    passed = [t for t in tests if t["result"] in ("OK", "EXPECTEDFAIL")]
    skipped_by_meson = [t for t in tests if t["result"] == "SKIP"]
    failed = [t for t in tests if t not in passed and t not in skipped_by_meson]
    ok = r.returncode == 0 and not failed and bool(tests)
    detail = f"{len(passed)}/{len(tests)} passed"
    if skipped_by_meson:
        detail += f", {len(skipped_by_meson)} skipped"
    if failed:
        detail += "; FAILED: " + ", ".join(f"{t['name']} ({t['result']})" for t in failed)
    elif r.returncode != 0:
        tail = (r.stdout + r.stderr).strip().splitlines()[-3:]
        detail += f"; meson test exit {r.returncode}: {' / '.join(tail)}"
    if skipped:
        detail += f"; not run under qemu: {', '.join(s.split(':')[-1] for s in skipped)}"
    return ok, detail, seconds, tests, r.stdout + r.stderr


def _slug(cpu):
    return re.sub(r"[^A-Za-z0-9._-]+", "_", cpu or "native")


def run_board_tests(board, cpus=None, buildtype="release", sanitize=(), compiler=None,
                    problems=DEFAULT_PROBLEMS, c_tests=True, model_checks=True, log=sys.stderr, on_result=None):
    """Builds and runs every check for every CPU model. Returns the report dict
    ({"board", "ok", "results": [...], ...}); on_result(row) is called as rows arrive."""
    b = boards.load(board)
    if not b.is_native:
        prereqs.require(*prereqs.for_run(b))
    all_cpus = b.qemu_cpus if not b.is_native else [None]
    if cpus:
        unknown = [c for c in cpus if c not in all_cpus]
        if unknown:
            raise BoardError(f"board {b.name} does not list qemu CPU '{unknown[0]}'; it lists: "
                             f"{', '.join(all_cpus)}")
        all_cpus = list(cpus)
    t_start = time.monotonic()
    t0 = time.monotonic()
    bdir = build.ensure_built(b, buildtype=buildtype, sanitize=sanitize, compiler=compiler, log=log)
    build_s = time.monotonic() - t0
    results = []
    per_cpu = int(c_tests) + (0 if not model_checks else 1 if b.is_native else 2)
    bar = console.progress(f"edgerun test {b.name}", total=per_cpu * len(all_cpus), stream=log)

    def add(cpu, check, ok, detail, seconds, **extra):
        row = {"cpu": cpu or "native", "vector_bits": boards.vector_bits(cpu) if cpu else None,
               "check": check, "ok": bool(ok), "detail": detail, "seconds": round(seconds, 2), **extra}
        results.append(row)
        bar.advance(1)
        if on_result:
            on_result(row)

    work = bdir / "edgerun-test"
    work.mkdir(exist_ok=True)
    ref_rows = None
    host_build_s = 0.0
    if model_checks:
        prompts = work / "prompts.txt"
        probs = write_prompts(prompts, problems)
        if not b.is_native:
            t0 = time.monotonic()
            with build.built("host", log=log) as hdir:
                host_build_s = time.monotonic() - t0
                _, ref_rows, _ = run_eval("host", None, hdir, prompts)
    with bar:
        for cpu in all_cpus:
            bar.update(description=cpu or "native")
            with build.built(b, buildtype=buildtype, sanitize=sanitize, compiler=compiler, log=log):
                _run_cpu(b, cpu, bdir, work, c_tests, model_checks, probs if model_checks else None, ref_rows,
                         add)
    return {"board": b.name, "build_dir": str(bdir), "compiler": compiler or b.default_compiler(),
            "buildtype": buildtype, "sanitize": list(sanitize), "problems": problems if model_checks else 0,
            "logits_tolerance": {"atol": LOGITS_ATOL, "rtol": LOGITS_RTOL},
            "build_seconds": round(build_s, 2), "host_build_seconds": round(host_build_s, 2),
            "seconds": round(time.monotonic() - t_start, 2),
            "ok": all(r["ok"] for r in results) and bool(results), "results": results}


def _run_cpu(b, cpu, bdir, work, c_tests, model_checks, probs, ref_rows, add):
    """The checks of one CPU model (the caller holds the build dir's lock)."""
    if c_tests:
        ok, detail, secs, tests, output = run_c_tests(b, cpu, bdir, keep_log_as=work / f"testlog-{_slug(cpu)}.json")
        add(cpu, "c-tests", ok, detail, secs, tests=tests)
        if not ok:
            sys.stderr.write(output[-6000:] + "\n")
    if model_checks:
        try:
            header, rows, secs = run_eval(b, cpu, bdir, work / "prompts.txt")
        except (BoardError, subprocess.TimeoutExpired) as e:
            add(cpu, "answers", False, str(e), 0.0)
            return
        ok, detail = check_answers(probs, rows)
        add(cpu, "answers", ok, f"{detail} (isa {header['isa']})", secs, isa=header["isa"])
        if ref_rows is not None:
            ok, detail, worst = compare_logits(rows, ref_rows)
            add(cpu, "logits", ok, detail, 0.0, max_abs_diff=worst)


def format_table(report):
    rows = [("qemu -cpu", "SVE", "check", "result", "time", "detail")]
    for r in report["results"]:
        rows.append((r["cpu"], str(r["vector_bits"] or "-"), r["check"], "ok" if r["ok"] else "FAIL",
                     f"{r['seconds']:.1f}s" if r["seconds"] else "-", r["detail"]))
    w = [max(len(x[i]) for x in rows) for i in range(5)]
    out = [f"edgerun test --board {report['board']}: {report['build_dir']} "
           f"({report['compiler']}, {report['buildtype']}), built in {report['build_seconds']:.1f}s"]
    for x in rows:
        out.append("  " + "  ".join(f"{c:<{w[i]}}" for i, c in enumerate(x[:5])) + "  " + x[5])
    n_fail = sum(not r["ok"] for r in report["results"])
    out.append(f"{'PASS' if report['ok'] else 'FAIL'}: {len(report['results']) - n_fail}/{len(report['results'])} "
               f"checks ok in {report['seconds']:.1f}s")
    return "\n".join(out)
