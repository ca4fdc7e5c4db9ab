/*
 * sampler.c — next-token selection from the session's last logits.
 *
 * Order of the chain: repetition penalty -> (greedy stops here) -> temperature
 * -> top-k -> top-p -> min-p -> draw. Temperature comes before the
 * truncations, as in Hugging Face's logits warpers, so top-p sees the
 * distribution actually sampled from. All work is in the session's
 * candidate arrays (arena); sorting is an in-place heapsort because libc's
 * qsort may allocate.
 */
#include <math.h>

#include "error.h"
#include "model.h"

int er_sampling_default(er_sampling *p) {
    if (!p) return er_fail(ER_EINVAL, "er_sampling_default: params is NULL");
    *p = (er_sampling){.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f,
                       .repeat_penalty = 1.0f, .repeat_last_n = 0};
    return ER_OK;
}

/* xorshift64*: uniform in [0, 1) with 24 bits, plenty for sampling and
 * identical on every platform for a given seed. */
static float next_uniform(uint64_t *state) {
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return (float)((x * 0x2545F4914F6CDD1Dull) >> 40) / 16777216.0f;
}

/* Candidate a ranks before b: higher logit first, lower id on ties (deterministic). */
static inline bool before(const float *p, const int32_t *id, int a, int b) {
    return p[a] > p[b] || (p[a] == p[b] && id[a] < id[b]);
}

static inline void swap(float *p, int32_t *id, int a, int b) {
    float tp = p[a];
    p[a] = p[b];
    p[b] = tp;
    int32_t ti = id[a];
    id[a] = id[b];
    id[b] = ti;
}

/* Heapsort into ranking order, best first: a heap with the best candidate at
 * the root; extraction fills the array from the end, then one reversal. */
static void sift(float *p, int32_t *id, int root, int n) {
    for (;;) {
        int c = 2 * root + 1;
        if (c >= n) return;
        if (c + 1 < n && before(p, id, c + 1, c)) c++;
        if (!before(p, id, c, root)) return;
        swap(p, id, root, c);
        root = c;
    }
}

static void sort_ranked(float *p, int32_t *id, int n) {
    for (int i = n / 2 - 1; i >= 0; i--) sift(p, id, i, n);
    for (int end = n - 1; end > 0; end--) {
        swap(p, id, 0, end);
        sift(p, id, 0, end);
    }
    for (int i = 0, j = n - 1; i < j; i++, j--) swap(p, id, i, j);
}

/* Moves the k best candidates to [0, k) (unordered) by quickselect. */
static void select_top(float *p, int32_t *id, int n, int k) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        swap(p, id, mid, hi);
        int store = lo;
        for (int i = lo; i < hi; i++)
            if (before(p, id, i, hi)) swap(p, id, i, store++);
        swap(p, id, store, hi);
        if (store == k) return;
        if (store < k) lo = store + 1;
        else hi = store - 1;
    }
}

static int check_params(const er_sampling *p) {
    if (!(p->temperature >= 0.0f) || isinf(p->temperature))
        return er_fail(ER_EINVAL, "temperature %g must be a finite number >= 0", (double)p->temperature);
    if (p->top_k < 0) return er_fail(ER_EINVAL, "top_k %d must be >= 0 (0 = off)", p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f)) return er_fail(ER_EINVAL, "top_p %g must be in (0, 1]", (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f)) return er_fail(ER_EINVAL, "min_p %g must be in [0, 1]", (double)p->min_p);
    if (!(p->repeat_penalty > 0.0f) || isinf(p->repeat_penalty))
        return er_fail(ER_EINVAL, "repeat_penalty %g must be a finite number > 0", (double)p->repeat_penalty);
    if (p->repeat_last_n < 0) return er_fail(ER_EINVAL, "repeat_last_n %d must be >= 0 (0 = whole history)", p->repeat_last_n);
    return ER_OK;
}

int er_sampling_check(const er_sampling *p) { return p ? check_params(p) : ER_OK; }

int32_t er_sample_ranked(er_session *s, const er_sampling *p, float *cp, const int32_t *ci, int n) {
    float mx = cp[0];
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        cp[i] = expf(cp[i] - mx);
        sum += cp[i];
    }
    if (p->top_p < 1.0f) {
        double cum = 0.0;
        int keep = n;
        for (int i = 0; i < n; i++) {
            cum += cp[i] / sum;
            if (cum >= p->top_p) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
    }
    if (p->min_p > 0.0f) {
        int keep = 1;
        while (keep < n && cp[keep] >= p->min_p * cp[0]) keep++;
        n = keep;
    }
    sum = 0.0;
    for (int i = 0; i < n; i++) sum += cp[i];
    double r = (double)next_uniform(&s->rng) * sum, acc = 0.0;
    int32_t chosen = ci[n - 1];
    for (int i = 0; i < n; i++) {
        acc += cp[i];
        if (r < acc) {
            chosen = ci[i];
            break;
        }
    }
    return chosen;
}

/* The CUDA model's sampler: penalty, temperature, ranking (top-k) on the
 * device; the distinct penalised ids are found here (cand_id marks them,
 * touching only the window's entries), and top-p, min-p and the draw run on
 * the ranked candidates read back, through the CPU's own code. */
static int sample_cuda(er_session *s, const er_sampling *p, int32_t *chosen) {
    /* cand_id marks ids already taken (only the window's entries are reset
     * and read) and cand_p's memory collects the distinct ids: at most
     * min(window, n_vocab) of them. er_cuda_sample copies them to pinned
     * staging before it writes the ranked candidates over both arrays. */
    int32_t *mark = s->cand_id, *pen = (int32_t *)(void *)s->cand_p;
    int n_pen = 0;
    if (p->repeat_penalty != 1.0f) {
        int from = p->repeat_last_n && p->repeat_last_n < s->pos ? s->pos - p->repeat_last_n : 0;
        for (int i = from; i < s->pos; i++) mark[s->history[i]] = 0;
        for (int i = from; i < s->pos; i++) {
            int32_t t = s->history[i];
            if (!mark[t]) {
                mark[t] = 1;
                pen[n_pen++] = t;
            }
        }
    }
    int n = 0;
    int rc = er_cuda_sample(s, p, pen, n_pen, chosen, &n);
    if (rc || p->temperature <= 0.0f) return rc;
    *chosen = er_sample_ranked(s, p, s->cand_p, s->cand_id, n);
    return ER_OK;
}

int er_sample(er_session *s, const er_sampling *params, int32_t *id_out) {
    if (!s || !id_out) return er_fail(ER_EINVAL, "er_sample: session and id_out must not be NULL");
    er_sampling def;
    er_sampling_default(&def);
    const er_sampling *p = params ? params : &def;
    int rc = check_params(p);
    if (rc) return rc;
    if (!s->has_logits) return er_fail(ER_ESTATE, "er_sample: no logits yet (call er_decode first)");

    double t0 = er_now_ms();
    if (s->model->cuda) {
        int32_t chosen = 0;
        if ((rc = sample_cuda(s, p, &chosen))) return rc;
        s->stats.sample_ms += er_now_ms() - t0;
        *id_out = chosen;
        return ER_OK;
    }
    const int V = s->model->d.n_vocab;
    if (p->temperature <= 0.0f && p->repeat_penalty == 1.0f) {
        /* Greedy with nothing to penalise: the pick below, on the logits in
         * place. The copy into the candidates and a scalar first-maximum
         * loop took 27 us at 32,000 ids (x86), against ~280 us for a whole
         * 15M-model step; now ~2.5. */
        *id_out = s->model->k->argmax(s->logits, V);
        s->stats.sample_ms += er_now_ms() - t0;
        return ER_OK;
    }
    float *cp = s->cand_p;
    int32_t *ci = s->cand_id;
    for (int i = 0; i < V; i++) {
        cp[i] = s->logits[i];
        ci[i] = i;
    }
    /* Repetition penalty (CTRL/HF rule): each distinct recent token once;
     * ci[t] = -1 marks "already penalised" until the ids are restored. */
    if (p->repeat_penalty != 1.0f) {
        int from = p->repeat_last_n && p->repeat_last_n < s->pos ? s->pos - p->repeat_last_n : 0;
        for (int i = from; i < s->pos; i++) {
            int32_t t = s->history[i];
            if (ci[t] < 0) continue;
            cp[t] = cp[t] > 0.0f ? cp[t] / p->repeat_penalty : cp[t] * p->repeat_penalty;
            ci[t] = -1;
        }
        for (int i = from; i < s->pos; i++) ci[s->history[i]] = s->history[i];
    }

    int32_t chosen = 0;
    if (p->temperature <= 0.0f) {
        chosen = s->model->k->argmax(cp, V);
    } else {
        int n = V;
        for (int i = 0; i < n; i++) cp[i] /= p->temperature;
        if (p->top_k > 0 && p->top_k < n) {
            select_top(cp, ci, n, p->top_k);
            n = p->top_k;
        }
        sort_ranked(cp, ci, n);
        chosen = er_sample_ranked(s, p, cp, ci, n);
    }
    s->stats.sample_ms += er_now_ms() - t0;
    *id_out = chosen;
    return ER_OK;
}
