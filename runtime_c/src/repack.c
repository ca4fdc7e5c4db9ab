/*
 * repack.c — weight matrices copied at open into a kernel table's
 * interleaved layout (er_kernels.repack_rows / repack / matmul_repacked),
 * in the arena's persistent "repacked" section.
 *
 * Only where a table has a layout that pays: AVX2 Q8_0, Q4_0, Q4_K, Q5_K
 * and Q6_K, and the 32-element fallback types Q5_0, IQ4_NL, Q4_1 and Q5_1,
 * 8 rows each, 16 for avx512vnni's (all nine), and Q3_K,
 * Q2_K and IQ4_XS, 16 rows each in both x86 tables (measured:
 * kernels/x86/repack_*.c); NEON, NEON-dotprod and NEON-i8mm the same nine
 * types and Q2_K, Q3_K and IQ4_XS, 4 rows each (kernels/neon/repack_*.c,
 * repack_k23_neon.h; chosen for the load pattern and instruction counts,
 * not yet timed on Arm hardware); SVE the same twelve with one row
 * per 32-bit lane of the machine's vectors (kernels/sve/repack_sve.h:
 * repack_rows is set at first use of the table, before any plan). The mapped
 * file is never written: the copy goes to the
 * arena, and the source pages are then released from this process (madvise
 * MADV_DONTNEED on the read-only file mapping: they stay in the page cache
 * and fault back in if the embedding look-up of a tied matrix needs them),
 * so resident memory holds one copy of the weights, not two.
 *
 * $EDGERUN_REPACK=0 turns it off (same plan and open), to compare layouts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "error.h"
#include "model.h"

static int enabled(void) {
    const char *e = getenv("EDGERUN_REPACK");
    return !(e && strcmp(e, "0") == 0);
}

/* Rows interleaved for a matrix of er_wtype wt and shape [n_in, n_out], or
 * 0 when it keeps the file layout. The plan and the open both ask this, so
 * the section holds exactly what open copies. */
static int rows_for(const er_kernels *k, int wt, uint64_t n_in, uint64_t n_out) {
    if (wt < 0 || wt >= ER_W_COUNT || !k->repack[wt] || !k->matmul_repacked[wt]) return 0;
    int r = k->repack_rows[wt];
    /* whole blocks per row: the layouts interleave blocks, never split one */
    const uint64_t blk = (uint64_t)er_wtype_block_elems(wt);
    return r > 0 && n_out % (uint64_t)r == 0 && n_in % blk == 0 ? r : 0;
}

/* The matrices the forward pass multiplies with: per layer the seven
 * projections, then the output projection (token_embd when tied). */
#define N_LAYER_MATS 7
static const char *const k_layer_mats[N_LAYER_MATS] = {
    "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down",
};

size_t er_repack_plan(const gguf_file *f, const er_kernels *k, int n_layer) {
    if (!k || !enabled()) return 0;
    size_t total = 0;
    gguf_tensor t;
    for (int l = 0; l <= n_layer; l++) {
        for (int i = 0; i < (l < n_layer ? N_LAYER_MATS : 1); i++) {
            char name[96];
            if (l < n_layer)
                snprintf(name, sizeof name, "blk.%d.%s.weight", l, k_layer_mats[i]);
            else if (!gguf_find_tensor(f, strcpy(name, "output.weight"), &t))
                strcpy(name, "token_embd.weight");
            if (!gguf_find_tensor(f, name, &t) || t.n_dims != 2 || !rows_for(k, er_wtype_from_ggml(t.type), t.ne[0], t.ne[1])) continue;
            /* phi3's ffn_up holds gate and up: bound as two views, repacked as neither */
            char fused[96];
            snprintf(fused, sizeof fused, "blk.%d.attn_qkv.weight", l);
            if (l < n_layer && i == 5 && gguf_find_tensor(f, fused, NULL)) continue;
            if (t.nbytes > SIZE_MAX - total - 2 * ER_ARENA_ALIGN) return SIZE_MAX;
            total += er_align_up((size_t)t.nbytes);
        }
    }
    return total;
}

/* Gives the pages wholly inside [p, p + n) of a read-only file mapping back. */
static void release_source(const void *p, size_t n) {
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) return;
    uintptr_t lo = ((uintptr_t)p + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    uintptr_t hi = ((uintptr_t)p + n) & ~((uintptr_t)page - 1);
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_DONTNEED); /* advice only: failure changes nothing */
}

static int repack_one(er_model *m, er_weight *w) {
    const er_kernels *k = m->k;
    w->packed = NULL; /* layers live in arena memory nobody zeroed */
    if (!m->plan.sections[ER_SEC_REPACKED].bytes || !rows_for(k, w->wtype, (uint64_t)w->n_in, (uint64_t)w->n_out))
        return ER_OK;
    size_t bytes = w->row_bytes * (size_t)w->n_out;
    void *dst = er_arena_alloc(&m->sec[ER_SEC_REPACKED], bytes);
    if (!dst) return er_fail(ER_ECORRUPT, "internal: repacked section smaller than planned");
    k->repack[w->wtype](w->data, dst, w->row_bytes, w->n_in, w->n_out);
    w->packed = dst;
    if (m->file.mapped) release_source(w->data, bytes);
    return ER_OK;
}

/* Transparent huge pages on the repacked section before its first write
 * (the arena's pages are still untouched then). Decode streams every
 * repacked byte once per token; with 4 KiB pages the hardware prefetchers
 * stop at every page and a 110M Q8_0 token walks 28k page-table entries:
 * measured on the Zen 4 VM, one thread, an AVX2 read loop 20 -> 30 GB/s and
 * the Q8_0 decode step 5.9 -> 4.1 ms (kernels/x86/repack_q8_0_avx2.c). The
 * section is written in full right after, so resident memory grows by
 * nothing but rounding. */
int er_repack_model(er_model *m) {
    int rc;
    if (m->arena_owned) er_arena_advise_huge(&m->sec[ER_SEC_REPACKED]);
    for (int l = 0; l < m->d.n_layer; l++) {
        er_layer *L = &m->layers[l];
        er_weight *ws[N_LAYER_MATS] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (int i = 0; i < N_LAYER_MATS; i++) {
            /* views into a fused tensor (phi3's attn_qkv, ffn_up) have no
             * tensor of their own name, so er_repack_plan planned none */
            const int view = (L->fused && i != 3 && i != 6) || (L->conv && i < 4); /* lfm2's conv layers: no Q/K/V/O */
            if (view) ws[i]->packed = NULL;
            else if ((rc = repack_one(m, ws[i]))) return rc;
        }
    }
    return repack_one(m, &m->output);
}
