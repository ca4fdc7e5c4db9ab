/*
 * cli_args.c — argument parsing for edgerun-cli.
 *
 * Hand-written rather than getopt_long: the subcommand comes first, options and
 * positionals may interleave, and "--opt=value" and "--opt value" must both
 * work the same on glibc, musl and bionic.
 */
#include "cli_args.h"
#include "cli_chat_format.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "edgerun-cli: error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see edgerun-cli --help)\n");
    return 2;
}

void cli_usage(FILE *out)
{
    fprintf(out,
        "usage: edgerun-cli run MODEL.gguf [PROMPT] [options]\n"
        "       edgerun-cli info MODEL.gguf [--ctx C] [--threads T]\n"
        "       edgerun-cli eval MODEL.gguf PROMPTS.txt [-n N] [--logits] [options]\n"
        "       edgerun-cli chat MODEL.gguf [--chat-format chatml|chatml-plain|llama3|gemma] [--system TEXT]\n"
        "            [options]\n"
        "       edgerun-cli --help | --version\n"
        "\n"
        "run: generates text from PROMPT (or from --ids) and streams it to stdout;\n"
        "     a statistics line (TTFT, prefill and decode tokens/s, arena bytes)\n"
        "     goes to stderr.\n"
        "info: prints hyper-parameters, tensor types and the arena plan.\n"
        "eval: one generation per line of PROMPTS.txt, each from an empty session;\n"
        "     prints JSON lines: a header (model, isa, threads), then per prompt the\n"
        "     text, ids, TTFT and decode time (--logits adds every step's logits).\n"
        "chat: one user turn per line of stdin, each reply streamed to stdout and a\n"
        "     statistics line per turn to stderr; /reset forgets the conversation,\n"
        "     /quit ends. Only the part of the conversation the cache does not hold\n"
        "     yet is prefilled. --chat-format (default: from the file's template),\n"
        "     --system TEXT, --date \"02 Dec 2026\" (llama3), --print-prompt (print\n"
        "     the rendered conversation of stdin's lines, user/assistant alternating).\n"
        "\n"
        "options:\n"
        "  -n, --n-predict N       tokens to generate (default 64)\n"
        "  --temp T                temperature; 0 = greedy (default 0)\n"
        "  --top-k K               keep the K most likely tokens (0 = off)\n"
        "  --top-p P               nucleus sampling mass (1 = off)\n"
        "  --min-p M               drop tokens below M * p(max) (0 = off)\n"
        "  --repeat-penalty R      penalise recent tokens (1 = off)\n"
        "  --repeat-last-n N       window for the penalty (0 = whole history)\n"
        "  --seed S                RNG seed (the same seed gives the same tokens)\n"
        "  -t, --threads T         worker threads (default: online CPUs, at most 8)\n"
        "  -c, --ctx C             context length (default: min(model, 2048))\n"
        "  -b, --batch B           prefill chunk (default 64)\n"
        "  --kv f32|f16            KV cache element type (default f32)\n"
        "  --ctx-strategy S        fail|slide|slide_prefill at a full context (default fail)\n"
        "  --keep N                tokens a slide keeps at the start (default 0)\n"
        "  --isa NAME              force a kernel table (generic, ...)\n"
        "  --ids \"1 2 3\"           prompt as token ids instead of text\n"
        "  --print-ids             print generated ids instead of text\n"
        "  --special               match special tokens written in PROMPT\n"
        "  --no-echo               do not print the prompt before the output\n"
        "  --ignore-eos            keep generating past end-of-text (benchmarks)\n"
        "  --timings FILE          write prefill, TTFT and each decode step's latency\n"
        "  --warmup N              first run the prompt and N decode steps untimed, then\n"
        "                          start over (benchmarks: steady-state timings)\n");
}

static int parse_long(const char *opt, const char *s, long lo, long hi, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "edgerun-cli: error: %s expects an integer in [%ld, %ld], got '%s'\n",
                opt, lo, hi, s);
        return 2;
    }
    *out = v;
    return 0;
}

static int parse_float(const char *opt, const char *s, double lo, double hi, float *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "edgerun-cli: error: %s expects a number in [%g, %g], got '%s'\n",
                opt, lo, hi, s);
        return 2;
    }
    *out = (float)v;
    return 0;
}

static int parse_u64(const char *opt, const char *s, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end != '\0' || s[0] == '-') {
        fprintf(stderr, "edgerun-cli: error: %s expects a non-negative integer, got '%s'\n", opt, s);
        return 2;
    }
    *out = (uint64_t)v;
    return 0;
}

/* Every online core, capped at 8: decode is memory-bound and more threads than
 * that only add barrier cost on the boards we target. */
static int default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    if (n > 8) n = 8;
    return (int)n;
}

/* Options that take a value; the flag-only ones are handled inline. */
static int takes_value(const char *name)
{
    static const char *const with_value[] = {
        "-n", "--n-predict", "--temp", "--top-k", "--top-p", "--min-p",
        "--repeat-penalty", "--repeat-last-n", "--seed", "-t", "--threads",
        "-c", "--ctx", "-b", "--batch", "--kv", "--isa", "--ids", "--timings", "--warmup",
        "--ctx-strategy", "--keep", "--chat-format", "--system", "--date", NULL};
    for (int i = 0; with_value[i]; i++)
        if (strcmp(name, with_value[i]) == 0) return 1;
    return 0;
}

static int apply(cli_args *a, const char *name, const char *val)
{
    long v = 0;
    int rc = 0;
    if (!strcmp(name, "-n") || !strcmp(name, "--n-predict")) {
        if (!(rc = parse_long(name, val, 0, INT32_MAX, &v))) a->n_predict = (int32_t)v;
    } else if (!strcmp(name, "--temp")) {
        rc = parse_float(name, val, 0.0, 100.0, &a->sampling.temperature);
    } else if (!strcmp(name, "--top-k")) {
        if (!(rc = parse_long(name, val, 0, INT32_MAX, &v))) a->sampling.top_k = (int32_t)v;
    } else if (!strcmp(name, "--top-p")) {
        rc = parse_float(name, val, 0.0, 1.0, &a->sampling.top_p);
    } else if (!strcmp(name, "--min-p")) {
        rc = parse_float(name, val, 0.0, 1.0, &a->sampling.min_p);
    } else if (!strcmp(name, "--repeat-penalty")) {
        rc = parse_float(name, val, 0.0, 100.0, &a->sampling.repeat_penalty);
    } else if (!strcmp(name, "--repeat-last-n")) {
        if (!(rc = parse_long(name, val, 0, INT32_MAX, &v))) a->sampling.repeat_last_n = (int32_t)v;
    } else if (!strcmp(name, "--seed")) {
        rc = parse_u64(name, val, &a->seed);
        a->have_seed = 1;
    } else if (!strcmp(name, "-t") || !strcmp(name, "--threads")) {
        if (!(rc = parse_long(name, val, 1, 1024, &v))) a->options.n_threads = (int32_t)v;
    } else if (!strcmp(name, "-c") || !strcmp(name, "--ctx")) {
        if (!(rc = parse_long(name, val, 0, INT32_MAX, &v))) a->options.n_ctx = (int32_t)v;
    } else if (!strcmp(name, "-b") || !strcmp(name, "--batch")) {
        if (!(rc = parse_long(name, val, 1, INT32_MAX, &v))) a->options.n_batch = (int32_t)v;
    } else if (!strcmp(name, "--kv")) {
        if (!strcmp(val, "f32")) a->options.kv_type = ER_KV_F32;
        else if (!strcmp(val, "f16")) a->options.kv_type = ER_KV_F16;
        else rc = usage_error("--kv expects f32 or f16, got '%s'", val);
    } else if (!strcmp(name, "--ctx-strategy")) {
        if (!strcmp(val, "fail")) a->options.ctx_strategy = ER_CTX_FAIL;
        else if (!strcmp(val, "slide")) a->options.ctx_strategy = ER_CTX_SLIDE;
        else if (!strcmp(val, "slide_prefill")) a->options.ctx_strategy = ER_CTX_SLIDE_PREFILL;
        else rc = usage_error("--ctx-strategy expects fail, slide or slide_prefill, got '%s'", val);
    } else if (!strcmp(name, "--keep")) {
        if (!(rc = parse_long(name, val, 0, INT32_MAX, &v))) a->options.ctx_keep = (int32_t)v;
    } else if (!strcmp(name, "--chat-format")) {
        a->chat_format = val;
    } else if (!strcmp(name, "--system")) {
        a->system = val;
    } else if (!strcmp(name, "--date")) {
        a->date = val;
    } else if (!strcmp(name, "--isa")) {
        a->options.isa = val;
    } else if (!strcmp(name, "--ids")) {
        a->ids_text = val;
    } else if (!strcmp(name, "--timings")) {
        a->timings_path = val;
    } else if (!strcmp(name, "--warmup")) {
        if (!(rc = parse_long(name, val, 0, INT32_MAX, &v))) a->warmup = (int32_t)v;
    } else {
        rc = usage_error("unknown option '%s'", name);
    }
    return rc;
}

int cli_parse(int argc, char **argv, cli_args *a)
{
    memset(a, 0, sizeof *a);
    a->n_predict = 64;
    a->echo = 1;
    er_sampling_default(&a->sampling);
    er_options_default(&a->options);
    a->options.n_threads = default_threads();

    int npos = 0;
    const char *pos[3] = {NULL, NULL, NULL};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) { a->command = CLI_HELP; return 0; }
        if (!strcmp(arg, "--version")) { a->command = CLI_VERSION; return 0; }
        if (!strcmp(arg, "--")) {
            for (i++; i < argc; i++) {
                if (npos >= 3) return usage_error("unexpected argument '%s'", argv[i]);
                pos[npos++] = argv[i];
            }
            break;
        }
        if (arg[0] == '-' && arg[1] != '\0') {
            if (!strcmp(arg, "--print-ids")) { a->print_ids = 1; continue; }
            if (!strcmp(arg, "--special")) { a->parse_special = 1; continue; }
            if (!strcmp(arg, "--no-echo")) { a->echo = 0; continue; }
            if (!strcmp(arg, "--logits")) { a->dump_logits = 1; continue; }
            if (!strcmp(arg, "--ignore-eos")) { a->ignore_eos = 1; continue; }
            if (!strcmp(arg, "--print-prompt")) { a->print_prompt = 1; continue; }
            char name[64];
            const char *eq = strchr(arg, '=');
            const char *val;
            if (eq && arg[1] == '-') {
                size_t len = (size_t)(eq - arg);
                if (len >= sizeof name) return usage_error("unknown option '%s'", arg);
                memcpy(name, arg, len);
                name[len] = '\0';
                val = eq + 1;
            } else {
                size_t len = strlen(arg);
                if (len >= sizeof name) return usage_error("unknown option '%s'", arg);
                memcpy(name, arg, len + 1);
                if (!takes_value(name)) return usage_error("unknown option '%s'", arg);
                if (i + 1 >= argc) return usage_error("option '%s' needs a value", arg);
                val = argv[++i];
            }
            if (!takes_value(name)) return usage_error("unknown option '%s'", name);
            int rc = apply(a, name, val);
            if (rc) return rc;
            continue;
        }
        if (npos >= 3) return usage_error("unexpected argument '%s'", arg);
        pos[npos++] = arg;
    }

    if (npos == 0) { a->command = CLI_HELP; return 0; }
    if (!strcmp(pos[0], "run")) a->command = CLI_RUN;
    else if (!strcmp(pos[0], "info")) a->command = CLI_INFO;
    else if (!strcmp(pos[0], "eval")) a->command = CLI_EVAL;
    else if (!strcmp(pos[0], "chat")) a->command = CLI_CHAT;
    else return usage_error("unknown command '%s' (expected run, info, eval or chat)", pos[0]);

    if (a->command != CLI_CHAT && (a->chat_format || a->system || a->date || a->print_prompt))
        return usage_error("%s: --chat-format, --system, --date and --print-prompt are options of chat", pos[0]);
    if (a->command == CLI_CHAT && a->chat_format && chat_format_parse(a->chat_format) == CHAT_UNKNOWN)
        return usage_error("--chat-format expects chatml, chatml-plain, llama3 or gemma, got '%s'", a->chat_format);
    /* --print-prompt with a named format renders without a model file. */
    if (a->command == CLI_CHAT && npos < 2 && a->print_prompt && a->chat_format) return 0;
    if (npos < 2) return usage_error("%s needs a MODEL.gguf path", pos[0]);
    a->model = pos[1];
    if (a->command == CLI_RUN) {
        a->prompt = npos > 2 ? pos[2] : NULL;
        if (!a->prompt && !a->ids_text)
            return usage_error("%s needs a PROMPT or --ids", "run");
    } else if (a->command == CLI_EVAL) {
        if (npos < 3) return usage_error("%s needs a PROMPTS.txt file (one prompt per line)", "eval");
        a->prompts_path = pos[2];
    } else if (npos > 2) {
        return usage_error("unexpected argument '%s'", pos[2]);
    }
    if (a->dump_logits && a->command != CLI_EVAL) return usage_error("%s is an option of eval", "--logits");
    return 0;
}

size_t cli_count_ids(const char *text)
{
    size_t n = 0;
    int in_num = 0;
    for (const char *p = text; *p; p++) {
        int sep = isspace((unsigned char)*p) || *p == ',';
        if (!sep && !in_num) n++;
        in_num = !sep;
    }
    return n;
}

long cli_parse_ids(const char *text, int32_t *ids, size_t cap)
{
    size_t n = 0;
    const char *p = text;
    for (;;) {
        while (*p && (isspace((unsigned char)*p) || *p == ',')) p++;
        if (!*p) break;
        char *end = NULL;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v > INT32_MAX ||
            (*end && !isspace((unsigned char)*end) && *end != ',')) {
            fprintf(stderr, "edgerun-cli: error: --ids expects non-negative integers separated by "
                            "spaces or commas, got '%s'\n", text);
            return -1;
        }
        if (n >= cap) {
            fprintf(stderr, "edgerun-cli: error: too many ids in --ids\n");
            return -1;
        }
        ids[n++] = (int32_t)v;
        p = end;
    }
    if (n == 0) {
        fprintf(stderr, "edgerun-cli: error: --ids is empty\n");
        return -1;
    }
    return (long)n;
}
