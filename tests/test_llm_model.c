/* test_llm_model.c: the Llama runtime (llm/model.c, llm/hf.c) on the two real tiny models of the
 * models folder (NUVEC_MODELS_DIR; its README gives the expected ids): aidreams260K's greedy
 * continuation of "I dream of" as the README lists it (decode graph); its BF16 folder and F16
 * weights against F32; stories260K (GQA, head_dim 8): the decode graph's logits at every position
 * against a fresh prefill of the same tokens (matrix products, prefill attention), and its first
 * 36 greedy tokens with an F16 KV cache as with F32 (the README's near tie at 37); greedy decode
 * on the GPU (nu_llm_model_decode_greedy) against the CPU's argmax on every file; bad folders and
 * config.json files refused with their messages; a random-weight Q4_0 model of rows a multiple of
 * 256 (make-gguf's "small") decoded with its matrices repacked (Q4_0_SOA) as without; a prompt in
 * pipelined passes of 3 rows as in one pass; weights read ahead (prefetch) changing no result. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "make_gguf.h"
#include "common.h" /* nu_llm__fail_after */
#include "llm_files.h"
#include "llm_util.h"
#include "nuvec_llm.h"

static int32_t argmax(const float *x, uint32_t n)
{
    int32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = (int32_t)i;
    return best;
}

/* Greedy: prefill `prompt`, then `n` tokens by decode into out (logits of each step, vocab floats
 * a step, into all_logits when not NULL). */
static void greedy(nu_llm_model *m, const int32_t *prompt, size_t np, int32_t *out, size_t n, float *all_logits)
{
    uint32_t V = nu_llm_model_config(m)->vocab;
    float *logits = malloc(V * sizeof *logits);
    assert_non_null(logits);
    LLM_OK(nu_llm_model_prefill(m, prompt, np, logits));
    for (size_t i = 0; i < n; i++) {
        out[i] = argmax(logits, V);
        if (all_logits)
            memcpy(all_logits + i * V, logits, V * sizeof *logits);
        if (i + 1 < n)
            LLM_OK(nu_llm_model_decode(m, out[i], logits));
    }
    free(logits);
}

static const int32_t DREAM_PROMPT[7] = {1, 303, 281, 269, 435, 447, 275};
static const int32_t DREAM_IDS[40] = {429, 464, 448, 464, 464, 464, 464, 464, 464, 448, 429, 468, 342, 358,
                                      402, 327, 446, 299, 303, 266, 437, 443, 434, 438, 451, 306, 443, 259,
                                      430, 446, 299, 303, 266, 437, 443, 434, 438, 451, 306, 443};

static void aidreams_greedy_matches_the_readme(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, llm_model_path("aidreams260K/hf"), NULL, &m));
    const nu_llm_config *c = nu_llm_model_config(m);
    assert_int_equal(c->dim, 64);
    assert_int_equal(c->head_dim, 16);
    assert_int_equal(c->layers, 4);
    assert_int_equal(c->vocab, 512);
    assert_true(c->tied_embeddings);
    int32_t ids[40];
    greedy(m, DREAM_PROMPT, 7, ids, 40, NULL);
    assert_memory_equal(ids, DREAM_IDS, sizeof ids);
    assert_int_equal(nu_llm_model_position(m), 7 + 39);
    /* Again after a reset: the cache is overwritten, not appended to. */
    nu_llm_model_reset(m);
    greedy(m, DREAM_PROMPT, 7, ids, 40, NULL);
    assert_memory_equal(ids, DREAM_IDS, sizeof ids);
    nu_llm_model_free(m);
    /* The per-token command buffers give the same ids, with a prefill chunk of 3 (three passes). */
    nu_llm_model_options o = {.decode_by_commands = true, .prefill_chunk = 3};
    LLM_OK(nu_llm_model_open(d, llm_model_path("aidreams260K/hf"), &o, &m));
    greedy(m, DREAM_PROMPT, 7, ids, 40, NULL);
    assert_memory_equal(ids, DREAM_IDS, sizeof ids);
    nu_llm_model_free(m);
    nt_close(d);
}

/* The BF16 folder (lossy: logits move by up to 0.036, the README says) and F32 weights stored as
 * F16: the prompt's logits near F32's, and from BOS the README's "matches F32 for 64 tokens"
 * (checked for 32). */
static void aidreams_bf16_and_f16_weights(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    float ref[512], got[512];
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, llm_model_path("aidreams260K/hf"), NULL, &m));
    LLM_OK(nu_llm_model_prefill(m, DREAM_PROMPT, 7, ref));
    int32_t bos = 1, ref_ids[32], ids[32];
    nu_llm_model_reset(m);
    greedy(m, &bos, 1, ref_ids, 32, NULL);
    nu_llm_model_free(m);

    const char *paths[2] = {"aidreams260K/hf-bf16", "aidreams260K/hf"};
    const double tol[2] = {0.05, 0.01};
    for (int i = 0; i < 2; i++) {
        nu_llm_model_options o = {.weights_f16 = i == 1};
        LLM_OK(nu_llm_model_open(d, llm_model_path(paths[i]), &o, &m));
        LLM_OK(nu_llm_model_prefill(m, DREAM_PROMPT, 7, got));
        double worst = 0;
        for (int j = 0; j < 512; j++)
            worst = fmax(worst, fabs((double)got[j] - ref[j]));
        if (!(worst < tol[i]))
            fail_msg("%s%s: logits differ from F32's by %g (tolerance %g)", paths[i], i ? " (F16 weights)" : "", worst, tol[i]);
        nu_llm_model_reset(m);
        greedy(m, &bos, 1, ids, 32, NULL);
        assert_memory_equal(ids, ref_ids, sizeof ids);
        nu_llm_model_free(m);
    }
    /* Prefill with its product inputs and q in F16 (what devices with matrix units do by
     * default), 20 tokens (the matrix-product path), against F32 prefill: within 0.01. */
    int32_t seq[20] = {1};
    memcpy(seq + 1, ref_ids, 19 * sizeof *seq);
    float *f32 = malloc(512 * sizeof *f32);
    assert_non_null(f32);
    for (int i = 0; i < 2; i++) {
        nu_llm_model_options o = {.prefill_f16 = i ? 1 : -1};
        LLM_OK(nu_llm_model_open(d, llm_model_path("aidreams260K/hf"), &o, &m));
        LLM_OK(nu_llm_model_prefill(m, seq, 20, i ? got : f32));
        nu_llm_model_free(m);
    }
    double worst = 0;
    for (int j = 0; j < 512; j++)
        worst = fmax(worst, fabs((double)got[j] - f32[j]));
    if (!(worst < 0.01) || worst == 0)
        fail_msg("F16 prefill: logits differ from F32 prefill's by %g (tolerance 0.01, and not 0: F16 ran)", worst);
    /* The same with Q4_0 weights, which F16 prefill dequantizes to F16 before each product. */
    for (int i = 0; i < 2; i++) {
        nu_llm_model_options o = {.prefill_f16 = i ? 1 : -1};
        LLM_OK(nu_llm_model_open(d, llm_model_path("aidreams260K/model-q4_0.gguf"), &o, &m));
        LLM_OK(nu_llm_model_prefill(m, seq, 20, i ? got : f32));
        nu_llm_model_free(m);
    }
    worst = 0;
    for (int j = 0; j < 512; j++)
        worst = fmax(worst, fabs((double)got[j] - f32[j]));
    if (!(worst < 0.01) || worst == 0)
        fail_msg("F16 prefill, Q4_0 weights: logits differ from F32 prefill's by %g (tolerance 0.01, and not 0)", worst);
    /* copy_pair (each F16 copy in the other half of two matrices' bytes, beside the product before
     * it): the same logits bit for bit as one matrix's bytes (direct_rows 1: copies on any device). */
    float *pair = malloc(512 * sizeof *pair);
    assert_non_null(pair);
    for (int i = 0; i < 2; i++) {
        nu_llm_model_options o = {.prefill_f16 = 1, .direct_rows = 1, .copy_pair = i};
        LLM_OK(nu_llm_model_open(d, llm_model_path("aidreams260K/model-q4_0.gguf"), &o, &m));
        LLM_OK(nu_llm_model_prefill(m, seq, 20, i ? pair : got));
        nu_llm_model_free(m);
    }
    assert_memory_equal(pair, got, 512 * sizeof *pair);
    free(pair);
    /* direct_rows: the 20-token pass reads the Q4_0 weights on the matrix units as they are (32),
     * or dequantizes them first (1), on a device with matrix units; either way within 0.01. */
    const uint32_t direct[2] = {1, 32};
    for (int i = 0; i < 2; i++) {
        nu_llm_model_options o = {.prefill_f16 = 1, .direct_rows = direct[i]};
        LLM_OK(nu_llm_model_open(d, llm_model_path("aidreams260K/model-q4_0.gguf"), &o, &m));
        LLM_OK(nu_llm_model_prefill(m, seq, 20, got));
        nu_llm_model_free(m);
        worst = 0;
        for (int j = 0; j < 512; j++)
            worst = fmax(worst, fabs((double)got[j] - f32[j]));
        if (!(worst < 0.01))
            fail_msg("F16 prefill, Q4_0 weights, direct_rows %u: logits differ from F32's by %g", direct[i], worst);
    }
    nu_llm_model_options too_many = {.direct_rows = 40000};
    m = NULL;
    assert_int_equal(nu_llm_model_open(d, llm_model_path("aidreams260K/model-q4_0.gguf"), &too_many, &m),
                     NU_ERROR_INVALID_ARGUMENT);
    assert_null(m);
    free(f32);
    nt_close(d);
}

/* stories260K: every decode step's logits (the graph: matvec, decode attention, parameters)
 * against a prefill of all the tokens so far from an empty cache (matmul beyond 8 rows, prefill
 * attention beyond 4): two different paths through the ops, within 1e-4. The graph without
 * attention's fresh form (fresh_attention -1) gives the same logits bit for bit. Then the F16 KV cache's
 * first 36 greedy tokens are F32's (the README's near tie is at generated position 37). */
static void stories_decode_graph_against_prefill(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    enum { N = 36 };
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, llm_model_path("stories260K/hf"), NULL, &m));
    const nu_llm_config *c = nu_llm_model_config(m);
    assert_int_equal(c->heads, 8);
    assert_int_equal(c->kv_heads, 4);
    assert_int_equal(c->head_dim, 8);
    uint32_t V = c->vocab;
    int32_t seq[N + 1] = {1};
    float *logits = malloc((size_t)N * V * sizeof *logits), *one = malloc(V * sizeof *one);
    assert_non_null(logits);
    assert_non_null(one);
    greedy(m, seq, 1, seq + 1, N, logits);
    nu_llm_model_free(m);

    /* The decode graph without attention's fresh form (RoPE and the cache writes as ops of their
     * own, the splits merged by attn_combine.comp): the same logits, bit for bit. */
    nu_llm_model_options separate = {.fresh_attention = -1};
    LLM_OK(nu_llm_model_open(d, llm_model_path("stories260K/hf"), &separate, &m));
    float *sep = malloc((size_t)N * V * sizeof *sep);
    int32_t sep_ids[N];
    assert_non_null(sep);
    greedy(m, seq, 1, sep_ids, N, sep);
    nu_llm_model_free(m);
    assert_memory_equal(sep_ids, seq + 1, sizeof sep_ids);
    for (size_t i = 0; i < (size_t)N * V; i++)
        if (memcmp(&sep[i], &logits[i], sizeof *sep))
            fail_msg("token %zu, logit %zu: %.9g with the fresh form, %.9g without", i / V, i % V, (double)logits[i],
                     (double)sep[i]);
    free(sep);

    nu_llm_model_options o = {.decode_by_commands = true, .prefill_f16 = -1}; /* F32 like the graph's */
    LLM_OK(nu_llm_model_open(d, llm_model_path("stories260K/hf"), &o, &m));
    double worst = 0;
    for (int t = 0; t < N; t++) {
        nu_llm_model_reset(m);
        LLM_OK(nu_llm_model_prefill(m, seq, (size_t)t + 1, one));
        for (uint32_t j = 0; j < V; j++)
            worst = fmax(worst, fabs((double)one[j] - logits[(size_t)t * V + j]));
    }
    nu_llm_model_free(m);
    if (!(worst < 1e-4))
        fail_msg("decode graph and prefill logits differ by %g", worst);

    nu_llm_model_options f16 = {.kv_dtype = NU_DTYPE_F16};
    int32_t ids[N];
    LLM_OK(nu_llm_model_open(d, llm_model_path("stories260K/hf"), &f16, &m));
    greedy(m, seq, 1, ids, N, NULL);
    assert_memory_equal(ids, seq + 1, sizeof ids);
    nu_llm_model_free(m);
    free(logits);
    free(one);
    nt_close(d);
}

/* make-gguf's "small" shape in Q4_0 (rows of 256 and 512), opened with the matrices repacked
 * (NU_DTYPE_Q4_0_SOA, the default; the repacked matrices replace the file's, so the model holds no
 * more device memory than without: within the allocator's rounding of its extra buffers) and without
 * (repack_q4_0 = -1); a prompt through prefill (the repacked matrices dequantized to F16 for the
 * products) and greedy decode (the fused layer on the repacked products). With x unrounded
 * (NUVEC_MATVEC=dot=0 and NUVEC_MATVEC_SOA=dot=0: the float paths of both kernels) the logits
 * agree to 1e-3 (only the order of the sums differs; measured 3.7e-4 on lavapipe). On the dot
 * paths each kernel rounds x to 8 bits a block on its own, which moved the logits by up to 1.1%
 * of the largest (lavapipe): same ids, and within 3% of it. */
static void small_q4_0_decode(nu_device *d, const char *path, int repack, int32_t *ids, float *logits,
                              uint64_t *active)
{
    enum { NP = 12 };
    int32_t prompt[NP];
    for (int i = 0; i < NP; i++)
        prompt[i] = (int32_t)(1 + 37 * i % 500);
    nu_llm_model_options o = {.repack_q4_0 = repack};
    nu_llm_model *m;
    nu_memory_stats before, after;
    NT_OK(nu_memory_get_stats(d, &before));
    LLM_OK(nu_llm_model_open(d, path, &o, &m));
    NT_OK(nu_memory_get_stats(d, &after));
    *active = after.active - before.active;
    greedy(m, prompt, NP, ids, 24, logits);
    nu_llm_model_free(m);
}

/* Gemma 2 at Q4_0_SOA sizes (dim 256, two heads of 128, FFN 512; Q4_0 repacked at open): the fused
 * decode layer adds each block's post-norm into x in the block's last product (nu_matvec_desc
 * .post_norm: the last workgroup of the repacked product's dispatch) by default, or leaves the
 * output pending for the next norm (post_norm_fusion -1, nu_op_norm_add_rms_norm). On the float
 * paths (x unrounded: NUVEC_MATVEC_SOA=dot=0) the logits agree within 1e-4 of their largest (only
 * the post-norm's sum of squares runs in another order) and are not the same bits (the default did
 * take the fused path); on the dot paths, where each product rounds its x to 8 bits a block and
 * so magnifies that difference (0.35% of the largest, lavapipe), the same greedy ids and within 3%. */
static void gemma_post_norms_on_the_product(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    const make_gguf_shape shape = {"gemma2-small", 256, 2, 2, 1, 512, 512, 64, 10000.0f, 128, "gemma2", 8, 0, false};
    char path[1024];
    snprintf(path, sizeof path, "%s/llm-gemma2-small-q4_0.gguf", nt_tmp_dir());
    make_gguf_options mo = {.shape = &shape, .dtype = NU_DTYPE_Q4_0, .path = path, .seed = 9};
    NT_OK(make_gguf(&mo, NULL));
    enum { NP = 10, N = 16, V = 512 };
    int32_t prompt[NP], ids[2][N];
    for (int i = 0; i < NP; i++)
        prompt[i] = (int32_t)(1 + 41 * i % 500);
    float *logits[2] = {malloc(sizeof(float) * N * V), malloc(sizeof(float) * N * V)};
    assert_true(logits[0] && logits[1]);
    for (int dot = 0; dot < 2; dot++) { /* a device each: a device reads NUVEC_MATVEC_SOA once */
        if (!dot)
            setenv("NUVEC_MATVEC_SOA", "dot=0", 1);
        else
            d = nt_open();
        for (int r = 0; r < 2; r++) {
            nu_llm_model_options o = {.post_norm_fusion = r ? -1 : 0};
            nu_llm_model *m;
            LLM_OK(nu_llm_model_open(d, path, &o, &m));
            greedy(m, prompt, NP, ids[r], N, logits[r]);
            nu_llm_model_free(m);
        }
        unsetenv("NUVEC_MATVEC_SOA");
        if (!dot)
            nt_close(d);
        assert_memory_equal(ids[0], ids[1], sizeof ids[0]);
        double worst = 0, big = 0;
        for (size_t i = 0; i < (size_t)N * V; i++) {
            worst = fmax(worst, fabs((double)logits[0][i] - logits[1][i]));
            big = fmax(big, fabs((double)logits[1][i]));
        }
        printf("gemma2-small, %s paths: post-norms on the product against pending: logits within %.3g of the largest "
               "%.3g\n", dot ? "dot" : "float", worst, big);
        if (!(worst <= (dot ? 0.03 : 1e-4) * big))
            fail_msg("gemma2-small, %s paths: the logits with post-norms on the product differ by %g (largest %g)",
                     dot ? "dot" : "float", worst, big);
        if (!dot && !memcmp(logits[0] + V, logits[1] + V, sizeof(float) * (N - 1) * V))
            fail_msg("gemma2-small: the decode logits are the same bits with and without post_norm_fusion");
    }
    free(logits[0]);
    free(logits[1]);
    unlink(path);
    nt_close(d);
}

static void repacked_q4_0_decodes_as_the_file(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    char path[1024];
    snprintf(path, sizeof path, "%s/llm-small-q4_0.gguf", nt_tmp_dir());
    make_gguf_options mo = {.shape = make_gguf_find_shape("small"), .dtype = NU_DTYPE_Q4_0, .path = path, .seed = 7};
    assert_non_null(mo.shape);
    NT_OK(make_gguf(&mo, NULL));
    enum { N = 24, V = 512 };
    int32_t ids[2][N];
    float *logits[2] = {malloc(sizeof(float) * N * V), malloc(sizeof(float) * N * V)};
    assert_non_null(logits[0]);
    assert_non_null(logits[1]);
    uint64_t active[2];
    for (int pass = 0; pass < 2; pass++) { /* 0: the float paths, 1: the defaults */
        if (!pass) {
            setenv("NUVEC_MATVEC", "dot=0", 1);
            setenv("NUVEC_MATVEC_SOA", "dot=0", 1);
        }
        for (int r = 0; r < 2; r++)
            small_q4_0_decode(d, path, r ? -1 : 0, ids[r], logits[r], &active[r]);
        unsetenv("NUVEC_MATVEC");
        unsetenv("NUVEC_MATVEC_SOA");
        /* The repacked matrices (2 layers of q, o 256 x 256, k, v 128 x 256, gate, up 512 x 256 and
         * down 256 x 512, and the output 512 x 256, 18 bytes a block of 32: 737,280 bytes) replace
         * the file's: 3 buffers more (one a layer and the output's) cost at most their rounding. */
        if (active[0] > active[1] + 3 * 65536)
            fail_msg("the repacked model holds %llu bytes more than the file's layout",
                     (unsigned long long)(active[0] - active[1]));
        assert_memory_equal(ids[0], ids[1], sizeof ids[0]);
        double worst = 0, big = 0;
        for (size_t i = 0; i < (size_t)N * V; i++) {
            worst = fmax(worst, fabs((double)logits[0][i] - logits[1][i]));
            big = fmax(big, fabs((double)logits[1][i]));
        }
        double bound = pass ? 0.03 * big : 1e-3;
        if (pass && worst == 0) /* the SOA kernel rounds x on its own: its logits differ a little */
            fail_msg("the repacked and the file's logits are bit-equal on the dot paths: no matrix was repacked");
        if (!(worst < bound))
            fail_msg("%s: repacked and file-layout Q4_0 logits differ by %g (bound %g)", pass ? "dot paths" : "float paths",
                     worst, bound);
    }
    free(logits[0]);
    free(logits[1]);
    unlink(path);
    nt_close(d);
}

/* A 20-token prompt in passes of 3 rows (7 passes, each recorded while the one before runs, its
 * activations from the memory the previous pass freed: in-flight reuse) gives the logits of one
 * 20-row pass (the matrix products) within 1e-4, and leaves no activation memory behind. */
static void prefill_passes_pipelined(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    int32_t prompt[20];
    for (int i = 0; i < 20; i++)
        prompt[i] = (int32_t)(1 + 29 * i % 500);
    float one[512], passes[512];
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, llm_model_path("stories260K/hf"), NULL, &m));
    LLM_OK(nu_llm_model_prefill(m, prompt, 20, one));
    nu_llm_model_free(m);
    nu_llm_model_options o = {.prefill_chunk = 3};
    LLM_OK(nu_llm_model_open(d, llm_model_path("stories260K/hf"), &o, &m));
    uint64_t before = nu_memory_active(d);
    LLM_OK(nu_llm_model_prefill(m, prompt, 20, passes));
    assert_int_equal(nu_llm_model_position(m), 20);
    assert_int_equal(nu_memory_active(d), before);
    double worst = 0;
    for (uint32_t j = 0; j < nu_llm_model_config(m)->vocab; j++)
        worst = fmax(worst, fabs((double)one[j] - passes[j]));
    if (!(worst < 1e-4))
        fail_msg("7 passes of 3 rows and one of 20 give logits %g apart", worst);
    nu_llm_model_free(m);
    nt_close(d);
}

/* The GGUF files: model.gguf (F32, interleaved RoPE rows) gives the README's ids as the folder
 * does, and its vocabulary the prompt's ids; the Q8_0 and Q4_0 files' prompt logits near F32's
 * (llama.cpp's own differ by a few hundredths, the README says; measured here on lavapipe: Q8_0
 * 0.047, Q4_0 0.40: bounds of twice as much, not an independent reference) and their first greedy
 * tokens the same (measured: all 40 for Q8_0, 17 for Q4_0); stories260K's model.gguf gives the
 * folder's 36 greedy ids. */
static void gguf_files(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    nu_llm_model *m;
    float ref[512], got[512];
    int32_t ids[40];
    LLM_OK(nu_llm_model_open(d, llm_model_path("aidreams260K/model.gguf"), NULL, &m));
    const nu_llm_tokenizer *tok = nu_llm_model_tokenizer(m);
    assert_non_null(tok);
    size_t n = 0;
    LLM_OK(nu_llm_tokenize(tok, "I dream of", 10, -1, ids, 40, &n));
    assert_int_equal(n, 7);
    assert_memory_equal(ids, DREAM_PROMPT, sizeof DREAM_PROMPT);
    LLM_OK(nu_llm_model_prefill(m, DREAM_PROMPT, 7, ref));
    nu_llm_model_reset(m);
    greedy(m, DREAM_PROMPT, 7, ids, 40, NULL);
    assert_memory_equal(ids, DREAM_IDS, sizeof ids);
    nu_llm_model_free(m);

    const char *files[2] = {"aidreams260K/model-q8_0.gguf", "aidreams260K/model-q4_0.gguf"};
    const double tol[2] = {0.1, 0.8};
    const size_t same[2] = {40, 16};
    for (int i = 0; i < 2; i++) {
        LLM_OK(nu_llm_model_open(d, llm_model_path(files[i]), NULL, &m));
        LLM_OK(nu_llm_model_prefill(m, DREAM_PROMPT, 7, got));
        double worst = 0;
        for (int j = 0; j < 512; j++)
            worst = fmax(worst, fabs((double)got[j] - ref[j]));
        print_message("%s: prompt logits within %g of F32's\n", files[i], worst);
        if (!(worst < tol[i]))
            fail_msg("%s: logits differ from F32's by %g (tolerance %g)", files[i], worst, tol[i]);
        nu_llm_model_reset(m);
        greedy(m, DREAM_PROMPT, 7, ids, 40, NULL);
        assert_memory_equal(ids, DREAM_IDS, same[i] * sizeof *ids);
        nu_llm_model_free(m);
    }

    int32_t bos = 1, hf[36], gg[36];
    LLM_OK(nu_llm_model_open(d, llm_model_path("stories260K/hf"), NULL, &m));
    greedy(m, &bos, 1, hf, 36, NULL);
    nu_llm_model_free(m);
    LLM_OK(nu_llm_model_open(d, llm_model_path("stories260K/model.gguf"), NULL, &m));
    greedy(m, &bos, 1, gg, 36, NULL);
    assert_memory_equal(gg, hf, sizeof gg);
    nu_llm_model_free(m);
    nt_close(d);
}

/* on_token's record: the ids it saw, and false once it saw `stop_after` of them (0: never). */
typedef struct seen_ids {
    int32_t ids[64];
    uint32_t count, stop_after;
} seen_ids;

static bool on_token(void *user, int32_t id)
{
    seen_ids *s = user;
    assert_true(s->count < 64);
    s->ids[s->count++] = id;
    return !s->stop_after || s->count < s->stop_after;
}

/* After a greedy decode left the model at prompt + `fed` tokens, decode `last` must give the
 * reference's next id, ref[fed + 1] (ref[0] is the prompt's argmax), with its logits. */
static void continues_like_reference(nu_llm_model *m, uint32_t np, int32_t last, const int32_t *ref,
                                     const float *ref_logits, uint32_t fed, const char *what)
{
    uint32_t V = nu_llm_model_config(m)->vocab;
    if (nu_llm_model_position(m) != np + fed)
        fail_msg("%s: position %u, %u expected", what, nu_llm_model_position(m), np + fed);
    float *logits = malloc(V * sizeof *logits);
    assert_non_null(logits);
    LLM_OK(nu_llm_model_decode(m, last, logits));
    double worst = 0;
    for (uint32_t j = 0; j < V; j++)
        worst = fmax(worst, fabs((double)logits[j] - ref_logits[(size_t)(fed + 1) * V + j]));
    if (argmax(logits, V) != ref[fed + 1] || !(worst < 1e-5))
        fail_msg("%s: the next decode gives %d (logits within %g), the reference %d", what, argmax(logits, V), worst,
                 ref[fed + 1]);
    free(logits);
}

/* nu_llm_model_decode_greedy (the greedy graphs: the argmax on the GPU, two launches queued)
 * against the logits read back and the argmax on the CPU, on every shared model file: the same
 * 40 ids; a stop_token and an on_token stop at the right id, with the position as if decoded one
 * by one (the next decode's logits are the reference's, though speculative launches wrote rows
 * past the stop); two calls in a row; n = 0 and 1; the per-token path (decode_by_commands), 1 and
 * 3 launches in flight and 3 and 8 tokens a launch. */
static void greedy_decode_matches_cpu_argmax(void **state)
{
    (void)state;
    enum { N = 40, R = N + 2 };
    nu_device *d = nt_open();
    static const char *const files[] = {"aidreams260K/hf",         "aidreams260K/model.gguf", "aidreams260K/model-q8_0.gguf",
                                        "aidreams260K/model-q4_0.gguf", "stories260K/hf",      "stories260K/model.gguf"};
    int32_t bos = 1;
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        bool dream = f < 4;
        const int32_t *prompt = dream ? DREAM_PROMPT : &bos;
        uint32_t np = dream ? 7 : 1;
        /* The first file also by the per-token path, with 1 and 3 launches in flight, and with 3
         * and 8 tokens a launch (NUVEC_LLM_GREEDY_DEPTH, NUVEC_LLM_GREEDY_UNROLL). */
        static const struct {
            bool commands;
            const char *depth, *unroll;
        } variants[] = {{false, NULL, NULL}, {true, NULL, NULL}, {false, "1", NULL},
                        {false, "3", NULL},  {false, "2", "3"},  {false, "1", "8"}};
        for (size_t v = 0; v < (f == 0 ? sizeof variants / sizeof *variants : 1); v++) {
            char what[160];
            snprintf(what, sizeof what, "%s%s depth %s unroll %s", files[f], variants[v].commands ? " (decode_by_commands)" : "",
                     variants[v].depth ? variants[v].depth : "-", variants[v].unroll ? variants[v].unroll : "-");
            nu_llm_model_options o = {.decode_by_commands = variants[v].commands};
            nu_llm_model *m;
            if (variants[v].depth)
                setenv("NUVEC_LLM_GREEDY_DEPTH", variants[v].depth, 1);
            if (variants[v].unroll)
                setenv("NUVEC_LLM_GREEDY_UNROLL", variants[v].unroll, 1);
            LLM_OK(nu_llm_model_open(d, llm_model_path(files[f]), &o, &m));
            uint32_t V = nu_llm_model_config(m)->vocab;
            int32_t ref[R], out[N + 1];
            float *ref_logits = malloc((size_t)R * V * sizeof *ref_logits);
            assert_non_null(ref_logits);
            greedy(m, prompt, np, ref, R, ref_logits); /* ref[k + 1] is the greedy token after ref[k] */

            /* 40 tokens from the prompt's argmax. */
            uint32_t produced = 99;
            nu_llm_model_reset(m);
            LLM_OK(nu_llm_model_prefill(m, prompt, np, NULL));
            out[N] = -7;
            LLM_OK(nu_llm_model_decode_greedy(m, ref[0], N, out, &produced, NU_LLM_NO_TOKEN, NULL, NULL));
            assert_int_equal(produced, N);
            if (memcmp(out, ref + 1, N * sizeof *out))
                for (int k = 0; k < N; k++)
                    if (out[k] != ref[k + 1])
                        fail_msg("%s: greedy token %d is %d, %d with the CPU's argmax", what, k, out[k], ref[k + 1]);
            assert_int_equal(out[N], -7);
            continues_like_reference(m, np, out[N - 1], ref, ref_logits, N, what);

            /* stop_token: the first time ref[13]'s id comes (maybe earlier than 12). */
            int32_t stop = ref[13];
            uint32_t at = 0;
            while (ref[at + 1] != stop)
                at++;
            nu_llm_model_reset(m);
            LLM_OK(nu_llm_model_prefill(m, prompt, np, NULL));
            seen_ids seen = {.count = 0};
            LLM_OK(nu_llm_model_decode_greedy(m, ref[0], N, out, &produced, stop, on_token, &seen));
            assert_int_equal(produced, at + 1);
            assert_int_equal(seen.count, at + 1); /* on_token saw the stop token too */
            assert_memory_equal(out, ref + 1, produced * sizeof *out);
            assert_memory_equal(seen.ids, ref + 1, produced * sizeof *out);
            continues_like_reference(m, np, out[at], ref, ref_logits, at + 1, what);

            /* on_token stops after 7; then a second call goes on from there (its token 7 is
             * ref[8]'s successor). */
            nu_llm_model_reset(m);
            LLM_OK(nu_llm_model_prefill(m, prompt, np, NULL));
            seen = (seen_ids){.stop_after = 7};
            LLM_OK(nu_llm_model_decode_greedy(m, ref[0], N, out, &produced, NU_LLM_NO_TOKEN, on_token, &seen));
            assert_int_equal(produced, 7);
            assert_int_equal(seen.count, 7);
            assert_memory_equal(out, ref + 1, 7 * sizeof *out);
            assert_int_equal(nu_llm_model_position(m), np + 7);
            LLM_OK(nu_llm_model_decode_greedy(m, out[6], N - 7, out + 7, &produced, NU_LLM_NO_TOKEN, NULL, NULL));
            assert_int_equal(produced, N - 7);
            assert_memory_equal(out, ref + 1, N * sizeof *out);
            continues_like_reference(m, np, out[N - 1], ref, ref_logits, N, what);

            /* n = 1, then n = 0 (nothing happens, out untouched). */
            nu_llm_model_reset(m);
            LLM_OK(nu_llm_model_prefill(m, prompt, np, NULL));
            LLM_OK(nu_llm_model_decode_greedy(m, ref[0], 1, out, &produced, NU_LLM_NO_TOKEN, NULL, NULL));
            assert_int_equal(produced, 1);
            assert_int_equal(out[0], ref[1]);
            out[0] = -7;
            produced = 99;
            LLM_OK(nu_llm_model_decode_greedy(m, ref[1], 0, out, &produced, NU_LLM_NO_TOKEN, NULL, NULL));
            assert_int_equal(produced, 0);
            assert_int_equal(out[0], -7);
            continues_like_reference(m, np, ref[1], ref, ref_logits, 1, what);
            free(ref_logits);
            nu_llm_model_free(m);
            unsetenv("NUVEC_LLM_GREEDY_DEPTH");
            unsetenv("NUVEC_LLM_GREEDY_UNROLL");
        }
    }
    nt_close(d);
}

/* decode_greedy's refusals: NULL arguments, bad ids, a cache that n tokens would overflow
 * (nothing runs), no host memory; *produced cleared. */
/* Reading weights ahead (nu_llm_model_options.prefetch, NUVEC_LLM_PREFETCH's plans) changes no
 * result: the decode graph's logits bit for bit and greedy decode's ids (its ring of graphs) as
 * without, on aidreams260K (the fused layer); a bad plan is refused naming the variable. */
static void decode_reading_ahead(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    enum { N = 12 };
    static const char *const plans[] = {NULL, NULL, "o=rope gu=attn:1 down=o qkv=gu", "o=attn,gu=rope,down=gu,qkv=down:1"};
    float *want = NULL;
    for (int v = 0; v < 4; v++) {
        if (plans[v])
            setenv("NUVEC_LLM_PREFETCH", plans[v], 1);
        nu_llm_model_options o = {.prefetch = v == 0 ? -1 : 1};
        nu_llm_model *m;
        LLM_OK(nu_llm_model_open(d, llm_model_path("aidreams260K/hf"), &o, &m));
        uint32_t V = nu_llm_model_config(m)->vocab;
        float *got = malloc((size_t)N * V * sizeof *got);
        assert_non_null(got);
        int32_t ids[N], out[N];
        greedy(m, DREAM_PROMPT, 7, ids, N, got);
        assert_memory_equal(ids, DREAM_IDS, sizeof ids);
        if (!want)
            want = got;
        else if (memcmp(got, want, (size_t)N * V * sizeof *got))
            fail_msg("the logits with weights read ahead (plan %s) differ from those without", plans[v] ? plans[v] : "default");
        nu_llm_model_reset(m);
        LLM_OK(nu_llm_model_prefill(m, DREAM_PROMPT, 7, NULL));
        uint32_t produced;
        LLM_OK(nu_llm_model_decode_greedy(m, DREAM_IDS[0], N, out, &produced, -1, NULL, NULL));
        assert_int_equal(produced, N);
        assert_memory_equal(out, DREAM_IDS + 1, sizeof out);
        nu_llm_model_free(m);
        if (got != want)
            free(got);
        unsetenv("NUVEC_LLM_PREFETCH");
    }
    free(want);
    setenv("NUVEC_LLM_PREFETCH", "o=gu", 1); /* the output product is read before the gate-up level */
    nu_llm_model *m = NULL;
    assert_int_equal(nu_llm_model_open(d, llm_model_path("aidreams260K/hf"), NULL, &m), NU_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(nu_llm_error_message(), "NUVEC_LLM_PREFETCH=o=gu"));
    assert_null(m);
    unsetenv("NUVEC_LLM_PREFETCH");
    nt_close(d);
}

static void greedy_decode_refusals(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    nu_llm_model *m;
    nu_llm_model_options o = {.max_positions = 16};
    LLM_OK(nu_llm_model_open(d, llm_model_path("aidreams260K/hf"), &o, &m));
    int32_t out[16];
    uint32_t produced = 99;
    assert_int_equal(nu_llm_model_decode_greedy(NULL, 1, 1, out, &produced, -1, NULL, NULL), NU_ERROR_INVALID_ARGUMENT);
    assert_int_equal(produced, 0);
    assert_non_null(strstr(nu_llm_error_message(), "NULL model"));
    assert_int_equal(nu_llm_model_decode_greedy(m, 1, 1, out, NULL, -1, NULL, NULL), NU_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(nu_llm_error_message(), "NULL produced"));
    produced = 99;
    assert_int_equal(nu_llm_model_decode_greedy(m, 1, 1, NULL, &produced, -1, NULL, NULL), NU_ERROR_INVALID_ARGUMENT);
    assert_int_equal(produced, 0);
    assert_non_null(strstr(nu_llm_error_message(), "NULL out"));
    LLM_OK(nu_llm_model_decode_greedy(m, 1, 0, NULL, &produced, -1, NULL, NULL)); /* n = 0 needs no out */
    assert_int_equal(nu_llm_model_decode_greedy(m, 512, 1, out, &produced, -1, NULL, NULL), NU_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(nu_llm_error_message(), "token 512"));
    assert_int_equal(nu_llm_model_decode_greedy(m, -1, 1, out, &produced, -1, NULL, NULL), NU_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nu_llm_model_position(m), 0);

    LLM_OK(nu_llm_model_prefill(m, DREAM_PROMPT, 7, NULL));
    produced = 99;
    assert_int_equal(nu_llm_model_decode_greedy(m, 429, 10, out, &produced, -1, NULL, NULL), NU_ERROR_OUT_OF_RANGE);
    assert_int_equal(produced, 0);
    assert_non_null(strstr(nu_llm_error_message(), "overflow"));
    assert_int_equal(nu_llm_model_position(m), 7);
    /* 9 fill the cache: the 9 launches are at positions 7 .. 15. */
    LLM_OK(nu_llm_model_decode_greedy(m, 429, 9, out, &produced, -1, NULL, NULL));
    assert_int_equal(produced, 9);
    assert_memory_equal(out, DREAM_IDS + 1, 9 * sizeof *out);
    assert_int_equal(nu_llm_model_position(m), 16);
    assert_int_equal(nu_llm_model_decode_greedy(m, out[8], 1, out, &produced, -1, NULL, NULL), NU_ERROR_OUT_OF_RANGE);
    LLM_OK(nu_llm_model_decode_greedy(m, out[8], 0, out, &produced, -1, NULL, NULL));
    assert_int_equal(nu_llm_model_decode(m, out[8], NULL), NU_ERROR_OUT_OF_RANGE);
    nu_llm_model_free(m);

    /* 8 tokens a launch: the second launch's passes run to position 22, past the cache's end
     * (the speculative tokens' rows are the cache's slack). */
    setenv("NUVEC_LLM_GREEDY_UNROLL", "8", 1);
    LLM_OK(nu_llm_model_open(d, llm_model_path("aidreams260K/hf"), &o, &m));
    LLM_OK(nu_llm_model_prefill(m, DREAM_PROMPT, 7, NULL));
    LLM_OK(nu_llm_model_decode_greedy(m, 429, 9, out, &produced, -1, NULL, NULL));
    unsetenv("NUVEC_LLM_GREEDY_UNROLL");
    assert_int_equal(produced, 9);
    assert_memory_equal(out, DREAM_IDS + 1, 9 * sizeof *out);
    assert_int_equal(nu_llm_model_position(m), 16);
    nu_llm_model_free(m);

    /* The per-token path's logits allocation failed: refused, nothing decoded. */
    nu_llm_model_options cmds = {.decode_by_commands = true};
    LLM_OK(nu_llm_model_open(d, llm_model_path("aidreams260K/hf"), &cmds, &m));
    LLM_OK(nu_llm_model_prefill(m, DREAM_PROMPT, 7, NULL));
    nu_llm__fail_after(0);
    produced = 99;
    nu_status st = nu_llm_model_decode_greedy(m, 429, 4, out, &produced, -1, NULL, NULL);
    assert_true(nu_llm__fail_after(-1) > 0);
    assert_int_equal(st, NU_ERROR_HOST_OUT_OF_MEMORY);
    assert_int_equal(produced, 0);
    assert_int_equal(nu_llm_model_position(m), 7);
    LLM_OK(nu_llm_model_decode_greedy(m, 429, 4, out, &produced, -1, NULL, NULL));
    assert_memory_equal(out, DREAM_IDS + 1, 4 * sizeof *out);
    nu_llm_model_free(m);
    nt_close(d);
}

/* A GGUF file of `arch` with only that key (no tensors). */
static const char *tiny_gguf(const char *arch)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s/llm_%s.gguf", nt_tmp_dir(), arch);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint32_t version = 3, type = 8;
    uint64_t tensors = 0, kvs = 1, klen = 20, vlen = strlen(arch);
    fwrite("GGUF", 1, 4, f);
    fwrite(&version, 4, 1, f);
    fwrite(&tensors, 8, 1, f);
    fwrite(&kvs, 8, 1, f);
    fwrite(&klen, 8, 1, f);
    fwrite("general.architecture", 1, 20, f);
    fwrite(&type, 4, 1, f);
    fwrite(&vlen, 8, 1, f);
    fwrite(arch, 1, vlen, f);
    fclose(f);
    return path;
}

/* aidreams260K's tokenizer.json as the model's tokenizer: the README's prompt ids and text;
 * stories260K has none, and says so. */
static void tokenizer_json(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, llm_model_path("aidreams260K/hf"), NULL, &m));
    const nu_llm_tokenizer *tok = nu_llm_model_tokenizer(m);
    assert_non_null(tok);
    assert_string_equal(nu_llm_model_tokenizer_note(m), "");
    static const struct {
        const char *text;
        int32_t ids[13];
        size_t n;
    } prompts[] = {{"I dream of", {1, 303, 281, 269, 435, 447, 275}, 7},
                   {"My thoughts drift", {1, 429, 478, 451, 277, 437, 444, 305, 293, 281, 322, 443, 434}, 13},
                   {"I remember", {1, 303, 306, 447, 430, 371, 261}, 7}};
    for (size_t i = 0; i < 3; i++) {
        int32_t ids[64];
        size_t n = 0;
        LLM_OK(nu_llm_tokenize(tok, prompts[i].text, strlen(prompts[i].text), 1, ids, 64, &n));
        assert_int_equal(n, prompts[i].n);
        assert_memory_equal(ids, prompts[i].ids, n * sizeof *ids);
    }
    int32_t all[47];
    memcpy(all, DREAM_PROMPT, sizeof DREAM_PROMPT);
    memcpy(all + 7, DREAM_IDS, sizeof DREAM_IDS);
    char text[512];
    size_t len = 0;
    LLM_OK(nu_llm_detokenize(tok, all, 47, text, sizeof text, &len));
    assert_string_equal(text, "I dream of 0.000000. Dimensions unfold, as I softly refine, as I softly ref");
    nu_llm_model_free(m);
    LLM_OK(nu_llm_model_open(d, llm_model_path("stories260K/hf"), NULL, &m));
    assert_null(nu_llm_model_tokenizer(m));
    assert_non_null(strstr(nu_llm_model_tokenizer_note(m), "tokenizer.json"));
    nu_llm_model_free(m);
    nt_close(d);
}

/* A folder in the tests' tmp dir with `config` as config.json and (when `weights`) a link to
 * aidreams260K's safetensors. */
static const char *make_folder(const char *name, const char *config, bool weights)
{
    static char dir[1024];
    char target[1024];
    snprintf(dir, sizeof dir, "%s/llm_%s", nt_tmp_dir(), name);
    int n = snprintf(target, sizeof target, "%s/model.safetensors", llm_model_path("aidreams260K/hf"));
    assert_true(n > 0 && (size_t)n < sizeof target);
    return llm_make_folder(dir, config, weights ? target : NULL);
}

static void refuses_bad_models(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    nu_llm_model *m = (nu_llm_model *)1;
    assert_int_equal(nu_llm_model_open(d, NULL, NULL, &m), NU_ERROR_INVALID_ARGUMENT);
    assert_null(m);
    assert_int_equal(nu_llm_model_open(NULL, "x", NULL, &m), NU_ERROR_INVALID_ARGUMENT);
    nu_llm_model_options bad_kv = {.kv_dtype = NU_DTYPE_I32};
    assert_int_equal(nu_llm_model_open(d, llm_model_path("aidreams260K/hf"), &bad_kv, &m), NU_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(nu_llm_error_message(), "kv_dtype"));
    nu_llm_model_options too_long = {.max_positions = 129};
    assert_int_equal(nu_llm_model_open(d, llm_model_path("aidreams260K/hf"), &too_long, &m), NU_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(nu_llm_error_message(), "max_positions"));

    char missing[1100];
    snprintf(missing, sizeof missing, "%s/llm_no_such_folder", nt_tmp_dir());
    llm_expect_refused(d, missing, NU_ERROR_IO, "config.json");
    llm_expect_refused(d, tiny_gguf("mistral"), NU_ERROR_UNSUPPORTED, "architecture mistral");
    llm_expect_refused(d, tiny_gguf("llama"), NU_ERROR_FORMAT, "llama.embedding_length");
    char no_gguf[1100];
    snprintf(no_gguf, sizeof no_gguf, "%s/llm_no_such.gguf", nt_tmp_dir());
    llm_expect_refused(d, no_gguf, NU_ERROR_IO, "llm_no_such.gguf");
    llm_expect_refused(d, make_folder("no_weights", llm_config_with(NULL, NULL), false), NU_ERROR_IO,
                   "no .safetensors");
    llm_expect_refused(d, make_folder("not_json", "{\"architectures\": [", true), NU_ERROR_FORMAT, "not valid JSON");
    llm_expect_refused(d, make_folder("neox", llm_config_with("architectures", "[\"GPTNeoXForCausalLM\"]"), true),
                       NU_ERROR_UNSUPPORTED, "GPTNeoXForCausalLM");
    llm_expect_refused(d, make_folder("qwen2moe", llm_config_with("architectures", "[\"Qwen2MoeForCausalLM\"]"), true),
                       NU_ERROR_UNSUPPORTED, "Qwen2MoeForCausalLM is not supported: mixture-of-experts");
    /* Mistral's folders are Llama's layer (llm/arch/llama.c): this one opens */
    LLM_OK(nu_llm_model_open(d, make_folder("mistral", llm_config_with("architectures", "[\"MistralForCausalLM\"]"), true),
                             NULL, &m));
    nu_llm_model_free(m);
    llm_expect_refused(d, make_folder("no_arch", llm_config_with("architectures", NULL), true), NU_ERROR_FORMAT, "architectures");
    llm_expect_refused(d, make_folder("no_layers", llm_config_with("num_hidden_layers", NULL), true),
                   NU_ERROR_FORMAT, "num_hidden_layers");
    llm_expect_refused(d, make_folder("bad_dim", llm_config_with("hidden_size", "-3"), true),
                   NU_ERROR_FORMAT, "hidden_size");
    /* Shapes: the file's embedding is [512, 64], its FFN 172 wide, its q_proj [64, 64]. */
    llm_expect_refused(d, make_folder("vocab", llm_config_with("vocab_size", "1000"), true),
                   NU_ERROR_FORMAT, "embed");
    llm_expect_refused(d, make_folder("ffn", llm_config_with("intermediate_size", "100"), true),
                   NU_ERROR_FORMAT, "gate");
    llm_expect_refused(d, make_folder("layers", llm_config_with("num_hidden_layers", "5"), true),
                   NU_ERROR_FORMAT, "model.layers.4");
    llm_expect_refused(d, make_folder("untied", llm_config_with("tie_word_embeddings", "false"), true),
                   NU_ERROR_FORMAT, "lm_head.weight");
    llm_expect_refused(d, make_folder("head_dim", llm_config_with("num_attention_heads", "16"), true),
                   NU_ERROR_UNSUPPORTED, "head_dim 4");
    llm_expect_refused(d, make_folder("gqa", llm_config_with("num_key_value_heads", "3"), true),
                   NU_ERROR_FORMAT, "multiple");
    llm_expect_refused(d, make_folder("scaling", llm_config_with("rope_scaling", "{\"type\": \"dynamic\"}"), true),
                   NU_ERROR_UNSUPPORTED, "rope_scaling");

    /* Bad calls on a good model. */
    LLM_OK(nu_llm_model_open(d, llm_model_path("aidreams260K/hf"), NULL, &m));
    int32_t bad[2] = {1, 512};
    assert_int_equal(nu_llm_model_prefill(m, bad, 2, NULL), NU_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(nu_llm_error_message(), "token 1 is 512"));
    assert_int_equal(nu_llm_model_decode(m, -1, NULL), NU_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nu_llm_model_prefill(m, bad, 0, NULL), NU_ERROR_INVALID_ARGUMENT);
    int32_t many[129];
    for (int i = 0; i < 129; i++)
        many[i] = 1;
    assert_int_equal(nu_llm_model_prefill(m, many, 129, NULL), NU_ERROR_OUT_OF_RANGE);
    assert_int_equal(nu_llm_model_position(m), 0);
    LLM_OK(nu_llm_model_prefill(m, many, 128, NULL)); /* fills the cache (chunks of 128) */
    assert_int_equal(nu_llm_model_decode(m, 1, NULL), NU_ERROR_OUT_OF_RANGE);
    assert_non_null(strstr(nu_llm_error_message(), "overflow"));
    nu_llm_model_free(m);
    nu_llm_model_free(NULL);
    nt_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(aidreams_greedy_matches_the_readme),
        cmocka_unit_test(aidreams_bf16_and_f16_weights),
        cmocka_unit_test(stories_decode_graph_against_prefill),
        cmocka_unit_test(prefill_passes_pipelined),
        cmocka_unit_test(gguf_files),
        cmocka_unit_test(repacked_q4_0_decodes_as_the_file),
        cmocka_unit_test(gemma_post_norms_on_the_product),
        cmocka_unit_test(greedy_decode_matches_cpu_argmax),
        cmocka_unit_test(greedy_decode_refusals),
        cmocka_unit_test(decode_reading_ahead),
        cmocka_unit_test(tokenizer_json),
        cmocka_unit_test(refuses_bad_models),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
