/*
 * unicode.c — UTF-8 decoding and character classification over the generated tables.
 */
#include "unicode.h"

uint32_t er_utf8_decode(const char *s, size_t len, size_t *adv)
{
    const unsigned char *u = (const unsigned char *)s;
    if (len == 0) {
        *adv = 0;
        return ER_UTF8_INVALID;
    }
    *adv = 1;
    uint32_t c = u[0];
    if (c < 0x80)
        return c;
    size_t n;
    uint32_t min;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2; min = 0x80; c &= 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3; min = 0x800; c &= 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4; min = 0x10000; c &= 0x07;
    } else {
        return ER_UTF8_INVALID; /* continuation byte, C0/C1, F5..FF */
    }
    if (len < n)
        return ER_UTF8_INVALID;
    for (size_t i = 1; i < n; i++) {
        if ((u[i] & 0xC0) != 0x80)
            return ER_UTF8_INVALID;
        c = (c << 6) | (u[i] & 0x3F);
    }
    /* Overlongs, UTF-16 surrogates and values past U+10FFFF are not
     * characters: accepting them would give two spellings to one token. */
    if (c < min || (c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF)
        return ER_UTF8_INVALID;
    *adv = n;
    return c;
}

size_t er_utf8_char_len(const char *s, size_t len)
{
    size_t adv;
    (void)er_utf8_decode(s, len, &adv);
    return adv;
}

size_t er_utf8_encode(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF)
        return 0;
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp <= 0x10FFFF) {
        out[0] = (char)(0xF0 | (cp >> 18));
        out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (char)(0x80 | (cp & 0x3F));
        return 4;
    }
    return 0;
}

int er_unicode_category(uint32_t cp)
{
    if (cp < 256)
        return er_uc_cat_latin1[cp];
    if (cp > 0x10FFFF)
        return ER_UC_CN;
    /* Last run whose start is <= cp; run 0 starts at U+0000 so one exists. */
    size_t lo = 0, hi = er_uc_cat_nruns;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if ((er_uc_cat_runs[mid] >> 5) <= cp)
            lo = mid;
        else
            hi = mid;
    }
    return (int)(er_uc_cat_runs[lo] & 31u);
}

int er_unicode_is_whitespace(uint32_t cp)
{
    /* Few enough ranges (about a dozen) that a linear scan beats bookkeeping;
     * the ASCII test first keeps ordinary text off the scan entirely. */
    if (cp < 0x80)
        return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
    for (size_t i = 0; i < er_uc_space_nranges; i++) {
        if (cp < er_uc_space_ranges[i][0])
            return 0;
        if (cp <= er_uc_space_ranges[i][1])
            return 1;
    }
    return 0;
}

const char *er_unicode_version(void)
{
    return er_uc_version;
}
