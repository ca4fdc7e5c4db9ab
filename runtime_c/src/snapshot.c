/*
 * snapshot.c — crash-safe session snapshots (er_session_save / er_session_load)
 * and the model fingerprint they are bound to.
 *
 * File layout, version 1 (little-endian, like GGUF; a big-endian host reads a
 * wrong version and refuses the file):
 *
 *   off  size  field
 *     0     8  magic "ERSNAP\r\n" (the CR LF catches text-mode mangling)
 *     8     4  version = 1
 *    12     4  header bytes = 128
 *    16     8  model fingerprint (er_model_fingerprint)
 *    24     4  kv_type            28  4  n_layer
 *    32     4  kv_row             36  4  n_vocab
 *    40     4  pos                44  4  has_logits (0/1)
 *    48     8  sampler RNG state (xorshift64*, never 0)
 *    56     8  payload bytes
 *    64    48  er_stats: prefill_ms, decode_ms, sample_ms (f64),
 *              n_prefill_tokens, n_decode_tokens (i64), last_prefill_ms (f64)
 *   112     4  CRC-32 of the payload
 *   116     8  reserved, 0
 *   124     4  CRC-32 of bytes [0, 124)
 *   128        payload: history[pos] (i32), logits[n_vocab] (f32), then per
 *              layer K rows [0, pos) and V rows [0, pos) (kv_row elements of
 *              kv_type each); then, for lfm2, the session's convolution
 *              ring whole (er_dims.conv_ring f32: the last conv_l positions'
 *              B*x of each layer; its size follows from the fingerprinted
 *              model)
 *
 * The KV rows of positions >= pos are not saved: they are dead (overwritten
 * before they are read) in the session that wrote them, and the session that
 * loads may have another n_ctx, since rows are copied per layer.
 *
 * Neither call touches the heap. Save streams straight from the arena with
 * write(2); load maps the file (a replaced snapshot is a new inode, so the
 * mapping never changes under us), verifies everything, then copies.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "model.h"

#define SNAP_MAGIC "ERSNAP\r\n"
#define SNAP_VERSION 1u
#define SNAP_HEADER 128u
#define SNAP_PATH_MAX 4096

/* ---- checksums -------------------------------------------------------------- */

/* CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), sliced by 8 so a
 * multi-GB KV cache checks at several GB/s. Tables are built once. */
static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0xEDB88320u : c >> 1;
        crc_tab[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++) crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xFF];
}

/* Continues a CRC: start with crc = 0; feeding pieces in order equals one call. */
static uint32_t crc32_update(uint32_t crc, const void *data, size_t n) {
    pthread_once(&crc_once, crc_init);
    const uint8_t *p = data;
    uint32_t c = ~crc;
    for (; n >= 8; n -= 8, p += 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= c;
        c = crc_tab[7][lo & 0xFF] ^ crc_tab[6][(lo >> 8) & 0xFF] ^ crc_tab[5][(lo >> 16) & 0xFF] ^
            crc_tab[4][lo >> 24] ^ crc_tab[3][hi & 0xFF] ^ crc_tab[2][(hi >> 8) & 0xFF] ^
            crc_tab[1][(hi >> 16) & 0xFF] ^ crc_tab[0][hi >> 24];
    }
    while (n--) c = (c >> 8) ^ crc_tab[0][(c ^ *p++) & 0xFF];
    return ~c;
}

/* FNV-1a 64: small inputs only (the fingerprint), so byte-at-a-time is fine. */
#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static uint64_t fnv(uint64_t h, const void *data, size_t n) {
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * FNV_PRIME;
    return h;
}

static uint64_t fnv_u64(uint64_t h, uint64_t v) { return fnv(h, &v, sizeof v); }

uint64_t er_fingerprint_compute(const er_model *m) {
    const er_hparams *hp = &m->hp;
    uint64_t h = FNV_OFFSET;
    h = fnv(h, hp->arch, strnlen(hp->arch, sizeof hp->arch));
    const int32_t dims[] = {hp->n_vocab, hp->n_embd, hp->n_layer, hp->n_head, hp->n_head_kv, hp->n_ff,
                            hp->n_ctx_train, hp->head_dim, hp->tied_output, hp->has_qkv_bias, m->rope_neox};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) h = fnv_u64(h, (uint64_t)(uint32_t)dims[i]);
    uint32_t fb, eb;
    memcpy(&fb, &hp->rope_freq_base, 4);
    memcpy(&eb, &hp->rms_eps, 4);
    h = fnv_u64(h, fb);
    h = fnv_u64(h, eb);
    /* LongRoPE's set depends on n_ctx: a cache rotated with one set must
     * not load where the other applies (hashed only where present, so
     * every other model's fingerprint is what it was) */
    if (hp->rope_longrope) h = fnv_u64(h, (uint64_t)hp->rope_longrope);
    h = fnv_u64(h, m->file.n_tensors);
    /* The tensor table catches re-quantized or re-shaped files; the sampled
     * bytes catch a fine-tune with an identical table. Three 64-byte windows
     * per tensor keep this to a few page faults per tensor at open. */
    for (uint64_t i = 0; i < m->file.n_tensors; i++) {
        gguf_tensor t;
        gguf_tensor_at(&m->file, i, &t);
        h = fnv(h, t.name.ptr, t.name.len);
        h = fnv_u64(h, t.type);
        h = fnv_u64(h, t.n_dims);
        for (int j = 0; j < 4; j++) h = fnv_u64(h, t.ne[j]);
        h = fnv_u64(h, t.offset);
        h = fnv_u64(h, t.nbytes);
        size_t w = t.nbytes < 64 ? (size_t)t.nbytes : 64;
        h = fnv(h, t.data, w);
        h = fnv(h, t.data + (t.nbytes - w) / 2, w);
        h = fnv(h, t.data + (t.nbytes - w), w);
    }
    return h;
}

int er_model_fingerprint(const er_model *m, uint64_t *out) {
    if (!m || !out) return er_fail(ER_EINVAL, "er_model_fingerprint: model and out must not be NULL");
    *out = m->fingerprint;
    return ER_OK;
}

/* ---- header ------------------------------------------------------------------- */

typedef struct snap_hdr {
    uint32_t version, header_bytes;
    uint64_t fingerprint;
    uint32_t kv_type, n_layer, kv_row, n_vocab, pos, has_logits;
    uint64_t rng, payload_bytes;
    er_stats stats;
    uint32_t payload_crc;
} snap_hdr;

static void put32(uint8_t *b, size_t off, uint32_t v) { memcpy(b + off, &v, 4); }
static void put64(uint8_t *b, size_t off, uint64_t v) { memcpy(b + off, &v, 8); }
static uint32_t get32(const uint8_t *b, size_t off) { uint32_t v; memcpy(&v, b + off, 4); return v; }
static uint64_t get64(const uint8_t *b, size_t off) { uint64_t v; memcpy(&v, b + off, 8); return v; }

static void encode_header(const snap_hdr *h, uint8_t b[SNAP_HEADER]) {
    memset(b, 0, SNAP_HEADER);
    memcpy(b, SNAP_MAGIC, 8);
    put32(b, 8, SNAP_VERSION);
    put32(b, 12, SNAP_HEADER);
    put64(b, 16, h->fingerprint);
    put32(b, 24, h->kv_type);
    put32(b, 28, h->n_layer);
    put32(b, 32, h->kv_row);
    put32(b, 36, h->n_vocab);
    put32(b, 40, h->pos);
    put32(b, 44, h->has_logits);
    put64(b, 48, h->rng);
    put64(b, 56, h->payload_bytes);
    memcpy(b + 64, &h->stats.prefill_ms, 8);
    memcpy(b + 72, &h->stats.decode_ms, 8);
    memcpy(b + 80, &h->stats.sample_ms, 8);
    memcpy(b + 88, &h->stats.n_prefill_tokens, 8);
    memcpy(b + 96, &h->stats.n_decode_tokens, 8);
    memcpy(b + 104, &h->stats.last_prefill_ms, 8);
    put32(b, 112, h->payload_crc);
    put32(b, 124, crc32_update(0, b, 124));
}

static void decode_header(const uint8_t b[SNAP_HEADER], snap_hdr *h) {
    h->version = get32(b, 8);
    h->header_bytes = get32(b, 12);
    h->fingerprint = get64(b, 16);
    h->kv_type = get32(b, 24);
    h->n_layer = get32(b, 28);
    h->kv_row = get32(b, 32);
    h->n_vocab = get32(b, 36);
    h->pos = get32(b, 40);
    h->has_logits = get32(b, 44);
    h->rng = get64(b, 48);
    h->payload_bytes = get64(b, 56);
    memcpy(&h->stats.prefill_ms, b + 64, 8);
    memcpy(&h->stats.decode_ms, b + 72, 8);
    memcpy(&h->stats.sample_ms, b + 80, 8);
    memcpy(&h->stats.n_prefill_tokens, b + 88, 8);
    memcpy(&h->stats.n_decode_tokens, b + 96, 8);
    memcpy(&h->stats.last_prefill_ms, b + 104, 8);
    h->payload_crc = get32(b, 112);
}

/* Payload bytes for a header's geometry; 0 on overflow (a real payload is
 * never 0: it holds n_vocab >= 1 logits). */
static uint64_t payload_bytes(uint64_t pos, uint64_t n_vocab, uint64_t n_layer, uint64_t kv_row, uint64_t elem) {
    /* every factor is < 2^32 and the products are checked against 2^62 */
    const uint64_t lim = (uint64_t)1 << 62;
    uint64_t rows = pos * kv_row; /* < 2^64 */
    if (kv_row && rows / kv_row != pos) return 0;
    if (rows > lim / elem) return 0;
    uint64_t per_layer = 2 * rows * elem;
    if (n_layer && per_layer > lim / n_layer) return 0;
    uint64_t kv = per_layer * n_layer;
    uint64_t total = kv + 4 * pos + 4 * n_vocab;
    return total > lim ? 0 : total;
}

/* ---- the session's bytes, as segments -------------------------------------- */

typedef int (*seg_fn)(void *ctx, const void *p, size_t n);

/* A CUDA session's KV rows live on the GPU: they reach fn in pieces
 * through the backend's pinned staging (the caller holds step_lock). */
static int cuda_rows(const er_session *s, int layer, int which, size_t bytes, seg_fn fn, void *ctx) {
    er_cuda *c = s->model->cuda;
    size_t chunk = er_cuda_bulk_bytes(c);
    for (size_t off = 0; off < bytes; off += chunk) {
        size_t n = bytes - off < chunk ? bytes - off : chunk;
        int rc = er_cuda_kv_to_host(c, s->slot, layer, which, off, n);
        if (rc || (rc = fn(ctx, er_cuda_bulk(c), n))) return rc;
    }
    return ER_OK;
}

/* First position of a layer's cache a snapshot holds: 0, or for a
 * sliding-window ring the window before pos (no later query sees earlier). */
static int saved_from(const er_layer *L, int pos) { return L->ring && pos > L->window ? pos - L->window : 0; }

/* Payload bytes of session geometry `pos` for model m (payload_bytes has
 * checked the all-layers bound, which this never exceeds). */
static uint64_t model_payload(const er_model *m, uint64_t pos) {
    const er_dims *d = &m->d;
    const uint64_t elem = d->kv_type == ER_KV_F16 ? 2 : 4;
    uint64_t total = 4 * pos + 4 * (uint64_t)d->n_vocab + (uint64_t)d->conv_ring * sizeof(float);
    for (int l = 0; l < d->n_layer; l++) {
        const er_layer *L = &m->layers[l];
        if (!L->kv_rows) continue;
        total += 2 * (pos - (uint64_t)saved_from(L, (int)pos)) * d->kv_row * elem;
    }
    return total;
}

/* After a load: each ring position's second row (model.h, er_kv_layer_rows). */
static void mirror_rings(er_session *s) {
    const er_dims *d = &s->model->d;
    const size_t elem = d->kv_type == ER_KV_F16 ? 2 : 4;
    for (int l = 0; l < d->n_layer; l++) {
        const er_layer *L = &s->model->layers[l];
        if (!L->ring) continue;
        for (int h = 0; h < d->n_head_kv; h += d->kv_blk) {
            size_t stride;
            const size_t at = er_kv_col_rows(d, L->kv_rows, h, 0, &stride) * elem;
            const size_t n = (size_t)L->ring * stride * elem;
            for (int v = 0; v < 2; v++) memcpy(er_kv_base(s, L, v, elem) + at + n, er_kv_base(s, L, v, elem) + at, n);
        }
    }
}

/* Visits the payload of session s holding `pos` positions, in file order. */
static int for_each_segment(const er_session *s, seg_fn fn, void *ctx) {
    const er_dims *d = &s->model->d;
    size_t elem = d->kv_type == ER_KV_F16 ? 2 : 4;
    size_t rows = (size_t)s->pos * d->kv_row * elem, layer = (size_t)d->n_ctx * d->kv_row * elem;
    int rc;
    if ((rc = fn(ctx, s->history, (size_t)s->pos * 4)) || (rc = fn(ctx, s->logits, (size_t)d->n_vocab * 4)))
        return rc;
    if (s->model->cuda) {
        for (int l = 0; l < d->n_layer; l++)
            if ((rc = cuda_rows(s, l, 0, rows, fn, ctx)) || (rc = cuda_rows(s, l, 1, rows, fn, ctx))) return rc;
        return ER_OK;
    }
    (void)layer;
    for (int l = 0; l < d->n_layer; l++) {
        const er_layer *L = &s->model->layers[l];
        if (!L->kv_rows) continue; /* lfm2's convolution layers cache nothing */
        if (d->kv_blk == d->n_head_kv && !L->ring) {
            if ((rc = fn(ctx, er_kv_base(s, L, 0, elem), rows)) || (rc = fn(ctx, er_kv_base(s, L, 1, elem), rows)))
                return rc;
            continue;
        }
        /* A cache in blocks of heads (model.h, er_kv_col) still goes to the
         * file as whole rows, position by position, so a snapshot loads
         * whatever thread count either side runs; a sliding-window ring
         * (er_kv_layer_rows) goes as its window's last positions in order,
         * so it loads whatever n_batch (ring size) either side has. */
        for (int which = 0; which < 2; which++) {
            const uint8_t *c = er_kv_base(s, L, which, elem);
            for (int p = saved_from(L, s->pos); p < s->pos; p++)
                for (int h = 0; h < d->n_head_kv; h += d->kv_blk) {
                    size_t stride;
                    const size_t at = er_kv_col_rows(d, L->kv_rows, h, er_kv_slot(L->ring, p), &stride);
                    if ((rc = fn(ctx, c + at * elem, stride * elem))) return rc;
                }
        }
    }
    /* lfm2: the convolution ring (model.h); positions before the last
     * conv_l are not in it, so it goes whole */
    if (d->conv_ring && (rc = fn(ctx, s->conv_ring, d->conv_ring * sizeof(float)))) return rc;
    return ER_OK;
}

static int seg_crc(void *ctx, const void *p, size_t n) {
    *(uint32_t *)ctx = crc32_update(*(uint32_t *)ctx, p, n);
    return ER_OK;
}

/* Segments are gathered into buf before each write: a cache in blocks of
 * heads hands out one short piece per position and block (for_each_segment),
 * a system call each otherwise. On the saver's stack, so no heap. */
typedef struct writer {
    int fd;
    const char *path;
    size_t used;
    uint8_t buf[16384];
} writer;

static int write_all(int fd, const void *p, size_t n) {
    const uint8_t *b = p;
    while (n > 0) {
        /* Linux caps one write at ~2 GiB; ask for at most 1 GiB */
        size_t chunk = n < ((size_t)1 << 30) ? n : ((size_t)1 << 30);
        ssize_t w = write(fd, b, chunk);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return errno;
        if (w == 0) return EIO;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static int write_out(const writer *w, const void *p, size_t n) {
    int e = write_all(w->fd, p, n);
    return e ? er_fail(ER_EIO, "er_session_save: writing '%s' failed: %s", w->path, strerror(e)) : ER_OK;
}

static int flush(writer *w) {
    size_t n = w->used;
    w->used = 0;
    return write_out(w, w->buf, n);
}

static int seg_write(void *ctx, const void *p, size_t n) {
    writer *w = ctx;
    if (w->used + n > sizeof w->buf) {
        int rc = flush(w);
        if (rc) return rc;
    }
    if (n >= sizeof w->buf) return write_out(w, p, n);
    memcpy(w->buf + w->used, p, n);
    w->used += n;
    return ER_OK;
}

/* ---- save -------------------------------------------------------------------- */

/* fsyncs the folder holding `path`, so the rename itself survives a power cut. */
static int sync_parent(const char *path) {
    char dir[SNAP_PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash) {
        strcpy(dir, ".");
    } else if (slash == path) {
        strcpy(dir, "/");
    } else {
        size_t n = (size_t)(slash - path);
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno;
    int e = 0;
    /* some filesystems cannot sync a directory (EINVAL): nothing more to do there */
    if (fsync(fd) != 0 && errno != EINVAL) e = errno;
    close(fd);
    return e;
}

static int save_locked(const er_session *s, const char *path, const char *tmp, snap_hdr *hp);

int er_session_save(const er_session *s, const char *path) {
    if (!s || !path) return er_fail(ER_EINVAL, "er_session_save: session and path must not be NULL");
    if (!path[0]) return er_fail(ER_EINVAL, "er_session_save: path is empty");
    char tmp[SNAP_PATH_MAX];
    int tn = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (tn < 0 || (size_t)tn >= sizeof tmp)
        return er_fail(ER_EINVAL, "er_session_save: path is too long (%zu bytes)", strlen(path));

    const er_model *m = s->model;
    const er_dims *d = &m->d;
    snap_hdr h = {
        .fingerprint = m->fingerprint, .kv_type = (uint32_t)d->kv_type, .n_layer = (uint32_t)d->n_layer,
        .kv_row = (uint32_t)d->kv_row, .n_vocab = (uint32_t)d->n_vocab, .pos = (uint32_t)s->pos,
        .has_logits = s->has_logits ? 1u : 0u, .rng = s->rng, .stats = s->stats,
    };
    h.payload_bytes = payload_bytes(h.pos, h.n_vocab, h.n_layer, h.kv_row, d->kv_type == ER_KV_F16 ? 2 : 4);
    if (h.payload_bytes) h.payload_bytes = model_payload(m, h.pos);
    /* a CUDA session's rows come through the backend's shared staging and
     * stream, which other sessions' steps use: hold them for the walk */
    er_model *mm = s->model;
    if (mm->cuda) pthread_mutex_lock(&mm->step_lock);
    int rc = save_locked(s, path, tmp, &h);
    if (mm->cuda) pthread_mutex_unlock(&mm->step_lock);
    return rc;
}

static int save_locked(const er_session *s, const char *path, const char *tmp, snap_hdr *hp) {
    snap_hdr h = *hp;
    uint32_t crc = 0;
    int rc = for_each_segment(s, seg_crc, &crc);
    if (rc) return rc;
    h.payload_crc = crc;
    uint8_t hb[SNAP_HEADER];
    encode_header(&h, hb);

    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return er_fail(ER_EIO, "er_session_save: cannot create '%s': %s", tmp, strerror(errno));
    writer w = {.fd = fd, .path = tmp};
    rc = seg_write(&w, hb, sizeof hb);
    if (!rc) rc = for_each_segment(s, seg_write, &w);
    if (!rc) rc = flush(&w);
    if (!rc && fsync(fd) != 0) rc = er_fail(ER_EIO, "er_session_save: fsync of '%s' failed: %s", tmp, strerror(errno));
    if (close(fd) != 0 && !rc) rc = er_fail(ER_EIO, "er_session_save: closing '%s' failed: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, path) != 0)
        rc = er_fail(ER_EIO, "er_session_save: cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
    if (rc) {
        unlink(tmp); /* the old snapshot at `path`, if any, is untouched */
        return rc;
    }
    int e = sync_parent(path);
    if (e)
        return er_fail(ER_EIO, "er_session_save: '%s' is in place but its folder could not be synced (%s): it may "
                       "not survive a power cut", path, strerror(e));
    return ER_OK;
}

/* ---- load ---------------------------------------------------------------------- */

typedef struct reader {
    const uint8_t *p;
} reader;

/* for_each_segment hands out the session's own (writable, arena) buffers as
 * const so that save can share the walk; load writes through them. */
static int seg_read(void *ctx, const void *dst, size_t n) {
    reader *r = ctx;
    memcpy((void *)(uintptr_t)dst, r->p, n);
    r->p += n;
    return ER_OK;
}

/* Checks the mapped snapshot `b` (size bytes) against session s. */
static int verify(const er_session *s, const char *path, const uint8_t *b, size_t size, snap_hdr *h) {
    const er_model *m = s->model;
    const er_dims *d = &m->d;
    if (size < SNAP_HEADER || memcmp(b, SNAP_MAGIC, 8) != 0)
        return er_fail(ER_ECORRUPT, "'%s' is not an edgerun session snapshot (%s)", path,
                       size < SNAP_HEADER ? "too short for the header" : "bad magic");
    decode_header(b, h);
    if (h->version != SNAP_VERSION)
        return er_fail(ER_EUNSUPPORTED, "'%s': snapshot version %u is not supported (this runtime reads version %u)",
                       path, h->version, SNAP_VERSION);
    if (h->header_bytes != SNAP_HEADER || get32(b, 124) != crc32_update(0, b, 124))
        return er_fail(ER_ECORRUPT, "'%s': snapshot header is corrupt (checksum mismatch)", path);
    if (h->fingerprint != m->fingerprint)
        return er_fail(ER_EMISMATCH, "'%s' was saved by another model (fingerprint %016llx, this model %016llx)", path,
                       (unsigned long long)h->fingerprint, (unsigned long long)m->fingerprint);
    if (h->kv_type != (uint32_t)d->kv_type)
        return er_fail(ER_EMISMATCH, "'%s' holds a %s KV cache; this model was opened with kv_type %s", path,
                       h->kv_type == ER_KV_F16 ? "f16" : "f32", d->kv_type == ER_KV_F16 ? "f16" : "f32");
    if (h->n_layer != (uint32_t)d->n_layer || h->kv_row != d->kv_row || h->n_vocab != (uint32_t)d->n_vocab)
        return er_fail(ER_EMISMATCH, "'%s': snapshot shape (%u layers, KV row %u, vocab %u) differs from the model's",
                       path, h->n_layer, h->kv_row, h->n_vocab);
    if (h->pos > (uint32_t)d->n_ctx)
        return er_fail(ER_ECONTEXT, "'%s' holds %u positions but this session's n_ctx is %d (open the model with "
                       "n_ctx >= %u)", path, h->pos, d->n_ctx, h->pos);
    uint64_t want = payload_bytes(h->pos, h->n_vocab, h->n_layer, h->kv_row, d->kv_type == ER_KV_F16 ? 2 : 4);
    if (want) want = model_payload(m, h->pos);
    if (h->payload_bytes != want)
        return er_fail(ER_ECORRUPT, "'%s': header says %llu payload bytes, its geometry needs %llu", path,
                       (unsigned long long)h->payload_bytes, (unsigned long long)want);
    if (size - SNAP_HEADER != want)
        return er_fail(ER_ECORRUPT, "'%s' is %s: %zu payload bytes, expected %llu", path,
                       size - SNAP_HEADER < want ? "truncated" : "longer than its header says", size - SNAP_HEADER,
                       (unsigned long long)want);
    if (crc32_update(0, b + SNAP_HEADER, size - SNAP_HEADER) != h->payload_crc)
        return er_fail(ER_ECORRUPT, "'%s': snapshot payload is corrupt (checksum mismatch)", path);
    if (h->has_logits > 1 || h->rng == 0)
        return er_fail(ER_ECORRUPT, "'%s': snapshot state is invalid (has_logits %u, rng %s)", path, h->has_logits,
                       h->rng ? "ok" : "zero");
    for (uint32_t i = 0; i < h->pos; i++) {
        int32_t id = (int32_t)get32(b + SNAP_HEADER, (size_t)i * 4);
        if (id < 0 || id >= d->n_vocab)
            return er_fail(ER_ECORRUPT, "'%s': history token %u is %d, outside [0, %d)", path, i, id, d->n_vocab);
    }
    return ER_OK;
}

/* Loads the verified payload into a CUDA session: history and logits into
 * the arena, KV rows up to the GPU through the pinned staging, and the
 * logits to the slot's device row (device sampling reads them there). A
 * device failure here (the GPU is gone) leaves the session unusable: it is
 * reset to empty rather than left half-loaded. */
static int load_cuda(er_session *s, reader *r) {
    er_model *m = s->model;
    const er_dims *d = &m->d;
    size_t elem = d->kv_type == ER_KV_F16 ? 2 : 4, rows = (size_t)s->pos * d->kv_row * elem;
    memcpy(s->history, r->p, (size_t)s->pos * 4);
    r->p += (size_t)s->pos * 4;
    memcpy(s->logits, r->p, (size_t)d->n_vocab * 4);
    r->p += (size_t)d->n_vocab * 4;
    size_t chunk = er_cuda_bulk_bytes(m->cuda);
    int rc = ER_OK;
    pthread_mutex_lock(&m->step_lock);
    for (int l = 0; !rc && l < d->n_layer; l++)
        for (int which = 0; !rc && which < 2; which++)
            for (size_t off = 0; !rc && off < rows; off += chunk) {
                size_t n = rows - off < chunk ? rows - off : chunk;
                memcpy(er_cuda_bulk(m->cuda), r->p, n);
                r->p += n;
                rc = er_cuda_kv_from_host(m->cuda, s->slot, l, which, off, n);
            }
    if (!rc) rc = er_cuda_logits_upload(s);
    pthread_mutex_unlock(&m->step_lock);
    if (rc) {
        s->pos = 0;
        s->has_logits = 0;
    }
    return rc;
}

int er_session_load(er_session *s, const char *path) {
    if (!s || !path) return er_fail(ER_EINVAL, "er_session_load: session and path must not be NULL");
    if (!path[0]) return er_fail(ER_EINVAL, "er_session_load: path is empty");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return er_fail(ER_EIO, "er_session_load: cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return er_fail(ER_EIO, "er_session_load: cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return er_fail(ER_EIO, "er_session_load: '%s' is not a regular file", path);
    }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX / 2) {
        close(fd);
        return er_fail(ER_ECORRUPT, "er_session_load: '%s' is too large to be a snapshot", path);
    }
    size_t size = (size_t)st.st_size;
    if (size < SNAP_HEADER) {
        close(fd);
        return er_fail(ER_ECORRUPT, "'%s' is not an edgerun session snapshot (%zu bytes, shorter than the header)",
                       path, size);
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd); /* the mapping keeps the inode alive */
    if (map == MAP_FAILED) return er_fail(ER_EIO, "er_session_load: cannot map '%s': %s", path, strerror(e));

    snap_hdr h = {0};
    int rc = verify(s, path, map, size, &h);
    if (rc == ER_OK) {
        /* Verified: from here nothing can fail, so the session is either
         * untouched (above) or wholly replaced (below). */
        s->pos = (int)h.pos;
        s->has_logits = (int)h.has_logits;
        s->rng = h.rng;
        s->stats = h.stats;
        reader r = {(const uint8_t *)map + SNAP_HEADER};
        if (s->model->cuda)
            rc = load_cuda(s, &r);
        else {
            for_each_segment(s, seg_read, &r);
            mirror_rings(s);
        }
    }
    munmap(map, size);
    return rc;
}
