/*
 * normalize.c — NFC: full canonical decomposition, canonical ordering of
 * combining marks, then canonical composition (UAX #15), over the tables
 * generated into nfc_tables.c.
 *
 * Work is confined to chunks: ASCII characters never decompose, reorder or
 * appear as the second half of a composition, so the text can be cut before
 * each of them. A run of non-ASCII characters (with the ASCII character
 * before it, which may be the first half of a composition) is normalized on
 * its own, and only when it holds a character at or above U+0300 — below
 * that everything is already NFC. Typical text is therefore mostly copied.
 */
#include "normalize.h"

#include <string.h>

#include "unicode.h"

/* Hangul syllables compose and decompose by arithmetic. */
enum { S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7,
       L_COUNT = 19, V_COUNT = 21, T_COUNT = 28, N_COUNT = V_COUNT * T_COUNT, S_COUNT = L_COUNT * N_COUNT };

/* Invalid input bytes travel through the code point buffer as this + byte. */
#define RAW_BYTE 0x80000000u

size_t er_nfc_work_bytes(size_t len) {
    /* A character of k bytes decomposes into at most k+1 code points
     * (U+01D5: 2 bytes -> 3; U+1F82: 3 bytes -> 4). */
    return 4 * (2 * len + 2) * 2; /* the code points, and as much again for sorting */
}

static int ccc(uint32_t cp) {
    if (cp < 0x300 || cp >= RAW_BYTE) return 0;
    size_t lo = 0, hi = er_nfc_ccc_n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < er_nfc_ccc[mid][0]) hi = mid;
        else if (cp > er_nfc_ccc[mid][1]) lo = mid + 1;
        else return (int)er_nfc_ccc[mid][2];
    }
    return 0;
}

static size_t decompose(uint32_t cp, uint32_t *out) {
    if (cp >= S_BASE && cp < S_BASE + S_COUNT) {
        uint32_t s = cp - S_BASE;
        out[0] = L_BASE + s / N_COUNT;
        out[1] = V_BASE + (s % N_COUNT) / T_COUNT;
        if (s % T_COUNT == 0) return 2;
        out[2] = T_BASE + s % T_COUNT;
        return 3;
    }
    if (cp >= 0xC0 && cp < RAW_BYTE) {
        size_t lo = 0, hi = er_nfc_decomp_n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (cp < er_nfc_decomp[mid][0]) hi = mid;
            else if (cp > er_nfc_decomp[mid][0]) lo = mid + 1;
            else {
                memcpy(out, er_nfc_pool + er_nfc_decomp[mid][1], 4 * er_nfc_decomp[mid][2]);
                return er_nfc_decomp[mid][2];
            }
        }
    }
    out[0] = cp;
    return 1;
}

/* The primary composite of (a, b), or 0. */
static uint32_t compose(uint32_t a, uint32_t b) {
    if (a >= L_BASE && a < L_BASE + L_COUNT && b >= V_BASE && b < V_BASE + V_COUNT)
        return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
    if (a >= S_BASE && a < S_BASE + S_COUNT && (a - S_BASE) % T_COUNT == 0 && b > T_BASE && b < T_BASE + T_COUNT)
        return a + (b - T_BASE);
    size_t lo = 0, hi = er_nfc_comp_n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const uint32_t *e = er_nfc_comp[mid];
        if (a < e[0] || (a == e[0] && b < e[1])) hi = mid;
        else if (a > e[0] || b > e[1]) lo = mid + 1;
        else return e[2];
    }
    return 0;
}

/* NFC of one chunk (the caller picks chunks whose ends are safe boundaries). */
static size_t nfc_chunk(const char *in, size_t len, char *out, uint32_t *cps) {
    const uint8_t *u = (const uint8_t *)in;
    size_t n = 0;
    for (size_t k = 0; k < len;) {
        size_t adv;
        uint32_t cp = er_utf8_decode(in + k, len - k, &adv);
        if (cp == ER_UTF8_INVALID) {
            cps[n++] = RAW_BYTE | u[k];
            k += 1;
            continue;
        }
        n += decompose(cp, cps + n);
        k += adv;
    }

    /* Canonical ordering: a stable sort of each run of non-starters by class;
     * insertion sort for short runs, counting sort for long ones, so hostile
     * input (thousands of alternating marks) stays linear. */
    uint32_t *tmp = cps + (2 * len + 2);
    for (size_t a = 0; a < n;) {
        if (ccc(cps[a]) == 0) {
            a++;
            continue;
        }
        size_t b = a;
        while (b < n && ccc(cps[b]) != 0) b++;
        if (b - a <= 32) {
            for (size_t k = a + 1; k < b; k++) {
                int c = ccc(cps[k]);
                uint32_t x = cps[k];
                size_t j = k;
                while (j > a && ccc(cps[j - 1]) > c) {
                    cps[j] = cps[j - 1];
                    j--;
                }
                cps[j] = x;
            }
        } else {
            size_t count[257] = {0};
            for (size_t k = a; k < b; k++) count[ccc(cps[k]) + 1]++;
            for (int c = 1; c < 257; c++) count[c] += count[c - 1];
            for (size_t k = a; k < b; k++) tmp[count[ccc(cps[k])]++] = cps[k];
            memcpy(cps + a, tmp, (b - a) * sizeof *cps);
        }
        a = b;
    }

    /* Composition (the sample algorithm of UAX #15). A text that starts with
     * a non-starter has no starter to compose with until the first one. */
    size_t w = 1, starter = 0;
    int have_starter = ccc(cps[0]) == 0 && cps[0] < RAW_BYTE;
    int last = have_starter ? 0 : 256;
    for (size_t k = 1; k < n; k++) {
        uint32_t cp = cps[k];
        int c = ccc(cp);
        uint32_t comp = (have_starter && cp < RAW_BYTE && (last < c || last == 0)) ? compose(cps[starter], cp) : 0;
        /* `last == 0` means nothing sits between the starter and cp. */
        if (comp && (last < c || (last == 0 && w == starter + 1))) {
            cps[starter] = comp;
            continue;
        }
        if (c == 0) {
            starter = w;
            have_starter = cp < RAW_BYTE;
        }
        last = c;
        cps[w++] = cp;
    }
    n = w;

    size_t o = 0;
    for (size_t k = 0; k < n; k++) {
        if (cps[k] >= RAW_BYTE) out[o++] = (char)(cps[k] & 0xFF);
        else o += er_utf8_encode(cps[k], out + o);
    }
    return o;
}

size_t er_nfc(const char *in, size_t len, char *out, uint32_t *cps) {
    const uint8_t *u = (const uint8_t *)in;
    size_t o = 0, i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && u[j] < 0x80) j++;
        size_t k = j, hot = 0;
        while (k < len && u[k] >= 0x80) hot |= u[k++] >= 0xCC; /* 0xCC leads U+0300 */
        if (!hot) {
            memcpy(out + o, in + i, k - i);
            o += k - i;
            i = k;
            continue;
        }
        size_t start = j > i ? j - 1 : j;
        memcpy(out + o, in + i, start - i);
        o += start - i;
        o += nfc_chunk(in + start, k - start, out + o, cps);
        i = k;
    }
    return o;
}
