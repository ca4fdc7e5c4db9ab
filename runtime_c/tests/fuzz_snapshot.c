/*
 * fuzz_snapshot.c — libFuzzer entry for er_session_load (not built by meson;
 * scripts/fuzz.sh builds it). Needs the embedded model: $EDGERUN_FUZZ_MODEL,
 * else models/edgerun-add.gguf from the current folder.
 *
 *   clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
 *     -Iruntime_c/include -Iruntime_c/src runtime_c/tests/fuzz_snapshot.c \
 *     <every runtime_c/src source, kernels and tokenizer included> -lm -lpthread \
 *     -o /tmp/fuzz_snapshot
 *   /tmp/fuzz_snapshot -max_total_time=60 runtime_c/tests/corpus/fuzz_snapshot
 *
 * Input: one mode byte, then the snapshot file. Random bytes almost never
 * pass two CRC-32s, so mode bit 0 recomputes the payload checksum and bit 1
 * the header checksum of the mutated file before loading: the fuzzer then
 * reaches every field check behind them (geometry, sizes, history ids, RNG).
 *
 * Aborts (a finding) when a refused load leaves no message, returns an
 * unexpected status, or changes the session; or when an accepted load gives
 * a session that cannot sample and decode one more token.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static er_model *g_m;
static er_session *g_s;
static char g_path[256];

/* CRC-32 (IEEE), bitwise: independent of the runtime's sliced version. */
static uint32_t crc32_bits(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0xEDB88320u : c >> 1;
    }
    return ~c;
}

static void remove_file(void) { unlink(g_path); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *model = getenv("EDGERUN_FUZZ_MODEL");
    if (!model || !model[0]) model = "models/edgerun-add.gguf";
    er_options o;
    er_options_default(&o);
    o.n_ctx = 32;
    if (er_model_open(model, &o, &g_m) != ER_OK || er_session_new(g_m, &g_s) != ER_OK) {
        fprintf(stderr, "fuzz_snapshot: cannot open %s: %s (set EDGERUN_FUZZ_MODEL)\n", model, er_last_error());
        exit(1);
    }
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(g_path, sizeof g_path, "%s/er-fuzz-snap-%ld", dir, (long)getpid());
    atexit(remove_file);
    return 0;
}

static void must(int cond) {
    if (!cond) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_m) LLVMFuzzerInitialize(NULL, NULL);
    if (size < 1) return 0;
    uint8_t mode = data[0];
    size_t n = size - 1;
    uint8_t *img = malloc(n ? n : 1);
    if (n) memcpy(img, data + 1, n);
    if (n >= 128 && (mode & 1)) {
        uint32_t c = crc32_bits(img + 128, n - 128);
        memcpy(img + 112, &c, 4);
    }
    if (n >= 128 && (mode & 2)) {
        uint32_t c = crc32_bits(img, 124);
        memcpy(img + 124, &c, 4);
    }
    unlink(g_path);
    int fd = open(g_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    must(fd >= 0 && write(fd, img, n) == (ssize_t)n);
    close(fd);
    free(img);

    /* a known state to compare a refused load against */
    er_session_reset(g_s);
    er_session_seed(g_s, 42);
    int32_t ids[3] = {1, 2, 3};
    must(er_decode(g_s, ids, 3, NULL) == ER_OK);
    int pos = g_s->pos;
    uint64_t rng = g_s->rng;
    int32_t hist0 = g_s->history[0];

    er_clear_error();
    int rc = er_session_load(g_s, g_path);
    if (rc != ER_OK) {
        must(er_last_error()[0] != '\0');
        must(rc == ER_ECORRUPT || rc == ER_EUNSUPPORTED || rc == ER_EMISMATCH || rc == ER_ECONTEXT);
        must(g_s->pos == pos && g_s->rng == rng && g_s->history[0] == hist0 && g_s->has_logits);
        return 0;
    }
    must(g_s->pos >= 0 && g_s->pos <= g_m->d.n_ctx && g_s->rng != 0);
    for (int i = 0; i < g_s->pos; i++) must(g_s->history[i] >= 0 && g_s->history[i] < g_m->d.n_vocab);
    int32_t id = 0;
    er_sampling sp;
    er_sampling_default(&sp);
    sp.temperature = 0.8f;
    sp.repeat_penalty = 1.1f;
    int rs = er_sample(g_s, &sp, &id);
    must(rs == ER_OK || (rs == ER_ESTATE && !g_s->has_logits));
    must(id >= 0 && id < g_m->d.n_vocab);
    if (g_s->pos < g_m->d.n_ctx) must(er_decode(g_s, &id, 1, NULL) == ER_OK);
    return 0;
}
