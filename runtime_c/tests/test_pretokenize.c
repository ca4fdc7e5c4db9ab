/*
 * test_pretokenize.c — UTF-8 decoding, character classes and the pre-tokenizers.
 *
 * The expected pieces were produced by Hugging Face `tokenizers` (the regexes
 * each name stands for, applied with Split(behavior="isolated")); the
 * exhaustive comparison against HF lives in tests/test_pretokenize.py. These
 * cases keep a C-only build (cross-compiled, under qemu) honest.
 */
#include <stdlib.h>

#include "test_util.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/unicode.h"

static void test_decode(void)
{
    size_t adv;
    CHECK_EQ_U64(er_utf8_decode("A", 1, &adv), 'A');
    CHECK_EQ_U64(adv, 1);
    CHECK_EQ_U64(er_utf8_decode("\xC3\xA9", 2, &adv), 0xE9);
    CHECK_EQ_U64(adv, 2);
    CHECK_EQ_U64(er_utf8_decode("\xE4\xB8\x80", 3, &adv), 0x4E00);
    CHECK_EQ_U64(adv, 3);
    CHECK_EQ_U64(er_utf8_decode("\xF0\x9F\x98\x80", 4, &adv), 0x1F600);
    CHECK_EQ_U64(adv, 4);
    CHECK_EQ_U64(er_utf8_decode("\xF4\x8F\xBF\xBF", 4, &adv), 0x10FFFF);

    /* each invalid form: sentinel, one byte consumed */
    static const char *const bad[] = {
        "\x80",             /* lone continuation */
        "\xC0\xAF",         /* overlong '/' */
        "\xC1\xBF",         /* overlong */
        "\xE0\x80\xAF",     /* overlong, 3 bytes */
        "\xF0\x80\x80\xAF", /* overlong, 4 bytes */
        "\xED\xA0\x80",     /* UTF-16 surrogate D800 */
        "\xED\xBF\xBF",     /* surrogate DFFF */
        "\xF4\x90\x80\x80", /* 0x110000 */
        "\xF5\x80\x80\x80", /* F5 never starts a sequence */
        "\xFF",
        "\xE2\x82",         /* truncated (len 2 given below) */
        "\xE2\x28\xA1",     /* bad continuation */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t n = strlen(bad[i]);
        uint32_t cp = er_utf8_decode(bad[i], n, &adv);
        CHECK(cp == ER_UTF8_INVALID && adv == 1, "bad[%zu]: cp %x adv %zu", i, (unsigned)cp, adv);
    }
    /* a valid sequence cut short by len is invalid too */
    CHECK_EQ_U64(er_utf8_decode("\xE4\xB8\x80", 2, &adv), ER_UTF8_INVALID);
    CHECK_EQ_U64(adv, 1);
    CHECK_EQ_U64(er_utf8_decode("", 0, &adv), ER_UTF8_INVALID);
    CHECK_EQ_U64(adv, 0);
    CHECK_EQ_U64(er_utf8_char_len("\xF0\x9F\x98\x80", 4), 4);

    /* encode/decode round trip over every code point */
    int bad_rt = 0;
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        char buf[4];
        size_t n = er_utf8_encode(cp, buf);
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            bad_rt += n != 0;
            continue;
        }
        if (n == 0 || er_utf8_decode(buf, n, &adv) != cp || adv != n)
            bad_rt++;
    }
    CHECK(bad_rt == 0, "%d code points fail the round trip", bad_rt);
    char buf[4];
    CHECK_EQ_U64(er_utf8_encode(0x110000, buf), 0);
}

static void test_classes(void)
{
    CHECK_EQ_I64(er_unicode_category('A'), ER_UC_LU);
    CHECK_EQ_I64(er_unicode_category('z'), ER_UC_LL);
    CHECK_EQ_I64(er_unicode_category('7'), ER_UC_ND);
    CHECK_EQ_I64(er_unicode_category(' '), ER_UC_ZS);
    CHECK_EQ_I64(er_unicode_category('\n'), ER_UC_CC);
    CHECK_EQ_I64(er_unicode_category('$'), ER_UC_SC);
    CHECK_EQ_I64(er_unicode_category(0x00B2), ER_UC_NO);    /* superscript two */
    CHECK_EQ_I64(er_unicode_category(0x01C5), ER_UC_LT);    /* Dž */
    CHECK_EQ_I64(er_unicode_category(0x0301), ER_UC_MN);
    CHECK_EQ_I64(er_unicode_category(0x0378), ER_UC_CN);    /* unassigned */
    CHECK_EQ_I64(er_unicode_category(0x2029), ER_UC_ZP);
    CHECK_EQ_I64(er_unicode_category(0x4E00), ER_UC_LO);
    CHECK_EQ_I64(er_unicode_category(0x2167), ER_UC_NL);    /* Roman numeral eight */
    CHECK_EQ_I64(er_unicode_category(0xE000), ER_UC_CO);
    CHECK_EQ_I64(er_unicode_category(0x1F600), ER_UC_SO);
    CHECK_EQ_I64(er_unicode_category(0x10FFFF), ER_UC_CN);
    CHECK_EQ_I64(er_unicode_category(ER_UTF8_INVALID), ER_UC_CN);
    CHECK_EQ_I64(er_unicode_category(0xFFFFFFFFu), ER_UC_CN);
    CHECK(er_ucat_is_letter(er_unicode_category(0x00E9)), "é is a letter");
    CHECK(er_ucat_is_number(er_unicode_category(0x0663)), "Arabic-Indic three is a number");
    CHECK(er_ucat_is_punct(er_unicode_category(0x3002)), "ideographic full stop is punctuation");
    CHECK(er_unicode_version()[0] >= '1' && er_unicode_version()[0] <= '9', "version '%s'",
          er_unicode_version());

    static const uint32_t ws[] = {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680,
                                  0x2000, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
    for (size_t i = 0; i < sizeof(ws) / sizeof(ws[0]); i++)
        CHECK(er_unicode_is_whitespace(ws[i]), "U+%04X is \\s", (unsigned)ws[i]);
    /* Python's isspace() takes 1C..1F; HF's \s does not. 180E stopped being a space in Unicode 6.3. */
    static const uint32_t not_ws[] = {0x00, 0x08, 0x0E, 0x1C, 0x1F, 'a', 0x200B, 0x180E, 0xFEFF,
                                      0x3001, ER_UTF8_INVALID};
    for (size_t i = 0; i < sizeof(not_ws) / sizeof(not_ws[0]); i++)
        CHECK(!er_unicode_is_whitespace(not_ws[i]), "U+%04X is not \\s", (unsigned)not_ws[i]);
}

/* Splits text with pre-tokenizer `name` and compares to the NULL-terminated pieces. */
static void expect(const char *name, const char *text, const char *const *pieces)
{
    int pre = er_pre_from_name(name, strlen(name));
    CHECK(pre > 0, "unknown pre-tokenizer '%s'", name);
    er_span spans[64];
    size_t len = strlen(text);
    size_t n = er_pretokenize(pre, text, len, spans, 64);
    size_t want = 0;
    while (pieces[want])
        want++;
    CHECK(n == want, "%s: '%s' gives %zu pieces, expected %zu", name, text, n, want);
    for (size_t i = 0; i < n && i < want && i < 64; i++) {
        int ok = spans[i].len == strlen(pieces[i]) &&
                 memcmp(text + spans[i].off, pieces[i], spans[i].len) == 0;
        CHECK(ok, "%s: '%s' piece %zu is '%.*s', expected '%s'", name, text, i, (int)spans[i].len,
              text + spans[i].off, pieces[i]);
    }
}

#define P(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_splitters(void)
{
    expect("gpt-2", "Hello world's  end\n\n x",
           P("Hello", " world", "'s", " ", " end", "\n\n", " x"));
    expect("gpt-2", "I'M 123456 ok?!", P("I", "'", "M", " 123456", " ok", "?!"));
    expect("gpt-2", "\tx  y", P("\t", "x", " ", " y"));
    expect("llama-bpe", "Hello world's  end\n\n x",
           P("Hello", " world", "'s", " ", " end", "\n\n", " x"));
    expect("llama-bpe", "I'M 123456 ok?!", P("I", "'M", " ", "123", "456", " ok", "?!"));
    /* U+017F LONG S folds to 's' under (?i) */
    expect("llama-bpe", "it'\xC5\xBFs (word) \r\n\r\n  z",
           P("it", "'\xC5\xBF", "s", " (", "word", ")", " \r\n\r\n", " ", " z"));
    expect("qwen2", "I'M 12345 ok?!", P("I", "'M", " ", "1", "2", "3", "4", "5", " ok", "?!"));
    expect("qwen2", "a\xC2\xA0" "b  \n c", P("a", "\xC2\xA0" "b", "  \n", " c"));
    expect("deepseek-llm", "Hello, \xE4\xB8\x96\xE7\x95\x8C! 123\n  tail  ",
           P("Hello", ",", " ", "\xE4\xB8\x96\xE7\x95\x8C", "!", " ", "123", "\n", " ", " tail", "  "));
    expect("deepseek-coder", "def f(x):\n  return 42 # \xE4\xB8\xAD\xE6\x96\x87",
           P("def", " f", "(", "x", "):", "\n", " ", " return", " ", "4", "2", " #", " ",
             "\xE4\xB8\xAD\xE6\x96\x87"));
    expect("falcon", "x+=1234567; y<>z", P("x", "+=", "123", "456", "7", ";", " y", "<>", "z"));
    expect("falcon", "Hello world's", P("Hello", " world", "'", "s"));
    /* llama.cpp's default: punctuation runs (no backtick) first, so no
     * contraction survives; numbers leave their space; digits in threes */
    expect("default", "x+=1234567; y<>z don't `a` 3.14 \xC2\xBD",
           P("x", "+=", "123", "456", "7", ";", " y", "<>", "z", " don", "'", "t", " `", "a", "`", " ", "3", ".",
             "14", " ", "\xC2\xBD"));
    expect("starcoder", "abc 1234 x's", P("abc", " ", "1", "2", "3", "4", " x", "'s"));
    expect("refact", "v2.0", P("v", "2", ".", "0"));
    expect("poro-chat", "Hei maailma! Mit\xC3\xA4 (kuuluu)? 12",
           P("Hei", " maailma", "!", " Mit\xC3\xA4", " (", "kuuluu", ")?", " 12"));
    expect("bloom", "a|b", P("a", "|", "b"));
    expect("viking", "Hei maailma! 123", P("Hei", " maailma", "!", " ", "1", "2", "3"));

    /* invalid bytes are characters of their own, neither letter nor space */
    expect("gpt-2", "a\xFF" "b \x80\x80", P("a", "\xFF", "b", " \x80\x80"));
    expect("llama-bpe", "\xFF" "abc", P("\xFF" "abc"));
    expect("qwen2", "x\xE2\x82", P("x", "\xE2\x82"));
}

static void test_api(void)
{
    /* llama.cpp's default set, not GPT-2's regex (that is "gpt-2") */
    CHECK_EQ_I64(er_pre_from_name("default", 7), ER_PRE_DEFAULT);
    CHECK_EQ_I64(er_pre_from_name("", 0), ER_PRE_DEFAULT);
    CHECK_EQ_I64(er_pre_from_name(NULL, 0), ER_PRE_DEFAULT);
    CHECK_EQ_I64(er_pre_from_name("gpt-2", 5), ER_PRE_GPT2);
    CHECK_EQ_I64(er_pre_from_name(NULL, 3), -1);
    CHECK_EQ_I64(er_pre_from_name("llama3x", 6), ER_PRE_LLAMA3);
    CHECK_EQ_I64(er_pre_from_name("llama", 5), -1);
    CHECK_EQ_I64(er_pre_from_name("command-r", 9), ER_PRE_STARCODER);
    CHECK_EQ_I64(er_pre_from_name("stablelm2", 9), ER_PRE_QWEN2);
    for (int i = 0; i < ER_PRE_COUNT; i++) {
        const char *n = er_pre_name(i);
        CHECK(n && er_pre_from_name(n, strlen(n)) == i, "canonical name of %d round-trips", i);
    }
    CHECK(er_pre_name(-1) == NULL && er_pre_name(ER_PRE_COUNT) == NULL, "out-of-range names");

    const char *t = "one two three";
    er_span sp[8];
    CHECK_EQ_U64(er_pretokenize(ER_PRE_GPT2, t, strlen(t), NULL, 0), 3);
    memset(sp, 0xAB, sizeof sp);
    CHECK_EQ_U64(er_pretokenize(ER_PRE_GPT2, t, strlen(t), sp, 1), 3);
    CHECK(sp[0].off == 0 && sp[0].len == 3, "first span written");
    CHECK(sp[1].off == 0xABABABABu, "nothing written past cap");
    CHECK_EQ_U64(er_pretokenize(ER_PRE_NONE, t, strlen(t), sp, 8), 1);
    CHECK(sp[0].off == 0 && sp[0].len == strlen(t), "none: one span");
    CHECK_EQ_U64(er_pretokenize(ER_PRE_LLAMA3, t, 0, sp, 8), 0);
    CHECK_EQ_U64(er_pretokenize(ER_PRE_COUNT + 3, t, strlen(t), sp, 8), 1);

    /* megabyte runs: bounded stack, linear time, spans cover everything */
    size_t big = 1u << 20;
    char *s = malloc(big);
    er_span *out = malloc(big * sizeof *out);
    CHECK(s && out, "test buffers");
    if (!s || !out) {
        free(s);
        free(out);
        return;
    }
    for (int pre = 0; pre < ER_PRE_COUNT; pre++) {
        for (int pat = 0; pat < 3; pat++) {
            for (size_t i = 0; i < big; i++)
                s[i] = pat == 0 ? ' ' : pat == 1 ? (char)('0' + i % 10) : "a \n'\xC3\xA9,1"[i % 8];
            size_t n = er_pretokenize(pre, s, big, out, big);
            CHECK(n >= 1 && n <= er_pretokenize_max_spans(big), "pre %d pattern %d: %zu spans", pre, pat, n);
            size_t pos = 0;
            int ok = 1;
            for (size_t i = 0; i < n && i < big; i++) {
                ok &= out[i].off == pos && out[i].len > 0;
                pos += out[i].len;
            }
            CHECK(ok && pos == big, "pre %d pattern %d: spans tile the text", pre, pat);
        }
    }
    free(s);
    free(out);
}

int main(void)
{
    test_decode();
    test_classes();
    test_splitters();
    test_api();
    return test_summary();
}
