"""What differs between the model families `edgerun convert` takes: one class
per family, each saying which Hugging Face tensors become which GGUF tensors,
which `<arch>.*` keys the header carries, how a tensor's data changes on the
way, and which config features it refuses.

The facts follow llama.cpp's convert_hf_to_gguf.py, because the runtime (and
llama.cpp) must read our files and llama.cpp's alike: same keys, same values,
same tensor names, shapes and layouts. tests/test_convert_families.py holds
each family's output against the file llama.cpp wrote from the same folder.

A config feature the runtime would not compute (a RoPE scaling it lacks, a
layer pattern other than the one it hard-codes, attention softcapping, ...)
raises ConvertError naming it: a converted file that opens and runs wrong is
worse than no file.
"""
import math

import numpy as np

# HF name (after "model.layers.N.") -> GGUF name (after "blk.N."), shared by
# the Llama-shaped families.
LLAMA_LAYER_NAMES = {
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
TOP_NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
_ATTN = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output")
_FFN = ("ffn_norm", "ffn_gate", "ffn_up", "ffn_down")


def rope_parameters(cfg):
    """(full, sliding): the RoPE settings of the global layers and, when the
    config has them, of the sliding-window layers; each a dict with at least
    rope_type ("default" when none) and rope_theta. transformers >= 5 nests them
    in rope_parameters (per layer kind for Gemma 3); older configs keep
    rope_theta, rope_local_base_freq and rope_scaling at the top level."""
    rp = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    if "full_attention" in rp or "sliding_attention" in rp:
        full, swa = dict(rp.get("full_attention") or {}), dict(rp.get("sliding_attention") or {})
    else:
        full = dict(rp)
        swa = {"rope_theta": cfg["rope_local_base_freq"]} if "rope_local_base_freq" in cfg else None
    full.setdefault("rope_theta", cfg.get("rope_theta", 10000.0))
    for p in (full, swa):
        if p is not None:
            p["rope_type"] = p.get("rope_type") or p.get("type") or "default"
    return full, swa


class Family:
    """The Llama shape: what every family shares unless it says otherwise."""
    arch = "llama"
    permute = False          # Q/K rows to interleaved RoPE pairs (llama.cpp's "undo_permute")
    layer_names = LLAMA_LAYER_NAMES
    top_names = TOP_NAMES
    rope_types = ("default",)
    biases = ()              # per-layer tensors whose .bias the runtime applies
    head_dim_keys = "differ"  # when attention.key_length is written: "differ" or "config"

    def __init__(self, cfg, hp, where):
        self.cfg, self.hp, self.where = cfg, hp, where
        self.rope, self.rope_swa = rope_parameters(cfg)

    # ---- refusals
    def check(self):
        cfg, where = self.cfg, self.where
        t = self.rope["rope_type"]
        if t not in self.rope_types:
            raise self.refuse(f"rope_scaling {t!r} is not supported by the runtime's {self.arch} yet; "
                              "convert a model without that RoPE scaling")
        if self.rope_swa is not None:
            raise self.refuse("rope_parameters for sliding_attention layers: the runtime's "
                              f"{self.arch} has no sliding-window layers")
        act = cfg.get("hidden_act", "silu")
        if act != "silu":
            raise self.refuse(f"hidden_act '{act}' is not supported; the runtime implements SwiGLU (silu)")
        if cfg.get("use_sliding_window") or "sliding_attention" in (cfg.get("layer_types") or ()):
            raise self.refuse(f"sliding_window {cfg.get('sliding_window')}: the runtime's {self.arch} "
                              "attends to every position")
        if cfg.get("attn_logit_softcapping") or cfg.get("final_logit_softcapping"):
            raise self.refuse("logit softcapping is not part of the runtime's " + self.arch)

    def refuse(self, msg):
        from .hf import ConvertError
        return ConvertError(f"{self.where}/config.json: {msg}")

    # ---- names
    @classmethod
    def gguf_name(cls, hf_name):
        """GGUF name of a HF parameter, or None for one the family does not map."""
        if hf_name in cls.top_names:
            return cls.top_names[hf_name]
        parts = hf_name.split(".")
        if len(parts) >= 5 and parts[0] == "model" and parts[1] == "layers" and parts[2].isdigit():
            stem = ".".join(parts[3:-1])
            if stem in cls.layer_names:
                return f"blk.{int(parts[2])}.{cls.layer_names[stem]}.{parts[-1]}"
        return None

    def required(self, i):
        """The tensors layer i must have."""
        return [f"blk.{i}.{t}.weight" for t in _ATTN + _FFN] + [f"blk.{i}.{t}.bias" for t in self.biases]

    def keep_f32(self, gguf_name):
        """Tensors llama.cpp stores in F32 whatever the file type (besides 1-D ones)."""
        return gguf_name.endswith("_norm.weight")

    # ---- data
    def out_shape(self, g, shape):
        """The shape tensor g is written with (HF's shape unless transform changes it)."""
        return shape

    def transform(self, g, arr):
        hp = self.hp
        if self.permute and g.endswith(("attn_q.weight", "attn_q.bias")):
            return permute_qk(arr, hp.n_head)
        if self.permute and g.endswith(("attn_k.weight", "attn_k.bias")):
            return permute_qk(arr, hp.n_head_kv)
        return arr

    def extra_tensors(self):
        """[(gguf name, float32 array)] computed from the config, written first."""
        return []

    # ---- header
    def common_keys(self, w):
        """The keys the llama-like families write first, in llama.cpp's order;
        a linear RoPE scaling with them (a family whose runtime does not apply
        it has the key refused at open, never ignored)."""
        hp, a = self.hp, self.arch
        w.add_uint32(f"{a}.context_length", hp.n_ctx)
        w.add_uint32(f"{a}.embedding_length", hp.n_embd)
        w.add_uint32(f"{a}.block_count", hp.n_layer)
        w.add_uint32(f"{a}.feed_forward_length", hp.n_ff)
        w.add_uint32(f"{a}.attention.head_count", hp.n_head)
        w.add_uint32(f"{a}.attention.head_count_kv", hp.n_head_kv)
        w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", hp.eps)
        w.add_float32(f"{a}.rope.freq_base", float(self.rope["rope_theta"]))
        if self.rope["rope_type"] == "linear":
            w.add_string(f"{a}.rope.scaling.type", "linear")
            w.add_float32(f"{a}.rope.scaling.factor", float(self.rope["factor"]))

    def header(self, w):
        """The `<arch>.*` keys, as llama.cpp's converter writes them for the family."""
        hp, a = self.hp, self.arch
        self.common_keys(w)
        self.rope_dims(w)
        if (self.head_dim_keys == "config" and "head_dim" in self.cfg) or hp.head_dim != hp.n_embd // hp.n_head:
            w.add_uint32(f"{a}.attention.key_length", hp.head_dim)
            w.add_uint32(f"{a}.attention.value_length", hp.head_dim)
        w.add_uint32(f"{a}.vocab_size", hp.n_vocab)

    def rope_dims(self, w):
        w.add_uint32(f"{self.arch}.rope.dimension_count", self.hp.head_dim)


def permute_qk(w, n_head):
    """Reorders each head's rows from HF's [first half | second half] RoPE layout
    to interleaved pairs (row 2i <- i, row 2i+1 <- i + head_dim/2), which is what
    llama.cpp's `llama` files contain and what the runtime's RoPE expects."""
    head_dim = w.shape[0] // n_head
    return (w.reshape(n_head, 2, head_dim // 2, *w.shape[1:])
             .swapaxes(1, 2)
             .reshape(w.shape))


class Llama(Family):
    """Llama 1-3, Mistral. Llama 3.x's RoPE scaling becomes the per-frequency
    divisors tensor rope_freqs.weight (no header key); linear scaling becomes
    rope.scaling.type/factor."""
    permute = True
    rope_types = ("default", "llama3", "linear")
    head_dim_keys = "config"

    def extra_tensors(self):
        if self.rope["rope_type"] != "llama3":
            return []
        return [("rope_freqs.weight", llama3_rope_factors(self.rope, self.hp.head_dim))]


def llama3_rope_factors(rp, dim):
    """Llama 3.x RoPE scaling as one divisor per frequency pair: 1 for short
    wavelengths, `factor` for long ones, a smooth blend between. Computed in
    float32 step by step, as llama.cpp's converter does, so the tensor is
    bit-identical to the one in llama.cpp's files."""
    f32 = np.float32
    base = f32(rp.get("rope_theta", 10000.0))
    factor = f32(rp.get("factor", 8.0))
    lo, hi = f32(rp.get("low_freq_factor", 1.0)), f32(rp.get("high_freq_factor", 4.0))
    old_ctx = f32(rp.get("original_max_position_embeddings", 8192))
    lo_wavelen, hi_wavelen = old_ctx / lo, old_ctx / hi
    freqs = f32(1.0) / np.power(base, np.arange(0, dim, 2, dtype=f32) / f32(dim))
    out = []
    for freq in freqs:
        wavelen = f32(2 * math.pi) / freq
        if wavelen < hi_wavelen:
            out.append(f32(1.0))
        elif wavelen > lo_wavelen:
            out.append(factor)
        else:
            smooth = (old_ctx / wavelen - lo) / (hi - lo)
            out.append(f32(1.0) / ((f32(1.0) - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


class Qwen2(Family):
    """Qwen2: NEOX RoPE (no permutation), Q/K/V biases."""
    arch = "qwen2"
    biases = ("attn_q", "attn_k", "attn_v")


class Qwen3(Family):
    """Qwen3: per-head RMSNorm of Q and K, no biases, NEOX RoPE. llama.cpp
    writes neither rope.dimension_count nor vocab_size for it."""
    arch = "qwen3"
    layer_names = {**LLAMA_LAYER_NAMES, "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm"}
    head_dim_keys = "config"

    def required(self, i):
        return super().required(i) + [f"blk.{i}.attn_q_norm.weight", f"blk.{i}.attn_k_norm.weight"]

    def check(self):
        super().check()
        if self.cfg.get("attention_bias"):
            raise self.refuse("attention_bias: the runtime's qwen3 applies no Q/K/V bias")

    def header(self, w):
        hp, a = self.hp, self.arch
        self.common_keys(w)
        if "head_dim" in self.cfg or hp.head_dim != hp.n_embd // hp.n_head:
            w.add_uint32(f"{a}.attention.key_length", hp.head_dim)
            w.add_uint32(f"{a}.attention.value_length", hp.head_dim)


class SmolLM3(Llama):
    """SmolLM3: Llama with RoPE left out of every 4th layer. transformers
    reads `no_rope_layers` (per layer, 1 = RoPE, 0 = NoPE), or when it is
    absent builds it from `no_rope_layer_interval` (default 4): layer i
    (from 0) is NoPE when (i + 1) % interval == 0. Neither llama.cpp nor the
    runtime reads the layer list from the file (llama.cpp writes no key; both
    fix the NoPE layers at 3, 7, 11, ...), so a config whose list, given or
    derived, differs is refused."""
    arch = "smollm3"
    rope_types = ("default",)

    def check(self):
        super().check()
        n = self.hp.n_layer
        want = [int((i + 1) % 4 != 0) for i in range(n)]
        nope = self.cfg.get("no_rope_layers")
        if nope is None:
            interval = self.cfg.get("no_rope_layer_interval", 4)
            if not isinstance(interval, int) or isinstance(interval, bool) or interval < 1:
                raise self.refuse(f"no_rope_layer_interval {interval!r}: not a positive layer count")
            nope = [int((i + 1) % interval != 0) for i in range(n)]
            source = f"no_rope_layer_interval {interval} (no no_rope_layers list)"
        else:
            source = f"no_rope_layers {list(nope)}"
        if not isinstance(nope, list) or [int(x) for x in nope] != want:
            raise self.refuse(f"{source}: the runtime's smollm3, like llama.cpp's, leaves RoPE out of every 4th "
                              f"layer (layers {[i for i, r in enumerate(want) if not r]} of {n}), and no "
                              f"other pattern (no_rope_layers must be {want})")


class Gemma3(Family):
    """Gemma 3 (text): GeGLU with tanh GELU, RMSNorm before and after attention
    and the feed-forward, Q/K norms, sliding-window layers with their own RoPE
    base. Gemma's RMSNorm scales by (1 + w): the file stores 1 + w."""
    arch = "gemma3"
    layer_names = {**LLAMA_LAYER_NAMES,
                   "post_attention_layernorm": "post_attention_norm",
                   "pre_feedforward_layernorm": "ffn_norm",
                   "post_feedforward_layernorm": "post_ffw_norm",
                   "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm"}

    def __init__(self, cfg, hp, where):
        super().__init__(cfg, hp, where)
        self.n_tokens = None
        try:
            from .tokenizer import tokenizer_kv
            self.n_tokens = len(dict((k, v) for k, v, _ in tokenizer_kv(where))["tokenizer.ggml.tokens"])
        except (FileNotFoundError, ValueError, KeyError):
            pass   # no tokenizer (or one convert refuses later): keep every row

    def required(self, i):
        return super().required(i) + [f"blk.{i}.{t}.weight" for t in
                                       ("post_attention_norm", "post_ffw_norm", "attn_q_norm", "attn_k_norm")]

    def check(self):
        cfg, hp = self.cfg, self.hp
        act = cfg.get("hidden_activation") or cfg.get("hidden_act") or "gelu_pytorch_tanh"
        if act != "gelu_pytorch_tanh":
            raise self.refuse(f"hidden_activation '{act}': the runtime's gemma3 computes GeGLU with tanh GELU")
        if cfg.get("attn_logit_softcapping"):
            raise self.refuse(f"attn_logit_softcapping {cfg['attn_logit_softcapping']}: attention softcapping "
                              "is not part of the runtime's gemma3")
        if cfg.get("use_bidirectional_attention"):
            raise self.refuse("use_bidirectional_attention: the runtime's gemma3 attends causally")
        for kind, p in (("full_attention", self.rope), ("sliding_attention", self.rope_swa or {})):
            allowed = ("default", "linear") if kind == "full_attention" else ("default",)
            if p.get("rope_type", "default") not in allowed:
                raise self.refuse(f"rope_scaling {p['rope_type']!r} on {kind} layers is not supported by the "
                                  "runtime's gemma3")
        # The runtime scales scores by 1/sqrt(head_dim), or 1/sqrt(n_embd/n_head) for
        # the 62-layer (27B) model, as llama.cpp does; it does not read the scalar.
        scalar = cfg.get("query_pre_attn_scalar", hp.head_dim)
        want = hp.n_embd // hp.n_head if hp.n_layer == 62 else hp.head_dim
        if scalar != want:
            raise self.refuse(f"query_pre_attn_scalar {scalar}: the runtime's gemma3 scales attention by "
                              f"1/sqrt({want})")
        # Layer kinds: every 6th layer global, the rest sliding (fixed in the runtime).
        kinds = cfg.get("layer_types")
        if kinds is None:
            pattern = cfg.get("sliding_window_pattern", cfg.get("_sliding_window_pattern", 6))
            kinds = ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(hp.n_layer)]
        want = ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(hp.n_layer)]
        if list(kinds) != want:
            raise self.refuse(f"layer_types {list(kinds)}: the runtime's gemma3 makes every 6th layer global "
                              "and the others sliding-window, nothing else")
        if not cfg.get("sliding_window"):
            raise self.refuse("gemma3 without sliding_window: the runtime needs the window of its local layers")

    def out_shape(self, g, shape):
        # llama.cpp drops embedding rows past the tokenizer's last token (padding
        # rows no token id reaches), so the vocabulary and the matrix agree
        if g == "token_embd.weight" and self.n_tokens and self.n_tokens < shape[0]:
            return (self.n_tokens, shape[1])
        return shape

    def transform(self, g, arr):
        if g == "token_embd.weight":
            arr = arr[:self.out_shape(g, arr.shape)[0]]
        if g.endswith("norm.weight"):
            # float32, not the checkpoint's dtype: 1 + w exactly as transformers
            # computes it (llama.cpp adds in the checkpoint's float16/bfloat16).
            return arr.astype(np.float32) + np.float32(1.0)
        return arr

    def header(self, w):
        hp, a, cfg = self.hp, self.arch, self.cfg
        self.common_keys(w)
        if self.rope_swa is not None:
            w.add_float32(f"{a}.rope.freq_base_swa", float(self.rope_swa.get("rope_theta", 10000.0)))
        w.add_uint32(f"{a}.attention.key_length", hp.head_dim)
        w.add_uint32(f"{a}.attention.value_length", hp.head_dim)
        if cfg.get("final_logit_softcapping"):
            w.add_float32(f"{a}.final_logit_softcapping", float(cfg["final_logit_softcapping"]))
        w.add_uint32(f"{a}.attention.sliding_window", int(cfg["sliding_window"]))


class Phi3(Family):
    """Phi-3 / Phi-4-mini: fused Q/K/V and gate+up projections (stored fused),
    partial rotary, NEOX RoPE, a sliding window on every layer when set."""
    arch = "phi3"
    rope_types = ("default", "longrope", "su")
    layer_names = {"input_layernorm": "attn_norm", "self_attn.qkv_proj": "attn_qkv",
                   "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
                   "mlp.gate_up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}

    def __init__(self, cfg, hp, where):
        super().__init__(cfg, hp, where)
        rot = float(self.rope.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0)))
        self.n_rot = int(rot * hp.n_embd) // hp.n_head
        # Phi-3's config has the original context at the top level and, in
        # transformers >= 5, in the rope parameters too (check() refuses two
        # different values: transformers takes the first, llama.cpp the second)
        self.orig_ctxs = {int(v) for v in (cfg.get("original_max_position_embeddings"),
                                           self.rope.get("original_max_position_embeddings")) if v}
        self.orig_ctx = min(self.orig_ctxs) if self.orig_ctxs else hp.n_ctx
        self.longrope = self.rope["rope_type"] in ("longrope", "su") or bool(self.rope.get("long_factor"))

    def required(self, i):
        return [f"blk.{i}.{t}.weight" for t in ("attn_norm", "attn_qkv", "attn_output", "ffn_norm",
                                                "ffn_up", "ffn_down")]

    def longrope_attn_factor(self):
        """What cos and sin are scaled by: sqrt(1 + ln(scale) / ln(original
        context)) for a context longer than the original, as llama.cpp's
        converter writes it and transformers computes it."""
        scale = self.hp.n_ctx / self.orig_ctx
        return math.sqrt(1 + math.log(scale) / math.log(self.orig_ctx)) if scale > 1.0 else 1.0

    def check(self):
        cfg = self.cfg
        if self.longrope:
            self.check_longrope()
        super().check()
        if self.hp.head_dim != self.hp.n_embd // self.hp.n_head:
            raise self.refuse(f"head_dim {self.hp.head_dim}: phi3 files have head_dim = hidden_size / heads")
        if self.n_rot % 2 or not 0 < self.n_rot <= self.hp.head_dim:
            raise self.refuse(f"partial_rotary_factor gives {self.n_rot} rotary dimensions of {self.hp.head_dim}")
        if cfg.get("attention_bias") or cfg.get("mlp_bias"):
            raise self.refuse("attention/mlp biases are not part of the runtime's phi3")

    def check_longrope(self):
        """LongRoPE (Phi-3.5-mini, Phi-4-mini): one divisor per rotated pair
        in each set, and an attention factor the runtime will compute as
        transformers does; a config that sets its own factor, which llama.cpp's
        converter would not write, is refused rather than run with another."""
        rp, half = self.rope, self.n_rot // 2
        for key in ("long_factor", "short_factor"):
            f = rp.get(key)
            if not isinstance(f, list) or len(f) != half or \
                    not all(isinstance(x, (int, float)) and math.isfinite(x) and x > 0 for x in f):
                raise self.refuse(f"rope_scaling {key} must list {half} positive numbers (one per rotated pair "
                                  f"of {self.n_rot} rotary dimensions), got {f!r:.80}")
        if len(self.orig_ctxs) > 1:
            raise self.refuse(f"original_max_position_embeddings differs between the config "
                              f"({sorted(self.orig_ctxs)}); say one")
        if self.orig_ctx < 2:
            raise self.refuse(f"original_max_position_embeddings {self.orig_ctx}: LongRoPE needs the original "
                              "context")
        given = rp.get("attention_factor")
        if given is not None and abs(float(given) - self.longrope_attn_factor()) > 1e-6:
            raise self.refuse(f"rope_scaling attention_factor {given}: llama.cpp's phi3 computes "
                              f"{self.longrope_attn_factor():.6f} from the contexts and ignores a given one")

    def extra_tensors(self):
        if not self.longrope:
            return []
        return [("rope_factors_long.weight", np.array(self.rope["long_factor"], np.float32)),
                ("rope_factors_short.weight", np.array(self.rope["short_factor"], np.float32))]

    def header(self, w):
        hp, a, cfg = self.hp, self.arch, self.cfg
        w.add_uint32(f"{a}.context_length", hp.n_ctx)
        w.add_uint32(f"{a}.rope.scaling.original_context_length", self.orig_ctx)
        w.add_uint32(f"{a}.embedding_length", hp.n_embd)
        w.add_uint32(f"{a}.feed_forward_length", hp.n_ff)
        w.add_uint32(f"{a}.block_count", hp.n_layer)
        w.add_uint32(f"{a}.attention.head_count", hp.n_head)
        w.add_uint32(f"{a}.attention.head_count_kv", hp.n_head_kv)
        w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", hp.eps)
        w.add_uint32(f"{a}.rope.dimension_count", self.n_rot)
        w.add_float32(f"{a}.rope.freq_base", float(self.rope["rope_theta"]))
        # 0 means none: llama.cpp tells Phi-4 (no window) from Phi-3 this way
        w.add_uint32(f"{a}.attention.sliding_window", int(cfg.get("sliding_window") or 0))
        if self.longrope:
            w.add_float32(f"{a}.rope.scaling.attn_factor", self.longrope_attn_factor())


class Lfm2(Family):
    """LFM2 / LFM2.5: gated short-convolution blocks and GQA attention blocks
    (with Q/K norms), the kind of each layer told by the per-layer K/V head
    count (0 for convolution). The final norm is named token_embd_norm, as in
    llama.cpp."""
    arch = "lfm2"
    layer_names = {"operator_norm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
                   "self_attn.v_proj": "attn_v", "self_attn.out_proj": "attn_output",
                   "self_attn.q_layernorm": "attn_q_norm", "self_attn.k_layernorm": "attn_k_norm",
                   "conv.conv": "shortconv.conv", "conv.in_proj": "shortconv.in_proj",
                   "conv.out_proj": "shortconv.out_proj", "ffn_norm": "ffn_norm",
                   "feed_forward.w1": "ffn_gate", "feed_forward.w3": "ffn_up", "feed_forward.w2": "ffn_down"}
    top_names = {"model.embed_tokens.weight": "token_embd.weight",
                 "model.embedding_norm.weight": "token_embd_norm.weight", "lm_head.weight": "output.weight"}

    def __init__(self, cfg, hp, where):
        super().__init__(cfg, hp, where)
        self.kinds = list(cfg.get("layer_types") or [])

    def check(self):
        cfg = self.cfg
        if len(self.kinds) != self.hp.n_layer or any(k not in ("conv", "full_attention") for k in self.kinds):
            raise self.refuse(f"layer_types {self.kinds}: lfm2 layers are 'conv' or 'full_attention', one each")
        if cfg.get("conv_bias"):
            raise self.refuse("conv_bias: lfm2 short convolutions with a bias are not supported")
        if self.rope["rope_type"] != "default":
            raise self.refuse(f"rope_scaling {self.rope['rope_type']!r} is not supported for lfm2")
        for k in ("block_auto_adjust_ff_dim", "block_multiple_of", "conv_L_cache"):
            if k not in cfg:
                raise self.refuse(f"lacks '{k}'; the file is incomplete")

    def required(self, i):
        ffn = [f"blk.{i}.{t}.weight" for t in _FFN]
        if self.kinds[i] == "conv":
            return ffn + [f"blk.{i}.{t}.weight" for t in ("attn_norm", "shortconv.conv", "shortconv.in_proj",
                                                          "shortconv.out_proj")]
        return ffn + [f"blk.{i}.{t}.weight" for t in _ATTN + ("attn_q_norm", "attn_k_norm")]

    def keep_f32(self, gguf_name):
        # the convolution kernel is F32 in llama.cpp's files at every file type
        return super().keep_f32(gguf_name) or gguf_name.endswith("shortconv.conv.weight")

    def out_shape(self, g, shape):
        return (shape[0], shape[-1]) if g.endswith("shortconv.conv.weight") else shape

    def transform(self, g, arr):
        if g.endswith("shortconv.conv.weight"):
            return arr.reshape(arr.shape[0], arr.shape[-1])   # (d, 1, L) -> (d, L)
        return arr

    def n_ff(self):
        """The feed-forward width the weights have: transformers shrinks
        intermediate_size to 2/3, times the multiplier, rounded up to
        block_multiple_of, when block_auto_adjust_ff_dim is set."""
        cfg = self.cfg
        ff = int(cfg.get("block_ff_dim") or cfg["intermediate_size"])
        if cfg["block_auto_adjust_ff_dim"]:
            ff = int(2 * ff / 3)
            if cfg.get("block_ffn_dim_multiplier") is not None:
                ff = int(cfg["block_ffn_dim_multiplier"] * ff)
            m = int(cfg["block_multiple_of"])
            ff = m * ((ff + m - 1) // m)
        return ff

    def header(self, w):
        from gguf import GGUFValueType as T
        hp, a, cfg = self.hp, self.arch, self.cfg
        w.add_uint32(f"{a}.block_count", hp.n_layer)
        w.add_uint32(f"{a}.context_length", hp.n_ctx)
        w.add_uint32(f"{a}.embedding_length", hp.n_embd)
        w.add_uint32(f"{a}.feed_forward_length", self.n_ff())
        w.add_uint32(f"{a}.attention.head_count", hp.n_head)
        w.add_array(f"{a}.attention.head_count_kv", [hp.n_head_kv if k != "conv" else 0 for k in self.kinds])
        w.add_float32(f"{a}.rope.freq_base", float(self.rope["rope_theta"]))
        w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", hp.eps)
        w.add_uint32(f"{a}.vocab_size", hp.n_vocab)
        w.add_key_value(f"{a}.shortconv.l_cache", int(cfg["conv_L_cache"]), T.UINT32)


# HF architecture name -> family class.
FAMILIES = {
    "LlamaForCausalLM": Llama,
    "MistralForCausalLM": Llama,
    "Qwen2ForCausalLM": Qwen2,
    "Qwen3ForCausalLM": Qwen3,
    "SmolLM3ForCausalLM": SmolLM3,
    "Gemma3ForCausalLM": Gemma3,
    "Phi3ForCausalLM": Phi3,
    "Lfm2ForCausalLM": Lfm2,
}
