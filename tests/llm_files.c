/* llm_files.c: see llm_files.h. */
#include "llm_files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "gguf_write.h"
#include "harness.h"
#include "nuvec_llm.h"
#include "tool_error.h"

uint8_t *llm_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = n > 0 ? malloc((size_t)n) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return b;
}

static bool has_prefix(const char *key, const char *prefix)
{
    return prefix && prefix[0] && !strncmp(key, prefix, strlen(prefix));
}

/* Whether the edit drops or replaces `key`. */
static bool named(const char *key, const llm_gguf_edit *e)
{
    for (size_t i = 0; e && i < e->drop_count; i++)
        if (!strcmp(key, e->drop[i]))
            return true;
    for (size_t i = 0; e && i < e->key_count; i++)
        if (!strcmp(key, e->keys[i].key))
            return true;
    return false;
}

static nu_dtype retyped(const nu_gguf_tensor_info *t, const llm_gguf_edit *e)
{
    for (size_t i = 0; e && i < e->retype_count; i++)
        if (!strcmp(t->name, e->retypes[i].name))
            return e->retypes[i].dtype;
    return t->dtype;
}

static uint64_t elements_of(const nu_gguf_tensor_info *t)
{
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->rank; d++)
        n *= t->shape[d];
    return n;
}

/* Tensor t's bytes (at `data`) as `dtype`, in new memory of *size bytes; NULL (with a message
 * from nuvec) when they cannot be converted. */
static uint8_t *tensor_bytes(const nu_gguf_tensor_info *t, const uint8_t *data, nu_dtype dtype, uint64_t *size)
{
    uint64_t n = elements_of(t);
    *size = dtype == t->dtype ? t->size : n / nu_dtype_block_elements(dtype) * nu_dtype_block_bytes(dtype);
    uint8_t *out = malloc(*size ? (size_t)*size : 1);
    float *x = dtype == t->dtype ? NULL : malloc((size_t)n * sizeof *x);
    nu_status st = out && (dtype == t->dtype || x) ? NU_OK : NU_ERROR_HOST_OUT_OF_MEMORY;
    if (st == NU_OK && dtype == t->dtype)
        memcpy(out, data, (size_t)*size);
    else if (st == NU_OK && t->dtype == NU_DTYPE_F32)
        memcpy(x, data, (size_t)n * sizeof *x);
    else if (st == NU_OK)
        st = nu_dequantize(t->dtype, data, x, n);
    if (st == NU_OK && x)
        st = nu_quantize(dtype, x, out, n, NULL);
    free(x);
    if (st != NU_OK) {
        free(out);
        return NULL;
    }
    return out;
}

/* A NUL-terminated copy of n bytes. */
static char *dup_n(const char *s, uint64_t n)
{
    char *c = malloc((size_t)n + 1);
    memcpy(c, s, (size_t)n);
    c[n] = 0;
    return c;
}

static nu_status copy_value(gguf_writer *w, const char *key, const nu_gguf_value *v)
{
    nu_status st = NU_ERROR_UNSUPPORTED;
    switch (v->type) {
    case NU_GGUF_UINT32: return gguf_writer_u32(w, key, v->scalar.u32);
    case NU_GGUF_UINT64: return gguf_writer_u64(w, key, v->scalar.u64);
    case NU_GGUF_INT32: return gguf_writer_i32(w, key, v->scalar.i32);
    case NU_GGUF_FLOAT32: return gguf_writer_f32(w, key, v->scalar.f32);
    case NU_GGUF_BOOL: return gguf_writer_bool(w, key, v->scalar.b);
    case NU_GGUF_STRING: {
        char *s = dup_n(v->string, v->length);
        st = gguf_writer_string(w, key, s);
        free(s);
        return st;
    }
    case NU_GGUF_ARRAY:
        if (v->element_type == NU_GGUF_STRING) {
            char **s = calloc(v->length ? v->length : 1, sizeof *s);
            st = NU_OK;
            for (uint64_t i = 0; st == NU_OK && i < v->length; i++) {
                const char *p;
                uint64_t n;
                st = nu_gguf_array_string(v, i, &p, &n);
                if (st == NU_OK)
                    s[i] = dup_n(p, n);
            }
            if (st == NU_OK)
                st = gguf_writer_string_array(w, key, (const char *const *)s, v->length);
            for (uint64_t i = 0; i < v->length; i++)
                free(s[i]);
            free(s);
            return st;
        }
        if (v->element_type != NU_GGUF_ARRAY)
            return gguf_writer_array(w, key, v->element_type, v->data, v->length);
        return st;
    default: return st;
    }
}

static nu_status add_key(gguf_writer *w, const llm_gguf_key *k)
{
    switch (k->type) {
    case NU_GGUF_UINT32: return gguf_writer_u32(w, k->key, (uint32_t)k->number);
    case NU_GGUF_INT32: return gguf_writer_i32(w, k->key, (int32_t)k->number);
    case NU_GGUF_FLOAT32: return gguf_writer_f32(w, k->key, (float)k->number);
    case NU_GGUF_BOOL: return gguf_writer_bool(w, k->key, k->flag);
    case NU_GGUF_STRING: return gguf_writer_string(w, k->key, k->string);
    default: return NU_ERROR_UNSUPPORTED;
    }
}

static nu_gguf *parse_file(const char *path, uint8_t **bytes)
{
    size_t size = 0;
    nu_gguf *g = NULL;
    *bytes = llm_read_file(path, &size);
    if (!*bytes || nu_gguf_parse(*bytes, size, &g) != NU_OK) {
        fprintf(stderr, "llm_copy_gguf: cannot read %s\n", path);
        free(*bytes);
        *bytes = NULL;
        return NULL;
    }
    return g;
}

/* The keys of g into w, but those the edit drops or replaces: the source's (from_keys false:
 * not those of the edit's keys_prefix when it has keys_from), or keys_from's (from_keys: only
 * those of keys_prefix). */
static nu_status copy_keys(gguf_writer *w, nu_gguf *g, const llm_gguf_edit *e, bool from_keys)
{
    nu_status st = NU_OK;
    const char *prefix = e && e->keys_from ? e->keys_prefix : NULL;
    for (uint64_t i = 0; st == NU_OK && i < nu_gguf_kv_count(g); i++) {
        const char *key;
        nu_gguf_value v;
        st = nu_gguf_kv(g, i, &key, &v);
        bool wanted = !named(key, e) && strcmp(key, "general.alignment") && has_prefix(key, prefix) == from_keys;
        if (st == NU_OK && wanted)
            st = copy_value(w, key, &v);
    }
    return st;
}

bool llm_copy_gguf(const char *src, const char *dst, const llm_gguf_edit *e)
{
    uint8_t *bytes, *from_bytes = NULL;
    nu_gguf *g = parse_file(src, &bytes), *from = NULL;
    if (!g)
        return false;
    if (e && e->keys_from && !(from = parse_file(e->keys_from, &from_bytes))) {
        nu_gguf_close(g);
        free(bytes);
        return false;
    }
    gguf_writer *w = NULL;
    nu_status st = gguf_writer_new(nu_gguf_alignment(g) == 32 ? 0 : nu_gguf_alignment(g), &w);
    if (st == NU_OK)
        st = copy_keys(w, g, e, false);
    if (st == NU_OK && from)
        st = copy_keys(w, from, e, true);
    for (size_t i = 0; st == NU_OK && e && i < e->key_count; i++)
        st = add_key(w, &e->keys[i]);
    uint64_t n = nu_gguf_tensor_count(g);
    for (uint64_t i = 0; st == NU_OK && i < n; i++) {
        const nu_gguf_tensor_info *t = nu_gguf_tensor(g, i);
        st = gguf_writer_tensor(w, t->name, retyped(t, e), t->rank, t->shape);
    }
    for (size_t i = 0; st == NU_OK && e && i < e->tensor_count; i++)
        st = gguf_writer_tensor(w, e->tensors[i].name, NU_DTYPE_F32, e->tensors[i].rank, e->tensors[i].shape);
    if (st == NU_OK)
        st = gguf_writer_begin(w, dst);
    for (uint64_t i = 0; st == NU_OK && i < n; i++) {
        const nu_gguf_tensor_info *t = nu_gguf_tensor(g, i);
        uint64_t size;
        uint8_t *data = tensor_bytes(t, bytes + t->offset, retyped(t, e), &size);
        st = data ? NU_OK : NU_ERROR_INVALID_ARGUMENT;
        if (data && e && e->edit_data)
            e->edit_data(e->user, t, data, size);
        if (st == NU_OK)
            st = gguf_writer_data(w, data, (size_t)size);
        free(data);
    }
    for (size_t i = 0; st == NU_OK && e && i < e->tensor_count; i++) {
        const llm_gguf_tensor *t = &e->tensors[i];
        uint64_t count = t->rank == 2 ? t->shape[0] * t->shape[1] : t->shape[0];
        float *data = malloc((size_t)count * sizeof *data);
        for (uint64_t j = 0; j < count; j++)
            data[j] = t->data ? t->data[j] : t->value;
        st = gguf_writer_data(w, data, (size_t)count * sizeof *data);
        free(data);
    }
    if (st == NU_OK)
        st = gguf_writer_finish(w);
    if (st != NU_OK)
        fprintf(stderr, "llm_copy_gguf: writing %s: %s\n", dst, tool_error_message());
    gguf_writer_free(w);
    nu_gguf_close(g);
    nu_gguf_close(from);
    free(bytes);
    free(from_bytes);
    return st == NU_OK;
}

bool llm_copy_safetensors_with(const char *src, const char *dst, const char *name, uint32_t rank,
                               const uint64_t *shape)
{
    size_t size = 0;
    uint8_t *bytes = llm_read_file(src, &size);
    uint64_t hlen = 0;
    if (bytes && size >= 8)
        memcpy(&hlen, bytes, 8);
    if (!bytes || size < 8 || hlen > size - 8) {
        fprintf(stderr, "llm_copy_safetensors_with: cannot read %s\n", src);
        free(bytes);
        return false;
    }
    char *text = dup_n((const char *)bytes + 8, hlen);
    cJSON *header = cJSON_Parse(text);
    free(text);
    size_t data = size - 8 - (size_t)hlen;
    uint64_t count = rank == 2 ? shape[0] * shape[1] : shape[0];
    cJSON *t = cJSON_CreateObject(), *dims = cJSON_CreateArray(), *offsets = cJSON_CreateArray();
    cJSON_AddStringToObject(t, "dtype", "F32");
    for (uint32_t i = 0; i < rank; i++)
        cJSON_AddItemToArray(dims, cJSON_CreateNumber((double)shape[i]));
    cJSON_AddItemToObject(t, "shape", dims);
    cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)data));
    cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)(data + count * 4)));
    cJSON_AddItemToObject(t, "data_offsets", offsets);
    cJSON_AddItemToObject(header, name, t);
    char *out = cJSON_PrintUnformatted(header);
    cJSON_Delete(header);
    size_t olen = strlen(out), padded = (olen + 7) / 8 * 8;
    FILE *f = fopen(dst, "wb");
    bool ok = f != NULL;
    if (ok) {
        uint64_t n = padded;
        ok = fwrite(&n, 8, 1, f) == 1 && fwrite(out, 1, olen, f) == olen;
        for (size_t i = olen; ok && i < padded; i++)
            ok = fputc(' ', f) != EOF;
        ok = ok && fwrite(bytes + 8 + hlen, 1, data, f) == data;
        float zero = 0;
        for (uint64_t i = 0; ok && i < count; i++)
            ok = fwrite(&zero, 4, 1, f) == 1;
        ok = fclose(f) == 0 && ok;
    }
    free(out);
    free(bytes);
    if (!ok)
        fprintf(stderr, "llm_copy_safetensors_with: cannot write %s\n", dst);
    return ok;
}

const char *llm_config_with(const char *key, const char *value)
{
    static const char *const base[][2] = {
        {"architectures", "[\"LlamaForCausalLM\"]"}, {"hidden_size", "64"}, {"intermediate_size", "172"},
        {"num_hidden_layers", "4"}, {"num_attention_heads", "4"}, {"num_key_value_heads", "4"},
        {"vocab_size", "512"}, {"max_position_embeddings", "128"}, {"rms_norm_eps", "1e-05"},
        {"tie_word_embeddings", "true"}};
    static char text[2048];
    size_t at = (size_t)snprintf(text, sizeof text, "{");
    bool found = false;
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++) {
        const char *v = base[i][1];
        if (key && !strcmp(key, base[i][0]))
            v = value, found = true;
        if (v)
            at += (size_t)snprintf(text + at, sizeof text - at, "%s\"%s\": %s", at > 1 ? ", " : "", base[i][0], v);
    }
    if (key && !found && value)
        at += (size_t)snprintf(text + at, sizeof text - at, ", \"%s\": %s", key, value);
    snprintf(text + at, sizeof text - at, "}");
    return text;
}

const char *llm_make_folder(const char *dir, const char *config, const char *weights)
{
    char file[1200];
    mkdir(dir, 0755);
    snprintf(file, sizeof file, "%s/config.json", dir);
    unlink(file);
    if (config) {
        FILE *f = fopen(file, "w");
        if (f) {
            fputs(config, f);
            fclose(f);
        }
    }
    snprintf(file, sizeof file, "%s/model.safetensors", dir);
    unlink(file);
    if (weights && symlink(weights, file))
        fprintf(stderr, "llm_make_folder: cannot link %s\n", file);
    return dir;
}

const char *llm_tmp_path(const char *prefix, const char *name)
{
    static char path[8][1100];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, sizeof path[0], "%s/%s%s", nt_tmp_dir(), prefix, name);
    return p;
}

const char *llm_model_path(const char *rel)
{
    static char path[1024];
    const char *env = getenv("NUVEC_MODELS_DIR");
    snprintf(path, sizeof path, "%s/%s", env && env[0] ? env : NUVEC_MODELS_DIR, rel);
    struct stat sb;
    if (stat(path, &sb))
        fail_msg("%s is missing (set NUVEC_MODELS_DIR to the folder of the test models)", path);
    return path;
}

void llm_expect_refused(nu_device *d, const char *path, nu_status status, const char *words)
{
    nu_llm_model *m = (nu_llm_model *)1;
    nu_status st = nu_llm_model_open(d, path, NULL, &m);
    if (st != status)
        fail_msg("%s: expected %s, got %s: %s", path, nu_status_string(status), nu_status_string(st), nu_llm_error_message());
    assert_null(m);
    if (!strstr(nu_llm_error_message(), words))
        fail_msg("%s: the message \"%s\" does not say \"%s\"", path, nu_llm_error_message(), words);
}
