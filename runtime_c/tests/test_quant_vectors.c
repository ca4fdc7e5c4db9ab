/*
 * test_quant_vectors.c — every kernel table's dequantizers against gguf-py,
 * bit for bit, and its dots against the float dot of gguf-py's values.
 *
 * argv[1]: a vector file written by scripts/gen_quant_vectors.py (random
 * blocks of each type with the floats `gguf.quants.dequantize` makes of
 * them; the checked-in runtime_c/tests/data/quant_vectors.bin by default,
 * tests/test_quant_types.py passes freshly generated ones). Block layouts
 * are where a slip reads every weight of a file wrong while the SIMD-vs-
 * generic tests still agree, so this ties the generic reading to an
 * independent implementation. The dot check: the record's floats against
 * a random activation row prepared in the type's act kind, in double,
 * within the tolerances test_kernels_isa.c documents.
 */
#include "kernels/kernels.h"
#include "kernels/generic/generic.h"
#include "edgerun.h"
#include "error.h"
#include "test_util.h"

#include <math.h>
#include <stdlib.h>

static const char *const k_names[] = {"generic", "avx2", "avx512vnni", "neon", "neon-dotprod", "neon-i8mm", "sve"};

static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n > 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n)) &&
            fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        }
        *len = n > 0 ? (size_t)n : 0;
    }
    fclose(f);
    return buf;
}

static float rnd_f(void) {
    static uint64_t s = 0x9e3779b97f4a7c15ull;
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return (float)((double)((s * 0x2545f4914f6cdd1dull) >> 11) * 0x1p-53 * 2.0 - 1.0);
}

/* What the dot sees of activation row xa: its dequantized Q8 values. */
static void act_values(int kind, const void *xa, int n, float *out) {
    if (kind == ER_ACT_Q8_0) {
        er_gen_dequant_q8_0(xa, out, n);
    } else {
        const er_block_q8_k *b = xa;
        for (int i = 0; i < n; i++) out[i] = b[i / 256].d * (float)b[i / 256].qs[i % 256];
    }
}

static void check_record(const er_kernels *k, int wt, int n, const unsigned char *raw, const unsigned char *want_le) {
    CHECK(k->dequant_row[wt] && k->vec_dot[wt], "%s: no kernel for wtype %d", k->name, wt);
    if (!k->dequant_row[wt] || !k->vec_dot[wt]) return;
    float *want = malloc((size_t)n * 4), *got = malloc((size_t)n * 4), *x = malloc((size_t)n * 4),
          *xv = malloc((size_t)n * 4);
    unsigned char *xa = malloc(er_act_row_bytes(ER_ACT_Q8_K, n) + er_act_row_bytes(ER_ACT_Q8_0, n));
    for (int i = 0; i < n; i++) {
        uint32_t u = rd32(want_le + 4 * (size_t)i);
        memcpy(&want[i], &u, 4);
    }
    memset(got, 0xa5, (size_t)n * 4);
    k->dequant_row[wt](raw, got, n);
    int bad = 0;
    for (int i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], 4) != 0 && bad++ < 3)
            fprintf(stderr, "  %s wtype %d element %d: %.9g, gguf-py %.9g\n", k->name, wt, i, (double)got[i],
                    (double)want[i]);
    CHECK(bad == 0, "%s: dequant_row of wtype %d differs from gguf-py in %d of %d elements", k->name, wt, bad, n);

    const int kind = k->act_kind[wt];
    if (kind != ER_ACT_F32) {
        for (int rep = 0; rep < 4; rep++) {
            for (int i = 0; i < n; i++) x[i] = rnd_f() * (float)(1 + rep * (i % 5));
            if (kind == ER_ACT_Q8_0)
                er_gen_quantize_row_q8_0(x, xa, n);
            else
                er_gen_quantize_row_q8_k(x, xa, n);
            act_values(kind, xa, n, xv);
            double ref = 0, mag = 0;
            for (int i = 0; i < n; i++) {
                ref += (double)want[i] * xv[i];
                mag += fabs((double)want[i] * xv[i]);
            }
            const float d = k->vec_dot[wt](n, raw, xa);
            const double tol = (wt == ER_W_Q4_1 || wt == ER_W_Q5_1 ? 4e-6 : 1e-6) * mag + 1e-30;
            CHECK(fabs(d - ref) <= tol, "%s: vec_dot of wtype %d is %.9g, the float dot of gguf-py's values %.9g "
                  "(tol %.3g)", k->name, wt, (double)d, ref, tol);
        }
    }
    free(want);
    free(got);
    free(x);
    free(xv);
    free(xa);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_quant_vectors VECTORS.bin\n");
        return 2;
    }
    size_t len = 0;
    unsigned char *buf = slurp(argv[1], &len);
    CHECK(buf && len >= 8 && memcmp(buf, "ERQV", 4) == 0, "%s: not a vector file", argv[1]);
    if (!buf || len < 8) return test_summary();
    const uint32_t count = rd32(buf + 4);
    int tables = 0;
    for (size_t ti = 0; ti < sizeof k_names / sizeof k_names[0]; ti++) {
        er_clear_error();
        const er_kernels *k = er_kernels_select(k_names[ti], NULL);
        if (!k) continue;
        tables++;
        size_t off = 8;
        int types = 0;
        for (uint32_t r = 0; r < count; r++) {
            CHECK(off + 12 <= len, "record %u header past the end", r);
            if (off + 12 > len) break;
            const uint32_t type = rd32(buf + off), n = rd32(buf + off + 4), nb = rd32(buf + off + 8);
            off += 12;
            CHECK(off + nb + 4ull * n <= len && n > 0 && n % 256 == 0, "record %u: bad sizes", r);
            if (off + nb + 4ull * n > len) break;
            const int wt = er_wtype_from_ggml(type);
            CHECK(wt >= 0, "record %u: GGML type %u has no kernel", r, type);
            if (wt >= 0) {
                check_record(k, wt, (int)n, buf + off, buf + off + nb);
                types++;
            }
            off += nb + 4ull * n;
        }
        printf("table %-13s %d types checked\n", k->name, types);
    }
    CHECK(tables >= 1 && count >= 7, "%d tables, %u records", tables, count);
    free(buf);
    return test_summary();
}
