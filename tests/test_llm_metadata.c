/* test_llm_metadata.c: what a model's metadata and tensors may say, and what nuvec does with it
 * (llm/arch/llama.c, llm/source/): a Llama 3.1-style file with rope_freqs.weight runs with its
 * frequency divisors (it ran with plain RoPE, wrong logits, before issue 28; then it was refused),
 * as do linear RoPE scaling and config.json's llama3 and linear rope_scaling, each matching a
 * float64 reference forward at positions to 100; a file without the optional
 * llama.rope.dimension_count runs, with the logits of the file that has it; head_dim comes from
 * llama.attention.key_length (a Mistral Nemo-style file: head_dim twice dim / heads) and the
 * model's logits then match a float64 reference forward written in the test; every metadata key
 * and tensor that changes the arithmetic in a way nuvec does not implement is refused with a
 * message naming it, in GGUF files and in Hugging Face folders; keys that change nothing run. */
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
#include "tool_error.h"

/* Keys to add, by type. */
#define KEY_U32(k, v) ((llm_gguf_key){(k), NU_GGUF_UINT32, (v), false, NULL})
#define KEY_F32(k, v) ((llm_gguf_key){(k), NU_GGUF_FLOAT32, (v), false, NULL})
#define KEY_BOOL(k, v) ((llm_gguf_key){(k), NU_GGUF_BOOL, 0, (v), NULL})
#define KEY_STR(k, v) ((llm_gguf_key){(k), NU_GGUF_STRING, 0, false, (v)})
#define TENSOR(n, r, a, b) ((llm_gguf_tensor){(n), (r), {(a), (b)}, 1.0f, NULL})

static const char *tmp_path(const char *name)
{
    static char path[8][1100];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, sizeof path[0], "%s/llm_meta_%s", nt_tmp_dir(), name);
    return p;
}

/* aidreams260K's F32 GGUF with `edit` applied, at a tmp path named `name`. */
static const char *edited(const char *name, const llm_gguf_edit *edit)
{
    const char *path = tmp_path(name);
    assert_true(llm_copy_gguf(llm_model_path("aidreams260K/model.gguf"), path, edit));
    return path;
}

static const char *with_key(const char *name, llm_gguf_key key)
{
    llm_gguf_edit e = {.keys = &key, .key_count = 1};
    return edited(name, &e);
}

static const char *with_tensor(const char *name, llm_gguf_tensor t)
{
    llm_gguf_edit e = {.tensors = &t, .tensor_count = 1};
    return edited(name, &e);
}

static const int32_t PROMPT[7] = {1, 303, 281, 269, 435, 447, 275};

/* The prompt's logits, then those of 4 greedy decode steps, into logits[5][vocab]. */
static void run(nu_device *d, const char *path, float *logits, uint32_t vocab)
{
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, path, NULL, &m));
    assert_int_equal(nu_llm_model_config(m)->vocab, vocab);
    LLM_OK(nu_llm_model_prefill(m, PROMPT, 7, logits));
    for (int s = 1; s < 5; s++) {
        const float *prev = logits + (size_t)(s - 1) * vocab;
        int32_t best = 0;
        for (uint32_t i = 1; i < vocab; i++)
            best = prev[i] > prev[best] ? (int32_t)i : best;
        LLM_OK(nu_llm_model_decode(m, best, logits + (size_t)s * vocab));
    }
    nu_llm_model_free(m);
}

/* The model at `path` against the float64 reference forward of the GGUF file `ref_path`: a prompt
 * of np tokens, then decode steps to 12 more; the logits of the prompt's last and each decode step
 * within `tol` of their range. Returns the largest difference over the range seen. */
static double against_reference(nu_device *d, const char *path, const char *ref_path, uint32_t np, double tol)
{
    enum { MORE = 12, MAXT = 128 };
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, path, NULL, &m));
    uint32_t V = nu_llm_model_config(m)->vocab;
    llm_ref *ref = llm_ref_open(ref_path);
    assert_non_null(ref);
    assert_int_equal(llm_ref_vocab(ref), V);
    int32_t tokens[MAXT];
    uint32_t n = np + MORE;
    assert_true(n <= MAXT);
    for (uint32_t i = 0; i < n; i++)
        tokens[i] = i ? (int32_t)(3 + (i * 97) % (V - 3)) : 1;
    double *want = malloc((size_t)n * V * sizeof *want);
    float *got = malloc(V * sizeof *got);
    llm_ref_forward(ref, tokens, n, want);
    double worst = 0, range = 0;
    for (uint32_t at = np - 1; at < n; at++) {
        if (at == np - 1)
            LLM_OK(nu_llm_model_prefill(m, tokens, np, got));
        else
            LLM_OK(nu_llm_model_decode(m, tokens[at], got));
        double lo = INFINITY, hi = -INFINITY;
        for (uint32_t i = 0; i < V; i++) {
            double w = want[(size_t)at * V + i];
            worst = fmax(worst, fabs(got[i] - w));
            lo = fmin(lo, w), hi = fmax(hi, w);
        }
        range = fmax(range, hi - lo);
    }
    assert_true(range > 0);
    if (tol && worst > tol * range)
        fail_msg("%s: logits within %g of the reference's (range %g); %g of the range allowed", path, worst, range, tol);
    free(want);
    free(got);
    llm_ref_free(ref);
    nu_llm_model_free(m);
    return worst / range;
}

/* Issue: a Llama 3.1-style file (rope_freqs.weight, the per-pair RoPE frequency divisors) ran with
 * plain RoPE: now the divisors apply. Linear RoPE scaling divides the positions. Each matches the
 * reference to 1e-4 of the logits' range, while the same weights without the scaling are off by
 * far more (the check sees the scaling). */
static void rope_scaling_runs(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    float factors[8] = {1, 1.5f, 2, 3, 4, 5, 6, 8};
    llm_gguf_tensor freqs = {"rope_freqs.weight", 1, {8, 0}, 0, factors};
    const char *with_freqs = with_tensor("rope_freqs.gguf", freqs);
    printf("rope_freqs: within %.3g of the range\n", against_reference(d, with_freqs, with_freqs, 100, 1e-4));
    double off = against_reference(d, llm_model_path("aidreams260K/model.gguf"), with_freqs, 100, 0);
    printf("without the divisors: %.3g of the range\n", off);
    assert_true(off > 1e-2);
    const char *linear = with_key("linear.gguf", KEY_F32("llama.rope.scaling.factor", 4));
    printf("linear 4: within %.3g of the range\n", against_reference(d, linear, linear, 100, 1e-4));
    assert_true(against_reference(d, llm_model_path("aidreams260K/model.gguf"), linear, 100, 0) > 1e-2);
    nt_close(d);
}

/* config.json's rope_scaling: llama3 (the divisors made as transformers makes them) and linear run,
 * matching the GGUF model with the same scaling. */
static void hf_rope_scaling_runs(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    char weights[1100], dir[1100];
    snprintf(weights, sizeof weights, "%s", llm_model_path("aidreams260K/hf/model.safetensors"));
    /* transformers' llama3 scaling in double: factor 8, low 1, high 4, original context 32. */
    float factors[8];
    for (int i = 0; i < 8; i++) {
        double wavelen = 2 * M_PI / pow(10000.0, -2.0 * i / 16), f;
        if (wavelen < 32.0 / 4)
            f = 1;
        else if (wavelen > 32.0 / 1)
            f = 8;
        else {
            double smooth = (32.0 / wavelen - 1) / (4 - 1);
            f = 1 / ((1 - smooth) / 8 + smooth);
        }
        factors[i] = (float)f;
    }
    llm_gguf_tensor freqs = {"rope_freqs.weight", 1, {8, 0}, 0, factors};
    const char *ref = with_tensor("llama3_ref.gguf", freqs);
    snprintf(dir, sizeof dir, "%s/llm_meta_llama3", nt_tmp_dir());
    llm_make_folder(dir, llm_config_with("rope_scaling", "{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": "
                                         "1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 32}"),
                    weights);
    printf("config.json llama3: within %.3g of the range\n", against_reference(d, dir, ref, 100, 1e-4));
    const char *linear = with_key("linear2.gguf", KEY_F32("llama.rope.scaling.factor", 2));
    snprintf(dir, sizeof dir, "%s/llm_meta_linear", nt_tmp_dir());
    llm_make_folder(dir, llm_config_with("rope_scaling", "{\"type\": \"linear\", \"factor\": 2.0}"), weights);
    printf("config.json linear 2: within %.3g of the range\n", against_reference(d, dir, linear, 100, 1e-4));
    /* Malformed llama3 parameters. */
    snprintf(dir, sizeof dir, "%s/llm_meta_llama3_bad", nt_tmp_dir());
    llm_make_folder(dir, llm_config_with("rope_scaling", "{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": "
                                         "4.0, \"high_freq_factor\": 1.0, \"original_max_position_embeddings\": 32}"),
                    weights);
    llm_expect_refused(d, dir, NU_ERROR_FORMAT, "high_freq_factor");
    nt_close(d);
}

/* Issue: a file without llama.rope.dimension_count was refused ("0 is not head_dim"); the key is
 * optional (head_dim by default). Without it the model gives the same logits, bit for bit. */
static void rope_dimension_count_is_optional(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    static const char *const drop[] = {"llama.rope.dimension_count"};
    llm_gguf_edit e = {.drop = drop, .drop_count = 1};
    const char *without = edited("no_rope_dims.gguf", &e);
    float *a = malloc(5 * 512 * sizeof *a), *b = malloc(5 * 512 * sizeof *b);
    run(d, llm_model_path("aidreams260K/model.gguf"), a, 512);
    run(d, without, b, 512);
    assert_memory_equal(a, b, 5 * 512 * sizeof *a);
    free(a);
    free(b);
    nt_close(d);
}

/* A random-weight F32 file of `shape` at a tmp path. */
static const char *random_model(const char *name, const make_gguf_shape *shape)
{
    const char *path = tmp_path(name);
    make_gguf_options o = {.shape = shape, .dtype = NU_DTYPE_F32, .path = path, .seed = 7, .threads = 1};
    nu_status st = make_gguf(&o, NULL);
    if (st != NU_OK)
        fail_msg("make_gguf %s: %s", name, tool_error_message());
    return path;
}

/* Issue: llama.attention.key_length was ignored (head_dim was dim / heads). A Mistral Nemo-style
 * file, head_dim 32 where dim / heads is 16 (GQA, 2 KV heads), runs: its logits at 12 positions
 * (a prompt of 8, then 4 decode steps) match the float64 reference within 1e-4 of their range. */
static void key_length_is_head_dim(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    const make_gguf_shape nemo = {"nemo-like", 64, 2, 4, 2, 128, 512, 64, 10000.0f, 32};
    const char *path = random_model("nemo_like.gguf", &nemo);
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, path, NULL, &m));
    assert_int_equal(nu_llm_model_config(m)->head_dim, 32);
    llm_ref *ref = llm_ref_open(path);
    assert_non_null(ref);
    const uint32_t V = 512;
    const int32_t tokens[12] = {1, 17, 300, 42, 9, 511, 128, 77, 5, 250, 3, 99};
    double *want = malloc(12 * V * sizeof *want);
    float *got = malloc(V * sizeof *got);
    llm_ref_forward(ref, tokens, 12, want);
    double worst = 0, range = 0;
    for (int step = 0; step < 5; step++) {
        int at = step == 0 ? 7 : 7 + step;
        if (step == 0)
            LLM_OK(nu_llm_model_prefill(m, tokens, 8, got));
        else
            LLM_OK(nu_llm_model_decode(m, tokens[at], got));
        double lo = INFINITY, hi = -INFINITY;
        for (uint32_t i = 0; i < V; i++) {
            double w = want[(size_t)at * V + i];
            worst = fmax(worst, fabs(got[i] - w));
            lo = fmin(lo, w), hi = fmax(hi, w);
        }
        range = fmax(range, hi - lo);
    }
    printf("nemo-like head_dim 32: logits within %.3g of the reference (range %.3g)\n", worst, range);
    assert_true(range > 0);
    assert_true(worst <= 1e-4 * range);
    free(want);
    free(got);
    llm_ref_free(ref);
    nu_llm_model_free(m);

    /* A head_dim the attention kernels do not take is refused with that reason, not a false one. */
    const make_gguf_shape odd = {"odd-head", 64, 1, 4, 2, 128, 512, 64, 10000.0f, 24};
    llm_expect_refused(d, random_model("odd_head.gguf", &odd), NU_ERROR_UNSUPPORTED, "head_dim 24");
    /* Values of another length than keys. */
    llm_expect_refused(d, with_key("value_length.gguf", KEY_U32("llama.attention.value_length", 32)),
                       NU_ERROR_UNSUPPORTED, "llama.attention.value_length");
    /* Partial rotary dimensions. */
    llm_expect_refused(d, with_key("rope_dims.gguf", KEY_U32("llama.rope.dimension_count", 8)),
                       NU_ERROR_UNSUPPORTED, "llama.rope.dimension_count");
    nt_close(d);
}

/* Every key that changes the arithmetic in a way nuvec does not implement: refused, named. */
static void unimplemented_keys_are_refused(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    static const struct {
        llm_gguf_key key;
        const char *words;
    } cases[] = {
        {KEY_U32("llama.attention.sliding_window", 4096), "sliding-window"},
        {KEY_F32("llama.attn_logit_softcapping", 50), "llama.attn_logit_softcapping"},
        {KEY_F32("llama.final_logit_softcapping", 30), "llama.final_logit_softcapping"},
        {KEY_F32("llama.attention.scale", 0.1), "llama.attention.scale"},
        {KEY_F32("llama.embedding_scale", 12), "llama.embedding_scale"},
        {KEY_F32("llama.residual_scale", 0.2), "llama.residual_scale"},
        {KEY_F32("llama.logit_scale", 8), "llama.logit_scale"},
        {KEY_F32("llama.attention.layer_norm_epsilon", 1e-5), "LayerNorm"},
        {KEY_F32("llama.attention.clamp_kqv", 8), "llama.attention.clamp_kqv"},
        {KEY_F32("llama.attention.max_alibi_bias", 8), "ALiBi"},
        {KEY_U32("llama.pooling_type", 1), "llama.pooling_type"},
        {KEY_U32("llama.expert_count", 8), "mixture-of-experts"},
        {KEY_U32("llama.expert_used_count", 2), "mixture-of-experts"},
        {KEY_U32("llama.expert_feed_forward_length", 128), "llama.expert_feed_forward_length"},
        {KEY_BOOL("llama.attention.causal", false), "non-causal"},
        {KEY_STR("llama.rope.scaling.type", "llama3"), "llama3"},
        {KEY_STR("llama.rope.scaling.type", "yarn"), "yarn"},
        {KEY_F32("llama.rope.scaling.attn_factor", 1.5), "llama.rope.scaling.attn_factor"},
        {KEY_U32("llama.rope.dimension_sections", 4), "llama.rope.dimension_sections"},
        {KEY_U32("llama.some_future_key", 1), "llama.some_future_key"},
        {KEY_U32("split.count", 3), "split.count"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char name[64];
        snprintf(name, sizeof name, "key%zu.gguf", i);
        llm_expect_refused(d, with_key(name, cases[i].key), NU_ERROR_UNSUPPORTED, cases[i].words);
    }
    /* A linear factor below 1 is malformed. */
    llm_expect_refused(d, with_key("factor_half.gguf", KEY_F32("llama.rope.scaling.factor", 0.5)), NU_ERROR_FORMAT,
                       "llama.rope.scaling.factor");
    /* A per-layer array where nuvec reads one number: named with its type. */
    llm_expect_refused(d, with_key("heads_string.gguf", KEY_STR("llama.attention.head_count", "4")),
                       NU_ERROR_FORMAT, "llama.attention.head_count");
    nt_close(d);
}

/* Keys whose values change nothing (as llama.cpp reads them) run, with the logits of the file. */
static void harmless_keys_run(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    const llm_gguf_key keys[] = {
        KEY_STR("llama.rope.scaling.type", "linear"),
        KEY_F32("llama.rope.scaling.factor", 1),
        KEY_U32("llama.rope.scaling.original_context_length", 128),
        KEY_F32("llama.rope.scaling.attn_factor", 1),
        KEY_U32("llama.expert_count", 0),
        KEY_BOOL("llama.attention.causal", true),
        KEY_U32("llama.attention.key_length", 16),
        KEY_U32("llama.attention.value_length", 16),
        KEY_U32("split.count", 1),
        KEY_STR("general.some_note", "not arithmetic"),
    };
    llm_gguf_edit e = {.keys = keys, .key_count = sizeof keys / sizeof *keys};
    float *a = malloc(5 * 512 * sizeof *a), *b = malloc(5 * 512 * sizeof *b);
    run(d, llm_model_path("aidreams260K/model.gguf"), a, 512);
    run(d, edited("harmless.gguf", &e), b, 512);
    assert_memory_equal(a, b, 5 * 512 * sizeof *a);
    free(a);
    free(b);
    /* rope.scaling.type none as well. */
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, with_key("none.gguf", KEY_STR("llama.rope.scaling.type", "none")),
                             NULL, &m));
    nu_llm_model_free(m);
    nt_close(d);
}

/* Every tensor outside the llama roster: refused by name, with its kind where known. */
static void unknown_tensors_are_refused(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    static const struct {
        llm_gguf_tensor t;
        const char *words;
    } cases[] = {
        {TENSOR("blk.0.attn_q.bias", 1, 64, 0), "blk.0.attn_q.bias (a bias)"},
        {TENSOR("blk.1.attn_output.bias", 1, 64, 0), "blk.1.attn_output.bias"},
        {TENSOR("blk.0.ffn_down.bias", 1, 64, 0), "blk.0.ffn_down.bias"},
        {TENSOR("blk.0.attn_q_norm.weight", 1, 16, 0), "q norm"},
        {TENSOR("blk.0.attn_k_norm.weight", 1, 16, 0), "k norm"},
        {TENSOR("blk.2.attn_post_norm.weight", 1, 64, 0), "post-norm"},
        {TENSOR("blk.0.ffn_gate_inp.weight", 2, 8, 64), "router"},
        {TENSOR("blk.0.attn_qkv.weight", 2, 192, 64), "fused q/k/v"},
        {TENSOR("blk.4.attn_q.weight", 2, 64, 64), "blk.4.attn_q.weight"}, /* the model has 4 layers */
        {TENSOR("rope_factors_long.weight", 1, 8, 0), "LongRoPE"},
        {TENSOR("output.bias", 1, 512, 0), "output.bias"},
        {TENSOR("something_else.weight", 1, 4, 0), "something_else.weight"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char name[64];
        snprintf(name, sizeof name, "tensor%zu.gguf", i);
        llm_expect_refused(d, with_tensor(name, cases[i].t), NU_ERROR_UNSUPPORTED, cases[i].words);
    }
    nt_close(d);
}

/* config.json: the same rule. */
static void config_json_keys(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    char weights[1100], dir[1100];
    snprintf(weights, sizeof weights, "%s", llm_model_path("aidreams260K/hf/model.safetensors"));
    static const struct {
        const char *key, *value, *words;
    } refused[] = {
        {"sliding_window", "4096", "sliding_window"},
        {"partial_rotary_factor", "0.5", "partial_rotary_factor"},
        {"model_type", "\"mistral\"", "model_type mistral"},
        {"rope_scaling", "{\"rope_type\": \"yarn\", \"factor\": 4.0}", "rope_scaling of type yarn"},
        {"rope_scaling", "{\"rope_type\": \"longrope\", \"factor\": 4.0}", "rope_scaling of type longrope"},
        {"attention_bias", "true", "attention_bias"},
        {"mlp_bias", "true", "mlp_bias"},
        {"hidden_act", "\"gelu\"", "hidden_act gelu"},
        {"quantization_config", "{\"quant_method\": \"gptq\"}", "quantization_config"},
        {"auto_map", "{\"AutoModelForCausalLM\": \"x.Y\"}", "auto_map"},
        {"final_logit_softcapping", "30.0", "final_logit_softcapping"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        snprintf(dir, sizeof dir, "%s/llm_meta_cfg%zu", nt_tmp_dir(), i);
        llm_make_folder(dir, llm_config_with(refused[i].key, refused[i].value), weights);
        llm_expect_refused(d, dir, NU_ERROR_UNSUPPORTED, refused[i].words);
    }
    /* Keys that change nothing run. */
    static const struct {
        const char *key, *value;
    } fine[] = {{"rope_scaling", "{\"rope_type\": \"default\"}"}, {"sliding_window", "null"},
                {"pad_token_id", "0"}, {"model_type", "\"llama\""}, {"head_dim", "16"},
                {"attention_bias", "false"}, {"torch_dtype", "\"float32\""}};
    for (size_t i = 0; i < sizeof fine / sizeof *fine; i++) {
        snprintf(dir, sizeof dir, "%s/llm_meta_fine%zu", nt_tmp_dir(), i);
        llm_make_folder(dir, llm_config_with(fine[i].key, fine[i].value), weights);
        nu_llm_model *m;
        LLM_OK(nu_llm_model_open(d, dir, NULL, &m));
        nu_llm_model_free(m);
    }
    /* A tensor outside the roster (a bias) refused; rotary_emb.inv_freq skipped as transformers
     * skips it. */
    snprintf(dir, sizeof dir, "%s/llm_meta_bias", nt_tmp_dir());
    const char *biased = tmp_path("biased.safetensors");
    uint64_t shape[1] = {64};
    assert_true(llm_copy_safetensors_with(weights, biased, "model.layers.0.self_attn.q_proj.bias", 1, shape));
    llm_make_folder(dir, llm_config_with(NULL, NULL), biased);
    llm_expect_refused(d, dir, NU_ERROR_UNSUPPORTED, "model.layers.0.self_attn.q_proj.bias (a bias)");
    snprintf(dir, sizeof dir, "%s/llm_meta_inv_freq", nt_tmp_dir());
    const char *inv = tmp_path("inv_freq.safetensors");
    uint64_t half[1] = {8};
    assert_true(llm_copy_safetensors_with(weights, inv, "model.layers.0.self_attn.rotary_emb.inv_freq", 1, half));
    llm_make_folder(dir, llm_config_with(NULL, NULL), inv);
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, dir, NULL, &m));
    nu_llm_model_free(m);
    nt_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rope_scaling_runs),
        cmocka_unit_test(hf_rope_scaling_runs),
        cmocka_unit_test(rope_dimension_count_is_optional),
        cmocka_unit_test(key_length_is_head_dim),
        cmocka_unit_test(unimplemented_keys_are_refused),
        cmocka_unit_test(harmless_keys_run),
        cmocka_unit_test(unknown_tensors_are_refused),
        cmocka_unit_test(config_json_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
