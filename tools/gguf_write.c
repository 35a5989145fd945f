/* gguf_write.c: the streaming GGUF v3 writer (see gguf_write.h). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf_write.h"
#include "tool_error.h"

#define OUT_BUFFER (8u << 20)

typedef struct bytes {
    uint8_t *p;
    size_t n, cap;
} bytes;

struct gguf_writer {
    uint32_t alignment;
    nu_status failed;       /* the first failure: later calls are refused */
    bytes kv;               /* the metadata entries, serialised */
    uint64_t kv_count;
    char **keys;            /* for duplicates */
    bytes infos;            /* the tensor infos, serialised */
    uint64_t tensor_count;
    char **names;
    uint64_t *sizes;        /* each tensor's bytes */
    uint64_t data_size;     /* padded */
    /* writing */
    int fd;
    char *path;
    uint8_t *out;
    size_t out_n;
    uint64_t tensor;        /* the tensor being written */
    uint64_t written;       /* of its bytes */
};

static nu_status fail(gguf_writer *w, nu_status st, const char *fmt, const char *a, const char *b)
{
    tool_fail(st, fmt, a, b);
    if (w && w->failed == NU_OK)
        w->failed = st;
    return st;
}

static nu_status oom(gguf_writer *w) { return fail(w, NU_ERROR_HOST_OUT_OF_MEMORY, "gguf writer: out of host memory%s%s", "", ""); }

static bool grow(bytes *b, size_t more)
{
    if (b->cap - b->n >= more)
        return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->n < more) {
        if (cap > SIZE_MAX / 2)
            return false;
        cap *= 2;
    }
    uint8_t *p = realloc(b->p, cap);
    if (!p)
        return false;
    b->p = p;
    b->cap = cap;
    return true;
}

static bool put(bytes *b, const void *p, size_t n)
{
    if (!grow(b, n))
        return false;
    memcpy(b->p + b->n, p, n);
    b->n += n;
    return true;
}

static bool put_le(bytes *b, uint64_t v, unsigned n)
{
    uint8_t c[8];
    for (unsigned i = 0; i < n; i++)
        c[i] = (uint8_t)(v >> (8 * i));
    return put(b, c, n);
}

static bool put_str(bytes *b, const char *s)
{
    size_t n = strlen(s);
    return put_le(b, n, 8) && put(b, s, n);
}

static const unsigned SCALAR_SIZE[NU_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

nu_status gguf_writer_new(uint32_t alignment, gguf_writer **out)
{
    *out = NULL;
    if (alignment & (alignment - 1))
        return tool_fail(NU_ERROR_INVALID_ARGUMENT, "gguf writer: alignment %u is not a power of two", alignment);
    gguf_writer *w = calloc(1, sizeof *w);
    if (!w)
        return oom(NULL);
    w->fd = -1;
    w->alignment = alignment ? alignment : 32;
    *out = w;
    if (alignment)
        return gguf_writer_u32(w, "general.alignment", alignment);
    return NU_OK;
}

void gguf_writer_free(gguf_writer *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    for (uint64_t i = 0; i < w->kv_count; i++)
        free(w->keys[i]);
    for (uint64_t i = 0; i < w->tensor_count; i++)
        free(w->names[i]);
    free(w->keys);
    free(w->names);
    free(w->sizes);
    free(w->kv.p);
    free(w->infos.p);
    free(w->out);
    free(w->path);
    free(w);
}

/* Appends `s` to the list, refusing a duplicate (what names the list in the message). */
static nu_status add_name(gguf_writer *w, char ***list, uint64_t count, const char *s, const char *what)
{
    if (!s)
        return fail(w, NU_ERROR_INVALID_ARGUMENT, "gguf writer: NULL %s%s", what, "");
    for (uint64_t i = 0; i < count; i++)
        if (!strcmp((*list)[i], s))
            return fail(w, NU_ERROR_INVALID_ARGUMENT, "gguf writer: %s '%s' appears twice", what, s);
    char **l = realloc(*list, (size_t)(count + 1) * sizeof *l);
    if (!l)
        return oom(w);
    *list = l;
    if (!(l[count] = strdup(s)))
        return oom(w);
    return NU_OK;
}

/* The entry's key and type; the caller appends the value. */
static nu_status begin_kv(gguf_writer *w, const char *key, nu_gguf_type type)
{
    if (w->failed != NU_OK || w->fd >= 0)
        return fail(w, NU_ERROR_INVALID_ARGUMENT, "gguf writer: metadata '%s' after %s", key ? key : "(NULL)",
                    w->fd >= 0 ? "begin" : "a failure");
    nu_status st = add_name(w, &w->keys, w->kv_count, key, "metadata key");
    if (st != NU_OK)
        return st;
    w->kv_count++;
    return put_str(&w->kv, key) && put_le(&w->kv, (uint64_t)type, 4) ? NU_OK : oom(w);
}

static nu_status scalar(gguf_writer *w, const char *key, nu_gguf_type type, uint64_t bits, unsigned n)
{
    nu_status st = begin_kv(w, key, type);
    if (st == NU_OK && !put_le(&w->kv, bits, n))
        st = oom(w);
    return st;
}

nu_status gguf_writer_u32(gguf_writer *w, const char *key, uint32_t v) { return scalar(w, key, NU_GGUF_UINT32, v, 4); }
nu_status gguf_writer_u64(gguf_writer *w, const char *key, uint64_t v) { return scalar(w, key, NU_GGUF_UINT64, v, 8); }
nu_status gguf_writer_i32(gguf_writer *w, const char *key, int32_t v)
{
    return scalar(w, key, NU_GGUF_INT32, (uint32_t)v, 4);
}
nu_status gguf_writer_bool(gguf_writer *w, const char *key, bool v) { return scalar(w, key, NU_GGUF_BOOL, v, 1); }
nu_status gguf_writer_f32(gguf_writer *w, const char *key, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, 4);
    return scalar(w, key, NU_GGUF_FLOAT32, bits, 4);
}

nu_status gguf_writer_string(gguf_writer *w, const char *key, const char *v)
{
    if (!v)
        return fail(w, NU_ERROR_INVALID_ARGUMENT, "gguf writer: '%s': NULL string%s", key ? key : "(NULL)", "");
    return gguf_writer_string_n(w, key, v, strlen(v));
}

static bool put_bytes_str(bytes *b, const char *s, uint64_t n) { return put_le(b, n, 8) && put(b, s, (size_t)n); }

nu_status gguf_writer_string_n(gguf_writer *w, const char *key, const char *v, uint64_t length)
{
    if (!v && length)
        return fail(w, NU_ERROR_INVALID_ARGUMENT, "gguf writer: '%s': NULL string%s", key ? key : "(NULL)", "");
    nu_status st = begin_kv(w, key, NU_GGUF_STRING);
    if (st == NU_OK && (length > SIZE_MAX || !put_bytes_str(&w->kv, v, length)))
        st = oom(w);
    return st;
}

nu_status gguf_writer_array(gguf_writer *w, const char *key, nu_gguf_type type, const void *elements, uint64_t count)
{
    if ((unsigned)type >= NU_GGUF_TYPE_COUNT || !SCALAR_SIZE[type] || (count && !elements))
        return fail(w, NU_ERROR_INVALID_ARGUMENT, "gguf writer: '%s': not an array of scalars%s", key ? key : "(NULL)",
                    "");
    nu_status st = begin_kv(w, key, NU_GGUF_ARRAY);
    if (st != NU_OK)
        return st;
    uint64_t n;
    if (__builtin_mul_overflow(count, (uint64_t)SCALAR_SIZE[type], &n) || n > SIZE_MAX)
        return oom(w);
    /* The host is little-endian (x86-64, arm64): elements are copied as they are. */
    return put_le(&w->kv, (uint64_t)type, 4) && put_le(&w->kv, count, 8) && put(&w->kv, elements, (size_t)n) ? NU_OK
                                                                                                         : oom(w);
}

nu_status gguf_writer_scalar(gguf_writer *w, const char *key, nu_gguf_type type, const void *value)
{
    if ((unsigned)type >= NU_GGUF_TYPE_COUNT || !SCALAR_SIZE[type] || !value)
        return fail(w, NU_ERROR_INVALID_ARGUMENT, "gguf writer: '%s': not a scalar%s", key ? key : "(NULL)", "");
    uint64_t bits = 0;
    memcpy(&bits, value, SCALAR_SIZE[type]); /* little-endian host: the low bytes */
    return scalar(w, key, type, bits, SCALAR_SIZE[type]);
}

/* An array of strings: strings[i], lengths[i] bytes each (NUL-terminated when lengths is NULL). */
static nu_status string_array(gguf_writer *w, const char *key, const char *const *strings, const uint64_t *lengths,
                              uint64_t count)
{
    if (count && !strings)
        return fail(w, NU_ERROR_INVALID_ARGUMENT, "gguf writer: '%s': NULL strings%s", key ? key : "(NULL)", "");
    nu_status st = begin_kv(w, key, NU_GGUF_ARRAY);
    if (st != NU_OK)
        return st;
    if (!put_le(&w->kv, NU_GGUF_STRING, 4) || !put_le(&w->kv, count, 8))
        return oom(w);
    for (uint64_t i = 0; i < count; i++) {
        if (!strings[i] && (!lengths || lengths[i]))
            return fail(w, NU_ERROR_INVALID_ARGUMENT, "gguf writer: '%s': a NULL string%s", key, "");
        const uint64_t n = lengths ? lengths[i] : strlen(strings[i]);
        if (n > SIZE_MAX || !put_bytes_str(&w->kv, strings[i], n))
            return oom(w);
    }
    return NU_OK;
}

nu_status gguf_writer_string_array(gguf_writer *w, const char *key, const char *const *strings, uint64_t count)
{
    return string_array(w, key, strings, NULL, count);
}

nu_status gguf_writer_string_array_n(gguf_writer *w, const char *key, const char *const *strings,
                                     const uint64_t *lengths, uint64_t count)
{
    return string_array(w, key, strings, lengths, count);
}

bool gguf_ggml_type(nu_dtype d, uint32_t *type)
{
    switch (d) {
    case NU_DTYPE_F32: *type = 0; return true;
    case NU_DTYPE_F16: *type = 1; return true;
    case NU_DTYPE_Q4_0: *type = 2; return true;
    case NU_DTYPE_Q4_1: *type = 3; return true;
    case NU_DTYPE_Q5_0: *type = 6; return true;
    case NU_DTYPE_Q5_1: *type = 7; return true;
    case NU_DTYPE_Q8_0: *type = 8; return true;
    case NU_DTYPE_Q4_K: *type = 12; return true;
    case NU_DTYPE_Q5_K: *type = 13; return true;
    case NU_DTYPE_Q6_K: *type = 14; return true;
    case NU_DTYPE_IQ4_NL: *type = 20; return true;
    case NU_DTYPE_IQ4_XS: *type = 23; return true;
    case NU_DTYPE_BF16: *type = 30; return true;
    default: return false;
    }
}

nu_status gguf_writer_tensor(gguf_writer *w, const char *name, nu_dtype dtype, uint32_t rank, const uint64_t *shape)
{
    if (w->failed != NU_OK || w->fd >= 0)
        return fail(w, NU_ERROR_INVALID_ARGUMENT, "gguf writer: tensor '%s' after %s", name ? name : "(NULL)",
                    w->fd >= 0 ? "begin" : "a failure");
    uint32_t type;
    if (!gguf_ggml_type(dtype, &type))
        return fail(w, NU_ERROR_INVALID_ARGUMENT, "gguf writer: tensor '%s': dtype %s is not one GGUF files hold here",
                    name ? name : "(NULL)", nu_dtype_name(dtype));
    if (rank < 1 || rank > NU_GGUF_MAX_RANK || !shape)
        return fail(w, NU_ERROR_INVALID_ARGUMENT, "gguf writer: tensor '%s': rank must be 1 to 4%s", name ? name : "(NULL)",
                    "");
    uint64_t elements = 1;
    for (uint32_t k = 0; k < rank; k++)
        if (!shape[k] || __builtin_mul_overflow(elements, shape[k], &elements) || elements > (uint64_t)INT64_MAX)
            return fail(w, NU_ERROR_INVALID_ARGUMENT, "gguf writer: tensor '%s': a zero dim or too many elements%s",
                        name ? name : "(NULL)", "");
    uint32_t block = nu_dtype_block_elements(dtype);
    if (shape[rank - 1] % block)
        return fail(w, NU_ERROR_INVALID_ARGUMENT, "gguf writer: tensor '%s': the inner dim is not a multiple of the %s "
                    "block", name ? name : "(NULL)", nu_dtype_name(dtype));
    uint64_t size = elements / block * nu_dtype_block_bytes(dtype), padded;
    uint64_t a = w->alignment;
    if (__builtin_add_overflow(size, a - 1, &padded) || __builtin_add_overflow(w->data_size, padded & ~(a - 1), &padded))
        return fail(w, NU_ERROR_INVALID_ARGUMENT, "gguf writer: tensor '%s': the data section overflows%s", name, "");
    nu_status st = add_name(w, &w->names, w->tensor_count, name, "tensor");
    if (st != NU_OK)
        return st;
    uint64_t *sizes = realloc(w->sizes, (size_t)(w->tensor_count + 1) * sizeof *sizes);
    if (!sizes) {
        free(w->names[w->tensor_count]);
        return oom(w);
    }
    w->sizes = sizes;
    sizes[w->tensor_count++] = size;
    bool ok = put_str(&w->infos, name) && put_le(&w->infos, rank, 4);
    for (uint32_t k = rank; ok && k-- > 0;) /* GGUF lists the innermost dim first */
        ok = put_le(&w->infos, shape[k], 8);
    ok = ok && put_le(&w->infos, type, 4) && put_le(&w->infos, w->data_size, 8);
    w->data_size = padded;
    return ok ? NU_OK : oom(w);
}

uint64_t gguf_writer_data_size(const gguf_writer *w) { return w ? w->data_size : 0; }

/* ---- output ---- */

static nu_status io_fail(gguf_writer *w, const char *what)
{
    char why[128];
    const char *reason = strerror_r(errno, why, sizeof why);
    tool_fail(NU_ERROR_IO, "gguf writer: '%s': cannot %s: %s", w->path ? w->path : "?", what, reason);
    if (w->failed == NU_OK)
        w->failed = NU_ERROR_IO;
    return NU_ERROR_IO;
}

static bool write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t k = write(fd, p, n < (1u << 30) ? n : (1u << 30));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = EIO;
            return false;
        }
        p += k;
        n -= (size_t)k;
    }
    return true;
}

static nu_status flush(gguf_writer *w)
{
    if (w->out_n && !write_all(w->fd, w->out, w->out_n))
        return io_fail(w, "write it");
    w->out_n = 0;
    return NU_OK;
}

/* Appends to the output buffer; pieces of a MiB or more go straight to the file (no copy). */
static nu_status emit(gguf_writer *w, const void *p, size_t n)
{
    if (!n) /* a file without metadata has no bytes (nor a buffer) for it */
        return NU_OK;
    if (n >= (1u << 20)) {
        nu_status st = flush(w);
        if (st == NU_OK && !write_all(w->fd, p, n))
            st = io_fail(w, "write it");
        return st;
    }
    if (OUT_BUFFER - w->out_n < n) {
        nu_status st = flush(w);
        if (st != NU_OK)
            return st;
    }
    memcpy(w->out + w->out_n, p, n);
    w->out_n += n;
    return NU_OK;
}

static nu_status pad(gguf_writer *w, uint64_t at)
{
    static const uint8_t zeros[256];
    uint64_t n = (w->alignment - at % w->alignment) % w->alignment;
    nu_status st = NU_OK;
    while (n && st == NU_OK) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        st = emit(w, zeros, k);
        n -= k;
    }
    return st;
}

nu_status gguf_writer_begin(gguf_writer *w, const char *path)
{
    if (w->failed != NU_OK || w->fd >= 0 || !path)
        return fail(w, NU_ERROR_INVALID_ARGUMENT, "gguf writer: begin '%s' %s", path ? path : "(NULL)",
                    w->fd >= 0 ? "twice" : "after a failure");
    if (!(w->path = strdup(path)) || !(w->out = malloc(OUT_BUFFER)))
        return oom(w);
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0)
        return io_fail(w, "create it");
    bytes h = {0};
    bool ok = put(&h, "GGUF", 4) && put_le(&h, 3, 4) && put_le(&h, w->tensor_count, 8) && put_le(&h, w->kv_count, 8);
    if (!ok) {
        free(h.p);
        return oom(w);
    }
    nu_status st = emit(w, h.p, h.n);
    free(h.p);
    if (st == NU_OK)
        st = emit(w, w->kv.p, w->kv.n);
    if (st == NU_OK)
        st = emit(w, w->infos.p, w->infos.n);
    if (st == NU_OK)
        st = pad(w, 24 + w->kv.n + w->infos.n);
    return st;
}

nu_status gguf_writer_data(gguf_writer *w, const void *bytes_, size_t size)
{
    const uint8_t *p = bytes_;
    if (w->failed != NU_OK || w->fd < 0)
        return fail(w, NU_ERROR_INVALID_ARGUMENT, "gguf writer: data %s%s", w->fd < 0 ? "before begin" : "after a failure",
                    "");
    while (size) {
        if (w->tensor >= w->tensor_count)
            return fail(w, NU_ERROR_INVALID_ARGUMENT, "gguf writer: '%s': more data than the tensors hold%s", w->path,
                        "");
        uint64_t rest = w->sizes[w->tensor] - w->written;
        size_t k = rest < size ? (size_t)rest : size;
        nu_status st = emit(w, p, k);
        if (st != NU_OK)
            return st;
        p += k;
        size -= k;
        w->written += k;
        if (w->written == w->sizes[w->tensor]) {
            if ((st = pad(w, w->written)) != NU_OK)
                return st;
            w->tensor++;
            w->written = 0;
        }
    }
    return NU_OK;
}

nu_status gguf_writer_finish(gguf_writer *w)
{
    if (w->failed != NU_OK || w->fd < 0)
        return fail(w, NU_ERROR_INVALID_ARGUMENT, "gguf writer: finish %s%s", w->fd < 0 ? "before begin" : "after a failure",
                    "");
    if (w->tensor != w->tensor_count)
        return fail(w, NU_ERROR_INVALID_ARGUMENT, "gguf writer: '%s': finished before tensor '%s' was written",
                    w->path, w->names[w->tensor]);
    nu_status st = flush(w);
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0 && st == NU_OK)
        st = io_fail(w, "close it");
    return st;
}

/* ---- conversions ----
 * On nuvec's CPU codecs (nuvec/quant.h), which round as every writer in nuvec does; they refuse
 * a NaN or a value that rounds to an infinity, which these give as IEEE's conversion does. */

static uint32_t bits_of(float x)
{
    uint32_t f;
    memcpy(&f, &x, 4);
    return f;
}

uint16_t gguf_f32_to_f16(float x)
{
    uint16_t h;
    if (fabsf(x) < 65520.0f && nu_quantize(NU_DTYPE_F16, &x, &h, 1, NULL) == NU_OK) /* NaN: false */
        return h;
    /* An infinity (what rounds above 65504 too), or a NaN made quiet with its payload's top bits. */
    uint32_t f = bits_of(x);
    return (uint16_t)(((f >> 16) & 0x8000u) | 0x7C00u | (isnan(x) ? 0x200u | ((f & 0x7FFFFFu) >> 13) : 0));
}

uint16_t gguf_f32_to_bf16(float x)
{
    uint16_t h;
    uint32_t f = bits_of(x);
    if ((f & 0x7FFFFFFFu) < 0x7F7F8000u && nu_quantize(NU_DTYPE_BF16, &x, &h, 1, NULL) == NU_OK)
        return h; /* below the midpoint between the largest bfloat16 and infinity */
    return (uint16_t)(isnan(x) ? (f >> 16) | 0x40u : ((f >> 16) & 0x8000u) | 0x7F80u);
}

float gguf_f16_to_f32(uint16_t h)
{
    float x = 0;
    nu_dequantize(NU_DTYPE_F16, &h, &x, 1); /* every half decodes (exactly) */
    return x;
}

void gguf_f32_to_half_row(nu_dtype dtype, const float *x, uint8_t *out, size_t n)
{
    if (nu_quantize(dtype, x, out, n, NULL) == NU_OK) /* the whole row at once: the common case */
        return;
    for (size_t i = 0; i < n; i++) {
        uint16_t h = dtype == NU_DTYPE_BF16 ? gguf_f32_to_bf16(x[i]) : gguf_f32_to_f16(x[i]);
        memcpy(out + 2 * i, &h, 2);
    }
}

void gguf_quantize_q8_0(const float *x, uint8_t *block)
{
    float amax = 0;
    for (int j = 0; j < 32; j++)
        amax = fmaxf(amax, fabsf(x[j]));
    float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
    uint16_t h = gguf_f32_to_f16(d);
    block[0] = (uint8_t)h;
    block[1] = (uint8_t)(h >> 8);
    for (int j = 0; j < 32; j++)
        block[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
}

void gguf_quantize_q4_0(const float *x, uint8_t *block)
{
    float amax = 0, max = 0; /* max: the value of largest magnitude, with its sign */
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    float d = max / -8.0f, id = d ? 1.0f / d : 0.0f;
    uint16_t h = gguf_f32_to_f16(d);
    block[0] = (uint8_t)h;
    block[1] = (uint8_t)(h >> 8);
    for (int j = 0; j < 16; j++) {
        int a = (int)(x[j] * id + 8.5f), b = (int)(x[j + 16] * id + 8.5f);
        a = a > 15 ? 15 : a;
        b = b > 15 ? 15 : b;
        block[2 + j] = (uint8_t)(a | b << 4);
    }
}
