/* test_safetensors.c: the safetensors parser and writer (no device needed): a round trip of
 * every dtype, a sparse multi-GiB file, every class of malformed header, the writer's
 * refusals, and host allocation failures; then on a device: files opened (mapped), tensors
 * bound in place and moved to device memory (all, or chosen ones), compared byte for byte, and
 * bad files refused through nu_safetensors_open. */
#include "harness.h"

/* The safetensors dtypes are the plain ones, before GGUF's block dtypes in nu_dtype. */
#define ST_DTYPES NU_DTYPE_Q8_0

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/host.h"

static char *tmp_path(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", nt_tmp_dir(), name);
    return path;
}

/* The whole file at `path` (free() it), its size in *size. */
static uint8_t *read_all(const char *path, size_t *size)
{
    struct stat s;
    assert_int_equal(stat(path, &s), 0);
    *size = (size_t)s.st_size;
    return (uint8_t *)nt_read_file(path);
}

/* A file made of the 8-byte little-endian `length`, the header text and `data` zero bytes. */
static uint8_t *file_with_length(uint64_t length, const char *header, size_t data, size_t *size)
{
    size_t n = strlen(header);
    *size = 8 + n + data;
    uint8_t *f = calloc(1, *size + 1);
    assert_non_null(f);
    for (int i = 0; i < 8; i++)
        f[i] = (uint8_t)(length >> (8 * i));
    memcpy(f + 8, header, n);
    return f;
}

static uint8_t *file_of(const char *header, size_t data, size_t *size)
{
    return file_with_length(strlen(header), header, data, size);
}

/* Parses the bytes, expecting NU_ERROR_FORMAT with a message that contains `needle`. */
static void expect_bad_bytes(const uint8_t *bytes, size_t size, const char *needle)
{
    nu_safetensors *st = (nu_safetensors *)1;
    NT_STATUS(NU_ERROR_FORMAT, nu_safetensors_parse(bytes, size, &st));
    assert_null(st);
    const char *msg = nu_error_message(NULL);
    if (!strstr(msg, needle))
        fail_msg("message \"%s\" does not mention \"%s\"", msg, needle);
}

static void expect_bad(const char *header, size_t data, const char *needle)
{
    size_t size;
    uint8_t *f = file_of(header, data, &size);
    expect_bad_bytes(f, size, needle);
    free(f);
}

static nu_safetensors *parse_ok(const char *header, size_t data)
{
    size_t size;
    uint8_t *f = file_of(header, data, &size);
    nu_safetensors *st = NULL;
    NT_OK(nu_safetensors_parse(f, size, &st));
    free(f); /* the parser keeps no pointer into the bytes */
    return st;
}

static void dtypes_have_names_and_sizes(void **state)
{
    static const char *names[] = {"BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16",
                                  "BF16", "I32", "U32", "F32", "I64", "U64", "F64", "Q8_0", "Q4_0", "Q4_0_SOA",
                                  "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "Q6_K_SOA"};
    static const size_t sizes[] = {1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    static const uint32_t block_elements[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 32, 32, 32,
                                              32, 32, 32, 256, 256, 256, 32, 256, 256};
    static const uint32_t block_bytes[] = {1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8, 34, 18, 18,
                                           20, 22, 24, 144, 176, 210, 18, 136, 210};
    assert_int_equal(sizeof names / sizeof *names, NU_DTYPE_COUNT);
    for (int i = 0; i < NU_DTYPE_COUNT; i++) {
        assert_string_equal(nu_dtype_name((nu_dtype)i), names[i]);
        assert_int_equal(nu_dtype_size((nu_dtype)i), sizes[i]);
        assert_int_equal(nu_dtype_block_elements((nu_dtype)i), block_elements[i]);
        assert_int_equal(nu_dtype_block_bytes((nu_dtype)i), block_bytes[i]);
    }
    assert_string_equal(nu_dtype_name(NU_DTYPE_COUNT), "?");
    assert_string_equal(nu_dtype_name((nu_dtype)-1), "?");
    assert_int_equal(nu_dtype_size(NU_DTYPE_COUNT), 0);
    assert_int_equal(nu_dtype_size((nu_dtype)-1), 0);
}

/* One tensor of every dtype (ranks 0 to 4, one of them zero-size), metadata with characters
 * JSON must escape; read back, every field and every byte. */
static void every_dtype_round_trips(void **state)
{
    nu_tensor_write w[ST_DTYPES + 1];
    char names[ST_DTYPES + 1][32];
    uint8_t *data[ST_DTYPES + 1];
    uint64_t seed = 7;
    for (int i = 0; i <= ST_DTYPES; i++) {
        memset(&w[i], 0, sizeof w[i]);
        nu_dtype dt = (nu_dtype)(i % ST_DTYPES);
        snprintf(names[i], sizeof names[i], "layer.%d.%s", i, nu_dtype_name(dt));
        w[i].name = names[i];
        w[i].dtype = dt;
        w[i].rank = (uint32_t)(i % 5);
        uint64_t elements = 1;
        for (uint32_t k = 0; k < w[i].rank; k++)
            elements *= (w[i].shape[k] = 1 + (uint64_t)((i + k) % 4));
        if (i == ST_DTYPES) { /* zero-size, between others in the file */
            w[i].rank = 3;
            w[i].shape[1] = 0;
            elements = 0;
        }
        size_t bytes = elements * nu_dtype_size(dt);
        data[i] = malloc(bytes + 1);
        for (size_t b = 0; b < bytes; b++)
            data[i][b] = (uint8_t)nt_rand(&seed);
        w[i].data = data[i];
    }
    /* The zero-size tensor goes in the middle. */
    nu_tensor_write z = w[ST_DTYPES];
    memmove(&w[8], &w[7], (ST_DTYPES - 7) * sizeof w[0]);
    w[7] = z;
    const char *keys[] = {"format", "quote\"back\\slash\n", ""};
    const char *values[] = {"pt", "h\xc3\xa9llo \"x\"\t", "empty key"};
    const char *path = tmp_path("roundtrip.safetensors");
    NT_OK(nu_safetensors_write(path, w, ST_DTYPES + 1, keys, values, 3));

    size_t size;
    uint8_t *f = read_all(path, &size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | f[i];
    assert_int_equal((8 + n) % 8, 0); /* the data section is aligned */
    assert_int_equal(f[8], '{');
    nu_safetensors *st;
    NT_OK(nu_safetensors_parse(f, size, &st));
    assert_int_equal(nu_safetensors_count(st), ST_DTYPES + 1);
    assert_int_equal(nu_safetensors_data_size(st), size - 8 - n);
    uint64_t at = 8 + n;
    for (int i = 0; i <= ST_DTYPES; i++) {
        const nu_tensor_info *t = nu_safetensors_tensor(st, (size_t)i);
        assert_non_null(t);
        assert_string_equal(t->name, w[i].name); /* file order is the written order */
        assert_int_equal(t->dtype, w[i].dtype);
        assert_int_equal(t->rank, w[i].rank);
        uint64_t elements = 1;
        for (uint32_t k = 0; k < NU_TENSOR_MAX_RANK; k++) {
            assert_int_equal(t->shape[k], k < t->rank ? w[i].shape[k] : 0);
            if (k < t->rank)
                elements *= t->shape[k];
        }
        assert_int_equal(t->size, elements * nu_dtype_size(t->dtype));
        assert_int_equal(t->offset, at);
        assert_memory_equal(f + t->offset, w[i].data, t->size);
        assert_ptr_equal(nu_safetensors_find(st, w[i].name), t);
        at += t->size;
    }
    assert_int_equal(at, size);
    assert_null(nu_safetensors_tensor(st, ST_DTYPES + 1));
    assert_null(nu_safetensors_find(st, "layer.0"));
    assert_null(nu_safetensors_find(st, NULL));
    for (int i = 0; i < 3; i++)
        assert_string_equal(nu_safetensors_metadata(st, keys[i]), values[i]);
    assert_null(nu_safetensors_metadata(st, "missing"));
    nu_safetensors_close(st);
    nu_safetensors_close(NULL);
    free(f);
    for (int i = 0; i <= ST_DTYPES; i++)
        free(data[i]);
    unlink(path);
}

/* The writer's header is what the official library writes (and reads). */
static void header_is_the_official_layout(void **state)
{
    float v[2] = {1.0f, -2.0f};
    nu_tensor_write w = {.name = "a", .dtype = NU_DTYPE_F32, .rank = 1, .shape = {2}, .data = v};
    const char *k = "format", *val = "pt";
    const char *path = tmp_path("layout.safetensors");
    NT_OK(nu_safetensors_write(path, &w, 1, &k, &val, 1));
    size_t size;
    uint8_t *f = read_all(path, &size);
    const char *json = "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
                       "\"data_offsets\":[0,8]}}";
    size_t n = strlen(json), padded = (n + 7) / 8 * 8;
    assert_int_equal(size, 8 + padded + 8);
    assert_int_equal(f[0] | f[1] << 8, padded);
    assert_memory_equal(f + 8, json, n);
    for (size_t i = n; i < padded; i++)
        assert_int_equal(f[8 + i], ' ');
    assert_memory_equal(f + 8 + padded, v, 8);
    free(f);
    unlink(path);
}

/* Parsing sorts by offset (not JSON order) and accepts what the format allows: empty names,
 * zero-size tensors, no tensors, whitespace around and inside the object. */
static void parses_what_the_format_allows(void **state)
{
    nu_safetensors *st = parse_ok("{\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]},"
                                  "\"\":{\"data_offsets\":[0,2],\"shape\":[1],\"dtype\":\"BF16\"},"
                                  "\"z\":{\"dtype\":\"F64\",\"shape\":[0,5],\"data_offsets\":[4,4]}}  \n\t",
                                  4);
    assert_int_equal(nu_safetensors_count(st), 3);
    assert_string_equal(nu_safetensors_tensor(st, 0)->name, "");
    assert_string_equal(nu_safetensors_tensor(st, 1)->name, "b");
    assert_string_equal(nu_safetensors_tensor(st, 2)->name, "z");
    assert_int_equal(nu_safetensors_tensor(st, 2)->size, 0);
    assert_ptr_equal(nu_safetensors_find(st, ""), nu_safetensors_tensor(st, 0));
    assert_null(nu_safetensors_metadata(st, "x"));
    nu_safetensors_close(st);

    st = parse_ok("{}", 0);
    assert_int_equal(nu_safetensors_count(st), 0);
    assert_null(nu_safetensors_find(st, "a"));
    nu_safetensors_close(st);
    st = parse_ok("{ \"__metadata__\" : { } , \"s\" : { \"dtype\" : \"I64\" , \"shape\" : [ ] ,"
                  " \"data_offsets\" : [ 0 , 8 ] } }",
                  8);
    assert_int_equal(nu_safetensors_tensor(st, 0)->rank, 0);
    assert_int_equal(nu_safetensors_tensor(st, 0)->size, 8);
    nu_safetensors_close(st);

    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_safetensors_parse("", 0, NULL));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_safetensors_parse(NULL, 8, &st));
    assert_null(st);
    assert_int_equal(nu_safetensors_count(NULL), 0);
    assert_null(nu_safetensors_tensor(NULL, 0));
    assert_null(nu_safetensors_find(NULL, "a"));
    assert_null(nu_safetensors_metadata(NULL, "a"));
}

#define T(dtype, shape, offsets) "{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":" offsets "}"
#define A8 "\"a\":" T("F32", "[2]", "[0,8]")

static void malformed_headers_are_refused(void **state)
{
    size_t size;
    uint8_t *f = file_of("{}", 0, &size);
    expect_bad_bytes(f, 0, "shorter");
    expect_bad_bytes(f, 7, "shorter");
    free(f);
    f = file_with_length(100, "{}", 10, &size);
    expect_bad_bytes(f, size, "beyond the end of the file");
    free(f);
    f = file_with_length(UINT64_MAX, "{}", 0, &size);
    expect_bad_bytes(f, size, "absurd");
    free(f);
    f = file_with_length(100000001, "{}", 0, &size);
    expect_bad_bytes(f, size, "absurd");
    free(f);

    expect_bad("", 0, "not valid JSON");
    expect_bad("{\"a\":", 0, "not valid JSON");
    expect_bad("{\"a\":{\"dtype\":\"F32\"", 0, "not valid JSON");
    expect_bad("{\"a\\", 0, "not valid JSON"); /* a string ending in a backslash, at the end */
    expect_bad("[1,2]", 0, "not a JSON object");
    expect_bad("\"text\"", 0, "not a JSON object");
    expect_bad(" {}", 0, "start with '{'");
    expect_bad("{} x", 0, "after its JSON object");
    f = file_with_length(3, "{}", 1, &size); /* a NUL after the object, inside the header */
    expect_bad_bytes(f, size, "after its JSON object");
    free(f);

    expect_bad("{\"a\":3}", 0, "entry is not a JSON object");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "missing field 'data_offsets'");
    expect_bad("{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "missing field 'dtype'");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "missing field 'shape'");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8, "unexpected");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "repeated");
    expect_bad("{\"a\":" T("F128", "[2]", "[0,8]") "}", 8, "unknown dtype 'F128'");
    expect_bad("{\"a\":" T("f32", "[2]", "[0,8]") "}", 8, "unknown dtype");
    expect_bad("{\"a\":{\"dtype\":32,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "'dtype' is not a string");
    expect_bad("{\"a\":" T("F32", "\"2\"", "[0,8]") "}", 8, "'shape' is not an array");
    expect_bad("{\"a\":" T("F32", "{}", "[0,8]") "}", 8, "'shape' is not an array");
    expect_bad("{\"a\":" T("F32", "[2]", "[8]") "}", 8, "'data_offsets' is not two integers");
    expect_bad("{\"a\":" T("F32", "[2]", "[0,8,8]") "}", 8, "'data_offsets' is not two integers");
    expect_bad("{\"a\":" T("F32", "[2]", "[\"0\",8]") "}", 8, "'data_offsets' is not two integers");
    expect_bad("{\"a\":" T("F32", "[2]", "[0,8.5]") "}", 8, "'data_offsets' is not two integers");
    expect_bad("{\"a\":" T("F32", "[2]", "[-1,8]") "}", 8, "'data_offsets' is not two integers");
    expect_bad("{\"a\":" T("F32", "[2]", "{\"0\":0,\"1\":8}") "}", 8, "'data_offsets' is not two integers");

    /* Shapes: integers in [0, 2^53), at most NU_TENSOR_MAX_RANK of them, product in range. */
    expect_bad("{\"a\":" T("F32", "[2.5]", "[0,10]") "}", 10, "shape[0] is not an integer");
    expect_bad("{\"a\":" T("F32", "[1,-2]", "[0,8]") "}", 8, "shape[1] is not an integer");
    expect_bad("{\"a\":" T("F32", "[true]", "[0,4]") "}", 4, "shape[0] is not an integer");
    expect_bad("{\"a\":" T("F32", "[null]", "[0,4]") "}", 4, "shape[0] is not an integer");
    expect_bad("{\"a\":" T("U8", "[9007199254740992]", "[0,0]") "}", 0, "shape[0] is not an integer");
    expect_bad("{\"a\":" T("U8", "[1e300]", "[0,0]") "}", 0, "shape[0] is not an integer");
    expect_bad("{\"a\":" T("U8", "[1,1,1,1,1,1,1,1,1]", "[0,1]") "}", 1, "rank too high");
    expect_bad("{\"a\":" T("U8", "[4294967296,4294967296,0]", "[0,0]") "}", 0, "overflows");
    expect_bad("{\"a\":" T("F32", "[4503599627370496,1024]", "[0,0]") "}", 0, "overflows");

    /* Byte ranges. */
    expect_bad("{\"a\":" T("F32", "[3]", "[0,8]") "}", 8, "span 8 bytes but shape x dtype F32 is 12");
    expect_bad("{\"a\":" T("F32", "[2]", "[8,0]") "}", 8, "begin 8 is after end 0");
    expect_bad("{\"a\":" T("F32", "[4]", "[0,16]") "}", 8, "beyond the data section");
    expect_bad("{" A8 ",\"b\":" T("F32", "[2]", "[4,12]") "}", 12, "overlap");
    expect_bad("{" A8 ",\"b\":" T("F32", "[2]", "[0,8]") "}", 8, "overlap");
    expect_bad("{" A8 ",\"z\":" T("F32", "[0]", "[4,4]") "}", 8, "overlap");
    expect_bad("{" A8 ",\"b\":" T("F32", "[2]", "[12,20]") "}", 20, "gap: data bytes 8..12");
    expect_bad("{\"b\":" T("F32", "[2]", "[4,12]") "}", 12, "gap: data bytes 0..4");
    expect_bad("{" A8 "}", 12, "gap: data bytes 8..12 (the end");
    expect_bad("{}", 1, "gap");
    expect_bad("{" A8 "," A8 "}", 8, "'a' appears twice");
    expect_bad("{" A8 ",\"a\":" T("F32", "[2]", "[8,16]") "}", 16, "'a' appears twice");

    /* Metadata: an object of strings, once. */
    expect_bad("{\"__metadata__\":{\"k\":1}," A8 "}", 8, "value of 'k' is not a string");
    expect_bad("{\"__metadata__\":{\"k\":null}}", 0, "is not a string");
    expect_bad("{\"__metadata__\":[\"k\"]}", 0, "'__metadata__' is not a JSON object");
    expect_bad("{\"__metadata__\":\"k\"}", 0, "'__metadata__' is not a JSON object");
    expect_bad("{\"__metadata__\":{},\"__metadata__\":{}}", 0, "'__metadata__' appears twice");
    expect_bad("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, "key 'k' appears twice");
}

/* Bytes the fuzzer would start from: every prefix and every single-byte change of a valid
 * file parses or fails with NU_ERROR_FORMAT, and never reads outside the bytes (ASan). */
static void prefixes_and_mutations_fail_cleanly(void **state)
{
    size_t size;
    uint8_t *valid = file_of("{\"__metadata__\":{\"k\":\"v\"}," A8 ",\"b\":" T("I16", "[1,2]", "[8,12]") "}", 12,
                             &size);
    for (size_t cut = 0; cut <= size; cut++) {
        uint8_t *copy = malloc(cut ? cut : 1);
        memcpy(copy, valid, cut);
        nu_safetensors *st = NULL;
        nu_status s = nu_safetensors_parse(copy, cut, &st);
        assert_true(s == (cut == size ? NU_OK : NU_ERROR_FORMAT));
        nu_safetensors_close(st);
        free(copy);
    }
    static const uint8_t swaps[] = {0, ' ', '"', '\\', '{', '}', '[', ']', ',', ':', '-', '9', 0xff};
    for (size_t i = 0; i < size; i++)
        for (size_t j = 0; j < sizeof swaps; j++) {
            uint8_t *copy = malloc(size);
            memcpy(copy, valid, size);
            copy[i] = swaps[j];
            nu_safetensors *st = NULL;
            nu_status s = nu_safetensors_parse(copy, size, &st);
            assert_true(s == NU_OK || s == NU_ERROR_FORMAT);
            for (size_t k = 0; k < nu_safetensors_count(st); k++) {
                const nu_tensor_info *t = nu_safetensors_tensor(st, k);
                assert_true(t->offset + t->size <= size);
                assert_ptr_equal(nu_safetensors_find(st, t->name), t);
            }
            nu_safetensors_close(st);
            free(copy);
        }
    free(valid);
}

/* A 4 GiB tensor without data is a hole: written at once, and parsed from a mapping of the
 * file that only touches the header. */
static void sparse_large_file(void **state)
{
    uint8_t tail[16];
    for (int i = 0; i < 16; i++)
        tail[i] = (uint8_t)(i * 17 + 3);
    nu_tensor_write w[3] = {
        {.name = "big", .dtype = NU_DTYPE_F32, .rank = 2, .shape = {1 << 16, 1 << 14}},
        {.name = "tail", .dtype = NU_DTYPE_U8, .rank = 1, .shape = {16}, .data = tail},
        {.name = "end", .dtype = NU_DTYPE_BF16, .rank = 1, .shape = {1 << 20}},
    };
    const char *path = tmp_path("sparse.safetensors");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    NT_OK(nu_safetensors_write(path, w, 3, NULL, NULL, 0));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    assert_true(seconds < 5.0);
    struct stat s;
    assert_int_equal(stat(path, &s), 0);
    uint64_t big = 4ull << 30, end = 2ull << 20;
    assert_true((uint64_t)s.st_size > big + 16 + end);
    assert_true((uint64_t)s.st_blocks * 512 < (64u << 20)); /* holes, not 4 GiB of zeros */

    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    void *map = mmap(NULL, (size_t)s.st_size, PROT_READ, MAP_SHARED, fd, 0);
    assert_true(map != MAP_FAILED);
    close(fd);
    nu_safetensors *st;
    NT_OK(nu_safetensors_parse(map, (size_t)s.st_size, &st));
    assert_int_equal(nu_safetensors_count(st), 3);
    const nu_tensor_info *b = nu_safetensors_find(st, "big"), *t = nu_safetensors_find(st, "tail");
    const nu_tensor_info *e = nu_safetensors_find(st, "end");
    assert_int_equal(b->size, big);
    assert_int_equal(t->offset, b->offset + big);
    assert_int_equal(e->offset + e->size, (uint64_t)s.st_size);
    assert_int_equal(nu_safetensors_data_size(st), big + 16 + end);
    assert_memory_equal((const uint8_t *)map + t->offset, tail, 16);
    assert_int_equal(((const uint8_t *)map)[e->offset + e->size - 1], 0);
    nu_safetensors_close(st);
    munmap(map, (size_t)s.st_size);
    unlink(path);
}

static void writer_refusals(void **state)
{
    uint8_t four[4] = {1, 2, 3, 4};
    nu_tensor_write ok = {.name = "a", .dtype = NU_DTYPE_U8, .rank = 1, .shape = {4}, .data = four};
    const char *path = tmp_path("refused.safetensors");
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_safetensors_write(NULL, &ok, 1, NULL, NULL, 0));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_safetensors_write(path, NULL, 1, NULL, NULL, 0));

    NT_STATUS(NU_ERROR_IO, nu_safetensors_write(nt_tmp_dir(), &ok, 1, NULL, NULL, 0));
    assert_non_null(strstr(nu_error_message(NULL), nt_tmp_dir()));
    assert_non_null(strstr(nu_error_message(NULL), "Is a directory"));
    NT_STATUS(NU_ERROR_IO, nu_safetensors_write("/nonexistent-dir/x.safetensors", &ok, 1, NULL, NULL, 0));
    assert_non_null(strstr(nu_error_message(NULL), "No such file"));
    if (access("/dev/full", W_OK) == 0) { /* every write fails with ENOSPC */
        NT_STATUS(NU_ERROR_IO, nu_safetensors_write("/dev/full", &ok, 1, NULL, NULL, 0));
        assert_non_null(strstr(nu_error_message(NULL), "No space left"));
    }

    nu_tensor_write two[2] = {ok, ok};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_safetensors_write(path, two, 2, NULL, NULL, 0));
    assert_non_null(strstr(nu_error_message(NULL), "'a' appears twice"));
    const char *bad_names[] = {NULL, "", "__metadata__"};
    for (int i = 0; i < 3; i++) {
        two[1].name = bad_names[i];
        NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_safetensors_write(path, two, 2, NULL, NULL, 0));
    }
    nu_tensor_write t = ok;
    t.dtype = NU_DTYPE_COUNT;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_safetensors_write(path, &t, 1, NULL, NULL, 0));
    assert_non_null(strstr(nu_error_message(NULL), "not a safetensors dtype"));
    t.dtype = NU_DTYPE_Q4_0; /* GGUF's block quantization has no safetensors spelling */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_safetensors_write(path, &t, 1, NULL, NULL, 0));
    t.dtype = NU_DTYPE_Q4_0_SOA; /* nor nuvec's repacked Q4_0 */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_safetensors_write(path, &t, 1, NULL, NULL, 0));
    t = ok;
    t.rank = NU_TENSOR_MAX_RANK + 1;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_safetensors_write(path, &t, 1, NULL, NULL, 0));
    t = (nu_tensor_write){.name = "huge", .dtype = NU_DTYPE_F32, .rank = 2, .shape = {1ull << 32, 1ull << 32}};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_safetensors_write(path, &t, 1, NULL, NULL, 0));
    assert_non_null(strstr(nu_error_message(NULL), "overflows"));
    t.rank = 1;
    t.shape[0] = 1ull << 53; /* beyond exact JSON numbers (and what the parser accepts) */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_safetensors_write(path, &t, 1, NULL, NULL, 0));
    t.dtype = NU_DTYPE_U8;
    t.shape[0] = (1ull << 53) - 1;
    nu_tensor_write pair[2] = {t, ok}; /* each fits; their sum does not */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_safetensors_write(path, pair, 2, NULL, NULL, 0));

    const char *keys[] = {"k", "k"}, *values[] = {"1", NULL};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_safetensors_write(path, &ok, 1, keys, values, 2));
    values[1] = "2";
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_safetensors_write(path, &ok, 1, keys, values, 2));
    assert_non_null(strstr(nu_error_message(NULL), "'k' appears twice"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_safetensors_write(path, &ok, 1, NULL, values, 1));
    unlink(path);
}

/* Every host allocation of parsing (and of the writer's name check) fails in turn: each gives
 * NU_ERROR_HOST_OUT_OF_MEMORY and leaks nothing. cJSON allocates with malloc (its hooks are
 * process-wide and nuvec leaves them alone), so these are nuvec's own allocations. */
static void every_allocation_fails_cleanly(void **state)
{
    size_t size;
    uint8_t *f = file_of("{\"__metadata__\":{\"k\":\"v\",\"w\":\"x\"}," A8 ",\"b\":" T("I16", "[1,2]", "[8,12]")
                         ",\"c\":" T("U8", "[0]", "[12,12]") "}",
                         12, &size);
    int64_t baseline = nu__host_live();
    int failures = 0;
    for (long k = 0;; k++) {
        nu_safetensors *st = (nu_safetensors *)1;
        nu__host_fail_after(k, 0);
        nu_status s = nu_safetensors_parse(f, size, &st);
        int failed = nu__host_failed();
        nu__host_fail_after(-1, 0);
        if (!failed) {
            NT_OK(s);
            assert_int_equal(nu_safetensors_count(st), 3);
            assert_string_equal(nu_safetensors_metadata(st, "w"), "x");
            nu_safetensors_close(st);
            break;
        }
        failures++;
        if (s != NU_ERROR_HOST_OUT_OF_MEMORY)
            fail_msg("allocation %ld failed but parse returned %s: %s", k, nu_status_string(s),
                     nu_error_message(NULL));
        assert_null(st);
        assert_int_equal(nu__host_live(), baseline);
    }
    print_message("parse: %d allocation sites failed in turn\n", failures);
    assert_int_equal(failures, 3); /* the handle, the header's copy, the tables */
    assert_int_equal(nu__host_live(), baseline);

    nu_tensor_write w[2] = {{.name = "a", .dtype = NU_DTYPE_U8, .rank = 0}, {.name = "b", .dtype = NU_DTYPE_U8}};
    const char *path = tmp_path("oom.safetensors");
    nu__host_fail_after(0, 0);
    NT_STATUS(NU_ERROR_HOST_OUT_OF_MEMORY, nu_safetensors_write(path, w, 2, NULL, NULL, 0));
    nu__host_fail_after(-1, 0);
    assert_int_equal(nu__host_live(), baseline);
    NT_OK(nu_safetensors_write(path, w, 2, NULL, NULL, 0));
    assert_int_equal(nu__host_live(), baseline);
    unlink(path);
    free(f);
}

/* ---- on a device: nu_safetensors_open and nu_safetensors_to_device ------------------------ */

/* A file of several tensors of different dtypes and odd sizes with known bytes. */
static const char *write_model(uint8_t **data, uint64_t *sizes, size_t *count)
{
    static const nu_dtype dt[] = {NU_DTYPE_F32, NU_DTYPE_F16, NU_DTYPE_I8, NU_DTYPE_BF16, NU_DTYPE_F64};
    static const char *const names[] = {"embed", "layers.0.attn", "layers.0.bias", "layers.1.mlp", "norm"};
    static const uint64_t shapes[][2] = {{300, 64}, {17, 33}, {1, 1001}, {250, 250}, {1, 7}};
    *count = 5;
    nu_tensor_write w[5];
    uint64_t seed = 42;
    for (size_t i = 0; i < 5; i++) {
        sizes[i] = shapes[i][0] * shapes[i][1] * nu_dtype_size(dt[i]);
        data[i] = malloc(sizes[i]);
        for (uint64_t j = 0; j < sizes[i]; j++)
            data[i][j] = (uint8_t)nt_rand(&seed);
        w[i] = (nu_tensor_write){.name = names[i], .dtype = dt[i], .rank = 2, .shape = {shapes[i][0], shapes[i][1]},
                                 .data = data[i]};
    }
    const char *path = tmp_path("model.safetensors");
    NT_OK(nu_safetensors_write(path, w, 5, NULL, NULL, 0));
    return path;
}

static void open_and_move_to_device(void **state)
{
    nu_device *d = nt_open();
    uint8_t *data[5];
    uint64_t sizes[5];
    size_t count;
    const char *path = write_model(data, sizes, &count);
    nu_safetensors *f;
    NT_OK(nu_safetensors_open(d, path, &f));
    assert_int_equal(nu_safetensors_count(f), count);
    nu_buffer *file = nu_safetensors_buffer(f);
    assert_true(nu_buffer_is_mapped_file(file));
    assert_true(nu_buffer_is_read_only(file));

    /* Every tensor, in one pass; each at an aligned offset. */
    nu_buffer *all;
    uint64_t offsets[5];
    NT_OK(nu_safetensors_to_device(f, NULL, 0, &(nu_move_options){.chunk_size = 4096, .threads = 2}, &all, offsets));
    assert_int_equal(nu_buffer_storage(all), NU_STORAGE_PRIVATE);
    for (size_t i = 0; i < count; i++) {
        const nu_tensor_info *t = nu_safetensors_tensor(f, i);
        size_t k = 0;
        while (k < count && sizes[k] != t->size)
            k++;
        assert_true(k < count);
        assert_int_equal(offsets[i] % 16, 0);
        uint8_t *out = malloc(t->size);
        NT_OK(nu_buffer_read(all, offsets[i], out, t->size));
        assert_memory_equal(out, data[k], t->size);
        free(out);
    }
    /* Chosen tensors, in the order given. */
    const char *pick[] = {"norm", "layers.0.attn"};
    nu_buffer *some;
    NT_OK(nu_safetensors_to_device(f, pick, 2, NULL, &some, offsets));
    assert_int_equal(offsets[0], 0);
    uint8_t out[2000];
    NT_OK(nu_buffer_read(some, offsets[0], out, sizes[4]));
    assert_memory_equal(out, data[4], sizes[4]);
    NT_OK(nu_buffer_read(some, offsets[1], out, sizes[1]));
    assert_memory_equal(out, data[1], sizes[1]);
    /* A tensor bound in place: a GPU copy straight from the mapped file. */
    const nu_tensor_info *bias = nu_safetensors_find(f, "layers.0.bias");
    nu_buffer *copy;
    NT_OK(nu_buffer_new(d, bias->size, NU_STORAGE_SHARED, &copy));
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    NT_OK(nu_commands_copy(c, copy, 0, file, bias->offset, bias->size));
    NT_OK(nu_commands_commit(c));
    NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
    nu_commands_free(c);
    NT_OK(nu_buffer_read(copy, 0, out, bias->size));
    assert_memory_equal(out, data[2], bias->size);
    /* Refusals. */
    const char *unknown[] = {"norm", "nope"};
    nu_buffer *none = (nu_buffer *)1;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_safetensors_to_device(f, unknown, 2, NULL, &none, NULL));
    assert_null(none);
    assert_non_null(strstr(nu_error_message(NULL), "'nope'"));
    nu_buffer_free(copy);
    nu_buffer_free(some);
    nu_safetensors_close(f); /* buffers moved to the device stay valid */
    NT_OK(nu_buffer_read(all, offsets[0] ? 0 : 0, out, 16));
    nu_buffer_free(all);

    /* Parsed from memory: no device, no move. */
    size_t n;
    uint8_t *bytes = read_all(path, &n);
    NT_OK(nu_safetensors_parse(bytes, n, &f));
    assert_null(nu_safetensors_buffer(f));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_safetensors_to_device(f, NULL, 0, NULL, &none, NULL));
    nu_safetensors_close(f);
    free(bytes);
    for (size_t i = 0; i < count; i++)
        free(data[i]);
    unlink(path);
    nt_close(d);
}

/* Bad files through nu_safetensors_open: a clear status, the path in the message, nothing kept. */
static void open_refusals(void **state)
{
    nu_device *d = nt_open();
    nu_safetensors *f = (nu_safetensors *)1;
    NT_STATUS(NU_ERROR_IO, nu_safetensors_open(d, "/nonexistent/model.safetensors", &f));
    assert_null(f);
    NT_STATUS(NU_ERROR_IO, nu_safetensors_open(d, nt_tmp_dir(), &f));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_safetensors_open(d, NULL, &f));
    const char *path = tmp_path("bad.safetensors");
    static const struct {
        const char *bytes;
        size_t size;
        const char *needle;
    } bad[] = {
        {"", 0, "bad.safetensors"},
        {"\x10\0\0\0\0\0\0\0{}", 10, "beyond the end"},
        {"\x02\0\0\0\0\0\0\0{]", 10, "JSON"},
        {"\x2a\0\0\0\0\0\0\0{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 50, "a"},
    };
    nu_memory_stats before, after;
    nu_memory_get_stats(d, &before);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FILE *w = fopen(path, "wb");
        assert_non_null(w);
        assert_int_equal(fwrite(bad[i].bytes, 1, bad[i].size, w), bad[i].size);
        fclose(w);
        NT_STATUS(NU_ERROR_FORMAT, nu_safetensors_open(d, path, &f));
        assert_null(f);
        const char *msg = nu_error_message(d);
        if (!strstr(msg, path) || !strstr(msg, bad[i].needle))
            fail_msg("case %zu: message \"%s\" lacks the path or \"%s\"", i, msg, bad[i].needle);
    }
    nu_memory_get_stats(d, &after);
    assert_int_equal(after.active, before.active); /* the mappings were released */
    assert_int_equal(after.buffers, before.buffers);
    unlink(path);
    nt_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dtypes_have_names_and_sizes),
        cmocka_unit_test(every_dtype_round_trips),
        cmocka_unit_test(header_is_the_official_layout),
        cmocka_unit_test(parses_what_the_format_allows),
        cmocka_unit_test(malformed_headers_are_refused),
        cmocka_unit_test(prefixes_and_mutations_fail_cleanly),
        cmocka_unit_test(sparse_large_file),
        cmocka_unit_test(writer_refusals),
        cmocka_unit_test(every_allocation_fails_cleanly),
        cmocka_unit_test(open_and_move_to_device),
        cmocka_unit_test(open_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
