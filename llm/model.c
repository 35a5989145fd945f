/* model.c: the model's public calls (nuvec_llm.h's Model section) over its parts: the source
 * (llm/source/: the file or folder), the architecture (llm/arch/), the weights (weights.c), the KV
 * cache (kv_cache.c), the tokenizer (llm/tokenizer/) and the runner (runner.c, over the blocks). Opening
 * goes in that order; each part is checked before the next moves anything to the device.
 * A model split by layers over several devices has a share on each (shares.h), which its steps
 * run in order; what the model changes in the slots itself (acquiring, releasing, truncating) it
 * changes in every share's cache. The slots and the batched steps are model_sequences.c's (the
 * model's state in model_int.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/arch.h"
#include "common.h"
#include "kv_cache.h"
#include "model_int.h"
#include "runner.h"
#include "shares.h"
#include "source/source.h"
#include "tokenizer/readers.h"
#include "weights.h"


const nu_llm_config *nu_llm_model_config(const nu_llm_model *m) { return m ? &m->hp.cfg : NULL; }
const nu_llm_tokenizer *nu_llm_model_tokenizer(const nu_llm_model *m) { return m ? m->tok : NULL; }
const char *nu_llm_model_tokenizer_note(const nu_llm_model *m) { return !m || m->tok ? "" : m->tok_note; }
uint32_t nu_llm_model_position(const nu_llm_model *m) { return m ? m->kv->length[0] : 0; }
uint32_t nu_llm_model_devices(const nu_llm_model *m) { return m ? m->sh.count : 0; }

const char *nu_llm_model_note(const nu_llm_model *m)
{
    for (uint32_t i = 0; m && i < m->sh.count; i++)
        if (m->sh.share[i].run && *nu_llm__runner_note(m->sh.share[i].run))
            return nu_llm__runner_note(m->sh.share[i].run);
    return m && m->sh.count > 1 ? "greedy decode goes token by token, each id read back: the model is split over devices"
                              : "";
}

nu_status nu_llm_model_device_layers(const nu_llm_model *m, uint32_t index, nu_device **device, uint32_t *first,
                                     uint32_t *end)
{
    if (!m || index >= m->sh.count)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_device_layers: %s",
                            m ? "no such device" : "NULL model");
    if (device)
        *device = m->sh.share[index].dev;
    if (first)
        *first = m->sh.share[index].first;
    if (end)
        *end = m->sh.share[index].end;
    return NU_OK;
}

void nu_llm_model_reset(nu_llm_model *m)
{
    if (m)
        nu_llm__shares_set_length(&m->sh, 0, 0);
}

void nu_llm_model_free(nu_llm_model *m)
{
    if (!m)
        return;
    nu_llm__shares_free(&m->sh);
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

/* The weights a one-sequence decode reads ahead by default (prefetch 1): the output product's
 * beside RoPE and the cache writes, the first 16 MB of gate and up beside attention. */
static const nu_llm_prefetch default_ahead = {
    .at = {[NU_LLM_AHEAD_O] = NU_LLM_AT_ROPE, [NU_LLM_AHEAD_GU] = NU_LLM_AT_ATTN},
    .bytes = {[NU_LLM_AHEAD_GU] = 16u << 20}};

/* NUVEC_LLM_PREFETCH's plan (docs/knobs.md): "TARGET=LEVEL[:MB] ..." (spaces or commas between),
 * TARGET o, gu, down or qkv (the next layer's), LEVEL rope, attn, o, gu, down or off, before the
 * target's own level. */
static nu_status prefetch_plan(const char *spec, nu_llm_prefetch *plan)
{
    static const char *const targets[NU_LLM_AHEAD_COUNT] = {"o", "gu", "down", "qkv"};
    static const char *const levels[NU_LLM_AT_COUNT] = {"off", "rope", "attn", "o", "gu", "down"};
    /* the last level each target may be read in: before its own */
    static const int last[NU_LLM_AHEAD_COUNT] = {NU_LLM_AT_ATTN, NU_LLM_AT_O, NU_LLM_AT_GU, NU_LLM_AT_DOWN};
    memset(plan, 0, sizeof *plan);
    const char *s = spec;
    while (*s) {
        while (*s == ' ' || *s == ',')
            s++;
        if (!*s)
            break;
        size_t n = strcspn(s, " ,");
        char item[64];
        if (n >= sizeof item)
            goto bad;
        memcpy(item, s, n);
        item[n] = 0;
        s += n;
        char *eq = strchr(item, '='), *colon = eq ? strchr(eq, ':') : NULL;
        if (!eq)
            goto bad;
        *eq = 0;
        if (colon)
            *colon = 0;
        int t = -1, lv = -1;
        for (int i = 0; i < NU_LLM_AHEAD_COUNT; i++)
            if (!strcmp(item, targets[i]))
                t = i;
        for (int i = 0; i < NU_LLM_AT_COUNT; i++)
            if (!strcmp(eq + 1, levels[i]))
                lv = i;
        if (t < 0 || lv < 0 || lv > last[t])
            goto bad;
        uint64_t mb = 0;
        if (colon) {
            char *end;
            unsigned long v = strtoul(colon + 1, &end, 10);
            if (*end || !colon[1] || v > 4096)
                goto bad;
            mb = v;
        }
        plan->at[t] = (uint8_t)lv;
        plan->bytes[t] = mb << 20;
    }
    return NU_OK;
bad:
    return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT,
                        "nu_llm_model_open: NUVEC_LLM_PREFETCH=%s: each item is TARGET=LEVEL[:MB], TARGET o, gu, "
                        "down or qkv, LEVEL off, rope, attn, o, gu or down before the target's own (o: rope or attn; "
                        "gu: up to o; down: up to gu), MB at most 4096",
                        spec);
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
    if (getenv("NUVEC_LLM_NO_FRESH"))
        o->fresh_attention = -1;
    else if (getenv("NUVEC_LLM_FRESH_ROWS"))
        o->fresh_attention = 1;
    if (getenv("NUVEC_LLM_COPY_PAIR"))
        o->copy_pair = 1;
    if (getenv("NUVEC_LLM_NO_POST_FUSION"))
        o->post_norm_fusion = -1;
    if (getenv("NUVEC_LLM_NO_PRODUCT_GLU"))
        o->product_glu = -1;
    if (getenv("NUVEC_LLM_NO_STACKING"))
        o->stack_weights = -1;
    if (getenv("NUVEC_LLM_NO_REPACK_Q6_K"))
        o->repack_q6_k = -1;
    if (getenv("NUVEC_LLM_GREEDY_CPU"))
        o->greedy_on_cpu = true;
    const char *host = getenv("NUVEC_LLM_EMBED_IN_HOST");
    if (host && *host) {
        if (strcmp(host, "0") && strcmp(host, "1"))
            return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_open: NUVEC_LLM_EMBED_IN_HOST=%s is not 0 or 1",
                                host);
        o->embed_in_host = *host == '1' ? 1 : -1;
    }
    nu_status st;
    if ((st = env_u32("NUVEC_LLM_GREEDY_DEPTH", 1, NU_LLM_GREEDY_MAX_DEPTH, &o->greedy_depth)) != NU_OK ||
        (st = env_u32("NUVEC_LLM_GREEDY_UNROLL", 1, NU_LLM_GREEDY_MAX_UNROLL, &o->greedy_unroll)) != NU_OK ||
        (st = env_u32("NUVEC_LLM_MATVEC_ROWS", 1, NU_MATVEC_MAX_ROWS, &o->matvec_rows)) != NU_OK ||
        (st = env_u32("NUVEC_LLM_MATMUL_ROWS", 2, 32768, &o->matmul_rows)) != NU_OK ||
        (st = env_u32("NUVEC_LLM_DIRECT_ROWS", 1, 32768, &o->direct_rows)) != NU_OK ||
        (st = env_u32("NUVEC_LLM_PREFILL_CHUNK", 1, 32768, &o->prefill_chunk)) != NU_OK)
        return st;
    /* matmul_rows 0 stays 0: the runner chooses it by the weights (runner.c). */
    if (!o->matvec_rows)
        o->matvec_rows = NU_MATVEC_MAX_ROWS;
    if (o->matvec_rows > NU_MATVEC_MAX_ROWS)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_open: matvec_rows %u; 1 to %d", o->matvec_rows,
                            NU_MATVEC_MAX_ROWS);
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
    if (!o->slots)
        o->slots = 1;
    if (o->slots > 32768)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_open: %u slots; at most 32768", o->slots);
    if (o->direct_rows > 32768)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_open: direct_rows %u; 1 to 32768", o->direct_rows);
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

/* Whether share i's device is not also an earlier share's. */
static bool first_use(const nu_llm_model *m, uint32_t i)
{
    for (uint32_t j = 0; j < i; j++)
        if (m->sh.share[j].dev == m->sh.share[i].dev)
            return false;
    return true;
}

/* What the driver's budget leaves of the heap private buffers use (UINT64_MAX where it reports
 * none). */
static uint64_t budget_left(nu_device *d)
{
    nu_memory_budget b;
    if (nu_device_memory_budget(d, &b) != NU_OK || !b.from_driver)
        return UINT64_MAX;
    uint32_t h = private_heap(d);
    return b.budget[h] > b.usage[h] ? b.budget[h] - b.usage[h] : 0;
}

/* The cap: max_memory, and where the driver reports a budget, what is left of it. A share's
 * weights, KV cache, decode activations and two prefill passes in flight must fit its device,
 * before any weight moves. */
static nu_status check_fit(nu_llm_model *m, const nu_llm_share *sh, const nu_llm_model_options *o,
                           const nu_llm_weights_options *wo, const nu_llm_runner_options *ro, uint32_t positions)
{
    const nu_llm_config *c = &m->hp.cfg;
    uint64_t weights, held, pass;
    nu_llm_weights dtypes;
    uint64_t shared;
    nu_status st = nu_llm__weights_plan(m->src, m->arch, &m->hp, wo, &weights, &shared, &dtypes);
    if (st != NU_OK)
        return st;
    if (!nu_device_memory_choice(sh->dev)->shared_device_local)
        weights -= shared; /* in host memory (embed_in_host) */
    /* A_W16 as the runner will size it (none where every pass reads the weights as they are). */
    bool w16 = nu_llm__runner_copies(ro, &dtypes, nu_llm__runner_units(sh->dev, ro), ro->chunk, false);
    nu_llm__runner_sizes(&m->hp, ro, w16, &held, &pass);
    uint64_t kv = nu_llm__kv_bytes(sh->end - sh->first, o->slots, positions, c->kv_heads, c->head_dim, o->kv_dtype);
    uint64_t need = weights + kv + held + 2 * pass;
    m->need += need;
    uint64_t cap = o->max_memory ? o->max_memory : UINT64_MAX, left = budget_left(sh->dev);
    const char *what = "the cap (max_memory)";
    if (left < cap)
        cap = left, what = "what the driver's budget leaves of the device's memory";
    if (need <= cap)
        return NU_OK;
    char device[64] = "";
    if (m->sh.count > 1)
        snprintf(device, sizeof device, " on device %u of %u (layers %u to %u)", (unsigned)(sh - m->sh.share), m->sh.count,
                 sh->first, sh->end - 1);
    return nu_llm__fail(NU_ERROR_OUT_OF_MEMORY, "nu_llm_model_open: the model needs %llu bytes of device memory%s "
                        "(weights %llu, KV cache %llu for %u positions, activations %llu, two prefill passes %llu); %s "
                        "is %llu",
                        (unsigned long long)need, device, (unsigned long long)weights, (unsigned long long)kv, positions,
                        (unsigned long long)held, (unsigned long long)(2 * pass), what, (unsigned long long)cap);
}

nu_status nu_llm_model_memory(const nu_llm_model *m, nu_llm_memory *out)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!m || !out)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_memory: NULL %s", m ? "out" : "model");
    for (uint32_t i = 0; i < m->sh.count; i++) {
        const nu_llm_share *sh = &m->sh.share[i];
        uint64_t in_host = nu_device_memory_choice(sh->dev)->shared_device_local ? 0 : sh->w.shared_bytes;
        out->weights_in_host += in_host;
        out->weights += sh->w.bytes - in_host;
        out->kv_cache += sh->kv.bytes;
        out->activations += nu_llm__runner_bytes(sh->run);
        out->prefill_pass += nu_llm__runner_pass_bytes(sh->run);
        if (!first_use(m, i))
            continue; /* the same device given twice: its statistics once */
        nu_memory_stats ms;
        if (nu_memory_get_stats(sh->dev, &ms) == NU_OK)
            out->device_active += ms.active, out->device_reserved += ms.reserved;
        nu_memory_budget b;
        if (nu_device_memory_budget(sh->dev, &b) == NU_OK && b.from_driver) {
            uint32_t h = private_heap(sh->dev);
            out->heap_budget += b.budget[h], out->heap_usage += b.usage[h];
        }
    }
    out->total = out->weights + out->kv_cache + out->activations;
    out->need = m->need;
    out->open_peak = m->open_peak;
    out->prefill_peak = m->prefill_peak;
    out->decode_peak = m->decode_peak;
    return NU_OK;
}

void nu_llm__model_peak_start(nu_llm_model *m)
{
    for (uint32_t i = 0; m->measure_peaks && i < m->sh.count; i++)
        if (first_use(m, i))
            nu_memory_reset_peak(m->sh.share[i].dev);
}

void nu_llm__model_peak_end(nu_llm_model *m, uint64_t *into)
{
    if (!m->measure_peaks)
        return;
    *into = 0;
    for (uint32_t i = 0; i < m->sh.count; i++)
        if (first_use(m, i))
            *into += nu_memory_peak(m->sh.share[i].dev);
}

/* The tokenizer is optional: without a usable one the model runs on token ids (the note says why).
 * A vocabulary with more ids than the model's embedding rows would feed ids the model refuses. */
static void open_tokenizer(nu_llm_model *m)
{
    const nu_gguf *g = nu_llm__source_gguf(m->src);
    nu_status st = g ? nu_llm__tokenizer_from_gguf(g, &m->tok)
                     : nu_llm__tokenizer_from_folder(nu_llm__source_path(m->src), &m->tok);
    if (st == NU_OK && nu_llm_tokenizer_count(m->tok) > m->hp.cfg.vocab) {
        nu_llm__fail(NU_ERROR_FORMAT, "the tokenizer has %u tokens; the model's embedding has %u rows",
                     nu_llm_tokenizer_count(m->tok), m->hp.cfg.vocab);
        nu_llm_tokenizer_free(m->tok);
        m->tok = NULL;
        st = NU_ERROR_FORMAT;
    }
    if (st != NU_OK)
        snprintf(m->tok_note, sizeof m->tok_note, "%s", nu_llm_error_message());
    nu_llm__fail(NU_OK, "%s", "");
}

/* Each device's room for the model: what the driver's budget leaves of the heap private buffers
 * use, or that heap's size. */
static double device_room(nu_device *d)
{
    uint64_t left = budget_left(d);
    return left != UINT64_MAX ? (double)left : (double)nu_device_get_info(d)->heaps[private_heap(d)].size;
}

/* The shares' layers: in proportion to weights (or to the devices' room), at least one each. */
static nu_status share_layers(nu_llm_model *m, nu_device *const *devices, uint32_t count, const double *weights)
{
    static const char fn[] = "nu_llm_model_open_split";
    uint32_t layers = m->hp.cfg.layers;
    if (count > layers)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "%s: %u devices for %u layers; each device takes at least one",
                            fn, count, layers);
    double w[NU_LLM_MAX_DEVICES], total = 0;
    for (uint32_t i = 0; i < count; i++) {
        w[i] = weights ? weights[i] : device_room(devices[i]);
        if (!(w[i] > 0) || w[i] > 1e300)
            return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, weights ? "%s: weight %u is %g; positive and finite expected"
                                                                   : "%s: device %u reports no memory (%g bytes)",
                                fn, i, w[i]);
        total += w[i];
    }
    double at = 0;
    uint32_t first = 0;
    for (uint32_t i = 0; i < count; i++) {
        at += w[i];
        uint32_t end = i + 1 == count ? layers : (uint32_t)(layers * (at / total) + 0.5);
        if (end < first + 1)
            end = first + 1;
        if (end > layers - (count - 1 - i)) /* room for a layer on each device after this one */
            end = layers - (count - 1 - i);
        m->sh.share[i].dev = devices[i], m->sh.share[i].first = first, m->sh.share[i].end = end;
        first = end;
    }
    m->sh.count = count;
    return NU_OK;
}

nu_status nu_llm_model_open(nu_device *device, const char *path, const nu_llm_model_options *options, nu_llm_model **out)
{
    if (out)
        *out = NULL;
    if (!device || !path || !out)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_open: NULL %s", !device ? "device" : !path ? "path" : "out");
    return nu_llm_model_open_split(&device, 1, NULL, path, options, out);
}

/* Loads share sh: its weights (from a source opened on its device, the model's own for the first
 * device), its KV cache and its runner. */
static nu_status open_share(nu_llm_model *m, nu_llm_share *sh, const char *path, const nu_llm_model_options *o,
                            nu_llm_weights_options wo, nu_llm_runner_options ro, uint32_t positions)
{
    const nu_llm_config *c = &m->hp.cfg;
    nu_llm_source *src = m->src;
    nu_status st = sh == m->sh.share ? NU_OK : nu_llm__source_open(sh->dev, path, &src);
    wo.first = sh->first, wo.end = sh->end;
    ro.first = sh->first, ro.end = sh->end;
    if (st == NU_OK)
        st = nu_llm__weights_load(sh->dev, src, m->arch, &m->hp, &wo, &sh->w);
    if (src != m->src)
        nu_llm__source_close(src);
    if (st == NU_OK)
        st = nu_llm__kv_new(sh->dev, c->layers, sh->first, sh->end, o->slots, positions, c->kv_heads, c->head_dim,
                            o->kv_dtype, &sh->kv);
    if (st != NU_OK)
        return st;
    sh->kv.used[0] = true; /* the model's own sequence (prefill, decode) */
    return nu_llm__runner_new(sh->dev, m->arch, &m->hp, &sh->w, &sh->kv, &ro, &sh->run);
}

nu_status nu_llm_model_open_split(nu_device *const *devices, uint32_t count, const double *weights, const char *path,
                                  const nu_llm_model_options *options, nu_llm_model **out)
{
    static const char fn[] = "nu_llm_model_open_split";
    if (out)
        *out = NULL;
    if (!devices || !path || !out)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "%s: NULL %s", fn, !devices ? "devices" : !path ? "path" : "out");
    if (count < 1 || count > NU_LLM_MAX_DEVICES)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "%s: %u devices; 1 to %d", fn, count, NU_LLM_MAX_DEVICES);
    for (uint32_t i = 0; i < count; i++)
        if (!devices[i])
            return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "%s: device %u is NULL", fn, i);
    nu_device *device = devices[0];
    nu_llm_model_options o;
    nu_status st = resolve_options(device, options, &o);
    if (st != NU_OK)
        return st;
    nu_llm_model *m = nu_llm__calloc(1, sizeof *m);
    if (!m)
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "nu_llm_model_open: no memory");
    m->sh.share[0].dev = device;
    m->kv = &m->sh.share[0].kv;
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
    if (hd < 8 || hd > 256 || hd % 8) {
        st = nu_llm__fail(NU_ERROR_UNSUPPORTED, "nu_llm_model_open: head_dim %u; the attention kernels take multiples "
                          "of 8 from 8 to 256", hd);
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
    if ((st = share_layers(m, devices, count, weights)) != NU_OK)
        goto fail;
    special_ids(m);
    uint32_t positions = o.max_positions ? o.max_positions : c->max_positions;
    uint32_t chunk = o.prefill_chunk ? o.prefill_chunk : 512;
    /* The embedding in host memory where shared buffers are (a discrete GPU), as llama.cpp keeps its
     * input layer: a step reads its rows over the bus. */
    bool embed_shared = o.embed_in_host > 0 || (o.embed_in_host == 0 && !nu_device_memory_choice(device)->shared_device_local);
    nu_llm_weights_options wo = {o.weights_f16, o.repack_q4_0 >= 0, o.repack_q6_k >= 0, o.stack_weights >= 0,
                                 o.keep_load_cache, embed_shared};
    nu_llm_runner_options ro = {chunk < positions ? chunk : positions, o.fusion >= 0, o.prefill_f16 > 0,
                                o.decode_by_commands, o.greedy_depth, o.greedy_unroll, o.greedy_on_cpu,
                                o.matvec_rows, o.matmul_rows, o.direct_rows};
    ro.ahead_on = o.prefetch > 0;
    ro.fresh = o.fresh_attention >= 0;
    ro.fresh_rows = o.fresh_attention > 0;
    ro.copy_pair = o.copy_pair > 0;
    ro.post_fusion = o.post_norm_fusion >= 0;
    ro.product_glu = o.product_glu >= 0;
    ro.ahead = default_ahead;
    const char *ahead = getenv("NUVEC_LLM_PREFETCH");
    if (ahead && *ahead) {
        if ((st = prefetch_plan(ahead, &ro.ahead)) != NU_OK)
            goto fail;
        ro.ahead_on = true;
    }
    for (uint32_t i = 0; i < m->sh.count; i++) {
        nu_llm_share *sh = &m->sh.share[i];
        nu_llm_weights_options swo = wo;
        nu_llm_runner_options sro = ro;
        swo.first = sh->first, swo.end = sh->end, sro.first = sh->first, sro.end = sh->end;
        if ((st = check_fit(m, sh, &o, &swo, &sro, positions)) != NU_OK)
            goto fail;
    }
    m->measure_peaks = o.measure_peaks;
    uint64_t before[NU_LLM_MAX_DEVICES];
    for (uint32_t i = 0; i < m->sh.count; i++) {
        before[i] = nu_memory_active(m->sh.share[i].dev);
        if (m->measure_peaks)
            nu_memory_reset_peak(m->sh.share[i].dev);
    }
    for (uint32_t i = 0; i < m->sh.count; i++)
        if ((st = open_share(m, &m->sh.share[i], path, &o, wo, ro, positions)) != NU_OK)
            goto fail;
    for (uint32_t i = 0; m->measure_peaks && i < m->sh.count; i++)
        if (first_use(m, i))
            m->open_peak += nu_memory_peak(m->sh.share[i].dev) - before[i];
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
    uint32_t pos = m->kv->length[0];
    if (n > m->kv->positions - pos)
        return nu_llm__fail(NU_ERROR_OUT_OF_RANGE, "%s: %zu tokens at position %u overflow the cache's %u positions", fn, n,
                            pos, m->kv->positions);
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
    nu_llm__model_peak_start(m);
    st = nu_llm__shares_prefill(&m->sh, 0, tokens, (uint32_t)n, logits);
    nu_llm__model_peak_end(m, &m->prefill_peak);
    return st;
}

nu_status nu_llm_model_decode(nu_llm_model *m, int32_t token, float *logits)
{
    if (!m)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_decode: NULL model");
    nu_status st = check_ids(m, &token, 1, "nu_llm_model_decode");
    if (st != NU_OK)
        return st;
    nu_llm__model_peak_start(m);
    st = nu_llm__shares_decode(&m->sh, token, logits);
    nu_llm__model_peak_end(m, &m->decode_peak);
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
    uint32_t pos = m->kv->length[0];
    if (n > m->kv->positions - pos)
        return nu_llm__fail(NU_ERROR_OUT_OF_RANGE, "%s: %u tokens from position %u overflow the cache's %u positions", fn,
                            n, pos, m->kv->positions);
    if (n == 0)
        return NU_OK;
    uint32_t got = 0;
    nu_llm__model_peak_start(m);
    nu_status st = nu_llm__shares_greedy(&m->sh, token, n, out, &got, stop_token, on_token, user);
    nu_llm__model_peak_end(m, &m->decode_peak);
    if (st == NU_OK)
        *produced = got;
    return st;
}
