/* hf.c: a Hugging Face model folder as a weight source (source.h): config.json read with cJSON,
 * the weights from every *.safetensors file of the folder (one, or shards such as
 * model-00001-of-00002.safetensors), each file moved to the device in one pass
 * (nu_safetensors_to_device). Names are transformers' LlamaForCausalLM ones; q_proj and k_proj
 * rows are in rotate_half order (NU_ROPE_HALF), as transformers' converter leaves them. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common.h"
#include "source.h"
#include "tokenizer/readers.h"

#define FN "nu_llm_model_open"
#define MAX_FILES 256

typedef struct hf_file {
    nu_safetensors *st;
    nu_buffer *weights; /* every tensor of the file, on the device */
    uint64_t *offsets;  /* of tensor i (file order) in weights */
} hf_file;

typedef struct hf_source {
    nu_llm_source base;
    nu_device *device;
    hf_file files[MAX_FILES];
    size_t file_count;
} hf_source;

static const char *const WEIGHT_NAMES[NU_LLM_W_COUNT] = {
    "embed", "attn_norm", "q", "k", "v", "o", "ffn_norm", "gate", "up", "down", "out_norm", "output"};

const char *nu_llm__weight_name(nu_llm_weight w) { return w < NU_LLM_W_COUNT ? WEIGHT_NAMES[w] : "?"; }

/* transformers' tensor name of a role. */
static void hf_name(nu_llm_weight w, uint32_t layer, char *out, size_t n)
{
    static const char *const per_layer[NU_LLM_W_COUNT] = {
        [NU_LLM_W_ATTN_NORM] = "input_layernorm",  [NU_LLM_W_Q] = "self_attn.q_proj",
        [NU_LLM_W_K] = "self_attn.k_proj",         [NU_LLM_W_V] = "self_attn.v_proj",
        [NU_LLM_W_O] = "self_attn.o_proj",         [NU_LLM_W_FFN_NORM] = "post_attention_layernorm",
        [NU_LLM_W_GATE] = "mlp.gate_proj",         [NU_LLM_W_UP] = "mlp.up_proj",
        [NU_LLM_W_DOWN] = "mlp.down_proj"};
    if (w == NU_LLM_W_EMBED)
        snprintf(out, n, "model.embed_tokens.weight");
    else if (w == NU_LLM_W_OUT_NORM)
        snprintf(out, n, "model.norm.weight");
    else if (w == NU_LLM_W_OUTPUT)
        snprintf(out, n, "lm_head.weight");
    else
        snprintf(out, n, "model.layers.%u.%s.weight", layer, per_layer[w]);
}

static nu_status hf_weight(nu_llm_source *s, nu_llm_weight w, uint32_t layer, nu_tensor *out)
{
    hf_source *h = (hf_source *)s;
    char name[128];
    hf_name(w, layer, name, sizeof name);
    for (size_t f = 0; f < h->file_count; f++) {
        const nu_tensor_info *info = nu_safetensors_find(h->files[f].st, name);
        if (!info)
            continue;
        if (info->rank < 1 || info->rank > NU_TENSOR_DIMS)
            return nu_llm__fail(NU_ERROR_FORMAT, FN ": %s has rank %u; 1 to %d expected", name, info->rank, NU_TENSOR_DIMS);
        size_t count = nu_safetensors_count(h->files[f].st), i = 0;
        while (i < count && nu_safetensors_tensor(h->files[f].st, i) != info)
            i++;
        int64_t shape[NU_TENSOR_DIMS];
        for (uint32_t d = 0; d < info->rank; d++)
            shape[d] = (int64_t)info->shape[d];
        *out = nu_tensor_make(h->files[f].weights, h->files[f].offsets[i], info->dtype, info->rank, shape);
        return NU_OK;
    }
    return nu_llm__fail(NU_ERROR_FORMAT, FN ": the model has no tensor %s", name);
}

static void hf_close(nu_llm_source *s)
{
    hf_source *h = (hf_source *)s;
    if (!h)
        return;
    for (size_t f = 0; f < h->file_count; f++) {
        nu_buffer_free(h->files[f].weights);
        nu_safetensors_close(h->files[f].st);
        nu_llm__free(h->files[f].offsets);
    }
    nu_llm_tokenizer_free(h->base.tokenizer);
    nu_llm__free(h);
}

/* The whole file at `path`, NUL-terminated, in *out (nu_llm__free it). */
static nu_status read_text(const char *path, char **out, size_t *len)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return nu_llm__fail(NU_ERROR_IO, FN ": cannot open %s: %s", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            size_t ncap = cap ? cap * 2 : 8192;
            if (ncap > (64u << 20)) {
                nu_llm__free(buf);
                fclose(f);
                return nu_llm__fail(NU_ERROR_FORMAT, FN ": %s is larger than 64 MiB", path);
            }
            char *nb = nu_llm__malloc(ncap);
            if (!nb) {
                nu_llm__free(buf);
                fclose(f);
                return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN ": no memory for %s", path);
            }
            if (buf)
                memcpy(nb, buf, n);
            nu_llm__free(buf);
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + n, 1, 4096, f);
        n += got;
        if (got < 4096)
            break;
    }
    bool err = ferror(f);
    fclose(f);
    if (err) {
        nu_llm__free(buf);
        return nu_llm__fail(NU_ERROR_IO, FN ": cannot read %s", path);
    }
    buf[n] = 0;
    *out = buf;
    if (len)
        *len = n;
    return NU_OK;
}

/* A positive integer key (required or not: `def` when absent and not required). */
static nu_status get_u32(const cJSON *root, const char *key, bool required, uint32_t def, uint32_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) {
        if (required)
            return nu_llm__fail(NU_ERROR_FORMAT, FN ": config.json has no %s", key);
        *out = def;
        return NU_OK;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 1) || v->valuedouble > (double)UINT32_MAX ||
        v->valuedouble != floor(v->valuedouble))
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": config.json's %s is not a positive integer", key);
    *out = (uint32_t)v->valuedouble;
    return NU_OK;
}

static nu_status get_float(const cJSON *root, const char *key, float def, float *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return NU_OK;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble > 0) || !isfinite((float)v->valuedouble))
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": config.json's %s is not a positive number", key);
    *out = (float)v->valuedouble;
    return NU_OK;
}

/* bos_token_id / eos_token_id: an id, a list (the first), or absent. */
static int32_t get_token(const cJSON *root, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (cJSON_IsArray(v))
        v = cJSON_GetArrayItem(v, 0);
    if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 2147483647.0)
        return (int32_t)v->valuedouble;
    return NU_LLM_NO_TOKEN;
}

static nu_status parse_config(const char *text, nu_llm_config *c)
{
    cJSON *root = cJSON_Parse(text);
    if (!root)
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": config.json is not valid JSON");
    nu_status st = NU_OK;
    if (!cJSON_IsObject(root)) {
        st = nu_llm__fail(NU_ERROR_FORMAT, FN ": config.json is not a JSON object");
        goto done;
    }
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    if (!cJSON_IsArray(arch) || !cJSON_GetArraySize(arch)) {
        st = nu_llm__fail(NU_ERROR_FORMAT, FN ": config.json has no \"architectures\" list");
        goto done;
    }
    bool llama = false;
    const cJSON *a;
    cJSON_ArrayForEach(a, arch) llama |= cJSON_IsString(a) && !strcmp(a->valuestring, "LlamaForCausalLM");
    if (!llama) {
        const cJSON *first = cJSON_GetArrayItem(arch, 0);
        st = nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": architecture %s is not supported (only LlamaForCausalLM)",
                          cJSON_IsString(first) ? first->valuestring : "(not a string)");
        goto done;
    }
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu"))) {
        st = nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": hidden_act %s is not supported (only silu)",
                          cJSON_IsString(act) ? act->valuestring : "(not a string)");
        goto done;
    }
    const cJSON *scaling = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if (scaling && !cJSON_IsNull(scaling)) {
        st = nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": rope_scaling is not supported");
        goto done;
    }
    static const char *const biases[] = {"attention_bias", "mlp_bias"};
    for (int i = 0; i < 2; i++)
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, biases[i]))) {
            st = nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": %s is not supported", biases[i]);
            goto done;
        }
    if ((st = get_u32(root, "hidden_size", true, 0, &c->dim)) != NU_OK ||
        (st = get_u32(root, "intermediate_size", true, 0, &c->ffn)) != NU_OK ||
        (st = get_u32(root, "num_hidden_layers", true, 0, &c->layers)) != NU_OK ||
        (st = get_u32(root, "num_attention_heads", true, 0, &c->heads)) != NU_OK ||
        (st = get_u32(root, "num_key_value_heads", false, c->heads, &c->kv_heads)) != NU_OK ||
        (st = get_u32(root, "vocab_size", true, 0, &c->vocab)) != NU_OK ||
        (st = get_u32(root, "max_position_embeddings", true, 0, &c->max_positions)) != NU_OK ||
        (st = get_u32(root, "head_dim", false, c->dim / c->heads, &c->head_dim)) != NU_OK ||
        (st = get_float(root, "rms_norm_eps", 1e-6f, &c->rms_eps)) != NU_OK || /* transformers' default */
        (st = get_float(root, "rope_theta", 10000.0f, &c->rope_theta)) != NU_OK)
        goto done;
    c->tied_embeddings = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings"));
    c->bos = get_token(root, "bos_token_id");
    c->eos = get_token(root, "eos_token_id");
done:
    cJSON_Delete(root);
    return st;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The folder's *.safetensors names, sorted, into names[0 .. *count) (nu_llm__free each). */
static nu_status list_weights(const char *path, char **names, size_t *count)
{
    *count = 0;
    DIR *dir = opendir(path);
    if (!dir)
        return nu_llm__fail(NU_ERROR_IO, FN ": cannot open the folder %s: %s", path, strerror(errno));
    struct dirent *e;
    nu_status st = NU_OK;
    while ((e = readdir(dir))) {
        size_t n = strlen(e->d_name);
        if (n <= 12 || strcmp(e->d_name + n - 12, ".safetensors"))
            continue;
        if (*count == MAX_FILES) {
            st = nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": %s has more than %d safetensors files", path, MAX_FILES);
            break;
        }
        if (!(names[*count] = nu_llm__malloc(n + 1))) {
            st = nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN ": no memory");
            break;
        }
        memcpy(names[(*count)++], e->d_name, n + 1);
    }
    closedir(dir);
    if (st == NU_OK && !*count)
        st = nu_llm__fail(NU_ERROR_IO, FN ": %s has no .safetensors file", path);
    if (st != NU_OK) {
        for (size_t i = 0; i < *count; i++)
            nu_llm__free(names[i]);
        *count = 0;
        return st;
    }
    qsort(names, *count, sizeof *names, by_name);
    return NU_OK;
}

nu_status nu_llm__hf_open(nu_device *device, const char *path, nu_llm_source **out)
{
    *out = NULL;
    size_t plen = strlen(path);
    char *file = nu_llm__malloc(plen + 300);
    hf_source *h = nu_llm__calloc(1, sizeof *h);
    char *names[MAX_FILES];
    size_t count = 0;
    char *text = NULL;
    nu_status st;
    if (!file || !h) {
        st = nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN ": no memory");
        goto fail;
    }
    h->device = device;
    h->base.weight = hf_weight;
    h->base.close = hf_close;
    h->base.rope_layout = NU_ROPE_HALF;
    snprintf(file, plen + 300, "%s/config.json", path);
    if ((st = read_text(file, &text, NULL)) != NU_OK || (st = parse_config(text, &h->base.config)) != NU_OK)
        goto fail;
    /* The tokenizer is optional: without a usable one the model still runs on token ids. */
    if (nu_llm__tokenizer_from_folder(path, &h->base.tokenizer) != NU_OK)
        snprintf(h->base.tokenizer_note, sizeof h->base.tokenizer_note, "%s", nu_llm_error_message());
    nu_llm__fail(NU_OK, "%s", "");
    if ((st = list_weights(path, names, &count)) != NU_OK)
        goto fail;
    for (size_t i = 0; i < count; i++) {
        hf_file *f = &h->files[h->file_count];
        snprintf(file, plen + 300, "%s/%s", path, names[i]);
        if ((st = nu_safetensors_open(device, file, &f->st)) != NU_OK) {
            st = nu_llm__fail(st, FN ": %s", nu_error_message(device));
            goto fail;
        }
        h->file_count++;
        size_t n = nu_safetensors_count(f->st);
        if (!(f->offsets = nu_llm__calloc(n ? n : 1, sizeof *f->offsets))) {
            st = nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN ": no memory");
            goto fail;
        }
        if (n && (st = nu_safetensors_to_device(f->st, NULL, 0, NULL, &f->weights, f->offsets)) != NU_OK) {
            st = nu_llm__fail(st, FN ": moving %s to the device: %s", file, nu_error_message(device));
            goto fail;
        }
        if (f->weights)
            nu_buffer_set_name(f->weights, names[i]);
    }
    for (size_t i = 0; i < count; i++)
        nu_llm__free(names[i]);
    nu_llm__free(text);
    nu_llm__free(file);
    *out = &h->base;
    return NU_OK;
fail:
    for (size_t i = 0; i < count; i++)
        nu_llm__free(names[i]);
    nu_llm__free(text);
    nu_llm__free(file);
    hf_close(h ? &h->base : NULL);
    return st;
}
