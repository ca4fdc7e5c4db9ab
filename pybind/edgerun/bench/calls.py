"""`edgerun bench-tokenizer --per-call`: what one call costs, beside the peers.

Three figures, each engine measured in the same process and the same run:

  per call     CPU microseconds of one encode of a 2, 16 or 64-byte text (ASCII
               source-code fragments, a different one each call): for short
               texts this is the binding's fixed cost, not the tokenizer's.
  lines        MB per CPU-second over source code encoded one line per call,
               the way an editor or a line-based pipeline calls a tokenizer.
  generate     what Python adds per generated token beyond the C step: the
               embedded model's generate() (ids, and text) against the same
               er_sample + er_decode calls made bare through the binding.

CPU time (the process's) rather than wall time: the figures are microseconds,
and on a shared machine a descheduled moment would swamp them. Each figure is
the best of `repeat` passes; engines alternate within a pass. The ids of every
engine must equal the reference's on every line (sentencepiece for llama2,
Hugging Face otherwise), as in the throughput benchmark.
"""
import random
import time

from . import tokenizer as tb

SIZES = (2, 16, 64)
TARGET_FIXED_US = 1.5           # edgerun's cost of one short encode, at most
TARGET_LINES_VS_TIKTOKEN = 1.0  # gpt2, lines: at least tiktoken's MB/s
TARGET_LINES_VS_SPM = 2.0       # llama2, lines: at least twice sentencepiece's


def code_lines(n_bytes=400_000, seed=7):
    """Source-code lines (with their newline) from the throughput corpus's code generator."""
    rng = random.Random(seed)
    lines, total = [], 0
    while total < n_bytes:
        for ln in tb._code(rng).splitlines(keepends=True):
            if ln.strip():
                lines.append(ln)
                total += len(ln.encode())
    return lines


def fragments(lines, size, count=256):
    """`count` ASCII texts of exactly `size` bytes cut from the lines."""
    flat = "".join(ln for ln in lines if ln.isascii()).replace("\n", " ")
    step = max(1, (len(flat) - size) // count)
    return [flat[i:i + size] for i in range(0, step * count, step)][:count]


def _cpu_per_call(fn, texts, calls):
    t0 = time.process_time_ns()
    k = len(texts)
    for i in range(calls):
        fn(texts[i % k])
    return (time.process_time_ns() - t0) / calls / 1e3


def _cpu_lines(fn, lines):
    t0 = time.process_time()
    for ln in lines:
        fn(ln)
    return time.process_time() - t0


def family_calls(family, src, gguf_dir, lines, repeat=7, calls=4000, log=None):
    engines, ref, er, notes = tb._engines(family, src, gguf_dir)
    names = [n for n, _ in engines]
    fns = dict(engines)
    exact = {}
    if ref is not None:
        want = [fns[ref](ln) for ln in lines]
        for n in names:
            got = [fns[n](ln) for ln in lines]
            exact[n] = got == want
    per_call = {n: {} for n in names}
    for size in SIZES:
        texts = fragments(lines, size)
        for fn in fns.values():                 # warm-up: buffers, HF's word cache, first-call costs
            _cpu_per_call(fn, texts, len(texts))
        best = {n: float("inf") for n in names}
        for _ in range(repeat):
            for n in names:
                best[n] = min(best[n], _cpu_per_call(fns[n], texts, calls))
        for n in names:
            per_call[n][str(size)] = round(best[n], 3)
    n_bytes = sum(len(ln.encode()) for ln in lines)
    best = {n: float("inf") for n in names}
    for _ in range(max(2, repeat // 2)):
        for n in names:
            best[n] = min(best[n], _cpu_lines(fns[n], lines))
    er.close()
    if log:
        log(f"bench-tokenizer --per-call: {family} done")
    return {"per_call_us": per_call, "lines_mb_per_cpu_s": {n: round(n_bytes / 1e6 / best[n], 3) for n in names},
            "n_lines": len(lines), "line_bytes": n_bytes, "reference": ref, "exact": exact, "notes": notes}


def generate_overhead(tokens=48, repeat=15):
    """Per generated token, CPU microseconds: the bare C step (er_sample +
    er_decode through the binding), Model.generate with ids, and with text."""
    from .. import _ffi
    from ..model import Model
    from ..session import sampling
    ffi, lib = _ffi.ffi, _ffi.lib
    with Model(n_threads=1) as m:
        n = min(tokens, m.n_ctx - 4)
        prompt = [m.tokenizer.bos if m.tokenizer and m.tokenizer.bos is not None else 1]
        params = sampling()
        tok, one = ffi.new("int32_t *"), ffi.new("int32_t[1]")

        def bare():
            with m.session() as s:
                p = s._ptr
                arr = ffi.new("int32_t[]", prompt)
                t0 = time.process_time_ns()
                lib.er_decode(p, arr, len(prompt), ffi.NULL)
                for _ in range(n):
                    lib.er_sample(p, params, tok)
                    one[0] = tok[0]
                    lib.er_decode(p, one, 1, ffi.NULL)
                return (time.process_time_ns() - t0) / n / 1e3

        def ids():
            t0 = time.process_time_ns()
            out = m.generate(prompt, max_tokens=n, stop_at_eos=False)
            assert len(out) == n
            return (time.process_time_ns() - t0) / n / 1e3

        text_prompt = m.tokenizer.decode(prompt, skip_special=True) if m.tokenizer else None

        def text():
            t0 = time.process_time_ns()
            m.generate(text_prompt, max_tokens=n, stop_at_eos=False, add_special=True)
            return (time.process_time_ns() - t0) / n / 1e3

        runs = {"c_step_us": bare, "generate_ids_us": ids}
        if text_prompt is not None:
            runs["generate_text_us"] = text
        best = {k: float("inf") for k in runs}
        for _ in range(repeat):
            for k, fn in runs.items():
                best[k] = min(best[k], fn())
        out = {k: round(v, 2) for k, v in best.items()}
        out["tokens"] = n
        out["model"] = str(m.path)
        out["python_per_token_ids_us"] = round(best["generate_ids_us"] - best["c_step_us"], 2)
        if "generate_text_us" in best:
            out["python_per_token_text_us"] = round(best["generate_text_us"] - best["c_step_us"], 2)
    return out


def run(families=None, data_dir=None, repeat=7, calls=4000, line_bytes=400_000, seed=7, log=None):
    """The per-call report (JSON-ready) for every family found."""
    import pathlib
    import tempfile

    from .. import _ffi
    data_dir = pathlib.Path(data_dir) if data_dir else tb.default_data_dir()
    lines = code_lines(line_bytes, seed)
    report = {"kind": "tokenizer-per-call", "binding": _ffi.MODE, "machine": tb.machine_info(),
              "sizes": list(SIZES), "clock": "cpu", "repeat": repeat, "calls": calls,
              "targets": {"fixed_us": TARGET_FIXED_US, "lines_vs_tiktoken": TARGET_LINES_VS_TIKTOKEN,
                          "lines_vs_sentencepiece": TARGET_LINES_VS_SPM},
              "families": {}, "skipped": {}}
    with tempfile.TemporaryDirectory(prefix="edgerun-tokcalls-") as td:
        for fam in tb.parse_families(families):
            src = data_dir / fam
            if not src.is_dir():
                report["skipped"][fam] = f"{src} is absent"
                continue
            report["families"][fam] = family_calls(fam, src, pathlib.Path(td), lines, repeat, calls, log)
    report["generate"] = generate_overhead()
    return report


def format_table(report):
    lines = [f"per call: CPU us for one encode of a {'/'.join(map(str, report['sizes']))}-byte text "
             f"(binding: {report['binding']}, best of {report['repeat']}); "
             "lines: MB per CPU-second over source code, one line per call"]
    for fam, r in report["families"].items():
        lines.append(f"{fam} ({r['n_lines']} lines, {r['line_bytes'] / 1e3:.0f} KB; reference {r['reference']})")
        head = ["engine"] + [f"{s} B us" for s in report["sizes"]] + ["lines MB/s", "exact"]
        rows = [head]
        for eng, pc in r["per_call_us"].items():
            rows.append([eng] + [f"{pc[str(s)]:.2f}" for s in report["sizes"]]
                        + [f"{r['lines_mb_per_cpu_s'][eng]:.2f}", {True: "yes", False: "NO"}.get(r["exact"].get(eng), "-")])
        w = [max(len(row[i]) for row in rows) for i in range(len(head))]
        for row in rows:
            lines.append("  " + "  ".join(c.ljust(w[i]) if i == 0 else c.rjust(w[i]) for i, c in enumerate(row)))
    g = report.get("generate")
    if g:
        lines.append(f"generate ({g['tokens']} tokens of {g['model']}): C step {g['c_step_us']:.1f} us/token; "
                     f"Python adds {g['python_per_token_ids_us']:.1f} us/token with ids"
                     + (f", {g['python_per_token_text_us']:.1f} with text" if "python_per_token_text_us" in g else ""))
    for fam, why in report["skipped"].items():
        lines.append(f"{fam}: skipped ({why})")
    return "\n".join(lines)
