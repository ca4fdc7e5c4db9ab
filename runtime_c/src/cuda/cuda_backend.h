/*
 * cuda_backend.h — what the CPU-side core (plan.c, model.c, session.c,
 * sampler.c, snapshot.c) asks of the CUDA backend (internal).
 *
 * The core stays plain C11 with no CUDA headers: it sees an opaque er_cuda
 * per model (NULL for a CPU model) and these functions. A build without
 * CUDA (-Dcuda=disabled, the default) links none.c instead, whose functions
 * report "this build has no CUDA backend", so no #ifdef is needed in the core.
 *
 * Threading: every function that touches the device takes the model's
 * step_lock around it (the caller holds it for er_cuda_forward), because the
 * backend has one stream, one set of activations and one staging buffer.
 */
#ifndef ER_CUDA_BACKEND_H
#define ER_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "edgerun.h"
#include "gguf.h"

struct er_model;
struct er_session;
struct er_dims;
struct er_hparams;
typedef struct er_cuda er_cuda;

/* The isa name that selects this backend. */
#define ER_CUDA_ISA "cuda"

/* Device-side sections of the plan, in layout order inside the one device
 * allocation, plus the pinned host staging buffer (not device memory). */
enum er_dsec {
    ER_DSEC_WEIGHTS = 0,   /* matrices in the kernels' row layout, norms and biases as f32 */
    ER_DSEC_KV,            /* K and V caches of every session slot */
    ER_DSEC_ACT,           /* activations for n_batch rows, logits, per-slot words */
    ER_DSEC_SCRATCH,       /* matmul, attention and sampling scratch */
    ER_DSEC_PINNED,        /* pinned host staging (cudaHostAlloc): uploads, step words, read-backs */
    ER_DSEC_COUNT
};

/* 1 when this build has the backend (none.c: 0). */
int er_cuda_built(void);

/* Sizes of the device sections for a file and dims (arithmetic only: works
 * without a GPU), and the host bytes the backend takes from the arena's
 * model section (its bookkeeping). ER_EUNSUPPORTED (no backend, or a weight
 * type without CUDA kernels), ER_ECORRUPT (absurd sizes). */
int er_cuda_plan(const gguf_file *f, const struct er_dims *d, int tied_output, size_t bytes[ER_DSEC_COUNT],
                 size_t *host_bytes);

/* Names of the device sections as er_plan reports them (the pinned staging
 * is reported as er_plan_report.pinned_bytes, not as a section). */
const char *er_cuda_section_name(int dsec);

/* Opens the device side of an opened-and-bound model m: the one device
 * allocation, the pinned staging, uploads the weights, captures one decode
 * graph per session slot and warms everything up. Its bookkeeping comes
 * from m's model section (the host_bytes er_cuda_plan added). On success
 * m->cuda is set and m->isa_reason names the GPU. ER_EUNSUPPORTED when no
 * usable device; ER_ENOMEM when the device or pinned allocation fails. */
int er_cuda_open(struct er_model *m);

/* Releases everything er_cuda_open took (NULL is a no-op). */
void er_cuda_close(er_cuda *c);

/* The forward step on the device (er_forward's contract; caller holds
 * step_lock). Returns ER_OK or ER_EIO with the CUDA error in the message. */
int er_cuda_forward(struct er_session *s, const int32_t *ids, int m, float *logits_all);

/* Sampling on the device over the slot's last logits: greedy -> *chosen;
 * temperature > 0 -> the ranked candidates (penalised, divided by the
 * temperature, best first) in s->cand_p/cand_id, *n_ranked of them (top_k
 * when 0 < top_k < n_vocab, else all). pen_ids: the n_pen distinct ids to
 * penalise. Takes step_lock. */
int er_cuda_sample(struct er_session *s, const er_sampling *p, const int32_t *pen_ids, int n_pen, int32_t *chosen,
                   int *n_ranked);

/* Pinned staging the snapshot code streams KV rows through (under step_lock). */
size_t er_cuda_bulk_bytes(const er_cuda *c);
void *er_cuda_bulk(const er_cuda *c);

/* Copies bytes [off, off + n) of layer `layer`'s K (which = 0) or V (1) cache
 * of slot `slot` to/from the bulk staging buffer (n <= er_cuda_bulk_bytes).
 * The caller holds step_lock. */
int er_cuda_kv_to_host(er_cuda *c, int slot, int layer, int which, size_t off, size_t n);
int er_cuda_kv_from_host(er_cuda *c, int slot, int layer, int which, size_t off, size_t n);

/* Uploads the session's host logits (s->logits) to its slot's device row
 * (after a snapshot load). Caller holds step_lock. */
int er_cuda_logits_upload(struct er_session *s);

/* Public probe (er_cuda_device_count / er_cuda_device_get) lives in device.c / none.c. */

#endif
