"""Which GGML type each tensor gets for a requested file type: llama.cpp's
choices (llama_tensor_get_type in llama-quant.cpp, without an importance
matrix), so that `edgerun convert --type X` writes the tensor types that
`llama-quantize` writes from the same F32 model.

A file type names a default type that most 2-D weights get; then, by tensor
name, layer and model shape:

  * output.weight (and token_embd.weight when the model has no output.weight
    and reuses it): Q6_K, or Q8_0 when its rows do not split into blocks of
    the default type, or stays Q8_0 in a Q8_0 file;
  * attn_v (attention's value rows, small and sensitive) and ffn_down take
    more bits in most mixes: per layer index i of n layers (the "use more
    bits" layers are the first and last eighth and every third between),
    and for attn_v also by how many query heads share a KV head (n_gqa);
  * attn_output takes more bits in the Q2_K and Q3_K_M/L mixes;
  * last, the fallback: a tensor whose rows (ne[0]) are not a multiple of
    its type's block gets a 32-element type instead (IQ4_XS -> IQ4_NL,
    Q2_K/Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0), and F16 when
    rows are not even a multiple of 32.

f32, f16 and bf16 store every 2-D tensor in that type. 1-D tensors (norms,
biases) stay F32 in every file type, as llama.cpp leaves them. Q8_0 and
Q4_0 are llama.cpp's mixes too: every 2-D weight in the file type but the
output projection, which Q8_0 keeps in Q8_0 and Q4_0 stores as Q6_K (Q8_0
on rows not a multiple of 256).
"""

# file type -> (default GGML type, gguf.LlamaFileType member)
FTYPES = {
    "f32": ("f32", "ALL_F32"),
    "f16": ("f16", "MOSTLY_F16"),
    "bf16": ("bf16", "MOSTLY_BF16"),
    "q8_0": ("q8_0", "MOSTLY_Q8_0"),
    "q4_0": ("q4_0", "MOSTLY_Q4_0"),
    "q4_1": ("q4_1", "MOSTLY_Q4_1"),
    "q5_0": ("q5_0", "MOSTLY_Q5_0"),
    "q5_1": ("q5_1", "MOSTLY_Q5_1"),
    "iq4_nl": ("iq4_nl", "MOSTLY_IQ4_NL"),
    "iq4_xs": ("iq4_xs", "MOSTLY_IQ4_XS"),
    "q2_k": ("q2_k", "MOSTLY_Q2_K"),
    "q3_k_s": ("q3_k", "MOSTLY_Q3_K_S"),
    "q3_k_m": ("q3_k", "MOSTLY_Q3_K_M"),
    "q3_k_l": ("q3_k", "MOSTLY_Q3_K_L"),
    "q4_k_s": ("q4_k", "MOSTLY_Q4_K_S"),
    "q4_k_m": ("q4_k", "MOSTLY_Q4_K_M"),
    "q5_k_s": ("q5_k", "MOSTLY_Q5_K_S"),
    "q5_k_m": ("q5_k", "MOSTLY_Q5_K_M"),
    "q6_k": ("q6_k", "MOSTLY_Q6_K"),
}

# elements per block of each GGML type we write
BLOCK = {"f32": 1, "f16": 1, "bf16": 1, "q8_0": 32, "q4_0": 32, "q4_1": 32, "q5_0": 32, "q5_1": 32,
         "iq4_nl": 32, "iq4_xs": 256, "q2_k": 256, "q3_k": 256, "q4_k": 256, "q5_k": 256, "q6_k": 256}

# a type whose block does not fit the rows -> the 32-element type llama.cpp uses instead
FALLBACK = {"iq4_xs": "iq4_nl", "q2_k": "q4_0", "q3_k": "q4_0", "q4_k": "q5_0", "q5_k": "q5_1", "q6_k": "q8_0"}

# the float types: every 2-D weight takes the file type (see the module doc)
PURE = ("f32", "f16", "bf16")


def use_more_bits(i_layer, n_layer):
    """The layers llama.cpp's _M mixes give more bits: the first and last
    eighth, and every third layer in between."""
    return i_layer < n_layer // 8 or i_layer >= 7 * n_layer // 8 or (i_layer - n_layer // 8) % 3 == 2


def _category(name):
    """llama.cpp's tensor category, by the same name tests (substrings, in its order)."""
    if name == "output.weight":
        return "output"
    if name in ("token_embd.weight", "per_layer_token_embd.weight"):
        return "token_embd"
    for key, cat in (("attn_qkv.weight", "attn_v"), ("attn_kv_b.weight", "attn_v"), ("attn_v.weight", "attn_v"),
                     ("attn_k.weight", "attn_k"), ("attn_q.weight", "attn_q"),
                     ("attn_output.weight", "attn_output"), ("ffn_up", "ffn_up"), ("ffn_gate", "ffn_gate"),
                     ("ffn_down", "ffn_down")):
        if key in name:
            return cat
    return "other"


def _layer(name):
    parts = name.split(".")
    return int(parts[1]) if len(parts) > 2 and parts[0] == "blk" and parts[1].isdigit() else 0


def _mix(ftype, name, ncols, n_layer, n_gqa, tied):
    """The type before the fallback (llama_tensor_get_type_impl's choices for our file types)."""
    t = FTYPES[ftype][0]
    cat = _category(name)
    i = _layer(name)
    if cat == "output" or (tied and cat == "token_embd"):
        if ncols % BLOCK[t]:
            return "q8_0"
        return t if t == "q8_0" else "q6_k"
    if cat == "attn_v":
        # counted like llama.cpp's i_attention_wv: one attn_v per layer, in layer order
        if ftype == "q2_k":
            return "q4_k" if n_gqa >= 4 else "q3_k"
        if ftype == "q3_k_m":
            return "q5_k" if i < 2 else "q4_k"
        if ftype == "q3_k_l":
            return "q5_k"
        if ftype in ("iq4_nl", "iq4_xs") and n_gqa >= 4:
            return "q5_k"
        if ftype in ("q4_k_m", "q5_k_m") and use_more_bits(i, n_layer):
            return "q6_k"
        if ftype == "q4_k_s" and i < 4:
            return "q5_k"
        return t
    if cat == "ffn_down":
        if ftype == "q2_k":
            return "q3_k"
        if ftype == "q3_k_m":
            return "q5_k" if i < n_layer // 16 else "q4_k"
        if ftype == "q3_k_l":
            return "q5_k"
        if ftype == "q4_k_m":
            return "q6_k" if use_more_bits(i, n_layer) else t
        if ftype in ("iq4_nl", "iq4_xs") and i < n_layer // 8:
            return "q5_k"
        if ftype == "q5_k_m" and use_more_bits(i, n_layer):
            return "q6_k"
        if ftype == "q4_k_s" and i < n_layer // 8:
            return "q5_k"
        return t
    if cat == "attn_output":
        return {"q2_k": "q3_k", "q3_k_m": "q4_k", "q3_k_l": "q5_k"}.get(ftype, t)
    return t


def tensor_type(shape, ftype, name="", n_layer=1, tied=False, n_gqa=1):
    """(GGML type name, note or None) for a tensor of numpy `shape` (rows
    last) named `name` in a file of type `ftype`."""
    if len(shape) < 2 or ftype == "f32":
        return "f32", None
    ncols = shape[-1]
    if ftype in PURE:
        t = FTYPES[ftype][0]
    else:
        t = _mix(ftype, name, ncols, n_layer, n_gqa, tied)
    if ncols % BLOCK[t] == 0:
        return t, None
    fb = FALLBACK.get(t, t)
    if ncols % BLOCK[fb]:
        return "f16", f"row length {ncols} is not a multiple of {BLOCK[fb]}, stored as F16"
    return fb, f"row length {ncols} is not a multiple of {BLOCK[t]}, {t.upper()} falls back to {fb.upper()}"
