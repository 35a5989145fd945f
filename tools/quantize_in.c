/* quantize_in.c: a GGUF file as `nuvec quantize`'s input (quantize.h): mapped, parsed and checked by
 * nuvec's reader (nu_gguf_parse), its metadata copied to the output as it is, with
 * general.file_type and general.quantization_version set as llama-quantize sets them. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "quantize.h"
#include "tool_error.h"

nu_status qz_map(const char *path, const uint8_t **bytes, uint64_t *size)
{
    *bytes = NULL;
    *size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        const int e = fd < 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : errno;
        if (fd >= 0)
            close(fd);
        return tool_fail(NU_ERROR_IO, "%s: cannot open it: %s", path, e ? strerror(e) : "not a regular file");
    }
    if (st.st_size > 0) {
        /* Shared, read-only: the page cache's pages, read once in order. */
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            const int e = errno;
            close(fd);
            return tool_fail(NU_ERROR_IO, "%s: cannot map it: %s", path, strerror(e));
        }
        (void)madvise(p, (size_t)st.st_size, MADV_SEQUENTIAL);
        *bytes = p;
        *size = (uint64_t)st.st_size;
    }
    close(fd);
    return NU_OK;
}

void qz_release(const uint8_t *bytes, uint64_t size)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)bytes & ~(page - 1);
    const uintptr_t b = ((uintptr_t)bytes + (uintptr_t)size + page - 1) & ~(page - 1);
    if (size)
        (void)madvise((void *)a, b - a, MADV_DONTNEED); /* clean shared pages: read again if touched */
}

void qz_unmap(const uint8_t *bytes, uint64_t size)
{
    if (bytes && size)
        munmap((void *)bytes, (size_t)size);
}

nu_dtype qz_dtype_of_ggml(uint32_t ggml_type)
{
    for (int d = 0; d < NU_DTYPE_COUNT; d++) {
        uint32_t t;
        if (gguf_ggml_type((nu_dtype)d, &t) && t == ggml_type)
            return (nu_dtype)d;
    }
    return NU_DTYPE_COUNT;
}

typedef struct gguf_input {
    qz_input base;
    const uint8_t *bytes;
    uint64_t size;
    nu_gguf *file;
    const char *path;
} gguf_input;

static void gguf_close(qz_input *in)
{
    gguf_input *g = (gguf_input *)in;
    if (!g)
        return;
    nu_gguf_close(g->file);
    qz_unmap(g->bytes, g->size);
    free(g->base.tensors);
    free(g);
}

/* One metadata value copied as it is (arrays of arrays are refused: Llama files have none). */
static nu_status copy_value(gguf_writer *w, const char *key, const nu_gguf_value *v)
{
    if (v->type == NU_GGUF_STRING)
        return gguf_writer_string_n(w, key, v->string, v->length);
    if (v->type != NU_GGUF_ARRAY)
        return gguf_writer_scalar(w, key, v->type, &v->scalar);
    if (v->element_type == NU_GGUF_ARRAY)
        return tool_fail(NU_ERROR_UNSUPPORTED, "metadata %s is an array of arrays, which nuvec quantize does not copy",
                        key);
    if (v->element_type != NU_GGUF_STRING)
        return gguf_writer_array(w, key, v->element_type, v->data, v->length);
    const char **s = malloc((size_t)(v->length ? v->length : 1) * sizeof *s);
    uint64_t *n = malloc((size_t)(v->length ? v->length : 1) * sizeof *n);
    nu_status st = s && n ? NU_OK : tool_fail(NU_ERROR_HOST_OUT_OF_MEMORY, "metadata %s: out of host memory", key);
    for (uint64_t i = 0; st == NU_OK && i < v->length; i++)
        if ((st = nu_gguf_array_string(v, i, &s[i], &n[i])) != NU_OK)
            st = tool_fail(st, "metadata %s: %s", key, nu_error_message(NULL));
    if (st == NU_OK)
        st = gguf_writer_string_array_n(w, key, s, n, v->length);
    free(s);
    free(n);
    return st;
}

static nu_status gguf_metadata(qz_input *in, gguf_writer *w, uint32_t file_type)
{
    gguf_input *g = (gguf_input *)in;
    bool have_type = false, have_version = false;
    nu_status st = NU_OK;
    for (uint64_t i = 0; st == NU_OK && i < nu_gguf_kv_count(g->file); i++) {
        const char *key;
        nu_gguf_value v;
        if ((st = nu_gguf_kv(g->file, i, &key, &v)) != NU_OK) {
            st = tool_fail(st, "%s: %s", g->path, nu_error_message(NULL));
            break;
        }
        if (!strcmp(key, "general.alignment") || !strncmp(key, "split.", 6))
            continue; /* the writer writes the alignment; split files are refused at open */
        if (!strcmp(key, "general.file_type")) {
            st = gguf_writer_u32(w, key, file_type);
            have_type = true;
        } else if (!strcmp(key, "general.quantization_version")) {
            st = gguf_writer_u32(w, key, 2);
            have_version = true;
        } else {
            st = copy_value(w, key, &v);
        }
    }
    if (st == NU_OK && !have_type)
        st = gguf_writer_u32(w, "general.file_type", file_type);
    if (st == NU_OK && !have_version) /* ggml's GGML_QNT_VERSION */
        st = gguf_writer_u32(w, "general.quantization_version", 2);
    return st;
}

static nu_status refuse(gguf_input *g, nu_status st, const char *what)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", what);
    tool_fail(st, "%s: %s", g->path, msg);
    gguf_close(&g->base);
    return st;
}

nu_status qz_open_gguf(const char *path, qz_input **out)
{
    *out = NULL;
    gguf_input *g = calloc(1, sizeof *g);
    if (!g)
        return tool_fail(NU_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", path);
    g->path = path;
    g->base.metadata = gguf_metadata;
    g->base.close = gguf_close;
    nu_status st = qz_map(path, &g->bytes, &g->size);
    if (st != NU_OK) {
        gguf_close(&g->base);
        return st;
    }
    if ((st = nu_gguf_parse(g->bytes, (size_t)g->size, &g->file)) != NU_OK)
        return refuse(g, st, nu_error_message(NULL));
    const char *arch;
    uint64_t alen;
    if ((st = nu_gguf_get_string(g->file, "general.architecture", "", &arch, &alen)) != NU_OK)
        return refuse(g, st, nu_error_message(NULL));
    if (alen != 5 || memcmp(arch, "llama", 5)) {
        char msg[200];
        snprintf(msg, sizeof msg, "architecture '%.*s': nuvec quantize knows llama-quantize's mixes for llama only",
                 (int)(alen < 64 ? alen : 64), arch);
        return refuse(g, NU_ERROR_UNSUPPORTED, msg);
    }
    const uint32_t one = 1, zero = 0;
    uint32_t splits, experts;
    quant_model *m = &g->base.model;
    if ((st = nu_gguf_get_u32(g->file, "split.count", &one, &splits)) != NU_OK ||
        (st = nu_gguf_get_u32(g->file, "llama.expert_count", &zero, &experts)) != NU_OK ||
        (st = nu_gguf_get_u32(g->file, "llama.block_count", NULL, &m->layers)) != NU_OK ||
        (st = nu_gguf_get_u32(g->file, "llama.attention.head_count", NULL, &m->heads)) != NU_OK ||
        (st = nu_gguf_get_u32(g->file, "llama.attention.head_count_kv", &m->heads, &m->kv_heads)) != NU_OK)
        return refuse(g, st, nu_error_message(NULL));
    if (splits > 1)
        return refuse(g, NU_ERROR_UNSUPPORTED, "a split file (split.count > 1): merge it first (llama-gguf-split --merge)");
    if (experts > 1)
        return refuse(g, NU_ERROR_UNSUPPORTED, "a mixture of experts (llama.expert_count > 1): not supported");
    if (nu_gguf_has(g->file, "general.alignment"))
        g->base.alignment = nu_gguf_alignment(g->file);
    const uint64_t count = nu_gguf_tensor_count(g->file);
    if (!(g->base.tensors = calloc(count ? (size_t)count : 1, sizeof *g->base.tensors)))
        return refuse(g, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory");
    g->base.count = (size_t)count;
    m->tied = true;
    for (uint64_t i = 0; i < count; i++) {
        const nu_gguf_tensor_info *info = nu_gguf_tensor(g->file, i);
        qz_tensor *t = &g->base.tensors[i];
        if (strlen(info->name) >= sizeof t->name) {
            char msg[200];
            snprintf(msg, sizeof msg, "tensor name '%.60s...' is longer than %zu bytes", info->name, sizeof t->name - 1);
            return refuse(g, NU_ERROR_UNSUPPORTED, msg);
        }
        strcpy(t->name, info->name);
        t->rank = info->rank ? info->rank : 1; /* a rank-0 tensor is one element */
        memcpy(t->shape, info->shape, sizeof t->shape);
        t->data = g->bytes + info->offset;
        t->size = info->size;
        t->dtype = t->current = qz_dtype_of_ggml(info->ggml_type);
        t->type_name = info->type_name;
        m->tied &= strcmp(t->name, "output.weight") != 0;
        m->attn_v_count += quant_is_attn_v(t->name);
    }
    *out = &g->base;
    return NU_OK;
}
