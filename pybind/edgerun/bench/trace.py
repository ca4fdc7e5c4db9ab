"""`edgerun trace`: every op of a generation as Chrome trace-event JSON, from
the runtime's event ring (er_trace_*), sized so that nothing is dropped.

    r = record("model.gguf", "Once upon a time", "story.json", max_tokens=32, n_threads=4)
    r["events"], r["output"]          # the events (trace_summary.summarize reads them) and the text
"""
import math

# Events one forward step records: embed, output_norm and lm_head once, ten ops
# per layer (eight in an LFM2 convolution layer: ten bounds both kinds), on the
# caller and at most as often again on every worker; plus, where a decode step
# runs its attention block by K/V head ranges, four per range (at most one
# range per K/V head).
OPS_OUTSIDE_LAYERS = 3
OPS_PER_LAYER = 10
OPS_PER_RANGE = 4
MAX_EVENTS = 1 << 24


def ring_events(n_prompt, max_tokens, n_batch, n_layer, n_threads, n_head_kv=0):
    """Ring capacity that holds every event of the run: forward steps (prefill
    chunks of n_batch, then one per generated token) x events per step."""
    steps = math.ceil(n_prompt / max(n_batch, 1)) + max(max_tokens, 0)
    per_step = (OPS_OUTSIDE_LAYERS + OPS_PER_LAYER * n_layer) * max(n_threads, 1) + \
        OPS_PER_RANGE * max(n_head_kv, 0) * n_layer
    return min(MAX_EVENTS, max(1, steps * per_step))


def record(path, prompt, output, max_tokens=16, **model_kw):
    """Generates `max_tokens` from `prompt` with the ring on and writes the trace
    to `output`. Returns {events, output (the text), isa, plan, capacity}."""
    from ..model import Model
    # The ring's size is fixed at open, and sizing it needs the prompt's token
    # count and the layer count: a first, ring-less open measures both.
    with Model(path, **model_kw) as probe:
        n_prompt = len(probe._ids(probe._encode(prompt, True)))
        n_layer, n_head_kv = probe.hparams["n_layer"], probe.hparams["n_head_kv"]
        plan = probe.plan()
    events = ring_events(n_prompt, max_tokens, plan["n_batch"], n_layer, plan["n_threads"], n_head_kv)
    with Model(path, trace_events=events, **model_kw) as m:
        ev = m.trace(prompt, path=output, max_tokens=max_tokens)
        out = m.stats()["output"]
        isa = m.isa
    return {"events": ev, "output": out, "isa": isa, "plan": plan, "capacity": events}
