/* safetensors.c: safetensors weight files (see nuvec/safetensors.h).
 *
 * Parsing: the header is copied into a NUL-terminated buffer and parsed with cJSON. The copy
 * is cheap next to cJSON's tree, and it keeps cJSON inside our memory: older cJSON releases
 * read a byte past the length they are given (CVE-2023-53154, a string ending in a backslash),
 * and a header can end where the caller's bytes end. cJSON also records parse errors in a
 * global, so parses are serialised (files opened from several threads must not race on it).
 * The checks follow the official library (safetensors' tensor.rs): header length at most 100,000,000 bytes, a header
 * that starts with '{' and has only whitespace after the object, known dtypes, byte counts
 * that match shape x dtype with overflow checked, and tensors sorted by (begin, end) that tile
 * the data section exactly. Stricter than the official library: duplicate names and duplicate
 * or unknown fields are refused (serde would keep the last or ignore them). JSON numbers are
 * doubles in cJSON, so shapes and offsets must be integers below 2^53 (exactly representable).
 *
 * Everything a parsed file keeps (tensors, the name index, metadata, strings) lives in one
 * host allocation, so a failure frees one thing and lookups never allocate.
 *
 * cJSON's own allocations are not routed through host.h: cJSON_InitHooks is process-wide and
 * would change the allocator of every other cJSON user in the process. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "core/host.h"
#include "io/file_tensors.h"
#include "nuvec/device.h"
#include "nuvec/safetensors.h"

#define HEADER_MAX 100000000ull /* the official MAX_HEADER_SIZE */
#define INT_LIMIT (1ull << 53) /* JSON numbers are doubles: above 2^53 they skip integers */
#define META_KEY "__metadata__"

typedef struct meta_pair {
    const char *key;
    const char *value;
} meta_pair;

struct nu_safetensors {
    nu_tensor_info *tensors;        /* count, in file order (by offset) */
    size_t count;
    const nu_tensor_info **by_name; /* count, sorted by name: lookups */
    meta_pair *metadata;            /* metadata_count, sorted by key */
    size_t metadata_count;
    char *strings;                  /* names, metadata keys and values */
    uint64_t header_size;           /* N: the data section starts at 8 + N */
    uint64_t data_size;
    void *block;                    /* the one allocation holding all of the above */
    nu_buffer *file;                /* the mapped file; NULL when parsed from memory */
    nu_device *device;              /* NULL when parsed from memory */
};

/* ---- dtypes --------------------------------------------------------------------------- */

/* The safetensors dtypes: the plain ones (not GGUF's block quantizations). */
static bool safetensors_dtype(nu_dtype dtype) { return nu_dtype_block_elements(dtype) == 1; }

static bool dtype_from_name(const char *name, nu_dtype *out)
{
    for (unsigned i = 0; i < NU_DTYPE_COUNT; i++)
        if (safetensors_dtype((nu_dtype)i) && strcmp(name, nu_dtype_name((nu_dtype)i)) == 0) {
            *out = (nu_dtype)i;
            return true;
        }
    return false;
}

/* Bytes of a tensor: elements (the shape's product, folded in order like the official
 * library) times the dtype's size; false when it overflows 64 bits. */
static bool tensor_bytes(nu_dtype dtype, uint32_t rank, const uint64_t *shape, uint64_t *out)
{
    uint64_t n = 1;
    for (uint32_t i = 0; i < rank; i++)
        if (__builtin_mul_overflow(n, shape[i], &n))
            return false;
    return !__builtin_mul_overflow(n, (uint64_t)nu_dtype_size(dtype), out);
}

/* ---- parsing -------------------------------------------------------------------------- */

/* NU_ERROR_FORMAT with "<label>: <message>". */
__attribute__((format(printf, 3, 4))) static nu_status bad(nu_device *d, const char *label, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return nu__fail(d, NU_ERROR_FORMAT, "%s: %s", label, msg);
}

/* A JSON number that is an integer in [0, 2^53). NaN fails the first test. */
static bool json_uint(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v))
        return false;
    double x = v->valuedouble;
    if (!(x >= 0.0 && x < (double)INT_LIMIT))
        return false;
    uint64_t u = (uint64_t)x;
    if ((double)u != x)
        return false;
    *out = u;
    return true;
}

/* Names may be long or odd: messages show at most 100 bytes of one. */
#define NAME "'%.100s'"

/* One tensor entry: fields checked, `t` filled (offset relative to the data section). */
static nu_status parse_entry(nu_device *d, const char *label, const cJSON *e, uint64_t data_size, nu_tensor_info *t)
{
    const char *name = e->string;
    if (!cJSON_IsObject(e))
        return bad(d, label, "tensor " NAME ": entry is not a JSON object", name);
    bool have_dtype = false, have_shape = false, have_offsets = false;
    uint64_t begin = 0, end = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, e) {
        const char *key = f->string;
        if (strcmp(key, "dtype") == 0 && !have_dtype) {
            have_dtype = true;
            if (!cJSON_IsString(f) || !f->valuestring)
                return bad(d, label, "tensor " NAME ": 'dtype' is not a string", name);
            if (!dtype_from_name(f->valuestring, &t->dtype))
                return bad(d, label, "tensor " NAME ": unknown dtype '%.32s'", name, f->valuestring);
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            have_shape = true;
            if (!cJSON_IsArray(f))
                return bad(d, label, "tensor " NAME ": 'shape' is not an array", name);
            const cJSON *s;
            cJSON_ArrayForEach(s, f) {
                if (t->rank == NU_TENSOR_MAX_RANK)
                    return bad(d, label, "tensor " NAME ": shape has more than %d dimensions (rank too high)", name,
                               NU_TENSOR_MAX_RANK);
                if (!json_uint(s, &t->shape[t->rank]))
                    return bad(d, label, "tensor " NAME ": shape[%u] is not an integer in [0, 2^53)", name, t->rank);
                t->rank++;
            }
        } else if (strcmp(key, "data_offsets") == 0 && !have_offsets) {
            have_offsets = true;
            if (!cJSON_IsArray(f) || cJSON_GetArraySize(f) != 2 || !json_uint(f->child, &begin) ||
                !json_uint(f->child->next, &end))
                return bad(d, label, "tensor " NAME ": 'data_offsets' is not two integers in [0, 2^53)", name);
        } else {
            return bad(d, label, "tensor " NAME ": unexpected or repeated field '%.32s'", name, key);
        }
    }
    if (!have_dtype || !have_shape || !have_offsets)
        return bad(d, label, "tensor " NAME ": missing field '%s'", name,
                   !have_dtype ? "dtype" : !have_shape ? "shape" : "data_offsets");
    uint64_t bytes;
    if (!tensor_bytes(t->dtype, t->rank, t->shape, &bytes))
        return bad(d, label, "tensor " NAME ": shape x dtype size overflows 64 bits", name);
    if (begin > end)
        return bad(d, label, "tensor " NAME ": data_offsets begin %llu is after end %llu", name,
                   (unsigned long long)begin, (unsigned long long)end);
    if (end > data_size)
        return bad(d, label, "tensor " NAME ": data_offsets end %llu is beyond the data section (%llu bytes)", name,
                   (unsigned long long)end, (unsigned long long)data_size);
    if (end - begin != bytes)
        return bad(d, label, "tensor " NAME ": data_offsets span %llu bytes but shape x dtype %s is %llu bytes", name,
                   (unsigned long long)(end - begin), nu_dtype_name(t->dtype), (unsigned long long)bytes);
    t->offset = begin;
    t->size = bytes;
    return NU_OK;
}

/* File order: by (begin, end) as the official library sorts, then by name for ties. */
static int cmp_offset(const void *a, const void *b)
{
    const nu_tensor_info *x = a, *y = b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    if (x->size != y->size)
        return x->size < y->size ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(const nu_tensor_info *const *)a)->name, (*(const nu_tensor_info *const *)b)->name);
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp(((const meta_pair *)a)->key, ((const meta_pair *)b)->key);
}

/* Copies `s` to *at, advancing it (the space was counted beforehand). */
static const char *keep(char **at, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = memcpy(*at, s, n);
    *at += n;
    return p;
}

/* The first pass: counts tensors, metadata and string bytes, and checks "__metadata__". */
static nu_status count_entries(nu_device *d, const char *label, const cJSON *root, size_t *tensors, size_t *meta,
                               size_t *chars)
{
    bool have_meta = false;
    const cJSON *e;
    cJSON_ArrayForEach(e, root) {
        if (strcmp(e->string, META_KEY) != 0) {
            ++*tensors;
            *chars += strlen(e->string) + 1;
            continue;
        }
        if (have_meta)
            return bad(d, label, "'" META_KEY "' appears twice");
        have_meta = true;
        if (!cJSON_IsObject(e))
            return bad(d, label, "'" META_KEY "' is not a JSON object");
        const cJSON *m;
        cJSON_ArrayForEach(m, e) {
            if (!cJSON_IsString(m) || !m->valuestring)
                return bad(d, label, "'" META_KEY "' value of " NAME " is not a string", m->string);
            ++*meta;
            *chars += strlen(m->string) + strlen(m->valuestring) + 2;
        }
    }
    return NU_OK;
}

/* Checks the tensors, sorted by offset, tile the data section; makes offsets absolute. */
static nu_status check_tiling(nu_device *d, const char *label, nu_safetensors *st)
{
    uint64_t at = 0;
    for (size_t i = 0; i < st->count; i++) {
        nu_tensor_info *t = &st->tensors[i];
        if (t->offset < at)
            return bad(d, label, "tensors " NAME " and " NAME " overlap: the second starts at data byte %llu, "
                       "before the first ends at %llu", st->tensors[i - 1].name, t->name,
                       (unsigned long long)t->offset, (unsigned long long)at);
        if (t->offset > at)
            return bad(d, label, "gap: data bytes %llu..%llu before tensor " NAME " belong to no tensor",
                       (unsigned long long)at, (unsigned long long)t->offset, t->name);
        at = t->offset + t->size;
        t->offset += 8 + st->header_size;
    }
    if (at != st->data_size)
        return bad(d, label, "gap: data bytes %llu..%llu (the end of the data section) belong to no tensor",
                   (unsigned long long)at, (unsigned long long)st->data_size);
    return NU_OK;
}

/* Fills `st` from the JSON object `root`. On failure `st` holds nothing (block freed). */
static nu_status fill(nu_device *d, const char *label, const cJSON *root, nu_safetensors *st)
{
    size_t count = 0, meta = 0, chars = 0;
    nu_status s = count_entries(d, label, root, &count, &meta, &chars);
    if (s != NU_OK)
        return s;
    /* Each entry takes several header bytes, and the header is under 10^8 bytes: no overflow. */
    size_t total = count * (sizeof(nu_tensor_info) + sizeof(nu_tensor_info *)) + meta * sizeof(meta_pair) + chars;
    char *block = nu__calloc(1, total);
    if (!block)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory for %zu tensors", label, count);
    st->block = block;
    st->tensors = (nu_tensor_info *)block;
    st->by_name = (const nu_tensor_info **)(st->tensors + count);
    st->metadata = (meta_pair *)(st->by_name + count);
    st->strings = (char *)(st->metadata + meta);
    char *at = st->strings;
    const cJSON *e;
    cJSON_ArrayForEach(e, root) {
        if (strcmp(e->string, META_KEY) == 0) {
            const cJSON *m;
            cJSON_ArrayForEach(m, e) {
                meta_pair *p = &st->metadata[st->metadata_count++];
                p->key = keep(&at, m->string);
                p->value = keep(&at, m->valuestring);
            }
            continue;
        }
        nu_tensor_info *t = &st->tensors[st->count];
        t->name = keep(&at, e->string);
        if ((s = parse_entry(d, label, e, st->data_size, t)) != NU_OK)
            goto fail;
        st->count++;
    }
    qsort(st->metadata, st->metadata_count, sizeof *st->metadata, cmp_key);
    for (size_t i = 1; i < st->metadata_count; i++)
        if (strcmp(st->metadata[i - 1].key, st->metadata[i].key) == 0) {
            s = bad(d, label, "'" META_KEY "' key " NAME " appears twice", st->metadata[i].key);
            goto fail;
        }
    qsort(st->tensors, st->count, sizeof *st->tensors, cmp_offset);
    for (size_t i = 0; i < st->count; i++)
        st->by_name[i] = &st->tensors[i];
    qsort(st->by_name, st->count, sizeof *st->by_name, cmp_name);
    for (size_t i = 1; i < st->count; i++)
        if (strcmp(st->by_name[i - 1]->name, st->by_name[i]->name) == 0) {
            s = bad(d, label, "tensor " NAME " appears twice (duplicate name)", st->by_name[i]->name);
            goto fail;
        }
    if ((s = check_tiling(d, label, st)) != NU_OK)
        goto fail;
    return NU_OK;
fail:
    nu__free(st->block);
    st->block = NULL;
    st->tensors = NULL;
    st->by_name = NULL;
    st->metadata = NULL;
    st->strings = NULL;
    st->count = st->metadata_count = 0;
    return s;
}

/* Parses a whole file's `size` bytes into `st` (zeroed, with `device` and `file` set by the
 * caller). Messages start with `label` (a path, or "safetensors"). On failure `st` owns no
 * parser memory. */
static nu_status parse(const uint8_t *bytes, uint64_t size, const char *label, nu_safetensors *st)
{
    nu_device *d = st->device;
    if (size < 8)
        return bad(d, label, "file is %llu bytes, shorter than the 8-byte header length", (unsigned long long)size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | bytes[i];
    if (n > HEADER_MAX)
        return bad(d, label, "header length %llu is absurd (more than %llu bytes)", (unsigned long long)n, HEADER_MAX);
    if (n > size - 8)
        return bad(d, label, "header length %llu is beyond the end of the file (%llu bytes)", (unsigned long long)n,
                   (unsigned long long)size);
    st->header_size = n;
    st->data_size = size - 8 - n;
    char *text = nu__malloc((size_t)n + 1);
    if (!text)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory for a %llu-byte header", label,
                        (unsigned long long)n);
    memcpy(text, bytes + 8, (size_t)n);
    text[n] = 0;
    static pthread_mutex_t cjson_lock = PTHREAD_MUTEX_INITIALIZER;
    const char *end = NULL;
    pthread_mutex_lock(&cjson_lock);
    cJSON *root = cJSON_ParseWithLengthOpts(text, (size_t)n, &end, 0);
    pthread_mutex_unlock(&cjson_lock);
    nu_status s = NU_OK;
    size_t tail = root ? (size_t)n - (size_t)(end - text) : 0;
    if (!root)
        s = bad(d, label, "header is not valid JSON (error near byte %zu of %llu)", end ? (size_t)(end - text) : 0,
                (unsigned long long)n);
    else if (!cJSON_IsObject(root))
        s = bad(d, label, "header is not a JSON object");
    else if (text[0] != '{')
        s = bad(d, label, "header does not start with '{'");
    else if (strspn(end, " \t\r\n") != tail)
        s = bad(d, label, "header has bytes other than whitespace after its JSON object");
    else
        s = fill(d, label, root, st);
    cJSON_Delete(root);
    nu__free(text);
    return s;
}

nu_status nu_safetensors_parse(const void *bytes, size_t size, nu_safetensors **out)
{
    if (!out)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_safetensors_parse: out is NULL");
    *out = NULL;
    if (!bytes && size)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_safetensors_parse: bytes is NULL");
    nu_safetensors *st = nu__calloc(1, sizeof *st);
    if (!st)
        return nu__fail(NULL, NU_ERROR_HOST_OUT_OF_MEMORY, "safetensors: out of host memory");
    nu_status s = parse(bytes, size, "safetensors", st);
    if (s != NU_OK) {
        nu__free(st);
        return s;
    }
    *out = st;
    return NU_OK;
}

nu_status nu_safetensors_close(nu_safetensors *file)
{
    if (!file)
        return NU_OK;
    nu_status st = file->file ? nu_buffer_free(file->file) : NU_OK;
    nu__free(file->block);
    nu__free(file);
    return st;
}

size_t nu_safetensors_count(const nu_safetensors *file) { return file ? file->count : 0; }

const nu_tensor_info *nu_safetensors_tensor(const nu_safetensors *file, size_t index)
{
    return file && index < file->count ? &file->tensors[index] : NULL;
}

static int find_name(const void *key, const void *elem)
{
    return strcmp(key, (*(const nu_tensor_info *const *)elem)->name);
}

const nu_tensor_info *nu_safetensors_find(const nu_safetensors *file, const char *name)
{
    if (!file || !name || !file->count)
        return NULL;
    const nu_tensor_info **t = bsearch(name, file->by_name, file->count, sizeof *file->by_name, find_name);
    return t ? *t : NULL;
}

static int find_key(const void *key, const void *elem) { return strcmp(key, ((const meta_pair *)elem)->key); }

const char *nu_safetensors_metadata(const nu_safetensors *file, const char *key)
{
    if (!file || !key || !file->metadata_count)
        return NULL;
    const meta_pair *p = bsearch(key, file->metadata, file->metadata_count, sizeof *file->metadata, find_key);
    return p ? p->value : NULL;
}

uint64_t nu_safetensors_data_size(const nu_safetensors *file) { return file ? file->data_size : 0; }

/* ---- writing -------------------------------------------------------------------------- */

static nu_status io_fail(const char *path, const char *what, int err)
{
    char why[256];
    return nu__fail(NULL, NU_ERROR_IO, "safetensors '%s': cannot %s: %s", path, what, strerror_r(err, why, sizeof why));
}

/* write() until done: short writes and EINTR are retried; errno is kept on failure. */
static bool write_all(int fd, const void *p, uint64_t n)
{
    const char *c = p;
    while (n) {
        ssize_t k = write(fd, c, n < (1u << 30) ? (size_t)n : (1u << 30));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = EIO;
            return false;
        }
        c += k;
        n -= (uint64_t)k;
    }
    return true;
}

static int cmp_write_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Checks the arguments: names, dtypes, ranks, sizes (below 2^53, as the parser requires) and
 * duplicates. The sum of the sizes goes to *data_size. */
static nu_status check_write(const char *path, const nu_tensor_write *tensors, size_t count,
                             const char *const *keys, const char *const *values, size_t mcount, uint64_t *data_size)
{
#define INVALID(...) nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, __VA_ARGS__)
    if (!path)
        return INVALID("nu_safetensors_write: path is NULL");
    if ((count && !tensors) || (mcount && (!keys || !values)))
        return INVALID("safetensors '%s': NULL tensors or metadata arrays", path);
    for (size_t i = 0; i < mcount; i++) {
        if (!keys[i] || !values[i])
            return INVALID("safetensors '%s': metadata %zu has a NULL key or value", path, i);
        for (size_t j = 0; j < i; j++)
            if (strcmp(keys[i], keys[j]) == 0)
                return INVALID("safetensors '%s': metadata key " NAME " appears twice", path, keys[i]);
    }
    uint64_t total = 0;
    for (size_t i = 0; i < count; i++) {
        const nu_tensor_write *t = &tensors[i];
        if (!t->name || !*t->name || strcmp(t->name, META_KEY) == 0)
            return INVALID("safetensors '%s': tensor %zu has a NULL, empty or reserved name", path, i);
        if ((unsigned)t->dtype >= NU_DTYPE_COUNT || !safetensors_dtype(t->dtype))
            return INVALID("safetensors '%s': tensor " NAME ": dtype %d is not a safetensors dtype", path, t->name,
                           (int)t->dtype);
        if (t->rank > NU_TENSOR_MAX_RANK)
            return INVALID("safetensors '%s': tensor " NAME ": rank %u is more than %d", path, t->name, t->rank,
                           NU_TENSOR_MAX_RANK);
        uint64_t bytes;
        bool ok = tensor_bytes(t->dtype, t->rank, t->shape, &bytes) && !__builtin_add_overflow(total, bytes, &total) &&
                  total < INT_LIMIT;
        for (uint32_t k = 0; k < t->rank; k++)
            ok = ok && t->shape[k] < INT_LIMIT;
        if (!ok || (t->data && bytes > SIZE_MAX))
            return INVALID("safetensors '%s': tensor " NAME ": size overflows (shape or offsets reach 2^53)", path,
                           t->name);
    }
    *data_size = total;
    if (count < 2)
        return NU_OK;
    const char **names = nu__malloc(count * sizeof *names);
    if (!names)
        return nu__fail(NULL, NU_ERROR_HOST_OUT_OF_MEMORY, "safetensors '%s': out of host memory", path);
    for (size_t i = 0; i < count; i++)
        names[i] = tensors[i].name;
    qsort(names, count, sizeof *names, cmp_write_name);
    nu_status s = NU_OK;
    for (size_t i = 1; i < count && s == NU_OK; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            s = INVALID("safetensors '%s': tensor " NAME " appears twice", path, names[i]);
    nu__free(names);
    return s;
#undef INVALID
}

/* An integer as exact JSON text (cJSON prints doubles of 10^15 and above with exponents,
 * which the official parser refuses for sizes). */
static bool add_uint(cJSON *array, uint64_t v)
{
    char text[24];
    snprintf(text, sizeof text, "%llu", (unsigned long long)v);
    cJSON *item = cJSON_CreateRaw(text);
    if (!item || !cJSON_AddItemToArray(array, item)) {
        cJSON_Delete(item);
        return false;
    }
    return true;
}

/* The header's JSON, or NULL when out of memory (cJSON fails only so). */
static char *header_json(const nu_tensor_write *tensors, size_t count, const char *const *keys,
                         const char *const *values, size_t mcount)
{
    cJSON *root = cJSON_CreateObject();
    bool ok = root != NULL;
    if (ok && mcount) {
        cJSON *m = cJSON_AddObjectToObject(root, META_KEY);
        ok = m != NULL;
        for (size_t i = 0; ok && i < mcount; i++)
            ok = cJSON_AddStringToObject(m, keys[i], values[i]) != NULL;
    }
    uint64_t at = 0;
    for (size_t i = 0; ok && i < count; i++) {
        const nu_tensor_write *t = &tensors[i];
        uint64_t bytes = 0;
        (void)tensor_bytes(t->dtype, t->rank, t->shape, &bytes); /* checked before */
        cJSON *o = cJSON_AddObjectToObject(root, t->name);
        ok = o && cJSON_AddStringToObject(o, "dtype", nu_dtype_name(t->dtype));
        cJSON *shape = ok ? cJSON_AddArrayToObject(o, "shape") : NULL;
        ok = shape != NULL;
        for (uint32_t k = 0; ok && k < t->rank; k++)
            ok = add_uint(shape, t->shape[k]);
        cJSON *offsets = ok ? cJSON_AddArrayToObject(o, "data_offsets") : NULL;
        ok = offsets && add_uint(offsets, at) && add_uint(offsets, at + bytes);
        at += bytes;
    }
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return text;
}

nu_status nu_safetensors_write(const char *path, const nu_tensor_write *tensors, size_t count,
                               const char *const *metadata_keys, const char *const *metadata_values,
                               size_t metadata_count)
{
    uint64_t data_size = 0;
    nu_status s = check_write(path, tensors, count, metadata_keys, metadata_values, metadata_count, &data_size);
    if (s != NU_OK)
        return s;
    char *json = header_json(tensors, count, metadata_keys, metadata_values, metadata_count);
    if (!json)
        return nu__fail(NULL, NU_ERROR_HOST_OUT_OF_MEMORY, "safetensors '%s': out of host memory for the header",
                        path);
    /* Padded with spaces so that the data section starts 8-byte aligned, as the official
     * writer does. */
    size_t len = strlen(json), padded = (len + 7) & ~(size_t)7;
    uint8_t prefix[8];
    for (int i = 0; i < 8; i++)
        prefix[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        cJSON_free(json);
        return io_fail(path, "create it", e);
    }
    bool ok = write_all(fd, prefix, 8) && write_all(fd, json, len) && write_all(fd, "       ", padded - len);
    cJSON_free(json);
    /* Tensors without data are holes: seek over them, and extend the file at the end. */
    bool hole = false;
    for (size_t i = 0; ok && i < count; i++) {
        uint64_t bytes = 0;
        (void)tensor_bytes(tensors[i].dtype, tensors[i].rank, tensors[i].shape, &bytes);
        if (!bytes)
            continue;
        hole = !tensors[i].data;
        ok = hole ? lseek(fd, (off_t)bytes, SEEK_CUR) >= 0 : write_all(fd, tensors[i].data, bytes);
    }
    if (ok && hole)
        ok = ftruncate(fd, (off_t)(8 + padded + data_size)) == 0;
    int e = errno;
    if (close(fd) != 0 && ok) {
        ok = false;
        e = errno;
    }
    return ok ? NU_OK : io_fail(path, "write it", e);
}

/* ---- open, buffer, to_device: the parser over a mapped file --------------------------- */

nu_status nu_safetensors_open(nu_device *device, const char *path, nu_safetensors **out)
{
    if (!out)
        return nu__fail(device, NU_ERROR_INVALID_ARGUMENT, "nu_safetensors_open: NULL out");
    *out = NULL;
    if (!device || !path)
        return nu__fail(device, NU_ERROR_INVALID_ARGUMENT, "nu_safetensors_open: NULL %s", device ? "path" : "device");
    nu_buffer *b;
    nu_status st = nu_buffer_map_file(device, path, &b);
    if (st != NU_OK)
        return st;
    const void *bytes = NULL;
    st = nu_buffer_contents(b, &bytes);
    if (st == NU_OK)
        st = nu_safetensors_parse(bytes, nu_buffer_size(b), out);
    if (st != NU_OK) {
        /* The parser's message, with the path and on the device. */
        char why[768];
        snprintf(why, sizeof why, "%s", nu_error_message(NULL));
        nu_buffer_free(b);
        return nu__fail(device, st, "%s: %s", path, why);
    }
    (*out)->file = b;
    (*out)->device = device;
    return NU_OK;
}

nu_buffer *nu_safetensors_buffer(const nu_safetensors *file) { return file ? file->file : NULL; }

/* nu__file_tensor_fn for nu__file_tensors_to_device. */
static bool file_tensor(const void *f, const char *const *names, size_t i, uint64_t *offset, uint64_t *size)
{
    const nu_safetensors *file = f;
    const nu_tensor_info *t = names ? (names[i] ? nu_safetensors_find(file, names[i]) : NULL) : &file->tensors[i];
    if (!t)
        return false;
    *offset = t->offset;
    *size = t->size;
    return true;
}

nu_status nu_safetensors_to_device(nu_safetensors *file, const char *const *names, size_t count,
                                   const nu_move_options *options, nu_buffer **out, uint64_t *offsets)
{
    static const char fn[] = "nu_safetensors_to_device";
    if (!out)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL out", fn);
    *out = NULL;
    if (!file)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL file", fn);
    nu_device *d = file->device;
    if (!file->file)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: the file was parsed from memory, not opened on a device",
                        fn);
    size_t n = names ? count : file->count;
    return nu__file_tensors_to_device(d, fn, file->file, file, file_tensor, names, n, options, out, offsets);
}
