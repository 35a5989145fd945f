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

static nu_status hf_tokenizer(const char *file, const nu_llm_config *cfg, nu_llm_tokenizer **out);

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

/* ---- what a config.json may say -------------------------------------------------------------
 * As for GGUF files (llm/gguf.c): nuvec runs a folder only when it knows every key of config.json
 * that changes the model's arithmetic. Each key is read, known not to change the forward pass
 * (PretrainedConfig's generation and bookkeeping fields), checked for the value nuvec runs, or
 * refused by name; so is every tensor that is not part of the roster. */

/* Keys of transformers' PretrainedConfig and LlamaConfig that do not change the forward pass:
 * bookkeeping, training-time dropout and initialisation, generation defaults, token ids other than
 * bos/eos, and pretraining_tp (a slicing of the same products). */
static const char *const HARMLESS_CONFIG_KEYS[] = {
    "_name_or_path", "model_type", "torch_dtype", "dtype", "transformers_version", "initializer_range",
    "use_cache", "pretraining_tp", "attention_dropout", "hidden_dropout", "pad_token_id", "sep_token_id",
    "decoder_start_token_id", "output_attentions", "output_hidden_states", "return_dict", "use_return_dict",
    "is_decoder", "is_encoder_decoder", "add_cross_attention", "tie_encoder_decoder", "cross_attention_hidden_size",
    "chunk_size_feed_forward", "tokenizer_class", "prefix", "task_specific_params", "problem_type",
    "finetuning_task", "id2label", "label2id", "torchscript", "use_bfloat16", "tf_legacy_loss", "pruned_heads",
    "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups", "diversity_penalty",
    "temperature", "top_k", "top_p", "typical_p", "repetition_penalty", "length_penalty", "no_repeat_ngram_size",
    "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences", "output_scores",
    "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id", "remove_invalid_values",
    "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens", "architectures",
    "bos_token_id", "eos_token_id", "hidden_size", "intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "vocab_size", "max_position_embeddings", "head_dim",
    "rms_norm_eps", "rope_theta", "tie_word_embeddings", "hidden_act", "rope_scaling", "attention_bias",
    "mlp_bias", "sliding_window", "partial_rotary_factor"};

/* The value-checked keys: what nuvec runs (silu, no biases, no RoPE scaling, no window, whole-head
 * RoPE). */
static nu_status check_config_values(const cJSON *root)
{
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu")))
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": hidden_act %s is not supported (only silu)",
                            cJSON_IsString(act) ? act->valuestring : "(not a string)");
    const cJSON *scaling = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if (scaling && !cJSON_IsNull(scaling)) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(scaling, "rope_type");
        if (!type)
            type = cJSON_GetObjectItemCaseSensitive(scaling, "type");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "default")) /* transformers' "default" is none */
            return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": rope_scaling of type %s is not supported",
                                cJSON_IsString(type) ? type->valuestring : "(none given)");
    }
    static const char *const biases[] = {"attention_bias", "mlp_bias"};
    for (int i = 0; i < 2; i++)
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, biases[i])))
            return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": %s (biases) is not supported", biases[i]);
    const cJSON *window = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
    if (window && !cJSON_IsNull(window))
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": sliding_window (sliding-window attention) is not supported");
    const cJSON *partial = cJSON_GetObjectItemCaseSensitive(root, "partial_rotary_factor");
    if (partial && !(cJSON_IsNumber(partial) && partial->valuedouble == 1.0))
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": partial_rotary_factor (RoPE on part of each head) is not "
                            "supported");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "llama")))
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": model_type %s is not supported (only llama)",
                            cJSON_IsString(type) ? type->valuestring : "(not a string)");
    const cJSON *e;
    cJSON_ArrayForEach(e, root)
    {
        bool known = false;
        for (size_t i = 0; i < sizeof HARMLESS_CONFIG_KEYS / sizeof *HARMLESS_CONFIG_KEYS && !known; i++)
            known = !strcmp(e->string, HARMLESS_CONFIG_KEYS[i]);
        if (!known)
            return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": config.json's %s is not a key nuvec knows for llama; it "
                                "may change the model's arithmetic, so the model is refused", e->string);
    }
    return NU_OK;
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
    if ((st = check_config_values(root)) != NU_OK)
        goto done;
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
    if (!cJSON_GetObjectItemCaseSensitive(root, "head_dim") && c->dim % c->heads) {
        st = nu_llm__fail(NU_ERROR_FORMAT, FN ": config.json's hidden_size %u is not a multiple of %u heads and it "
                          "has no head_dim", c->dim, c->heads);
        goto done;
    }
    c->tied_embeddings = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings"));
    c->bos = get_token(root, "bos_token_id");
    c->eos = get_token(root, "eos_token_id");
done:
    cJSON_Delete(root);
    return st;
}

/* Every tensor of the folder is one of the roster's (model.embed_tokens, model.norm, lm_head and
 * each layer's nine weights, layer < layers) or refused by name. rotary_emb.inv_freq, which older
 * checkpoints still hold, is skipped as transformers skips it (a non-persistent buffer, recomputed
 * from rope_theta at load). */
static const char *const HF_LAYER_TENSORS[] = {
    "input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
    "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};

static nu_status check_hf_tensors(const hf_source *h)
{
    uint32_t layers = h->base.config.layers;
    for (size_t f = 0; f < h->file_count; f++) {
        size_t n = nu_safetensors_count(h->files[f].st);
        for (size_t i = 0; i < n; i++) {
            const char *name = nu_safetensors_tensor(h->files[f].st, i)->name;
            unsigned layer;
            int used = 0;
            bool known = !strcmp(name, "model.embed_tokens.weight") || !strcmp(name, "model.norm.weight") ||
                         !strcmp(name, "lm_head.weight");
            if (!known && sscanf(name, "model.layers.%u.%n", &layer, &used) == 1 && used && layer < layers) {
                known = !strcmp(name + used, "self_attn.rotary_emb.inv_freq");
                for (size_t t = 0; t < sizeof HF_LAYER_TENSORS / sizeof *HF_LAYER_TENSORS && !known; t++) {
                    size_t len = strlen(HF_LAYER_TENSORS[t]);
                    known = !strncmp(name + used, HF_LAYER_TENSORS[t], len) && !strcmp(name + used + len, ".weight");
                }
            }
            if (!known && strstr(name, ".bias"))
                return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": tensor %s (a bias) is not supported", name);
            if (!known)
                return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": tensor %s is not part of a llama model as nuvec runs "
                                    "it; it may change the model's arithmetic, so the model is refused", name);
        }
    }
    return NU_OK;
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
    snprintf(file, plen + 300, "%s/tokenizer.json", path);
    if (hf_tokenizer(file, &h->base.config, &h->base.tokenizer) != NU_OK)
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
    }
    if ((st = check_hf_tensors(h)) != NU_OK) /* before any weight moves */
        goto fail;
    for (size_t i = 0; i < count; i++) {
        hf_file *f = &h->files[i];
        size_t n = nu_safetensors_count(f->st);
        if (!(f->offsets = nu_llm__calloc(n ? n : 1, sizeof *f->offsets))) {
            st = nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN ": no memory");
            goto fail;
        }
        if (n && (st = nu_safetensors_to_device(f->st, NULL, 0, NULL, &f->weights, f->offsets)) != NU_OK) {
            st = nu_llm__fail(st, FN ": moving %s/%s to the device: %s", path, names[i], nu_error_message(device));
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

/* ---- tokenizer.json ------------------------------------------------------------------------
 * Hugging Face's file of a Llama (SentencePiece) tokenizer: a BPE model with byte_fallback, its
 * vocabulary (piece -> id) and merges ranked first to last. nu_llm_tokenizer merges by piece
 * scores instead; transformers' LlamaConverter writes the merges sorted by the merged piece's
 * score, so a piece's score here is minus the rank of the first merge that makes it (pieces no
 * merge makes, single characters, get the lowest score: they are never a merge's result). */

typedef struct piece_map {
    const char **keys;
    size_t *lens;
    int32_t *ids;
    size_t cap; /* a power of two */
} piece_map;

static uint64_t fnv(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static size_t map_slot(const piece_map *m, const char *s, size_t n)
{
    size_t i = (size_t)fnv(s, n) & (m->cap - 1);
    while (m->keys[i] && (m->lens[i] != n || memcmp(m->keys[i], s, n)))
        i = (i + 1) & (m->cap - 1);
    return i;
}

static int32_t map_find(const piece_map *m, const char *s, size_t n)
{
    size_t i = map_slot(m, s, n);
    return m->keys[i] ? m->ids[i] : -1;
}

/* The tokenizer of the folder's tokenizer.json; NU_ERROR_IO when there is none, NU_ERROR_FORMAT
 * or NU_ERROR_UNSUPPORTED (a tokenizer other than SentencePiece-style BPE) with a message. */
static nu_status hf_tokenizer(const char *file, const nu_llm_config *cfg, nu_llm_tokenizer **out)
{
    *out = NULL;
    char *text = NULL;
    nu_status st = read_text(file, &text, NULL);
    if (st != NU_OK)
        return st;
    cJSON *root = cJSON_Parse(text);
    nu_llm__free(text);
    if (!root)
        return nu_llm__fail(NU_ERROR_FORMAT, "%s is not valid JSON", file);
    nu_llm_piece *pieces = NULL;
    float *scores = NULL;
    int32_t *types = NULL;
    piece_map map = {0};
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "BPE") ||
        !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback"))) {
        st = nu_llm__fail(NU_ERROR_UNSUPPORTED, "%s is not a SentencePiece-style BPE tokenizer with byte fallback", file);
        goto done;
    }
    int count = cJSON_GetArraySize(vocab);
    if (!cJSON_IsObject(vocab) || count < 1 || !cJSON_IsArray(merges)) {
        st = nu_llm__fail(NU_ERROR_FORMAT, "%s has no model.vocab object or model.merges list", file);
        goto done;
    }
    pieces = nu_llm__calloc((size_t)count, sizeof *pieces);
    scores = nu_llm__calloc((size_t)count, sizeof *scores);
    types = nu_llm__calloc((size_t)count, sizeof *types);
    for (map.cap = 16; map.cap < 2 * (size_t)count; map.cap *= 2) {
    }
    map.keys = nu_llm__calloc(map.cap, sizeof *map.keys);
    map.lens = nu_llm__calloc(map.cap, sizeof *map.lens);
    map.ids = nu_llm__calloc(map.cap, sizeof *map.ids);
    if (!pieces || !scores || !types || !map.keys || !map.lens || !map.ids) {
        st = nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "no memory for %s", file);
        goto done;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab)
    {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= count || pieces[(int)e->valuedouble].text) {
            st = nu_llm__fail(NU_ERROR_FORMAT, "%s: the vocabulary's ids are not 0 to %d, each once", file, count - 1);
            goto done;
        }
        int id = (int)e->valuedouble;
        size_t n = strlen(e->string), slot = map_slot(&map, e->string, n);
        pieces[id] = (nu_llm_piece){e->string, n};
        map.keys[slot] = e->string, map.lens[slot] = n, map.ids[slot] = id;
        types[id] = n == 6 && !strncmp(e->string, "<0x", 3) && e->string[5] == '>' ? NU_LLM_TOKEN_BYTE : NU_LLM_TOKEN_NORMAL;
        scores[id] = -1e30f;
    }
    int rank = 0;
    cJSON_ArrayForEach(e, merges)
    {
        char both[1024];
        const char *a = NULL, *b = NULL;
        size_t na = 0;
        if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(cJSON_GetArrayItem(e, 0)) &&
            cJSON_IsString(cJSON_GetArrayItem(e, 1)))
            a = cJSON_GetArrayItem(e, 0)->valuestring, b = cJSON_GetArrayItem(e, 1)->valuestring, na = strlen(a);
        else if (cJSON_IsString(e) && strchr(e->valuestring, ' ')) /* the older "a b" form */
            a = e->valuestring, na = (size_t)(strchr(a, ' ') - a), b = a + na + 1;
        if (!a || na + strlen(b) >= sizeof both) {
            st = nu_llm__fail(NU_ERROR_FORMAT, "%s: merge %d is not a pair of pieces", file, rank);
            goto done;
        }
        memcpy(both, a, na);
        strcpy(both + na, b);
        int32_t id = map_find(&map, both, strlen(both));
        if (id >= 0 && scores[id] == -1e30f)
            scores[id] = (float)-rank;
        rank++;
    }
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    const cJSON *unk_name = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    int32_t unk = cJSON_IsString(unk_name) ? map_find(&map, unk_name->valuestring, strlen(unk_name->valuestring)) : -1;
    cJSON_ArrayForEach(e, added)
    {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special")) && cJSON_IsNumber(id) && id->valuedouble >= 0 &&
            id->valuedouble < count)
            types[(int)id->valuedouble] = NU_LLM_TOKEN_CONTROL;
    }
    if (unk >= 0)
        types[unk] = NU_LLM_TOKEN_UNKNOWN;
    for (int i = 0; i < count; i++)
        if (!pieces[i].text) {
            st = nu_llm__fail(NU_ERROR_FORMAT, "%s: the vocabulary has no id %d", file, i);
            goto done;
        }
    nu_llm_vocab v = {(uint32_t)count, pieces, scores, types,
                      cfg->bos >= 0 && cfg->bos < count ? cfg->bos : map_find(&map, "<s>", 3),
                      cfg->eos >= 0 && cfg->eos < count ? cfg->eos : map_find(&map, "</s>", 4), unk, true, true};
    v.add_bos = v.bos >= 0;
    st = nu_llm_tokenizer_new(&v, out);
    if (st != NU_OK)
        st = nu_llm__fail(st, "%s: %s", file, nu_llm_error_message());
done:
    nu_llm__free(pieces);
    nu_llm__free(scores);
    nu_llm__free(types);
    nu_llm__free(map.keys);
    nu_llm__free(map.lens);
    nu_llm__free(map.ids);
    cJSON_Delete(root);
    return st;
}
