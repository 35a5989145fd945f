/* test_llm_quant.c: the GGUF files people download, in each block format `nuvec quantize` writes.
 * make-gguf's "small" shape (dim 256, FFN 512: rows of 256 and 512, what the K formats need), F32,
 * quantized to each quantized file type (llama-quantize's mixes: Q4_K_M is Q4_K with Q6_K
 * tensors, ...), and each such file dequantized back to F32 (`nuvec quantize --type f32
 * --allow-requantize`): the runtime's logits on the quantized file against a float64 reference
 * forward (tests/llm_reference.c) of the dequantized one, so that the only differences left are
 * the kernels' arithmetic: a prompt by prefill (the matrix products read the blocks), then decode
 * steps, on the default path (the decode graph with the fused layer; block weights on the
 * integer-dot matrix-vector path, which rounds x to 8 bits) and on the float path with the
 * separate ops (NUVEC_MATVEC=dot=0, decode by command buffers, no fusion), each within a bound
 * measured per format. A file mixing a dozen formats, one a tensor, loads as it is (the device
 * holds the file's bytes, nothing converted) and matches its reference (its ffn_gate and ffn_up
 * differ in format, which the fused layer's gate-up product cannot read: it failed at the first
 * prefill until the runner learned to run such files on the separate ops); stories260K (rows of
 * 64: the 32-element formats, the K formats' fallbacks) quantized likewise, on both paths.
 * Q6_K matrices repacked at open (Q6_K_SOA) give the file's logits bit for bit. Refused at open, with a
 * message: a K-quant file cut short, a Q4_K tensor whose rows are 128 elements; a vocabulary whose
 * tokenizer.ggml.pre is unknown leaves the model without a tokenizer and a note that names it. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "llm_files.h"
#include "llm_reference.h"
#include "llm_util.h"
#include "make_gguf.h"
#include "nuvec_llm.h"
#include "quantize.h"
#include "tool_error.h"

static const char *tmp_path(const char *name) { return llm_tmp_path("llm_quant_", name); }

/* Each quantized file type, the dtype most of its matrices take, and the bounds on the logits'
 * largest difference from the reference's, as a fraction of their range, on the integer-dot and
 * the float paths. Measured on lavapipe: 0.0054-0.0067 on the dot path (x rounded to 8 bits
 * dominates, the same for every format), 2-4e-7 on the float path (the weights decoded exactly),
 * but 2.5e-4 for Q4_0, whose matrices of rows of 256 are repacked (Q4_0_SOA) and go to the
 * matrix products of prefill as F16. */
#define DOT 0.015
#define FLT 1e-5
#define FLT_SOA 1e-3
typedef struct format {
    const char *type;
    nu_dtype base;
    double dot, flt;
} format;

static const format FORMATS[] = {
    {"q4_k_m", NU_DTYPE_Q4_K, DOT, FLT},  {"q5_k_m", NU_DTYPE_Q5_K, DOT, FLT},   {"q6_k", NU_DTYPE_Q6_K, DOT, FLT},
    {"q8_0", NU_DTYPE_Q8_0, DOT, FLT},    {"q4_0", NU_DTYPE_Q4_0, DOT, FLT_SOA}, {"q4_1", NU_DTYPE_Q4_1, DOT, FLT},
    {"q5_0", NU_DTYPE_Q5_0, DOT, FLT},    {"q5_1", NU_DTYPE_Q5_1, DOT, FLT},     {"iq4_nl", NU_DTYPE_IQ4_NL, DOT, FLT},
    {"iq4_xs", NU_DTYPE_IQ4_XS, DOT, FLT},
};
#define FORMAT_COUNT (sizeof FORMATS / sizeof *FORMATS)

static void quantize(const char *in, const char *out, const char *type)
{
    qz_request r = {.in = in, .out = out, .threads = 2, .allow_requantize = true};
    r.mix = (quant_options){quant_find_preset(type), NU_DTYPE_COUNT, NU_DTYPE_COUNT, false};
    assert_non_null(r.mix.preset);
    qz_result res;
    nu_status st = qz_quantize(&r, &res);
    if (st != NU_OK)
        fail_msg("quantize %s to %s: %s", in, type, tool_error_message());
}

/* The file's tensors: how many are of `dtype`, and their bytes in all. */
static size_t count_dtype(const char *path, nu_dtype dtype, uint64_t *bytes)
{
    char *data = NULL;
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    data = malloc((size_t)size);
    assert_int_equal(fread(data, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    nu_gguf *g;
    NT_OK(nu_gguf_parse(data, (size_t)size, &g));
    size_t n = 0;
    *bytes = 0;
    for (uint64_t i = 0; i < nu_gguf_tensor_count(g); i++) {
        n += nu_gguf_tensor(g, i)->dtype == dtype;
        *bytes += nu_gguf_tensor(g, i)->size;
    }
    nu_gguf_close(g);
    free(data);
    return n;
}

/* The files: small's F32, then for each format the quantized file and its F32 dequantization. */
static char quant_files[FORMAT_COUNT][2][1100];
static char small_f32[1100];

static int make_files(void **state)
{
    (void)state;
    snprintf(small_f32, sizeof small_f32, "%s", tmp_path("small-f32.gguf"));
    make_gguf_options mo = {.shape = make_gguf_find_shape("small"), .dtype = NU_DTYPE_F32, .path = small_f32,
                            .seed = 7, .threads = 2};
    if (make_gguf(&mo, NULL) != NU_OK)
        return -1;
    return 0;
}

static void quantize_all(void)
{
    for (size_t i = 0; i < FORMAT_COUNT; i++) {
        char name[64];
        if (quant_files[i][0][0])
            continue;
        snprintf(name, sizeof name, "small-%s.gguf", FORMATS[i].type);
        snprintf(quant_files[i][0], sizeof quant_files[i][0], "%s", tmp_path(name));
        snprintf(name, sizeof name, "small-%s-f32.gguf", FORMATS[i].type);
        snprintf(quant_files[i][1], sizeof quant_files[i][1], "%s", tmp_path(name));
        quantize(small_f32, quant_files[i][0], FORMATS[i].type);
        quantize(quant_files[i][0], quant_files[i][1], "f32");
        uint64_t bytes;
        if (count_dtype(quant_files[i][0], FORMATS[i].base, &bytes) < 4)
            fail_msg("%s: fewer than 4 tensors are %s", FORMATS[i].type, nu_dtype_name(FORMATS[i].base));
    }
}

static int remove_files(void **state)
{
    (void)state;
    for (size_t i = 0; i < FORMAT_COUNT; i++)
        for (int k = 0; k < 2; k++)
            if (quant_files[i][k][0])
                unlink(quant_files[i][k]);
    unlink(small_f32);
    return 0;
}

/* The tokens: a prompt of P1 by prefill (more rows than NU_MATVEC_MAX_ROWS: the matrix products),
 * P2 more by prefill (a few rows: the matrix-vector products with several rows of x), then decode
 * steps to N. */
enum { P1 = 12, P2 = 3, N = 18 };

/* The model at `path` (options o) against the reference forward of `ref_path` on the tokens
 * above; returns the largest difference over the logits' range, after failing the test when it
 * is above `bound`. */
static double against_reference(nu_device *d, const char *path, const nu_llm_model_options *o, const char *ref_path,
                                double bound)
{
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, path, o, &m));
    uint32_t V = nu_llm_model_config(m)->vocab;
    llm_ref *ref = llm_ref_open(ref_path);
    assert_non_null(ref);
    assert_int_equal(llm_ref_vocab(ref), V);
    int32_t tokens[N];
    for (uint32_t i = 0; i < N; i++)
        tokens[i] = i ? (int32_t)(3 + (i * 97) % (V - 3)) : 1;
    double *want = malloc((size_t)N * V * sizeof *want);
    float *got = malloc(V * sizeof *got);
    assert_true(want && got);
    llm_ref_forward(ref, tokens, N, want);
    double worst = 0;
    for (uint32_t at = P1 - 1; at < N; at++) {
        if (at == P1 - 1)
            LLM_OK(nu_llm_model_prefill(m, tokens, P1, got));
        else if (at == P1 + P2 - 1)
            LLM_OK(nu_llm_model_prefill(m, tokens + P1, P2, got));
        else if (at < P1 + P2)
            continue;
        else
            LLM_OK(nu_llm_model_decode(m, tokens[at], got));
        double range, diff = llm_ref_max_diff(want + (size_t)at * V, got, V, &range);
        assert_true(range > 0);
        worst = fmax(worst, diff / range);
        if (!(diff <= bound * range))
            fail_msg("%s at position %u (%s): logits within %g of the reference's, range %g; %g of it allowed", path, at,
                     at < P1 + P2 ? "prefill" : "decode", diff, range, bound);
    }
    free(want);
    free(got);
    llm_ref_free(ref);
    nu_llm_model_free(m);
    return worst;
}

/* Prefill (the matrix products) and the decode graph (fused layer, integer-dot products). */
static void formats_on_the_default_path(void **state)
{
    (void)state;
    quantize_all();
    nu_device *d = nt_open();
    for (size_t i = 0; i < FORMAT_COUNT; i++) {
        double w = against_reference(d, quant_files[i][0], NULL, quant_files[i][1], FORMATS[i].dot);
        printf("%-7s default path: within %.3g of the range (bound %g)\n", FORMATS[i].type, w, FORMATS[i].dot);
    }
    nt_close(d);
}

/* The float matrix-vector path (weights decoded exactly, x unrounded) with the separate ops. */
static void formats_on_the_float_path(void **state)
{
    (void)state;
    quantize_all();
    setenv("NUVEC_MATVEC", "dot=0", 1);
    setenv("NUVEC_MATVEC_SOA", "dot=0", 1);
    nu_device *d = nt_open();
    nu_llm_model_options o = {.fusion = -1, .decode_by_commands = true};
    for (size_t i = 0; i < FORMAT_COUNT; i++) {
        double w = against_reference(d, quant_files[i][0], &o, quant_files[i][1], FORMATS[i].flt);
        printf("%-7s float path, separate ops: within %.3g of the range (bound %g)\n", FORMATS[i].type, w,
               FORMATS[i].flt);
    }
    nt_close(d);
}

/* A file of many formats, one a tensor (token_embd Q6_K, output IQ4_XS, the layers' matrices
 * through the rest, F16, BF16 and F32 among them): the device holds the file's tensors as they
 * are (its weights are the file's bytes), and the logits match the reference. */
static const nu_dtype MIX[] = {NU_DTYPE_Q4_K, NU_DTYPE_Q5_K, NU_DTYPE_Q6_K, NU_DTYPE_Q8_0, NU_DTYPE_Q4_0,
                               NU_DTYPE_Q4_1, NU_DTYPE_Q5_0, NU_DTYPE_Q5_1, NU_DTYPE_IQ4_NL, NU_DTYPE_IQ4_XS,
                               NU_DTYPE_F16, NU_DTYPE_BF16, NU_DTYPE_F32};

static void mixed_formats_load_as_they_are(void **state)
{
    (void)state;
    static const char *const parts[7] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
    char names[14][64];
    llm_gguf_retype re[16];
    size_t n = 0;
    re[n++] = (llm_gguf_retype){"token_embd.weight", NU_DTYPE_Q6_K};
    re[n++] = (llm_gguf_retype){"output.weight", NU_DTYPE_IQ4_XS};
    for (uint32_t l = 0; l < 2; l++)
        for (int p = 0; p < 7; p++) {
            char *name = names[l * 7 + p];
            snprintf(name, 64, "blk.%u.%s.weight", l, parts[p]);
            re[n] = (llm_gguf_retype){name, MIX[(l * 7 + p) % (sizeof MIX / sizeof *MIX)]};
            n++;
        }
    llm_gguf_edit e = {.retypes = re, .retype_count = n};
    const char *mixed = tmp_path("mixed.gguf"), *back = tmp_path("mixed-f32.gguf");
    assert_true(llm_copy_gguf(small_f32, mixed, &e));
    quantize(mixed, back, "f32");
    uint64_t file_bytes;
    for (size_t i = 0; i < sizeof MIX / sizeof *MIX; i++)
        if (!count_dtype(mixed, MIX[i], &file_bytes))
            fail_msg("the mixed file has no %s tensor", nu_dtype_name(MIX[i]));
    nu_device *d = nt_open();
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, mixed, NULL, &m));
    nu_llm_memory mem;
    LLM_OK(nu_llm_model_memory(m, &mem));
    /* The file's tensors in one buffer, its size rounded by the allocator (to 64 KiB here); any
     * matrix but the smallest (the KV ones) converted to F16 would add more than that. On a discrete
     * GPU the token embedding is in a host buffer of its own (embed_in_host, rounded too):
     * weights_in_host counts it. */
    uint64_t held = mem.weights + mem.weights_in_host, slack = mem.weights_in_host ? 2 * 65536 : 65536;
    if (held < file_bytes || held > file_bytes + slack)
        fail_msg("the device and host hold %llu bytes of weights (%llu in host memory); the file's tensors are %llu",
                 (unsigned long long)held, (unsigned long long)mem.weights_in_host, (unsigned long long)file_bytes);
    nu_llm_model_free(m);
    printf("mixed formats: within %.3g of the range (bound %g)\n", against_reference(d, mixed, NULL, back, DOT), DOT);
    nt_close(d);
    unlink(mixed);
    unlink(back);
}

/* stories260K (trained weights; rows of 64 and 172): what nuvec quantize makes of it, each file
 * type's fallbacks included (Q4_K_M: Q5_0 and Q8_0; IQ4_XS: IQ4_NL; Q4_0 in blocks, not
 * repacked; F16 for the rows of 172), against the reference on its dequantization, on the
 * default path and on the float path (three file types, for time: the rest run on rows of 256
 * above). Measured: 0.014-0.031 of the range on the dot path, whose
 * rounding of x to 8 bits costs more on trained activations (llama.cpp's CPU backend, which
 * rounds x likewise, is 0.028-0.045 from its own logits of the dequantized file on the Q4_0
 * one), 5e-7-2e-6 on the float path. */
static const char *const SHARED_TYPES[] = {"q4_k_m", "q4_0", "iq4_xs"};
#define SHARED_COUNT (sizeof SHARED_TYPES / sizeof *SHARED_TYPES)

static void shared_model_formats(void **state)
{
    (void)state;
    const char *model = llm_model_path("stories260K/model.gguf");
    char files[SHARED_COUNT][2][1100];
    for (size_t i = 0; i < SHARED_COUNT; i++) {
        char name[64];
        snprintf(name, sizeof name, "stories-%s.gguf", SHARED_TYPES[i]);
        snprintf(files[i][0], sizeof files[i][0], "%s", tmp_path(name));
        snprintf(name, sizeof name, "stories-%s-f32.gguf", SHARED_TYPES[i]);
        snprintf(files[i][1], sizeof files[i][1], "%s", tmp_path(name));
        quantize(model, files[i][0], SHARED_TYPES[i]);
        quantize(files[i][0], files[i][1], "f32");
    }
    for (int path = 0; path < 2; path++) {
        if (path) {
            setenv("NUVEC_MATVEC", "dot=0", 1);
            setenv("NUVEC_MATVEC_SOA", "dot=0", 1);
        }
        nu_device *d = nt_open();
        nu_llm_model_options o = {.fusion = -1, .decode_by_commands = true};
        double bound = path ? FLT : 0.06;
        for (size_t i = 0; i < SHARED_COUNT; i++)
            printf("stories260K %-6s %s: within %.3g of the range (bound %g)\n", SHARED_TYPES[i],
                   path ? "float path" : "default path",
                   against_reference(d, files[i][0], path ? &o : NULL, files[i][1], bound), bound);
        nt_close(d);
    }
    for (size_t i = 0; i < SHARED_COUNT; i++)
        unlink(files[i][0]), unlink(files[i][1]);
}

/* The bytes of file `path`, NUL-terminated size *n (free() them). */
static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

static void spill(const char *path, const uint8_t *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* A K-quant file cut short (its last tensor, Q6_K output, loses 100 bytes), and one whose Q4_K
 * attn_q claims rows of 128 (the same bytes: twice the rows): refused at open, saying why. */
static void malformed_k_files_are_refused(void **state)
{
    (void)state;
    quantize_all();
    size_t n;
    uint8_t *b = slurp(quant_files[0][0], &n);
    nu_device *d = nt_open();
    const char *cut = tmp_path("cut.gguf");
    spill(cut, b, n - 100);
    llm_expect_refused(d, cut, NU_ERROR_FORMAT, "tensor 'output.weight': its 107520 bytes at data offset");
    llm_expect_refused(d, cut, NU_ERROR_FORMAT, "run past the end of the file");
    /* The tensor info: the name, then rank (u32), ne[0], ne[1] (u64) and the type (u32). */
    const char *name = "blk.0.attn_q.weight";
    uint8_t *at = memmem(b, n, name, strlen(name));
    assert_non_null(at);
    at += strlen(name);
    uint32_t rank, type;
    uint64_t ne[2];
    memcpy(&rank, at, 4), memcpy(ne, at + 4, 16), memcpy(&type, at + 20, 4);
    assert_int_equal(rank, 2);
    assert_int_equal(ne[0], 256);
    assert_int_equal(type, 12); /* q4_K */
    ne[0] = 128, ne[1] *= 2;
    memcpy(at + 4, ne, 16);
    const char *rows = tmp_path("rows128.gguf");
    spill(rows, b, n);
    llm_expect_refused(d, rows, NU_ERROR_FORMAT,
                       "tensor 'blk.0.attn_q.weight': q4_K blocks are 256 elements, but the innermost dim (ne[0]) is 128");
    nt_close(d);
    unlink(cut);
    unlink(rows);
    free(b);
}

/* The logits of the tokens above: prefill P1, prefill P2, then decode to N (LOGIT_ROWS rows). */
#define LOGIT_ROWS (2 + N - P1 - P2)
static float *logits_of(nu_device *d, const char *path, const nu_llm_model_options *o)
{
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, path, o, &m));
    uint32_t V = nu_llm_model_config(m)->vocab;
    float *out = malloc((size_t)LOGIT_ROWS * V * sizeof *out);
    assert_non_null(out);
    int32_t tokens[N];
    for (uint32_t i = 0; i < N; i++)
        tokens[i] = i ? (int32_t)(3 + (i * 97) % (V - 3)) : 1;
    LLM_OK(nu_llm_model_prefill(m, tokens, P1, out));
    LLM_OK(nu_llm_model_prefill(m, tokens + P1, P2, out + V));
    for (uint32_t at = P1 + P2; at < N; at++)
        LLM_OK(nu_llm_model_decode(m, tokens[at], out + (size_t)(at - P1 - P2 + 2) * V));
    nu_llm_model_free(m);
    return out;
}

/* Q6_K matrices repacked at open (Q6_K_SOA: repack_q6_k's default; the small shape's matrices and
 * output all qualify, the embedding stays) give exactly the logits the file's blocks give
 * (repack_q6_k = -1): the products read the same values in the same order, in prefill (the tiled
 * matrix product here) and decode, on the default path and on the float path with the separate
 * ops. */
static void q6_k_repacked_gives_the_files_logits(void **state)
{
    (void)state;
    quantize_all();
    const char *path = quant_files[2][0];
    assert_string_equal(FORMATS[2].type, "q6_k");
    for (int fp = 0; fp < 2; fp++) {
        if (fp) {
            setenv("NUVEC_MATVEC", "dot=0", 1);
            setenv("NUVEC_MATVEC_SOA", "dot=0", 1);
        }
        nu_device *d = nt_open();
        nu_llm_model_options o = fp ? (nu_llm_model_options){.fusion = -1, .decode_by_commands = true}
                                    : (nu_llm_model_options){0};
        nu_llm_model_options kept = o;
        kept.repack_q6_k = -1;
        float *a = logits_of(d, path, &o), *b = logits_of(d, path, &kept);
        nu_llm_model *m;
        LLM_OK(nu_llm_model_open(d, path, NULL, &m));
        size_t V = nu_llm_model_config(m)->vocab;
        nu_llm_model_free(m);
        for (size_t i = 0; i < (size_t)LOGIT_ROWS * V; i++)
            if (memcmp(&a[i], &b[i], sizeof *a))
                fail_msg("%s path: logit %zu of row %zu is %.9g repacked, %.9g from the file's Q6_K", fp ? "float" : "default",
                         i % V, i / V, a[i], b[i]);
        free(a);
        free(b);
        nt_close(d);
    }
}

static int unset_env(void **state)
{
    (void)state;
    unsetenv("NUVEC_MATVEC");
    unsetenv("NUVEC_MATVEC_SOA");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(formats_on_the_default_path),
        cmocka_unit_test_teardown(formats_on_the_float_path, unset_env),
        cmocka_unit_test(mixed_formats_load_as_they_are),
        cmocka_unit_test_teardown(shared_model_formats, unset_env),
        cmocka_unit_test(malformed_k_files_are_refused),
        cmocka_unit_test_teardown(q6_k_repacked_gives_the_files_logits, unset_env),
    };
    return cmocka_run_group_tests(tests, make_files, remove_files);
}
