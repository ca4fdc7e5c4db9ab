/*
 * test_cuda_nogpu.c — the CUDA backend's paths that need no GPU: the plan
 * with isa "cuda" (device sections, arithmetic only), and the errors of
 * er_model_open / er_cuda_device_count when the build has no backend or the
 * machine has no GPU or driver. Runs in every build; what it expects
 * depends on er_cuda_built() and on whether a device answers.
 */
#include <stdlib.h>
#include <string.h>

#include "edgerun.h"
#include "model.h"
#include "test_util.h"

static const er_section *find(const er_plan_report *r, const char *name) {
    for (int i = 0; i < r->n_sections; i++)
        if (strcmp(r->sections[i].name, name) == 0) return &r->sections[i];
    return NULL;
}

static void check_plan(const char *path) {
    er_options o;
    er_options_default(&o);
    o.isa = "cuda";
    o.n_ctx = 64;
    o.n_batch = 8;
    er_plan_report r, r2, cpu;
    int rc = er_plan(path, &o, &r);
    if (!er_cuda_built()) {
        CHECK(rc == ER_EUNSUPPORTED, "plan without backend: rc %d", rc);
        CHECK_CONTAINS(er_last_error(), "no CUDA backend");
        CHECK_CONTAINS(er_last_error(), "-Dcuda=enabled");
        return;
    }
    CHECK(rc == ER_OK, "plan with isa cuda: %s", er_last_error());
    if (rc) return;
    o.isa = NULL;
    CHECK(er_plan(path, &o, &cpu) == ER_OK, "cpu plan: %s", er_last_error());
    o.isa = "cuda";
    o.n_sessions = 2;
    CHECK(er_plan(path, &o, &r2) == ER_OK, "plan 2 sessions: %s", er_last_error());

    const char *dev[] = {"gpu_weights", "gpu_kv_cache", "gpu_activations", "gpu_scratch"};
    size_t dev_sum = 0, host_sum = 0;
    for (int i = 0; i < 4; i++) {
        const er_section *s = find(&r, dev[i]);
        CHECK(s != NULL, "section %s missing", dev[i]);
        if (!s) continue;
        CHECK(s->device == 1 && s->bytes > 0, "%s: device %d bytes %zu", dev[i], s->device, s->bytes);
        dev_sum += s->bytes;
    }
    CHECK(r.pinned_bytes >= (4u << 20), "pinned staging %zu bytes", r.pinned_bytes);
    CHECK_EQ_U64(r.device_bytes, dev_sum);
    for (int i = 0; i < r.n_sections; i++)
        if (!r.sections[i].device) host_sum += r.sections[i].bytes;
    CHECK_EQ_U64(r.total_bytes, host_sum);
    CHECK(r.n_sections == ER_SEC_COUNT + ER_DSEC_PINNED && r.n_sections <= ER_MAX_SECTIONS, "n_sections %d",
          r.n_sections);

    /* the KV cache and activations moved to the GPU; the CPU plan has none of the device ones */
    CHECK(find(&r, "kv_cache")->bytes == 0, "host kv_cache should be empty on cuda");
    CHECK(find(&r, "activations")->bytes == 0, "host activations should be empty on cuda");
    CHECK(find(&cpu, "kv_cache")->bytes > 0 && cpu.device_bytes == 0 && cpu.pinned_bytes == 0, "cpu plan");
    CHECK(find(&cpu, "gpu_weights") == NULL, "cpu plan has no device sections");

    /* exact KV arithmetic: 2 caches x layers x n_ctx x kv_row x 4 bytes per slot */
    er_model *m = NULL;
    er_hparams hp;
    er_options co;
    er_options_default(&co);
    co.n_ctx = 64;
    if (er_model_open(path, &co, &m) == ER_OK) {
        er_model_hparams(m, &hp);
        size_t cache = (size_t)hp.n_layer * 64 * (size_t)hp.n_head_kv * hp.head_dim * 4;
        size_t want = 2 * ((cache + 255) / 256 * 256);
        CHECK_EQ_U64(find(&r, "gpu_kv_cache")->bytes, want);
        CHECK_EQ_U64(find(&r2, "gpu_kv_cache")->bytes, 2 * want);
        /* weights are at least the file's tensor bytes (F32 rows are kept as they are) */
        CHECK(find(&r, "gpu_weights")->bytes >= hp.weight_bytes, "gpu_weights %zu < file %llu",
              find(&r, "gpu_weights")->bytes, (unsigned long long)hp.weight_bytes);
        er_model_close(m);
    }
    o.kv_type = ER_KV_F16;
    o.n_sessions = 1;
    er_plan_report r16;
    CHECK(er_plan(path, &o, &r16) == ER_OK, "f16 plan");
    CHECK(find(&r16, "gpu_kv_cache")->bytes < find(&r, "gpu_kv_cache")->bytes, "f16 KV is smaller");

    /* a step of 65536 rows is past the kernels' grid limit: refused by the
     * plan (and so by open), not run as a silent no-op; 65535 plans */
    o.n_ctx = 65536;
    o.n_batch = 65536;
    er_plan_report big;
    CHECK(er_plan(path, &o, &big) == ER_EUNSUPPORTED, "n_batch 65536 on cuda must be refused");
    CHECK_CONTAINS(er_last_error(), "at most 65535 rows per step");
    o.n_batch = 65535;
    CHECK(er_plan(path, &o, &big) == ER_OK, "n_batch 65535 on cuda: %s", er_last_error());
}

static void check_open(const char *path) {
    er_options o;
    er_options_default(&o);
    o.isa = "cuda";
    er_model *m = (er_model *)1;
    int n = er_cuda_device_count();
    int rc = er_model_open(path, &o, &m);
    if (rc != ER_OK) CHECK(m == NULL, "out must be NULL after a failed open");
    else er_model_close(m);
    if (!er_cuda_built()) {
        CHECK(n == ER_EUNSUPPORTED, "device count without backend: %d", n);
        CHECK(rc == ER_EUNSUPPORTED, "open without backend: %d", rc);
        CHECK_CONTAINS(er_last_error(), "this build has no CUDA backend; rebuild with -Dcuda=enabled");
        er_cuda_device dd;
        CHECK(er_cuda_device_get(0, &dd) == ER_EUNSUPPORTED, "device_get without backend");
        CHECK(er_cuda_device_get(0, NULL) == ER_EINVAL, "device_get NULL");
        return;
    }
    if (n > 0) {
        /* a GPU is here: test_cuda_gpu covers it; the open must work */
        printf("CUDA device present (%d): the no-GPU checks do not apply\n", n);
        m = NULL;
        rc = er_model_open(path, &o, &m);
        CHECK(rc == ER_OK, "open on a GPU machine: %s", er_last_error());
        if (m) {
            CHECK(strcmp(er_model_isa(m), "cuda") == 0, "isa %s", er_model_isa(m));
            er_model_close(m);
        }
        return;
    }
    CHECK(n == ER_EUNSUPPORTED, "device count without a GPU: %d", n);
    CHECK(rc == ER_EUNSUPPORTED, "open without a GPU: %d (%s)", rc, er_last_error());
    CHECK_CONTAINS(er_last_error(), "CUDA");
    CHECK_CONTAINS(er_last_error(), "use the CPU");
    printf("no-GPU message: %s\n", er_last_error());
    er_cuda_device dd;
    CHECK(er_cuda_device_get(0, &dd) == ER_EUNSUPPORTED, "device_get without GPU");
    /* a CPU open in the same process is unaffected */
    o.isa = NULL;
    m = NULL;
    CHECK(er_model_open(path, &o, &m) == ER_OK, "cpu open after the failed cuda open: %s", er_last_error());
    er_model_close(m);
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "models/edgerun-add.gguf";
    printf("CUDA backend built: %s\n", er_cuda_built() ? "yes" : "no");
    check_plan(path);
    check_open(path);
    return test_summary();
}
