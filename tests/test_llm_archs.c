/* test_llm_archs.c: the architectures beside llama (llm/arch/<name>.c) end to end on GGUF files of
 * random weights from make-gguf's tiny shapes: for each of llama, qwen2, qwen3, gemma2, gemma3
 * and phi3 (and Gemma 2 at its real head_dim of 256), the logits of a short prompt, then of decode
 * steps past the sliding window (8 positions in the tiny shapes), and of a prefill whose last rows
 * are past the window, each within 1e-4 of their range of the float64 reference forward
 * (tests/llm_reference.c), by the fused decode layer and by the separate ops; Phi-3 with LongRoPE
 * factors (short ones within the original context, long ones past it); two sequences decoded in
 * one batch (Gemma 2: the per-row attention with a window and softcap; Phi-3: fused q|k|v; Gemma
 * 3: the per-head q and k norms, in attention's fresh per-row form) give each the ids it gets alone; Hugging Face folders of the same tensors (transformers' names and
 * config.json, Gemma's norms as w for x * (1 + w)) give the same logits; variants nuvec does not
 * run are refused by name. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm_files.h"
#include "llm_reference.h"
#include "llm_util.h"
#include "make_gguf.h"
#include "nuvec_llm.h"

enum { V = 512, N = 14, WINDOW = 8, CACHE = 32 };

static const char *tmp_path(const char *name)
{
    static char path[8][1100];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, sizeof path[0], "%s/llm_archs_%s", nt_tmp_dir(), name);
    return p;
}

/* make-gguf's file of `shape` in F32 at a tmp path named after it. */
static const char *arch_file(const make_gguf_shape *shape)
{
    char name[96];
    snprintf(name, sizeof name, "%s.gguf", shape->name);
    const char *path = tmp_path(name);
    make_gguf_options o = {.shape = shape, .dtype = NU_DTYPE_F32, .path = path, .seed = 11, .threads = 1};
    nu_status st = make_gguf(&o, NULL);
    if (st != NU_OK)
        fail_msg("make_gguf %s: %s", shape->name, nu_error_message(NULL));
    return path;
}

static const make_gguf_shape *shape_of(const char *name)
{
    const make_gguf_shape *s = make_gguf_find_shape(name);
    if (!s)
        fail_msg("no make-gguf shape %s", name);
    return s;
}

static int32_t token(uint32_t i) { return i ? (int32_t)(3 + (i * 97) % (V - 3)) : 1; }

/* The largest difference of got from want[V], over want's range (which must not be 0). */
static double off(const float *got, const double *want)
{
    double worst = 0, lo = INFINITY, hi = -INFINITY;
    for (uint32_t i = 0; i < V; i++) {
        worst = fmax(worst, fabs(got[i] - want[i]));
        lo = fmin(lo, want[i]), hi = fmax(hi, want[i]);
    }
    assert_true(hi > lo);
    return worst / (hi - lo);
}

/* The model at `path` (fusion 1 or -1; embed_in_host as the option) against the reference of the GGUF file `ref_path`: a prompt of 4 tokens, then decode
 * steps to position N - 1; then, reset, a prompt of N - 2 tokens (its last rows past the window)
 * and one decode step. Returns the worst difference over the range. */
static double against_reference(nu_device *d, const char *path, const char *ref_path, int fusion, uint32_t cache,
                                int embed_in_host)
{
    nu_llm_model_options o = {.max_positions = cache, .fusion = fusion, .embed_in_host = embed_in_host};
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, path, &o, &m));
    assert_int_equal(nu_llm_model_config(m)->vocab, V);
    llm_ref *ref = llm_ref_open(ref_path);
    assert_non_null(ref);
    llm_ref_set_positions(ref, cache);
    int32_t tokens[N];
    for (uint32_t i = 0; i < N; i++)
        tokens[i] = token(i);
    double *want = malloc((size_t)N * V * sizeof *want), worst = 0;
    float got[V];
    llm_ref_forward(ref, tokens, N, want);
    LLM_OK(nu_llm_model_prefill(m, tokens, 4, got));
    worst = fmax(worst, off(got, want + 3 * V));
    for (uint32_t at = 4; at < N; at++) {
        LLM_OK(nu_llm_model_decode(m, tokens[at], got));
        worst = fmax(worst, off(got, want + (size_t)at * V));
    }
    nu_llm_model_reset(m);
    LLM_OK(nu_llm_model_prefill(m, tokens, N - 2, got));
    worst = fmax(worst, off(got, want + (size_t)(N - 3) * V));
    LLM_OK(nu_llm_model_decode(m, tokens[N - 2], got));
    worst = fmax(worst, off(got, want + (size_t)(N - 2) * V));
    free(want);
    llm_ref_free(ref);
    nu_llm_model_free(m);
    return worst;
}

static void check_arch(nu_device *d, const make_gguf_shape *shape)
{
    const char *path = arch_file(shape);
    for (int fusion = 1; fusion >= -1; fusion -= 2) {
        double worst = against_reference(d, path, path, fusion, CACHE, 0);
        printf("%-12s %s: logits within %.3g of the reference's range\n", shape->name,
               fusion > 0 ? "fused" : "separate ops", worst);
        if (worst > 1e-4)
            fail_msg("%s (fusion %d): logits %g of their range off the reference's", shape->name, fusion, worst);
    }
}

static void llama_and_qwen(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    check_arch(d, shape_of("tiny"));
    check_arch(d, shape_of("qwen2-tiny"));
    check_arch(d, shape_of("qwen3-tiny"));
    nt_close(d);
}

static void gemma(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    check_arch(d, shape_of("gemma2-tiny"));
    check_arch(d, shape_of("gemma3-tiny"));
    /* Gemma's real head size: 256 (a query of 2 heads of 256 from a model width of 64) */
    const make_gguf_shape hd256 = {"gemma2-hd256", 64, 2, 2, 1, 128, V, 64, 10000.0f, 256, "gemma2", WINDOW, 0, false};
    check_arch(d, &hd256);
    nt_close(d);
}

/* Phi-3 plain, and with LongRoPE factors (the 128K models'): the short ones serve a cache within
 * rope.scaling.original_context_length, the long ones a larger one; cos and sin scaled by the
 * attention factor. */
static void phi3(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    const make_gguf_shape *shape = shape_of("phi3-tiny");
    check_arch(d, shape);
    const uint32_t half = 96 / 4 / 2;
    float lf[12], sf[12];
    for (uint32_t i = 0; i < half; i++)
        lf[i] = 1.0f + 3.0f * (float)i, sf[i] = 1.0f + 0.25f * (float)i;
    const llm_gguf_key keys[] = {{"phi3.rope.scaling.original_context_length", NU_GGUF_UINT32, 24, false, NULL},
                                 {"phi3.rope.scaling.attn_factor", NU_GGUF_FLOAT32, 1.1, false, NULL}};
    const llm_gguf_tensor factors[] = {{"rope_factors_long.weight", 1, {half, 0}, 0, lf},
                                       {"rope_factors_short.weight", 1, {half, 0}, 0, sf}};
    llm_gguf_edit e = {.keys = keys, .key_count = 2, .tensors = factors, .tensor_count = 2};
    const char *longrope = tmp_path("phi3_longrope.gguf");
    assert_true(llm_copy_gguf(arch_file(shape), longrope, &e));
    double worst_short = against_reference(d, longrope, longrope, 1, 24, 0),
           worst_long = against_reference(d, longrope, longrope, 1, 32, 0);
    printf("phi3 LongRoPE: short factors within %.3g, long within %.3g of the range\n", worst_short, worst_long);
    assert_true(worst_short <= 1e-4 && worst_long <= 1e-4);
    /* the two choices differ: the long factors with a cache of 24 are not the reference's */
    nu_llm_model_options o = {.max_positions = 24};
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, longrope, &o, &m));
    llm_ref *ref = llm_ref_open(longrope);
    llm_ref_set_positions(ref, 32);
    int32_t tokens[N];
    for (uint32_t i = 0; i < N; i++)
        tokens[i] = token(i);
    double *want = malloc((size_t)N * V * sizeof *want);
    float got[V];
    llm_ref_forward(ref, tokens, N, want);
    LLM_OK(nu_llm_model_prefill(m, tokens, N, got));
    assert_true(off(got, want + (size_t)(N - 1) * V) > 1e-3);
    free(want);
    llm_ref_free(ref);
    nu_llm_model_free(m);
    /* one factor tensor without the other */
    llm_gguf_edit one = {.keys = keys, .key_count = 2, .tensors = factors, .tensor_count = 1};
    const char *half_only = tmp_path("phi3_long_only.gguf");
    assert_true(llm_copy_gguf(arch_file(shape), half_only, &one));
    llm_expect_refused(d, half_only, NU_ERROR_FORMAT, "rope_factors_long.weight without rope_factors_short.weight");
    nt_close(d);
}

/* The greedy ids of sequence s (a prompt of 3 + 3 s tokens, then GEN) alone in slot 0. */
enum { GEN = 12, SEQS = 2 };
static uint32_t prompt(int s, int32_t *out)
{
    uint32_t n = 3 + 3 * (uint32_t)s;
    for (uint32_t i = 0; i < n; i++)
        out[i] = token(i * 5 + (uint32_t)s * 11);
    out[0] = 1;
    return n;
}

static void batch_matches_alone(nu_device *d, const make_gguf_shape *shape)
{
    const char *path = arch_file(shape);
    nu_llm_model_options o = {.max_positions = CACHE, .slots = SEQS + 1}; /* slot 0 is the model's own */
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, path, &o, &m));
    int32_t alone[SEQS][GEN], together[SEQS][GEN], p[SEQS][16];
    uint32_t np[SEQS];
    for (int s = 0; s < SEQS; s++) {
        np[s] = prompt(s, p[s]);
        nu_llm_model_reset(m);
        uint32_t produced = 0;
        float logits[V];
        LLM_OK(nu_llm_model_prefill(m, p[s], np[s], logits));
        int32_t first = 0;
        for (int i = 1; i < V; i++)
            first = logits[i] > logits[first] ? i : first;
        alone[s][0] = first;
        LLM_OK(nu_llm_model_decode_greedy(m, first, GEN - 1, alone[s] + 1, &produced, -1, NULL, NULL));
        assert_int_equal(produced, GEN - 1);
    }
    nu_llm_model_reset(m);
    uint32_t slot[SEQS];
    for (int s = 0; s < SEQS; s++)
        LLM_OK(nu_llm_model_seq_acquire(m, NULL, 0, &slot[s], NULL));
    /* the prompts in one step (two prefill passes), then every token of both in one batched decode */
    nu_llm_row rows[32];
    uint32_t n = 0;
    for (int s = 0; s < SEQS; s++)
        for (uint32_t j = 0; j < np[s]; j++)
            rows[n++] = (nu_llm_row){p[s][j], slot[s], j + 1 == np[s] ? NU_LLM_OUTPUT_ARGMAX : NU_LLM_OUTPUT_NONE};
    int32_t ids[SEQS];
    LLM_OK(nu_llm_model_step(m, rows, n, NULL, ids));
    for (int k = 0; k < GEN; k++) {
        for (int s = 0; s < SEQS; s++)
            together[s][k] = ids[s];
        if (k + 1 == GEN)
            break;
        for (int s = 0; s < SEQS; s++)
            rows[s] = (nu_llm_row){ids[s], slot[s], NU_LLM_OUTPUT_ARGMAX};
        LLM_OK(nu_llm_model_step(m, rows, SEQS, NULL, ids));
    }
    for (int s = 0; s < SEQS; s++) {
        assert_true(np[s] + GEN > WINDOW + 1); /* the decode went past the window */
        for (int k = 0; k < GEN; k++)
            if (alone[s][k] != together[s][k])
                fail_msg("%s: sequence %d's id %d is %d in the batch, %d alone", shape->name, s, k, together[s][k],
                         alone[s][k]);
    }
    printf("%s: %d sequences batched give the ids they get alone (%d tokens each)\n", shape->name, SEQS, GEN);
    nu_llm_model_free(m);
}

static void batched_decode(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    batch_matches_alone(d, shape_of("gemma2-tiny"));
    batch_matches_alone(d, shape_of("phi3-tiny"));
    batch_matches_alone(d, shape_of("gemma3-tiny")); /* the q and k norms in the fresh per-row form */
    nt_close(d);
}

/* ---- Hugging Face folders: the same files as transformers names and stores them ---- */

/* A layer tensor's name after "blk.N." in GGUF and after "model.layers.N." in config.json's
 * models: the names every architecture here shares. */
static const char *const HF_NAMES[][2] = {
    {"attn_norm.weight", "input_layernorm.weight"},     {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},       {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},           {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},           {"attn_qkv.weight", "self_attn.qkv_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},  {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},  {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},        {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
};

/* The config.json name of GGUF tensor `name` of architecture `arch`, or NULL. */
static bool hf_name(const char *arch, const char *name, char *out, size_t size)
{
    bool gemma = !strncmp(arch, "gemma", 5), phi3 = !strcmp(arch, "phi3");
    static const char *const globals[][2] = {{"token_embd.weight", "model.embed_tokens.weight"},
                                             {"output_norm.weight", "model.norm.weight"},
                                             {"output.weight", "lm_head.weight"}};
    for (size_t i = 0; i < 3; i++)
        if (!strcmp(name, globals[i][0]))
            return snprintf(out, size, "%s", globals[i][1]) > 0;
    unsigned layer;
    int at = 0;
    if (sscanf(name, "blk.%u.%n", &layer, &at) != 1 || !at)
        return false;
    const char *rest = name + at, *to = NULL;
    for (size_t i = 0; !to && i < sizeof HF_NAMES / sizeof *HF_NAMES; i++)
        if (!strcmp(rest, HF_NAMES[i][0]))
            to = HF_NAMES[i][1];
    if (!strcmp(rest, "ffn_norm.weight")) /* Gemma's FFN norm is its pre-FFN one */
        to = gemma ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight";
    if (!strcmp(rest, "ffn_up.weight"))
        to = phi3 ? "mlp.gate_up_proj.weight" : "mlp.up_proj.weight";
    return to && snprintf(out, size, "model.layers.%u.%s", layer, to) > 0;
}

/* config.json for `shape` as transformers' config class of the architecture writes it. */
static void hf_config(const make_gguf_shape *s, char *out, size_t size)
{
    const char *arch = make_gguf_arch(s);
    uint32_t hd = s->head_dim ? s->head_dim : s->dim / s->heads;
    bool eps5 = !strcmp(arch, "phi3");
    int at = snprintf(out, size,
                      "{\"hidden_size\": %u, \"intermediate_size\": %u, \"num_hidden_layers\": %u, "
                      "\"num_attention_heads\": %u, \"num_key_value_heads\": %u, \"max_position_embeddings\": %u, "
                      "\"rms_norm_eps\": %s, \"rope_theta\": %.1f, \"vocab_size\": %u, \"tie_word_embeddings\": %s, ",
                      s->dim, s->ffn, s->layers, s->heads, s->kv_heads, s->context, eps5 ? "1e-05" : "1e-06",
                      (double)s->rope_theta, s->vocab, s->untied ? "false" : "true");
    if (!strcmp(arch, "qwen2") || !strcmp(arch, "qwen3"))
        snprintf(out + at, size - (size_t)at,
                 "\"architectures\": [\"%s\"], \"model_type\": \"%s\", \"head_dim\": %u, \"hidden_act\": \"silu\", "
                 "\"use_sliding_window\": false, \"sliding_window\": 4096, \"max_window_layers\": 28}",
                 !strcmp(arch, "qwen2") ? "Qwen2ForCausalLM" : "Qwen3ForCausalLM", arch, hd);
    else if (!strcmp(arch, "gemma2"))
        snprintf(out + at, size - (size_t)at,
                 "\"architectures\": [\"Gemma2ForCausalLM\"], \"model_type\": \"gemma2\", \"head_dim\": %u, "
                 "\"query_pre_attn_scalar\": %u, \"sliding_window\": %u, \"attn_logit_softcapping\": 50.0, "
                 "\"final_logit_softcapping\": 30.0, \"hidden_activation\": \"gelu_pytorch_tanh\", "
                 "\"hidden_act\": \"gelu_pytorch_tanh\"}", hd, hd, s->window);
    else if (!strcmp(arch, "gemma3"))
        snprintf(out + at, size - (size_t)at,
                 "\"architectures\": [\"Gemma3ForCausalLM\"], \"model_type\": \"gemma3_text\", \"head_dim\": %u, "
                 "\"query_pre_attn_scalar\": %u, \"sliding_window\": %u, \"sliding_window_pattern\": 6, "
                 "\"rope_local_base_freq\": 10000.0, \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": %.1f}, "
                 "\"attn_logit_softcapping\": null, \"final_logit_softcapping\": null, "
                 "\"hidden_activation\": \"gelu_pytorch_tanh\"}", hd, hd, s->window, (double)s->rope_linear);
    else
        snprintf(out + at, size - (size_t)at,
                 "\"architectures\": [\"Phi3ForCausalLM\"], \"model_type\": \"phi3\", \"hidden_act\": \"silu\", "
                 "\"sliding_window\": %u, \"original_max_position_embeddings\": %u, \"rope_scaling\": null}",
                 s->window, s->context);
}

/* A folder of config.json and model.safetensors holding the F32 GGUF file `gguf`'s tensors under
 * their transformers names; Gemma's norms as w for x * (1 + w) (the GGUF file's minus 1). */
static const char *hf_folder(const make_gguf_shape *shape, const char *gguf)
{
    static char dir[1100];
    char weights[1200], config[4096];
    snprintf(dir, sizeof dir, "%s/llm_archs_hf_%s", nt_tmp_dir(), shape->name);
    snprintf(weights, sizeof weights, "%s.safetensors", dir);
    FILE *f = fopen(gguf, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    size_t size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *bytes = malloc(size);
    assert_true(fread(bytes, 1, size, f) == size);
    fclose(f);
    nu_gguf *g;
    assert_int_equal(nu_gguf_parse(bytes, size, &g), NU_OK);
    uint64_t n = nu_gguf_tensor_count(g);
    nu_tensor_write *t = calloc(n, sizeof *t);
    char (*names)[96] = calloc(n, sizeof *names);
    float **own = calloc(n, sizeof *own);
    bool gemma = !strncmp(make_gguf_arch(shape), "gemma", 5);
    for (uint64_t i = 0; i < n; i++) {
        const nu_gguf_tensor_info *info = nu_gguf_tensor(g, i);
        assert_int_equal(info->dtype, NU_DTYPE_F32);
        if (!hf_name(make_gguf_arch(shape), info->name, names[i], sizeof names[i]))
            fail_msg("no transformers name for %s", info->name);
        t[i] = (nu_tensor_write){names[i], NU_DTYPE_F32, info->rank, {0}, bytes + info->offset};
        memcpy(t[i].shape, info->shape, sizeof t[i].shape);
        if (gemma && strstr(info->name, "norm.weight")) {
            size_t count = (size_t)(info->size / 4);
            own[i] = malloc(info->size);
            memcpy(own[i], bytes + info->offset, info->size);
            for (size_t k = 0; k < count; k++)
                own[i][k] -= 1.0f;
            t[i].data = own[i];
        }
    }
    assert_int_equal(nu_safetensors_write(weights, t, (size_t)n, NULL, NULL, 0), NU_OK);
    for (uint64_t i = 0; i < n; i++)
        free(own[i]);
    free(own), free(names), free(t);
    nu_gguf_close(g);
    free(bytes);
    hf_config(shape, config, sizeof config);
    return llm_make_folder(dir, config, weights);
}

/* Each architecture from a Hugging Face folder of its tiny file's tensors gives that file's
 * reference logits. */
static void hf_folders(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    static const char *const names[] = {"qwen2-tiny", "qwen3-tiny", "gemma2-tiny", "gemma3-tiny", "phi3-tiny"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const make_gguf_shape *shape = shape_of(names[i]);
        const char *gguf = arch_file(shape);
        /* the untied ones' embedding read from the safetensors into a shared buffer (embed_in_host 1) */
        double worst = against_reference(d, hf_folder(shape, gguf), gguf, 1, CACHE, 1);
        printf("%-12s from config.json and safetensors: logits within %.3g of the reference's range\n", names[i],
               worst);
        if (worst > 1e-4)
            fail_msg("%s's folder: logits %g of their range off the reference's", names[i], worst);
    }
    nt_close(d);
}

/* Variants nuvec does not run, refused with what they have. */
static void variants_refused(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    const char *qwen2 = arch_file(shape_of("qwen2-tiny"));
    const llm_gguf_key moe = {"general.architecture", NU_GGUF_STRING, 0, false, "qwen2moe"};
    llm_gguf_edit e = {.keys = &moe, .key_count = 1};
    const char *path = tmp_path("qwen2moe.gguf");
    assert_true(llm_copy_gguf(qwen2, path, &e));
    llm_expect_refused(d, path, NU_ERROR_UNSUPPORTED, "qwen2moe is not supported: mixture-of-experts");
    const llm_gguf_key yarn = {"qwen2.rope.scaling.type", NU_GGUF_STRING, 0, false, "yarn"};
    e.keys = &yarn;
    path = tmp_path("qwen2_yarn.gguf");
    assert_true(llm_copy_gguf(qwen2, path, &e));
    llm_expect_refused(d, path, NU_ERROR_UNSUPPORTED, "yarn");
    const llm_gguf_key experts = {"qwen2.expert_count", NU_GGUF_UINT32, 8, false, NULL};
    e.keys = &experts;
    path = tmp_path("qwen2_experts.gguf");
    assert_true(llm_copy_gguf(qwen2, path, &e));
    llm_expect_refused(d, path, NU_ERROR_UNSUPPORTED, "mixture-of-experts");
    /* a softcap is Gemma 2's: on Qwen it is refused */
    const llm_gguf_key softcap = {"qwen2.attn_logit_softcapping", NU_GGUF_FLOAT32, 50, false, NULL};
    e.keys = &softcap;
    path = tmp_path("qwen2_softcap.gguf");
    assert_true(llm_copy_gguf(qwen2, path, &e));
    llm_expect_refused(d, path, NU_ERROR_UNSUPPORTED, "attention logit softcapping");
    nt_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(llama_and_qwen), cmocka_unit_test(gemma),           cmocka_unit_test(phi3),
        cmocka_unit_test(batched_decode), cmocka_unit_test(hf_folders),     cmocka_unit_test(variants_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
