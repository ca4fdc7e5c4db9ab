/*
 * family.c — the model families this runtime runs, one row each, and the
 * check that a file says nothing the row does not understand.
 *
 * A family is not a forward function of its own: it is a set of traits
 * (model.h, ER_T_*) that switch steps of the one forward pass on, the
 * metadata keys under "<arch>." the family reads, and how its layers differ
 * from each other (er_family_layer). Keys are an allow-list: a key under
 * "<arch>." that no row names may change the arithmetic (a RoPE scaling, a
 * softcap, a window), and running the file without applying it would give
 * plausible wrong numbers, so the file is refused with the key's name.
 * Tensors are checked the other way, at open (model.c): every tensor must
 * be bound by some step.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "model.h"

/* Keys every family reads (plan.c, read_hparams), or that only describe. */
static const char *const k_common[] = {
    "context_length", "embedding_length", "block_count", "feed_forward_length", "attention.head_count",
    "attention.head_count_kv", "attention.layer_norm_rms_epsilon", "attention.key_length",
    "attention.value_length", "rope.freq_base", "rope.dimension_count",
    /* n_vocab comes from token_embd's shape; the key only repeats it (checked below) */
    "vocab_size", NULL,
};

static const char *const k_llama[] = {"rope.scaling.type", "rope.scaling.factor", NULL};
static const char *const k_none[] = {NULL};
static const char *const k_gemma3[] = {"attention.sliding_window", "rope.freq_base_swa", "final_logit_softcapping",
                                       "rope.scaling.type", "rope.scaling.factor", NULL};
static const char *const k_phi3[] = {"attention.sliding_window", "rope.scaling.original_context_length",
                                     "rope.scaling.attn_factor", NULL};
static const char *const k_lfm2[] = {"shortconv.l_cache", NULL};

typedef struct er_family {
    const char *arch;
    unsigned traits;
    const char *const *keys;   /* suffixes under "<arch>." beyond k_common */
} er_family;

/* qwen2 and every family after llama rotate halves of each head (llama.cpp's
 * converter permutes Q and K of llama and smollm3 to adjacent pairs). */
static const er_family k_families[] = {
    {"llama", 0, k_llama},
    {"qwen2", ER_T_NEOX | ER_T_QKV_BIAS, k_none},
    {"qwen3", ER_T_NEOX | ER_T_QK_NORM, k_none},
    {"smollm3", ER_T_NOPE4, k_none},
    {"gemma3", ER_T_NEOX | ER_T_QK_NORM | ER_T_POST_NORMS | ER_T_GELU | ER_T_EMBD_SCALE | ER_T_SWA6, k_gemma3},
    {"phi3", ER_T_NEOX | ER_T_FUSED, k_phi3},
    {"lfm2", ER_T_NEOX | ER_T_QK_NORM | ER_T_SHORTCONV, k_lfm2},
};
#define N_FAMILIES (sizeof k_families / sizeof k_families[0])

const char *er_family_list(void) { return "llama, qwen2, qwen3, smollm3, gemma3, phi3, lfm2"; }

static bool in_list(const char *const *list, const char *s, size_t n) {
    for (; *list; list++)
        if (strlen(*list) == n && memcmp(*list, s, n) == 0) return true;
    return false;
}

/* Every key under "<arch>." must be one the family reads (or one that only
 * describes). Other namespaces are not the model's arithmetic: general.*
 * describes the file (general.alignment is gguf.c's), tokenizer.* is the
 * tokenizer's, quantize.* records how the file was made, and a tool's own
 * namespace is what llama.cpp would not read either; but an adapter.* key
 * marks a LoRA adapter, not a model, and a split.* key a file whose tensors
 * are partly in other files. */
static int check_keys(const gguf_file *f, const er_family *fam) {
    const size_t an = strlen(fam->arch);
    for (uint64_t i = 0; i < f->n_kv; i++) {
        gguf_kv kv;
        gguf_kv_at(f, i, &kv);
        const char *k = kv.key.ptr;
        const size_t n = (size_t)kv.key.len;
        const int shown = n > 80 ? 80 : (int)n;
        if (n > an + 1 && memcmp(k, fam->arch, an) == 0 && k[an] == '.') {
            const char *suf = k + an + 1;
            if (in_list(k_common, suf, n - an - 1) || in_list(fam->keys, suf, n - an - 1)) continue;
            return er_fail(ER_EUNSUPPORTED,
                           "key '%.*s' is not understood by this runtime's %s support: it may change what the "
                           "model computes, so the file is refused rather than run approximately",
                           shown, k, fam->arch);
        }
        if ((n > 8 && memcmp(k, "adapter.", 8) == 0))
            return er_fail(ER_EUNSUPPORTED, "key '%.*s': this is a LoRA adapter, not a model this runtime runs",
                           shown, k);
        if ((n > 6 && memcmp(k, "split.", 6) == 0))
            return er_fail(ER_EUNSUPPORTED, "key '%.*s': split GGUF files are not supported (merge them into one "
                           "with llama.cpp's gguf-split --merge)", shown, k);
    }
    return ER_OK;
}

static int get_f32_key(const gguf_file *f, const char *arch, const char *suffix, float *out, bool *present) {
    char key[96];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    *present = gguf_find_kv(f, key, &(gguf_kv){0});
    if (*present && !gguf_get_f32(f, key, out)) return er_fail(ER_ECORRUPT, "key '%s' is not a number", key);
    if (*present && !isfinite(*out)) return er_fail(ER_ECORRUPT, "key '%s' is not finite", key);
    return ER_OK;
}

static const er_family *find_family(er_str arch) {
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (er_str_eq(arch, k_families[i].arch)) return &k_families[i];
    return NULL;
}

int er_family_check(er_str arch) {
    if (!find_family(arch))
        return er_fail(ER_EUNSUPPORTED, "architecture '%.*s' is not supported; this runtime runs %s",
                       (int)(arch.len > 40 ? 40 : arch.len), arch.ptr, er_family_list());
    return ER_OK;
}

int er_family_read(const gguf_file *f, er_str arch, er_hparams *hp, er_dims *d) {
    const er_family *fam = find_family(arch);
    if (!fam) return er_family_check(arch);
    int rc = check_keys(f, fam);
    if (rc) return rc;
    d->traits = fam->traits;
    d->family = fam->arch;
    const char *a = fam->arch;
    char key[96];
    bool present;

    /* RoPE scaling: "linear" divides every frequency by the factor (on
     * gemma3's global layers only, as transformers and llama.cpp do);
     * anything else (yarn, longrope as a type) is refused by name. */
    hp->rope_scale = 1.0f;
    er_str s;
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    if (gguf_find_kv(f, key, &(gguf_kv){0})) {
        if (!gguf_get_str(f, key, &s)) return er_fail(ER_ECORRUPT, "key '%s' is not a string", key);
        if (!er_str_eq(s, "linear") && !er_str_eq(s, "none"))
            return er_fail(ER_EUNSUPPORTED, "key '%s' = '%.*s': this runtime applies RoPE scaling 'linear' only",
                           key, (int)(s.len > 32 ? 32 : s.len), s.ptr);
        if (er_str_eq(s, "linear")) {
            if ((rc = get_f32_key(f, a, "rope.scaling.factor", &hp->rope_scale, &present))) return rc;
            if (!present) return er_fail(ER_ECORRUPT, "key '%s' is 'linear' but %s.rope.scaling.factor is missing", key, a);
            if (!(hp->rope_scale > 0.0f)) return er_fail(ER_ECORRUPT, "key '%s.rope.scaling.factor' must be positive", a);
        }
    } else {
        /* a factor without a type: llama.cpp would ignore it; so would we,
         * silently, so refuse it instead */
        snprintf(key, sizeof key, "%s.rope.scaling.factor", a);
        if (gguf_find_kv(f, key, &(gguf_kv){0}))
            return er_fail(ER_EUNSUPPORTED, "key '%s' is present without %s.rope.scaling.type", key, a);
    }

    /* sliding window: gemma3's local layers (every layer but each sixth);
     * phi3's converter writes 0 for "none" and a window on all layers else */
    snprintf(key, sizeof key, "%s.attention.sliding_window", a);
    if (gguf_find_kv(f, key, &(gguf_kv){0})) {
        uint32_t w;
        if (!gguf_get_u32(f, key, &w)) return er_fail(ER_ECORRUPT, "key '%s' is not an unsigned integer", key);
        if (w > (1u << 24)) return er_fail(ER_ECORRUPT, "key '%s' = %u is absurd", key, w);
        hp->sliding_window = (int32_t)w;
    } else if (fam->traits & ER_T_SWA6) {
        return er_fail(ER_ECORRUPT, "required key '%s' is missing", key);
    }

    hp->rope_freq_base_swa = hp->rope_freq_base;
    if ((rc = get_f32_key(f, a, "rope.freq_base_swa", &hp->rope_freq_base_swa, &present))) return rc;
    if (present && !(hp->rope_freq_base_swa > 0.0f))
        return er_fail(ER_ECORRUPT, "key '%s.rope.freq_base_swa' must be positive", a);
    hp->rope_attn_factor = 1.0f;
    if ((rc = get_f32_key(f, a, "rope.scaling.attn_factor", &hp->rope_attn_factor, &present))) return rc;
    if (present && !(hp->rope_attn_factor > 0.0f))
        return er_fail(ER_ECORRUPT, "key '%s.rope.scaling.attn_factor' must be positive", a);
    /* LongRoPE (Phi-3.5, Phi-4-mini): per-frequency divisors for short and
     * long contexts; which one is read at open (model.c) from n_ctx */
    if ((fam->traits & ER_T_FUSED) && gguf_find_tensor(f, "rope_factors_long.weight", NULL)) {
        uint32_t orig;
        snprintf(key, sizeof key, "%s.rope.scaling.original_context_length", a);
        if (!gguf_get_u32(f, key, &orig) || orig < 1)
            return er_fail(ER_ECORRUPT, "tensor 'rope_factors_long.weight' needs key '%s'", key);
        if (!gguf_find_tensor(f, "rope_factors_short.weight", NULL))
            return er_fail(ER_ECORRUPT, "tensor 'rope_factors_long.weight' without 'rope_factors_short.weight'");
        hp->rope_longrope = (int32_t)orig; /* the original context, until er_plan_file picks the set */
        hp->rope_orig_ctx = (int32_t)orig;
    }
    if ((rc = get_f32_key(f, a, "final_logit_softcapping", &hp->final_logit_softcap, &present))) return rc;
    if (present && !(hp->final_logit_softcap > 0.0f))
        return er_fail(ER_ECORRUPT, "key '%s.final_logit_softcapping' must be positive", a);

    /* LFM2's short convolutions: kernel length (taps) of every conv layer */
    if (fam->traits & ER_T_SHORTCONV) {
        uint32_t lc;
        snprintf(key, sizeof key, "%s.shortconv.l_cache", a);
        if (!gguf_get_u32(f, key, &lc)) return er_fail(ER_ECORRUPT, "required key '%s' is missing (or not a u32)", key);
        if (lc < 1 || lc > 64) return er_fail(ER_EUNSUPPORTED, "key '%s' = %u is out of range [1, 64]", key, lc);
        d->conv_l = (int)lc;
    }

    /* the embedding's own count must agree with the vocabulary key */
    uint32_t nv;
    snprintf(key, sizeof key, "%s.vocab_size", a);
    if (gguf_find_kv(f, key, &(gguf_kv){0}) && (!gguf_get_u32(f, key, &nv) || (int)nv != hp->n_vocab))
        return er_fail(ER_ECORRUPT, "key '%s' does not match token_embd.weight's %d rows", key, hp->n_vocab);
    return ER_OK;
}

/* Element l of an integer array key (I32 or U32), or -1. */
static int64_t arr_int(const gguf_kv *kv, uint64_t l) {
    if (l >= kv->arr_n) return -1;
    if (kv->arr_type == GGUF_I32) {
        int32_t v;
        memcpy(&v, kv->arr_data + 4 * l, 4);
        return v;
    }
    uint32_t v;
    memcpy(&v, kv->arr_data + 4 * l, 4);
    return v;
}

int er_family_head_count_kv(const gguf_file *f, const char *arch, int n_layer, int *n_head_kv) {
    char key[96];
    snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
    gguf_kv kv;
    if (!gguf_find_kv(f, key, &kv) || kv.type != GGUF_ARR) return 0;
    if (kv.arr_type != GGUF_I32 && kv.arr_type != GGUF_U32)
        return er_fail(ER_ECORRUPT, "key '%s' is an array of the wrong type (want integers)", key);
    if (kv.arr_n != (uint64_t)n_layer)
        return er_fail(ER_ECORRUPT, "key '%s' has %llu elements for %d layers", key, (unsigned long long)kv.arr_n,
                       n_layer);
    /* per layer: 0 marks a layer without attention (LFM2's convolutions);
     * every attention layer must have the same count (one cache row size) */
    int n = 0;
    for (int l = 0; l < n_layer; l++) {
        const int64_t v = arr_int(&kv, (uint64_t)l);
        if (v < 0 || v > (1 << 20)) return er_fail(ER_ECORRUPT, "key '%s'[%d] = %lld is out of range", key, l, (long long)v);
        if (v && n && v != n)
            return er_fail(ER_EUNSUPPORTED, "key '%s': attention layers with different K/V head counts (%d, %lld)",
                           key, n, (long long)v);
        if (v) n = (int)v;
    }
    if (!n) return er_fail(ER_EUNSUPPORTED, "key '%s': no layer has attention", key);
    *n_head_kv = n;
    return 1;
}

unsigned er_family_layer(const gguf_file *f, const er_dims *d, const er_hparams *hp, int l) {
    unsigned k = 0;
    /* LFM2: a layer whose K/V head count is 0 is a short-convolution block */
    if (d->traits & ER_T_SHORTCONV) {
        char key[96];
        snprintf(key, sizeof key, "%s.attention.head_count_kv", hp->arch);
        gguf_kv kv;
        if (gguf_find_kv(f, key, &kv) && kv.type == GGUF_ARR && arr_int(&kv, (uint64_t)l) == 0) k |= ER_L_CONV;
    }
    /* SmolLM3 leaves RoPE out of every fourth layer; llama.cpp's converter
     * writes no key for it (its runtime fixes the step at 4, as
     * transformers' no_rope_layer_interval default does) */
    if ((d->traits & ER_T_NOPE4) && (l + 1) % 4 == 0) k |= ER_L_NOPE;
    /* Gemma 3: five local (sliding-window) layers, then a global one */
    if ((d->traits & ER_T_SWA6) && (l + 1) % 6 != 0 && hp->sliding_window > 0) k |= ER_L_SWA;
    /* Phi-3: a window on every layer where the file sets one */
    if ((d->traits & ER_T_FUSED) && hp->sliding_window > 0) k |= ER_L_SWA;
    return k;
}
