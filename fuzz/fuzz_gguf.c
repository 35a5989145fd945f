/* fuzz_gguf.c: libFuzzer target for the GGUF reader (built with -DNUVEC_FUZZ=ON; `make fuzz-smoke`,
 * `make fuzz`). Parses the input as a whole file, then reads back everything a parsed file offers,
 * checking what the reader promises: tensors inside the input, not overlapping, each found under
 * its name, with a consistent type and size; every metadata entry found under its key, every
 * array element (nested arrays walked to the bottom) inside the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nuvec/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond))                                                                           \
            abort();                                                                           \
    } while (0)

static const uint8_t *base;
static size_t total;
static volatile uint8_t sink;

static void inside(const void *p, uint64_t n)
{
    const uint8_t *c = p;
    CHECK(c >= base && n <= total && (uint64_t)(c - base) <= total - n);
    if (n) /* ASan: the first and last bytes are readable */
        sink ^= c[0] ^ c[n - 1];
}

static void walk(const nu_gguf_value *v, int depth)
{
    CHECK(depth <= NU_GGUF_MAX_DEPTH + 1);
    CHECK((unsigned)v->type < NU_GGUF_TYPE_COUNT);
    if (v->type == NU_GGUF_STRING)
        inside(v->string, v->length);
    if (v->type != NU_GGUF_ARRAY)
        return;
    CHECK(depth < NU_GGUF_MAX_DEPTH);
    /* Every element of small arrays; the first and last of large ones. */
    for (uint64_t i = 0; i < v->length; i = (v->length > 64 && i == 0) ? v->length - 1 : i + 1) {
        nu_gguf_value e;
        CHECK(nu_gguf_array_get(v, i, &e) == NU_OK);
        CHECK(e.type == v->element_type);
        if (e.type == NU_GGUF_STRING) {
            const char *s;
            uint64_t len;
            CHECK(nu_gguf_array_string(v, i, &s, &len) == NU_OK);
            CHECK(s == e.string && len == e.length);
        }
        walk(&e, depth + 1);
    }
    nu_gguf_value e;
    CHECK(nu_gguf_array_get(v, v->length, &e) == NU_ERROR_OUT_OF_RANGE);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nu_gguf *g = NULL;
    nu_status s = nu_gguf_parse(data, size, &g);
    CHECK(s == NU_OK || s == NU_ERROR_FORMAT);
    CHECK((s == NU_OK) == (g != NULL));
    if (!g)
        return 0;
    base = data;
    total = size;
    CHECK(nu_gguf_version(g) == 2 || nu_gguf_version(g) == 3);
    uint32_t a = nu_gguf_alignment(g);
    CHECK(a && !(a & (a - 1)));
    for (uint64_t i = 0; i < nu_gguf_kv_count(g); i++) {
        const char *key;
        nu_gguf_value v, f;
        CHECK(nu_gguf_kv(g, i, &key, &v) == NU_OK);
        CHECK(key && nu_gguf_find(g, key, &f) == NU_OK);
        CHECK(f.type == v.type && f.length == v.length && f.string == v.string && f.data == v.data &&
              f.element_type == v.element_type && f.nu__index == v.nu__index);
        walk(&v, 0);
        uint32_t u;
        float x;
        (void)nu_gguf_get_u32(g, key, NULL, &u);
        (void)nu_gguf_get_f32(g, key, NULL, &x);
    }
    uint64_t n = nu_gguf_tensor_count(g);
    for (uint64_t i = 0; i < n; i++) {
        const nu_gguf_tensor_info *t = nu_gguf_tensor(g, i);
        CHECK(t && t->name && t->name[0] && t->rank <= NU_GGUF_MAX_RANK);
        CHECK(t->offset >= nu_gguf_data_offset(g) && (t->offset - nu_gguf_data_offset(g)) % a == 0);
        CHECK(t->size > 0 && t->offset <= size && t->size <= size - t->offset);
        inside(data + t->offset, t->size);
        CHECK(nu_gguf_find_tensor(g, t->name) == t);
        CHECK(strcmp(t->type_name, nu_gguf_ggml_type_name(t->ggml_type)) == 0);
        nu_tensor view;
        nu_status vs = nu_gguf_tensor_view_in(g, t->name, NULL, 0, &view);
        CHECK(vs == (t->dtype == NU_DTYPE_COUNT ? NU_ERROR_UNSUPPORTED : NU_OK));
        if (vs == NU_OK) {
            uint64_t bytes = nu_dtype_block_bytes(t->dtype), elements = 1;
            for (uint32_t k = 0; k < t->rank; k++)
                elements *= t->shape[k]; /* no overflow: the reader checked */
            CHECK(t->size == elements / nu_dtype_block_elements(t->dtype) * bytes);
        }
        for (uint64_t j = 0; j < i && n < 256; j++) { /* no two overlap */
            const nu_gguf_tensor_info *o = nu_gguf_tensor(g, j);
            CHECK(o->offset + o->size <= t->offset || t->offset + t->size <= o->offset);
        }
    }
    CHECK(nu_gguf_tensor(g, n) == NULL);
    (void)nu_gguf_find_tensor(g, "");
    (void)nu_gguf_has(g, "general.alignment");
    nu_gguf_close(g);
    return 0;
}
