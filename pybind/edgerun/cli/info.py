"""`edgerun info [MODEL]`: hyper-parameters, tensor types, arena plan and ISA of a model."""
import json
import sys

from .. import console
from .options import add_model_options, formatter, human_bytes, model_kwargs

EPILOG = """\
examples:
  edgerun info                          # the embedded default model
  edgerun info model.gguf               # summary
  edgerun info model.gguf --tensors     # plus every tensor
  edgerun info model.gguf --ctx 4096 --threads 8   # the arena plan for those settings
  edgerun info model.gguf --json        # everything, for machines
  edgerun info --isa                    # only the kernel table this CPU gets, and why
  edgerun info --isa --use-isa generic  # check that a forced table is accepted
"""


def register(sub):
    p = sub.add_parser("info", help="describe a model", description=__doc__, epilog=EPILOG,
                       formatter_class=formatter())
    p.add_argument("model", nargs="?", default=None, help="GGUF file (default: the embedded model)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--tensors", action="store_true", help="list every tensor")
    p.add_argument("--isa", dest="only_isa", action="store_true",
                   help="print only the kernel table chosen for this CPU and why")
    add_model_options(p, isa_flag="--use-isa")
    p.set_defaults(func=main)


def cuda_line(c):
    if c["devices"]:
        return "cuda devices: " + "; ".join(
            f"{d['index']}: {d['name']} (sm {d['compute_capability']}, {human_bytes(d['total_bytes'])}"
            f"{', integrated' if d['integrated'] else ''})" for d in c["devices"])
    return f"cuda devices: none ({c['why_none']})"


def __getattr__(name):
    # describe() and cuda_info() lived here before edgerun/describe.py; imported
    # on use, because importing this module must not load the C library
    # (`edgerun --help` and `edgerun convert` work before it is built).
    if name in ("describe", "cuda_info"):
        from .. import describe
        return getattr(describe, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(args):
    from ..describe import describe
    from ..model import Model
    with Model(args.model, **model_kwargs(args)) as m:
        d = describe(m)
    if args.json:
        d["n_tensors"] = len(d["tensors"])
        print(json.dumps(d))
        return 0
    if args.only_isa:
        print(f"isa: {d['isa']} ({d['isa_reason']})")
        print(f"cpu features: {d['cpu_features'] or '(none detected)'}")
        print(cuda_line(d["cuda"]))
        return 0
    if console.is_terminal(sys.stdout):
        return _tables(d, args.tensors)
    hp = d["hparams"]
    print(f"model: {d['path']}")
    print(f"  arch {hp['arch']}  name {hp['name'] or '-'}  params {hp['n_params']:,}  "
          f"weights {human_bytes(hp['weight_bytes'])}")
    print("hyper-parameters:")
    for k in ("n_vocab", "n_embd", "n_layer", "n_head", "n_head_kv", "head_dim", "n_ff", "n_ctx_train",
              "rope_freq_base", "rms_eps", "tied_output", "has_qkv_bias"):
        print(f"  {k:<15} {hp[k]}")
    print("family settings:")
    for k, v in family_rows(d):
        print(f"  {k:<15} {v}")
    print("tensor types:")
    for t, e in sorted(d["types"].items(), key=lambda kv: -kv[1]["bytes"]):
        print(f"  {t:<6} {e['count']:>5} tensors  {human_bytes(e['bytes']):>10}")
    if args.tensors:
        print("tensors:")
        for t in d["tensors"]:
            shape = "x".join(str(x) for x in t["shape"])
            print(f"  {t['name']:<32} {t['type']:<6} {shape:<16} {human_bytes(t['nbytes']):>10}")
    if d["tokenizer"]:
        tk = d["tokenizer"]
        print(f"tokenizer: {tk['kind']} ({tk['pre'] or '-'}), {tk['n_tokens']} tokens, "
              f"bos {tk['bos']}, eos {tk['eos']}")
    else:
        print("tokenizer: none (ids in, ids out)")
    print(f"isa: {d['isa']} ({d['isa_reason']})")
    print(f"cpu features: {d['cpu_features'] or '(none detected)'}")
    print(cuda_line(d["cuda"]))
    pl = d["plan"]
    print(f"arena plan: {human_bytes(pl['total_bytes'])} for n_ctx {pl['n_ctx']}, n_batch {pl['n_batch']}, "
          f"{pl['n_threads']} threads, {pl['n_sessions']} session(s), KV {pl['kv_type']}")
    total = max(pl["total_bytes"], 1)
    for s in pl["sections"]:
        if s.get("device", "host") != "host":
            continue
        kind = "persistent" if s["persistent"] else "scratch"
        print(f"  {s['name']:<14} {human_bytes(s['bytes']):>10} {100 * s['bytes'] / total:5.1f}%  {kind}")
    if pl.get("device_bytes") or pl.get("pinned_bytes"):
        print(f"gpu plan: {human_bytes(pl['device_bytes'])} in one device allocation, "
              f"{human_bytes(pl['pinned_bytes'])} pinned host staging")
        dtotal = max(pl["device_bytes"], 1)
        for s in pl["sections"]:
            if s.get("device", "host") == "host":
                continue
            kind = "persistent" if s["persistent"] else "scratch"
            print(f"  {s['name']:<16} {human_bytes(s['bytes']):>10} {100 * s['bytes'] / dtotal:5.1f}%  {kind}")
    return 0


def _num(x):
    return f"{x:.4g}" if isinstance(x, float) and x != int(x) else str(int(x))


def _ordinal(k):
    return f"{k}{'th' if 10 <= k % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


def _every(layers, n):
    """k when `layers` are exactly every k-th of n (k-1, 2k-1, ...), else None."""
    k = layers[0] + 1 if layers else 0
    return k if k > 1 and layers == list(range(k - 1, n, k)) else None


def _factors(f):
    if not f:
        return "per-frequency divisors (not readable)"
    return f"{len(f)} per-frequency divisors from {_num(min(f))} to {_num(max(f))}"


def family_rows(d):
    """(setting, text) rows for what sets a family apart, from describe()'s
    layers and rope_scaling: the layer layout where blocks differ, RoPE's
    dimensions, base and scaling, layers without RoPE, the sliding window
    and the logit softcap, each where the model has it."""
    hp, ls, rs = d["hparams"], d["layers"], d["rope_scaling"]
    n = len(ls)
    attn = [i for i, x in enumerate(ls) if x["block"] == "attention"]
    rows = []
    conv = [i for i, x in enumerate(ls) if x["block"] == "shortconv"]
    if conv:
        k = ls[conv[0]].get("kernel")
        rows.append(("layers", f"{len(conv)} short-convolution{f' (kernel {k})' if k else ''}, "
                               f"{len(attn)} attention: " + " ".join("c" if x["block"] == "shortconv" else "a"
                                                                     for x in ls)))
    dims = f"all {hp['head_dim']}" if hp["n_rot"] == hp["head_dim"] else f"{hp['n_rot']} of {hp['head_dim']}"
    rows.append(("rope", f"on {dims} dims per head, base {_num(hp['rope_freq_base'])}"))
    nope = [i for i in attn if not ls[i]["rope"]]
    if nope:
        k = _every(nope, n)
        rows.append(("no rope", (f"every {_ordinal(k)} layer: " if k else f"{len(nope)} of {len(attn)} layers: ")
                     + ", ".join(map(str, nope))))
    local = [i for i in attn if ls[i]["window"]]
    if local:
        glob = [i for i in attn if not ls[i]["window"]]
        w = ls[local[0]]["window"]
        k = _every(glob, n)
        where = ("every layer" if not glob else
                 f"{k - 1} of every {k} layers ({len(local)} of {n}; global: {', '.join(map(str, glob))})" if k else
                 f"{len(local)} of {len(attn)} layers (global: {', '.join(map(str, glob))})")
        base = f", local RoPE base {_num(hp['rope_freq_base_swa'])}" \
            if glob and hp["rope_freq_base_swa"] != hp["rope_freq_base"] else ""
        rows.append(("sliding window", f"{w} positions on {where}{base}"))
    t = rs["type"]
    if t == "linear":
        s = f"linear, factor {_num(rs['factor'])} (positions divided by it)"
    elif t == "llama3":
        s = f"llama3 (rope_freqs.weight): {_factors(rs['factors'])}"
    elif t == "longrope":
        oc, n_ctx = rs["original_context"], d["plan"]["n_ctx"]
        why = f"n_ctx {n_ctx} {'>' if rs['set'] == 'long' else '<='} original context {oc}" if oc else "chosen at open"
        s = f"LongRoPE, the {rs['set']} set ({why}): {_factors(rs['factors'])}"
    else:
        s = "none"
    if t != "none" and rs.get("layers") == "global" and local:
        s += ", on the global layers"
    if rs["attn_factor"] != 1.0:
        s += f"; cos and sin scaled by {_num(rs['attn_factor'])}"
    rows.append(("rope scaling", s))
    c = hp["final_logit_softcap"]
    if c > 0:
        rows.append(("logit softcap", f"{_num(c)}: logits = {_num(c)} * tanh(logits / {_num(c)})"))
    return rows


HPARAMS = ("n_vocab", "n_embd", "n_layer", "n_head", "n_head_kv", "head_dim", "n_ff", "n_ctx_train",
           "rope_freq_base", "rms_eps", "tied_output", "has_qkv_bias")


def _tables(d, tensors):
    """What the plain text says, as tables (a terminal only)."""
    hp, pl = d["hparams"], d["plan"]
    print(f"model: {d['path']}")
    print(f"  arch {hp['arch']}  name {hp['name'] or '-'}  params {hp['n_params']:,}  "
          f"weights {human_bytes(hp['weight_bytes'])}")
    console.table(("hyper-parameter", "value"), [(k, hp[k]) for k in HPARAMS], right=("value",))
    console.table(("family setting", "value"), family_rows(d))
    console.table(("type", "tensors", "bytes"),
                  [(t, e["count"], human_bytes(e["bytes"]))
                   for t, e in sorted(d["types"].items(), key=lambda kv: -kv[1]["bytes"])], right=("tensors", "bytes"))
    if tensors:
        console.table(("tensor", "type", "shape", "bytes"),
                      [(t["name"], t["type"], "x".join(str(x) for x in t["shape"]), human_bytes(t["nbytes"]))
                       for t in d["tensors"]], right=("bytes",))
    tk = d["tokenizer"]
    print(f"tokenizer: {tk['kind']} ({tk['pre'] or '-'}), {tk['n_tokens']} tokens, bos {tk['bos']}, eos {tk['eos']}"
          if tk else "tokenizer: none (ids in, ids out)")
    print(f"isa: {d['isa']} ({d['isa_reason']})")
    print(f"cpu features: {d['cpu_features'] or '(none detected)'}")
    print(cuda_line(d["cuda"]))
    for where, title, total in (("host", f"arena plan: {human_bytes(pl['total_bytes'])} for n_ctx {pl['n_ctx']}, "
                                         f"n_batch {pl['n_batch']}, {pl['n_threads']} threads, {pl['n_sessions']} "
                                         f"session(s), KV {pl['kv_type']}", pl["total_bytes"]),
                                ("device", f"gpu plan: {human_bytes(pl.get('device_bytes') or 0)} in one device "
                                           f"allocation, {human_bytes(pl.get('pinned_bytes') or 0)} pinned host "
                                           "staging", pl.get("device_bytes") or 0)):
        secs = [s for s in pl["sections"] if (s.get("device", "host") == "host") == (where == "host")]
        if where == "device" and not (pl.get("device_bytes") or pl.get("pinned_bytes")):
            continue
        console.table(("section", "bytes", "share", "kind"),
                      [(s["name"], human_bytes(s["bytes"]), f"{100 * s['bytes'] / max(total, 1):.1f}%",
                        "persistent" if s["persistent"] else "scratch") for s in secs],
                      title=title, right=("bytes", "share"))
    return 0
