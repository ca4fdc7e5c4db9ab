"""Op tracing through Python and the `edgerun trace` CLI.

The exported file is what Perfetto opens: Chrome trace-event JSON whose op
slices are complete events (ph "X") with numeric ts/dur, named from the op
list, and whose timestamps never go backwards on any one thread (the caller's
ops, which run one after another, never overlap either).
"""
import json
import os
import subprocess
import sys

import pytest

import edgerun
from edgerun import errors
from edgerun.bench.trace import ring_events

# by op id (edgerun.h's ER_OP_*): gelu_mul, a GeGLU model's gate, and LFM2's
# short-convolution block came later, appended
OPS = ["embed", "attn_norm", "qkv", "rope", "kv_store", "attention", "attn_out", "ffn_norm",
       "ffn_gate_up", "silu_mul", "ffn_down", "output_norm", "lm_head", "gelu_mul",
       "conv_in", "shortconv", "conv_out"]
ATTN_OPS = ["qkv", "rope", "kv_store", "attention", "attn_out"]
CONV_OPS = ["conv_in", "shortconv", "conv_out"]
SWIGLU_OPS = [op for op in OPS if op != "gelu_mul" and op not in CONV_OPS]     # what the embedded model runs
PROMPT = "0012+0034="


def check_chrome_trace(doc, n_threads, n_layer):
    """Schema and ordering checks; returns the op slices."""
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    slices = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    meta = [e for e in doc["traceEvents"] if e.get("ph") == "M"]
    assert slices and len(slices) + len(meta) == len(doc["traceEvents"])
    assert {e["tid"] for e in meta} == set(range(n_threads))
    last = {}
    for e in slices:
        assert e["name"] in OPS, e
        for k in ("ts", "dur"):
            assert isinstance(e[k], (int, float)) and not isinstance(e[k], bool) and e[k] >= 0, e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and 0 <= e["tid"] < n_threads
        assert -1 <= e["args"]["layer"] < n_layer and len(e["args"]["shape"]) == 3
        prev = last.get(e["tid"])
        if prev is not None:
            assert e["ts"] >= prev["ts"], (prev, e)
            if e["tid"] == 0:   # whole ops on the caller: one after another
                assert e["ts"] >= prev["ts"] + prev["dur"] - 1e-3, (prev, e)
        last[e["tid"]] = e
    return slices


@pytest.mark.parametrize("n_threads", [1, 2])
def test_trace_events_and_export(tmp_path, n_threads):
    out = tmp_path / "t.json"
    with edgerun.Model(n_threads=n_threads, trace_events=20000) as m:
        n_layer = m.hparams["n_layer"]
        events = m.trace(PROMPT, path=out, max_tokens=5, stop_at_eos=False)
        n_prompt = m.stats()["n_prompt"]
        assert m.stats()["output"] and m.stats()["n_generated"] == 5
    # one prefill step, then one step per generated token but the last
    steps = 1 + 4
    assert n_prompt <= 64
    caller = [e for e in events if e["thread"] == 0]
    assert [e["op"] for e in caller].count("embed") == steps
    for op in OPS[1:11]:
        for layer in range(n_layer):
            assert sum(1 for e in caller if e["op"] == op and e["layer"] == layer) == steps, (op, layer)
    assert [e["shape"][0] for e in caller if e["op"] == "embed"] == [n_prompt] + [1] * 4
    assert all(e["end_ns"] >= e["start_ns"] > 0 for e in events)
    # workers join a dispatch only if they wake while it is open (threadpool.h),
    # so which worker tracks appear is up to the scheduler; the caller's always does
    assert 0 in {e["thread"] for e in events} <= set(range(n_threads))
    assert all(e["op"] == OPS[e["op_id"]] for e in events)

    doc = json.loads(out.read_text())
    slices = check_chrome_trace(doc, n_threads, n_layer)
    assert len(slices) == len(events)
    assert doc["otherData"]["dropped"] == 0
    # the JSON is the same events: ts in us from the same ns
    assert [round(s["ts"] * 1000) for s in slices] == [e["start_ns"] for e in events]


def test_trace_ring_wraps_and_needs_a_ring():
    with edgerun.Model(trace_events=10) as m:
        ev = m.trace(PROMPT, max_tokens=3)
        assert len(ev) == 10
        assert ev[-1]["op"] == "lm_head"            # the newest survive
        assert [e["start_ns"] for e in ev] == sorted(e["start_ns"] for e in ev)
    with edgerun.Model() as m:
        with pytest.raises(errors.StateError, match="trace_events"):
            m.trace(PROMPT)
    for bad in (-1, 2 ** 24 + 1, 1.5, True):
        with pytest.raises(errors.InvalidArgumentError):
            edgerun.Model(trace_events=bad)


def test_ring_sizing_covers_the_run():
    # 2 prefill chunks + 16 tokens, 2 layers, 2 threads
    assert ring_events(100, 16, 64, 2, 2) == 18 * 23 * 2
    # a decode step's attention block: four events per K/V head range, at most one range per head
    assert ring_events(100, 16, 64, 2, 2, n_head_kv=8) == 18 * (23 * 2 + 4 * 8 * 2)
    assert ring_events(10 ** 9, 10 ** 6, 1, 80, 64) == 1 << 24


def _cli(*args, **kw):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([sys.executable, "-m", "edgerun", *args], capture_output=True, text=True,
                          env=env, timeout=120, **kw)


def test_cli_trace_writes_a_perfetto_file(tmp_path):
    out = tmp_path / "cli.json"
    r = _cli("trace", PROMPT, "-o", str(out), "-n", "6", "--threads", "2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()                       # the generated text
    assert "events" in r.stderr and str(out) in r.stderr
    doc = json.loads(out.read_text())
    with edgerun.Model() as m:
        n_layer = m.hparams["n_layer"]
    slices = check_chrome_trace(doc, 2, n_layer)
    assert doc["otherData"]["dropped"] == 0       # the ring was sized for the run
    assert 0 in {s["tid"] for s in slices} <= {0, 1}
    assert {s["name"] for s in slices} == set(SWIGLU_OPS)


def test_cli_trace_errors_are_one_line(tmp_path):
    r = _cli("trace", str(tmp_path / "missing.gguf"), PROMPT, "-o", str(tmp_path / "x.json"))
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("edgerun: error:")
    r = _cli("trace", PROMPT, "-o", str(tmp_path / "no-dir" / "x.json"))
    assert r.returncode == 1 and r.stderr.startswith("edgerun: error:") and r.stderr.count("\n") == 1


def test_decode_block_traced_per_thread_and_range(tiny):
    """A decode step with K/V head ranges (8 K/V heads at 2 threads) records
    qkv, rope, kv_store and attention once per range, on the track of the
    thread that ran it; the ranges add up to the whole operation."""
    path = tiny.gguf("qwen2_8kv", "q8_0")
    with edgerun.Model(path, n_threads=2) as probe:
        hp = probe.hparams
    ring = ring_events(8, 5, 64, hp["n_layer"], 2, hp["n_head_kv"])
    with edgerun.Model(path, n_threads=2, n_ctx=64, trace_events=ring) as m:
        events = m.trace(PROMPT, max_tokens=5, stop_at_eos=False)
        steps = m.stats()["n_generated"] - 1
    assert len(events) < ring
    qd, kvd = hp["n_head"] * hp["head_dim"], hp["n_head_kv"] * hp["head_dim"]
    decode = [e for e in events if e["shape"][0] == 1 and e["layer"] >= 0]
    for layer in range(hp["n_layer"]):
        mine = [e for e in decode if e["layer"] == layer]
        assert sum(e["shape"][1] for e in mine if e["op"] == "qkv") == steps * (qd + 2 * kvd)
        assert sum(e["shape"][1] for e in mine if e["op"] == "attention") == steps * hp["n_head"]
        assert sum(e["shape"][1] for e in mine if e["op"] == "kv_store") == steps * 2 * kvd
        # two ranges a step: the caller's track holds its own, never the whole op
        assert all(e["shape"][1] < qd + 2 * kvd for e in mine if e["op"] == "qkv")


def _ev(op, thread, start, end, rows=1, layer=0):
    return {"op": op, "thread": thread, "layer": layer, "shape": [rows, 0, 0], "start_ns": start, "end_ns": end}


def test_summary_splits_steps_and_threads():
    from edgerun.bench.trace_summary import render, summarize
    events = [
        # a prefill step of 4 tokens from t=0, then two decode steps from t=1000 and t=2000
        _ev("embed", 0, 0, 100, rows=4), _ev("qkv", 0, 100, 700, rows=4), _ev("qkv", 1, 150, 650, rows=4),
        _ev("embed", 0, 1000, 1010), _ev("qkv", 0, 1010, 1400), _ev("qkv", 1, 1050, 1350),
        _ev("lm_head", 0, 1400, 1800),
        _ev("embed", 0, 2000, 2010), _ev("qkv", 0, 2010, 2200), _ev("qkv", 1, 2050, 2150),
        _ev("lm_head", 0, 2200, 2600),
    ]
    s = summarize(events)
    assert s["prefill"]["steps"] == 1 and s["prefill"]["step_us"] == 0.7
    d = s["decode"]
    assert d["steps"] == 2 and d["step_us"] == (0.8 + 0.6) / 2
    assert d["busy_us"] == {0: (10 + 390 + 400 + 10 + 190 + 400) / 1e3 / 2, 1: (300 + 100) / 1e3 / 2}
    rows = {(r["op"], r["thread"]): r for r in d["ops"]}
    assert [(r["op"], r["thread"]) for r in d["ops"]] == [("embed", 0), ("qkv", 0), ("qkv", 1), ("lm_head", 0)]
    assert rows["qkv", 0]["events"] == 2 and rows["qkv", 0]["median_us"] == 0.29
    assert rows["qkv", 1]["per_step_us"] == 0.2
    text = render(s)
    assert text.startswith("prefill: 1 step(s)") and "decode: 2 step(s)" in text and "lm_head" in text
    with pytest.raises(ValueError, match="embed"):
        summarize([_ev("qkv", 0, 0, 1)])


def test_cli_trace_summary(tmp_path):
    r = _cli("trace", PROMPT, "-o", str(tmp_path / "s.json"), "-n", "4", "--threads", "2", "--summary",
             "--kv-type", "f16")
    assert r.returncode == 0, r.stderr
    assert "embedded model: kernels " in r.stdout and ", 2 thread(s), context " in r.stdout, r.stdout
    assert ", K/V f16\n" in r.stdout, r.stdout
    assert "prefill: 1 step(s)" in r.stdout and "decode: 3 step(s)" in r.stdout
    for op in SWIGLU_OPS:
        assert f"  {op} " in r.stdout, op
    assert "  gelu_mul " not in r.stdout


@pytest.mark.parametrize("fam,gate", [("gemma3", "gelu_mul"), ("qwen3", "silu_mul"), ("phi3", "silu_mul")])
def test_trace_names_the_gate_the_family_runs(shared_data, fam, gate):
    """Gemma's feed-forward gate is GELU (GeGLU), the others' SiLU (SwiGLU):
    the trace names the one that ran, once per layer and step."""
    from family_files import llamacpp_file
    with edgerun.Model(str(llamacpp_file(shared_data, fam)), n_ctx=64, n_threads=2, trace_events=20000) as m:
        n_layer = m.hparams["n_layer"]
        events = m.trace("Once upon a time", max_tokens=3, stop_at_eos=False)
    caller = [e for e in events if e["thread"] == 0]
    steps = sum(1 for e in caller if e["op"] == "embed")
    other = "silu_mul" if gate == "gelu_mul" else "gelu_mul"
    assert steps == 3
    assert sum(1 for e in caller if e["op"] == gate) == steps * n_layer
    assert not [e for e in events if e["op"] == other]
    assert all(e["op"] == OPS[e["op_id"]] for e in events)


def test_op_list_matches_the_header():
    """OPS by id is what the header's enum says (cffi reads edgerun.h), the
    appended ops after the ones a saved trace already numbers."""
    from edgerun._ffi import ffi, lib
    assert lib.ER_OP_COUNT == len(OPS)
    for i, op in enumerate(OPS):
        assert getattr(lib, f"ER_OP_{op.upper()}") == i, op
        assert ffi.string(lib.er_trace_op_name(i)).decode() == op
    assert ffi.string(lib.er_trace_op_name(len(OPS))).decode() == "unknown"


def _head_count_kv(path):
    """LFM2's per-layer K/V head counts, read with gguf-py: 0 marks a
    short-convolution layer (what the runtime reads, family.c)."""
    import gguf
    r = gguf.GGUFReader(str(path))
    return [int(x) for x in r.fields["lfm2.attention.head_count_kv"].contents()]


def test_trace_names_lfm2_convolution_layers(shared_data, tmp_path):
    """LFM2's short-convolution layers are traced as conv_in, shortconv and
    conv_out, its attention layers as qkv .. attn_out, each on its own
    layers: a reader of the trace can tell the two kinds apart."""
    from family_files import llamacpp_file
    path = llamacpp_file(shared_data, "lfm2")
    kv = _head_count_kv(path)
    conv = [l for l, n in enumerate(kv) if n == 0]
    attn = [l for l, n in enumerate(kv) if n > 0]
    assert conv and attn, kv               # the file mixes both, or this test shows nothing
    out = tmp_path / "lfm2.json"
    with edgerun.Model(str(path), n_ctx=64, n_threads=2, trace_events=20000) as m:
        assert m.hparams["n_layer"] == len(kv)
        events = m.trace("Once upon a time", path=out, max_tokens=3, stop_at_eos=False)
    caller = [e for e in events if e["thread"] == 0]
    steps = sum(1 for e in caller if e["op"] == "embed")
    assert steps == 3
    for op in CONV_OPS:
        assert sorted({e["layer"] for e in events if e["op"] == op}) == conv, op
        for layer in conv:
            assert sum(1 for e in caller if e["op"] == op and e["layer"] == layer) == steps, (op, layer)
    for op in ATTN_OPS:
        assert sorted({e["layer"] for e in events if e["op"] == op}) == attn, op
    for layer in conv + attn:               # both kinds keep the norms and the feed-forward block
        assert sum(1 for e in caller if e["op"] == "attn_norm" and e["layer"] == layer) == steps
        assert sum(1 for e in caller if e["op"] == "ffn_down" and e["layer"] == layer) == steps
    E = m.hparams["n_embd"]
    assert {tuple(e["shape"][1:]) for e in caller if e["op"] == "conv_in"} == {(3 * E, E)}
    assert {tuple(e["shape"][1:]) for e in caller if e["op"] == "shortconv"} == {(E, 3 * E)}
    assert {tuple(e["shape"][1:]) for e in caller if e["op"] == "conv_out"} == {(E, E)}
    assert all(e["op"] == OPS[e["op_id"]] for e in events)
    slices = check_chrome_trace(json.loads(out.read_text()), 2, len(kv))
    assert {s["args"]["layer"] for s in slices if s["name"] == "shortconv"} == set(conv)


def test_cli_trace_summary_lists_lfm2_convolution_ops(shared_data, tmp_path):
    from family_files import llamacpp_file
    path = llamacpp_file(shared_data, "lfm2")
    r = _cli("trace", str(path), "Once upon", "-n", "4", "-o", str(tmp_path / "x.json"), "--summary")
    assert r.returncode == 0, r.stderr
    table = r.stdout.split("decode: ", 1)[1]
    names = [line.split()[0] for line in table.splitlines()[2:] if line.startswith("  ")]
    # a convolution layer's block sits where attention's does, before ffn_norm
    assert names.index("attn_out") < names.index("conv_in") < names.index("shortconv") \
        < names.index("conv_out") < names.index("ffn_norm"), names
    assert "conv_in" in _cli("trace", "--help").stdout
