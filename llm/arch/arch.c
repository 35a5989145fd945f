/* arch.c: finding a source's architecture, and the roster check every architecture shares. */
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "common.h"

#define FN "nu_llm_model_open"

static const nu_llm_arch *const ARCHS[] = {&nu_llm__arch_llama,  &nu_llm__arch_qwen2,  &nu_llm__arch_qwen3,
                                           &nu_llm__arch_gemma2, &nu_llm__arch_gemma3, &nu_llm__arch_phi3};
#define ARCH_COUNT (sizeof ARCHS / sizeof *ARCHS)

/* Variants of the families nuvec runs that it does not, by GGUF architecture or config.json class,
 * with what they have that nuvec lacks. */
static const struct {
    const char *name, *what;
} VARIANTS[] = {
    {"qwen2moe", "mixture-of-experts layers"},
    {"Qwen2MoeForCausalLM", "mixture-of-experts layers"},
    {"qwen3moe", "mixture-of-experts layers"},
    {"Qwen3MoeForCausalLM", "mixture-of-experts layers"},
    {"MixtralForCausalLM", "mixture-of-experts layers"},
    {"phimoe", "mixture-of-experts layers"},
    {"PhiMoEForCausalLM", "mixture-of-experts layers"},
    {"qwen2vl", "a vision tower (multimodal RoPE)"},
    {"Qwen2VLForConditionalGeneration", "a vision tower"},
    {"Qwen2_5_VLForConditionalGeneration", "a vision tower"},
    {"qwen3vl", "a vision tower (multimodal RoPE)"},
    {"Gemma3ForConditionalGeneration", "a vision tower (llama.cpp's converter writes its text model as gemma3, "
                                       "which nuvec runs)"},
    {"Mistral3ForConditionalGeneration", "a vision tower"},
    {"Phi3VForCausalLM", "a vision tower"},
    {"Phi4MMForCausalLM", "vision and audio towers"},
    {"gemma3n", "Gemma 3n's per-layer embeddings and altered attention"},
    {"Gemma3nForConditionalGeneration", "Gemma 3n's per-layer embeddings and altered attention"},
    {"gemma", "Gemma 1 (nuvec runs gemma2 and gemma3)"},
    {"GemmaForCausalLM", "Gemma 1 (nuvec runs Gemma 2 and Gemma 3)"},
    {"phi2", "Phi-2's LayerNorm and parallel blocks (nuvec runs phi3)"},
    {"PhiForCausalLM", "Phi-2's LayerNorm and parallel blocks (nuvec runs Phi-3)"},
};

const nu_llm_arch *nu_llm__arch_find(const nu_llm_source *s)
{
    const char *name = nu_llm__source_arch(s);
    bool gguf = nu_llm__source_kind(s) == NU_LLM_SOURCE_GGUF;
    for (size_t i = 0; i < sizeof VARIANTS / sizeof *VARIANTS; i++)
        if (!strcmp(name, VARIANTS[i].name)) {
            nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": architecture %s is not supported: %s", name, VARIANTS[i].what);
            return NULL;
        }
    char list[512] = "";
    size_t at = 0;
    for (size_t i = 0; i < ARCH_COUNT; i++) {
        const nu_llm_arch *a = ARCHS[i];
        if (gguf && !strcmp(name, a->gguf_name))
            return a;
        for (const char *const *h = a->hf_names; !gguf && *h; h++)
            if (!strcmp(name, *h))
                return a;
        if (gguf)
            at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", i ? ", " : "", a->gguf_name);
        for (const char *const *h = a->hf_names; !gguf && *h && at < sizeof list; h++)
            at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", at ? ", " : "", *h);
    }
    nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": architecture %s is not supported (nuvec runs %s)", name, list);
    return NULL;
}

/* Whether `name` is `pattern` with its %u (if any) a number below `layers`. */
static bool matches(const char *pattern, const char *name, uint32_t layers)
{
    const char *u = strstr(pattern, "%u");
    if (!u)
        return !strcmp(pattern, name);
    size_t pre = (size_t)(u - pattern);
    if (strncmp(name, pattern, pre))
        return false;
    const char *p = name + pre;
    unsigned long layer = 0;
    size_t digits = 0;
    while (p[digits] >= '0' && p[digits] <= '9' && digits < 9)
        layer = layer * 10 + (unsigned long)(p[digits++] - '0');
    if (!digits || (digits > 1 && p[0] == '0') || layer >= layers)
        return false;
    return !strcmp(p + digits, u + 2);
}

/* A tensor's kind, from its name, for the refusal's message. */
static const char *tensor_kind(const char *name)
{
    static const struct {
        const char *part, *what;
    } kinds[] = {{"rope_freqs", "RoPE frequency factors (Llama 3.1-style RoPE scaling)"},
                 {"rope_factors", "LongRoPE frequency factors"},
                 {".bias", "a bias"},
                 {"_exps", "mixture-of-experts weights"},
                 {"ffn_gate_inp", "a mixture-of-experts router"},
                 {"attn_q_norm", "a per-head q norm"},
                 {"q_norm", "a per-head q norm"},
                 {"attn_k_norm", "a per-head k norm"},
                 {"k_norm", "a per-head k norm"},
                 {"post_norm", "a post-norm (sandwich norms)"},
                 {"post_feedforward_layernorm", "a post-norm (sandwich norms)"},
                 {"attn_qkv", "a fused q/k/v matrix"},
                 {"qkv_proj", "a fused q/k/v matrix"}};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if (strstr(name, kinds[i].part))
            return kinds[i].what;
    return NULL;
}

nu_status nu_llm__arch_check_tensors(const nu_llm_arch *a, const nu_llm_source *s, uint32_t layers)
{
    bool gguf = nu_llm__source_kind(s) == NU_LLM_SOURCE_GGUF;
    size_t n = nu_llm__source_tensor_count(s);
    for (size_t i = 0; i < n; i++) {
        const char *name = nu_llm__source_tensor(s, i)->name;
        bool known = false;
        for (uint32_t r = 0; r < a->roster_count && !known; r++) {
            const char *pattern = gguf ? a->roster[r].gguf : a->roster[r].hf;
            known = pattern && matches(pattern, name, layers);
        }
        for (const char *const *ig = a->ignored; ig && *ig && !known; ig++)
            known = matches(*ig, name, layers);
        if (known)
            continue;
        const char *kind = tensor_kind(name);
        if (kind)
            return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": tensor %s (%s) is not supported", name, kind);
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": tensor %s is not part of a %s model as nuvec runs it; it may "
                            "change the model's arithmetic, so the model is refused", name, a->name);
    }
    return NU_OK;
}
