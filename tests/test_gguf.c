/* test_gguf.c: the GGUF reader (and the writer in tools/): every metadata type of a small file
 * built byte by byte, each truncation and many mutations of it, one file per class of malformed
 * input with its status and message, the typed getters' conversions and refusals, host
 * allocation failures; the real models under shared/models (metadata, shapes, F32 values equal to
 * the Hugging Face safetensors, Q8_0/Q4_0 blocks close to the F32 weights); files of random
 * weights from `nuvec make-gguf` read back; and on a device: views of the mapped file used by an
 * op, and tensors moved to device memory. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/host.h"
#include "gguf_write.h"
#include "make_gguf.h"
#include "tool_error.h"

static char *tmp_path(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", nt_tmp_dir(), name);
    return path;
}

/* ---- building files byte by byte ---- */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void b_bytes(buf *b, const void *p, size_t n)
{
    if (b->cap - b->n < n) {
        b->cap = (b->cap + n) * 2;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void b_le(buf *b, uint64_t v, unsigned n)
{
    uint8_t c[8];
    for (unsigned i = 0; i < n; i++)
        c[i] = (uint8_t)(v >> (8 * i));
    b_bytes(b, c, n);
}

static void b_u32(buf *b, uint64_t v) { b_le(b, v, 4); }
static void b_u64(buf *b, uint64_t v) { b_le(b, v, 8); }
static void b_str(buf *b, const char *s)
{
    b_u64(b, strlen(s));
    b_bytes(b, s, strlen(s));
}

static void b_header(buf *b, uint32_t version, uint64_t tensors, uint64_t kvs)
{
    b_bytes(b, "GGUF", 4);
    b_u32(b, version);
    b_u64(b, tensors);
    b_u64(b, kvs);
}

static void b_kv_u32(buf *b, const char *key, uint32_t v)
{
    b_str(b, key);
    b_u32(b, NU_GGUF_UINT32);
    b_u32(b, v);
}

/* A tensor info: ne in GGUF's order (innermost first). */
static void b_tensor(buf *b, const char *name, uint32_t rank, const uint64_t *ne, uint32_t type, uint64_t offset)
{
    b_str(b, name);
    b_u32(b, rank);
    for (uint32_t k = 0; k < rank; k++)
        b_u64(b, ne[k]);
    b_u32(b, type);
    b_u64(b, offset);
}

static void b_pad(buf *b, size_t align)
{
    while (b->n % align)
        b_le(b, 0, 1);
}

/* Data bytes: i & 255 from `from` on, `n` of them. */
static void b_data(buf *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        b_le(b, (uint8_t)(i * 7 + 3), 1);
}

/* The small valid file: every metadata type (13 scalar and string entries, arrays of scalars, of
 * strings, of arrays of ints and of arrays of strings), alignment 64, and three tensors (f32 [2,
 * 4], q8_0 [2, 32], q8_1 [32]: a type nuvec does not read) whose last byte is the file's last. */
#define SMALL_KVS 18
static buf small_file(void)
{
    buf b = {0};
    b_header(&b, 3, 3, SMALL_KVS);
    b_str(&b, "k.u8"), b_u32(&b, NU_GGUF_UINT8), b_le(&b, 200, 1);
    b_str(&b, "k.i8"), b_u32(&b, NU_GGUF_INT8), b_le(&b, (uint8_t)-5, 1);
    b_str(&b, "k.u16"), b_u32(&b, NU_GGUF_UINT16), b_le(&b, 65000, 2);
    b_str(&b, "k.i16"), b_u32(&b, NU_GGUF_INT16), b_le(&b, (uint16_t)-300, 2);
    b_kv_u32(&b, "k.u32", 4000000000u);
    b_str(&b, "k.i32"), b_u32(&b, NU_GGUF_INT32), b_le(&b, (uint32_t)-70000, 4);
    float f = 0.25f;
    uint32_t fb;
    memcpy(&fb, &f, 4);
    b_str(&b, "k.f32"), b_u32(&b, NU_GGUF_FLOAT32), b_u32(&b, fb);
    b_str(&b, "k.bool"), b_u32(&b, NU_GGUF_BOOL), b_le(&b, 1, 1);
    b_str(&b, "k.string"), b_u32(&b, NU_GGUF_STRING), b_str(&b, "h\xc3\xa9llo");
    b_str(&b, "k.u64"), b_u32(&b, NU_GGUF_UINT64), b_u64(&b, 1ull << 40);
    b_str(&b, "k.i64"), b_u32(&b, NU_GGUF_INT64), b_u64(&b, (uint64_t)-3);
    double d = -1.5;
    uint64_t db;
    memcpy(&db, &d, 8);
    b_str(&b, "k.f64"), b_u32(&b, NU_GGUF_FLOAT64), b_u64(&b, db);
    b_str(&b, "k.array.u32"), b_u32(&b, NU_GGUF_ARRAY), b_u32(&b, NU_GGUF_UINT32), b_u64(&b, 3);
    b_u32(&b, 7), b_u32(&b, 8), b_u32(&b, 9);
    b_str(&b, "k.array.string"), b_u32(&b, NU_GGUF_ARRAY), b_u32(&b, NU_GGUF_STRING), b_u64(&b, 3);
    b_str(&b, "a"), b_str(&b, "bc"), b_str(&b, "");
    b_str(&b, "k.array.array"), b_u32(&b, NU_GGUF_ARRAY), b_u32(&b, NU_GGUF_ARRAY), b_u64(&b, 2);
    b_u32(&b, NU_GGUF_INT16), b_u64(&b, 2), b_le(&b, 1, 2), b_le(&b, (uint16_t)-2, 2);
    b_u32(&b, NU_GGUF_INT16), b_u64(&b, 1), b_le(&b, 3, 2);
    b_str(&b, "k.array.array.string"), b_u32(&b, NU_GGUF_ARRAY), b_u32(&b, NU_GGUF_ARRAY), b_u64(&b, 2);
    b_u32(&b, NU_GGUF_STRING), b_u64(&b, 1), b_str(&b, "x");
    b_u32(&b, NU_GGUF_STRING), b_u64(&b, 2), b_str(&b, "y"), b_str(&b, "zz");
    b_str(&b, "k.array.bool"), b_u32(&b, NU_GGUF_ARRAY), b_u32(&b, NU_GGUF_BOOL), b_u64(&b, 2);
    b_le(&b, 0, 1), b_le(&b, 1, 1);
    b_kv_u32(&b, "general.alignment", 64);
    b_tensor(&b, "w", 2, (uint64_t[]){4, 2}, 0, 0);
    b_tensor(&b, "q", 2, (uint64_t[]){32, 2}, 8, 64);
    b_tensor(&b, "r", 1, (uint64_t[]){32}, 9, 192);
    b_pad(&b, 64);
    b_data(&b, 228);
    return b;
}

/* Parses, expecting NU_ERROR_FORMAT with a message that contains `needle`. */
static void expect_bad_bytes(const uint8_t *bytes, size_t size, const char *needle)
{
    nu_gguf *g = (nu_gguf *)1;
    NT_STATUS(NU_ERROR_FORMAT, nu_gguf_parse(bytes, size, &g));
    assert_null(g);
    const char *msg = nu_error_message(NULL);
    if (!strstr(msg, needle))
        fail_msg("message \"%s\" does not mention \"%s\"", msg, needle);
}

static void expect_bad(buf *b, const char *needle)
{
    expect_bad_bytes(b->p, b->n, needle);
    free(b->p);
    *b = (buf){0};
}

static nu_gguf *parse_ok(const buf *b)
{
    nu_gguf *g = NULL;
    NT_OK(nu_gguf_parse(b->p, b->n, &g));
    return g;
}

static void assert_bytes(const char *s, uint64_t len, const char *want)
{
    assert_int_equal(len, strlen(want));
    assert_memory_equal(s, want, len);
}

/* ---- the small file ---- */

static void every_metadata_type(void **state)
{
    buf b = small_file();
    nu_gguf *g = parse_ok(&b);
    assert_int_equal(nu_gguf_version(g), 3);
    assert_int_equal(nu_gguf_alignment(g), 64);
    assert_int_equal(nu_gguf_kv_count(g), SMALL_KVS);
    assert_int_equal(nu_gguf_data_offset(g) % 64, 0);
    assert_int_equal(nu_gguf_data_offset(g) + 228, b.n);
    nu_gguf_value v;
    NT_OK(nu_gguf_find(g, "k.u8", &v));
    assert_int_equal(v.type, NU_GGUF_UINT8);
    assert_int_equal(v.scalar.u8, 200);
    NT_OK(nu_gguf_find(g, "k.i8", &v));
    assert_int_equal(v.scalar.i8, -5);
    NT_OK(nu_gguf_find(g, "k.u16", &v));
    assert_int_equal(v.scalar.u16, 65000);
    NT_OK(nu_gguf_find(g, "k.i16", &v));
    assert_int_equal(v.scalar.i16, -300);
    NT_OK(nu_gguf_find(g, "k.u32", &v));
    assert_int_equal(v.scalar.u32, 4000000000u);
    NT_OK(nu_gguf_find(g, "k.i32", &v));
    assert_int_equal(v.scalar.i32, -70000);
    NT_OK(nu_gguf_find(g, "k.f32", &v));
    assert_true(v.scalar.f32 == 0.25f);
    NT_OK(nu_gguf_find(g, "k.bool", &v));
    assert_int_equal(v.type, NU_GGUF_BOOL);
    assert_true(v.scalar.b);
    NT_OK(nu_gguf_find(g, "k.string", &v));
    assert_int_equal(v.type, NU_GGUF_STRING);
    assert_bytes(v.string, v.length, "h\xc3\xa9llo");
    NT_OK(nu_gguf_find(g, "k.u64", &v));
    assert_true(v.scalar.u64 == 1ull << 40);
    NT_OK(nu_gguf_find(g, "k.i64", &v));
    assert_true(v.scalar.i64 == -3);
    NT_OK(nu_gguf_find(g, "k.f64", &v));
    assert_true(v.scalar.f64 == -1.5);

    /* Arrays: scalars (packed data and elements), strings, arrays of arrays, bools. */
    NT_OK(nu_gguf_find(g, "k.array.u32", &v));
    assert_int_equal(v.type, NU_GGUF_ARRAY);
    assert_int_equal(v.element_type, NU_GGUF_UINT32);
    assert_int_equal(v.length, 3);
    assert_memory_equal(v.data, "\x07\0\0\0\x08\0\0\0\x09\0\0\0", 12);
    nu_gguf_value e;
    NT_OK(nu_gguf_array_get(&v, 2, &e));
    assert_int_equal(e.type, NU_GGUF_UINT32);
    assert_int_equal(e.scalar.u32, 9);
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_gguf_array_get(&v, 3, &e));
    const char *s;
    uint64_t len;
    NT_STATUS(NU_ERROR_FORMAT, nu_gguf_array_string(&v, 0, &s, &len));
    assert_non_null(strstr(nu_error_message(NULL), "UINT32"));
    assert_null(s);

    NT_OK(nu_gguf_find(g, "k.array.string", &v));
    assert_int_equal(v.element_type, NU_GGUF_STRING);
    assert_null(v.data);
    static const char *const want[] = {"a", "bc", ""};
    for (uint64_t i = 0; i < 3; i++) {
        NT_OK(nu_gguf_array_string(&v, i, &s, &len));
        assert_bytes(s, len, want[i]);
        NT_OK(nu_gguf_array_get(&v, i, &e));
        assert_int_equal(e.type, NU_GGUF_STRING);
        assert_bytes(e.string, e.length, want[i]);
    }
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_gguf_array_string(&v, 3, &s, &len));

    NT_OK(nu_gguf_find(g, "k.array.array", &v));
    assert_int_equal(v.element_type, NU_GGUF_ARRAY);
    assert_int_equal(v.length, 2);
    nu_gguf_value inner;
    NT_OK(nu_gguf_array_get(&v, 0, &inner));
    assert_int_equal(inner.type, NU_GGUF_ARRAY);
    assert_int_equal(inner.element_type, NU_GGUF_INT16);
    assert_int_equal(inner.length, 2);
    NT_OK(nu_gguf_array_get(&inner, 1, &e));
    assert_int_equal(e.scalar.i16, -2);
    NT_OK(nu_gguf_array_get(&v, 1, &inner));
    assert_int_equal(inner.length, 1);
    NT_OK(nu_gguf_array_get(&inner, 0, &e));
    assert_int_equal(e.scalar.i16, 3);

    NT_OK(nu_gguf_find(g, "k.array.array.string", &v));
    NT_OK(nu_gguf_array_get(&v, 1, &inner));
    NT_OK(nu_gguf_array_string(&inner, 1, &s, &len));
    assert_bytes(s, len, "zz");
    NT_OK(nu_gguf_array_get(&v, 0, &inner));
    NT_OK(nu_gguf_array_string(&inner, 0, &s, &len));
    assert_bytes(s, len, "x");

    NT_OK(nu_gguf_find(g, "k.array.bool", &v));
    NT_OK(nu_gguf_array_get(&v, 1, &e));
    assert_int_equal(e.type, NU_GGUF_BOOL);
    assert_true(e.scalar.b);

    /* Not arrays. */
    NT_OK(nu_gguf_find(g, "k.u8", &v));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_gguf_array_get(&v, 0, &e));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_gguf_array_string(&v, 0, &s, &len));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_gguf_array_get(NULL, 0, &e));

    /* Iteration in file order. */
    const char *key;
    NT_OK(nu_gguf_kv(g, 0, &key, &v));
    assert_string_equal(key, "k.u8");
    NT_OK(nu_gguf_kv(g, SMALL_KVS - 1, &key, &v));
    assert_string_equal(key, "general.alignment");
    assert_int_equal(v.scalar.u32, 64);
    NT_STATUS(NU_ERROR_OUT_OF_RANGE, nu_gguf_kv(g, SMALL_KVS, &key, &v));
    assert_null(key);
    assert_string_equal(nu_gguf_type_name(NU_GGUF_FLOAT64), "FLOAT64");
    assert_string_equal(nu_gguf_type_name(NU_GGUF_TYPE_COUNT), "?");

    /* Missing keys. */
    assert_true(nu_gguf_has(g, "k.u8"));
    assert_false(nu_gguf_has(g, "k.u9"));
    assert_false(nu_gguf_has(NULL, "k.u8"));
    assert_false(nu_gguf_has(g, NULL));
    NT_STATUS(NU_ERROR_FORMAT, nu_gguf_find(g, "k.u9", &v));
    assert_non_null(strstr(nu_error_message(NULL), "'k.u9'"));
    assert_int_equal(v.type, 0);
    nu_gguf_close(g);
    free(b.p);
}

static void typed_getters(void **state)
{
    buf b = small_file();
    nu_gguf *g = parse_ok(&b);
    uint32_t u32;
    uint64_t u64;
    float f;
    bool t;
    const char *s;
    uint64_t len;
    /* Integers convert when they fit. */
    NT_OK(nu_gguf_get_u32(g, "k.u8", NULL, &u32));
    assert_int_equal(u32, 200);
    NT_OK(nu_gguf_get_u32(g, "k.u16", NULL, &u32));
    assert_int_equal(u32, 65000);
    NT_OK(nu_gguf_get_u32(g, "k.u32", NULL, &u32));
    assert_int_equal(u32, 4000000000u);
    NT_OK(nu_gguf_get_u64(g, "k.u64", NULL, &u64));
    assert_true(u64 == 1ull << 40);
    NT_OK(nu_gguf_get_u64(g, "k.u32", NULL, &u64));
    assert_true(u64 == 4000000000u);
    /* Refusals name the key and both types (or the value). */
    u32 = 5;
    NT_STATUS(NU_ERROR_FORMAT, nu_gguf_get_u32(g, "k.u64", NULL, &u32));
    assert_int_equal(u32, 0);
    assert_non_null(strstr(nu_error_message(NULL), "'k.u64' is UINT64 1099511627776, outside UINT32"));
    NT_STATUS(NU_ERROR_FORMAT, nu_gguf_get_u32(g, "k.i8", NULL, &u32));
    assert_non_null(strstr(nu_error_message(NULL), "INT8 -5"));
    NT_STATUS(NU_ERROR_FORMAT, nu_gguf_get_u64(g, "k.i64", NULL, &u64));
    NT_STATUS(NU_ERROR_FORMAT, nu_gguf_get_u32(g, "k.string", NULL, &u32));
    assert_non_null(strstr(nu_error_message(NULL), "'k.string' is STRING, not UINT32"));
    NT_STATUS(NU_ERROR_FORMAT, nu_gguf_get_u32(g, "k.f32", NULL, &u32));
    NT_STATUS(NU_ERROR_FORMAT, nu_gguf_get_u32(g, "k.bool", NULL, &u32));
    NT_STATUS(NU_ERROR_FORMAT, nu_gguf_get_u32(g, "k.array.u32", NULL, &u32));
    assert_non_null(strstr(nu_error_message(NULL), "ARRAY"));
    /* Floats. */
    NT_OK(nu_gguf_get_f32(g, "k.f32", NULL, &f));
    assert_true(f == 0.25f);
    NT_OK(nu_gguf_get_f32(g, "k.f64", NULL, &f));
    assert_true(f == -1.5f);
    NT_STATUS(NU_ERROR_FORMAT, nu_gguf_get_f32(g, "k.u32", NULL, &f));
    assert_non_null(strstr(nu_error_message(NULL), "'k.u32' is UINT32, not FLOAT32"));
    /* Bools and strings. */
    NT_OK(nu_gguf_get_bool(g, "k.bool", NULL, &t));
    assert_true(t);
    NT_STATUS(NU_ERROR_FORMAT, nu_gguf_get_bool(g, "k.u8", NULL, &t));
    NT_OK(nu_gguf_get_string(g, "k.string", NULL, &s, &len));
    assert_bytes(s, len, "h\xc3\xa9llo");
    NT_STATUS(NU_ERROR_FORMAT, nu_gguf_get_string(g, "k.u8", NULL, &s, &len));
    assert_null(s);
    assert_non_null(strstr(nu_error_message(NULL), "'k.u8' is UINT8, not STRING"));
    /* Missing: the fallback, or NU_ERROR_FORMAT when required. */
    NT_OK(nu_gguf_get_u32(g, "nope", &(uint32_t){77}, &u32));
    assert_int_equal(u32, 77);
    NT_OK(nu_gguf_get_u64(g, "nope", &(uint64_t){78}, &u64));
    assert_int_equal(u64, 78);
    NT_OK(nu_gguf_get_f32(g, "nope", &(float){2.5f}, &f));
    assert_true(f == 2.5f);
    NT_OK(nu_gguf_get_bool(g, "nope", &(bool){true}, &t));
    assert_true(t);
    NT_OK(nu_gguf_get_string(g, "nope", "dflt", &s, &len));
    assert_bytes(s, len, "dflt");
    /* The fallback may be the output itself (a default kept in place): it is read before the
     * output is cleared. */
    u32 = 79, u64 = 80, f = 3.5f, t = true;
    NT_OK(nu_gguf_get_u32(g, "nope", &u32, &u32));
    assert_int_equal(u32, 79);
    NT_OK(nu_gguf_get_u64(g, "nope", &u64, &u64));
    assert_int_equal(u64, 80);
    NT_OK(nu_gguf_get_f32(g, "nope", &f, &f));
    assert_true(f == 3.5f);
    NT_OK(nu_gguf_get_bool(g, "nope", &t, &t));
    assert_true(t);
    NT_STATUS(NU_ERROR_FORMAT, nu_gguf_get_u32(g, "llama.block_count", NULL, &u32));
    assert_non_null(strstr(nu_error_message(NULL), "'llama.block_count' (required)"));
    NT_STATUS(NU_ERROR_FORMAT, nu_gguf_get_string(g, "nope", NULL, &s, &len));
    /* A fallback does not hide a wrong type. */
    NT_STATUS(NU_ERROR_FORMAT, nu_gguf_get_u32(g, "k.string", &(uint32_t){1}, &u32));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_gguf_get_u32(NULL, "k.u8", NULL, &u32));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_gguf_get_u32(g, NULL, NULL, &u32));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_gguf_get_u32(g, "k.u8", NULL, NULL));
    nu_gguf_close(g);
    free(b.p);
}

static void tensor_infos_and_views(void **state)
{
    buf b = small_file();
    nu_gguf *g = parse_ok(&b);
    uint64_t base = nu_gguf_data_offset(g);
    assert_int_equal(nu_gguf_tensor_count(g), 3);
    const nu_gguf_tensor_info *w = nu_gguf_tensor(g, 0), *q = nu_gguf_tensor(g, 1), *r = nu_gguf_tensor(g, 2);
    assert_null(nu_gguf_tensor(g, 3));
    assert_string_equal(w->name, "w");
    assert_int_equal(w->dtype, NU_DTYPE_F32);
    assert_int_equal(w->ggml_type, 0);
    assert_string_equal(w->type_name, "f32");
    assert_int_equal(w->rank, 2);
    /* nuvec order: GGUF's ne reversed. */
    assert_int_equal(w->shape[0], 2);
    assert_int_equal(w->shape[1], 4);
    assert_int_equal(w->shape[2], 1);
    assert_int_equal(w->offset, base);
    assert_int_equal(w->size, 32);
    assert_int_equal(q->dtype, NU_DTYPE_Q8_0);
    assert_int_equal(q->shape[0], 2);
    assert_int_equal(q->shape[1], 32);
    assert_int_equal(q->offset, base + 64);
    assert_int_equal(q->size, 68);
    assert_int_equal(r->dtype, NU_DTYPE_COUNT);
    assert_string_equal(r->type_name, "q8_1");
    assert_int_equal(r->size, 36);
    assert_int_equal(r->offset + r->size, b.n);
    assert_ptr_equal(nu_gguf_find_tensor(g, "q"), q);
    assert_null(nu_gguf_find_tensor(g, "x"));
    assert_null(nu_gguf_find_tensor(g, NULL));
    assert_null(nu_gguf_buffer(g));
    /* Views: a type nuvec does not read is refused by name; parsed files have no buffer. */
    nu_tensor t;
    NT_STATUS(NU_ERROR_UNSUPPORTED, nu_gguf_tensor_view(g, "r", &t));
    assert_non_null(strstr(nu_error_message(NULL), "'r' is q8_1 (ggml type 9)"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_gguf_tensor_view(g, "x", &t));
    assert_non_null(strstr(nu_error_message(NULL), "'x'"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_gguf_tensor_view(g, "q", &t));
    assert_non_null(strstr(nu_error_message(NULL), "parsed from memory"));
    NT_OK(nu_gguf_tensor_view_in(g, "q", NULL, 128, &t));
    assert_int_equal(t.dtype, NU_DTYPE_Q8_0);
    assert_int_equal(t.rank, 2);
    assert_int_equal(t.shape[0], 2);
    assert_int_equal(t.shape[1], 32);
    assert_int_equal(t.offset, 128);
    NT_STATUS(NU_ERROR_UNSUPPORTED, nu_gguf_tensor_view_in(g, "r", NULL, 0, &t));
    nu_buffer *none = (nu_buffer *)1;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_gguf_to_device(g, NULL, 0, NULL, &none, NULL));
    assert_null(none);
    assert_string_equal(nu_gguf_ggml_type_name(14), "q6_K");
    assert_string_equal(nu_gguf_ggml_type_name(31), "?");
    assert_string_equal(nu_gguf_ggml_type_name(1000), "?");
    /* Getters accept NULL. */
    assert_int_equal(nu_gguf_version(NULL), 0);
    assert_int_equal(nu_gguf_tensor_count(NULL), 0);
    assert_null(nu_gguf_tensor(NULL, 0));
    NT_OK(nu_gguf_close(NULL));
    nu_gguf_close(g);

    /* Version 2 reads the same; rank 0 is one element. */
    buf v2 = {0};
    b_header(&v2, 2, 1, 0);
    b_tensor(&v2, "scalar", 0, NULL, 0, 0);
    b_pad(&v2, 32);
    b_data(&v2, 4);
    g = parse_ok(&v2);
    assert_int_equal(nu_gguf_version(g), 2);
    assert_int_equal(nu_gguf_alignment(g), 32);
    const nu_gguf_tensor_info *sc = nu_gguf_tensor(g, 0);
    assert_int_equal(sc->rank, 0);
    assert_int_equal(sc->size, 4);
    NT_OK(nu_gguf_tensor_view_in(g, "scalar", NULL, 0, &t));
    assert_int_equal(t.rank, 1);
    assert_int_equal(t.shape[0], 1);
    nu_gguf_close(g);
    free(v2.p);
    /* An empty file of no tensors and no metadata. */
    buf empty = {0};
    b_header(&empty, 3, 0, 0);
    g = parse_ok(&empty);
    assert_int_equal(nu_gguf_tensor_count(g), 0);
    assert_int_equal(nu_gguf_kv_count(g), 0);
    assert_false(nu_gguf_has(g, "x"));
    nu_gguf_close(g);
    free(empty.p);
    free(b.p);
}

static void prefixes_and_mutations_fail_cleanly(void **state)
{
    buf b = small_file();
    for (size_t cut = 0; cut < b.n; cut++) {
        uint8_t *copy = malloc(cut ? cut : 1);
        memcpy(copy, b.p, cut);
        nu_gguf *g = (nu_gguf *)1;
        nu_status s = nu_gguf_parse(copy, cut, &g);
        if (s != NU_ERROR_FORMAT)
            fail_msg("prefix of %zu of %zu bytes: %s", cut, b.n, nu_status_string(s));
        assert_null(g);
        assert_true(strlen(nu_error_message(NULL)) > 10);
        free(copy);
    }
    /* Every byte of the header set to values that matter: counts, lengths, types. */
    static const uint8_t swaps[] = {0, 1, 2, 3, 7, 8, 9, 12, 13, 31, 32, 0x7f, 0x80, 0xff};
    uint64_t data = b.n - 228;
    int ok = 0;
    for (size_t i = 0; i < data; i++)
        for (size_t j = 0; j < sizeof swaps; j++) {
            uint8_t *copy = malloc(b.n);
            memcpy(copy, b.p, b.n);
            copy[i] = swaps[j];
            nu_gguf *g = NULL;
            nu_status s = nu_gguf_parse(copy, b.n, &g);
            assert_true(s == NU_OK || s == NU_ERROR_FORMAT);
            ok += s == NU_OK;
            for (uint64_t k = 0; k < nu_gguf_tensor_count(g); k++) {
                const nu_gguf_tensor_info *t = nu_gguf_tensor(g, k);
                assert_true(t->offset + t->size <= b.n);
                assert_ptr_equal(nu_gguf_find_tensor(g, t->name), t);
            }
            for (uint64_t k = 0; k < nu_gguf_kv_count(g); k++) {
                nu_gguf_value v, e;
                const char *key;
                NT_OK(nu_gguf_kv(g, k, &key, &v));
                if (v.type == NU_GGUF_ARRAY && v.length)
                    NT_OK(nu_gguf_array_get(&v, v.length - 1, &e));
            }
            nu_gguf_close(g);
            free(copy);
        }
    print_message("%d of %zu mutations still parse\n", ok, (size_t)data * sizeof swaps);
    free(b.p);
}

/* One file for each class of malformed input, with its message. */
static void malformed_files_are_refused(void **state)
{
    buf b = {0};
    expect_bad_bytes((const uint8_t *)"GG", 2, "shorter than the magic");
    b_bytes(&b, "GGML", 4), b_u32(&b, 3), b_u64(&b, 0), b_u64(&b, 0);
    expect_bad(&b, "not a GGUF file");
    b_header(&b, 1, 0, 0);
    expect_bad(&b, "version 1 is not supported");
    b_header(&b, 4, 0, 0);
    expect_bad(&b, "version 4 is not supported");
    b_header(&b, 3u << 24, 0, 0);
    expect_bad(&b, "big-endian");
    b_bytes(&b, "GGUF\3\0\0\0\0\0", 10);
    expect_bad(&b, "the file ends inside the tensor count");
    b_header(&b, 3, 1ull << 60, 0);
    expect_bad(&b, "tensor count 1152921504606846976 is more than");
    b_header(&b, 3, 0, UINT64_MAX);
    expect_bad(&b, "metadata count 18446744073709551615 is more than");
    /* Strings and arrays past the end. */
    b_header(&b, 3, 0, 1), b_u64(&b, 1000), b_bytes(&b, "abcdefghijklm", 13);
    expect_bad(&b, "byte 24: metadata entry 0: key length 1000 runs past the end");
    b_header(&b, 3, 0, 1), b_str(&b, "k"), b_u32(&b, NU_GGUF_STRING), b_u64(&b, UINT64_MAX);
    expect_bad(&b, "metadata entry 0 ('k'): string length 18446744073709551615 runs past");
    b_header(&b, 3, 0, 1), b_str(&b, "k"), b_u32(&b, NU_GGUF_ARRAY), b_u32(&b, NU_GGUF_UINT64), b_u64(&b, 1ull << 61);
    expect_bad(&b, "array of 2305843009213693952 UINT64 elements runs past the end");
    b_header(&b, 3, 0, 1), b_str(&b, "k"), b_u32(&b, NU_GGUF_ARRAY), b_u32(&b, NU_GGUF_STRING), b_u64(&b, 2);
    b_str(&b, "a"), b_u64(&b, 5);
    expect_bad(&b, "string element length 5 runs past");
    b_header(&b, 3, 0, 1), b_str(&b, "k"), b_u32(&b, NU_GGUF_UINT32), b_le(&b, 1, 2);
    expect_bad(&b, "the file ends inside a UINT32 value");
    /* Types. */
    b_header(&b, 3, 0, 1), b_str(&b, "k"), b_u32(&b, 13), b_u64(&b, 0);
    expect_bad(&b, "unknown value type 13");
    b_header(&b, 3, 0, 1), b_str(&b, "k"), b_u32(&b, NU_GGUF_ARRAY), b_u32(&b, 77), b_u64(&b, 0);
    expect_bad(&b, "array of unknown element type 77");
    b_header(&b, 3, 0, 1), b_str(&b, "k"), b_u32(&b, NU_GGUF_BOOL), b_le(&b, 2, 1);
    expect_bad(&b, "BOOL value 2 is neither 0 nor 1");
    b_header(&b, 3, 0, 1), b_str(&b, "k"), b_u32(&b, NU_GGUF_ARRAY), b_u32(&b, NU_GGUF_BOOL), b_u64(&b, 3);
    b_le(&b, 0, 1), b_le(&b, 1, 1), b_le(&b, 9, 1);
    expect_bad(&b, "BOOL element 2 is 9");
    /* Nesting: NU_GGUF_MAX_DEPTH arrays deep is fine, one more is not. */
    for (int depth = NU_GGUF_MAX_DEPTH; depth <= NU_GGUF_MAX_DEPTH + 1; depth++) {
        b_header(&b, 3, 0, 1), b_str(&b, "deep"), b_u32(&b, NU_GGUF_ARRAY);
        for (int k = 1; k < depth; k++)
            b_u32(&b, NU_GGUF_ARRAY), b_u64(&b, 1);
        b_u32(&b, NU_GGUF_UINT8), b_u64(&b, 1), b_le(&b, 42, 1);
        if (depth == NU_GGUF_MAX_DEPTH) {
            nu_gguf *g = parse_ok(&b);
            nu_gguf_value v;
            NT_OK(nu_gguf_find(g, "deep", &v));
            for (int k = 1; k < depth; k++)
                NT_OK(nu_gguf_array_get(&v, 0, &v));
            NT_OK(nu_gguf_array_get(&v, 0, &v));
            assert_int_equal(v.scalar.u8, 42);
            nu_gguf_close(g);
            free(b.p);
            b = (buf){0};
        } else {
            expect_bad(&b, "arrays nested more than 8 deep");
        }
    }
    /* Keys. */
    b_header(&b, 3, 0, 2), b_kv_u32(&b, "a", 1), b_kv_u32(&b, "a", 2);
    expect_bad(&b, "metadata key 'a' appears twice");
    b_header(&b, 3, 0, 1), b_u64(&b, 3), b_bytes(&b, "a\0b", 3), b_u32(&b, NU_GGUF_UINT8), b_le(&b, 0, 1);
    expect_bad(&b, "the key has a NUL byte");
    b_header(&b, 3, 0, 1), b_kv_u32(&b, "general.alignment", 48);
    expect_bad(&b, "general.alignment 48 is not a power of two");
    b_header(&b, 3, 0, 1), b_kv_u32(&b, "general.alignment", 0);
    expect_bad(&b, "general.alignment 0 is not a power of two");
    b_header(&b, 3, 0, 1), b_str(&b, "general.alignment"), b_u32(&b, NU_GGUF_UINT64), b_u64(&b, 64);
    expect_bad(&b, "general.alignment is UINT64, not UINT32");
    /* Tensor infos. */
    b_header(&b, 3, 1, 0), b_tensor(&b, "", 1, (uint64_t[]){4}, 0, 0), b_pad(&b, 32), b_data(&b, 16);
    expect_bad(&b, "the tensor name is empty");
    b_header(&b, 3, 1, 0), b_u64(&b, 2), b_bytes(&b, "t\0", 2), b_u32(&b, 1), b_u64(&b, 4), b_u32(&b, 0), b_u64(&b, 0);
    expect_bad(&b, "the tensor name has a NUL byte");
    b_header(&b, 3, 1, 0), b_tensor(&b, "t", 5, (uint64_t[]){1, 1, 1, 1, 1}, 0, 0);
    expect_bad(&b, "tensor 't': rank 5 is more than 4");
    b_header(&b, 3, 1, 0), b_tensor(&b, "t", 2, (uint64_t[]){4, 0}, 0, 0);
    expect_bad(&b, "tensor 't': ne[1] is 0");
    b_header(&b, 3, 1, 0), b_tensor(&b, "t", 3, (uint64_t[]){1ull << 32, 1ull << 30, 4}, 0, 0);
    expect_bad(&b, "tensor 't': the element count overflows (ne[2] = 4)");
    b_header(&b, 3, 1, 0), b_tensor(&b, "t", 1, (uint64_t[]){1ull << 63}, 0, 0);
    expect_bad(&b, "the element count overflows");
    /* Elements fit, bytes do not: 2^62 f32 is 2^64 bytes. */
    b_header(&b, 3, 1, 0), b_tensor(&b, "t", 2, (uint64_t[]){1ull << 31, 1ull << 31}, 0, 0);
    expect_bad(&b, "the byte size overflows");
    b_header(&b, 3, 1, 0), b_tensor(&b, "t", 1, (uint64_t[]){32}, 99, 0);
    expect_bad(&b, "tensor 't': unknown ggml type 99");
    b_header(&b, 3, 1, 0), b_tensor(&b, "t", 1, (uint64_t[]){32}, 31, 0);
    expect_bad(&b, "ggml type 31 (q4_0_4_4) was removed from GGUF");
    b_header(&b, 3, 1, 0), b_tensor(&b, "t", 2, (uint64_t[]){48, 2}, 8, 0);
    expect_bad(&b, "q8_0 blocks are 32 elements, but the innermost dim (ne[0]) is 48");
    b_header(&b, 3, 1, 0), b_tensor(&b, "t", 1, (uint64_t[]){128}, 12, 0);
    expect_bad(&b, "q4_K blocks are 256 elements");
    b_header(&b, 3, 1, 0), b_tensor(&b, "t", 1, (uint64_t[]){4}, 0, 16), b_pad(&b, 32), b_data(&b, 32);
    expect_bad(&b, "tensor 't': offset 16 is not a multiple of the alignment 32");
    b_header(&b, 3, 1, 0), b_tensor(&b, "t", 1, (uint64_t[]){4}, 0, 32), b_pad(&b, 32), b_data(&b, 40);
    expect_bad(&b, "tensor 't': its 16 bytes at data offset 32");
    b_header(&b, 3, 1, 0), b_tensor(&b, "t", 1, (uint64_t[]){4}, 0, UINT64_MAX - 31), b_pad(&b, 32), b_data(&b, 16);
    expect_bad(&b, "run past the end of the file");
    b_header(&b, 3, 1, 0), b_tensor(&b, "t", 1, (uint64_t[]){4}, 0, 0), b_pad(&b, 32), b_data(&b, 15);
    expect_bad(&b, "run past the end of the file");
    b_header(&b, 3, 2, 0), b_tensor(&b, "t", 1, (uint64_t[]){4}, 0, 0), b_tensor(&b, "t", 1, (uint64_t[]){4}, 0, 32);
    b_pad(&b, 32), b_data(&b, 48);
    expect_bad(&b, "tensor 't' appears twice");
    b_header(&b, 3, 2, 0), b_tensor(&b, "a", 1, (uint64_t[]){16}, 0, 0), b_tensor(&b, "b", 1, (uint64_t[]){4}, 0, 32);
    b_pad(&b, 32), b_data(&b, 64);
    expect_bad(&b, "tensors 'a' and 'b' overlap");
    b_header(&b, 3, 1, 0), b_tensor(&b, "t", 1, (uint64_t[]){4}, 0, 0);
    expect_bad(&b, "run past the end of the file");
    b_header(&b, 3, 1, 0), b_str(&b, "a_longer_name"), b_u32(&b, 1), b_u64(&b, 4);
    expect_bad(&b, "tensor 'a_longer_name': the file ends inside the type");
}

static void every_allocation_fails_cleanly(void **state)
{
    buf b = small_file();
    int64_t baseline = nu__host_live();
    int failures = 0;
    for (long k = 0;; k++) {
        nu_gguf *g = (nu_gguf *)1;
        nu__host_fail_after(k, 0);
        nu_status s = nu_gguf_parse(b.p, b.n, &g);
        int failed = nu__host_failed();
        nu__host_fail_after(-1, 0);
        if (!failed) {
            NT_OK(s);
            assert_int_equal(nu_gguf_kv_count(g), SMALL_KVS);
            nu_gguf_close(g);
            break;
        }
        failures++;
        if (s != NU_ERROR_HOST_OUT_OF_MEMORY)
            fail_msg("allocation %ld failed but parse returned %s: %s", k, nu_status_string(s), nu_error_message(NULL));
        assert_null(g);
        assert_int_equal(nu__host_live(), baseline);
    }
    assert_int_equal(failures, 2); /* the handle, the block */
    assert_int_equal(nu__host_live(), baseline);
    free(b.p);
}

/* ---- the writer ---- */

static void f16_and_bf16_conversions(void **state)
{
    assert_int_equal(gguf_f32_to_f16(1.0f), 0x3C00);
    assert_int_equal(gguf_f32_to_f16(-2.0f), 0xC000);
    assert_int_equal(gguf_f32_to_f16(0.1f), 0x2E66);
    assert_int_equal(gguf_f32_to_f16(65504.0f), 0x7BFF);
    assert_int_equal(gguf_f32_to_f16(65520.0f), 0x7C00); /* rounds to inf */
    assert_int_equal(gguf_f32_to_f16(5.9604645e-8f), 0x0001);
    assert_int_equal(gguf_f32_to_f16(2.0e-8f), 0x0000);
    assert_int_equal(gguf_f32_to_f16(-0.0f), 0x8000);
    assert_int_equal(gguf_f32_to_f16(INFINITY), 0x7C00);
    assert_true((gguf_f32_to_f16(NAN) & 0x7FFF) > 0x7C00);
    /* Every half survives f16 -> f32 -> f16 (NaNs stay NaNs). */
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t back = gguf_f32_to_f16(gguf_f16_to_f32((uint16_t)h));
        if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF))
            assert_true((back & 0x7C00) == 0x7C00 && (back & 0x3FF));
        else if (back != h)
            fail_msg("half 0x%04x came back as 0x%04x", h, back);
    }
    /* Ties round to even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10. */
    assert_int_equal(gguf_f32_to_f16(1.0f + 0x1p-11f), 0x3C00);
    assert_int_equal(gguf_f32_to_f16(1.0f + 0x3p-11f), 0x3C02);
    assert_int_equal(gguf_f32_to_bf16(1.0f), 0x3F80);
    assert_int_equal(gguf_f32_to_bf16(1.00390625f), 0x3F80); /* a tie, to even */
    assert_int_equal(gguf_f32_to_bf16(1.01171875f), 0x3F82);
    /* Q8_0 and Q4_0 blocks as ggml lays them out. */
    float x[32];
    for (int j = 0; j < 32; j++)
        x[j] = (float)(j - 16) / 16.0f; /* -1 .. 0.9375 */
    uint8_t q8[34], q4[18];
    gguf_quantize_q8_0(x, q8);
    float d8 = gguf_f16_to_f32((uint16_t)(q8[0] | q8[1] << 8));
    assert_true(fabsf(d8 - 1.0f / 127) < 1e-5f);
    assert_int_equal((int8_t)q8[2], -127);
    for (int j = 0; j < 32; j++)
        assert_true(fabsf((int8_t)q8[2 + j] * d8 - x[j]) <= d8 * 0.51f);
    gguf_quantize_q4_0(x, q4);
    float d4 = gguf_f16_to_f32((uint16_t)(q4[0] | q4[1] << 8));
    assert_true(d4 == 0.125f); /* max -1 / -8 */
    assert_int_equal(q4[2] & 15, 0); /* x[0] = -1 = (0 - 8) * 0.125 */
    for (int j = 0; j < 16; j++) {
        assert_true(fabsf(((q4[2 + j] & 15) - 8) * d4 - x[j]) <= d4 * 0.51f);
        assert_true(fabsf(((q4[2 + j] >> 4) - 8) * d4 - x[j + 16]) <= d4 * 1.01f);
    }
}

/* The writer's own files: every kind of entry, tensors padded to the alignment, read back. */
static void writer_round_trip(void **state)
{
    const char *path = tmp_path("written.gguf");
    gguf_writer *w;
    NT_OK(gguf_writer_new(64, &w));
    NT_OK(gguf_writer_u32(w, "a.u32", 7));
    NT_OK(gguf_writer_u64(w, "a.u64", 1ull << 50));
    NT_OK(gguf_writer_i32(w, "a.i32", -9));
    NT_OK(gguf_writer_f32(w, "a.f32", 1.5f));
    NT_OK(gguf_writer_bool(w, "a.bool", false));
    NT_OK(gguf_writer_string(w, "a.string", "text"));
    const int16_t ints[3] = {-1, 2, -3};
    NT_OK(gguf_writer_array(w, "a.i16s", NU_GGUF_INT16, ints, 3));
    const char *const strs[2] = {"one", "two"};
    NT_OK(gguf_writer_string_array(w, "a.strings", strs, 2));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, gguf_writer_u32(w, "a.u32", 8));
    gguf_writer_free(w);

    NT_OK(gguf_writer_new(64, &w));
    NT_OK(gguf_writer_string(w, "general.architecture", "test"));
    NT_OK(gguf_writer_array(w, "a.i16s", NU_GGUF_INT16, ints, 3));
    NT_OK(gguf_writer_string_array(w, "a.strings", strs, 2));
    NT_OK(gguf_writer_tensor(w, "m", NU_DTYPE_F16, 2, (uint64_t[]){3, 5}));
    NT_OK(gguf_writer_tensor(w, "q", NU_DTYPE_Q4_0, 2, (uint64_t[]){2, 64}));
    NT_OK(gguf_writer_tensor(w, "v", NU_DTYPE_BF16, 1, (uint64_t[]){3}));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, gguf_writer_tensor(w, "bad", NU_DTYPE_Q8_0, 1, (uint64_t[]){33}));
    gguf_writer_free(w);

    NT_OK(gguf_writer_new(64, &w));
    NT_OK(gguf_writer_array(w, "a.i16s", NU_GGUF_INT16, ints, 3));
    NT_OK(gguf_writer_string_array(w, "a.strings", strs, 2));
    NT_OK(gguf_writer_tensor(w, "m", NU_DTYPE_F16, 2, (uint64_t[]){3, 5}));
    NT_OK(gguf_writer_tensor(w, "q", NU_DTYPE_Q4_0, 2, (uint64_t[]){2, 64}));
    NT_OK(gguf_writer_tensor(w, "v", NU_DTYPE_BF16, 1, (uint64_t[]){3}));
    assert_int_equal(gguf_writer_data_size(w), 64 + 128 + 64);
    NT_OK(gguf_writer_begin(w, path));
    uint8_t data[30 + 72 + 6];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 13 + 1);
    /* Pieces that span tensors. */
    NT_OK(gguf_writer_data(w, data, 7));
    NT_OK(gguf_writer_data(w, data + 7, 60));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, gguf_writer_finish(w));
    gguf_writer_free(w);

    NT_OK(gguf_writer_new(64, &w));
    NT_OK(gguf_writer_array(w, "a.i16s", NU_GGUF_INT16, ints, 3));
    NT_OK(gguf_writer_string_array(w, "a.strings", strs, 2));
    NT_OK(gguf_writer_tensor(w, "m", NU_DTYPE_F16, 2, (uint64_t[]){3, 5}));
    NT_OK(gguf_writer_tensor(w, "q", NU_DTYPE_Q4_0, 2, (uint64_t[]){2, 64}));
    NT_OK(gguf_writer_tensor(w, "v", NU_DTYPE_BF16, 1, (uint64_t[]){3}));
    NT_OK(gguf_writer_begin(w, path));
    NT_OK(gguf_writer_data(w, data, 7));
    NT_OK(gguf_writer_data(w, data + 7, 100));
    NT_OK(gguf_writer_data(w, data + 107, 1));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, gguf_writer_data(w, data, 1));
    gguf_writer_free(w);

    NT_OK(gguf_writer_new(64, &w));
    NT_OK(gguf_writer_array(w, "a.i16s", NU_GGUF_INT16, ints, 3));
    NT_OK(gguf_writer_string_array(w, "a.strings", strs, 2));
    NT_OK(gguf_writer_tensor(w, "m", NU_DTYPE_F16, 2, (uint64_t[]){3, 5}));
    NT_OK(gguf_writer_tensor(w, "q", NU_DTYPE_Q4_0, 2, (uint64_t[]){2, 64}));
    NT_OK(gguf_writer_tensor(w, "v", NU_DTYPE_BF16, 1, (uint64_t[]){3}));
    NT_OK(gguf_writer_begin(w, path));
    NT_OK(gguf_writer_data(w, data, sizeof data));
    NT_OK(gguf_writer_finish(w));
    gguf_writer_free(w);

    size_t size;
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    size = (size_t)st.st_size;
    uint8_t *bytes = (uint8_t *)nt_read_file(path);
    nu_gguf *g;
    NT_OK(nu_gguf_parse(bytes, size, &g));
    assert_int_equal(nu_gguf_version(g), 3);
    assert_int_equal(nu_gguf_alignment(g), 64);
    uint32_t align;
    NT_OK(nu_gguf_get_u32(g, "general.alignment", NULL, &align));
    assert_int_equal(align, 64);
    nu_gguf_value v, e;
    NT_OK(nu_gguf_find(g, "a.i16s", &v));
    assert_int_equal(v.element_type, NU_GGUF_INT16);
    NT_OK(nu_gguf_array_get(&v, 2, &e));
    assert_int_equal(e.scalar.i16, -3);
    NT_OK(nu_gguf_find(g, "a.strings", &v));
    const char *s;
    uint64_t len;
    NT_OK(nu_gguf_array_string(&v, 1, &s, &len));
    assert_bytes(s, len, "two");
    static const char *const names[3] = {"m", "q", "v"};
    static const uint64_t sizes[3] = {30, 72, 6}, at[3] = {0, 64, 192};
    const uint8_t *src = data;
    for (int i = 0; i < 3; i++) {
        const nu_gguf_tensor_info *t = nu_gguf_tensor(g, (uint64_t)i);
        assert_string_equal(t->name, names[i]);
        assert_int_equal(t->size, sizes[i]);
        assert_int_equal(t->offset, nu_gguf_data_offset(g) + at[i]);
        assert_memory_equal(bytes + t->offset, src, sizes[i]);
        src += sizes[i];
    }
    const nu_gguf_tensor_info *m = nu_gguf_find_tensor(g, "m");
    assert_int_equal(m->shape[0], 3);
    assert_int_equal(m->shape[1], 5);
    assert_int_equal(m->dtype, NU_DTYPE_F16);
    assert_int_equal(nu_gguf_find_tensor(g, "q")->dtype, NU_DTYPE_Q4_0);
    assert_int_equal(nu_gguf_find_tensor(g, "v")->dtype, NU_DTYPE_BF16);
    nu_gguf_close(g);
    free(bytes);
    unlink(path);
}

/* `nuvec make-gguf --shape tiny`, each dtype: the keys llama.cpp reads, the vocabulary, the
 * tensors; the same seed gives the same bytes, whatever the threads. */
static void make_gguf_tiny_reads_back(void **state)
{
    static const nu_dtype dtypes[] = {NU_DTYPE_F16, NU_DTYPE_Q8_0, NU_DTYPE_Q4_0};
    const make_gguf_shape *shape = make_gguf_find_shape("tiny");
    assert_non_null(shape);
    assert_null(make_gguf_find_shape("llama-70b"));
    assert_non_null(make_gguf_find_shape("llama-7b"));
    assert_int_equal(make_gguf_find_shape("llama-8b")->kv_heads, 8);
    for (size_t di = 0; di < 3; di++) {
        char path[4096];
        snprintf(path, sizeof path, "%s", tmp_path("tiny.gguf"));
        make_gguf_options o = {.shape = shape, .dtype = dtypes[di], .path = path, .seed = 5, .threads = 3};
        uint64_t data_bytes;
        NT_OK(make_gguf(&o, &data_bytes));
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        size_t size = (size_t)st.st_size;
        uint8_t *bytes = (uint8_t *)nt_read_file(path);
        nu_gguf *g;
        NT_OK(nu_gguf_parse(bytes, size, &g));
        assert_int_equal(nu_gguf_data_offset(g) + data_bytes, size);
        const char *s;
        uint64_t len;
        NT_OK(nu_gguf_get_string(g, "general.architecture", NULL, &s, &len));
        assert_bytes(s, len, "llama");
        NT_OK(nu_gguf_get_string(g, "tokenizer.ggml.model", NULL, &s, &len));
        assert_bytes(s, len, "llama");
        static const struct { const char *key; uint32_t want; } u32s[] = {
            {"llama.embedding_length", 64}, {"llama.block_count", 2}, {"llama.attention.head_count", 4},
            {"llama.attention.head_count_kv", 2}, {"llama.feed_forward_length", 128}, {"llama.context_length", 128},
            {"llama.rope.dimension_count", 16}, {"llama.vocab_size", 512}, {"tokenizer.ggml.bos_token_id", 1},
            {"tokenizer.ggml.eos_token_id", 2}, {"tokenizer.ggml.unknown_token_id", 0}};
        for (size_t k = 0; k < sizeof u32s / sizeof *u32s; k++) {
            uint32_t v;
            NT_OK(nu_gguf_get_u32(g, u32s[k].key, NULL, &v));
            if (v != u32s[k].want)
                fail_msg("%s is %u, not %u", u32s[k].key, v, u32s[k].want);
        }
        float theta, eps;
        NT_OK(nu_gguf_get_f32(g, "llama.rope.freq_base", NULL, &theta));
        NT_OK(nu_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", NULL, &eps));
        assert_true(theta == 10000.0f && eps == 1e-5f);
        nu_gguf_value tokens, scores, types, e;
        NT_OK(nu_gguf_find(g, "tokenizer.ggml.tokens", &tokens));
        NT_OK(nu_gguf_find(g, "tokenizer.ggml.scores", &scores));
        NT_OK(nu_gguf_find(g, "tokenizer.ggml.token_type", &types));
        assert_int_equal(tokens.length, 512);
        assert_int_equal(scores.length, 512);
        assert_int_equal(scores.element_type, NU_GGUF_FLOAT32);
        assert_int_equal(types.element_type, NU_GGUF_INT32);
        NT_OK(nu_gguf_array_string(&tokens, 0, &s, &len));
        assert_bytes(s, len, "<unk>");
        NT_OK(nu_gguf_array_string(&tokens, 2, &s, &len));
        assert_bytes(s, len, "</s>");
        NT_OK(nu_gguf_array_string(&tokens, 3, &s, &len));
        assert_bytes(s, len, "<0x00>");
        NT_OK(nu_gguf_array_string(&tokens, 258, &s, &len));
        assert_bytes(s, len, "<0xFF>");
        NT_OK(nu_gguf_array_string(&tokens, 259, &s, &len));
        assert_bytes(s, len, "\xe2\x96\x81" "a");
        NT_OK(nu_gguf_array_get(&types, 258, &e));
        assert_int_equal(e.scalar.i32, 6);
        NT_OK(nu_gguf_array_get(&types, 1, &e));
        assert_int_equal(e.scalar.i32, 3);
        NT_OK(nu_gguf_array_get(&types, 300, &e));
        assert_int_equal(e.scalar.i32, 1);
        bool add_bos;
        NT_OK(nu_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", NULL, &add_bos));
        assert_true(add_bos);
        /* Every token distinct (llama.cpp maps text to ids). */
        for (uint64_t i = 259; i < 512; i++) {
            const char *a, *b;
            uint64_t la, lb;
            NT_OK(nu_gguf_array_string(&tokens, i, &a, &la));
            NT_OK(nu_gguf_array_string(&tokens, i - 1, &b, &lb));
            assert_false(la == lb && !memcmp(a, b, la));
        }
        /* Tensors: 2 + 9 a layer + 1, named and shaped as llama.cpp's. */
        assert_int_equal(nu_gguf_tensor_count(g), 2 + 9 * 2 + 1);
        static const struct { const char *name; uint64_t rows, cols; bool norm; } want[] = {
            {"token_embd.weight", 512, 64, false}, {"blk.0.attn_norm.weight", 0, 64, true},
            {"blk.0.attn_q.weight", 64, 64, false}, {"blk.0.attn_k.weight", 32, 64, false},
            {"blk.1.attn_v.weight", 32, 64, false}, {"blk.1.attn_output.weight", 64, 64, false},
            {"blk.1.ffn_norm.weight", 0, 64, true}, {"blk.1.ffn_gate.weight", 128, 64, false},
            {"blk.1.ffn_up.weight", 128, 64, false}, {"blk.1.ffn_down.weight", 64, 128, false},
            {"output_norm.weight", 0, 64, true}, {"output.weight", 512, 64, false}};
        for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
            const nu_gguf_tensor_info *t = nu_gguf_find_tensor(g, want[k].name);
            if (!t)
                fail_msg("no tensor %s", want[k].name);
            assert_int_equal(t->dtype, want[k].norm ? NU_DTYPE_F32 : dtypes[di]);
            assert_int_equal(t->rank, want[k].norm ? 1 : 2);
            if (want[k].norm) {
                assert_int_equal(t->shape[0], want[k].cols);
                /* Norms near 1. */
                const float *x = (const float *)(bytes + t->offset);
                for (uint64_t i = 0; i < want[k].cols; i++)
                    assert_true(x[i] > 0.8f && x[i] < 1.2f);
            } else {
                assert_int_equal(t->shape[0], want[k].rows);
                assert_int_equal(t->shape[1], want[k].cols);
            }
        }
        /* The weights: mean near 0, standard deviation near 0.02 (token_embd, 32768 values). */
        const nu_gguf_tensor_info *emb = nu_gguf_find_tensor(g, "token_embd.weight");
        const uint8_t *p = bytes + emb->offset;
        double sum = 0, sq = 0;
        uint64_t n = 512 * 64;
        for (uint64_t i = 0; i < n; i++) {
            float x;
            if (dtypes[di] == NU_DTYPE_F16)
                x = gguf_f16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
            else if (dtypes[di] == NU_DTYPE_Q8_0) {
                const uint8_t *blk = p + i / 32 * 34;
                x = gguf_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8)) * (int8_t)blk[2 + i % 32];
            } else {
                const uint8_t *blk = p + i / 32 * 18;
                int j = (int)(i % 32), q = j < 16 ? blk[2 + j] & 15 : blk[2 + j - 16] >> 4;
                x = gguf_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8)) * (float)(q - 8);
            }
            sum += x;
            sq += (double)x * x;
        }
        double mean = sum / (double)n, sd = sqrt(sq / (double)n - mean * mean);
        if (fabs(mean) > 0.001 || sd < 0.018 || sd > 0.022)
            fail_msg("%s token_embd: mean %g, standard deviation %g", nu_dtype_name(dtypes[di]), mean, sd);
        nu_gguf_close(g);
        /* The same seed on one thread: the same bytes; another seed: other bytes. */
        o.threads = 1;
        NT_OK(make_gguf(&o, NULL));
        uint8_t *again = (uint8_t *)nt_read_file(path);
        assert_memory_equal(again, bytes, size);
        free(again);
        o.seed = 6;
        NT_OK(make_gguf(&o, NULL));
        again = (uint8_t *)nt_read_file(path);
        assert_true(memcmp(again, bytes, size) != 0);
        free(again);
        free(bytes);
        unlink(path);
    }
    make_gguf_options bad = {.shape = shape, .dtype = NU_DTYPE_I32, .path = tmp_path("x.gguf")};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, make_gguf(&bad, NULL));
    bad.dtype = NU_DTYPE_F16;
    bad.path = "/nonexistent/dir/x.gguf";
    NT_STATUS(NU_ERROR_IO, make_gguf(&bad, NULL));
    assert_non_null(strstr(tool_error_message(), "/nonexistent/dir/x.gguf"));
}

/* ---- the real models ---- */

static const char *models_dir(void)
{
    const char *env = getenv("NUVEC_MODELS_DIR");
    return env && *env ? env : NUVEC_MODELS_DIR;
}

static const char *model_path(const char *rel)
{
    static char path[4][4096];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, 4096, "%s/%s", models_dir(), rel);
    return p;
}

/* The models folder, or a skip when this checkout has none. */
static bool have_models(void)
{
    struct stat st;
    if (stat(model_path("aidreams260K/model.gguf"), &st) == 0)
        return true;
    print_message("no models at %s (set NUVEC_MODELS_DIR): skipped\n", models_dir());
    return false;
}

static float f32_at(const uint8_t *p, uint64_t i)
{
    float x;
    memcpy(&x, p + 4 * i, 4);
    return x;
}

/* Element i of a Q8_0 or Q4_0 tensor's bytes, and its block's scale. */
static float dequant(nu_dtype dt, const uint8_t *p, uint64_t i, float *scale)
{
    const uint8_t *blk = p + i / 32 * (dt == NU_DTYPE_Q8_0 ? 34 : 18);
    float d = gguf_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
    *scale = fabsf(d);
    int j = (int)(i % 32);
    if (dt == NU_DTYPE_Q8_0)
        return d * (float)(int8_t)blk[2 + j];
    int q = j < 16 ? blk[2 + j] & 15 : blk[2 + j - 16] >> 4;
    return d * (float)(q - 8);
}

static void real_models_metadata_and_values(void **state)
{
    if (!have_models())
        skip();
    nu_device *d = nt_open();
    nu_gguf *g;
    NT_OK(nu_gguf_open(d, model_path("aidreams260K/model.gguf"), &g));
    assert_int_equal(nu_gguf_version(g), 3);
    static const struct { const char *key; uint32_t want; } u32s[] = {
        {"llama.block_count", 4}, {"llama.embedding_length", 64}, {"llama.feed_forward_length", 172},
        {"llama.attention.head_count", 4}, {"llama.attention.head_count_kv", 4}, {"llama.context_length", 128},
        {"llama.rope.dimension_count", 16}, {"tokenizer.ggml.bos_token_id", 1}, {"tokenizer.ggml.eos_token_id", 2}};
    for (size_t k = 0; k < sizeof u32s / sizeof *u32s; k++) {
        uint32_t v;
        NT_OK(nu_gguf_get_u32(g, u32s[k].key, NULL, &v));
        if (v != u32s[k].want)
            fail_msg("%s is %u, not %u", u32s[k].key, v, u32s[k].want);
    }
    const char *s;
    uint64_t len;
    NT_OK(nu_gguf_get_string(g, "general.architecture", NULL, &s, &len));
    assert_bytes(s, len, "llama");
    float eps, theta;
    NT_OK(nu_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", NULL, &eps));
    NT_OK(nu_gguf_get_f32(g, "llama.rope.freq_base", NULL, &theta));
    assert_true(eps == 1e-5f && theta == 10000.0f);
    nu_gguf_value tokens, scores;
    NT_OK(nu_gguf_find(g, "tokenizer.ggml.tokens", &tokens));
    NT_OK(nu_gguf_find(g, "tokenizer.ggml.scores", &scores));
    assert_int_equal(tokens.length, 512);
    assert_int_equal(scores.length, 512);
    NT_OK(nu_gguf_array_string(&tokens, 1, &s, &len));
    assert_bytes(s, len, "<s>");
    NT_OK(nu_gguf_array_string(&tokens, 3, &s, &len));
    assert_bytes(s, len, "<0x00>");
    bool add_bos, add_eos;
    NT_OK(nu_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", NULL, &add_bos));
    NT_OK(nu_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", NULL, &add_eos));
    assert_true(add_bos && !add_eos);
    /* 1 + 9 a layer + 1 tensors, all F32, no output.weight (tied). */
    assert_int_equal(nu_gguf_tensor_count(g), 1 + 9 * 4 + 1);
    assert_null(nu_gguf_find_tensor(g, "output.weight"));
    const nu_gguf_tensor_info *emb = nu_gguf_find_tensor(g, "token_embd.weight");
    const nu_gguf_tensor_info *down = nu_gguf_find_tensor(g, "blk.1.ffn_down.weight");
    const nu_gguf_tensor_info *norm = nu_gguf_find_tensor(g, "blk.3.attn_norm.weight");
    assert_non_null(emb);
    assert_non_null(down);
    assert_non_null(norm);
    assert_int_equal(emb->dtype, NU_DTYPE_F32);
    assert_int_equal(emb->rank, 2);
    assert_int_equal(emb->shape[0], 512);
    assert_int_equal(emb->shape[1], 64);
    assert_int_equal(down->shape[0], 64); /* [out, in]: GGUF's ne is [172, 64] */
    assert_int_equal(down->shape[1], 172);
    assert_int_equal(norm->rank, 1);
    assert_int_equal(norm->shape[0], 64);
    for (uint64_t i = 0; i < nu_gguf_tensor_count(g); i++)
        assert_int_equal(nu_gguf_tensor(g, i)->dtype, NU_DTYPE_F32);

    /* The values equal the Hugging Face file's (unpermuted tensors). */
    nu_safetensors *hf;
    NT_OK(nu_safetensors_open(d, model_path("aidreams260K/hf/model.safetensors"), &hf));
    const void *gb, *hb;
    NT_OK(nu_buffer_contents(nu_gguf_buffer(g), &gb));
    NT_OK(nu_buffer_contents(nu_safetensors_buffer(hf), &hb));
    static const char *const pairs[][2] = {{"token_embd.weight", "model.embed_tokens.weight"},
                                           {"blk.1.ffn_down.weight", "model.layers.1.mlp.down_proj.weight"},
                                           {"blk.2.ffn_gate.weight", "model.layers.2.mlp.gate_proj.weight"},
                                           {"blk.0.attn_v.weight", "model.layers.0.self_attn.v_proj.weight"},
                                           {"blk.3.attn_norm.weight", "model.layers.3.input_layernorm.weight"},
                                           {"output_norm.weight", "model.norm.weight"}};
    for (size_t k = 0; k < sizeof pairs / sizeof *pairs; k++) {
        const nu_gguf_tensor_info *t = nu_gguf_find_tensor(g, pairs[k][0]);
        const nu_tensor_info *h = nu_safetensors_find(hf, pairs[k][1]);
        assert_non_null(t);
        assert_non_null(h);
        assert_int_equal(h->rank, t->rank);
        for (uint32_t i = 0; i < t->rank; i++)
            assert_int_equal(h->shape[i], t->shape[i]);
        assert_int_equal(h->size, t->size);
        if (memcmp((const uint8_t *)gb + t->offset, (const uint8_t *)hb + h->offset, t->size))
            fail_msg("%s differs from %s", pairs[k][0], pairs[k][1]);
    }
    nu_safetensors_close(hf);

    /* The quantized files: Q8_0/Q4_0 matrices within half a step (a step for Q4_0's clamped end)
     * of the F32 weights; ffn_down (rows of 172) and the norms stay F32, bit for bit. */
    static const char *const qfiles[2] = {"aidreams260K/model-q8_0.gguf", "aidreams260K/model-q4_0.gguf"};
    static const nu_dtype qdt[2] = {NU_DTYPE_Q8_0, NU_DTYPE_Q4_0};
    for (int f = 0; f < 2; f++) {
        nu_gguf *q;
        NT_OK(nu_gguf_open(d, model_path(qfiles[f]), &q));
        const void *qb;
        NT_OK(nu_buffer_contents(nu_gguf_buffer(q), &qb));
        assert_int_equal(nu_gguf_tensor_count(q), nu_gguf_tensor_count(g));
        int quantized = 0;
        for (uint64_t i = 0; i < nu_gguf_tensor_count(q); i++) {
            const nu_gguf_tensor_info *t = nu_gguf_tensor(q, i), *ref = nu_gguf_find_tensor(g, t->name);
            assert_non_null(ref);
            assert_int_equal(t->rank, ref->rank);
            for (uint32_t k = 0; k < t->rank; k++)
                assert_int_equal(t->shape[k], ref->shape[k]);
            const uint8_t *x = (const uint8_t *)qb + t->offset, *r = (const uint8_t *)gb + ref->offset;
            if (t->dtype == NU_DTYPE_F32) {
                assert_memory_equal(x, r, t->size);
                assert_true(t->rank == 1 || strstr(t->name, "ffn_down"));
                continue;
            }
            assert_int_equal(t->dtype, qdt[f]);
            quantized++;
            uint64_t n = t->shape[0] * t->shape[1];
            assert_int_equal(t->size, n / 32 * (qdt[f] == NU_DTYPE_Q8_0 ? 34 : 18));
            for (uint64_t e = 0; e < n; e++) {
                float scale, v = dequant(qdt[f], x, e, &scale), want = f32_at(r, e);
                float tol = (qdt[f] == NU_DTYPE_Q8_0 ? 0.6f : 1.1f) * scale + 1e-7f;
                if (fabsf(v - want) > tol)
                    fail_msg("%s %s[%llu]: %g, F32 %g (block scale %g)", qfiles[f], t->name, (unsigned long long)e, v,
                             want, scale);
            }
        }
        assert_int_equal(quantized, 1 + 6 * 4); /* token_embd, attn_q/k/v/output, ffn_gate, ffn_up */
        nu_gguf_close(q);
    }
    nu_gguf_close(g);

    /* stories260K: grouped-query attention. */
    NT_OK(nu_gguf_open(d, model_path("stories260K/model.gguf"), &g));
    uint32_t layers, heads, kv_heads, ctx;
    NT_OK(nu_gguf_get_u32(g, "llama.block_count", NULL, &layers));
    NT_OK(nu_gguf_get_u32(g, "llama.attention.head_count", NULL, &heads));
    NT_OK(nu_gguf_get_u32(g, "llama.attention.head_count_kv", NULL, &kv_heads));
    NT_OK(nu_gguf_get_u32(g, "llama.context_length", NULL, &ctx));
    assert_true(layers == 5 && heads == 8 && kv_heads == 4 && ctx == 512);
    const nu_gguf_tensor_info *k = nu_gguf_find_tensor(g, "blk.4.attn_k.weight");
    assert_non_null(k);
    assert_int_equal(k->shape[0], 32); /* 4 KV heads of 8 */
    assert_int_equal(k->shape[1], 64);
    NT_OK(nu_gguf_find(g, "tokenizer.ggml.tokens", &tokens));
    NT_OK(nu_gguf_array_string(&tokens, 300, &s, &len));
    assert_bytes(s, len, "[300]");
    nu_gguf_close(g);
    nt_close(d);
}

/* On a device: a view of the mapped file dequantized by an op equals the CPU's reading of the
 * blocks; tensors moved to device memory equal the file's bytes. */
static void views_and_moves_on_a_device(void **state)
{
    if (!have_models())
        skip();
    nu_device *d = nt_open();
    nu_gguf *g;
    NT_OK(nu_gguf_open(d, model_path("aidreams260K/model-q8_0.gguf"), &g));
    nu_buffer *file = nu_gguf_buffer(g);
    assert_true(nu_buffer_is_mapped_file(file));
    const void *fb;
    NT_OK(nu_buffer_contents(file, &fb));
    nu_tensor emb;
    NT_OK(nu_gguf_tensor_view(g, "token_embd.weight", &emb));
    NT_OK(nu_tensor_check(&emb, "token_embd"));
    assert_int_equal(emb.dtype, NU_DTYPE_Q8_0);
    assert_int_equal(emb.shape[0], 512);
    assert_int_equal(emb.shape[1], 64);
    /* Rows 100..107 dequantized on the GPU, from the mapping. */
    nu_tensor rows;
    NT_OK(nu_tensor_slice(&emb, 0, 100, 8, &rows));
    nu_buffer *out;
    NT_OK(nu_buffer_new(d, 8 * 64 * 4, NU_STORAGE_SHARED, &out));
    nu_tensor dst = nu_tensor_make(out, 0, NU_DTYPE_F32, 2, (int64_t[]){8, 64});
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    NT_OK(nu_op_copy(c, &dst, &rows));
    NT_OK(nu_commands_commit(c));
    NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
    nu_commands_free(c);
    float got[8 * 64];
    NT_OK(nu_buffer_read(out, 0, got, sizeof got));
    const nu_gguf_tensor_info *ti = nu_gguf_find_tensor(g, "token_embd.weight");
    for (uint64_t i = 0; i < 8 * 64; i++) {
        float scale, want = dequant(NU_DTYPE_Q8_0, (const uint8_t *)fb + ti->offset, 100 * 64 + i, &scale);
        if (got[i] != want)
            fail_msg("element %llu: GPU %g, CPU %g", (unsigned long long)i, got[i], want);
    }
    nu_buffer_free(out);

    /* Moves: chosen tensors in the order given, then all. */
    const char *pick[2] = {"blk.1.ffn_down.weight", "token_embd.weight"};
    nu_buffer *moved;
    uint64_t offsets[64];
    NT_OK(nu_gguf_to_device(g, pick, 2, &(nu_move_options){.chunk_size = 8192, .threads = 2}, &moved, offsets));
    for (int i = 0; i < 2; i++) {
        const nu_gguf_tensor_info *t = nu_gguf_find_tensor(g, pick[i]);
        uint8_t *bytes = malloc(t->size);
        NT_OK(nu_buffer_read(moved, offsets[i], bytes, t->size));
        assert_memory_equal(bytes, (const uint8_t *)fb + t->offset, t->size);
        free(bytes);
        nu_tensor v;
        NT_OK(nu_gguf_tensor_view_in(g, pick[i], moved, offsets[i], &v));
        NT_OK(nu_tensor_check(&v, pick[i]));
    }
    nu_buffer_free(moved);
    assert_true(nu_gguf_tensor_count(g) <= 64);
    NT_OK(nu_gguf_to_device(g, NULL, 0, NULL, &moved, offsets));
    for (uint64_t i = 0; i < nu_gguf_tensor_count(g); i++) {
        const nu_gguf_tensor_info *t = nu_gguf_tensor(g, i);
        uint8_t *bytes = malloc(t->size);
        NT_OK(nu_buffer_read(moved, offsets[i], bytes, t->size));
        assert_memory_equal(bytes, (const uint8_t *)fb + t->offset, t->size);
        free(bytes);
    }
    const char *unknown[2] = {"token_embd.weight", "nope"};
    nu_buffer *none = (nu_buffer *)1;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_gguf_to_device(g, unknown, 2, NULL, &none, NULL));
    assert_null(none);
    assert_non_null(strstr(nu_error_message(d), "'nope'"));
    nu_gguf_close(g); /* the moved buffer stays valid */
    uint8_t first[16];
    NT_OK(nu_buffer_read(moved, 0, first, sizeof first));
    nu_buffer_free(moved);
    nt_close(d);
}

/* Bad files through nu_gguf_open: the path in the message, nothing kept. */
static void open_refusals(void **state)
{
    nu_device *d = nt_open();
    nu_gguf *g = (nu_gguf *)1;
    NT_STATUS(NU_ERROR_IO, nu_gguf_open(d, "/nonexistent/model.gguf", &g));
    assert_null(g);
    assert_non_null(strstr(nu_error_message(d), "/nonexistent/model.gguf"));
    NT_STATUS(NU_ERROR_IO, nu_gguf_open(d, nt_tmp_dir(), &g));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_gguf_open(d, NULL, &g));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_gguf_open(NULL, "x", &g));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_gguf_parse(NULL, 3, &g));
    const char *path = tmp_path("bad.gguf");
    nu_memory_stats before, after;
    nu_memory_get_stats(d, &before);
    buf cases[3] = {{0}, {0}, {0}};
    b_header(&cases[1], 1, 0, 0);
    b_header(&cases[2], 3, 1, 0), b_tensor(&cases[2], "t", 1, (uint64_t[]){4}, 0, 0);
    static const char *const needles[3] = {"shorter than the magic", "version 1", "tensor 't'"};
    for (int i = 0; i < 3; i++) {
        FILE *w = fopen(path, "wb");
        assert_non_null(w);
        if (cases[i].n)
            assert_int_equal(fwrite(cases[i].p, 1, cases[i].n, w), cases[i].n);
        fclose(w);
        NT_STATUS(NU_ERROR_FORMAT, nu_gguf_open(d, path, &g));
        assert_null(g);
        const char *msg = nu_error_message(d);
        if (!strstr(msg, path) || !strstr(msg, needles[i]))
            fail_msg("case %d: message \"%s\" lacks the path or \"%s\"", i, msg, needles[i]);
        free(cases[i].p);
    }
    nu_memory_get_stats(d, &after);
    assert_int_equal(after.active, before.active); /* the mappings were released */
    assert_int_equal(after.buffers, before.buffers);
    unlink(path);
    nt_close(d);
}

/* A file mixing every block format nuvec reads, a tensor each (and an F16 one), opened on a device
 * as it is: each view has its tensor's dtype, and nu_op_copy dequantizes it on the GPU, from the
 * mapping, to exactly nu_dequantize's values of its bytes. */
static void a_file_mixing_every_block_format(void **state)
{
    (void)state;
    static const nu_dtype dtypes[11] = {NU_DTYPE_F16, NU_DTYPE_Q8_0, NU_DTYPE_Q4_0, NU_DTYPE_Q4_1, NU_DTYPE_Q5_0,
                                        NU_DTYPE_Q5_1, NU_DTYPE_Q4_K, NU_DTYPE_Q5_K, NU_DTYPE_Q6_K, NU_DTYPE_IQ4_NL,
                                        NU_DTYPE_IQ4_XS};
    const uint64_t rows = 3, cols = 512;
    float *x = malloc(rows * cols * sizeof *x), *want = malloc(rows * cols * sizeof *want);
    uint8_t *bytes = malloc(rows * cols * 2);
    assert_true(x && want && bytes);
    const char *path = tmp_path("mixed_formats.gguf");
    gguf_writer *w;
    NT_OK(gguf_writer_new(0, &w));
    NT_OK(gguf_writer_u32(w, "test.tensors", 11));
    char names[11][16];
    for (int i = 0; i < 11; i++) {
        snprintf(names[i], sizeof names[i], "t%d", i);
        NT_OK(gguf_writer_tensor(w, names[i], dtypes[i], 2, (uint64_t[]){rows, cols}));
    }
    NT_OK(gguf_writer_begin(w, path));
    for (int i = 0; i < 11; i++) {
        for (uint64_t e = 0; e < rows * cols; e++)
            x[e] = sinf((float)(e * 7 + (uint64_t)i * 13)) * (float)(1 + e % 5);
        uint64_t size = rows * cols / nu_dtype_block_elements(dtypes[i]) * nu_dtype_block_bytes(dtypes[i]);
        NT_OK(nu_quantize(dtypes[i], x, bytes, rows * cols, NULL));
        NT_OK(gguf_writer_data(w, bytes, (size_t)size));
    }
    NT_OK(gguf_writer_finish(w));
    gguf_writer_free(w);

    nu_device *d = nt_open();
    nu_gguf *g;
    NT_OK(nu_gguf_open(d, path, &g));
    const void *fb;
    NT_OK(nu_buffer_contents(nu_gguf_buffer(g), &fb));
    nu_buffer *out;
    NT_OK(nu_buffer_new(d, rows * cols * 4, NU_STORAGE_SHARED, &out));
    nu_tensor dst = nu_tensor_make(out, 0, NU_DTYPE_F32, 2, (int64_t[]){(int64_t)rows, (int64_t)cols});
    for (int i = 0; i < 11; i++) {
        const nu_gguf_tensor_info *ti = nu_gguf_find_tensor(g, names[i]);
        assert_int_equal(ti->dtype, dtypes[i]);
        nu_tensor v;
        NT_OK(nu_gguf_tensor_view(g, names[i], &v));
        assert_int_equal(v.dtype, dtypes[i]);
        nu_commands *c;
        NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
        NT_OK(nu_op_copy(c, &dst, &v));
        NT_OK(nu_commands_commit(c));
        NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
        nu_commands_free(c);
        NT_OK(nu_buffer_read(out, 0, x, rows * cols * 4));
        NT_OK(nu_dequantize(dtypes[i], (const uint8_t *)fb + ti->offset, want, rows * cols));
        for (uint64_t e = 0; e < rows * cols; e++)
            if (memcmp(&x[e], &want[e], 4))
                fail_msg("%s tensor, element %llu: GPU %.9g, CPU %.9g", nu_dtype_name(dtypes[i]), (unsigned long long)e,
                         (double)x[e], (double)want[e]);
    }
    nu_buffer_free(out);
    nu_gguf_close(g);
    nt_close(d);
    unlink(path);
    free(x);
    free(want);
    free(bytes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_metadata_type),
        cmocka_unit_test(typed_getters),
        cmocka_unit_test(tensor_infos_and_views),
        cmocka_unit_test(prefixes_and_mutations_fail_cleanly),
        cmocka_unit_test(malformed_files_are_refused),
        cmocka_unit_test(every_allocation_fails_cleanly),
        cmocka_unit_test(f16_and_bf16_conversions),
        cmocka_unit_test(writer_round_trip),
        cmocka_unit_test(make_gguf_tiny_reads_back),
        cmocka_unit_test(real_models_metadata_and_values),
        cmocka_unit_test(views_and_moves_on_a_device),
        cmocka_unit_test(a_file_mixing_every_block_format),
        cmocka_unit_test(open_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
