/* pretok.c: pre-tokenizers: the regular expressions that split text into the words byte-level BPE
 * merges within, by the name GGUF's tokenizer.ggml.pre gives, or from tokenizer.json; matched
 * with PCRE2 (UTF-8, Unicode properties for \p{L}, \p{N}, ..., JIT where available).
 *
 * Expressions apply in order, each splitting the pieces the one before made: a match is a piece,
 * and so is the text between two matches (or before the first, after the last); an empty match
 * only splits. The expressions are the models' own (tokenizer.json), in PCRE2's syntax (llama.cpp
 * rewrites several for std::regex; PCRE2 takes the originals). One change: \s is written out as
 * Unicode's White_Space characters, the set Hugging Face's regex engine and llama.cpp match (PCRE2's
 * own \s also takes U+180E, a format character since Unicode 6.3); \S outside a class likewise.
 * Subjects may hold any bytes: PCRE2_MATCH_INVALID_UTF makes invalid UTF-8
 * unmatchable rather than an error, so such bytes end up in pieces of their own. */
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tok.h"

/* ---- The expressions -------------------------------------------------------------------- */

#define CONTRACTIONS "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
/* GPT-2's, as llama.cpp has it (without the final \s+: what it leaves is a piece anyway). */
#define RX_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RX_LLAMA3                                                                                      \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_QWEN2                                                                                       \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_QWEN35                                                                                      \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"  \
                 "\\s+(?!\\S)|\\s+"
#define UPPER "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define LOWER "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
#define RX_TEKKEN                                                                                      \
    "[^\\r\\n\\p{L}\\p{N}]?" UPPER "*" LOWER "+|[^\\r\\n\\p{L}\\p{N}]?" UPPER "+" LOWER                      \
    "*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_GPT4O                                                                                       \
    "[^\\r\\n\\p{L}\\p{N}]?" UPPER "*" LOWER "+" CONTRACTIONS "?|[^\\r\\n\\p{L}\\p{N}]?" UPPER "+" LOWER        \
    "*" CONTRACTIONS "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_PORO " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+"
#define RX_CJK "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"
/* DeepSeek LLM's letters (its tokenizer.json's class). */
#define RX_DEEPSEEK_LETTERS                                                                            \
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}"         \
    "\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}"      \
    "\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}"             \
    "\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}"           \
    "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}"           \
    "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}"   \
    "\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}"  \
    "\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}"            \
    "\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}"           \
    "\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}"            \
    "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}"           \
    "\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}"          \
    "\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}"       \
    "\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}" \
    "\\x{1E900}-\\x{1E943}]+"
#define RX_DEEPSEEK3_MAIN                                                                              \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "          \
    "?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

#define MAX_RX 6

typedef struct pre_kind {
    const char *rx[MAX_RX];
    bool ignore_merges, add_bos;
} pre_kind;

static const pre_kind K_DEFAULT = {{"[\\p{P}\\$\\+<=>\\^~\\|]+", RX_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, false, false};
static const pre_kind K_LLAMA3 = {{RX_LLAMA3}, true, true};
static const pre_kind K_LLAMA3_PLAIN = {{RX_LLAMA3}, false, false};
static const pre_kind K_QWEN2 = {{RX_QWEN2}, false, false};
static const pre_kind K_QWEN35 = {{RX_QWEN35}, false, false};
static const pre_kind K_DEEPSEEK_LLM = {
    {"[\\r\\n]", RX_DEEPSEEK_LETTERS,
     "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+", "\\s+$", RX_CJK,
     "\\p{N}+"},
    false,
    false};
static const pre_kind K_DEEPSEEK_CODER = {{"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RX_CJK, "\\p{N}"}, false, false};
static const pre_kind K_DEEPSEEK3 = {
    {"\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+", RX_DEEPSEEK3_MAIN}, false, false};
static const pre_kind K_FALCON = {{"[\\p{P}\\$\\+<=>\\^~\\|`]+", RX_GPT2, "[0-9][0-9][0-9]"}, false, false};
static const pre_kind K_STARCODER = {{"\\p{N}", RX_GPT2}, false, false};
static const pre_kind K_GPT2 = {{RX_GPT2}, false, false};
static const pre_kind K_PORO = {{RX_PORO}, false, false};
static const pre_kind K_VIKING = {{RX_PORO, "\\p{N}"}, false, false};
static const pre_kind K_TEKKEN = {{RX_TEKKEN}, true, true};
static const pre_kind K_CHAMELEON = {{"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )",
                                      "\\p{N}", "[\\p{P}!-/:-@\\[-`{-~]", RX_GPT2},
                                     false,
                                     true};
static const pre_kind K_GPT4O = {{RX_GPT4O}, false, false};
static const pre_kind K_SEED_CODER = {
    {CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    false,
    false};
static const pre_kind K_BAILING = {
    {"'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"},
    false,
    false};
static const pre_kind K_SUPERBPE = {{"\\p{N}+", "(?=(\\d{3})+(?!\\d))"}, false, false};
static const pre_kind K_TINY_AYA = {{"\\d{1,3}(?=(?:\\d{3})*\\b)", RX_GPT4O}, false, false};

static const struct {
    const char *name;
    const pre_kind *kind;
} NAMES[] = {
    {"default", &K_DEFAULT},
    {"llama3", &K_LLAMA3},          {"llama-v3", &K_LLAMA3},       {"llama-bpe", &K_LLAMA3},
    {"falcon3", &K_LLAMA3},         {"falcon-h1", &K_LLAMA3},      {"pixtral", &K_LLAMA3},
    {"midm-2.0", &K_LLAMA3},        {"lfm2", &K_LLAMA3},           {"dbrx", &K_LLAMA3_PLAIN},
    {"smaug-bpe", &K_LLAMA3_PLAIN}, {"chatglm-bpe", &K_LLAMA3_PLAIN}, {"glm4", &K_LLAMA3_PLAIN},
    {"qwen2", &K_QWEN2},            {"deepseek-r1-qwen", &K_QWEN2}, {"stablelm2", &K_QWEN2},
    {"hunyuan", &K_QWEN2},          {"megrez", &K_QWEN2},          {"grok-2", &K_QWEN2},
    {"qwen35", &K_QWEN35},          {"deepseek-llm", &K_DEEPSEEK_LLM}, {"deepseek-coder", &K_DEEPSEEK_CODER},
    {"deepseek-v3", &K_DEEPSEEK3},  {"falcon", &K_FALCON},         {"starcoder", &K_STARCODER},
    {"refact", &K_STARCODER},       {"command-r", &K_STARCODER},   {"smollm", &K_STARCODER},
    {"codeshell", &K_STARCODER},    {"exaone", &K_STARCODER},      {"minerva-7b", &K_STARCODER},
    {"gpt-2", &K_GPT2},             {"phi-2", &K_GPT2},            {"jina-es", &K_GPT2},
    {"jina-de", &K_GPT2},           {"jina-v2-es", &K_GPT2},       {"jina-v2-de", &K_GPT2},
    {"jina-v1-en", &K_GPT2},        {"jina-v2-code", &K_GPT2},     {"roberta-bpe", &K_GPT2},
    {"gigachat", &K_GPT2},          {"mpt", &K_GPT2},              {"olmo", &K_GPT2},
    {"jais", &K_GPT2},              {"trillion", &K_GPT2},         {"granite-docling", &K_GPT2},
    {"exaone4", &K_GPT2},           {"mellum", &K_GPT2},           {"modern-bert", &K_GPT2},
    {"poro-chat", &K_PORO},         {"bloom", &K_PORO},            {"gpt3-finnish", &K_PORO},
    {"viking", &K_VIKING},          {"tekken", &K_TEKKEN},         {"chameleon", &K_CHAMELEON},
    {"gpt-4o", &K_GPT4O},           {"llama4", &K_GPT4O},          {"minimax-m2", &K_GPT4O},
    {"seed-coder", &K_SEED_CODER},  {"bailingmoe", &K_BAILING},    {"bailingmoe2", &K_BAILING},
    {"superbpe", &K_SUPERBPE},      {"tiny_aya", &K_TINY_AYA},
};

static const pre_kind *find_kind(const char *name)
{
    for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++)
        if (!strcmp(NAMES[i].name, name))
            return NAMES[i].kind;
    return NULL;
}

bool nu_llm__pretok_info(const char *name, bool *ignore_merges, bool *add_bos)
{
    const pre_kind *k = find_kind(name);
    if (ignore_merges)
        *ignore_merges = k && k->ignore_merges;
    if (add_bos)
        *add_bos = k && k->add_bos;
    return k != NULL;
}

/* ---- Compiling -------------------------------------------------------------------------- */

struct nu_llm__pretok {
    pcre2_general_context *gc;
    pcre2_code *code[MAX_RX * 2]; /* tokenizer.json may give more than a name does */
    size_t count;
};

/* PCRE2's memory goes through the component's allocator, so that tests can fail it. */
static void *gc_malloc(size_t size, void *data)
{
    (void)data;
    return nu_llm__malloc(size);
}

static void gc_free(void *p, void *data)
{
    (void)data;
    nu_llm__free(p);
}

/* Unicode's White_Space characters, as a class's contents. */
#define WHITE_SPACE "\\t\\n\\x0B\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

/* `rx` with \s (and \S outside a class) written out as White_Space (see the top), into a new
 * string (nu_llm__free it). */
static char *spell_spaces(const char *rx)
{
    static const char in[] = WHITE_SPACE, out_pos[] = "[" WHITE_SPACE "]", out_neg[] = "[^" WHITE_SPACE "]";
    size_t n = strlen(rx), extra = 0;
    for (size_t i = 0; i + 1 < n; i++)
        if (rx[i] == '\\') {
            extra += rx[i + 1] == 's' || rx[i + 1] == 'S' ? sizeof out_neg : 0;
            i++;
        }
    char *out = nu_llm__malloc(n + extra + 1);
    if (!out)
        return NULL;
    size_t w = 0;
    bool in_class = false;
    for (size_t i = 0; i < n; i++) {
        char c = rx[i];
        if (c == '\\' && i + 1 < n) {
            char e = rx[i + 1];
            const char *put = e == 's' ? (in_class ? in : out_pos) : e == 'S' && !in_class ? out_neg : NULL;
            if (put) {
                memcpy(out + w, put, strlen(put));
                w += strlen(put);
            } else {
                out[w++] = c;
                out[w++] = e;
            }
            i++;
            continue;
        }
        if (!in_class && c == '[') {
            in_class = true;
            out[w++] = c;
            /* A ']' right after '[' or '[^' is a literal. */
            if (i + 1 < n && rx[i + 1] == '^')
                out[w++] = rx[++i];
            if (i + 1 < n && rx[i + 1] == ']')
                out[w++] = rx[++i];
            continue;
        }
        if (in_class && c == '[' && i + 1 < n && rx[i + 1] == ':') { /* [:alpha:] inside a class */
            const char *end = strstr(rx + i + 2, ":]");
            size_t k = end ? (size_t)(end - (rx + i)) + 2 : 1;
            memcpy(out + w, rx + i, k);
            w += k;
            i += k - 1;
            continue;
        }
        if (in_class && c == ']')
            in_class = false;
        out[w++] = c;
    }
    out[w] = 0;
    return out;
}

void nu_llm__pretok_free(nu_llm__pretok *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->count; i++)
        pcre2_code_free(p->code[i]);
    pcre2_general_context_free(p->gc);
    nu_llm__free(p);
}

nu_status nu_llm__pretok_new(const char *const *regex, size_t count, nu_llm__pretok **out)
{
    *out = NULL;
    if (count == 0 || count > MAX_RX * 2)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, "tokenizer: a pre-tokenizer of %zu expressions (1 .. %d supported)",
                            count, MAX_RX * 2);
    nu_llm__pretok *p = nu_llm__calloc(1, sizeof *p);
    pcre2_compile_context *cc = NULL;
    if (!p || !(p->gc = pcre2_general_context_create(gc_malloc, gc_free, NULL)) ||
        !(cc = pcre2_compile_context_create(p->gc))) {
        nu_llm__pretok_free(p);
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "tokenizer: out of host memory for the pre-tokenizer");
    }
    uint32_t jit = 0;
    pcre2_config(PCRE2_CONFIG_JIT, &jit);
    nu_status st = NU_OK;
    for (size_t i = 0; i < count && st == NU_OK; i++) {
        char *rx = spell_spaces(regex[i]);
        if (!rx) {
            st = nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "tokenizer: out of host memory for the pre-tokenizer");
            break;
        }
        int err;
        PCRE2_SIZE at;
        p->code[i] = pcre2_compile((PCRE2_SPTR)rx, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY, &err, &at, cc);
        nu_llm__free(rx);
        if (!p->code[i]) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(err, msg, sizeof msg);
            st = nu_llm__fail(err == PCRE2_ERROR_HEAP_FAILED ? NU_ERROR_HOST_OUT_OF_MEMORY : NU_ERROR_UNSUPPORTED,
                              "tokenizer: the pre-tokenizer's expression %zu \"%.80s\": %s at offset %zu", i, regex[i],
                              (const char *)msg, (size_t)at);
            break;
        }
        p->count++;
        /* Without the JIT (none on this CPU, or no memory for it) the interpreter matches alike. */
        if (jit)
            pcre2_jit_compile(p->code[i], PCRE2_JIT_COMPLETE);
    }
    pcre2_compile_context_free(cc);
    if (st != NU_OK) {
        nu_llm__pretok_free(p);
        return st;
    }
    *out = p;
    return NU_OK;
}

nu_status nu_llm__pretok_named(const char *name, nu_llm__pretok **out)
{
    *out = NULL;
    const pre_kind *k = find_kind(name);
    if (!k)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, "tokenizer: pre-tokenizer \"%.64s\" is not supported", name);
    size_t count = 0;
    while (count < MAX_RX && k->rx[count])
        count++;
    return nu_llm__pretok_new(k->rx, count, out);
}

/* ---- Splitting -------------------------------------------------------------------------- */

/* One nu_llm_tokenize call's matching state. */
typedef struct match_state {
    pcre2_match_data *md;
    pcre2_match_context *mc;
    pcre2_jit_stack *stack;
} match_state;

void nu_llm__pretok_work_free(void *match)
{
    match_state *m = match;
    if (!m)
        return;
    pcre2_match_data_free(m->md);
    pcre2_match_context_free(m->mc);
    pcre2_jit_stack_free(m->stack);
    nu_llm__free(m);
}

/* The JIT's stack: enough for the backtracking these expressions do on long runs. */
#define JIT_STACK_MIN (32 << 10)
#define JIT_STACK_MAX (8 << 20)

static nu_status match_state_get(const nu_llm__pretok *p, nu_llm__work *w, match_state **out)
{
    if (!w->match) {
        match_state *m = nu_llm__calloc(1, sizeof *m);
        if (m && (m->md = pcre2_match_data_create(1, p->gc)) && (m->mc = pcre2_match_context_create(p->gc)) &&
            (m->stack = pcre2_jit_stack_create(JIT_STACK_MIN, JIT_STACK_MAX, p->gc)))
            pcre2_jit_stack_assign(m->mc, NULL, m->stack);
        if (!m || !m->stack) {
            nu_llm__pretok_work_free(m);
            return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "nu_llm_tokenize: out of host memory for the pre-tokenizer");
        }
        w->match = m;
    }
    *out = w->match;
    return NU_OK;
}

typedef struct splitter {
    const nu_llm__pretok *p;
    match_state *m;
    nu_status (*word)(void *user, const char *s, size_t n);
    void *user;
} splitter;

/* The piece s[0 .. n) split by expression `level` and the ones after it. */
static nu_status split(const splitter *sp, size_t level, const char *s, size_t n)
{
    if (n == 0)
        return NU_OK;
    if (level == sp->p->count)
        return sp->word(sp->user, s, n);
    const pcre2_code *code = sp->p->code[level];
    size_t pos = 0, prev = 0;
    uint32_t options = 0;
    nu_status st = NU_OK;
    while (pos <= n && st == NU_OK) {
        int rc = pcre2_match(code, (PCRE2_SPTR)s, n, pos, options, sp->m->md, sp->m->mc);
        if (rc == PCRE2_ERROR_NOMATCH) {
            if (!options || pos >= n)
                break;
            /* No non-empty match where an empty one was: move one character on. */
            size_t c = nu_llm__utf8_char((const uint8_t *)s + pos, n - pos);
            pos += c ? c : 1;
            options = 0;
            continue;
        }
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            bool memory = rc == PCRE2_ERROR_NOMEMORY || rc == PCRE2_ERROR_HEAPLIMIT;
            return nu_llm__fail(memory ? NU_ERROR_HOST_OUT_OF_MEMORY : NU_ERROR_UNSUPPORTED,
                                "nu_llm_tokenize: the pre-tokenizer gave up on a piece of %zu bytes: %s (out of "
                                "memory, or PCRE2's match limits)", n, (const char *)msg);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(sp->m->md);
        size_t start = ov[0], end = ov[1];
        if (start > prev)
            st = split(sp, level + 1, s + prev, start - prev);
        if (st == NU_OK && end > start)
            st = split(sp, level + 1, s + start, end - start);
        prev = end > prev ? end : prev;
        pos = end;
        /* After an empty match, the next one must not be empty at the same place. */
        options = end == start ? PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED : 0;
    }
    if (st == NU_OK && prev < n)
        st = split(sp, level + 1, s + prev, n - prev);
    return st;
}

nu_status nu_llm__pretok_split(const nu_llm__pretok *p, const char *text, size_t len, nu_llm__work *w,
                               nu_status (*word)(void *user, const char *s, size_t n), void *user)
{
    splitter sp = {p, NULL, word, user};
    nu_status st = match_state_get(p, w, &sp.m);
    return st != NU_OK ? st : split(&sp, 0, text, len);
}
