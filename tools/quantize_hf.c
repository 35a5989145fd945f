/* quantize_hf.c: a Hugging Face folder of a LlamaForCausalLM as `nuvec quantize`'s input
 * (quantize.h), written as llama.cpp's converter (convert_hf_to_gguf.py, conversion/llama.py)
 * writes it: the llama.* keys from config.json, the tensors under GGUF's names, q_proj and k_proj
 * rows permuted back from transformers' rotate_half order to GGUF's interleaved one, 1-D tensors
 * as F32, and a SentencePiece-style tokenizer.json (BPE with byte fallback) as a "llama"
 * vocabulary, read as llm/hf.c reads it: a piece's score is minus the rank of the first merge that
 * makes it. Other tokenizers are left out (the input's note says so). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "quantize.h"
#include "tool_error.h"

#define MAX_FILES 256

/* GGUF's token types (tokenizer.ggml.token_type). */
enum { TOKEN_NORMAL = 1, TOKEN_UNKNOWN = 2, TOKEN_CONTROL = 3, TOKEN_BYTE = 6 };

typedef struct hf_config {
    uint32_t dim, ffn, layers, heads, kv_heads, head_dim, vocab, context;
    bool has_head_dim;
    float eps, theta;
    int32_t bos, eos; /* -1: none */
} hf_config;

typedef struct hf_vocab {
    cJSON *root;        /* tokenizer.json, whose strings the pieces point into */
    uint32_t count;
    const char **pieces;
    float *scores;
    int32_t *types;
    int32_t bos, eos, unk;
    bool add_bos, add_eos, add_space_prefix;
} hf_vocab;

typedef struct hf_input {
    qz_input base;
    const char *path;
    hf_config cfg;
    hf_vocab vocab;     /* count 0: none */
    const uint8_t *bytes[MAX_FILES];
    uint64_t sizes[MAX_FILES];
    nu_safetensors *files[MAX_FILES];
    size_t file_count;
} hf_input;

static void hf_close(qz_input *in)
{
    hf_input *h = (hf_input *)in;
    if (!h)
        return;
    for (size_t i = 0; i < h->file_count; i++) {
        nu_safetensors_close(h->files[i]);
        qz_unmap(h->bytes[i], h->sizes[i]);
    }
    cJSON_Delete(h->vocab.root);
    free(h->vocab.pieces), free(h->vocab.scores), free(h->vocab.types);
    free(h->base.tensors);
    free(h);
}

/* A JSON object file of the folder, parsed into *out (NULL on failure, with a message unless it
 * is missing and `optional`). */
static nu_status read_json(const char *folder, const char *name, bool optional, cJSON **out)
{
    *out = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", folder, name);
    const uint8_t *bytes;
    uint64_t size;
    if (qz_map(path, &bytes, &size) != NU_OK)
        return optional ? tool_fail(NU_OK, "%s", "") : tool_fail(NU_ERROR_IO, "%s has no readable %s", folder, name);
    cJSON *root = cJSON_ParseWithLength((const char *)bytes, (size_t)size);
    qz_unmap(bytes, size);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return tool_fail(NU_ERROR_FORMAT, "%s is not a JSON object", path);
    }
    *out = root;
    return NU_OK;
}

/* ---- config.json ---- */

static nu_status cfg_u32(const cJSON *root, const char *key, const uint32_t *def, uint32_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) {
        if (!def)
            return tool_fail(NU_ERROR_FORMAT, "config.json has no %s", key);
        *out = *def;
        return NU_OK;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 1) || v->valuedouble > 2147483647.0 || v->valuedouble != floor(v->valuedouble))
        return tool_fail(NU_ERROR_FORMAT, "config.json's %s is not a positive integer", key);
    *out = (uint32_t)v->valuedouble;
    return NU_OK;
}

static nu_status cfg_float(const cJSON *root, const char *key, float def, float *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    *out = def;
    if (!v || cJSON_IsNull(v))
        return NU_OK;
    if (!cJSON_IsNumber(v) || !(v->valuedouble > 0) || !isfinite((float)v->valuedouble))
        return tool_fail(NU_ERROR_FORMAT, "config.json's %s is not a positive number", key);
    *out = (float)v->valuedouble;
    return NU_OK;
}

static int32_t cfg_token(const cJSON *root, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (cJSON_IsArray(v))
        v = cJSON_GetArrayItem(v, 0);
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 2147483647.0 ? (int32_t)v->valuedouble : -1;
}

static nu_status parse_config(const cJSON *root, hf_config *c)
{
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(root, "architectures"), *a;
    bool llama = false;
    cJSON_ArrayForEach(a, arch) llama |= cJSON_IsString(a) && !strcmp(a->valuestring, "LlamaForCausalLM");
    if (!llama) {
        const cJSON *first = cJSON_GetArrayItem(arch, 0);
        return tool_fail(NU_ERROR_UNSUPPORTED, "config.json's architecture %s is not supported (only LlamaForCausalLM)",
                        cJSON_IsString(first) ? first->valuestring : "(none)");
    }
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu")))
        return tool_fail(NU_ERROR_UNSUPPORTED, "config.json's hidden_act is not silu");
    static const char *const refused[] = {"rope_scaling", "num_local_experts"};
    for (int i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, refused[i]);
        if (v && !cJSON_IsNull(v))
            return tool_fail(NU_ERROR_UNSUPPORTED, "config.json's %s is not supported", refused[i]);
    }
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "attention_bias")) ||
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "mlp_bias")))
        return tool_fail(NU_ERROR_UNSUPPORTED, "config.json asks for biases, which Llama GGUF files do not have");
    nu_status st;
    if ((st = cfg_u32(root, "hidden_size", NULL, &c->dim)) != NU_OK ||
        (st = cfg_u32(root, "intermediate_size", NULL, &c->ffn)) != NU_OK ||
        (st = cfg_u32(root, "num_hidden_layers", NULL, &c->layers)) != NU_OK ||
        (st = cfg_u32(root, "num_attention_heads", NULL, &c->heads)) != NU_OK ||
        (st = cfg_u32(root, "num_key_value_heads", &c->heads, &c->kv_heads)) != NU_OK ||
        (st = cfg_u32(root, "vocab_size", NULL, &c->vocab)) != NU_OK ||
        (st = cfg_u32(root, "max_position_embeddings", NULL, &c->context)) != NU_OK)
        return st;
    const uint32_t head_dim = c->dim / c->heads;
    c->has_head_dim = cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(root, "head_dim"));
    if ((st = cfg_u32(root, "head_dim", &head_dim, &c->head_dim)) != NU_OK ||
        (st = cfg_float(root, "rms_norm_eps", 1e-6f, &c->eps)) != NU_OK || /* transformers' default */
        (st = cfg_float(root, "rope_theta", 10000.0f, &c->theta)) != NU_OK)
        return st;
    if (c->head_dim % 2)
        return tool_fail(NU_ERROR_FORMAT, "config.json's head_dim %u is odd: RoPE pairs its elements", c->head_dim);
    c->bos = cfg_token(root, "bos_token_id");
    c->eos = cfg_token(root, "eos_token_id");
    return NU_OK;
}

/* ---- tensors ---- */

static const char *const LAYER_PARTS[][2] = {
    {"input_layernorm.weight", "attn_norm.weight"},   {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},     {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"}, {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},      {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"}};
#define PARTS (sizeof LAYER_PARTS / sizeof *LAYER_PARTS)

/* The GGUF name of a transformers tensor and its place in the output's order (*order); false for a
 * name that is none of a LlamaForCausalLM's (*skip: one to leave out, RoPE's cached inv_freq). */
static bool gguf_name(const char *hf, const hf_config *c, char *out, size_t n, uint64_t *order, bool *skip)
{
    *skip = false;
    static const struct { const char *hf, *gguf; uint64_t order; } globals[] = {
        {"model.embed_tokens.weight", "token_embd.weight", 0},
        {"model.norm.weight", "output_norm.weight", ~0ull - 1},
        {"lm_head.weight", "output.weight", ~0ull}};
    for (size_t i = 0; i < 3; i++)
        if (!strcmp(hf, globals[i].hf)) {
            snprintf(out, n, "%s", globals[i].gguf);
            *order = globals[i].order;
            return true;
        }
    unsigned layer;
    int at = 0;
    if (sscanf(hf, "model.layers.%u.%n", &layer, &at) != 1 || !at || layer >= c->layers)
        return false;
    if (!strcmp(hf + at, "self_attn.rotary_emb.inv_freq"))
        return *skip = true;
    for (size_t p = 0; p < PARTS; p++)
        if (!strcmp(hf + at, LAYER_PARTS[p][0])) {
            snprintf(out, n, "blk.%u.%s", layer, LAYER_PARTS[p][1]);
            *order = 1 + (uint64_t)layer * PARTS + p;
            return true;
        }
    return false;
}

typedef struct sort_item {
    uint64_t order;
    qz_tensor t;
} sort_item;

static int by_order(const void *a, const void *b)
{
    uint64_t x = ((const sort_item *)a)->order, y = ((const sort_item *)b)->order;
    return x < y ? -1 : x > y;
}

static int by_string(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every *.safetensors of the folder, mapped and parsed, in name order. */
static nu_status open_weights(hf_input *h)
{
    DIR *dir = opendir(h->path);
    if (!dir)
        return tool_fail(NU_ERROR_IO, "cannot list the folder %s", h->path);
    char *names[MAX_FILES];
    size_t count = 0;
    struct dirent *e;
    nu_status st = NU_OK;
    while (st == NU_OK && (e = readdir(dir))) {
        size_t n = strlen(e->d_name);
        if (n <= 12 || strcmp(e->d_name + n - 12, ".safetensors"))
            continue;
        if (count == MAX_FILES)
            st = tool_fail(NU_ERROR_UNSUPPORTED, "%s has more than %d safetensors files", h->path, MAX_FILES);
        else if (!(names[count++] = strdup(e->d_name)))
            st = tool_fail(NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory");
    }
    closedir(dir);
    if (st == NU_OK && !count)
        st = tool_fail(NU_ERROR_IO, "%s has no .safetensors file", h->path);
    qsort(names, count, sizeof *names, by_string);
    for (size_t i = 0; i < count; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", h->path, names[i]);
        if (st == NU_OK && (st = qz_map(path, &h->bytes[i], &h->sizes[i])) == NU_OK) {
            h->file_count = i + 1;
            if ((st = nu_safetensors_parse(h->bytes[i], (size_t)h->sizes[i], &h->files[i])) != NU_OK)
                st = tool_fail(st, "%s: %s", path, nu_error_message(NULL));
        }
        free(names[i]);
    }
    return st;
}

static nu_status collect_tensors(hf_input *h)
{
    size_t total = 0;
    for (size_t f = 0; f < h->file_count; f++)
        total += nu_safetensors_count(h->files[f]);
    sort_item *items = calloc(total ? total : 1, sizeof *items);
    if (!items)
        return tool_fail(NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory");
    size_t n = 0;
    nu_status st = NU_OK;
    for (size_t f = 0; st == NU_OK && f < h->file_count; f++)
        for (size_t i = 0; st == NU_OK && i < nu_safetensors_count(h->files[f]); i++) {
            const nu_tensor_info *info = nu_safetensors_tensor(h->files[f], i);
            qz_tensor *t = &items[n].t;
            bool skip;
            if (!gguf_name(info->name, &h->cfg, t->name, sizeof t->name, &items[n].order, &skip)) {
                st = tool_fail(NU_ERROR_UNSUPPORTED, "tensor %s is not one of a LlamaForCausalLM's", info->name);
                break;
            }
            if (skip)
                continue;
            if (info->dtype != NU_DTYPE_F32 && info->dtype != NU_DTYPE_F16 && info->dtype != NU_DTYPE_BF16) {
                st = tool_fail(NU_ERROR_UNSUPPORTED, "tensor %s is %s: only F32, F16 and BF16 quantize", info->name,
                              nu_dtype_name(info->dtype));
                break;
            }
            if (info->rank < 1 || info->rank > 2) {
                st = tool_fail(NU_ERROR_FORMAT, "tensor %s has rank %u (1 or 2 expected)", info->name, info->rank);
                break;
            }
            t->rank = info->rank;
            for (uint32_t d = 0; d < NU_GGUF_MAX_RANK; d++)
                t->shape[d] = d < info->rank ? info->shape[d] : 1;
            t->data = h->bytes[f] + info->offset;
            t->size = info->size;
            t->dtype = info->dtype;
            t->type_name = nu_dtype_name(info->dtype);
            t->current = info->rank == 1 ? NU_DTYPE_F32 : info->dtype; /* the converter's 1-D tensors are F32 */
            if (strstr(t->name, "attn_q.weight") || strstr(t->name, "attn_k.weight")) {
                t->rope_heads = strstr(t->name, "attn_q") ? h->cfg.heads : h->cfg.kv_heads;
                if (t->rank != 2 || t->shape[0] != (uint64_t)t->rope_heads * h->cfg.head_dim) {
                    st = tool_fail(NU_ERROR_FORMAT, "tensor %s has %llu rows, not %u heads of %u", info->name,
                                  (unsigned long long)t->shape[0], t->rope_heads, h->cfg.head_dim);
                    break;
                }
            }
            for (size_t k = 0; k < n; k++)
                if (items[k].order == items[n].order)
                    st = tool_fail(NU_ERROR_FORMAT, "tensor %s appears twice", info->name);
            n++;
        }
    /* What a Llama needs, so that a folder of something else stops here, not at generate. */
    const size_t need = 2 + (size_t)h->cfg.layers * PARTS;
    size_t have = 0;
    for (size_t k = 0; k < n; k++)
        have += items[k].order != ~0ull;
    if (st == NU_OK && have != need)
        st = tool_fail(NU_ERROR_FORMAT, "%s has %zu of the %zu tensors a %u-layer Llama needs", h->path, have, need,
                      h->cfg.layers);
    if (st != NU_OK) {
        free(items);
        return st;
    }
    qsort(items, n, sizeof *items, by_order);
    if (!(h->base.tensors = calloc(n, sizeof *h->base.tensors))) {
        free(items);
        return tool_fail(NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory");
    }
    for (size_t k = 0; k < n; k++)
        h->base.tensors[k] = items[k].t;
    h->base.count = n;
    free(items);
    return NU_OK;
}

/* ---- tokenizer.json ---- */

typedef struct piece_id {
    const char *piece;
    int32_t id;
} piece_id;

static int by_piece(const void *a, const void *b) { return strcmp(((const piece_id *)a)->piece, ((const piece_id *)b)->piece); }

static int32_t find_piece(const piece_id *sorted, size_t n, const char *piece)
{
    piece_id key = {piece, 0};
    const piece_id *p = bsearch(&key, sorted, n, sizeof key, by_piece);
    return p ? p->id : -1;
}

/* The vocabulary, or a note saying why there is none (the output is then written without one). */
static void read_tokenizer(hf_input *h)
{
    hf_vocab *v = &h->vocab;
    cJSON *root;
    if (read_json(h->path, "tokenizer.json", true, &root) != NU_OK || !root) {
        snprintf(h->base.note, sizeof h->base.note, "%s: the output has no tokenizer",
                 root || tool_error_message()[0] ? tool_error_message() : "no tokenizer.json");
        return;
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    const char *why = NULL;
    piece_id *sorted = NULL;
    const int count = cJSON_GetArraySize(vocab);
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "BPE") ||
        !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback")))
        why = "tokenizer.json is not a SentencePiece-style BPE with byte fallback";
    else if (!cJSON_IsObject(vocab) || count < 1 || !cJSON_IsArray(merges))
        why = "tokenizer.json has no model.vocab object or model.merges list";
    else if (!(v->pieces = calloc((size_t)count, sizeof *v->pieces)) || !(v->scores = calloc((size_t)count, sizeof *v->scores)) ||
             !(v->types = calloc((size_t)count, sizeof *v->types)) || !(sorted = calloc((size_t)count, sizeof *sorted)))
        why = "out of host memory for tokenizer.json";
    const cJSON *e;
    if (!why)
        cJSON_ArrayForEach(e, vocab)
        {
            const int id = cJSON_IsNumber(e) ? (int)e->valuedouble : -1;
            if (id < 0 || id >= count || e->valuedouble != id || v->pieces[id]) {
                why = "tokenizer.json's vocabulary ids are not 0 .. count - 1, each once";
                break;
            }
            const char *p = e->string;
            v->pieces[id] = p;
            sorted[id] = (piece_id){p, id};
            v->types[id] = strlen(p) == 6 && !strncmp(p, "<0x", 3) && p[5] == '>' ? TOKEN_BYTE : TOKEN_NORMAL;
            v->scores[id] = -1e30f; /* made by no merge */
        }
    if (!why) {
        qsort(sorted, (size_t)count, sizeof *sorted, by_piece);
        int rank = 0;
        cJSON_ArrayForEach(e, merges)
        {
            char both[1024];
            const cJSON *a = cJSON_GetArrayItem(e, 0), *b = cJSON_GetArrayItem(e, 1);
            const char *sp = cJSON_IsString(e) ? strchr(e->valuestring, ' ') : NULL;
            if (cJSON_IsArray(e) && cJSON_IsString(a) && cJSON_IsString(b) &&
                strlen(a->valuestring) + strlen(b->valuestring) < sizeof both)
                snprintf(both, sizeof both, "%s%s", a->valuestring, b->valuestring);
            else if (sp && strlen(e->valuestring) < sizeof both) /* the older "a b" form */
                snprintf(both, sizeof both, "%.*s%s", (int)(sp - e->valuestring), e->valuestring, sp + 1);
            else {
                why = "a merge of tokenizer.json is not a pair of pieces";
                break;
            }
            const int32_t id = find_piece(sorted, (size_t)count, both);
            if (id >= 0 && v->scores[id] == -1e30f)
                v->scores[id] = (float)-rank;
            rank++;
        }
    }
    if (!why) {
        const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
        v->unk = cJSON_IsString(unk) ? find_piece(sorted, (size_t)count, unk->valuestring) : -1;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"))
        {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
            if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special")) && cJSON_IsNumber(id) && id->valuedouble >= 0 &&
                id->valuedouble < count)
                v->types[(int)id->valuedouble] = TOKEN_CONTROL;
        }
        if (v->unk >= 0)
            v->types[v->unk] = TOKEN_UNKNOWN;
        v->bos = h->cfg.bos >= 0 && h->cfg.bos < count ? h->cfg.bos : find_piece(sorted, (size_t)count, "<s>");
        v->eos = h->cfg.eos >= 0 && h->cfg.eos < count ? h->cfg.eos : find_piece(sorted, (size_t)count, "</s>");
        v->add_bos = v->bos >= 0;
        v->add_space_prefix = true;
        /* tokenizer_config.json's switches, where it has them (as the converter reads them). */
        cJSON *tc;
        (void)read_json(h->path, "tokenizer_config.json", true, &tc); /* a malformed one is as none */
        const cJSON *sw;
        if (cJSON_IsBool(sw = cJSON_GetObjectItemCaseSensitive(tc, "add_bos_token")))
            v->add_bos = cJSON_IsTrue(sw) && v->bos >= 0;
        if (cJSON_IsBool(sw = cJSON_GetObjectItemCaseSensitive(tc, "add_eos_token")))
            v->add_eos = cJSON_IsTrue(sw) && v->eos >= 0;
        if (cJSON_IsBool(sw = cJSON_GetObjectItemCaseSensitive(tc, "add_prefix_space")))
            v->add_space_prefix = cJSON_IsTrue(sw);
        cJSON_Delete(tc);
        v->count = (uint32_t)count;
        v->root = root;
    }
    free(sorted);
    if (why) {
        snprintf(h->base.note, sizeof h->base.note, "%s: the output has no tokenizer", why);
        free(v->pieces), free(v->scores), free(v->types);
        v->pieces = NULL, v->scores = NULL, v->types = NULL;
        cJSON_Delete(root);
    }
}

/* ---- the output's metadata, as convert_hf_to_gguf.py writes it for a Llama ---- */

typedef struct kv_entry {
    const char *key;
    nu_gguf_type type; /* STRING: value is the string; else a pointer to a scalar of the type */
    const void *value;
    bool present;
} kv_entry;

static nu_status write_entries(gguf_writer *w, const kv_entry *e, size_t n)
{
    nu_status st = NU_OK;
    for (size_t i = 0; st == NU_OK && i < n; i++)
        if (e[i].present)
            st = e[i].type == NU_GGUF_STRING ? gguf_writer_string(w, e[i].key, e[i].value)
                                             : gguf_writer_scalar(w, e[i].key, e[i].type, e[i].value);
    return st;
}

static nu_status hf_metadata(qz_input *in, gguf_writer *w, uint32_t file_type)
{
    hf_input *h = (hf_input *)in;
    const hf_config *c = &h->cfg;
    char name[256]; /* the folder's name, trailing slashes dropped */
    size_t n = strlen(h->path);
    while (n > 1 && h->path[n - 1] == '/')
        n--;
    size_t from = n;
    while (from && h->path[from - 1] != '/')
        from--;
    snprintf(name, sizeof name, "%.*s", (int)(n - from), h->path + from);
    const char *base = name;
    const uint32_t version = 2; /* ggml's GGML_QNT_VERSION */
    const kv_entry model[] = {
        {"general.architecture", NU_GGUF_STRING, "llama", true},
        {"general.type", NU_GGUF_STRING, "model", true},
        {"general.name", NU_GGUF_STRING, base, true},
        {"llama.block_count", NU_GGUF_UINT32, &c->layers, true},
        {"llama.context_length", NU_GGUF_UINT32, &c->context, true},
        {"llama.embedding_length", NU_GGUF_UINT32, &c->dim, true},
        {"llama.feed_forward_length", NU_GGUF_UINT32, &c->ffn, true},
        {"llama.attention.head_count", NU_GGUF_UINT32, &c->heads, true},
        {"llama.attention.head_count_kv", NU_GGUF_UINT32, &c->kv_heads, true},
        {"llama.rope.freq_base", NU_GGUF_FLOAT32, &c->theta, true},
        {"llama.attention.layer_norm_rms_epsilon", NU_GGUF_FLOAT32, &c->eps, true},
        {"llama.attention.key_length", NU_GGUF_UINT32, &c->head_dim, c->has_head_dim},
        {"llama.attention.value_length", NU_GGUF_UINT32, &c->head_dim, c->has_head_dim},
        {"general.file_type", NU_GGUF_UINT32, &file_type, true},
        {"llama.vocab_size", NU_GGUF_UINT32, &c->vocab, true},
        {"llama.rope.dimension_count", NU_GGUF_UINT32, &c->head_dim, true},
        {"general.quantization_version", NU_GGUF_UINT32, &version, true}};
    nu_status st = write_entries(w, model, sizeof model / sizeof *model);
    const hf_vocab *v = &h->vocab;
    if (st != NU_OK || !v->count)
        return st;
    st = gguf_writer_string(w, "tokenizer.ggml.model", "llama");
    if (st == NU_OK)
        st = gguf_writer_string_array(w, "tokenizer.ggml.tokens", v->pieces, v->count);
    if (st == NU_OK)
        st = gguf_writer_array(w, "tokenizer.ggml.scores", NU_GGUF_FLOAT32, v->scores, v->count);
    if (st == NU_OK)
        st = gguf_writer_array(w, "tokenizer.ggml.token_type", NU_GGUF_INT32, v->types, v->count);
    const kv_entry tok[] = {
        {"tokenizer.ggml.bos_token_id", NU_GGUF_UINT32, &v->bos, v->bos >= 0},
        {"tokenizer.ggml.eos_token_id", NU_GGUF_UINT32, &v->eos, v->eos >= 0},
        {"tokenizer.ggml.unknown_token_id", NU_GGUF_UINT32, &v->unk, v->unk >= 0},
        {"tokenizer.ggml.add_bos_token", NU_GGUF_BOOL, &v->add_bos, true},
        {"tokenizer.ggml.add_eos_token", NU_GGUF_BOOL, &v->add_eos, true},
        {"tokenizer.ggml.add_space_prefix", NU_GGUF_BOOL, &v->add_space_prefix, true}};
    return st == NU_OK ? write_entries(w, tok, sizeof tok / sizeof *tok) : st;
}

nu_status qz_open_hf(const char *path, qz_input **out)
{
    *out = NULL;
    hf_input *h = calloc(1, sizeof *h);
    if (!h)
        return tool_fail(NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory");
    h->path = path;
    h->base.metadata = hf_metadata;
    h->base.close = hf_close;
    cJSON *config;
    nu_status st = read_json(path, "config.json", false, &config);
    if (st == NU_OK)
        st = parse_config(config, &h->cfg);
    cJSON_Delete(config);
    if (st == NU_OK)
        st = open_weights(h);
    if (st == NU_OK)
        st = collect_tensors(h);
    if (st != NU_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", tool_error_message());
        tool_fail(st, "%s: %s", path, msg);
        hf_close(&h->base);
        return st;
    }
    read_tokenizer(h);
    quant_model *m = &h->base.model;
    *m = (quant_model){h->cfg.layers, h->cfg.heads, h->cfg.kv_heads, h->cfg.layers, true};
    for (size_t i = 0; i < h->base.count; i++) /* tied: no lm_head.weight (tie_word_embeddings) */
        m->tied &= strcmp(h->base.tensors[i].name, "output.weight") != 0;
    *out = &h->base;
    return NU_OK;
}
