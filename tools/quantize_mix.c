/* quantize_mix.c: llama-quantize's file types and per-tensor mixes (see quantize_mix.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "quantize_mix.h"
#include "tool_error.h"

/* llama.cpp's LLAMA_FTYPE_* numbers (include/llama.h), written as general.file_type. */
static const quant_preset PRESETS[] = {
    {"q4_k_m", 15, NU_DTYPE_Q4_K, "Q4_K, with Q6_K for output and half the attn_v / ffn_down (llama.cpp's default)"},
    {"q4_k_s", 14, NU_DTYPE_Q4_K, "Q4_K, Q5_K for the first attn_v and ffn_down layers"},
    {"q5_k_m", 17, NU_DTYPE_Q5_K, "Q5_K, with Q6_K for output and half the attn_v / ffn_down"},
    {"q5_k_s", 16, NU_DTYPE_Q5_K, "Q5_K, Q6_K for output"},
    {"q6_k", 18, NU_DTYPE_Q6_K, "Q6_K"},
    {"q8_0", 7, NU_DTYPE_Q8_0, "Q8_0"},
    {"q4_0", 2, NU_DTYPE_Q4_0, "Q4_0, Q6_K for output"},
    {"q4_1", 3, NU_DTYPE_Q4_1, "Q4_1, Q6_K for output"},
    {"q5_0", 8, NU_DTYPE_Q5_0, "Q5_0, Q6_K for output"},
    {"q5_1", 9, NU_DTYPE_Q5_1, "Q5_1, Q6_K for output"},
    {"iq4_nl", 25, NU_DTYPE_IQ4_NL, "IQ4_NL, Q6_K for output, Q5_K for the first ffn_down layers"},
    {"iq4_xs", 30, NU_DTYPE_IQ4_XS, "IQ4_XS, Q6_K for output, Q5_K for the first ffn_down layers"},
    {"f16", 1, NU_DTYPE_F16, "F16 matrices"},
    {"bf16", 32, NU_DTYPE_BF16, "BF16 matrices"},
    {"f32", 0, NU_DTYPE_F32, "F32 matrices"},
};
#define PRESET_COUNT (sizeof PRESETS / sizeof *PRESETS)

const quant_preset *quant_preset_at(size_t i) { return i < PRESET_COUNT ? &PRESETS[i] : NULL; }

const quant_preset *quant_find_preset(const char *name)
{
    if (!strcasecmp(name, "q4_k"))
        name = "q4_k_m";
    else if (!strcasecmp(name, "q5_k"))
        name = "q5_k_m";
    for (size_t i = 0; i < PRESET_COUNT; i++)
        if (!strcasecmp(PRESETS[i].name, name))
            return &PRESETS[i];
    return NULL;
}

nu_dtype quant_find_type(const char *name)
{
    static const nu_dtype types[] = {NU_DTYPE_F32,  NU_DTYPE_F16,  NU_DTYPE_BF16, NU_DTYPE_Q8_0,   NU_DTYPE_Q4_0,
                                     NU_DTYPE_Q4_1, NU_DTYPE_Q5_0, NU_DTYPE_Q5_1, NU_DTYPE_Q4_K,   NU_DTYPE_Q5_K,
                                     NU_DTYPE_Q6_K, NU_DTYPE_IQ4_NL, NU_DTYPE_IQ4_XS};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (!strcasecmp(nu_dtype_name(types[i]), name))
            return types[i];
    return NU_DTYPE_COUNT;
}

typedef enum category {
    CAT_OTHER, CAT_OUTPUT, CAT_TOKEN_EMBD, CAT_ATTN_QKV, CAT_ATTN_KV_B, CAT_ATTN_V, CAT_ATTN_K, CAT_ATTN_Q,
    CAT_ATTN_OUTPUT, CAT_FFN_UP, CAT_FFN_GATE, CAT_FFN_DOWN,
} category;

/* llama-quant.cpp's tensor_get_category: by name, first match wins. */
static category category_of(const char *name)
{
    static const struct { const char *part; category c; } parts[] = {
        {"attn_qkv.weight", CAT_ATTN_QKV}, {"attn_kv_b.weight", CAT_ATTN_KV_B}, {"attn_v.weight", CAT_ATTN_V},
        {"attn_k.weight", CAT_ATTN_K},     {"attn_q.weight", CAT_ATTN_Q},       {"attn_output.weight", CAT_ATTN_OUTPUT},
        {"ffn_up", CAT_FFN_UP},            {"ffn_gate", CAT_FFN_GATE},          {"ffn_down", CAT_FFN_DOWN}};
    if (!strcmp(name, "output.weight"))
        return CAT_OUTPUT;
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight"))
        return CAT_TOKEN_EMBD;
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        if (strstr(name, parts[i].part))
            return parts[i].c;
    return CAT_OTHER;
}

bool quant_is_attn_v(const char *name)
{
    category c = category_of(name);
    return c == CAT_ATTN_V || c == CAT_ATTN_QKV || c == CAT_ATTN_KV_B;
}

static int layer_of(const char *name)
{
    int layer = -1;
    if (sscanf(name, "blk.%d.", &layer) != 1)
        layer = -1;
    return layer;
}

int quant_compare_names(const char *a, const char *b)
{
    int la = layer_of(a), lb = layer_of(b);
    return la != lb ? (la < lb ? -1 : 1) : strcmp(a, b);
}

static bool is_float(nu_dtype t) { return t == NU_DTYPE_F32 || t == NU_DTYPE_F16 || t == NU_DTYPE_BF16; }

/* llama-quant.cpp's tensor_allows_quantization, for the names a Llama file has. */
static bool may_change(const char *name, uint32_t rank, const uint64_t *shape)
{
    uint32_t dims = rank; /* ggml_n_dims: outer dims of 1 do not count */
    while (dims > 1 && shape[rank - dims] == 1)
        dims--;
    size_t n = strlen(name);
    return dims >= 2 && n >= 6 && !strcmp(name + n - 6, "weight") && !strstr(name, "_norm.weight") &&
           !strstr(name, "ffn_gate_inp.weight");
}

/* The first and last eighth of n layers, and every third one between (llama.cpp's use_more_bits). */
static bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static nu_dtype mix(const quant_options *o, const quant_model *m, quant_walk *walk, const char *name, uint64_t cols)
{
    const uint32_t ft = o->preset->file_type;
    const bool q4km = ft == 15, q4ks = ft == 14, q5km = ft == 17, iq4 = ft == 25 || ft == 30;
    const uint32_t gqa = m->kv_heads ? m->heads / m->kv_heads : 1;
    nu_dtype t = o->preset->base;
    switch (category_of(name)) {
    case CAT_TOKEN_EMBD: /* tied embeddings are the output too */
    case CAT_OUTPUT:
        if (category_of(name) == CAT_TOKEN_EMBD && !m->tied)
            return t;
        if (o->output_type != NU_DTYPE_COUNT)
            return o->output_type;
        return cols % nu_dtype_block_elements(t) ? NU_DTYPE_Q8_0 : t != NU_DTYPE_Q8_0 ? NU_DTYPE_Q6_K : t;
    case CAT_ATTN_V:
    case CAT_ATTN_QKV:
    case CAT_ATTN_KV_B:
        /* (llama.cpp's own attn_qkv branch further down is never reached: this one takes it) */
        if (iq4 && gqa >= 4)
            t = NU_DTYPE_Q5_K;
        else if ((q4km || q5km) && more_bits((int)walk->attn_v, (int)m->attn_v_count))
            t = NU_DTYPE_Q6_K;
        else if (q4ks && walk->attn_v < 4)
            t = NU_DTYPE_Q5_K;
        if (m->layers == 80 && m->heads != m->kv_heads && t == NU_DTYPE_Q4_K) /* llama.cpp's 70B */
            t = NU_DTYPE_Q5_K;
        walk->attn_v++;
        return t;
    case CAT_FFN_DOWN: {
        const int i = (int)walk->ffn_down++, n = (int)m->layers;
        if (q4km || q5km)
            return more_bits(i, n) ? NU_DTYPE_Q6_K : t;
        if ((iq4 || q4ks) && i < n / 8)
            return NU_DTYPE_Q5_K;
        return t;
    }
    default:
        return t;
    }
}

/* llama-quant.cpp's tensor_type_fallback. */
static nu_dtype fallback(nu_dtype t, uint64_t cols)
{
    if (!(cols % nu_dtype_block_elements(t)))
        return t;
    nu_dtype f = t == NU_DTYPE_Q4_K ? NU_DTYPE_Q5_0 : t == NU_DTYPE_Q5_K ? NU_DTYPE_Q5_1 : t == NU_DTYPE_Q6_K ? NU_DTYPE_Q8_0
                 : t == NU_DTYPE_IQ4_XS ? NU_DTYPE_IQ4_NL : t;
    return cols % nu_dtype_block_elements(f) ? NU_DTYPE_F16 : f;
}

nu_status quant_choose(const quant_options *o, const quant_model *m, quant_walk *walk, const char *name, uint32_t rank,
                       const uint64_t *shape, nu_dtype current, nu_dtype *out, char *note, size_t note_size)
{
    const uint64_t cols = shape[rank - 1];
    note[0] = 0;
    *out = current;
    if (!may_change(name, rank, shape))
        return NU_OK;
    const category c = category_of(name);
    nu_dtype set = c == CAT_TOKEN_EMBD ? o->embedding_type : c == CAT_OUTPUT ? o->output_type : NU_DTYPE_COUNT;
    if (set != NU_DTYPE_COUNT) {
        if (cols % nu_dtype_block_elements(set)) {
            *out = NU_DTYPE_COUNT;
            return tool_fail(NU_ERROR_INVALID_ARGUMENT,
                            "%s: its rows of %llu elements are not a multiple of %s's block of %u (and a type set "
                            "outright has no fallback)",
                            name, (unsigned long long)cols, nu_dtype_name(set), nu_dtype_block_elements(set));
        }
        snprintf(note, note_size, "set by %s", c == CAT_TOKEN_EMBD ? "--token-embedding-type" : "--output-tensor-type");
        *out = set;
        return NU_OK;
    }
    nu_dtype t = o->preset->base;
    if (is_float(t)) {
        *out = t;
        return NU_OK;
    }
    if (!o->pure) {
        t = mix(o, m, walk, name, cols);
        if (t != o->preset->base)
            snprintf(note, note_size, "mix: %s", c == CAT_OUTPUT || c == CAT_TOKEN_EMBD ? "output" : c == CAT_FFN_DOWN ? "ffn_down" : "attn_v");
    }
    const nu_dtype f = fallback(t, cols);
    if (f != t)
        snprintf(note, note_size, "fallback from %s: rows of %llu", nu_dtype_name(t), (unsigned long long)cols);
    *out = f;
    return NU_OK;
}
