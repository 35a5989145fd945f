/* test_llm_llama3.c: a Llama-3-shaped file, text in and text out. make-gguf's random weights in a
 * Llama 3 layout (dim 64, 2 layers, 4 query heads sharing 2 KV heads, RoPE theta 500000, 128256
 * tokens; Q8_0, as downloads are), llama.cpp's Llama 3 vocabulary
 * (models/vocab/ggml-vocab-llama-bpe.gguf: byte-level BPE, pre "llama-bpe") in place of
 * make-gguf's, with tokenizer.ggml.eom_token_id naming a reserved token as Llama 3.1's <|eom_id|>
 * (the 3.0 vocabulary has none), and Llama 3.1's rope_freqs.weight (the divisors of its llama3
 * scaling). Through the library: a sentence's ids, then the logits of its last positions against
 * the float64 reference (tests/llm_reference.c: GQA, the divisors) on the weights decoded. Through
 * `nuvec generate --prompt TEXT --json`: the prompt's ids as the library tokenizes them, the text
 * valid UTF-8 and the tokens' text as the library decodes them; then with each end-of-generation
 * token of the vocabulary (<|end_of_text|>, the eom, <|eot_id|>) put where greedy decoding
 * reaches it (its rows of token_embd and output swapped with those of a token generated at step
 * k: the same model with two ids exchanged), generation stops there. A copy whose
 * tokenizer.ggml.pre is unknown opens without a tokenizer, the note naming the pre-tokenizer, and
 * `nuvec generate --prompt` refuses it saying so. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "llm_files.h"
#include "llm_reference.h"
#include "llm_util.h"
#include "make_gguf.h"
#include "nuvec_llm.h"

enum { VOCAB = 128256, DIM = 64, HEAD_DIM = 16 };
static const make_gguf_shape LLAMA3 = {.name = "llama3-tiny", .dim = DIM, .layers = 2, .heads = 4, .kv_heads = 2,
                                       .ffn = 128, .vocab = VOCAB, .context = 256, .rope_theta = 500000.0f};
static const char PROMPT[] = "The quick brown fox jumps over the lazy dog, and then it runs away.";

static const char *tmp_path(const char *name) { return llm_tmp_path("llm_llama3_", name); }

/* Llama 3.1's rope_freqs: factor 8, low 1, high 4, original context 8192, written here in
 * double from the rule as llama.cpp's converter states it. */
static void llama3_divisors(float *out)
{
    const double factor = 8, low = 1, high = 4, original = 8192;
    for (int i = 0; i < HEAD_DIM / 2; i++) {
        double freq = pow(500000.0, -2.0 * i / HEAD_DIM), wavelen = 2 * M_PI / freq;
        if (wavelen < original / high)
            out[i] = 1;
        else if (wavelen > original / low)
            out[i] = (float)factor;
        else {
            double smooth = (original / wavelen - low) / (high - low);
            out[i] = (float)(1 / ((1 - smooth) / factor + smooth));
        }
    }
}

/* Swaps the rows of two token ids in token_embd and output. */
typedef struct swap {
    int32_t a, b;
} swap;

static void swap_rows(void *user, const nu_gguf_tensor_info *t, uint8_t *data, uint64_t size)
{
    const swap *s = user;
    if (s->a == s->b || (strcmp(t->name, "token_embd.weight") && strcmp(t->name, "output.weight")))
        return;
    size_t row = (size_t)(size / VOCAB);
    assert_true(row <= DIM * 4 && size == row * VOCAB);
    uint8_t tmp[DIM * 4];
    memcpy(tmp, data + (size_t)s->a * row, row);
    memcpy(data + (size_t)s->a * row, data + (size_t)s->b * row, row);
    memcpy(data + (size_t)s->b * row, tmp, row);
}

static char base_path[1100];

enum { EOM = 128008 }; /* <|reserved_special_token_4|> in the 3.0 vocabulary */

/* The model file: make-gguf's Q8_0 weights, the vocabulary's tokenizer.* keys, an eom, rope_freqs;
 * `pre` (NULL: the vocabulary's) as tokenizer.ggml.pre; ids s->a and s->b exchanged. */
static const char *llama3_file(const char *name, const swap *s, const char *pre)
{
    if (!base_path[0]) {
        snprintf(base_path, sizeof base_path, "%s", tmp_path("base.gguf"));
        make_gguf_options mo = {.shape = &LLAMA3, .dtype = NU_DTYPE_Q8_0, .path = base_path, .seed = 3, .threads = 2};
        NT_OK(make_gguf(&mo, NULL));
    }
    static float divisors[HEAD_DIM / 2];
    llama3_divisors(divisors);
    llm_gguf_tensor freqs = {"rope_freqs.weight", 1, {HEAD_DIM / 2, 0}, 0, divisors};
    llm_gguf_key keys[2] = {{"tokenizer.ggml.eom_token_id", NU_GGUF_UINT32, EOM, false, NULL},
                            {"tokenizer.ggml.pre", NU_GGUF_STRING, 0, false, pre}};
    swap none = {0, 0};
    llm_gguf_edit e = {.keys = keys, .key_count = pre ? 2 : 1, .tensors = &freqs, .tensor_count = 1,
                       .keys_from = llm_model_path("vocab/ggml-vocab-llama-bpe.gguf"), .keys_prefix = "tokenizer.",
                       .edit_data = swap_rows, .user = (void *)(s ? s : &none)};
    const char *path = tmp_path(name);
    assert_true(llm_copy_gguf(base_path, path, &e));
    return path;
}

/* UTF-8 as RFC 3629 has it (no surrogates, no overlong forms, nothing past U+10FFFF). */
static bool utf8_ok(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!k || i + k > n)
            return false;
        uint32_t cp = k == 1 ? c : c & (0xFF >> (k + 1));
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < least[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += k;
    }
    return true;
}

/* `nuvec generate` with args: its exit status, and stdout and stderr (together) into out. */
static int run_tool(const char *args, char *out, size_t cap)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' generate %s 2>&1", NUVEC_TOOL, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int rc = pclose(p);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

typedef struct generated {
    int32_t prompt[64], tokens[64];
    size_t np, nt;
    char text[4096];
} generated;

/* Greedy `nuvec generate MODEL --prompt PROMPT -n n --json`, parsed. */
static void generate(const char *model, int n, generated *g)
{
    static char out[1 << 16];
    char args[2048];
    snprintf(args, sizeof args, "'%s' --prompt '%s' -n %d --json", model, PROMPT, n);
    int rc = run_tool(args, out, sizeof out);
    if (rc != 0)
        fail_msg("nuvec generate %s: exit status %d: %s", args, rc, out);
    if (!utf8_ok((const unsigned char *)out, strlen(out)))
        fail_msg("nuvec generate --json printed bytes that are not UTF-8: %s", out);
    cJSON *o = cJSON_Parse(out);
    if (!o)
        fail_msg("nuvec generate --json: not JSON: %s", out);
    const cJSON *pa = cJSON_GetObjectItem(o, "prompt_tokens"), *ta = cJSON_GetObjectItem(o, "tokens"),
                *text = cJSON_GetObjectItem(o, "text");
    assert_true(cJSON_IsArray(pa) && cJSON_IsArray(ta) && cJSON_IsString(text));
    memset(g, 0, sizeof *g);
    const cJSON *it;
    cJSON_ArrayForEach(it, pa)
    {
        assert_true(g->np < 64);
        g->prompt[g->np++] = (int32_t)it->valuedouble;
    }
    cJSON_ArrayForEach(it, ta)
    {
        assert_true(g->nt < 64);
        g->tokens[g->nt++] = (int32_t)it->valuedouble;
    }
    assert_true(strlen(text->valuestring) < sizeof g->text);
    strcpy(g->text, text->valuestring);
    cJSON_Delete(o);
}

/* rope_freqs.weight's divisors all 1: the file's RoPE without the scaling. */
static void plain_rope(void *user, const nu_gguf_tensor_info *t, uint8_t *data, uint64_t size)
{
    (void)user;
    const float one = 1;
    for (uint64_t i = 0; !strcmp(t->name, "rope_freqs.weight") && i < size / 4; i++)
        memcpy(data + 4 * i, &one, 4);
}

/* The reference's logits at the last 4 of tokens[0 .. n) (4 x VOCAB, in new memory) on `path`
 * with every matrix decoded to F32 (the reference reads F32 and F16), its RoPE divisors set to 1
 * where `plain`. */
static double *reference_logits(const char *path, const int32_t *tokens, size_t n, bool plain)
{
    static const char *const parts[7] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
    char names[14][64];
    llm_gguf_retype re[16] = {{"token_embd.weight", NU_DTYPE_F32}, {"output.weight", NU_DTYPE_F32}};
    for (uint32_t i = 0; i < 14; i++) {
        snprintf(names[i], sizeof names[i], "blk.%u.%s.weight", i / 7, parts[i % 7]);
        re[2 + i] = (llm_gguf_retype){names[i], NU_DTYPE_F32};
    }
    llm_gguf_edit e = {.retypes = re, .retype_count = 16, .edit_data = plain ? plain_rope : NULL};
    const char *decoded = tmp_path("decoded.gguf");
    assert_true(llm_copy_gguf(path, decoded, &e));
    llm_ref *ref = llm_ref_open(decoded);
    assert_non_null(ref);
    double *want = malloc(4 * (size_t)VOCAB * sizeof *want);
    assert_non_null(want);
    llm_ref_forward(ref, tokens, n - 4, NULL);
    llm_ref_forward(ref, tokens + n - 4, 4, want);
    llm_ref_free(ref);
    unlink(decoded);
    return want;
}

static double worst_of(const double *want, const float *got)
{
    double range, diff = llm_ref_max_diff(want, got, VOCAB, &range);
    return diff / range;
}

/* The prompt through the library: its ids into ids[0 .. *n); then LONG tokens (the prompt's, again
 * and again) by prefill, the last 3 by decode, whose logits at the last 4 positions match the
 * reference's. On the float path (NUVEC_MATVEC dot=0: the weights decoded exactly), so that the
 * bound is tight enough to see the RoPE divisors at these positions: the reference without them is
 * off by far more. */
enum { LONG = 200 };

static void library_matches_reference(const char *path, int32_t *ids, size_t *n)
{
    setenv("NUVEC_MATVEC", "dot=0,local=64,rows=8", 1); /* 8 rows a workgroup: 128256 rows on lavapipe */
    nu_device *d = nt_open();
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, path, NULL, &m));
    const nu_llm_config *c = nu_llm_model_config(m);
    assert_int_equal(c->vocab, VOCAB);
    assert_int_equal(c->kv_heads * 2, c->heads);
    assert_false(c->tied_embeddings);
    const nu_llm_tokenizer *tok = nu_llm_model_tokenizer(m);
    if (!tok)
        fail_msg("no tokenizer: %s", nu_llm_model_tokenizer_note(m));
    assert_string_equal(nu_llm_tokenizer_pre(tok), "llama-bpe");
    LLM_OK(nu_llm_tokenize(tok, PROMPT, strlen(PROMPT), -1, ids, 64, n));
    assert_true(*n > 8);
    assert_int_equal(ids[0], 128000); /* <|begin_of_text|> */
    int32_t seq[LONG];
    for (size_t i = 0; i < LONG; i++)
        seq[i] = i < *n ? ids[i] : ids[1 + (i - 1) % (*n - 1)];
    double *want = reference_logits(path, seq, LONG, false), *plain = reference_logits(path, seq, LONG, true);
    float *got = malloc(VOCAB * sizeof *got);
    assert_non_null(got);
    double worst = 0, without = INFINITY;
    for (size_t k = 0; k < 4; k++) {
        if (k == 0)
            LLM_OK(nu_llm_model_prefill(m, seq, LONG - 3, got));
        else
            LLM_OK(nu_llm_model_decode(m, seq[LONG - 4 + k], got));
        worst = fmax(worst, worst_of(want + k * VOCAB, got));
        without = fmin(without, worst_of(plain + k * VOCAB, got));
    }
    printf("positions %d-%d: within %.3g of the range; %.3g from the reference without the RoPE divisors\n",
           LONG - 4, LONG - 1, worst, without);
    /* Measured: 1.1e-7 of the range, and 1.1e-4 without the divisors (random weights attend
     * almost evenly, so positions move the logits little): the bound is ten times below that. */
    if (!(worst <= 5e-6) || !(without > 5e-5))
        fail_msg("logits within %g of the reference's range (5e-6 allowed), %g from it without the divisors (more "
                 "than 5e-5 expected)", worst, without);
    free(want);
    free(plain);
    free(got);
    nu_llm_model_free(m);
    nt_close(d);
    unsetenv("NUVEC_MATVEC");
}

/* The text of tokens[0 .. n) as the library decodes it (valid UTF-8, control tokens as nothing). */
static void detokenized(const char *path, const int32_t *tokens, size_t n, char *out, size_t cap)
{
    nu_llm_tokenizer *tok;
    LLM_OK(nu_llm_tokenizer_open(path, &tok));
    size_t len;
    LLM_OK(nu_llm_detokenize_ex(tok, tokens, n, NULL, out, cap, &len));
    nu_llm_tokenizer_free(tok);
}

static void text_in_text_out(void **state)
{
    (void)state;
    const char *path = llama3_file("model.gguf", NULL, NULL);
    int32_t ids[64];
    size_t n;
    library_matches_reference(path, ids, &n);

    enum { STEPS = 8 };
    generated g;
    generate(path, STEPS, &g);
    assert_int_equal(g.np, n);
    assert_memory_equal(g.prompt, ids, n * sizeof *ids);
    char want[4096];
    detokenized(path, g.tokens, g.nt, want, sizeof want);
    assert_string_equal(g.text, want);
    printf("generated %zu tokens: \"%s\"\n", g.nt, g.text);

    /* Each end-of-generation id, put at step k = 1, 2, 3 (where the token there is one generated
     * for the first time, not in the prompt): generation stops on it. */
    nu_llm_tokenizer *tok;
    LLM_OK(nu_llm_tokenizer_open(path, &tok));
    int32_t eog[8];
    assert_int_equal(nu_llm_tokenizer_eog(tok, eog, 8), 3);
    assert_int_equal(eog[0], 128001); /* <|end_of_text|>, the eos */
    assert_int_equal(eog[1], EOM);
    assert_int_equal(eog[2], 128009); /* <|eot_id|> */
    for (int e = 0; e < 3; e++) {
        size_t k = (size_t)e + 1;
        for (; k < g.nt; k++) {
            bool fresh = !nu_llm_tokenizer_is_eog(tok, g.tokens[k]);
            for (size_t j = 0; j < k; j++)
                fresh &= g.tokens[j] != g.tokens[k];
            for (size_t j = 0; j < n; j++)
                fresh &= ids[j] != g.tokens[k];
            if (fresh)
                break;
        }
        if (k >= g.nt)
            fail_msg("greedy decoding gave no token to exchange with %d: rerun with another seed", eog[e]);
        swap s = {g.tokens[k], eog[e]};
        const char *swapped = llama3_file("swapped.gguf", &s, NULL);
        generated h;
        generate(swapped, STEPS, &h);
        if (h.nt != k + 1 || memcmp(h.tokens, g.tokens, k * sizeof *h.tokens) || h.tokens[k] != eog[e])
            fail_msg("with %d at step %zu: %zu tokens, the last %d", eog[e], k, h.nt, h.tokens[h.nt - 1]);
        detokenized(swapped, h.tokens, h.nt, want, sizeof want);
        assert_string_equal(h.text, want);
        printf("stops at %d after %zu tokens: \"%s\"\n", eog[e], k, h.text);
        unlink(swapped);
    }
    nu_llm_tokenizer_free(tok);
    unlink(path);
}

static void unknown_pre_is_named(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    const char *path = llama3_file("unknown_pre.gguf", NULL, "llama-xyz");
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, path, NULL, &m));
    assert_null(nu_llm_model_tokenizer(m));
    if (!strstr(nu_llm_model_tokenizer_note(m), "tokenizer.ggml.pre \"llama-xyz\""))
        fail_msg("the note \"%s\" does not name the pre-tokenizer", nu_llm_model_tokenizer_note(m));
    nu_llm_model_free(m);
    char out[4096], args[1400];
    snprintf(args, sizeof args, "'%s' --prompt 'Hello' -n 2", path);
    int rc = run_tool(args, out, sizeof out);
    if (rc != 1 || !strstr(out, "llama-xyz"))
        fail_msg("nuvec generate --prompt on an unknown pre: exit status %d: %s", rc, out);
    unlink(path);
    nt_close(d);
}

static int unset_env(void **state)
{
    (void)state;
    unsetenv("NUVEC_MATVEC");
    return 0;
}

static int remove_base(void **state)
{
    (void)state;
    if (base_path[0])
        unlink(base_path);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(text_in_text_out, unset_env),
        cmocka_unit_test(unknown_pre_is_named),
    };
    return cmocka_run_group_tests(tests, NULL, remove_base);
}
