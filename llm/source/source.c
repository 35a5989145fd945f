/* source.c: the source's front (source.h): opening by path, the tensor list, and metadata looked up
 * by an architecture's names in whichever format the source is. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "source_int.h"

#define FN "nu_llm_model_open"

nu_status nu_llm__source_open(nu_device *device, const char *path, nu_llm_source **out)
{
    *out = NULL;
    nu_llm_source *s = nu_llm__calloc(1, sizeof *s);
    size_t n = strlen(path);
    if (!s || !(s->path = nu_llm__malloc(n + 1))) {
        nu_llm__free(s);
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN ": no memory");
    }
    memcpy(s->path, path, n + 1);
    s->device = device;
    s->kind = n > 5 && !strcmp(path + n - 5, ".gguf") ? NU_LLM_SOURCE_GGUF : NU_LLM_SOURCE_HF;
    nu_status st = s->kind == NU_LLM_SOURCE_GGUF ? nu_llm__gguf_open(s) : nu_llm__hf_open(s);
    if (st != NU_OK) {
        nu_llm__source_close(s);
        return st;
    }
    *out = s;
    return NU_OK;
}

void nu_llm__source_close(nu_llm_source *s)
{
    if (!s)
        return;
    if (s->kind == NU_LLM_SOURCE_GGUF)
        nu_llm__gguf_close(s);
    else
        nu_llm__hf_close(s);
    nu_llm__free(s->tensors);
    nu_llm__free(s->path);
    nu_llm__free(s);
}

nu_llm_source_kind nu_llm__source_kind(const nu_llm_source *s) { return s->kind; }
const char *nu_llm__source_path(const nu_llm_source *s) { return s->path; }
const char *nu_llm__source_arch(const nu_llm_source *s) { return s->arch; }
const nu_gguf *nu_llm__source_gguf(const nu_llm_source *s) { return s->gguf; }
size_t nu_llm__source_tensor_count(const nu_llm_source *s) { return s->tensor_count; }
size_t nu_llm__source_files(const nu_llm_source *s) { return s->kind == NU_LLM_SOURCE_GGUF ? 1 : s->file_count; }

const nu_llm_file_tensor *nu_llm__source_tensor(const nu_llm_source *s, size_t i)
{
    return i < s->tensor_count ? &s->tensors[i] : NULL;
}

const nu_llm_file_tensor *nu_llm__source_find(const nu_llm_source *s, const char *name)
{
    for (size_t i = 0; i < s->tensor_count; i++)
        if (!strcmp(s->tensors[i].name, name))
            return &s->tensors[i];
    return NULL;
}

nu_status nu_llm__source_move(nu_llm_source *s, const nu_llm_file_tensor *const *tensors, size_t n, const char *name,
                              nu_buffer **buffers, size_t *buffer_count, uint32_t *where, uint64_t *offset)
{
    *buffer_count = 0;
    if (!n)
        return NU_OK;
    return s->kind == NU_LLM_SOURCE_GGUF ? nu_llm__gguf_move(s, tensors, n, name, buffers, buffer_count, where, offset)
                                         : nu_llm__hf_move(s, tensors, n, name, buffers, buffer_count, where, offset);
}

nu_status nu_llm__source_read(nu_llm_source *s, const nu_llm_file_tensor *t, void *dst, uint64_t size)
{
    nu_buffer *file;
    uint64_t offset, bytes;
    if (s->kind == NU_LLM_SOURCE_GGUF) {
        const nu_gguf_tensor_info *g = nu_gguf_tensor(s->gguf, t->index);
        file = nu_gguf_buffer(s->gguf), offset = g ? g->offset : 0, bytes = g ? g->size : 0;
    } else {
        const nu_tensor_info *h = t->file < s->file_count ? nu_safetensors_tensor(s->files[t->file], t->index) : NULL;
        file = h ? nu_safetensors_buffer(s->files[t->file]) : NULL, offset = h ? h->offset : 0, bytes = h ? h->size : 0;
    }
    if (bytes != size)
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": %s holds %llu bytes; %llu expected", t->name,
                            (unsigned long long)bytes, (unsigned long long)size);
    if (!file || nu_buffer_read(file, (size_t)offset, dst, (size_t)size) != NU_OK)
        return nu_llm__fail(NU_ERROR_IO, FN ": the mapping of %s cannot be read: %s", s->path,
                            file ? nu_error_message(s->device) : "no mapping");
    return NU_OK;
}

/* ---- metadata ---------------------------------------------------------------------------- */

/* GGUF's full key: "<arch>.<name>". */
static const char *gguf_key(const nu_llm_source *s, const char *name, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s.%s", s->arch, name);
    return buf;
}

static const cJSON *hf_value(const nu_llm_source *s, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s->config, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

/* A failed nuvec call with its message. */
static nu_status nv(const nu_llm_source *s, nu_status st)
{
    return st == NU_OK ? st : nu_llm__fail(st, FN ": %s", nu_error_message(s->device));
}

bool nu_llm__meta_has(const nu_llm_source *s, nu_llm_key key)
{
    char k[256];
    if (s->kind == NU_LLM_SOURCE_GGUF)
        return key.gguf && nu_gguf_has(s->gguf, gguf_key(s, key.gguf, k, sizeof k));
    return key.hf && hf_value(s, key.hf);
}

/* The config.json number of `key`, or *fallback (NULL: required). */
static nu_status hf_number(const nu_llm_source *s, const char *key, bool required, const cJSON **out)
{
    *out = hf_value(s, key);
    if (!*out && required)
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": config.json has no %s", key);
    if (*out && !cJSON_IsNumber(*out))
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": config.json's %s is not a number", key);
    return NU_OK;
}

nu_status nu_llm__meta_u32(const nu_llm_source *s, nu_llm_key key, const uint32_t *fallback, uint32_t *out)
{
    const uint32_t fb = fallback ? *fallback : 0;
    char k[256];
    *out = 0;
    const char *name = s->kind == NU_LLM_SOURCE_GGUF ? key.gguf : key.hf;
    if (!name) {
        *out = fb;
        return fallback ? NU_OK : nu_llm__fail(NU_ERROR_FORMAT, FN ": no such key in this format");
    }
    if (s->kind == NU_LLM_SOURCE_GGUF)
        return nv(s, nu_gguf_get_u32(s->gguf, gguf_key(s, name, k, sizeof k), fallback ? &fb : NULL, out));
    const cJSON *v;
    nu_status st = hf_number(s, name, !fallback, &v);
    if (st != NU_OK)
        return st;
    if (!v) {
        *out = fb;
        return NU_OK;
    }
    if (!(v->valuedouble >= 0) || v->valuedouble > (double)UINT32_MAX || v->valuedouble != floor(v->valuedouble))
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": config.json's %s is not an integer from 0 to %u", name, UINT32_MAX);
    *out = (uint32_t)v->valuedouble;
    return NU_OK;
}

nu_status nu_llm__meta_f32(const nu_llm_source *s, nu_llm_key key, const float *fallback, float *out)
{
    const float fb = fallback ? *fallback : 0;
    char k[256];
    *out = 0;
    const char *name = s->kind == NU_LLM_SOURCE_GGUF ? key.gguf : key.hf;
    if (!name) {
        *out = fb;
        return fallback ? NU_OK : nu_llm__fail(NU_ERROR_FORMAT, FN ": no such key in this format");
    }
    nu_status st;
    if (s->kind == NU_LLM_SOURCE_GGUF) {
        if ((st = nv(s, nu_gguf_get_f32(s->gguf, gguf_key(s, name, k, sizeof k), fallback ? &fb : NULL, out))) != NU_OK)
            return st;
    } else {
        const cJSON *v;
        if ((st = hf_number(s, name, !fallback, &v)) != NU_OK)
            return st;
        *out = v ? (float)v->valuedouble : fb;
    }
    if (!isfinite(*out)) {
        *out = 0;
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": %s is not a finite number", name);
    }
    return NU_OK;
}

nu_status nu_llm__meta_bool(const nu_llm_source *s, nu_llm_key key, const bool *fallback, bool *out)
{
    const bool fb = fallback ? *fallback : false;
    char k[256];
    *out = false;
    const char *name = s->kind == NU_LLM_SOURCE_GGUF ? key.gguf : key.hf;
    if (!name) {
        *out = fb;
        return fallback ? NU_OK : nu_llm__fail(NU_ERROR_FORMAT, FN ": no such key in this format");
    }
    if (s->kind == NU_LLM_SOURCE_GGUF)
        return nv(s, nu_gguf_get_bool(s->gguf, gguf_key(s, name, k, sizeof k), fallback ? &fb : NULL, out));
    const cJSON *v = hf_value(s, name);
    if (!v && !fallback)
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": config.json has no %s", name);
    if (v && !cJSON_IsBool(v))
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": config.json's %s is not true or false", name);
    *out = v ? cJSON_IsTrue(v) : fb;
    return NU_OK;
}

nu_status nu_llm__meta_string(const nu_llm_source *s, nu_llm_key key, const char *fallback, char *buf, size_t cap)
{
    char k[256];
    buf[0] = 0;
    const char *name = s->kind == NU_LLM_SOURCE_GGUF ? key.gguf : key.hf;
    const char *value = fallback;
    size_t len = fallback ? strlen(fallback) : 0;
    if (name && s->kind == NU_LLM_SOURCE_GGUF) {
        uint64_t n;
        nu_status st = nv(s, nu_gguf_get_string(s->gguf, gguf_key(s, name, k, sizeof k), fallback, &value, &n));
        if (st != NU_OK)
            return st;
        len = (size_t)n;
    } else if (name) {
        const cJSON *v = hf_value(s, name);
        if (v && !cJSON_IsString(v))
            return nu_llm__fail(NU_ERROR_FORMAT, FN ": config.json's %s is not a string", name);
        if (v)
            value = v->valuestring, len = strlen(value);
    }
    if (!value)
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": the model has no %s", name ? name : "such key");
    if (len >= cap)
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": %s is longer than %zu bytes", name ? name : "a value", cap - 1);
    memcpy(buf, value, len);
    buf[len] = 0;
    return NU_OK;
}

const void *nu_llm__meta_hf_object(const nu_llm_source *s, const char *key)
{
    return s->kind == NU_LLM_SOURCE_HF ? hf_value(s, key) : NULL;
}

/* config.json keys of transformers' PretrainedConfig that no architecture's forward pass reads:
 * bookkeeping, training-time dropout and initialisation, generation defaults, token ids other than
 * bos/eos (the tokenizer's), and pretraining_tp (a slicing of the same products). */
static const char *const HF_HARMLESS[] = {
    "_name_or_path", "architectures", "model_type", "torch_dtype", "dtype", "transformers_version",
    "initializer_range", "use_cache", "pretraining_tp", "attention_dropout", "hidden_dropout", "pad_token_id",
    "sep_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id", "output_attentions",
    "output_hidden_states", "return_dict", "use_return_dict", "is_decoder", "is_encoder_decoder",
    "add_cross_attention", "tie_encoder_decoder", "cross_attention_hidden_size", "chunk_size_feed_forward",
    "tokenizer_class", "prefix", "task_specific_params", "problem_type", "finetuning_task", "id2label", "label2id",
    "torchscript", "use_bfloat16", "tf_legacy_loss", "pruned_heads", "max_length", "min_length", "do_sample",
    "early_stopping", "num_beams", "num_beam_groups", "diversity_penalty", "temperature", "top_k", "top_p",
    "typical_p", "repetition_penalty", "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size",
    "bad_words_ids", "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
    "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty", "suppress_tokens",
    "begin_suppress_tokens"};

static bool known_key(const char *k, bool gguf, const nu_llm_key *known, size_t n)
{
    for (size_t i = 0; !gguf && i < sizeof HF_HARMLESS / sizeof *HF_HARMLESS; i++)
        if (!strcmp(k, HF_HARMLESS[i]))
            return true;
    for (size_t i = 0; i < n; i++) {
        const char *name = gguf ? known[i].gguf : known[i].hf;
        if (name && !strcmp(k, name))
            return true;
    }
    return false;
}

nu_status nu_llm__meta_check(const nu_llm_source *s, const nu_llm_key *known, size_t known_count,
                             const nu_llm_refused_key *refused, size_t refused_count)
{
    bool gguf = s->kind == NU_LLM_SOURCE_GGUF;
    size_t plen = strlen(s->arch);
    uint64_t n = gguf ? nu_gguf_kv_count(s->gguf) : (uint64_t)cJSON_GetArraySize(s->config);
    const cJSON *e = gguf ? NULL : s->config->child;
    for (uint64_t i = 0; i < n; i++) {
        const char *key;
        if (gguf) {
            nu_gguf_value v;
            nu_status st = nv(s, nu_gguf_kv(s->gguf, i, &key, &v));
            if (st != NU_OK)
                return st;
            if (!strcmp(key, "split.count")) {
                uint32_t count = 1;
                if ((st = nv(s, nu_gguf_get_u32(s->gguf, key, NULL, &count))) != NU_OK)
                    return st;
                if (count > 1)
                    return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": the model is split over %u files (split.count); "
                                        "nuvec opens single-file models (llama.cpp's gguf-split --merge joins them)",
                                        count);
                continue;
            }
            if (strncmp(key, s->arch, plen) || key[plen] != '.')
                continue; /* general.*, tokenizer.*, quantize.*: not the arithmetic */
            key += plen + 1;
        } else {
            key = e->string;
            e = e->next;
        }
        if (known_key(key, gguf, known, known_count))
            continue;
        for (size_t r = 0; r < refused_count; r++) {
            const char *name = gguf ? refused[r].key.gguf : refused[r].key.hf;
            if (name && !strcmp(key, name)) {
                if (gguf)
                    return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": %s.%s (%s) is not supported", s->arch, key,
                                        refused[r].what);
                return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": config.json's %s (%s) is not supported", key,
                                    refused[r].what);
            }
        }
        if (gguf)
            return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": %s.%s is not a key nuvec knows for %s; it may change the "
                                "model's arithmetic, so the file is refused", s->arch, key, s->arch);
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": config.json's %s is not a key nuvec knows for %s; it may change "
                            "the model's arithmetic, so the model is refused", key, s->arch);
    }
    return NU_OK;
}
