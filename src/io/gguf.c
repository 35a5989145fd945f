/* gguf.c: GGUF model files (see nuvec/gguf.h).
 *
 * Parsing runs twice over the header with the same code: the first pass checks everything and
 * counts what the parsed file keeps (entries, tensors, key and name bytes, positions of the
 * elements of string arrays and arrays of arrays); one host allocation of that size is made; the
 * second pass fills it. So a failure frees one thing, lookups never allocate, and element i of a
 * vocabulary array is found in O(1) rather than by walking i strings. Every count the file gives
 * is checked against the bytes left before anything is sized by it (each string takes at least 8
 * bytes, each array 12), so what the first pass counts is bounded by the file's size.
 *
 * Checks follow ggml's gguf.cpp where it has them (version, GGML_MAX_DIMS, a UINT32 power-of-two
 * alignment, dims and element counts below INT64_MAX, inner dims a multiple of the block size,
 * duplicate keys and names, aligned offsets, tensors inside the file). Stricter: bools other than
 * 0 and 1, NUL bytes in keys and names, empty names, zero dims and overlapping tensors are
 * refused. gguf.cpp also requires tensors to be packed in info order; this reader does not
 * (other writers pad differently), it requires only that they do not overlap. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/host.h"
#include "io/file_tensors.h"
#include "nuvec/device.h"
#include "nuvec/gguf.h"

#define MAGIC 0x46554747u /* "GGUF" read as a little-endian uint32 */
#define DEFAULT_ALIGNMENT 32u
#define ALIGNMENT_KEY "general.alignment"

/* ---- ggml tensor types ------------------------------------------------------------------ */

typedef struct ggml_type_desc {
    const char *name;   /* NULL: never a type, or removed from GGUF */
    uint32_t block;     /* elements a block */
    uint32_t bytes;     /* bytes a block */
    nu_dtype dtype;     /* NU_DTYPE_COUNT: not read by nuvec */
} ggml_type_desc;

#define NO NU_DTYPE_COUNT
/* ggml.h's enum ggml_type and ggml.c's type traits (block sizes from ggml-common.h); the types
 * nuvec reads map to the dtype of the same layout (nuvec/tensor.h; src/core/dtype.h's table gives
 * the same block sizes). */
static const ggml_type_desc GGML_TYPES[] = {
    [0] = {"f32", 1, 4, NU_DTYPE_F32},      [1] = {"f16", 1, 2, NU_DTYPE_F16},
    [2] = {"q4_0", 32, 18, NU_DTYPE_Q4_0},  [3] = {"q4_1", 32, 20, NU_DTYPE_Q4_1},
    [6] = {"q5_0", 32, 22, NU_DTYPE_Q5_0},  [7] = {"q5_1", 32, 24, NU_DTYPE_Q5_1},
    [8] = {"q8_0", 32, 34, NU_DTYPE_Q8_0},  [9] = {"q8_1", 32, 36, NO},
    [10] = {"q2_K", 256, 84, NO},           [11] = {"q3_K", 256, 110, NO},
    [12] = {"q4_K", 256, 144, NU_DTYPE_Q4_K}, [13] = {"q5_K", 256, 176, NU_DTYPE_Q5_K},
    [14] = {"q6_K", 256, 210, NU_DTYPE_Q6_K},          [15] = {"q8_K", 256, 292, NO},
    [16] = {"iq2_xxs", 256, 66, NO},        [17] = {"iq2_xs", 256, 74, NO},
    [18] = {"iq3_xxs", 256, 98, NO},        [19] = {"iq1_s", 256, 50, NO},
    [20] = {"iq4_nl", 32, 18, NU_DTYPE_IQ4_NL},          [21] = {"iq3_s", 256, 110, NO},
    [22] = {"iq2_s", 256, 82, NO},          [23] = {"iq4_xs", 256, 136, NU_DTYPE_IQ4_XS},
    [24] = {"i8", 1, 1, NO},                [25] = {"i16", 1, 2, NO},
    [26] = {"i32", 1, 4, NO},               [27] = {"i64", 1, 8, NO},
    [28] = {"f64", 1, 8, NO},               [29] = {"iq1_m", 256, 56, NO},
    [30] = {"bf16", 1, 2, NU_DTYPE_BF16},   [34] = {"tq1_0", 256, 54, NO},
    [35] = {"tq2_0", 256, 66, NO},          [39] = {"mxfp4", 32, 17, NO},
};
#undef NO
#define GGML_TYPE_SLOTS (sizeof GGML_TYPES / sizeof *GGML_TYPES)

/* Names of the numbers ggml used once and removed from GGUF, for the message. */
static const char *removed_type(uint32_t t)
{
    switch (t) {
    case 4: return "q4_2";
    case 5: return "q4_3";
    case 31: return "q4_0_4_4";
    case 32: return "q4_0_4_8";
    case 33: return "q4_0_8_8";
    case 36: return "iq4_nl_4_4";
    case 37: return "iq4_nl_4_8";
    case 38: return "iq4_nl_8_8";
    default: return NULL;
    }
}

static const ggml_type_desc *ggml_type(uint32_t t)
{
    return t < GGML_TYPE_SLOTS && GGML_TYPES[t].name ? &GGML_TYPES[t] : NULL;
}

const char *nu_gguf_ggml_type_name(uint32_t t)
{
    const ggml_type_desc *g = ggml_type(t);
    return g ? g->name : "?";
}

/* ---- metadata value types --------------------------------------------------------------- */

static const char *const TYPE_NAMES[NU_GGUF_TYPE_COUNT] = {
    "UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
    "BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64",
};

const char *nu_gguf_type_name(nu_gguf_type t)
{
    return (unsigned)t < NU_GGUF_TYPE_COUNT ? TYPE_NAMES[t] : "?";
}

/* Bytes of a scalar type's value; 0 for STRING, ARRAY and unknown types. */
static unsigned scalar_size(uint32_t t)
{
    static const unsigned sizes[NU_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < NU_GGUF_TYPE_COUNT ? sizes[t] : 0;
}

static uint64_t le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = n; i-- > 0;)
        v = v << 8 | p[i];
    return v;
}

/* A scalar of type t from its little-endian bytes. */
static void scalar_from(nu_gguf_value *v, uint32_t t, const uint8_t *p)
{
    uint64_t u = le(p, scalar_size(t));
    switch (t) {
    case NU_GGUF_UINT8: v->scalar.u8 = (uint8_t)u; break;
    case NU_GGUF_INT8: v->scalar.i8 = (int8_t)(uint8_t)u; break;
    case NU_GGUF_UINT16: v->scalar.u16 = (uint16_t)u; break;
    case NU_GGUF_INT16: v->scalar.i16 = (int16_t)(uint16_t)u; break;
    case NU_GGUF_UINT32: v->scalar.u32 = (uint32_t)u; break;
    case NU_GGUF_INT32: v->scalar.i32 = (int32_t)(uint32_t)u; break;
    case NU_GGUF_FLOAT32: {
        uint32_t w = (uint32_t)u;
        memcpy(&v->scalar.f32, &w, 4);
        break;
    }
    case NU_GGUF_BOOL: v->scalar.b = u != 0; break;
    case NU_GGUF_UINT64: v->scalar.u64 = u; break;
    case NU_GGUF_INT64: v->scalar.i64 = (int64_t)u; break;
    case NU_GGUF_FLOAT64: memcpy(&v->scalar.f64, &u, 8); break;
    default: break;
    }
}

/* ---- the parsed file -------------------------------------------------------------------- */

/* An array's elements: what a nested array's value is made from. */
typedef struct gguf_array {
    uint32_t type;
    uint64_t count;
    const uint8_t *data;  /* the first element's bytes */
    const void *index;    /* STRING: const uint8_t *[count] (each string's length field);
                             ARRAY: gguf_array[count]; else NULL */
} gguf_array;

typedef struct gguf_kv {
    const char *key;
    uint64_t at;          /* the entry's first byte, for messages */
    nu_gguf_value value;
} gguf_kv;

struct nu_gguf {
    uint32_t version;
    uint32_t alignment;
    uint64_t kv_count;
    uint64_t tensor_count;
    uint64_t data_offset;
    gguf_kv *kvs;                        /* kv_count, in file order */
    const gguf_kv **by_key;              /* kv_count, sorted by key */
    nu_gguf_tensor_info *tensors;        /* tensor_count, in file order */
    const nu_gguf_tensor_info **by_name; /* tensor_count, sorted by name */
    void *block;                         /* the one allocation holding all of the above */
    nu_buffer *file;                     /* the mapped file; NULL when parsed from memory */
    nu_device *device;
};

/* ---- parsing ---------------------------------------------------------------------------- */

typedef struct parser {
    const uint8_t *p;
    uint64_t size;
    uint64_t at;
    nu_device *d;
    const char *label;
    char where[160];          /* "metadata entry 3 ('general.name')": the message's subject */
    bool fill;                /* second pass: store what the first counted */
    nu_gguf *g;
    /* counted by the first pass, handed out by the second */
    uint64_t n_ptrs, n_arrays, n_chars;
    const uint8_t **ptrs;
    gguf_array *arrays;
    char *chars;
} parser;

/* Names may be long or odd: messages show at most 80 bytes of one. */
#define NAME "'%.80s'"

#define NO_AT UINT64_MAX /* for bad(): the message names its own file bytes */

/* NU_ERROR_FORMAT: "<label>: byte <at>: <where>: <message>". */
__attribute__((format(printf, 3, 4))) static nu_status bad(parser *ps, uint64_t at, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char byte[32] = "";
    if (at != NO_AT)
        snprintf(byte, sizeof byte, "byte %llu: ", (unsigned long long)at);
    return nu__fail(ps->d, NU_ERROR_FORMAT, "%s: %s%s%s%s", ps->label, byte, ps->where, ps->where[0] ? ": " : "", msg);
}

static uint64_t left(const parser *ps) { return ps->size - ps->at; }

/* Reads an n-byte little-endian integer, or fails naming `what`. */
static nu_status read_uint(parser *ps, unsigned n, const char *what, uint64_t *out)
{
    if (left(ps) < n)
        return bad(ps, ps->at, "the file ends inside the %s (%u bytes needed, %llu left)", what, n,
                   (unsigned long long)left(ps));
    *out = le(ps->p + ps->at, n);
    ps->at += n;
    return NU_OK;
}

/* A string: its length field and bytes, checked to be in the file. */
static nu_status read_string(parser *ps, const char *what, const uint8_t **s, uint64_t *len)
{
    uint64_t at = ps->at, n = 0;
    nu_status st = read_uint(ps, 8, what, &n);
    if (st != NU_OK)
        return st;
    if (n > left(ps))
        return bad(ps, at, "%s length %llu runs past the end of the file (%llu bytes left)", what,
                   (unsigned long long)n, (unsigned long long)left(ps));
    *s = ps->p + ps->at;
    *len = n;
    ps->at += n;
    return NU_OK;
}

/* A key or name kept as a NUL-terminated copy (counted in the first pass). */
static const char *keep(parser *ps, const uint8_t *s, uint64_t len)
{
    if (!ps->fill) {
        ps->n_chars += len + 1;
        return NULL;
    }
    char *c = ps->chars;
    memcpy(c, s, (size_t)len);
    c[len] = 0;
    ps->chars += len + 1;
    return c;
}

static nu_status read_array(parser *ps, unsigned depth, gguf_array *out);

/* A value of type `type` at the cursor, into *v (only scalars and the array's fields are
 * meaningful in the first pass). */
static nu_status read_value(parser *ps, uint32_t type, unsigned depth, nu_gguf_value *v)
{
    uint64_t at = ps->at;
    v->type = (nu_gguf_type)type;
    v->nu__file = ps->g;
    if (type >= NU_GGUF_TYPE_COUNT)
        return bad(ps, at, "unknown value type %u (GGUF has 0..12)", type);
    if (type == NU_GGUF_STRING) {
        const uint8_t *s;
        nu_status st = read_string(ps, "string", &s, &v->length);
        v->string = (const char *)s;
        return st;
    }
    if (type == NU_GGUF_ARRAY) {
        gguf_array a = {0};
        nu_status st = read_array(ps, depth + 1, &a);
        v->element_type = (nu_gguf_type)a.type;
        v->length = a.count;
        v->data = scalar_size(a.type) ? a.data : NULL;
        v->nu__index = a.index;
        return st;
    }
    unsigned n = scalar_size(type);
    if (left(ps) < n)
        return bad(ps, at, "the file ends inside a %s value (%u bytes needed, %llu left)", TYPE_NAMES[type], n,
                   (unsigned long long)left(ps));
    if (type == NU_GGUF_BOOL && ps->p[at] > 1)
        return bad(ps, at, "BOOL value %u is neither 0 nor 1", ps->p[at]);
    scalar_from(v, type, ps->p + at);
    ps->at += n;
    return NU_OK;
}

/* An array (element type, count, elements) at the cursor. `depth` is its nesting, 1 at the top. */
static nu_status read_array(parser *ps, unsigned depth, gguf_array *out)
{
    uint64_t at = ps->at, type = 0, count = 0;
    if (depth > NU_GGUF_MAX_DEPTH)
        return bad(ps, at, "arrays nested more than %d deep", NU_GGUF_MAX_DEPTH);
    nu_status st = read_uint(ps, 4, "array's element type", &type);
    if (st == NU_OK)
        st = read_uint(ps, 8, "array's length", &count);
    if (st != NU_OK)
        return st;
    if (type >= NU_GGUF_TYPE_COUNT)
        return bad(ps, at, "array of unknown element type %llu (GGUF has 0..12)", (unsigned long long)type);
    out->type = (uint32_t)type;
    out->count = count;
    out->data = ps->p + ps->at;
    out->index = NULL;
    unsigned es = scalar_size((uint32_t)type);
    /* The least each element takes: a scalar's size, a string's length, an array's header. */
    uint64_t least = es ? es : type == NU_GGUF_STRING ? 8 : 12;
    if (count > left(ps) / least)
        return bad(ps, at, "array of %llu %s elements runs past the end of the file (%llu bytes left, at least "
                   "%llu bytes an element)", (unsigned long long)count, TYPE_NAMES[type],
                   (unsigned long long)left(ps), (unsigned long long)least);
    if (es) {
        if (type == NU_GGUF_BOOL)
            for (uint64_t i = 0; i < count; i++)
                if (ps->p[ps->at + i] > 1)
                    return bad(ps, ps->at + i, "BOOL element %llu is %u, neither 0 nor 1", (unsigned long long)i,
                               ps->p[ps->at + i]);
        ps->at += count * es;
        return NU_OK;
    }
    if (type == NU_GGUF_STRING) {
        const uint8_t **pos = NULL;
        if (ps->fill) {
            pos = ps->ptrs;
            ps->ptrs += count;
            out->index = pos;
        } else {
            ps->n_ptrs += count;
        }
        for (uint64_t i = 0; i < count; i++) {
            const uint8_t *s;
            uint64_t len;
            if (pos)
                pos[i] = ps->p + ps->at;
            if ((st = read_string(ps, "string element", &s, &len)) != NU_OK)
                return st;
        }
        return NU_OK;
    }
    /* Arrays of arrays: the elements' records first, then each element (whose own records
     * follow), in the same order in both passes. */
    gguf_array *elems = NULL;
    if (ps->fill) {
        elems = ps->arrays;
        ps->arrays += count;
        out->index = elems;
    } else {
        ps->n_arrays += count;
    }
    for (uint64_t i = 0; i < count; i++) {
        gguf_array a = {0};
        if ((st = read_array(ps, depth + 1, &a)) != NU_OK)
            return st;
        if (elems)
            elems[i] = a;
    }
    return NU_OK;
}

static nu_status read_metadata(parser *ps, uint64_t count)
{
    nu_gguf *g = ps->g;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t at = ps->at, type = 0;
        const uint8_t *key;
        uint64_t len;
        snprintf(ps->where, sizeof ps->where, "metadata entry %llu", (unsigned long long)i);
        nu_status st = read_string(ps, "key", &key, &len);
        if (st != NU_OK)
            return st;
        if (memchr(key, 0, (size_t)len))
            return bad(ps, at, "the key has a NUL byte");
        /* The key is not NUL-terminated: printed with a precision, so nothing past it is read. */
        snprintf(ps->where, sizeof ps->where, "metadata entry %llu ('%.*s')", (unsigned long long)i,
                 (int)(len < 80 ? len : 80), (const char *)key);
        if ((st = read_uint(ps, 4, "value type", &type)) != NU_OK)
            return st;
        nu_gguf_value v = {0};
        uint64_t value_at = ps->at;
        if ((st = read_value(ps, (uint32_t)type, 0, &v)) != NU_OK)
            return st;
        if (len == sizeof ALIGNMENT_KEY - 1 && memcmp(key, ALIGNMENT_KEY, len) == 0) {
            if (v.type != NU_GGUF_UINT32)
                return bad(ps, value_at, "general.alignment is %s, not UINT32", TYPE_NAMES[v.type]);
            if (v.scalar.u32 == 0 || (v.scalar.u32 & (v.scalar.u32 - 1)))
                return bad(ps, value_at, "general.alignment %u is not a power of two", v.scalar.u32);
            g->alignment = v.scalar.u32;
        }
        const char *k = keep(ps, key, len);
        if (ps->fill) {
            g->kvs[i].key = k;
            g->kvs[i].at = at;
            g->kvs[i].value = v;
        }
    }
    ps->where[0] = 0;
    return NU_OK;
}

static nu_status read_tensor_infos(parser *ps, uint64_t count)
{
    nu_gguf *g = ps->g;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t at = ps->at, rank = 0, type = 0, offset = 0;
        const uint8_t *name;
        uint64_t len;
        snprintf(ps->where, sizeof ps->where, "tensor info %llu", (unsigned long long)i);
        nu_status st = read_string(ps, "name", &name, &len);
        if (st != NU_OK)
            return st;
        if (len == 0)
            return bad(ps, at, "the tensor name is empty");
        if (memchr(name, 0, (size_t)len))
            return bad(ps, at, "the tensor name has a NUL byte");
        snprintf(ps->where, sizeof ps->where, "tensor '%.*s'", (int)(len < 80 ? len : 80), (const char *)name);
        uint64_t rank_at = ps->at;
        if ((st = read_uint(ps, 4, "rank", &rank)) != NU_OK)
            return st;
        if (rank > NU_GGUF_MAX_RANK)
            return bad(ps, rank_at, "rank %llu is more than %d", (unsigned long long)rank, NU_GGUF_MAX_RANK);
        uint64_t ne[NU_GGUF_MAX_RANK] = {1, 1, 1, 1}, elements = 1;
        for (uint64_t k = 0; k < rank; k++) {
            uint64_t dim_at = ps->at;
            if ((st = read_uint(ps, 8, "dims", &ne[k])) != NU_OK)
                return st;
            if (ne[k] == 0)
                return bad(ps, dim_at, "ne[%llu] is 0", (unsigned long long)k);
            if (ne[k] > (uint64_t)INT64_MAX || __builtin_mul_overflow(elements, ne[k], &elements) ||
                elements > (uint64_t)INT64_MAX)
                return bad(ps, dim_at, "the element count overflows (ne[%llu] = %llu)", (unsigned long long)k,
                           (unsigned long long)ne[k]);
        }
        uint64_t type_at = ps->at;
        if ((st = read_uint(ps, 4, "type", &type)) != NU_OK)
            return st;
        const ggml_type_desc *desc = ggml_type((uint32_t)type);
        if (!desc) {
            const char *old = removed_type((uint32_t)type);
            if (old)
                return bad(ps, type_at, "ggml type %llu (%s) was removed from GGUF; requantize the model",
                           (unsigned long long)type, old);
            return bad(ps, type_at, "unknown ggml type %llu", (unsigned long long)type);
        }
        if (ne[0] % desc->block)
            return bad(ps, type_at, "%s blocks are %u elements, but the innermost dim (ne[0]) is %llu", desc->name,
                       desc->block, (unsigned long long)ne[0]);
        uint64_t size;
        if (__builtin_mul_overflow(elements / desc->block, (uint64_t)desc->bytes, &size))
            return bad(ps, type_at, "the byte size overflows");
        if ((st = read_uint(ps, 8, "offset", &offset)) != NU_OK)
            return st;
        const char *kept = keep(ps, name, len);
        if (!ps->fill)
            continue;
        nu_gguf_tensor_info *t = &g->tensors[i];
        t->name = kept;
        t->ggml_type = (uint32_t)type;
        t->type_name = desc->name;
        t->dtype = desc->dtype;
        t->rank = (uint32_t)rank;
        for (uint32_t k = 0; k < NU_GGUF_MAX_RANK; k++)
            t->shape[k] = k < rank ? ne[rank - 1 - k] : 1;
        t->offset = offset; /* relative to the data section until check_tensors */
        t->size = size;
    }
    ps->where[0] = 0;
    return NU_OK;
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp((*(const gguf_kv *const *)a)->key, (*(const gguf_kv *const *)b)->key);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(const nu_gguf_tensor_info *const *)a)->name, (*(const nu_gguf_tensor_info *const *)b)->name);
}

static int cmp_offset(const void *a, const void *b)
{
    const nu_gguf_tensor_info *x = *(const nu_gguf_tensor_info *const *)a, *y = *(const nu_gguf_tensor_info *const *)b;
    return x->offset != y->offset ? (x->offset < y->offset ? -1 : 1) : strcmp(x->name, y->name);
}

/* After the second pass: duplicates, the data section, each tensor's place in the file. */
static nu_status check_tensors(parser *ps, uint64_t infos_end)
{
    nu_gguf *g = ps->g;
    for (uint64_t i = 0; i < g->kv_count; i++)
        g->by_key[i] = &g->kvs[i];
    qsort(g->by_key, (size_t)g->kv_count, sizeof *g->by_key, cmp_key);
    for (uint64_t i = 1; i < g->kv_count; i++)
        if (strcmp(g->by_key[i - 1]->key, g->by_key[i]->key) == 0)
            return bad(ps, g->by_key[i]->at, "metadata key " NAME " appears twice", g->by_key[i]->key);
    for (uint64_t i = 0; i < g->tensor_count; i++)
        g->by_name[i] = &g->tensors[i];
    qsort(g->by_name, (size_t)g->tensor_count, sizeof *g->by_name, cmp_name);
    for (uint64_t i = 1; i < g->tensor_count; i++)
        if (strcmp(g->by_name[i - 1]->name, g->by_name[i]->name) == 0)
            return bad(ps, NO_AT, "tensor " NAME " appears twice (duplicate name)", g->by_name[i]->name);
    uint64_t a = g->alignment;
    if (__builtin_add_overflow(infos_end, a - 1, &g->data_offset))
        return bad(ps, infos_end, "the data section's offset overflows");
    g->data_offset &= ~(a - 1);
    for (uint64_t i = 0; i < g->tensor_count; i++) {
        nu_gguf_tensor_info *t = &g->tensors[i];
        uint64_t abs, end;
        if (t->offset % a)
            return bad(ps, NO_AT, "tensor " NAME ": offset %llu is not a multiple of the alignment %llu", t->name,
                       (unsigned long long)t->offset, (unsigned long long)a);
        if (__builtin_add_overflow(g->data_offset, t->offset, &abs) || __builtin_add_overflow(abs, t->size, &end) ||
            end > ps->size)
            return bad(ps, NO_AT, "tensor " NAME ": its %llu bytes at data offset %llu (file byte %llu) run past "
                       "the end of the file (%llu bytes)", t->name, (unsigned long long)t->size,
                       (unsigned long long)t->offset, (unsigned long long)g->data_offset + t->offset,
                       (unsigned long long)ps->size);
        t->offset = abs;
    }
    /* Overlaps, in offset order (the name index is reused as scratch, then re-sorted). */
    qsort(g->by_name, (size_t)g->tensor_count, sizeof *g->by_name, cmp_offset);
    for (uint64_t i = 1; i < g->tensor_count; i++) {
        const nu_gguf_tensor_info *x = g->by_name[i - 1], *y = g->by_name[i];
        if (y->offset < x->offset + x->size)
            return bad(ps, NO_AT, "tensors " NAME " and " NAME " overlap (file bytes %llu..%llu and %llu..%llu)",
                       x->name, y->name, (unsigned long long)x->offset, (unsigned long long)(x->offset + x->size),
                       (unsigned long long)y->offset, (unsigned long long)(y->offset + y->size));
    }
    qsort(g->by_name, (size_t)g->tensor_count, sizeof *g->by_name, cmp_name);
    return NU_OK;
}

/* Header, metadata, tensor infos: one pass (the first counts, the second fills). */
static nu_status parse_pass(parser *ps, uint64_t *infos_end)
{
    nu_gguf *g = ps->g;
    ps->at = 0;
    ps->where[0] = 0;
    uint64_t magic, version = 0, tensors = 0, kvs = 0;
    if (ps->size < 4)
        return bad(ps, 0, "the file is %llu bytes, shorter than the magic", (unsigned long long)ps->size);
    magic = le(ps->p, 4);
    ps->at = 4;
    if (magic != MAGIC)
        return bad(ps, 0, "not a GGUF file (the magic is %02x %02x %02x %02x, not \"GGUF\")", ps->p[0], ps->p[1],
                   ps->p[2], ps->p[3]);
    nu_status st = read_uint(ps, 4, "version", &version);
    if (st != NU_OK)
        return st;
    if (version == 1)
        return bad(ps, 4, "GGUF version 1 is not supported (an early format with 32-bit counts; convert the "
                   "model again with a current llama.cpp)");
    if (version != 2 && version != 3) {
        if ((version & 0xFFFF) == 0 && (version >> 24) >= 1 && (version >> 24) <= 3)
            return bad(ps, 4, "version %llu: a big-endian GGUF file (version %llu), which this reader does not "
                       "read", (unsigned long long)version, (unsigned long long)(version >> 24));
        return bad(ps, 4, "GGUF version %llu is not supported (this reader reads versions 2 and 3)",
                   (unsigned long long)version);
    }
    g->version = (uint32_t)version;
    if ((st = read_uint(ps, 8, "tensor count", &tensors)) != NU_OK ||
        (st = read_uint(ps, 8, "metadata count", &kvs)) != NU_OK)
        return st;
    /* Each tensor info takes at least 24 bytes (name length, rank, type, offset), each entry
     * 13 (key length, type, a 1-byte value). */
    if (tensors > left(ps) / 24)
        return bad(ps, 8, "tensor count %llu is more than the %llu bytes left could hold", (unsigned long long)tensors,
                   (unsigned long long)left(ps));
    if (kvs > left(ps) / 13)
        return bad(ps, 16, "metadata count %llu is more than the %llu bytes left could hold", (unsigned long long)kvs,
                   (unsigned long long)left(ps));
    g->tensor_count = tensors;
    g->kv_count = kvs;
    g->alignment = DEFAULT_ALIGNMENT;
    if ((st = read_metadata(ps, kvs)) != NU_OK || (st = read_tensor_infos(ps, tensors)) != NU_OK)
        return st;
    *infos_end = ps->at;
    return NU_OK;
}

/* Parses `size` bytes into `g` (zeroed, with device set). On failure g owns nothing. */
static nu_status parse(const uint8_t *bytes, uint64_t size, const char *label, nu_gguf *g)
{
    parser ps = {.p = bytes, .size = size, .d = g->device, .label = label, .g = g};
    uint64_t infos_end = 0;
    nu_status st = parse_pass(&ps, &infos_end);
    if (st != NU_OK)
        return st;
    /* One block: entries, key index, tensors, name index, element positions, arrays, chars. */
    uint64_t parts[7] = {g->kv_count * sizeof(gguf_kv), g->kv_count * sizeof(gguf_kv *),
                         g->tensor_count * sizeof(nu_gguf_tensor_info),
                         g->tensor_count * sizeof(nu_gguf_tensor_info *), 0, 0, ps.n_chars};
    if (__builtin_mul_overflow(ps.n_ptrs, (uint64_t)sizeof(uint8_t *), &parts[4]) ||
        __builtin_mul_overflow(ps.n_arrays, (uint64_t)sizeof(gguf_array), &parts[5]))
        return nu__fail(g->device, NU_ERROR_HOST_OUT_OF_MEMORY, "%s: the metadata's index is too large", label);
    uint64_t total = 0, at[7];
    for (int i = 0; i < 7; i++) {
        at[i] = total;
        /* Counts are bounded by the file's size (see above), so the parts are far below 2^64,
         * but their sum is still checked, and rounded to 8 for the next part's alignment. */
        if (__builtin_add_overflow(total, (parts[i] + 7) & ~7ull, &total))
            return nu__fail(g->device, NU_ERROR_HOST_OUT_OF_MEMORY, "%s: the metadata's index is too large", label);
    }
    if (total > SIZE_MAX)
        return nu__fail(g->device, NU_ERROR_HOST_OUT_OF_MEMORY, "%s: the metadata's index is too large", label);
    char *block = nu__calloc(1, total ? (size_t)total : 1);
    if (!block)
        return nu__fail(g->device, NU_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory for %llu bytes of index",
                        label, (unsigned long long)total);
    g->block = block;
    g->kvs = (gguf_kv *)(block + at[0]);
    g->by_key = (const gguf_kv **)(block + at[1]);
    g->tensors = (nu_gguf_tensor_info *)(block + at[2]);
    g->by_name = (const nu_gguf_tensor_info **)(block + at[3]);
    ps.ptrs = (const uint8_t **)(block + at[4]);
    ps.arrays = (gguf_array *)(block + at[5]);
    ps.chars = block + at[6];
    ps.fill = true;
    st = parse_pass(&ps, &infos_end);
    if (st == NU_OK)
        st = check_tensors(&ps, infos_end);
    if (st != NU_OK) {
        nu__free(block);
        g->block = NULL;
    }
    return st;
}

nu_status nu_gguf_parse(const void *bytes, size_t size, nu_gguf **out)
{
    if (!out)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_gguf_parse: out is NULL");
    *out = NULL;
    if (!bytes && size)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_gguf_parse: bytes is NULL");
    nu_gguf *g = nu__calloc(1, sizeof *g);
    if (!g)
        return nu__fail(NULL, NU_ERROR_HOST_OUT_OF_MEMORY, "gguf: out of host memory");
    nu_status st = parse(bytes, size, "gguf", g);
    if (st != NU_OK) {
        nu__free(g);
        return st;
    }
    *out = g;
    return NU_OK;
}

nu_status nu_gguf_open(nu_device *device, const char *path, nu_gguf **out)
{
    if (!out)
        return nu__fail(device, NU_ERROR_INVALID_ARGUMENT, "nu_gguf_open: NULL out");
    *out = NULL;
    if (!device || !path)
        return nu__fail(device, NU_ERROR_INVALID_ARGUMENT, "nu_gguf_open: NULL %s", device ? "path" : "device");
    nu_buffer *b;
    nu_status st = nu_buffer_map_file(device, path, &b);
    if (st != NU_OK)
        return st;
    const void *bytes = NULL;
    nu_gguf *g = NULL;
    st = nu_buffer_contents(b, &bytes);
    if (st == NU_OK && !(g = nu__calloc(1, sizeof *g)))
        st = nu__fail(device, NU_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", path);
    if (st == NU_OK) {
        g->device = device;
        st = parse(bytes, nu_buffer_size(b), path, g);
    }
    if (st != NU_OK) {
        nu__free(g);
        nu_buffer_free(b);
        return st;
    }
    g->file = b;
    *out = g;
    return NU_OK;
}

nu_status nu_gguf_close(nu_gguf *file)
{
    if (!file)
        return NU_OK;
    nu_status st = file->file ? nu_buffer_free(file->file) : NU_OK;
    nu__free(file->block);
    nu__free(file);
    return st;
}

uint32_t nu_gguf_version(const nu_gguf *file) { return file ? file->version : 0; }
uint32_t nu_gguf_alignment(const nu_gguf *file) { return file ? file->alignment : 0; }
uint64_t nu_gguf_data_offset(const nu_gguf *file) { return file ? file->data_offset : 0; }
uint64_t nu_gguf_kv_count(const nu_gguf *file) { return file ? file->kv_count : 0; }
uint64_t nu_gguf_tensor_count(const nu_gguf *file) { return file ? file->tensor_count : 0; }
nu_buffer *nu_gguf_buffer(const nu_gguf *file) { return file ? file->file : NULL; }

const nu_gguf_tensor_info *nu_gguf_tensor(const nu_gguf *file, uint64_t index)
{
    return file && index < file->tensor_count ? &file->tensors[index] : NULL;
}

static int find_name(const void *key, const void *elem)
{
    return strcmp(key, (*(const nu_gguf_tensor_info *const *)elem)->name);
}

const nu_gguf_tensor_info *nu_gguf_find_tensor(const nu_gguf *file, const char *name)
{
    if (!file || !name || !file->tensor_count)
        return NULL;
    const nu_gguf_tensor_info **t =
        bsearch(name, file->by_name, (size_t)file->tensor_count, sizeof *file->by_name, find_name);
    return t ? *t : NULL;
}

/* ---- metadata lookups ------------------------------------------------------------------- */

static int find_key(const void *key, const void *elem) { return strcmp(key, (*(const gguf_kv *const *)elem)->key); }

static const gguf_kv *lookup(const nu_gguf *file, const char *key)
{
    if (!file || !key || !file->kv_count)
        return NULL;
    const gguf_kv **kv = bsearch(key, file->by_key, (size_t)file->kv_count, sizeof *file->by_key, find_key);
    return kv ? *kv : NULL;
}

bool nu_gguf_has(const nu_gguf *file, const char *key) { return lookup(file, key) != NULL; }

nu_status nu_gguf_kv(const nu_gguf *file, uint64_t index, const char **key, nu_gguf_value *out)
{
    if (key)
        *key = NULL;
    if (out)
        memset(out, 0, sizeof *out);
    if (!file || !out)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_gguf_kv: NULL %s", file ? "out" : "file");
    if (index >= file->kv_count)
        return nu__fail(file->device, NU_ERROR_OUT_OF_RANGE, "nu_gguf_kv: entry %llu of %llu",
                        (unsigned long long)index, (unsigned long long)file->kv_count);
    if (key)
        *key = file->kvs[index].key;
    *out = file->kvs[index].value;
    return NU_OK;
}

nu_status nu_gguf_find(const nu_gguf *file, const char *key, nu_gguf_value *out)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!file || !key || !out)
        return nu__fail(file ? file->device : NULL, NU_ERROR_INVALID_ARGUMENT, "nu_gguf_find: NULL %s",
                        !file ? "file" : !key ? "key" : "out");
    const gguf_kv *kv = lookup(file, key);
    if (!kv)
        return nu__fail(file->device, NU_ERROR_FORMAT, "gguf: no metadata key " NAME, key);
    *out = kv->value;
    return NU_OK;
}

/* The value of `key` for a typed getter: *found false for a missing key with a fallback. */
static nu_status typed(const nu_gguf *file, const char *key, bool has_fallback, const char *fn, nu_gguf_value *v,
                       bool *found)
{
    *found = false;
    memset(v, 0, sizeof *v);
    if (!file || !key)
        return nu__fail(file ? file->device : NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL %s", fn,
                        file ? "key" : "file");
    const gguf_kv *kv = lookup(file, key);
    if (!kv)
        return has_fallback ? NU_OK
                            : nu__fail(file->device, NU_ERROR_FORMAT, "gguf: no metadata key " NAME " (required)", key);
    *v = kv->value;
    *found = true;
    return NU_OK;
}

static nu_status wrong_type(const nu_gguf *file, const char *key, const nu_gguf_value *v, const char *want)
{
    return nu__fail(file->device, NU_ERROR_FORMAT, "gguf: metadata key " NAME " is %s, not %s", key,
                    nu_gguf_type_name(v->type), want);
}

/* An integer value as a sign and magnitude; false for the other types. */
static bool integer_of(const nu_gguf_value *v, bool *negative, uint64_t *mag)
{
    int64_t s;
    switch (v->type) {
    case NU_GGUF_UINT8: *negative = false, *mag = v->scalar.u8; return true;
    case NU_GGUF_UINT16: *negative = false, *mag = v->scalar.u16; return true;
    case NU_GGUF_UINT32: *negative = false, *mag = v->scalar.u32; return true;
    case NU_GGUF_UINT64: *negative = false, *mag = v->scalar.u64; return true;
    case NU_GGUF_INT8: s = v->scalar.i8; break;
    case NU_GGUF_INT16: s = v->scalar.i16; break;
    case NU_GGUF_INT32: s = v->scalar.i32; break;
    case NU_GGUF_INT64: s = v->scalar.i64; break;
    default: return false;
    }
    *negative = s < 0;
    *mag = s < 0 ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;
    return true;
}

static nu_status get_unsigned(const nu_gguf *file, const char *key, uint64_t max, const char *want, const char *fn,
                              bool has_fallback, uint64_t *out, bool *found)
{
    nu_gguf_value v;
    nu_status st = typed(file, key, has_fallback, fn, &v, found);
    if (st != NU_OK || !*found)
        return st;
    bool negative;
    uint64_t mag;
    if (!integer_of(&v, &negative, &mag))
        return wrong_type(file, key, &v, want);
    if (negative || mag > max)
        return nu__fail(file->device, NU_ERROR_FORMAT, "gguf: metadata key " NAME " is %s %s%llu, outside %s's range",
                        key, nu_gguf_type_name(v.type), negative ? "-" : "", (unsigned long long)mag, want);
    *out = mag;
    return NU_OK;
}

nu_status nu_gguf_get_u32(const nu_gguf *file, const char *key, const uint32_t *fallback, uint32_t *out)
{
    if (!out)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_gguf_get_u32: NULL out");
    const uint32_t fb = fallback ? *fallback : 0; /* read before *out is cleared: fallback may be out */
    *out = 0;
    uint64_t v = 0;
    bool found;
    nu_status st = get_unsigned(file, key, UINT32_MAX, "UINT32", "nu_gguf_get_u32", fallback != NULL, &v, &found);
    if (st == NU_OK)
        *out = found ? (uint32_t)v : fb;
    return st;
}

nu_status nu_gguf_get_u64(const nu_gguf *file, const char *key, const uint64_t *fallback, uint64_t *out)
{
    if (!out)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_gguf_get_u64: NULL out");
    const uint64_t fb = fallback ? *fallback : 0; /* read before *out is cleared: fallback may be out */
    *out = 0;
    uint64_t v = 0;
    bool found;
    nu_status st = get_unsigned(file, key, UINT64_MAX, "UINT64", "nu_gguf_get_u64", fallback != NULL, &v, &found);
    if (st == NU_OK)
        *out = found ? v : fb;
    return st;
}

nu_status nu_gguf_get_f32(const nu_gguf *file, const char *key, const float *fallback, float *out)
{
    if (!out)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_gguf_get_f32: NULL out");
    const float fb = fallback ? *fallback : 0; /* read before *out is cleared: fallback may be out */
    *out = 0;
    nu_gguf_value v;
    bool found;
    nu_status st = typed(file, key, fallback != NULL, "nu_gguf_get_f32", &v, &found);
    if (st != NU_OK)
        return st;
    if (!found)
        *out = fb;
    else if (v.type == NU_GGUF_FLOAT32)
        *out = v.scalar.f32;
    else if (v.type == NU_GGUF_FLOAT64)
        *out = (float)v.scalar.f64;
    else
        return wrong_type(file, key, &v, "FLOAT32");
    return NU_OK;
}

nu_status nu_gguf_get_bool(const nu_gguf *file, const char *key, const bool *fallback, bool *out)
{
    if (!out)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_gguf_get_bool: NULL out");
    const bool fb = fallback ? *fallback : false; /* read before *out is cleared: fallback may be out */
    *out = false;
    nu_gguf_value v;
    bool found;
    nu_status st = typed(file, key, fallback != NULL, "nu_gguf_get_bool", &v, &found);
    if (st != NU_OK)
        return st;
    if (found && v.type != NU_GGUF_BOOL)
        return wrong_type(file, key, &v, "BOOL");
    *out = found ? v.scalar.b : fb;
    return NU_OK;
}

nu_status nu_gguf_get_string(const nu_gguf *file, const char *key, const char *fallback, const char **out,
                             uint64_t *length)
{
    if (out)
        *out = NULL;
    if (length)
        *length = 0;
    if (!out || !length)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_gguf_get_string: NULL %s", out ? "length" : "out");
    nu_gguf_value v;
    bool found;
    nu_status st = typed(file, key, fallback != NULL, "nu_gguf_get_string", &v, &found);
    if (st != NU_OK)
        return st;
    if (!found) {
        *out = fallback;
        *length = strlen(fallback);
        return NU_OK;
    }
    if (v.type != NU_GGUF_STRING)
        return wrong_type(file, key, &v, "STRING");
    *out = v.string;
    *length = v.length;
    return NU_OK;
}

/* ---- arrays ----------------------------------------------------------------------------- */

static nu_device *value_device(const nu_gguf_value *v)
{
    return v && v->nu__file ? ((const nu_gguf *)v->nu__file)->device : NULL;
}

/* Checks `array` and `index` for the array accessors. */
static nu_status check_element(const nu_gguf_value *array, uint64_t index, const char *fn)
{
    if (!array)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL array", fn);
    if (array->type != NU_GGUF_ARRAY)
        return nu__fail(value_device(array), NU_ERROR_INVALID_ARGUMENT, "%s: the value is %s, not an ARRAY", fn,
                        nu_gguf_type_name(array->type));
    if (index >= array->length)
        return nu__fail(value_device(array), NU_ERROR_OUT_OF_RANGE, "%s: element %llu of an array of %llu", fn,
                        (unsigned long long)index, (unsigned long long)array->length);
    return NU_OK;
}

nu_status nu_gguf_array_get(const nu_gguf_value *array_in, uint64_t index, nu_gguf_value *out)
{
    if (!out)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_gguf_array_get: NULL out");
    /* `out` may be `array_in` (walking into nested arrays): read it before clearing. */
    nu_gguf_value copy = array_in ? *array_in : (nu_gguf_value){0};
    const nu_gguf_value *array = array_in ? &copy : NULL;
    memset(out, 0, sizeof *out);
    nu_status st = check_element(array, index, "nu_gguf_array_get");
    if (st != NU_OK)
        return st;
    uint32_t t = array->element_type;
    out->type = (nu_gguf_type)t;
    out->nu__file = array->nu__file;
    if (t == NU_GGUF_STRING) {
        const uint8_t *at = ((const uint8_t *const *)array->nu__index)[index];
        out->length = le(at, 8);
        out->string = (const char *)at + 8;
    } else if (t == NU_GGUF_ARRAY) {
        const gguf_array *a = &((const gguf_array *)array->nu__index)[index];
        out->element_type = (nu_gguf_type)a->type;
        out->length = a->count;
        out->data = scalar_size(a->type) ? a->data : NULL;
        out->nu__index = a->index;
    } else {
        scalar_from(out, t, (const uint8_t *)array->data + index * scalar_size(t));
    }
    return NU_OK;
}

nu_status nu_gguf_array_string(const nu_gguf_value *array, uint64_t index, const char **out, uint64_t *length)
{
    if (out)
        *out = NULL;
    if (length)
        *length = 0;
    if (!out || !length)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_gguf_array_string: NULL %s", out ? "length" : "out");
    nu_status st = check_element(array, index, "nu_gguf_array_string");
    if (st != NU_OK)
        return st;
    if (array->element_type != NU_GGUF_STRING)
        return nu__fail(value_device(array), NU_ERROR_FORMAT, "nu_gguf_array_string: an array of %s, not of STRING",
                        nu_gguf_type_name(array->element_type));
    const uint8_t *at = ((const uint8_t *const *)array->nu__index)[index];
    *length = le(at, 8);
    *out = (const char *)at + 8;
    return NU_OK;
}

/* ---- tensor views and moves ------------------------------------------------------------- */

static nu_status view(const nu_gguf *file, const char *name, nu_buffer *buffer, uint64_t offset, bool in_file,
                      const char *fn, nu_tensor *out)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!file || !name || !out)
        return nu__fail(file ? file->device : NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL %s", fn,
                        !file ? "file" : !name ? "name" : "out");
    const nu_gguf_tensor_info *t = nu_gguf_find_tensor(file, name);
    if (!t)
        return nu__fail(file->device, NU_ERROR_INVALID_ARGUMENT, "%s: no tensor named " NAME, fn, name);
    if (t->dtype == NU_DTYPE_COUNT)
        return nu__fail(file->device, NU_ERROR_UNSUPPORTED,
                        "%s: tensor " NAME " is %s (ggml type %u); nuvec reads f32, f16, bf16, q8_0 and q4_0", fn, name,
                        t->type_name, t->ggml_type);
    if (in_file && !file->file)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: the file was parsed from memory, not opened on a device",
                        fn);
    int64_t shape[NU_GGUF_MAX_RANK];
    uint32_t rank = t->rank ? t->rank : 1;
    for (uint32_t k = 0; k < rank; k++)
        shape[k] = (int64_t)t->shape[k]; /* below 2^63: checked when parsed */
    *out = nu_tensor_make(in_file ? file->file : buffer, in_file ? t->offset : offset, t->dtype, rank, shape);
    return NU_OK;
}

nu_status nu_gguf_tensor_view(const nu_gguf *file, const char *name, nu_tensor *out)
{
    return view(file, name, NULL, 0, true, "nu_gguf_tensor_view", out);
}

nu_status nu_gguf_tensor_view_in(const nu_gguf *file, const char *name, nu_buffer *buffer, uint64_t offset,
                                 nu_tensor *out)
{
    return view(file, name, buffer, offset, false, "nu_gguf_tensor_view_in", out);
}

/* nu__file_tensor_fn for nu__file_tensors_to_device. */
static bool file_tensor(const void *f, const char *const *names, size_t i, uint64_t *offset, uint64_t *size)
{
    const nu_gguf *file = f;
    const nu_gguf_tensor_info *t = names ? (names[i] ? nu_gguf_find_tensor(file, names[i]) : NULL) : &file->tensors[i];
    if (!t)
        return false;
    *offset = t->offset;
    *size = t->size;
    return true;
}

nu_status nu_gguf_to_device(nu_gguf *file, const char *const *names, size_t count, const nu_move_options *options,
                            nu_buffer **out, uint64_t *offsets)
{
    static const char fn[] = "nu_gguf_to_device";
    if (!out)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL out", fn);
    *out = NULL;
    if (!file)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL file", fn);
    nu_device *d = file->device;
    if (!file->file)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: the file was parsed from memory, not opened on a device",
                        fn);
    size_t n = names ? count : (size_t)file->tensor_count;
    return nu__file_tensors_to_device(d, fn, file->file, file, file_tensor, names, n, options, out, offsets);
}
