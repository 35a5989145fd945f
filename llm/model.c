/* model.c: the model's public calls (nuvec_llm.h's Model section) over its parts: the source
 * (llm/source/: the file or folder), the architecture (llm/arch/), the weights (weights.c), the KV
 * cache (kv_cache.c), the tokenizer (vocab.c) and the runner (runner.c, over the blocks). Opening
 * goes in that order; each part is checked before the next moves anything to the device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/arch.h"
#include "common.h"
#include "kv_cache.h"
#include "runner.h"
#include "source/source.h"
#include "vocab.h"
#include "weights.h"

struct nu_llm_model {
    nu_device *dev;
    nu_llm_source *src;
    const nu_llm_arch *arch;
    nu_llm_hparams hp;
    nu_llm_weights w;
    nu_llm_kv kv;
    nu_llm_runner *run;
    nu_llm_tokenizer *tok;
    char tok_note[256];
    bool measure_peaks;
    uint64_t need, open_peak, prefill_peak, decode_peak; /* nu_llm_memory's */
};

const nu_llm_config *nu_llm_model_config(const nu_llm_model *m) { return m ? &m->hp.cfg : NULL; }
const nu_llm_tokenizer *nu_llm_model_tokenizer(const nu_llm_model *m) { return m ? m->tok : NULL; }
const char *nu_llm_model_tokenizer_note(const nu_llm_model *m) { return !m || m->tok ? "" : m->tok_note; }
const char *nu_llm_model_note(const nu_llm_model *m) { return m && m->run ? nu_llm__runner_note(m->run) : ""; }
uint32_t nu_llm_model_position(const nu_llm_model *m) { return m ? m->kv.length[0] : 0; }

void nu_llm_model_reset(nu_llm_model *m)
{
    if (m)
        m->kv.length[0] = 0;
}

void nu_llm_model_free(nu_llm_model *m)
{
    if (!m)
        return;
    nu_llm__runner_free(m->run);
    nu_llm__kv_free(&m->kv);
    nu_llm__weights_free(&m->w);
    nu_llm__source_close(m->src);
    nu_llm_tokenizer_free(m->tok);
    nu_llm__free(m);
}

static bool is_float(nu_dtype t) { return t == NU_DTYPE_F32 || t == NU_DTYPE_F16 || t == NU_DTYPE_BF16; }

/* A developer override from the environment (docs/knobs.md): an integer from lo to hi, or the
 * option's value when unset. A bad value refuses the open, naming the variable. */
static nu_status env_u32(const char *name, uint32_t lo, uint32_t hi, uint32_t *value)
{
    const char *e = getenv(name);
    if (!e || !*e)
        return NU_OK;
    char *end;
    unsigned long v = strtoul(e, &end, 10);
    if (*end || v < lo || v > hi)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_open: %s=%s is not %u to %u", name, e, lo, hi);
    *value = (uint32_t)v;
    return NU_OK;
}

/* The options with their defaults and the developer overrides applied, checked. */
static nu_status resolve_options(nu_device *d, const nu_llm_model_options *in, nu_llm_model_options *o)
{
    *o = in ? *in : (nu_llm_model_options){0};
    if (o->kv_dtype == 0)
        o->kv_dtype = NU_DTYPE_F32;
    if (!is_float(o->kv_dtype))
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_open: kv_dtype %s; F32, F16 or BF16 expected",
                            nu_dtype_name(o->kv_dtype));
    if (getenv("NUVEC_LLM_NO_FUSION"))
        o->fusion = -1;
    if (getenv("NUVEC_LLM_NO_STACKING"))
        o->stack_weights = -1;
    if (getenv("NUVEC_LLM_GREEDY_CPU"))
        o->greedy_on_cpu = true;
    nu_status st;
    if ((st = env_u32("NUVEC_LLM_GREEDY_DEPTH", 1, NU_LLM_GREEDY_MAX_DEPTH, &o->greedy_depth)) != NU_OK ||
        (st = env_u32("NUVEC_LLM_GREEDY_UNROLL", 1, NU_LLM_GREEDY_MAX_UNROLL, &o->greedy_unroll)) != NU_OK)
        return st;
    if (!o->greedy_depth)
        o->greedy_depth = 2;
    if (!o->greedy_unroll)
        o->greedy_unroll = 4;
    if (o->greedy_depth > NU_LLM_GREEDY_MAX_DEPTH || o->greedy_unroll > NU_LLM_GREEDY_MAX_UNROLL)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_open: greedy_depth %u (1 to %d) or greedy_unroll "
                            "%u (1 to %d) out of range", o->greedy_depth, NU_LLM_GREEDY_MAX_DEPTH, o->greedy_unroll,
                            NU_LLM_GREEDY_MAX_UNROLL);
    if (o->prefill_f16 == 0)
        o->prefill_f16 = nu_device_get_info(d)->features[NU_FEATURE_COOPERATIVE_MATRIX] ? 1 : -1;
    return NU_OK;
}

/* bos and eos: GGUF's tokenizer.ggml.*_token_id, config.json's bos_token_id / eos_token_id (an id
 * or a list: the first). */
static void special_ids(nu_llm_model *m)
{
    nu_llm_config *c = &m->hp.cfg;
    c->bos = c->eos = NU_LLM_NO_TOKEN;
    const nu_gguf *g = nu_llm__source_gguf(m->src);
    if (g) {
        uint32_t none = UINT32_MAX, bos = none, eos = none;
        if (nu_gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &none, &bos) == NU_OK && bos < c->vocab)
            c->bos = (int32_t)bos;
        if (nu_gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &none, &eos) == NU_OK && eos < c->vocab)
            c->eos = (int32_t)eos;
        return;
    }
    static const char *const keys[2] = {"bos_token_id", "eos_token_id"};
    for (int i = 0; i < 2; i++) {
        const cJSON *v = nu_llm__meta_hf_object(m->src, keys[i]);
        if (cJSON_IsArray(v))
            v = cJSON_GetArrayItem(v, 0);
        if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < c->vocab)
            *(i ? &c->eos : &c->bos) = (int32_t)v->valuedouble;
    }
}

/* The heap private buffers come from. */
static uint32_t private_heap(nu_device *d)
{
    return nu_device_get_info(d)->memory_types[nu_device_memory_choice(d)->private_type].heap;
}

/* The cap: max_memory, and where the driver reports a budget, what is left of it. The model's
 * weights, KV cache, decode activations and two prefill passes in flight must fit, before any
 * weight moves. */
static nu_status check_fit(nu_llm_model *m, const nu_llm_model_options *o, const nu_llm_weights_options *wo,
                           const nu_llm_runner_options *ro, uint32_t positions)
{
    const nu_llm_config *c = &m->hp.cfg;
    uint64_t weights, held, pass;
    bool blocks, repacked;
    nu_status st = nu_llm__weights_plan(m->src, m->arch, &m->hp, wo, &weights, &blocks, &repacked);
    if (st != NU_OK)
        return st;
    nu_llm__runner_sizes(&m->hp, ro, (ro->prefill_f16 && blocks) || repacked, &held, &pass);
    uint64_t kv = nu_llm__kv_bytes(c->layers, 1, positions, c->kv_heads, c->head_dim, o->kv_dtype);
    m->need = weights + kv + held + 2 * pass;
    uint64_t cap = o->max_memory ? o->max_memory : UINT64_MAX;
    const char *what = "the cap (max_memory)";
    nu_memory_budget b;
    if (nu_device_memory_budget(m->dev, &b) == NU_OK && b.from_driver) {
        uint32_t h = private_heap(m->dev);
        uint64_t left = b.budget[h] > b.usage[h] ? b.budget[h] - b.usage[h] : 0;
        if (left < cap)
            cap = left, what = "what the driver's budget leaves of the device's memory";
    }
    if (m->need <= cap)
        return NU_OK;
    return nu_llm__fail(NU_ERROR_OUT_OF_MEMORY, "nu_llm_model_open: the model needs %llu bytes of device memory (weights "
                        "%llu, KV cache %llu for %u positions, activations %llu, two prefill passes %llu); %s is %llu",
                        (unsigned long long)m->need, (unsigned long long)weights, (unsigned long long)kv, positions,
                        (unsigned long long)held, (unsigned long long)(2 * pass), what, (unsigned long long)cap);
}

nu_status nu_llm_model_memory(const nu_llm_model *m, nu_llm_memory *out)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!m || !out)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_memory: NULL %s", m ? "out" : "model");
    out->weights = m->w.bytes;
    out->kv_cache = m->kv.bytes;
    out->activations = nu_llm__runner_bytes(m->run);
    out->total = out->weights + out->kv_cache + out->activations;
    out->prefill_pass = nu_llm__runner_pass_bytes(m->run);
    out->need = m->need;
    out->open_peak = m->open_peak;
    out->prefill_peak = m->prefill_peak;
    out->decode_peak = m->decode_peak;
    nu_memory_stats ms;
    if (nu_memory_get_stats(m->dev, &ms) == NU_OK)
        out->device_active = ms.active, out->device_reserved = ms.reserved;
    nu_memory_budget b;
    if (nu_device_memory_budget(m->dev, &b) == NU_OK && b.from_driver) {
        uint32_t h = private_heap(m->dev);
        out->heap_budget = b.budget[h], out->heap_usage = b.usage[h];
    }
    return NU_OK;
}

/* With measure_peaks: the device's peak reset before a call's work, read after. */
static void peak_start(nu_llm_model *m)
{
    if (m->measure_peaks)
        nu_memory_reset_peak(m->dev);
}

static void peak_end(nu_llm_model *m, uint64_t *into)
{
    if (m->measure_peaks)
        *into = nu_memory_peak(m->dev);
}

/* The tokenizer is optional: without a usable one the model runs on token ids (the note says why). */
static void open_tokenizer(nu_llm_model *m)
{
    const nu_gguf *g = nu_llm__source_gguf(m->src);
    nu_status st;
    if (g) {
        st = nu_llm__vocab_gguf(g, m->dev, m->hp.cfg.bos, m->hp.cfg.eos, &m->tok);
    } else {
        char file[1200];
        snprintf(file, sizeof file, "%s/tokenizer.json", nu_llm__source_path(m->src));
        st = nu_llm__vocab_hf(file, m->hp.cfg.bos, m->hp.cfg.eos, &m->tok);
    }
    if (st != NU_OK)
        snprintf(m->tok_note, sizeof m->tok_note, "%s", nu_llm_error_message());
    nu_llm__fail(NU_OK, "%s", "");
}

nu_status nu_llm_model_open(nu_device *device, const char *path, const nu_llm_model_options *options, nu_llm_model **out)
{
    if (out)
        *out = NULL;
    if (!device || !path || !out)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_open: NULL %s", !device ? "device" : !path ? "path" : "out");
    nu_llm_model_options o;
    nu_status st = resolve_options(device, options, &o);
    if (st != NU_OK)
        return st;
    nu_llm_model *m = nu_llm__calloc(1, sizeof *m);
    if (!m)
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "nu_llm_model_open: no memory");
    m->dev = device;
    const nu_llm_config *c = &m->hp.cfg;
    if ((st = nu_llm__source_open(device, path, &m->src)) != NU_OK)
        goto fail;
    if (!(m->arch = nu_llm__arch_find(m->src))) {
        st = NU_ERROR_UNSUPPORTED;
        goto fail;
    }
    if ((st = m->arch->read_hparams(m->src, &m->hp)) != NU_OK ||
        (st = nu_llm__arch_check_tensors(m->arch, m->src, c->layers)) != NU_OK)
        goto fail;
    uint32_t hd = c->head_dim;
    if (hd < 8 || hd > 128 || (hd & (hd - 1))) {
        st = nu_llm__fail(NU_ERROR_UNSUPPORTED, "nu_llm_model_open: head_dim %u; the attention kernels take 8, 16, 32, 64 "
                          "or 128", hd);
        goto fail;
    }
    if (c->heads % c->kv_heads) {
        st = nu_llm__fail(NU_ERROR_FORMAT, "nu_llm_model_open: %u attention heads are not a multiple of %u KV heads",
                          c->heads, c->kv_heads);
        goto fail;
    }
    if (o.max_positions > c->max_positions) {
        st = nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_open: max_positions %u is beyond the model's %u",
                          o.max_positions, c->max_positions);
        goto fail;
    }
    special_ids(m);
    uint32_t positions = o.max_positions ? o.max_positions : c->max_positions;
    uint32_t chunk = o.prefill_chunk ? o.prefill_chunk : 512;
    nu_llm_weights_options wo = {o.weights_f16, o.repack_q4_0 >= 0, o.stack_weights >= 0, o.keep_load_cache};
    nu_llm_runner_options ro = {chunk < positions ? chunk : positions, o.fusion >= 0, o.prefill_f16 > 0,
                                o.decode_by_commands, o.greedy_depth, o.greedy_unroll, o.greedy_on_cpu};
    if ((st = check_fit(m, &o, &wo, &ro, positions)) != NU_OK)
        goto fail;
    m->measure_peaks = o.measure_peaks;
    uint64_t before = nu_memory_active(device);
    if (m->measure_peaks)
        nu_memory_reset_peak(device);
    if ((st = nu_llm__weights_load(device, m->src, m->arch, &m->hp, &wo, &m->w)) != NU_OK ||
        (st = nu_llm__kv_new(device, c->layers, 1, positions, c->kv_heads, hd, o.kv_dtype, &m->kv)) != NU_OK)
        goto fail;
    m->kv.used[0] = true; /* the model's own sequence (prefill, decode) */
    if ((st = nu_llm__runner_new(device, m->arch, &m->hp, &m->w, &m->kv, &ro, &m->run)) != NU_OK)
        goto fail;
    if (m->measure_peaks)
        m->open_peak = nu_memory_peak(device) - before;
    open_tokenizer(m);
    /* The file's mapping counts in nuvec's active bytes (nuvec/mapped.h), and nothing needs it
     * once the weights are on the device and the tokenizer has copied its vocabulary. */
    nu_llm__source_close(m->src);
    m->src = NULL;
    *out = m;
    return NU_OK;
fail:
    nu_llm_model_free(m);
    return st;
}

static nu_status check_ids(nu_llm_model *m, const int32_t *tokens, size_t n, const char *fn)
{
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= m->hp.cfg.vocab)
            return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "%s: token %zu is %d; ids are 0 to %u", fn, i, tokens[i],
                                m->hp.cfg.vocab - 1);
    uint32_t pos = m->kv.length[0];
    if (n > m->kv.positions - pos)
        return nu_llm__fail(NU_ERROR_OUT_OF_RANGE, "%s: %zu tokens at position %u overflow the cache's %u positions", fn, n,
                            pos, m->kv.positions);
    return NU_OK;
}

nu_status nu_llm_model_prefill(nu_llm_model *m, const int32_t *tokens, size_t n, float *logits)
{
    if (!m || !tokens || !n)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_prefill: %s",
                            !m ? "NULL model" : !tokens ? "NULL tokens" : "no tokens");
    nu_status st = check_ids(m, tokens, n, "nu_llm_model_prefill");
    if (st != NU_OK)
        return st;
    peak_start(m);
    st = nu_llm__runner_prefill(m->run, 0, tokens, (uint32_t)n, logits);
    peak_end(m, &m->prefill_peak);
    return st;
}

nu_status nu_llm_model_decode(nu_llm_model *m, int32_t token, float *logits)
{
    if (!m)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_decode: NULL model");
    nu_status st = check_ids(m, &token, 1, "nu_llm_model_decode");
    if (st != NU_OK)
        return st;
    peak_start(m);
    st = nu_llm__runner_decode(m->run, token, logits);
    peak_end(m, &m->decode_peak);
    return st;
}

nu_status nu_llm_model_decode_greedy(nu_llm_model *m, int32_t token, uint32_t n, int32_t *out, uint32_t *produced,
                                     int32_t stop_token, bool (*on_token)(void *user, int32_t id), void *user)
{
    static const char fn[] = "nu_llm_model_decode_greedy";
    if (produced)
        *produced = 0;
    if (!m || !produced || (!out && n))
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "%s: NULL %s", fn, !m ? "model" : !produced ? "produced" : "out");
    if (token < 0 || (uint32_t)token >= m->hp.cfg.vocab)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "%s: token %d; ids are 0 to %u", fn, token, m->hp.cfg.vocab - 1);
    uint32_t pos = m->kv.length[0];
    if (n > m->kv.positions - pos)
        return nu_llm__fail(NU_ERROR_OUT_OF_RANGE, "%s: %u tokens from position %u overflow the cache's %u positions", fn,
                            n, pos, m->kv.positions);
    if (n == 0)
        return NU_OK;
    uint32_t got = 0;
    peak_start(m);
    nu_status st = nu_llm__runner_greedy(m->run, token, n, out, &got, stop_token, on_token, user);
    peak_end(m, &m->decode_peak);
    if (st == NU_OK)
        *produced = got;
    return st;
}
