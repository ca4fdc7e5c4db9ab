/*
 * pretokenize.c — hand-written equivalents of the pre-tokenizer regexes.
 *
 * A pre-tokenizer is a short sequence of stages; each stage stands for one
 * regex applied with Hugging Face's Split(behavior="isolated"): scanning a
 * piece left to right, the leftmost match becomes a piece, the text skipped
 * before it becomes a piece too, and the next stage splits every piece the
 * stage produced. A regex only sees its piece, so look-aheads such as
 * `(?!\S)` and `$` stop at the piece's end.
 *
 * Each stage's matcher answers "does the regex match at position p, and
 * where does the match end" following the regex's ordered alternation and
 * backtracking exactly (documented per matcher). None of the regexes can
 * match the empty string, so "no match" is returned as 0.
 */
#include "pretokenize.h"

#include <string.h>

#include "unicode.h"

/* ---- character classes ------------------------------------------------ */

typedef struct { uint32_t lo, hi; } cp_range;

/* deepseek-llm's explicit letter class (the regex "\s?[A-Za-zµÀ-ÖØ-ö...]+"),
 * as ascending inclusive ranges. */
static const cp_range ds_letters[] = {
    {0x0041, 0x005A}, {0x0061, 0x007A}, {0x00B5, 0x00B5}, {0x00C0, 0x00D6}, {0x00D8, 0x00F6},
    {0x00F8, 0x01BA}, {0x01BC, 0x01BF}, {0x01C4, 0x0293}, {0x0295, 0x02AF}, {0x0370, 0x0373},
    {0x0376, 0x0377}, {0x037B, 0x037D}, {0x037F, 0x037F}, {0x0386, 0x0386},
    {0x0388, 0x038A}, {0x038C, 0x038C}, {0x038E, 0x03A1}, {0x03A3, 0x03F5}, {0x03F7, 0x0481},
    {0x048A, 0x052F}, {0x0531, 0x0556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD},
    {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A},
    {0x1E00, 0x1F15}, {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57},
    {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4},
    {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3},
    {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102},
    {0x2107, 0x2107}, {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124},
    {0x2126, 0x2126}, {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139},
    {0x213C, 0x213F}, {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184},
    {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3},
    {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787}, {0xA78B, 0xA78E},
    {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A},
    {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10C80, 0x10CB2},
    {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};

/* deepseek-llm's punctuation class "[!-/:-~！-／：-～‘-‟　-。]". */
static const cp_range ds_punct[] = {
    {0x0021, 0x002F}, {0x003A, 0x007E}, {0x2018, 0x201F}, {0x3000, 0x3002},
    {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E},
};

/* The deepseek CJK class "[一-龥ࠀ-一가-퟿]": U+4E00-9FA5, U+0800-4E00, U+AC00-D7FF. */
static const cp_range ds_cjk[] = {
    {0x0800, 0x9FA5}, {0xAC00, 0xD7FF},
};

static int in_ranges(const cp_range *r, size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < r[mid].lo)
            hi = mid;
        else if (cp > r[mid].hi)
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

#define NRANGES(a) (sizeof(a) / sizeof((a)[0]))

enum cls {
    C_CRLF,      /* [\r\n] */
    C_LETTER,    /* \p{L} */
    C_NUMBER,    /* \p{N} */
    C_PUNCT,     /* \p{P} */
    C_DIGIT,     /* [0-9] */
    C_FALCON,    /* [\p{P}\$\+<=>\^~\|`] */
    C_DEFAULT,   /* [\p{P}\$\+<=>\^~\|] (falcon's without the backtick) */
    C_DS_LETTER, /* deepseek-llm letters */
    C_DS_PUNCT,  /* deepseek-llm punctuation */
    C_CJK,       /* deepseek CJK */
    C_PORO,      /* [^(\s|.,!?…。，、।۔،)] */
};

static int in_class(int cls, uint32_t cp)
{
    switch (cls) {
    case C_CRLF: return cp == '\r' || cp == '\n';
    case C_LETTER: return er_ucat_is_letter(er_unicode_category(cp));
    case C_NUMBER: return er_ucat_is_number(er_unicode_category(cp));
    case C_PUNCT: return er_ucat_is_punct(er_unicode_category(cp));
    case C_DIGIT: return cp >= '0' && cp <= '9';
    case C_FALCON:
        /* HF Falcon's Punctuation pre-tokenizer counts ASCII symbols as
         * punctuation too; these are the ones Unicode calls S*. */
        return er_ucat_is_punct(er_unicode_category(cp)) || cp == '$' || cp == '+' || cp == '<' ||
               cp == '=' || cp == '>' || cp == '^' || cp == '~' || cp == '|' || cp == '`';
    case C_DEFAULT:
        return er_ucat_is_punct(er_unicode_category(cp)) || cp == '$' || cp == '+' || cp == '<' ||
               cp == '=' || cp == '>' || cp == '^' || cp == '~' || cp == '|';
    case C_DS_LETTER: return in_ranges(ds_letters, NRANGES(ds_letters), cp);
    case C_DS_PUNCT: return in_ranges(ds_punct, NRANGES(ds_punct), cp);
    case C_CJK: return in_ranges(ds_cjk, NRANGES(ds_cjk), cp);
    case C_PORO:
        return !(er_unicode_is_whitespace(cp) || cp == '(' || cp == ')' || cp == '|' || cp == '.' ||
                 cp == ',' || cp == '!' || cp == '?' || cp == 0x2026 /* … */ ||
                 cp == 0x3002 /* 。 */ || cp == 0xFF0C /* ， */ || cp == 0x3001 /* 、 */ ||
                 cp == 0x0964 /* । */ || cp == 0x06D4 /* ۔ */ || cp == 0x060C /* ، */);
    default: return 0;
    }
}

/* The four-way partition the GPT-2 family of regexes is written in:
 * `\s`, `\p{L}`, `\p{N}` and everything else (`[^\s\p{L}\p{N}]`). */
enum kind { K_SPACE, K_LETTER, K_NUMBER, K_OTHER };

static int kind_of(uint32_t cp)
{
    if (cp < 0x80) { /* ASCII fast path: most text never reaches the tables */
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z')
            return K_LETTER;
        if (cp >= '0' && cp <= '9')
            return K_NUMBER;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D))
            return K_SPACE;
        return K_OTHER;
    }
    if (er_unicode_is_whitespace(cp))
        return K_SPACE;
    int c = er_unicode_category(cp);
    if (er_ucat_is_letter(c))
        return K_LETTER;
    if (er_ucat_is_number(c))
        return K_NUMBER;
    return K_OTHER;
}

/* kind_of where combining marks count as letters: Qwen3.5's regex writes
 * `[\p{L}\p{M}]` for letters and `[^\s\p{L}\p{M}\p{N}]` for the rest, so a
 * mark never starts or joins a punctuation piece there. No ASCII character
 * is a mark. */
static int kind_lm(uint32_t cp, int marks)
{
    int k = kind_of(cp);
    if (marks && k == K_OTHER && cp >= 0x300 && er_ucat_is_mark(er_unicode_category(cp)))
        return K_LETTER;
    return k;
}

/* ---- scanning helpers --------------------------------------------------- */

/* Decodes the character at s[p] (p < end) and sets *next past it. */
static uint32_t dec(const char *s, size_t p, size_t end, size_t *next)
{
    size_t adv;
    uint32_t cp = er_utf8_decode(s + p, end - p, &adv);
    *next = p + adv;
    return cp;
}

/* End of the run of characters of kind k (kind_lm with `marks`) starting at p. */
static size_t run_kind_lm(const char *s, size_t p, size_t end, int k, int marks)
{
    while (p < end) {
        size_t q;
        if (kind_lm(dec(s, p, end, &q), marks) != k)
            break;
        p = q;
    }
    return p;
}

static size_t run_kind(const char *s, size_t p, size_t end, int k)
{
    return run_kind_lm(s, p, end, k, 0);
}

/* End of at most max (0 = unbounded) characters of class cls from p; *count gets how many. */
static size_t run_class(const char *s, size_t p, size_t end, int cls, unsigned max, unsigned *count)
{
    unsigned n = 0;
    while (p < end && (max == 0 || n < max)) {
        size_t q;
        if (!in_class(cls, dec(s, p, end, &q)))
            break;
        p = q;
        n++;
    }
    *count = n;
    return p;
}

/* `\s+(?!\S)|\s+` at a whitespace character p: the greedy run, except that
 * when a non-space follows it the first alternative backs off one character
 * (so the last space can lead the next word); a single space before a
 * non-space falls through to the plain `\s+`. */
static size_t match_space_tail(const char *s, size_t p, size_t end)
{
    size_t last = p, q = p;
    while (q < end) {
        size_t r;
        if (kind_of(dec(s, q, end, &r)) != K_SPACE)
            break;
        last = q;
        q = r;
    }
    if (q == end || last == p)
        return q;
    return last;
}

/* ---- the regex families ------------------------------------------------- */

static size_t match_ws(const char *s, size_t p, size_t end);

/* GPT-2 byte-level: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * Every character starts some alternative, so this never fails. */
static size_t match_gpt2(const char *s, size_t p, size_t end)
{
    size_t p1, p2, p3;
    uint32_t c0 = dec(s, p, end, &p1);
    if (c0 == '\'' && p1 < end) {
        uint32_t c1 = dec(s, p1, end, &p2);
        if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd')
            return p2;
        if (p2 < end) {
            uint32_t c2 = dec(s, p2, end, &p3);
            if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))
                return p3;
        }
    }
    int k0 = kind_of(c0);
    if (c0 == ' ' && p1 < end) {
        int k1 = kind_of(dec(s, p1, end, &p2));
        if (k1 != K_SPACE)
            return run_kind(s, p2, end, k1);
    }
    if (k0 != K_SPACE)
        return run_kind(s, p1, end, k0);
    return match_space_tail(s, p, end);
}

/* The `(?i:'s|'t|'re|'ve|'m|'ll|'d)` letters as HF's engine folds them: ASCII
 * case pairs, plus U+017F LATIN SMALL LETTER LONG S, which case-folds to 's'.
 * (Checked against tokenizers 0.23 over every letter; no other character,
 * e.g. U+212A KELVIN SIGN, folds onto these letters.) */
static uint32_t fold_contraction(uint32_t c)
{
    if (c >= 'A' && c <= 'Z')
        return c + 32;
    if (c == 0x017F)
        return 's';
    return c;
}

/* Llama 3 / Qwen2: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}|
 *                  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * with D = digits (3 for Llama 3, 1 for Qwen2). Never fails either.
 * With `marks` (Qwen3.5) the letter class is [\p{L}\p{M}] and the
 * punctuation class [^\s\p{L}\p{M}\p{N}]; the optional lead stays
 * [^\r\n\p{L}\p{N}], which lets a mark lead — and a mark followed by
 * letters is a letter run either way, so kind_lm covers it. */
static size_t match_llama3(const char *s, size_t p, size_t end, unsigned digits, int marks)
{
    size_t p1, p2 = 0, p3;
    uint32_t c0 = dec(s, p, end, &p1);
    uint32_t c1 = ER_UTF8_INVALID;
    int k1 = -1;
    if (p1 < end) {
        c1 = dec(s, p1, end, &p2);
        k1 = kind_lm(c1, marks);
    }
    if (c0 == '\'' && p1 < end) {
        uint32_t f1 = fold_contraction(c1);
        if (f1 == 's' || f1 == 't' || f1 == 'm' || f1 == 'd')
            return p2;
        if (p2 < end) {
            uint32_t f2 = fold_contraction(dec(s, p2, end, &p3));
            /* 'ſ' only stands in for 's', which never comes second. */
            if (f2 != 's' && ((f1 == 'r' && f2 == 'e') || (f1 == 'v' && f2 == 'e') ||
                              (f1 == 'l' && f2 == 'l')))
                return p3;
        }
    }
    int k0 = kind_lm(c0, marks);
    /* [^\r\n\p{L}\p{N}]?\p{L}+ : one optional non-letter, non-digit, non-newline lead */
    if (k0 == K_LETTER)
        return run_kind_lm(s, p1, end, K_LETTER, marks);
    if (k0 != K_NUMBER && c0 != '\r' && c0 != '\n' && k1 == K_LETTER)
        return run_kind_lm(s, p2, end, K_LETTER, marks);
    /* \p{N}{1,D} */
    if (k0 == K_NUMBER) {
        size_t q = p1;
        for (unsigned n = 1; n < digits && q < end; n++) {
            size_t r;
            if (kind_lm(dec(s, q, end, &r), marks) != K_NUMBER)
                break;
            q = r;
        }
        return q;
    }
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    size_t q = 0;
    if (c0 == ' ' && k1 == K_OTHER)
        q = run_kind_lm(s, p2, end, K_OTHER, marks);
    else if (k0 == K_OTHER)
        q = run_kind_lm(s, p1, end, K_OTHER, marks);
    if (q) {
        while (q < end && (s[q] == '\r' || s[q] == '\n'))
            q++;
        return q;
    }
    return match_ws(s, p, end);
}

/* \s*[\r\n]+|\s+(?!\S)|\s+ at a whitespace character p: the greedy \s*
 * backs off to the last newline of the whitespace run, which [\r\n]+ then
 * takes; without a newline, match_space_tail. */
static size_t match_ws(const char *s, size_t p, size_t end)
{
    size_t nl_end = 0, q = p;
    while (q < end) {
        size_t r;
        uint32_t c = dec(s, q, end, &r);
        if (kind_of(c) != K_SPACE)
            break;
        if (c == '\r' || c == '\n')
            nl_end = r;
        q = r;
    }
    if (nl_end)
        return nl_end;
    return match_space_tail(s, p, end);
}

/* The letter classes of the o200k regex: U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
 * ("may start a word") and W = [\p{Ll}\p{Lm}\p{Lo}\p{M}] ("may continue it").
 * Lm, Lo and marks are in both. */
enum { O_NONE = 0, O_U = 1, O_W = 2 };

static int o200k_class(uint32_t cp)
{
    if (cp < 0x80) {
        if (cp >= 'A' && cp <= 'Z')
            return O_U;
        if (cp >= 'a' && cp <= 'z')
            return O_W;
        return O_NONE;
    }
    int c = er_unicode_category(cp);
    if (c == ER_UC_LU || c == ER_UC_LT)
        return O_U;
    if (c == ER_UC_LL)
        return O_W;
    if (c == ER_UC_LM || c == ER_UC_LO || er_ucat_is_mark(c))
        return O_U | O_W;
    return O_NONE;
}

/* End of an optional (?i:'s|'t|'re|'ve|'m|'ll|'d) at p (p itself when none). */
static size_t contraction_at(const char *s, size_t p, size_t end)
{
    size_t p1, p2, p3;
    if (p >= end || dec(s, p, end, &p1) != '\'' || p1 >= end)
        return p;
    uint32_t f1 = fold_contraction(dec(s, p1, end, &p2));
    if (f1 == 's' || f1 == 't' || f1 == 'm' || f1 == 'd')
        return p2;
    if (p2 < end) {
        uint32_t f2 = fold_contraction(dec(s, p2, end, &p3));
        if (f2 != 's' && ((f1 == 'r' && f2 == 'e') || (f1 == 'v' && f2 == 'e') || (f1 == 'l' && f2 == 'l')))
            return p3;
    }
    return p;
}

/* The two word alternatives of the o200k regex from q (after the optional
 * lead), both followed by an optional contraction:
 *   A  U*W+   B  U+W*
 * A: the greedy U* backs off until a W can follow, so A takes the U run and
 * the W run after it when a W follows the U run; otherwise it ends just
 * after the last character of the U run that is also a W (Lm, Lo, a mark);
 * with no such character it fails. B takes the U run and any W run after.
 * Returns 0 when the alternative does not match. */
static size_t o200k_word(const char *s, size_t q, size_t end, int alt_b)
{
    size_t u = q, last_w = 0, r;
    while (u < end) {
        int c = o200k_class(dec(s, u, end, &r));
        if (!(c & O_U))
            break;
        if (c & O_W)
            last_w = r;
        u = r;
    }
    int next_w = u < end && (o200k_class(dec(s, u, end, &r)) & O_W);
    size_t m;
    if (alt_b) {
        if (u == q)
            return 0;
        m = u;
        while (m < end && (o200k_class(dec(s, m, end, &r)) & O_W))
            m = r;
    } else if (next_w) {
        m = u;
        while (m < end && (o200k_class(dec(s, m, end, &r)) & O_W))
            m = r;
    } else if (last_w) {
        m = last_w;
    } else {
        return 0;
    }
    return contraction_at(s, m, end);
}

/* o200k (GPT-4o; Phi-4-mini):
 *   [^\r\n\p{L}\p{N}]?U*W+(?i:'s|...)?|[^\r\n\p{L}\p{N}]?U+W*(?i:'s|...)?|
 *   \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * Each word alternative is tried with its lead, then without, before the
 * next alternative: the regex engine's order. Never fails. */
static size_t match_o200k(const char *s, size_t p, size_t end)
{
    size_t p1, p2 = 0;
    uint32_t c0 = dec(s, p, end, &p1);
    int k0 = kind_of(c0), k1 = -1;
    if (p1 < end)
        k1 = kind_of(dec(s, p1, end, &p2));
    int lead = k0 != K_LETTER && k0 != K_NUMBER && c0 != '\r' && c0 != '\n';
    for (int alt_b = 0; alt_b < 2; alt_b++) {
        size_t m;
        if (lead && p1 < end && (m = o200k_word(s, p1, end, alt_b)))
            return m;
        if ((m = o200k_word(s, p, end, alt_b)))
            return m;
    }
    /* \p{N}{1,3} */
    if (k0 == K_NUMBER) {
        size_t q = p1, r;
        for (int n = 1; n < 3 && q < end && kind_of(dec(s, q, end, &r)) == K_NUMBER; n++)
            q = r;
        return q;
    }
    /*  ?[^\s\p{L}\p{N}]+[\r\n/]* */
    size_t q = 0;
    if (c0 == ' ' && k1 == K_OTHER)
        q = run_kind(s, p2, end, K_OTHER);
    else if (k0 == K_OTHER)
        q = run_kind(s, p1, end, K_OTHER);
    if (q) {
        while (q < end && (s[q] == '\r' || s[q] == '\n' || s[q] == '/'))
            q++;
        return q;
    }
    return match_ws(s, p, end); /* c0 is whitespace */
}

/* ---- stages and pre-tokenizer definitions ------------------------------- */

enum stage_kind {
    ST_GPT2,
    ST_LLAMA3,        /* max: digits per number piece; cls: 1 = marks join letters */
    ST_O200K,
    ST_RUN,           /* optional prefix, then class{min,max} */
    ST_TRAILING_SPACE /* \s+$ */
};

enum prefix {
    PF_NONE,
    PF_SPACE, /* " ?" */
    PF_WS     /* "\s?" */
};

typedef struct {
    uint8_t kind, prefix, cls, min;
    uint16_t max; /* ST_RUN: 0 = unbounded; ST_LLAMA3: digits */
} stage;

#define MAX_STAGES 6

typedef struct {
    const char *name; /* canonical name */
    uint8_t nstages;
    stage st[MAX_STAGES];
} pre_def;

#define GPT2 {ST_GPT2, 0, 0, 0, 0}
#define RUN(pf, cls, min, max) {ST_RUN, pf, cls, min, max}

/* Indexed by enum er_pre. The regex each stage stands for is in its comment. */
static const pre_def pre_defs[ER_PRE_COUNT] = {
    [ER_PRE_NONE] = {"none", 0, {GPT2}},
    [ER_PRE_GPT2] = {"gpt2", 1, {GPT2}},
    [ER_PRE_LLAMA3] = {"llama3", 1, {{ST_LLAMA3, 0, 0, 0, 3}}},
    [ER_PRE_QWEN2] = {"qwen2", 1, {{ST_LLAMA3, 0, 0, 0, 1}}},
    [ER_PRE_DEEPSEEK_LLM] = {"deepseek-llm", 6, {
        RUN(PF_NONE, C_CRLF, 1, 1),       /* [\r\n] */
        RUN(PF_WS, C_DS_LETTER, 1, 0),    /* \s?[A-Za-zµÀ-ÖØ-ö...]+ */
        RUN(PF_WS, C_DS_PUNCT, 1, 0),     /* \s?[!-/:-~！-／：-～‘-‟　-。]+ */
        {ST_TRAILING_SPACE, 0, 0, 0, 0},  /* \s+$ */
        RUN(PF_NONE, C_CJK, 1, 0),        /* [一-龥ࠀ-一가-퟿]+ */
        RUN(PF_NONE, C_NUMBER, 1, 0),     /* \p{N}+ */
    }},
    [ER_PRE_DEEPSEEK_CODER] = {"deepseek-coder", 5, {
        RUN(PF_NONE, C_CRLF, 1, 1),       /* [\r\n] */
        RUN(PF_WS, C_LETTER, 1, 0),       /* \s?\p{L}+ */
        RUN(PF_WS, C_PUNCT, 1, 0),        /* \s?\p{P}+ */
        RUN(PF_NONE, C_CJK, 1, 0),        /* [一-龥ࠀ-一가-퟿]+ */
        RUN(PF_NONE, C_NUMBER, 1, 1),     /* \p{N} */
    }},
    [ER_PRE_FALCON] = {"falcon", 3, {
        RUN(PF_NONE, C_FALCON, 1, 0),     /* [\p{P}\$\+<=>\^~\|`]+ */
        GPT2,
        RUN(PF_NONE, C_DIGIT, 3, 3),      /* [0-9][0-9][0-9] */
    }},
    [ER_PRE_STARCODER] = {"starcoder", 2, {
        RUN(PF_NONE, C_NUMBER, 1, 1),     /* \p{N} */
        GPT2,
    }},
    [ER_PRE_PORO] = {"poro", 1, {
        RUN(PF_SPACE, C_PORO, 1, 0),      /*  ?[^(\s|.,!?…。，、।۔،)]+ */
    }},
    [ER_PRE_VIKING] = {"viking", 2, {
        RUN(PF_SPACE, C_PORO, 1, 0),
        RUN(PF_NONE, C_NUMBER, 1, 1),     /* \p{N} */
    }},
    [ER_PRE_QWEN35] = {"qwen35", 1, {{ST_LLAMA3, 0, 1, 0, 1}}},
    /* llama.cpp's own default for a BPE file whose tokenizer.ggml.pre is
     * "default" or absent (LLAMA_VOCAB_PRE_TYPE_DEFAULT): not GPT-2's regex
     * alone, punctuation runs split off first and numbers after. */
    [ER_PRE_DEFAULT] = {"default", 4, {
        RUN(PF_NONE, C_DEFAULT, 1, 0),    /* [\p{P}\$\+<=>\^~\|]+ */
        GPT2,
        RUN(PF_NONE, C_NUMBER, 1, 0),     /* \p{N}+ */
        RUN(PF_NONE, C_DIGIT, 3, 3),      /* [0-9][0-9][0-9] */
    }},
    [ER_PRE_GPT4O] = {"gpt-4o", 1, {{ST_O200K, 0, 0, 0, 0}}},
};

/* `tokenizer.ggml.pre` values (as llama.cpp's converter writes them) and the
 * regex family each stands for. Adding a model that reuses a regex is one row. */
static const struct { const char *name; uint8_t pre; } pre_names[] = {
    {"", ER_PRE_DEFAULT}, {"default", ER_PRE_DEFAULT}, {"gpt2", ER_PRE_GPT2}, {"gpt-2", ER_PRE_GPT2},
    {"mpt", ER_PRE_GPT2}, {"olmo", ER_PRE_GPT2}, {"jais", ER_PRE_GPT2}, {"phi-2", ER_PRE_GPT2},
    {"jina-es", ER_PRE_GPT2}, {"jina-de", ER_PRE_GPT2}, {"jina-v2-es", ER_PRE_GPT2},
    {"jina-v2-de", ER_PRE_GPT2}, {"jina-v1-en", ER_PRE_GPT2}, {"jina-v2-code", ER_PRE_GPT2},
    {"gigachat", ER_PRE_GPT2}, {"a.x-4.0", ER_PRE_GPT2}, {"mellum", ER_PRE_GPT2},
    {"modern-bert", ER_PRE_GPT2}, {"roberta-bpe", ER_PRE_GPT2}, {"exaone4", ER_PRE_GPT2},
    {"trillion", ER_PRE_GPT2}, {"granite-docling", ER_PRE_GPT2},
    {"llama3", ER_PRE_LLAMA3}, {"llama-v3", ER_PRE_LLAMA3}, {"llama-bpe", ER_PRE_LLAMA3},
    {"falcon3", ER_PRE_LLAMA3}, {"falcon-h1", ER_PRE_LLAMA3}, {"pixtral", ER_PRE_LLAMA3},
    {"midm-2.0", ER_PRE_LLAMA3}, {"lfm2", ER_PRE_LLAMA3}, {"jina-v5-nano", ER_PRE_LLAMA3},
    {"dbrx", ER_PRE_LLAMA3}, {"smaug-bpe", ER_PRE_LLAMA3}, {"chatglm-bpe", ER_PRE_LLAMA3},
    {"glm4", ER_PRE_LLAMA3},
    {"qwen2", ER_PRE_QWEN2}, {"deepseek-r1-qwen", ER_PRE_QWEN2}, {"kormo", ER_PRE_QWEN2},
    {"f2llmv2", ER_PRE_QWEN2}, {"stablelm2", ER_PRE_QWEN2}, {"hunyuan", ER_PRE_QWEN2},
    {"megrez", ER_PRE_QWEN2},
    {"deepseek-llm", ER_PRE_DEEPSEEK_LLM},
    {"deepseek-coder", ER_PRE_DEEPSEEK_CODER},
    {"falcon", ER_PRE_FALCON},
    {"starcoder", ER_PRE_STARCODER}, {"refact", ER_PRE_STARCODER}, {"command-r", ER_PRE_STARCODER},
    {"smollm", ER_PRE_STARCODER}, {"codeshell", ER_PRE_STARCODER}, {"exaone", ER_PRE_STARCODER},
    {"minerva-7b", ER_PRE_STARCODER},
    {"poro", ER_PRE_PORO}, {"poro-chat", ER_PRE_PORO}, {"bloom", ER_PRE_PORO},
    {"gpt3-finnish", ER_PRE_PORO},
    {"viking", ER_PRE_VIKING},
    {"qwen35", ER_PRE_QWEN35},
    {"gpt-4o", ER_PRE_GPT4O},
    {"none", ER_PRE_NONE},
};

int er_pre_from_name(const char *name, size_t len)
{
    if (!name && len)
        return -1;
    for (size_t i = 0; i < sizeof(pre_names) / sizeof(pre_names[0]); i++) {
        const char *n = pre_names[i].name;
        if (strlen(n) == len && (len == 0 || memcmp(n, name, len) == 0))
            return pre_names[i].pre;
    }
    return -1;
}

const char *er_pre_name(int pre)
{
    if (pre < 0 || pre >= ER_PRE_COUNT)
        return NULL;
    return pre_defs[pre].name;
}

/* ---- the splitting driver ------------------------------------------------- */

typedef struct {
    er_span *out;
    size_t cap, n;
} sink;

static void emit(sink *k, size_t a, size_t b)
{
    if (k->n < k->cap) {
        k->out[k->n].off = (uint32_t)a;
        k->out[k->n].len = (uint32_t)(b - a);
    }
    k->n++;
}

static size_t match_stage(const stage *st, const char *s, size_t p, size_t end)
{
    switch (st->kind) {
    case ST_GPT2:
        return match_gpt2(s, p, end);
    case ST_LLAMA3:
        return match_llama3(s, p, end, st->max, st->cls);
    case ST_O200K:
        return match_o200k(s, p, end);
    case ST_RUN: {
        size_t p1, q;
        unsigned n;
        uint32_t c0 = dec(s, p, end, &p1);
        /* The optional prefix is tried first; if the class run after it is
         * too short, the regex backtracks to match without it. */
        if ((st->prefix == PF_SPACE && c0 == ' ') ||
            (st->prefix == PF_WS && er_unicode_is_whitespace(c0))) {
            q = run_class(s, p1, end, st->cls, st->max, &n);
            if (n >= st->min)
                return q;
        }
        q = run_class(s, p, end, st->cls, st->max, &n);
        return n >= st->min ? q : 0;
    }
    default:
        return 0;
    }
}

/* Stage k of d splits s[a..b); its pieces go to stage k+1, the last stage's to the sink.
 * Recursion depth is bounded by MAX_STAGES. */
static void split_stage(const pre_def *d, unsigned k, const char *s, size_t a, size_t b, sink *o)
{
    if (k == d->nstages) {
        emit(o, a, b);
        return;
    }
    const stage *st = &d->st[k];
    if (st->kind == ST_TRAILING_SPACE) {
        /* \s+$ matches only the whitespace that ends the piece ($ is end of
         * text here: an earlier stage isolated every newline). */
        size_t p = a, run = b;
        while (p < b) {
            size_t q;
            if (er_unicode_is_whitespace(dec(s, p, b, &q))) {
                if (run == b)
                    run = p;
            } else {
                run = b;
            }
            p = q;
        }
        if (run > a)
            split_stage(d, k + 1, s, a, run, o);
        if (run < b)
            split_stage(d, k + 1, s, run, b, o);
        return;
    }
    size_t gap = a, p = a;
    while (p < b) {
        size_t m = match_stage(st, s, p, b);
        if (m) {
            if (gap < p)
                split_stage(d, k + 1, s, gap, p, o);
            split_stage(d, k + 1, s, p, m, o);
            p = gap = m;
        } else {
            p += er_utf8_char_len(s + p, b - p);
        }
    }
    if (gap < b)
        split_stage(d, k + 1, s, gap, b, o);
}

size_t er_pretokenize(int pre, const char *text, size_t len, er_span *out, size_t cap)
{
    if (len > UINT32_MAX)
        return SIZE_MAX; /* spans hold 32-bit offsets */
    if (len == 0)
        return 0;
    sink o = {out, out ? cap : 0, 0};
    if (pre <= ER_PRE_NONE || pre >= ER_PRE_COUNT) {
        emit(&o, 0, len);
        return o.n;
    }
    split_stage(&pre_defs[pre], 0, text, 0, len, &o);
    return o.n;
}
