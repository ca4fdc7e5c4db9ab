/*
 * none.c — the CUDA backend's entry points in a build without it
 * (-Dcuda=disabled, the default): every way in says how to get it, so the
 * core needs no #ifdef and `isa = "cuda"` fails with a reason, not a crash.
 */
#include "cuda_backend.h"
#include "error.h"
#include "model.h"

#define NO_BACKEND "this build has no CUDA backend; rebuild with -Dcuda=enabled (needs nvcc)"

int er_cuda_built(void) { return 0; }

int er_cuda_plan(const gguf_file *f, const er_dims *d, int tied_output, size_t bytes[ER_DSEC_COUNT],
                 size_t *host_bytes) {
    (void)f, (void)d, (void)tied_output, (void)bytes, (void)host_bytes;
    return er_fail(ER_EUNSUPPORTED, NO_BACKEND);
}

const char *er_cuda_section_name(int dsec) {
    (void)dsec;
    return "";
}

int er_cuda_open(er_model *m) {
    (void)m;
    return er_fail(ER_EUNSUPPORTED, NO_BACKEND);
}

void er_cuda_close(er_cuda *c) { (void)c; }

int er_cuda_forward(er_session *s, const int32_t *ids, int m, float *logits_all) {
    (void)s, (void)ids, (void)m, (void)logits_all;
    return er_fail(ER_EUNSUPPORTED, NO_BACKEND);
}

int er_cuda_sample(er_session *s, const er_sampling *p, const int32_t *pen_ids, int n_pen, int32_t *chosen,
                   int *n_ranked) {
    (void)s, (void)p, (void)pen_ids, (void)n_pen, (void)chosen, (void)n_ranked;
    return er_fail(ER_EUNSUPPORTED, NO_BACKEND);
}

size_t er_cuda_bulk_bytes(const er_cuda *c) {
    (void)c;
    return 0;
}

void *er_cuda_bulk(const er_cuda *c) {
    (void)c;
    return NULL;
}

int er_cuda_kv_to_host(er_cuda *c, int slot, int layer, int which, size_t off, size_t n) {
    (void)c, (void)slot, (void)layer, (void)which, (void)off, (void)n;
    return er_fail(ER_EUNSUPPORTED, NO_BACKEND);
}

int er_cuda_kv_from_host(er_cuda *c, int slot, int layer, int which, size_t off, size_t n) {
    (void)c, (void)slot, (void)layer, (void)which, (void)off, (void)n;
    return er_fail(ER_EUNSUPPORTED, NO_BACKEND);
}

int er_cuda_logits_upload(er_session *s) {
    (void)s;
    return er_fail(ER_EUNSUPPORTED, NO_BACKEND);
}

int er_cuda_device_count(void) { return er_fail(ER_EUNSUPPORTED, NO_BACKEND); }

int er_cuda_device_get(int32_t i, er_cuda_device *out) {
    if (!out) return er_fail(ER_EINVAL, "er_cuda_device_get: out is NULL");
    (void)i;
    return er_fail(ER_EUNSUPPORTED, NO_BACKEND);
}
