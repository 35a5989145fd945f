/* test_kernel.c: kernels from SPIR-V bytes and files, the reflection of bindings and workgroup
 * size, the in-memory and on-disk pipeline caches, bad input, and nuvec's own kernels. Running
 * kernels is test_commands.c's part.
 *
 * Some modules are assembled here word by word (a tiny assembler below), so that each test
 * says exactly what the SPIR-V declares. Every module that reaches Vulkan is valid: the
 * validation layer checks it and would fail the test. */
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vk/device.h"
#include "core/host.h"
#include "kernel/kernel.h"
#include "kernel/builtins.h"
#include "kernel/spirv.h"

/* ---- temporary directories and environment -------------------------------------------- */

static char tmp_root[512];

/* A fresh, empty directory under $NUVEC_TEST_TMP (or /tmp) for one test. */
static void tmp_dir(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", tmp_root, name);
    char cmd[2 * 1024 + 64];
    if ((size_t)snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", out, out) >= sizeof cmd)
        fail_msg("tmp_dir: the path %s is too long", out);
    assert_int_equal(system(cmd), 0);
}

static void rm_rf(const char *path)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    assert_int_equal(system(cmd), 0);
}

/* Regular files under `dir`, recursively. */
static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat s;
        if (stat(p, &s) != 0)
            continue;
        n += S_ISDIR(s.st_mode) ? count_files(p) : 1;
    }
    closedir(d);
    return n;
}

static bool exists(const char *path)
{
    struct stat s;
    return stat(path, &s) == 0;
}

static void write_bytes(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, size, f), size);
    assert_int_equal(fclose(f), 0);
}

static void *read_bytes(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc(n > 0 ? (size_t)n : 1);
    assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return p;
}

/* The cache directory the tests use unless they choose another. */
static char default_cache[600];

static int group_setup(void **state)
{
    const char *t = getenv("NUVEC_TEST_TMP");
    snprintf(tmp_root, sizeof tmp_root, "%s/test_kernel-%ld", t && *t ? t : "/tmp", (long)getpid());
    char cmd[700];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", tmp_root);
    if (system(cmd) != 0)
        return -1;
    snprintf(default_cache, sizeof default_cache, "%s/cache", tmp_root);
    setenv("NUVEC_CACHE_DIR", default_cache, 1); /* never the user's ~/.cache */
    return 0;
}

static int group_teardown(void **state)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
    return system(cmd) == 0 ? 0 : -1;
}

static void restore_env(void)
{
    setenv("NUVEC_CACHE_DIR", default_cache, 1);
    unsetenv("NUVEC_VERBOSE");
}

/* ---- a tiny SPIR-V assembler ---------------------------------------------------------- */

enum {
    CAP_SHADER = 1,
    OP_NAME_CAPABILITY = 17,
    OP_MEMORY_MODEL = 14,
    OP_ENTRY = 15,
    OP_EXEC_MODE = 16,
    OP_DECORATE_ = 71,
    OP_MEMBER_DECORATE_ = 72,
    OP_TYPE_VOID = 19,
    OP_TYPE_FUNCTION = 33,
    OP_TYPE_INT_ = 21,
    OP_TYPE_VECTOR_ = 23,
    OP_TYPE_RUNTIME_ARRAY_ = 29,
    OP_TYPE_STRUCT_ = 30,
    OP_TYPE_POINTER_ = 32,
    OP_CONSTANT_ = 43,
    OP_SPEC_CONSTANT = 50,
    OP_SPEC_CONSTANT_COMPOSITE_ = 51,
    OP_VARIABLE_ = 59,
    OP_FUNCTION = 54,
    OP_LABEL = 248,
    OP_RETURN = 253,
    OP_FUNCTION_END = 56,
    SC_UNIFORM_ = 2,
    SC_PUSH = 9,
    SC_STORAGE = 12,
};

typedef struct spv {
    uint32_t w[512];
    size_t n;
} spv;

static void emit(spv *s, uint32_t op, int count, ...)
{
    assert_true(s->n + 1 + (size_t)count <= 512);
    s->w[s->n++] = (uint32_t)(count + 1) << 16 | op;
    va_list ap;
    va_start(ap, count);
    for (int i = 0; i < count; i++)
        s->w[s->n++] = va_arg(ap, uint32_t);
    va_end(ap);
}

/* What a hand-made module declares. */
typedef struct module {
    const char *entry;      /* default "main" */
    uint32_t model;         /* execution model, default GLCompute (5) */
    uint32_t local[3];      /* LocalSize, default 1 1 1 */
    bool spec_workgroup;    /* a WorkgroupSize built-in from specialisation constant 0 */
    int buffers;            /* storage buffers at bindings first_binding.. */
    uint32_t first_binding;
    uint32_t set;
    bool uniform;           /* the buffers are uniform buffers (Block in Uniform) */
    uint32_t push_words;    /* a push constant block of this many uints */
} module;

static void assemble(const module *m, spv *s)
{
    memset(s, 0, sizeof *s);
    uint32_t id = 1;
    uint32_t t_void = id++, t_fn = id++, t_uint = id++, t_rta = id++, t_struct = id++, t_ptr = id++;
    uint32_t t_pstruct = id++, t_pptr = id++, v_push = id++, f_main = id++, l_main = id++;
    uint32_t t_v3 = id++, c_x = id++, c_one = id++, c_wg = id++;
    uint32_t v_buf[4];
    for (int i = 0; i < m->buffers; i++)
        v_buf[i] = id++;
    s->w[0] = 0x07230203u;
    s->w[1] = 0x00010500u;
    s->w[2] = 0;
    s->w[3] = id; /* bound */
    s->w[4] = 0;
    s->n = 5;
    emit(s, OP_NAME_CAPABILITY, 1, CAP_SHADER);
    emit(s, OP_MEMORY_MODEL, 2, 0u, 1u);
    /* OpEntryPoint model %main "name" interface... */
    const char *name = m->entry ? m->entry : "main";
    size_t len = strlen(name), name_words = len / 4 + 1;
    size_t at = s->n;
    s->w[s->n++] = 0;
    s->w[s->n++] = m->model ? m->model : 5;
    s->w[s->n++] = f_main;
    memset(&s->w[s->n], 0, name_words * 4);
    memcpy(&s->w[s->n], name, len);
    s->n += name_words;
    for (int i = 0; i < m->buffers; i++)
        s->w[s->n++] = v_buf[i];
    if (m->push_words)
        s->w[s->n++] = v_push;
    s->w[at] = (uint32_t)(s->n - at) << 16 | OP_ENTRY;
    if (!m->model || m->model == 5) /* LocalSize is for compute shaders only */
        emit(s, OP_EXEC_MODE, 5, f_main, 17u, m->local[0] ? m->local[0] : 1, m->local[1] ? m->local[1] : 1,
             m->local[2] ? m->local[2] : 1);

    if (m->buffers) {
        emit(s, OP_DECORATE_, 2, t_struct, 2u);                    /* Block */
        emit(s, OP_MEMBER_DECORATE_, 4, t_struct, 0u, 35u, 0u);   /* Offset 0 */
        emit(s, OP_DECORATE_, 3, t_rta, 6u, 4u);                  /* ArrayStride 4 */
        for (int i = 0; i < m->buffers; i++) {
            emit(s, OP_DECORATE_, 3, v_buf[i], 34u, m->set);
            emit(s, OP_DECORATE_, 3, v_buf[i], 33u, m->first_binding + (uint32_t)i);
        }
    }
    if (m->push_words) {
        emit(s, OP_DECORATE_, 2, t_pstruct, 2u);
        for (uint32_t i = 0; i < m->push_words; i++)
            emit(s, OP_MEMBER_DECORATE_, 4, t_pstruct, i, 35u, i * 4);
    }
    if (m->spec_workgroup) {
        emit(s, OP_DECORATE_, 3, c_x, 1u, 0u);   /* SpecId 0 */
        emit(s, OP_DECORATE_, 3, c_wg, 11u, 25u); /* BuiltIn WorkgroupSize */
    }

    emit(s, OP_TYPE_VOID, 1, t_void);
    emit(s, OP_TYPE_FUNCTION, 2, t_fn, t_void);
    emit(s, OP_TYPE_INT_, 3, t_uint, 32u, 0u);
    if (m->spec_workgroup) {
        emit(s, OP_TYPE_VECTOR_, 3, t_v3, t_uint, 3u);
        emit(s, OP_SPEC_CONSTANT, 3, t_uint, c_x, 1u);
        emit(s, OP_CONSTANT_, 3, t_uint, c_one, 1u);
        emit(s, OP_SPEC_CONSTANT_COMPOSITE_, 5, t_v3, c_wg, c_x, c_one, c_one);
    }
    if (m->buffers) {
        emit(s, OP_TYPE_RUNTIME_ARRAY_, 2, t_rta, t_uint);
        /* A uniform block holds one uint: Vulkan allows runtime arrays in storage buffers only. */
        emit(s, OP_TYPE_STRUCT_, 2, t_struct, m->uniform ? t_uint : t_rta);
        uint32_t sc = m->uniform ? SC_UNIFORM_ : SC_STORAGE;
        emit(s, OP_TYPE_POINTER_, 3, t_ptr, sc, t_struct);
        for (int i = 0; i < m->buffers; i++)
            emit(s, OP_VARIABLE_, 3, t_ptr, v_buf[i], sc);
    }
    if (m->push_words) {
        /* OpTypeStruct with push_words uint members */
        size_t st = s->n;
        s->w[s->n++] = 0;
        s->w[s->n++] = t_pstruct;
        for (uint32_t i = 0; i < m->push_words; i++)
            s->w[s->n++] = t_uint;
        s->w[st] = (uint32_t)(s->n - st) << 16 | OP_TYPE_STRUCT_;
        emit(s, OP_TYPE_POINTER_, 3, t_pptr, (uint32_t)SC_PUSH, t_pstruct);
        emit(s, OP_VARIABLE_, 3, t_pptr, v_push, (uint32_t)SC_PUSH);
    }
    emit(s, OP_FUNCTION, 4, t_void, f_main, 0u, t_fn);
    emit(s, OP_LABEL, 1, l_main);
    emit(s, OP_RETURN, 0);
    emit(s, OP_FUNCTION_END, 0);
}

static nu_kernel_desc desc_of(const spv *s)
{
    return (nu_kernel_desc){.spirv = s->w, .spirv_size = s->n * 4};
}

static const nu__kernel_spirv *embedded(const char *name)
{
    const nu__kernel_spirv *k = nu__kernel_find(name);
    assert_non_null(k);
    return k;
}

/* ---- creation ------------------------------------------------------------------------- */

static void a_kernel_is_made_from_bytes(void **state)
{
    nu_device *d = nt_open();
    const nu__kernel_spirv *fill = embedded("fill_u32");
    nu_kernel_desc desc = {.spirv = fill->words, .spirv_size = fill->word_count * 4, .name = "my fill",
                           .push_constant_size = 8};
    nu_kernel *k = NULL;
    NT_OK(nu_kernel_new(d, &desc, &k));
    assert_non_null(k);
    assert_string_equal(nu_kernel_name(k), "my fill");
    assert_int_equal(nu_kernel_bindings(k), 1);
    assert_int_equal(nu_kernel_push_constant_size(k), 8);
    uint32_t wg[3];
    nu_kernel_workgroup_size(k, wg);
    assert_int_equal(wg[0], 256);
    assert_int_equal(wg[1], 1);
    assert_int_equal(wg[2], 1);
    nu_kernel_free(k);
    nu_kernel_free(NULL);
    nt_close(d);
}

static void a_kernel_is_made_from_a_file(void **state)
{
    char dir[700], path[800];
    tmp_dir(dir, sizeof dir, "spv");
    snprintf(path, sizeof path, "%s/copy.spv", dir);
    const nu__kernel_spirv *copy = embedded("copy_u32");
    write_bytes(path, copy->words, copy->word_count * 4);

    nu_device *d = nt_open();
    nu_kernel_desc desc = {.path = path, .push_constant_size = 4};
    nu_kernel *k = NULL;
    NT_OK(nu_kernel_new(d, &desc, &k));
    /* The default name is the path (its end, if long). */
    const char *name = nu_kernel_name(k);
    size_t nl = strlen(name);
    assert_true(nl > 0);
    assert_true(strcmp(name, path) == 0 || (strncmp(name, "...", 3) == 0 && strstr(path, name + 3) != NULL));
    assert_int_equal(nu_kernel_bindings(k), 2);
    /* The same SPIR-V from bytes is the same kernel, which keeps its first name. */
    nu_kernel_desc bytes = {.spirv = copy->words, .spirv_size = copy->word_count * 4, .push_constant_size = 4,
                            .name = "other"};
    nu_kernel *k2 = NULL;
    NT_OK(nu_kernel_new(d, &bytes, &k2));
    assert_ptr_equal(k, k2);
    assert_string_equal(nu_kernel_name(k2), name);
    nu_kernel_free(k2);
    nu_kernel_free(k);
    nt_close(d);
    rm_rf(dir);
}

/* ---- reflection ----------------------------------------------------------------------- */

static void bindings_and_workgroup_size_are_read_from_the_spirv(void **state)
{
    nu_device *d = nt_open();
    spv s;
    module m = {.local = {8, 4, 2}, .buffers = 2, .first_binding = 2, .push_words = 3};
    assemble(&m, &s);
    nu_kernel_desc desc = desc_of(&s);
    desc.push_constant_size = 12;
    nu_kernel *k = NULL;
    NT_OK(nu_kernel_new(d, &desc, &k));
    assert_int_equal(nu_kernel_bindings(k), 4); /* bindings 2 and 3: max + 1 */
    uint32_t wg[3];
    nu_kernel_workgroup_size(k, wg);
    assert_int_equal(wg[0], 8);
    assert_int_equal(wg[1], 4);
    assert_int_equal(wg[2], 2);
    /* More bindings than the SPIR-V uses: allowed, and a different kernel. */
    desc.bindings = 6;
    nu_kernel *k6 = NULL;
    NT_OK(nu_kernel_new(d, &desc, &k6));
    assert_int_equal(nu_kernel_bindings(k6), 6);
    assert_ptr_not_equal(k, k6);
    /* Exactly as many as the SPIR-V uses: the same kernel as the default. */
    desc.bindings = 4;
    nu_kernel *k4 = NULL;
    NT_OK(nu_kernel_new(d, &desc, &k4));
    assert_ptr_equal(k, k4);
    /* A push range larger than the block is fine (and another kernel). */
    desc.push_constant_size = 64;
    nu_kernel *kp = NULL;
    NT_OK(nu_kernel_new(d, &desc, &kp));
    assert_int_equal(nu_kernel_push_constant_size(kp), 64);
    assert_ptr_not_equal(k, kp);

    /* No buffers, no push constants. */
    module bare = {.local = {64, 1, 1}};
    assemble(&bare, &s);
    desc = desc_of(&s);
    nu_kernel *kb = NULL;
    NT_OK(nu_kernel_new(d, &desc, &kb));
    assert_int_equal(nu_kernel_bindings(kb), 0);
    assert_int_equal(nu_kernel_push_constant_size(kb), 0);
    nu_kernel_workgroup_size(kb, wg);
    assert_int_equal(wg[0], 64);

    /* Workgroup size by specialisation: reported as 0s. */
    module spec = {.spec_workgroup = true, .buffers = 1};
    assemble(&spec, &s);
    desc = desc_of(&s);
    nu_specialization c = {.id = 0, .value = 32};
    desc.constants = &c;
    desc.constant_count = 1;
    nu_kernel *ks = NULL;
    NT_OK(nu_kernel_new(d, &desc, &ks));
    nu_kernel_workgroup_size(ks, wg);
    assert_int_equal(wg[0] | wg[1] | wg[2], 0);
    assert_int_equal(nu_kernel_bindings(ks), 1);

    nu_kernel_free(k);
    nu_kernel_free(k6);
    nu_kernel_free(k4);
    nu_kernel_free(kp);
    nu_kernel_free(kb);
    nu_kernel_free(ks);
    nt_close(d);
}

/* ---- the in-memory cache -------------------------------------------------------------- */

/* Validation costs about 100 us: SPIR-V a cached kernel was made from is not validated again
 * on that device (other constants, bindings or push sizes only reflect it), so that
 * nu_kernel_builtin in a loop stays cheap. */
static void spirv_is_validated_once_per_device(void **state)
{
    nu_device *d = nt_open();
    spv s;
    module m = {.spec_workgroup = true, .buffers = 2, .push_words = 1};
    assemble(&m, &s);
    nu_kernel_desc desc = desc_of(&s);
    desc.push_constant_size = 4;
    uint64_t before = nu__spirv_validations();
    nu_kernel *k1 = NULL, *k2 = NULL, *k3 = NULL, *k4 = NULL;
    NT_OK(nu_kernel_new(d, &desc, &k1));
    assert_int_equal(nu__spirv_validations(), before + 1);
    NT_OK(nu_kernel_new(d, &desc, &k2));
    assert_ptr_equal(k1, k2);
    nu_specialization c = {.id = 0, .value = 64};
    desc.constants = &c;
    desc.constant_count = 1;
    desc.bindings = 3;
    NT_OK(nu_kernel_new(d, &desc, &k3));
    assert_ptr_not_equal(k1, k3);
    assert_int_equal(nu__spirv_validations(), before + 1);
    /* Refusals after reflection still apply to known words. */
    desc.push_constant_size = 0;
    nu_kernel *k = (nu_kernel *)1;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_kernel_new(d, &desc, &k));
    assert_null(k);
    assert_int_equal(nu__spirv_validations(), before + 1);
    /* Other words (here: another workgroup size) are another module, validated. */
    module other = {.spec_workgroup = true, .buffers = 2, .push_words = 1, .local = {2, 1, 1}};
    spv s2;
    assemble(&other, &s2);
    nu_kernel_desc d2 = desc_of(&s2);
    d2.push_constant_size = 4;
    NT_OK(nu_kernel_new(d, &d2, &k4));
    assert_int_equal(nu__spirv_validations(), before + 2);
    nu_kernel_free(k1);
    nu_kernel_free(k2);
    nu_kernel_free(k3);
    nu_kernel_free(k4);
    nt_close(d);
    /* Another device validates for itself. */
    d = nt_open();
    desc = desc_of(&s);
    desc.push_constant_size = 4;
    NT_OK(nu_kernel_new(d, &desc, &k1));
    assert_int_equal(nu__spirv_validations(), before + 3);
    nu_kernel_free(k1);
    nt_close(d);
}

static void the_same_description_gives_the_same_kernel(void **state)
{
    nu_device *d = nt_open();
    nu__kernel_cache_info info;
    nu__kernels_cache_info(d, &info);
    size_t before = info.kernels;

    spv s;
    module m = {.spec_workgroup = true, .buffers = 1};
    assemble(&m, &s);
    nu_specialization c32[2] = {{0, 32}, {7, 1}};
    nu_specialization c32_swapped[2] = {{7, 1}, {0, 32}};
    nu_specialization c64[2] = {{0, 64}, {7, 1}};
    nu_kernel_desc desc = desc_of(&s);
    desc.constants = c32;
    desc.constant_count = 2;
    nu_kernel *a = NULL, *b = NULL, *c = NULL, *e = NULL, *none = NULL;
    NT_OK(nu_kernel_new(d, &desc, &a));
    NT_OK(nu_kernel_new(d, &desc, &b));
    assert_ptr_equal(a, b);
    assert_int_equal(atomic_load(&a->refs), 2);
    /* The order of the constants does not matter. */
    desc.constants = c32_swapped;
    NT_OK(nu_kernel_new(d, &desc, &e));
    assert_ptr_equal(a, e);
    /* Different constants: another kernel. */
    desc.constants = c64;
    NT_OK(nu_kernel_new(d, &desc, &c));
    assert_ptr_not_equal(a, c);
    desc.constants = NULL;
    desc.constant_count = 0;
    NT_OK(nu_kernel_new(d, &desc, &none));
    assert_ptr_not_equal(a, none);
    assert_ptr_not_equal(c, none);
    /* A copy of the bytes elsewhere in memory: the key is the content. */
    uint32_t *copy = malloc(s.n * 4);
    memcpy(copy, s.w, s.n * 4);
    nu_kernel_desc dc = {.spirv = copy, .spirv_size = s.n * 4};
    nu_kernel *f = NULL;
    NT_OK(nu_kernel_new(d, &dc, &f));
    assert_ptr_equal(f, none);
    /* A different entry point name is a different kernel. */
    module other = {.spec_workgroup = true, .buffers = 1, .entry = "other"};
    spv s2;
    assemble(&other, &s2);
    nu_kernel_desc d2 = desc_of(&s2);
    d2.entry = "other";
    nu_kernel *g = NULL;
    NT_OK(nu_kernel_new(d, &d2, &g));
    assert_ptr_not_equal(g, none);

    nu__kernels_cache_info(d, &info);
    assert_int_equal(info.kernels, before + 4);
    /* Freeing keeps the kernel cached: making it again returns the same one. */
    nu_kernel_free(a);
    nu_kernel_free(b);
    nu_kernel_free(e);
    assert_int_equal(atomic_load(&a->refs), 0);
    nu_kernel_free(a); /* one release too many is ignored */
    assert_int_equal(atomic_load(&a->refs), 0);
    desc.constants = c32;
    desc.constant_count = 2;
    nu_kernel *again = NULL;
    NT_OK(nu_kernel_new(d, &desc, &again));
    assert_ptr_equal(again, a);
    nu_kernel_free(again);
    nu_kernel_free(c);
    nu_kernel_free(none);
    nu_kernel_free(f);
    nu_kernel_free(g);
    free(copy);
    nt_close(d);
}

typedef struct race {
    nu_device *d;
    nu_kernel *got[8];
    nu_status st;
} race;

static void *race_thread(void *p)
{
    race *r = p;
    static const char *names[] = {"fill_u32", "copy_u32", "add_f32", "sub_f32", "mul_f32", "axpy_f32"};
    for (int i = 0; i < 6 && r->st == NU_OK; i++)
        r->st = nu_kernel_builtin(r->d, names[i], &r->got[i]);
    return NULL;
}

static void threads_creating_the_same_kernels_get_the_same_pointers(void **state)
{
    nu_device *d = nt_open();
    race r[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        memset(&r[i], 0, sizeof r[i]);
        r[i].d = d;
        assert_int_equal(pthread_create(&t[i], NULL, race_thread, &r[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 4; i++) {
        NT_OK(r[i].st);
        for (int k = 0; k < 6; k++) {
            assert_ptr_equal(r[i].got[k], r[0].got[k]);
            nu_kernel_free(r[i].got[k]);
        }
    }
    nu__kernel_cache_info info;
    nu__kernels_cache_info(d, &info);
    assert_int_equal(info.kernels, 6);
    nt_close(d);
}

/* ---- the disk cache ------------------------------------------------------------------- */

static nu_device *open_with_cache(const char *dir, nu__kernel_cache_info *info, char *path, size_t path_size)
{
    setenv("NUVEC_CACHE_DIR", dir, 1);
    nu_device *d = nt_open();
    nu__kernels_cache_info(d, info);
    if (path) {
        assert_non_null(info->path);
        snprintf(path, path_size, "%s", info->path);
    }
    return d;
}

static void make_some_kernel(nu_device *d)
{
    nu_kernel *k = NULL;
    NT_OK(nu_kernel_builtin(d, "fill_u32", &k));
    nu_kernel_free(k);
}

static void the_pipeline_cache_is_saved_and_loaded(void **state)
{
    char dir[700], cache[800], path[1200];
    tmp_dir(dir, sizeof dir, "disk");
    snprintf(cache, sizeof cache, "%s/not/yet/there", dir); /* created at save */
    nu__kernel_cache_info info;

    nu_device *d = open_with_cache(cache, &info, path, sizeof path);
    assert_int_equal(strncmp(path, cache, strlen(cache)), 0);
    assert_int_equal(info.loaded_bytes, 0);
    /* The name identifies the device. */
    char vendor[16];
    snprintf(vendor, sizeof vendor, "%08x", d->info.vendor_id);
    assert_non_null(strstr(path + strlen(cache), vendor));
    make_some_kernel(d);
    nt_close(d);
    assert_true(exists(path));
    assert_int_equal(count_files(cache), 1); /* no temporary file left behind */

    d = open_with_cache(cache, &info, NULL, 0);
    assert_true(info.loaded_bytes >= 32); /* at least Vulkan's header */
    make_some_kernel(d);
    nt_close(d);

    /* A damaged file is ignored (no error), and replaced by a good one at close. */
    size_t size;
    unsigned char *good = read_bytes(path, &size);
    assert_true(size >= 24 + 32); /* nuvec's header and at least Vulkan's */
    unsigned char *bad = malloc(size);
    for (int variant = 0; variant < 5; variant++) {
        memcpy(bad, good, size);
        size_t bad_size = size;
        switch (variant) {
        case 0: memset(bad, 0xA5, size); break;             /* garbage */
        case 1: bad_size = size - 1; break;                 /* truncated */
        case 2: bad[size - 1] ^= 0x40; break;               /* a flipped bit in the data */
        case 3: bad[24 + 8] ^= 0x01; break;                 /* Vulkan's vendor id (checksum fails too) */
        case 4: bad_size = 10; break;                       /* shorter than any header */
        }
        write_bytes(path, bad, bad_size);
        d = open_with_cache(cache, &info, NULL, 0);
        assert_int_equal(info.loaded_bytes, 0);
        make_some_kernel(d);
        nt_close(d);
        /* Replaced by a good file (checked here rather than by opening again: some drivers
         * leak static TLS per instance, so a test process should not open dozens). */
        size_t again_size;
        unsigned char *again = read_bytes(path, &again_size);
        assert_true(again_size >= 24 + 32);
        assert_memory_equal(again, "nuvecpc1", 8);
        uint64_t data_size = 0;
        for (int i = 0; i < 8; i++)
            data_size |= (uint64_t)again[8 + i] << (8 * i);
        assert_int_equal(data_size, again_size - 24);
        assert_memory_equal(again + 24, good + 24, 32); /* Vulkan's header: same device */
        free(again);
    }
    /* The last good file loads. */
    d = open_with_cache(cache, &info, NULL, 0);
    assert_true(info.loaded_bytes >= 32);
    nt_close(d);
    free(bad);
    free(good);
    restore_env();
    rm_rf(dir);
}

static void the_cache_directory_follows_the_environment(void **state)
{
    char dir[700], xdg[800], home[800], expect[900];
    tmp_dir(dir, sizeof dir, "env");
    snprintf(xdg, sizeof xdg, "%s/xdg", dir);
    snprintf(home, sizeof home, "%s/home", dir);
    char *saved_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    char *saved_xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    setenv("HOME", home, 1);
    setenv("XDG_CACHE_HOME", xdg, 1);
    nu__kernel_cache_info info;

    /* off: nothing is read or written anywhere. (Other files may appear: Mesa keeps its own
     * shader cache under the same directories.) */
    char xdg_nuvec[900], home_nuvec[900];
    snprintf(xdg_nuvec, sizeof xdg_nuvec, "%s/nuvec", xdg);
    snprintf(home_nuvec, sizeof home_nuvec, "%s/.cache/nuvec", home);
    nu_device *d = open_with_cache("off", &info, NULL, 0);
    assert_null(info.path);
    make_some_kernel(d);
    nt_close(d);
    assert_false(exists(xdg_nuvec));
    assert_false(exists(home_nuvec));

    /* $XDG_CACHE_HOME/nuvec */
    unsetenv("NUVEC_CACHE_DIR");
    d = nt_open();
    nu__kernels_cache_info(d, &info);
    snprintf(expect, sizeof expect, "%s/nuvec/pipelines-", xdg);
    assert_non_null(info.path);
    assert_int_equal(strncmp(info.path, expect, strlen(expect)), 0);
    make_some_kernel(d);
    nt_close(d);
    assert_int_equal(count_files(xdg_nuvec), 1);

    /* $HOME/.cache/nuvec (a relative XDG_CACHE_HOME is invalid, and ignored) */
    setenv("XDG_CACHE_HOME", "relative/path", 1);
    d = nt_open();
    nu__kernels_cache_info(d, &info);
    snprintf(expect, sizeof expect, "%s/.cache/nuvec/pipelines-", home);
    assert_non_null(info.path);
    assert_int_equal(strncmp(info.path, expect, strlen(expect)), 0);
    make_some_kernel(d);
    nt_close(d);
    assert_int_equal(count_files(home_nuvec), 1);

    if (saved_home)
        setenv("HOME", saved_home, 1);
    else
        unsetenv("HOME");
    if (saved_xdg)
        setenv("XDG_CACHE_HOME", saved_xdg, 1);
    else
        unsetenv("XDG_CACHE_HOME");
    free(saved_home);
    free(saved_xdg);
    restore_env();
    rm_rf(dir);
}

/* Runs open / make a kernel / close with stderr captured; returns what was written there. */
static char *close_capturing_stderr(const char *cache)
{
    char log[900];
    snprintf(log, sizeof log, "%s/stderr.txt", tmp_root);
    fflush(stderr);
    int saved = dup(2);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    dup2(fd, 2);
    close(fd);
    nu__kernel_cache_info info;
    nu_device *d = open_with_cache(cache, &info, NULL, 0);
    make_some_kernel(d);
    nu_device_close(d); /* validation is checked by the other tests */
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    size_t size;
    char *text = read_bytes(log, &size);
    text = realloc(text, size + 1);
    text[size] = 0;
    unlink(log);
    return text;
}

static void failing_to_save_is_silent_unless_verbose(void **state)
{
    char dir[700], blocker[800], cache[900];
    tmp_dir(dir, sizeof dir, "unwritable");
    snprintf(blocker, sizeof blocker, "%s/file", dir);
    write_bytes(blocker, "x", 1);
    snprintf(cache, sizeof cache, "%s/sub", blocker); /* a directory under a regular file */

    char *quiet = close_capturing_stderr(cache);
    assert_null(strstr(quiet, "pipeline cache"));
    free(quiet);
    setenv("NUVEC_VERBOSE", "1", 1);
    char *loud = close_capturing_stderr(cache);
    assert_non_null(strstr(loud, "could not save the pipeline cache"));
    free(loud);
    restore_env();
    rm_rf(dir);
}

/* ---- bad input ------------------------------------------------------------------------ */

static void bad_arguments_are_refused(void **state)
{
    nu_device *d = nt_open();
    const nu__kernel_spirv *fill = embedded("fill_u32");
    nu_kernel *k = (nu_kernel *)1;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_kernel_new(d, NULL, &k));
    assert_null(k);
    nu_kernel_desc desc = {.spirv = fill->words, .spirv_size = fill->word_count * 4, .push_constant_size = 8};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_kernel_new(NULL, &desc, &k));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_kernel_new(d, &desc, NULL));
    /* Both bytes and a path, or neither. */
    desc.path = "/nonexistent.spv";
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_kernel_new(d, &desc, &k));
    nu_kernel_desc empty = {0};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_kernel_new(d, &empty, &k));
    desc.path = NULL;
    /* Push constants: not a multiple of 4, beyond the device's limit, smaller than the
     * shader's block, or missing. */
    desc.push_constant_size = 6;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_kernel_new(d, &desc, &k));
    desc.push_constant_size = d->info.max_push_constants + 4;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_kernel_new(d, &desc, &k));
    assert_non_null(strstr(nu_error_message(NULL), "max_push_constants"));
    desc.push_constant_size = 4;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_kernel_new(d, &desc, &k));
    assert_non_null(strstr(nu_error_message(NULL), "spans 8 bytes"));
    desc.push_constant_size = 0;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_kernel_new(d, &desc, &k));
    desc.push_constant_size = 8;
    /* Constants: NULL with a count, or an id twice. */
    desc.constant_count = 1;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_kernel_new(d, &desc, &k));
    nu_specialization twice[2] = {{3, 1}, {3, 2}};
    desc.constants = twice;
    desc.constant_count = 2;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_kernel_new(d, &desc, &k));
    assert_null(k);
    /* The device's last error names the problem too. */
    assert_non_null(strstr(nu_error_message(d), "given twice"));
    nt_close(d);
}

static void a_missing_file_is_an_io_error_naming_it(void **state)
{
    nu_device *d = nt_open();
    char path[800];
    snprintf(path, sizeof path, "%s/no/such/kernel.spv", tmp_root);
    nu_kernel_desc desc = {.path = path};
    nu_kernel *k = (nu_kernel *)1;
    NT_STATUS(NU_ERROR_IO, nu_kernel_new(d, &desc, &k));
    assert_null(k);
    assert_non_null(strstr(nu_error_message(NULL), path));
    assert_non_null(strstr(nu_error_message(NULL), strerror(ENOENT)));
    /* A directory is not a file either. */
    desc.path = tmp_root;
    NT_STATUS(NU_ERROR_IO, nu_kernel_new(d, &desc, &k));
    assert_non_null(strstr(nu_error_message(NULL), tmp_root));
    /* An empty file is not SPIR-V. */
    char empty[800];
    snprintf(empty, sizeof empty, "%s/empty.spv", tmp_root);
    write_bytes(empty, "", 0);
    desc.path = empty;
    NT_STATUS(NU_ERROR_FORMAT, nu_kernel_new(d, &desc, &k));
    unlink(empty);
    nt_close(d);
}

static void malformed_spirv_is_a_format_error(void **state)
{
    nu_device *d = nt_open();
    const nu__kernel_spirv *fill = embedded("fill_u32");
    size_t n = fill->word_count;
    uint32_t *w = malloc(n * 4);
    nu_kernel *k = (nu_kernel *)1;
    nu_kernel_desc desc = {.spirv = w, .push_constant_size = 8};

    /* Not a whole number of words; shorter than the header. */
    memcpy(w, fill->words, n * 4);
    desc.spirv_size = n * 4 - 2;
    NT_STATUS(NU_ERROR_FORMAT, nu_kernel_new(d, &desc, &k));
    desc.spirv_size = 16;
    NT_STATUS(NU_ERROR_FORMAT, nu_kernel_new(d, &desc, &k));
    desc.spirv_size = 0;
    NT_STATUS(NU_ERROR_FORMAT, nu_kernel_new(d, &desc, &k));
    /* Wrong magic (here: the other byte order). */
    w[0] = 0x03022307u;
    desc.spirv_size = n * 4;
    NT_STATUS(NU_ERROR_FORMAT, nu_kernel_new(d, &desc, &k));
    assert_non_null(strstr(nu_error_message(NULL), "magic"));
    /* Text is not SPIR-V. */
    static const char text[] = "#version 450\nvoid main() {}\n\n\n";
    memcpy(w, text, sizeof text - 1);
    desc.spirv_size = (sizeof text - 1) / 4 * 4;
    NT_STATUS(NU_ERROR_FORMAT, nu_kernel_new(d, &desc, &k));
    /* Truncated inside an instruction: OpCapability (2 words) cut after its first word. */
    memcpy(w, fill->words, n * 4);
    desc.spirv_size = 6 * 4;
    NT_STATUS(NU_ERROR_FORMAT, nu_kernel_new(d, &desc, &k));
    assert_non_null(strstr(nu_error_message(NULL), "SPIRV-Tools validator"));
    assert_non_null(strstr(nu_error_message(NULL), "End of input"));
    /* Every cut of the real module inside an instruction. */
    for (size_t at = 5; at < n;) {
        uint32_t wc = fill->words[at] >> 16;
        for (size_t cut = at + 1; cut < at + wc; cut++) {
            desc.spirv_size = cut * 4;
            NT_STATUS(NU_ERROR_FORMAT, nu_kernel_new(d, &desc, &k));
        }
        at += wc;
    }
    /* A word count of 0. */
    w[5] = 17u; /* OpCapability with 0 words */
    desc.spirv_size = n * 4;
    NT_STATUS(NU_ERROR_FORMAT, nu_kernel_new(d, &desc, &k));
    assert_non_null(strstr(nu_error_message(NULL), "word count: 0"));
    /* Deterministic garbage after a valid header. */
    uint64_t seed = 42;
    for (int round = 0; round < 200; round++) {
        memcpy(w, fill->words, 5 * 4);
        for (size_t i = 5; i < n; i++)
            w[i] = (uint32_t)nt_rand(&seed);
        desc.spirv_size = n * 4;
        NT_STATUS(NU_ERROR_FORMAT, nu_kernel_new(d, &desc, &k));
    }
    assert_null(k);
    free(w);
    nt_close(d);
}

/* The device still runs kernels (after refusals): fill_u32 over 64 words, read back. */
static void the_device_still_works(nu_device *d)
{
    nu_kernel *fill = NULL;
    nu_buffer *b = NULL;
    nu_commands *cmd = NULL;
    uint32_t out[64] = {0}, push[2] = {0xC0FFEEu, 64}, groups[3];
    nu_groups_for(64, 256, groups);
    NT_OK(nu_kernel_builtin(d, "fill_u32", &fill));
    NT_OK(nu_buffer_new_gpu(d, sizeof out, NU_STORAGE_PRIVATE, &b));
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &cmd));
    nu_binding bind = {b, NU_ACCESS_WRITE, 0, 0};
    NT_OK(nu_commands_dispatch(cmd, fill, groups, &bind, 1, push, sizeof push));
    NT_OK(nu_commands_download(cmd, b, 0, out, sizeof out));
    NT_OK(nu_commands_commit(cmd));
    NT_OK(nu_commands_wait(cmd, NU_WAIT_FOREVER));
    for (int i = 0; i < 64; i++)
        assert_int_equal(out[i], 0xC0FFEEu);
    nu_commands_free(cmd);
    nu_buffer_free(b);
    nu_kernel_free(fill);
}

/* What nu_kernel_new may answer for damaged SPIR-V: a refusal with a message, or (for a
 * change the module survives, e.g. a constant's value) a kernel. Never a crash. */
static void expect_refused_or_made(nu_device *d, nu_status st, nu_kernel *k, const char *what, size_t at)
{
    if (st == NU_OK) {
        assert_non_null(k);
        nu_kernel_free(k);
        return;
    }
    if (st != NU_ERROR_FORMAT && st != NU_ERROR_UNSUPPORTED && st != NU_ERROR_INVALID_ARGUMENT)
        fail_msg("%s at word %zu: %s: %s", what, at, nu_status_string(st), nu_error_message(NULL));
    assert_null(k);
    assert_true(strlen(nu_error_message(d)) > 0);
}

/* A valid module cut short (the driver's compiler crashed on a cut at an instruction's end,
 * and took one without OpFunctionEnd): every 4-byte prefix, unaligned lengths from bytes and
 * from files, all refused with the validator's finding; the device stays usable. */
static void truncated_spirv_is_a_format_error(void **state)
{
    nu_device *d = nt_open();
    const nu__kernel_spirv *axpy = embedded("axpy_f32"); /* two storage buffers, an 8-byte push block */
    size_t size = axpy->word_count * 4;
    uint32_t *w = malloc(size);
    memcpy(w, axpy->words, size);
    nu_kernel *k = (nu_kernel *)1;
    nu_kernel_desc desc = {.spirv = w, .push_constant_size = 8, .name = "cut"};
    int boundaries = 0;
    for (size_t cut = 0; cut < size; cut += 4) {
        desc.spirv_size = cut;
        nu_status st = nu_kernel_new(d, &desc, &k);
        if (st != NU_ERROR_FORMAT)
            fail_msg("cut to %zu of %zu bytes: %s: %s", cut, size, nu_status_string(st), nu_error_message(NULL));
        assert_null(k);
        const char *msg = nu_error_message(d);
        assert_non_null(strstr(msg, "'cut'"));
        if (cut >= 20)
            assert_non_null(strstr(msg, "SPIRV-Tools validator"));
        boundaries += strstr(msg, "Missing OpFunctionEnd") != NULL;
    }
    assert_true(boundaries > 20); /* cuts at instruction ends: what crashed the driver */
    /* Without OpFunctionEnd (the last word): taken by the driver before. */
    desc.spirv_size = size - 4;
    NT_STATUS(NU_ERROR_FORMAT, nu_kernel_new(d, &desc, &k));
    assert_non_null(strstr(nu_error_message(NULL), "OpFunctionEnd"));
    /* Lengths that are not whole words, from bytes and from a file. */
    char dir[700], path[800];
    tmp_dir(dir, sizeof dir, "cut");
    snprintf(path, sizeof path, "%s/cut.spv", dir);
    size_t odd[] = {1, 2, 3, 19, 21, 1001, 1002, 1003, size - 9, size - 3, size - 2, size - 1};
    for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) {
        desc.spirv_size = odd[i];
        NT_STATUS(NU_ERROR_FORMAT, nu_kernel_new(d, &desc, &k));
        assert_non_null(strstr(nu_error_message(NULL), "4-byte words"));
        write_bytes(path, w, odd[i]);
        nu_kernel_desc file = {.path = path, .push_constant_size = 8};
        NT_STATUS(NU_ERROR_FORMAT, nu_kernel_new(d, &file, &k));
        assert_null(k);
    }
    /* Every 4-byte prefix from a file, too. */
    for (size_t cut = 0; cut < size; cut += 4) {
        write_bytes(path, w, cut);
        nu_kernel_desc file = {.path = path, .push_constant_size = 8};
        NT_STATUS(NU_ERROR_FORMAT, nu_kernel_new(d, &file, &k));
    }
    /* The whole module is a kernel, and the device still runs kernels. */
    desc.spirv_size = size;
    NT_OK(nu_kernel_new(d, &desc, &k));
    nu_kernel_free(k);
    the_device_still_works(d);
    free(w);
    rm_rf(dir);
    nt_close(d);
}

/* Every word of a builtin kernel replaced in turn (by 0, all ones, its word count changed, one
 * bit flipped): refused with a message or, where the module stays valid, a working kernel. */
static void corrupted_words_are_refused(void **state)
{
    nu_device *d = nt_open();
    const nu__kernel_spirv *fill = embedded("fill_u32");
    size_t n = fill->word_count;
    uint32_t *w = malloc(n * 4);
    nu_kernel_desc desc = {.spirv = w, .spirv_size = n * 4, .push_constant_size = 8, .name = "corrupt"};
    int made = 0, refused = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t v[4] = {0, 0xFFFFFFFFu, fill->words[i] + (1u << 16), fill->words[i] ^ (1u << (i * 7 % 32))};
        for (int j = 0; j < 4; j++) {
            memcpy(w, fill->words, n * 4);
            if (v[j] == w[i])
                continue;
            w[i] = v[j];
            nu_kernel *k = (nu_kernel *)1;
            nu_status st = nu_kernel_new(d, &desc, &k);
            expect_refused_or_made(d, st, k, "corrupted", i);
            made += st == NU_OK;
            refused += st != NU_OK;
        }
    }
    print_message("single-word corruptions of fill_u32: %d refused, %d still valid\n", refused, made);
    assert_true(refused > (int)n);
    the_device_still_works(d);
    free(w);
    nt_close(d);
}

/* The validator does not know the device's limits: nuvec checks the workgroup size (with the
 * specialisation constants given) before the driver sees it. */
static void workgroup_sizes_beyond_the_device_are_refused(void **state)
{
    nu_device *d = nt_open();
    const nu_device_info *info = &d->info;
    spv s;
    nu_kernel *k = (nu_kernel *)1;
    module big = {.local = {info->max_workgroup_size[0] + 1, 1, 1}};
    assemble(&big, &s);
    nu_kernel_desc desc = desc_of(&s);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_kernel_new(d, &desc, &k));
    assert_null(k);
    assert_non_null(strstr(nu_error_message(NULL), "workgroup size"));
    /* Each dimension within its limit, but too many invocations. */
    uint32_t side = 1;
    while ((uint64_t)side * side <= info->max_workgroup_invocations)
        side *= 2;
    if (side <= info->max_workgroup_size[0] && side <= info->max_workgroup_size[1]) {
        module wide = {.local = {side, side, 1}};
        assemble(&wide, &s);
        desc = desc_of(&s);
        NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_kernel_new(d, &desc, &k));
    }
    /* By specialisation: the constant given, else the default (1 here). */
    module spec = {.spec_workgroup = true};
    assemble(&spec, &s);
    desc = desc_of(&s);
    nu_specialization c = {.id = 0, .value = info->max_workgroup_size[0] + 1};
    desc.constants = &c;
    desc.constant_count = 1;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_kernel_new(d, &desc, &k));
    c.value = 0;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_kernel_new(d, &desc, &k));
    c.value = info->max_workgroup_size[0];
    NT_OK(nu_kernel_new(d, &desc, &k));
    nu_kernel_free(k);
    desc.constant_count = 0;
    NT_OK(nu_kernel_new(d, &desc, &k));
    nu_kernel_free(k);
    nt_close(d);
}

/* A compute shader whose push constant block nests structs `depth` deep, each of `fan` structs
 * (the innermost: a uint), with their offsets: (fan^depth * 4) bytes. */
static void assemble_nested(spv *s, uint32_t fan, uint32_t depth)
{
    memset(s, 0, sizeof *s);
    uint32_t id = 1;
    uint32_t t_void = id++, t_fn = id++, t_uint = id++, f_main = id++, l_main = id++;
    uint32_t t_struct0 = id;
    id += depth + 1;
    uint32_t t_ptr = id++, v_push = id++;
    s->w[0] = 0x07230203u;
    s->w[1] = 0x00010500u;
    s->w[3] = id;
    s->n = 5;
    emit(s, OP_NAME_CAPABILITY, 1, CAP_SHADER);
    emit(s, OP_MEMORY_MODEL, 2, 0u, 1u);
    emit(s, OP_ENTRY, 4, 5u, f_main, 0x6e69616du /* "main" */, 0u);
    s->w[s->n++] = v_push;
    s->w[s->n - 6] += 1u << 16;
    emit(s, OP_EXEC_MODE, 5, f_main, 17u, 1u, 1u, 1u);
    emit(s, OP_DECORATE_, 2, t_struct0 + depth, 2u); /* Block */
    emit(s, OP_MEMBER_DECORATE_, 4, t_struct0, 0u, 35u, 0u);
    uint32_t size = 4;
    for (uint32_t k = 1; k <= depth; k++) {
        for (uint32_t m = 0; m < fan; m++)
            emit(s, OP_MEMBER_DECORATE_, 4, t_struct0 + k, m, 35u, m * size);
        size *= fan;
    }
    emit(s, OP_TYPE_VOID, 1, t_void);
    emit(s, OP_TYPE_FUNCTION, 2, t_fn, t_void);
    emit(s, OP_TYPE_INT_, 3, t_uint, 32u, 0u);
    emit(s, OP_TYPE_STRUCT_, 2, t_struct0, t_uint);
    for (uint32_t k = 1; k <= depth; k++) {
        assert_true(s->n + 2 + fan <= 512);
        s->w[s->n++] = (2 + fan) << 16 | OP_TYPE_STRUCT_;
        s->w[s->n++] = t_struct0 + k;
        for (uint32_t m = 0; m < fan; m++)
            s->w[s->n++] = t_struct0 + k - 1;
    }
    emit(s, OP_TYPE_POINTER_, 3, t_ptr, (uint32_t)SC_PUSH, t_struct0 + depth);
    emit(s, OP_VARIABLE_, 3, t_ptr, v_push, (uint32_t)SC_PUSH);
    emit(s, OP_FUNCTION, 4, t_void, f_main, 0u, t_fn);
    emit(s, OP_LABEL, 1, l_main);
    emit(s, OP_RETURN, 0);
    emit(s, OP_FUNCTION_END, 0);
}

/* The validator's layout checks are exponential in the nesting of structs (a 1.6 KB module of
 * structs of 8 structs 7 deep took it seconds, 9 deep minutes): such modules are refused at
 * once; moderately nested ones are validated and their push constant block measured. */
static void deeply_nested_types_are_refused_at_once(void **state)
{
    nu_device *d = nt_open();
    spv s;
    nu_kernel *k = (nu_kernel *)1;
    assemble_nested(&s, 8, 9);
    nu_kernel_desc desc = desc_of(&s);
    desc.push_constant_size = 128;
    NT_STATUS(NU_ERROR_UNSUPPORTED, nu_kernel_new(d, &desc, &k));
    assert_null(k);
    assert_non_null(strstr(nu_error_message(NULL), "nest"));
    assemble_nested(&s, 2, 20);
    desc = desc_of(&s);
    desc.push_constant_size = 128;
    NT_STATUS(NU_ERROR_UNSUPPORTED, nu_kernel_new(d, &desc, &k));
    /* 8 x 8 x 8 x 8: validated, measured (16 KiB: more than any device's push constants). */
    nu__spirv_layout layout;
    assemble_nested(&s, 8, 4);
    NT_OK(nu__spirv_check(NULL, d->info.api_version, "nested", s.w, s.n * 4, "main", &layout));
    assert_true(layout.has_push);
    assert_int_equal(layout.push_extent, 8 * 8 * 8 * 8 * 4);
    desc = desc_of(&s);
    desc.push_constant_size = 128;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_kernel_new(d, &desc, &k));
    assert_non_null(strstr(nu_error_message(NULL), "spans 16384 bytes"));
    /* 2 x 2 x 2 (32 bytes): a kernel. */
    assemble_nested(&s, 2, 3);
    desc = desc_of(&s);
    desc.push_constant_size = 32;
    NT_OK(nu_kernel_new(d, &desc, &k));
    assert_int_equal(nu_kernel_push_constant_size(k), 32);
    nu_kernel_free(k);
    nt_close(d);
}

/* The validator is Debian 13's SPIRV-Tools (deps/deps.sh): Debian 12's rejects the
 * cooperative-matrix capability (CooperativeMatrixKHR, 6022) tensor-core kernels use. */
static void the_validator_accepts_cooperative_matrices(void **state)
{
    spv s;
    memset(&s, 0, sizeof s);
    uint32_t id = 1;
    uint32_t t_void = id++, t_fn = id++, t_f32 = id++, t_u32 = id++, c_sub = id++, c_16 = id++, c_use = id++;
    uint32_t t_mat = id++, t_pmat = id++, f_main = id++, l_main = id++, v_mat = id++;
    s.w[0] = 0x07230203u;
    s.w[1] = 0x00010600u;
    s.w[3] = id;
    s.n = 5;
    emit(&s, OP_NAME_CAPABILITY, 1, CAP_SHADER);
    emit(&s, OP_NAME_CAPABILITY, 1, 5345u); /* VulkanMemoryModel */
    emit(&s, OP_NAME_CAPABILITY, 1, 6022u); /* CooperativeMatrixKHR */
    static const char ext[28] = "SPV_KHR_cooperative_matrix";
    uint32_t ext_words[7];
    memcpy(ext_words, ext, sizeof ext_words);
    emit(&s, 10 /* OpExtension */, 7, ext_words[0], ext_words[1], ext_words[2], ext_words[3], ext_words[4],
         ext_words[5], ext_words[6]);
    emit(&s, OP_MEMORY_MODEL, 2, 0u, 3u); /* Logical Vulkan */
    emit(&s, OP_ENTRY, 3, 5u, f_main, 0x6e69616du /* "main" */);
    s.w[s.n++] = 0; /* ...its NUL: the entry point's name ends here */
    s.w[s.n - 5] += 1u << 16;
    emit(&s, OP_EXEC_MODE, 5, f_main, 17u, 32u, 1u, 1u);
    emit(&s, OP_TYPE_VOID, 1, t_void);
    emit(&s, OP_TYPE_FUNCTION, 2, t_fn, t_void);
    emit(&s, 22 /* OpTypeFloat */, 2, t_f32, 32u);
    emit(&s, OP_TYPE_INT_, 3, t_u32, 32u, 0u);
    emit(&s, OP_CONSTANT_, 3, t_u32, c_sub, 3u); /* Scope Subgroup */
    emit(&s, OP_CONSTANT_, 3, t_u32, c_16, 16u);
    emit(&s, OP_CONSTANT_, 3, t_u32, c_use, 0u); /* MatrixAKHR */
    emit(&s, 4456 /* OpTypeCooperativeMatrixKHR */, 6, t_mat, t_f32, c_sub, c_16, c_16, c_use);
    emit(&s, OP_TYPE_POINTER_, 3, t_pmat, 7u /* Function */, t_mat);
    emit(&s, OP_FUNCTION, 4, t_void, f_main, 0u, t_fn);
    emit(&s, OP_LABEL, 1, l_main);
    emit(&s, OP_VARIABLE_, 3, t_pmat, v_mat, 7u);
    emit(&s, OP_RETURN, 0);
    emit(&s, OP_FUNCTION_END, 0);
    nu__spirv_layout layout;
    NT_OK(nu__spirv_check(NULL, VK_API_VERSION_1_3, "coopmat", s.w, s.n * 4, "main", &layout));
    assert_int_equal(layout.local_size[0], 32);
    assert_int_equal(layout.bindings, 0);
    /* ...and refuses the same module for Vulkan 1.2 (SPIR-V 1.6 is newer than it accepts). */
    NT_STATUS(NU_ERROR_UNSUPPORTED,
              nu__spirv_check(NULL, VK_API_VERSION_1_2, "coopmat", s.w, s.n * 4, "main", &layout));
}

/* The embedded kernel named `name`, of any family (embedded() takes the public builtins only). */
static const nu__kernel_spirv *embedded_any(const char *name)
{
    for (unsigned i = 0; i < nu__kernel_count; i++)
        if (!strcmp(nu__kernels[i].name, name))
            return &nu__kernels[i];
    fail_msg("no embedded kernel %s", name);
    return NULL;
}

/* Instructions of opcode `op` in a module whose first operand word is `first` (any: UINT32_MAX). */
static unsigned count_ops(const uint32_t *w, size_t n, uint32_t op, uint32_t first)
{
    unsigned found = 0;
    for (size_t i = 5; i < n && (w[i] >> 16);) {
        if ((w[i] & 0xffffu) == op && (first == UINT32_MAX || (i + 1 < n && w[i + 1] == first)))
            found++;
        i += w[i] >> 16;
    }
    return found;
}

/* matmul_coopmat_bf16 is written with float16_t for bfloat16 (kernels/matmul/matmul_coopmat.glsl):
 * it validates as it is, and nu__spirv_f16_as_bf16 turns exactly its type and capabilities into
 * SPV_KHR_bfloat16's. Runs without a device (lavapipe has no BF16 matrix units). */
static void float16_fragments_are_rewritten_as_bfloat16(void **state)
{
    const nu__kernel_spirv *k = embedded_any("matmul_coopmat_bf16");
    /* The build marks it (its .comp's "// nuvec: float16_t is bfloat16"), and only it. */
    for (unsigned i = 0; i < nu__kernel_count; i++)
        assert_int_equal(nu__kernels[i].f16_as_bf16, &nu__kernels[i] == k);
    nu__spirv_layout layout;
    NT_OK(nu__spirv_check(NULL, VK_API_VERSION_1_3, "bf16", k->words, k->word_count * 4, "main", &layout));
    uint32_t *out = NULL;
    size_t n = 0;
    char why[160] = "";
    NT_OK(nu__spirv_f16_as_bf16(k->words, k->word_count, &out, &n, why, sizeof why));
    /* Float16 became BFloat16TypeKHR; BFloat16CooperativeMatrixKHR and the extension were added;
     * OpTypeFloat 16 gained its encoding: 2 + 6 + 1 words more. */
    assert_int_equal(n, k->word_count + 9);
    assert_int_equal(count_ops(k->words, k->word_count, 17 /* OpCapability */, 9 /* Float16 */), 1);
    assert_int_equal(count_ops(out, n, 17, 9), 0);
    assert_int_equal(count_ops(out, n, 17, 5116 /* BFloat16TypeKHR */), 1);
    assert_int_equal(count_ops(out, n, 17, 5118 /* BFloat16CooperativeMatrixKHR */), 1);
    bool ext = false, type = false;
    for (size_t i = 5; i < n && (out[i] >> 16); i += out[i] >> 16) {
        if ((out[i] & 0xffffu) == 10 && (out[i] >> 16) == 6)
            ext |= memcmp(&out[i + 1], "SPV_KHR_bfloat16\0\0\0", 20) == 0;
        if ((out[i] & 0xffffu) == 22 && out[i + 2] == 16) {
            assert_false(type); /* one 16-bit float type */
            type = true;
            assert_int_equal(out[i] >> 16, 4);
            assert_int_equal(out[i + 3], 0); /* BFloat16KHR */
        }
    }
    assert_true(ext);
    assert_true(type);
    nu__free(out);
    /* The F16 kernel does F16 arithmetic: refused, by reason. */
    const nu__kernel_spirv *f16 = embedded_any("matmul_coopmat");
    NT_STATUS(NU_ERROR_UNSUPPORTED, nu__spirv_f16_as_bf16(f16->words, f16->word_count, &out, &n, why, sizeof why));
    assert_null(out);
    assert_non_null(strstr(why, "other than as a cooperative matrix's component type"));
    /* No 16-bit float type at all, and words that are not SPIR-V. */
    const nu__kernel_spirv *f32 = embedded("fill_u32");
    NT_STATUS(NU_ERROR_UNSUPPORTED, nu__spirv_f16_as_bf16(f32->words, f32->word_count, &out, &n, why, sizeof why));
    assert_non_null(strstr(why, "0 16-bit float types"));
    uint32_t junk[8] = {0x07230203u, 0x00010500u, 0, 100, 0, 0xffffffffu, 1, 2};
    NT_STATUS(NU_ERROR_UNSUPPORTED, nu__spirv_f16_as_bf16(junk, 8, &out, &n, why, sizeof why));
    NT_STATUS(NU_ERROR_UNSUPPORTED, nu__spirv_f16_as_bf16(junk, 3, &out, &n, why, sizeof why));
    /* A device without BF16 matrix units refuses such a kernel by name. */
    nu_device *d = nt_open();
    if (!d->has_bf16_coopmat) {
        nu_kernel_desc desc = {.spirv = k->words, .spirv_size = k->word_count * 4, .name = "matmul_coopmat_bf16",
                               .push_constant_size = 72};
        nu_kernel *made = NULL;
        NT_STATUS(NU_ERROR_UNSUPPORTED, nu__kernel_new_f16_as_bf16(d, &desc, &made));
        assert_null(made);
        assert_non_null(strstr(nu_error_message(d), "no BF16 cooperative matrices"));
    }
    nt_close(d);
}

static void entry_points_and_bindings_are_checked(void **state)
{
    nu_device *d = nt_open();
    spv s;
    nu_kernel *k = (nu_kernel *)1;
    module m = {.buffers = 2};
    assemble(&m, &s);
    nu_kernel_desc desc = desc_of(&s);
    /* A missing entry point, named in the message. */
    desc.entry = "nope";
    NT_STATUS(NU_ERROR_FORMAT, nu_kernel_new(d, &desc, &k));
    assert_non_null(strstr(nu_error_message(NULL), "'nope'"));
    /* An entry point that is not a compute shader. */
    module vert = {.model = 0 /* Vertex */, .entry = "vs"};
    spv sv;
    assemble(&vert, &sv);
    /* model 0 means "default" to the assembler: patch the word after the OpEntryPoint's opcode,
     * and drop the compute shader's LocalSize (invalid for a vertex shader). */
    for (size_t at = 5; at < sv.n; at += sv.w[at] >> 16) {
        if ((sv.w[at] & 0xffff) == OP_ENTRY)
            sv.w[at + 1] = 0;
        if ((sv.w[at] & 0xffff) == OP_EXEC_MODE) {
            size_t wc = sv.w[at] >> 16;
            memmove(&sv.w[at], &sv.w[at + wc], (sv.n - at - wc) * 4);
            sv.n -= wc;
        }
    }
    nu_kernel_desc dv = desc_of(&sv);
    dv.entry = "vs";
    NT_STATUS(NU_ERROR_FORMAT, nu_kernel_new(d, &dv, &k));
    assert_non_null(strstr(nu_error_message(NULL), "not a compute shader"));
    /* Binding 1 used, but only 1 binding described. */
    desc.entry = NULL;
    desc.bindings = 1;
    NT_STATUS(NU_ERROR_FORMAT, nu_kernel_new(d, &desc, &k));
    assert_non_null(strstr(nu_error_message(NULL), "binding 1"));
    /* Descriptor set 1. */
    module set1 = {.buffers = 1, .set = 1};
    assemble(&set1, &s);
    desc = desc_of(&s);
    NT_STATUS(NU_ERROR_FORMAT, nu_kernel_new(d, &desc, &k));
    assert_non_null(strstr(nu_error_message(NULL), "set 1"));
    /* Uniform buffers are not storage buffers. */
    module ubo = {.buffers = 1, .uniform = true};
    assemble(&ubo, &s);
    desc = desc_of(&s);
    NT_STATUS(NU_ERROR_FORMAT, nu_kernel_new(d, &desc, &k));
    assert_non_null(strstr(nu_error_message(NULL), "uniform buffer"));
    /* More bindings than push descriptors allow. */
    module few = {.buffers = 1};
    assemble(&few, &s);
    desc = desc_of(&s);
    desc.bindings = 100000;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_kernel_new(d, &desc, &k));
    /* A push constant block larger than the range given. */
    module push = {.push_words = 5};
    assemble(&push, &s);
    desc = desc_of(&s);
    desc.push_constant_size = 16;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_kernel_new(d, &desc, &k));
    assert_non_null(strstr(nu_error_message(NULL), "spans 20 bytes"));
    desc.push_constant_size = 20;
    NT_OK(nu_kernel_new(d, &desc, &k));
    nu_kernel_free(k);
    nt_close(d);
}

static void kernels_need_push_descriptors(void **state)
{
    nu_device *d = nt_open();
    d->has_push_descriptor = false;
    nu_kernel *k = (nu_kernel *)1;
    NT_STATUS(NU_ERROR_UNSUPPORTED, nu_kernel_builtin(d, "fill_u32", &k));
    assert_null(k);
    assert_non_null(strstr(nu_error_message(NULL), "push_descriptor"));
    d->has_push_descriptor = true;
    nt_close(d);
}

/* ---- builtins ------------------------------------------------------------------------- */

static void every_builtin_kernel_loads(void **state)
{
    static const struct {
        const char *name;
        uint32_t bindings, push;
    } expect[] = {
        {"fill_u32", 1, 8}, {"copy_u32", 2, 4}, {"add_f32", 3, 4}, {"sub_f32", 3, 4},
        {"mul_f32", 3, 4},  {"axpy_f32", 2, 8}, {"add_f16", 3, 4}, {"mul_f16", 3, 4},
    };
    nu_device *d = nt_open();
    bool f16 = d->info.features[NU_FEATURE_FLOAT16] && d->info.features[NU_FEATURE_STORAGE_16BIT];
    /* Every embedded kernel loads (this also checks builtins.c's table covers them all)... */
    for (unsigned i = 0; i < nu__kernel_count; i++) {
        const char *name = nu__kernels[i].name;
        if (*nu__kernels[i].family)
            continue; /* the kernel library's (src/ops/): not opened by name */
        nu_kernel *k = NULL;
        if (strstr(name, "f16") && !f16) {
            NT_STATUS(NU_ERROR_UNSUPPORTED, nu_kernel_builtin(d, name, &k));
            continue;
        }
        NT_OK(nu_kernel_builtin(d, name, &k));
        assert_string_equal(nu_kernel_name(k), name);
        uint32_t wg[3];
        nu_kernel_workgroup_size(k, wg);
        assert_int_equal(wg[0], 256);
        assert_int_equal(wg[1], 1);
        assert_int_equal(wg[2], 1);
        nu_kernel *again = NULL;
        NT_OK(nu_kernel_builtin(d, name, &again));
        assert_ptr_equal(k, again);
        nu_kernel_free(again);
        nu_kernel_free(k);
    }
    /* ...and the documented ones are there, with their layouts. */
    for (size_t i = 0; i < sizeof expect / sizeof *expect; i++) {
        assert_non_null(nu__kernel_find(expect[i].name));
        if (strstr(expect[i].name, "f16") && !f16)
            continue;
        nu_kernel *k = NULL;
        NT_OK(nu_kernel_builtin(d, expect[i].name, &k));
        assert_int_equal(nu_kernel_bindings(k), expect[i].bindings);
        assert_int_equal(nu_kernel_push_constant_size(k), expect[i].push);
        nu_kernel_free(k);
    }
    print_message("%u builtin kernels (float16 %s)\n", nu__kernel_count, f16 ? "supported" : "unsupported");
    nt_close(d);
}

static void float16_kernels_need_the_features(void **state)
{
    nu_device *d = nt_open();
    bool saved = d->info.features[NU_FEATURE_FLOAT16];
    d->info.features[NU_FEATURE_FLOAT16] = false;
    nu_kernel *k = (nu_kernel *)1;
    NT_STATUS(NU_ERROR_UNSUPPORTED, nu_kernel_builtin(d, "add_f16", &k));
    assert_null(k);
    assert_non_null(strstr(nu_error_message(NULL), "shaderFloat16"));
    d->info.features[NU_FEATURE_FLOAT16] = saved;
    saved = d->info.features[NU_FEATURE_STORAGE_16BIT];
    d->info.features[NU_FEATURE_STORAGE_16BIT] = false;
    NT_STATUS(NU_ERROR_UNSUPPORTED, nu_kernel_builtin(d, "mul_f16", &k));
    d->info.features[NU_FEATURE_STORAGE_16BIT] = saved;
    nt_close(d);
}

static void an_unknown_builtin_lists_the_names(void **state)
{
    nu_device *d = nt_open();
    nu_kernel *k = (nu_kernel *)1;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_kernel_builtin(d, "fill", &k));
    assert_null(k);
    const char *msg = nu_error_message(NULL);
    assert_non_null(strstr(msg, "'fill'"));
    assert_non_null(strstr(msg, "fill_u32"));
    assert_non_null(strstr(msg, "copy_u32"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_kernel_builtin(d, NULL, &k));
    nt_close(d);
}

static void groups_for_spreads_over_x_and_y(void **state)
{
    uint32_t g[3];
    nu_groups_for(0, 256, g);
    assert_int_equal(g[0], 0);
    assert_int_equal(g[1], 1);
    assert_int_equal(g[2], 1);
    nu_groups_for(1, 256, g);
    assert_int_equal(g[0], 1);
    nu_groups_for(256, 256, g);
    assert_int_equal(g[0], 1);
    nu_groups_for(257, 256, g);
    assert_int_equal(g[0], 2);
    nu_groups_for(65535ull * 256, 256, g);
    assert_int_equal(g[0], 65535);
    assert_int_equal(g[1], 1);
    nu_groups_for(65535ull * 256 + 1, 256, g);
    assert_int_equal(g[0], 65535);
    assert_int_equal(g[1], 2);
    assert_int_equal(g[2], 1);
    /* 2^32 - 1 elements, the largest 32-bit count. */
    uint64_t big = 0xFFFFFFFFull;
    nu_groups_for(big, 256, g);
    uint64_t needed = (big + 255) / 256;
    assert_int_equal(g[0], 65535);
    assert_int_equal(g[1], (needed + 65534) / 65535);
    assert_true((uint64_t)g[0] * g[1] * 256 >= big);
    /* copy_u32: 1024 words a workgroup. */
    NT_OK(nu_groups_for(4096, 1024, g));
    assert_int_equal(g[0], 4);
    NT_OK(nu_groups_for(4097, 1024, g));
    assert_int_equal(g[0], 5);
    /* The most workgroups there are: 65535 x 65535; one element more is refused, not capped. */
    NT_OK(nu_groups_for(65535ull * 65535 * 256, 256, g));
    assert_int_equal(g[0], 65535);
    assert_int_equal(g[1], 65535);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_groups_for(65535ull * 65535 * 256 + 1, 256, g));
    assert_non_null(strstr(nu_error_message(NULL), "65535 x 65535"));
    assert_int_equal(g[0] + g[1] + g[2], 0);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_groups_for(UINT64_MAX, 1, g));
    /* No elements per workgroup is no layout at all. */
    g[0] = 7;
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_groups_for(100, 0, g));
    assert_non_null(strstr(nu_error_message(NULL), "0 elements per workgroup"));
    assert_int_equal(g[0], 0);
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_groups_for(100, 256, NULL));
}

/* Every host allocation in kernel creation fails in turn: an error status, nothing leaked. */
static void every_allocation_in_kernel_creation_fails_cleanly(void **state)
{
    char dir[700], path[800];
    tmp_dir(dir, sizeof dir, "oom");
    snprintf(path, sizeof path, "%s/k.spv", dir);
    spv s;
    module m = {.spec_workgroup = true, .buffers = 2, .push_words = 2};
    assemble(&m, &s);
    write_bytes(path, s.w, s.n * 4);
    nu_device *d = nt_open();
    int failures = 0;
    for (long n = 0;; n++) {
        /* A new constant value each round: always a cache miss. */
        nu_specialization c[2] = {{0, (uint32_t)(1 + n)}, {5, 9}};
        nu_kernel_desc desc = {.path = path, .push_constant_size = 8, .constants = c, .constant_count = 2};
        int64_t baseline = nu__host_live();
        nu_kernel *k = (nu_kernel *)1;
        nu__host_fail_after(n, 0);
        nu_status st = nu_kernel_new(d, &desc, &k);
        int failed = nu__host_failed();
        nu__host_fail_after(-1, 0);
        if (!failed) {
            NT_OK(st);
            nu_kernel_free(k);
            break;
        }
        failures++;
        if (st == NU_OK) { /* an optional allocation (the table's growth) */
            nu_kernel_free(k);
            continue;
        }
        assert_int_equal(st, NU_ERROR_HOST_OUT_OF_MEMORY);
        assert_null(k);
        assert_int_equal(nu__host_live(), baseline);
    }
    print_message("kernel creation: %d allocation sites failed in turn\n", failures);
    assert_true(failures >= 3);
    nt_close(d);
    rm_rf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_kernel_is_made_from_bytes),
        cmocka_unit_test(a_kernel_is_made_from_a_file),
        cmocka_unit_test(bindings_and_workgroup_size_are_read_from_the_spirv),
        cmocka_unit_test(the_same_description_gives_the_same_kernel),
        cmocka_unit_test(spirv_is_validated_once_per_device),
        cmocka_unit_test(threads_creating_the_same_kernels_get_the_same_pointers),
        cmocka_unit_test(the_pipeline_cache_is_saved_and_loaded),
        cmocka_unit_test(the_cache_directory_follows_the_environment),
        cmocka_unit_test(failing_to_save_is_silent_unless_verbose),
        cmocka_unit_test(bad_arguments_are_refused),
        cmocka_unit_test(a_missing_file_is_an_io_error_naming_it),
        cmocka_unit_test(malformed_spirv_is_a_format_error),
        cmocka_unit_test(truncated_spirv_is_a_format_error),
        cmocka_unit_test(corrupted_words_are_refused),
        cmocka_unit_test(workgroup_sizes_beyond_the_device_are_refused),
        cmocka_unit_test(deeply_nested_types_are_refused_at_once),
        cmocka_unit_test(the_validator_accepts_cooperative_matrices),
        cmocka_unit_test(float16_fragments_are_rewritten_as_bfloat16),
        cmocka_unit_test(entry_points_and_bindings_are_checked),
        cmocka_unit_test(kernels_need_push_descriptors),
        cmocka_unit_test(every_builtin_kernel_loads),
        cmocka_unit_test(float16_kernels_need_the_features),
        cmocka_unit_test(an_unknown_builtin_lists_the_names),
        cmocka_unit_test(groups_for_spreads_over_x_and_y),
        cmocka_unit_test(every_allocation_in_kernel_creation_fails_cleanly),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
