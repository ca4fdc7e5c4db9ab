"""Where a step's time goes, from the events of `Model.trace()`: per operation
and thread, the median event and the time per step, for the prefill steps
and the decode steps apart, with each thread's busy time beside the step's.

Events are assigned to steps by the caller's `embed` events (one opens every
forward step, its first shape entry the step's token count): an event belongs
to the step whose embed started last before it. The caller's event for an
operation spans the whole operation (its share, the dispatch and the wait for
the workers); a worker's event is its share alone. So a worker's busy time
below the step time is what it spent waiting, and the caller's busy time
below the step time is what lies outside any operation (residual adds,
untraced bookkeeping).
"""
import bisect
import statistics

# the order a step runs them in (edgerun.h's ER_OP_*); a GeGLU model's
# gelu_mul runs where a SwiGLU model's silu_mul does, and an LFM2
# convolution layer's conv_in .. conv_out where another layer's qkv .. attn_out
ORDER = ["embed", "attn_norm", "qkv", "rope", "kv_store", "attention", "attn_out", "conv_in", "shortconv",
         "conv_out", "ffn_norm", "ffn_gate_up", "silu_mul", "gelu_mul", "ffn_down", "output_norm", "lm_head"]


def _steps(events):
    """[(start_ns, tokens)] of every forward step, in time order."""
    starts = sorted((e["start_ns"], e["shape"][0]) for e in events if e["op"] == "embed" and e["thread"] == 0)
    if not starts:
        raise ValueError("no forward step in the events (no caller 'embed' event): was anything generated?")
    return starts


def summarize(events):
    """{"prefill"|"decode": {"steps", "step_us" (median), "busy_us" {thread: per step},
    "ops": [{"op", "thread", "events", "median_us", "per_step_us"}]}} for the
    kinds of step present."""
    steps = _steps(events)
    starts = [s for s, _ in steps]
    kind_of = ["decode" if m == 1 else "prefill" for _, m in steps]
    step_end = list(starts)
    acc = {k: ([], {}, {}) for k in ("prefill", "decode")}  # per kind: (durations, busy, per op and thread)
    for e in events:
        i = bisect.bisect_right(starts, e["start_ns"]) - 1
        if i < 0:
            continue  # before the first step (a ring that wrapped)
        step_end[i] = max(step_end[i], e["end_ns"])
        _, busy, per_op = acc[kind_of[i]]
        d = e["end_ns"] - e["start_ns"]
        busy[e["thread"]] = busy.get(e["thread"], 0) + d
        per_op.setdefault((e["op"], e["thread"]), []).append(d)
    out = {}
    for kind in ("prefill", "decode"):
        durations, busy, per_op = acc[kind]
        durations.extend(step_end[i] - starts[i] for i, k in enumerate(kind_of) if k == kind)
        n = len(durations)
        if not n:
            continue
        rows = [{"op": op, "thread": th, "events": len(v), "median_us": statistics.median(v) / 1e3,
                 "per_step_us": sum(v) / 1e3 / n}
                for (op, th), v in sorted(per_op.items(),
                                          key=lambda kv: (ORDER.index(kv[0][0]) if kv[0][0] in ORDER else 99,
                                                          kv[0][1]))]
        out[kind] = {"steps": n, "step_us": statistics.median(durations) / 1e3,
                     "busy_us": {th: b / 1e3 / n for th, b in sorted(busy.items())}, "ops": rows}
    return out


def render(summary):
    """The summary as text: one table per kind of step."""
    lines = []
    for kind, s in summary.items():
        busy = ", ".join(f"thread {th} {b:,.1f}" for th, b in s["busy_us"].items())
        lines.append(f"{kind}: {s['steps']} step(s), median {s['step_us']:,.1f} us a step; busy us a step: {busy}")
        lines.append(f"  {'op':<12} {'thread':>6} {'events':>7} {'median us':>10} {'us/step':>9}")
        for r in s["ops"]:
            lines.append(f"  {r['op']:<12} {r['thread']:>6} {r['events']:>7} {r['median_us']:>10.2f} "
                         f"{r['per_step_us']:>9.1f}")
    return "\n".join(lines) + "\n"
