/* spirv.c: a kernel's SPIR-V, checked before any driver sees it (see spirv.h).
 *
 * Kernels come from files users pass around: untrusted input. Drivers' compilers are not
 * robust against malformed SPIR-V (lavapipe's crashes on a module cut at an instruction
 * boundary, and accepts one without OpFunctionEnd, which the validation layer then crashes
 * on), so every module goes through SPIRV-Tools' validator for the device's Vulkan version
 * first. nuvec builds that validator from Debian 13's SPIRV-Tools (deps/deps.sh): Debian 12's
 * rejects the cooperative-matrix capability tensor-core kernels use.
 *
 * The validator's target is the Vulkan version the device runs nuvec at: the device's, at
 * most 1.3 (device.c creates the instance for 1.3 at most, and a device never runs a newer
 * version than its instance). Its options follow the features nuvec enables: relaxed block
 * layout is core from Vulkan 1.1 (the validator's default there); nuvec enables neither
 * scalarBlockLayout, uniformBufferStandardLayout nor maintenance4 (LocalSizeId), so those
 * stay off.
 *
 * The validator allocates with C++'s new, outside nu__malloc: host-allocation failure
 * injection does not reach it, and it does not recover from running out of memory.
 *
 * Reflection (the entry point, its workgroup size, buffers and push constants) runs on
 * validated modules only, but checks every word count, operand and id before use anyway, and
 * bounds its work (sorted tables, a budget for nested types), so that it is safe on any
 * input: the fuzz target runs it on raw bytes as well. */
#include "kernel/spirv.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <spirv-tools/libspirv.h>
#include <vulkan/vulkan_core.h>

#include "core/array.h"
#include "core/error.h"
#include "core/host.h"
#include "kernel/spirv_words.h"


/* ---- validation ----------------------------------------------------------------------- */

uint32_t nu__spirv_max_version(uint32_t api)
{
    if (api >= VK_API_VERSION_1_3)
        return 0x00010600u;
    if (api >= VK_API_VERSION_1_2)
        return 0x00010500u;
    if (api >= VK_API_VERSION_1_1)
        return 0x00010300u;
    return 0x00010000u;
}

/* The Vulkan version kernels run at (see the top of this file), and the validator's target. */
static uint32_t effective_api(uint32_t api) { return api > VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : api; }

static spv_target_env target_env(uint32_t api)
{
    if (api >= VK_API_VERSION_1_3)
        return SPV_ENV_VULKAN_1_3;
    if (api >= VK_API_VERSION_1_2)
        return SPV_ENV_VULKAN_1_2;
    if (api >= VK_API_VERSION_1_1)
        return SPV_ENV_VULKAN_1_1;
    return SPV_ENV_VULKAN_1_0;
}

/* The validator's diagnostic on one line (it may span several: the instruction follows). */
static void one_line(char *out, size_t size, const char *s)
{
    size_t n = 0;
    bool space = false;
    for (; s && *s && n + 1 < size; s++) {
        if (*s == '\n' || *s == '\r' || *s == '\t' || *s == ' ') {
            space = n > 0;
            continue;
        }
        if (space && n + 2 < size)
            out[n++] = ' ';
        space = false;
        out[n++] = *s;
    }
    out[n] = 0;
}

/* The validator checks each block's layout by walking its type tree once per member at every
 * level, which is exponential in the nesting of structs: 1.6 KB of SPIR-V with structs of 8
 * structs 7 deep (8 MiB blocks) took it 2 s, 8 deep 16 s. Before it runs, the members of the
 * types that variables and pointers refer to are counted, each nested use again (as the
 * validator walks them), and a module beyond TYPE_MEMBERS_MAX is refused. Real kernels have
 * a few hundred; this count takes one pass. Malformed instructions are left to the validator. */
#define TYPE_MEMBERS_MAX (1u << 18)

typedef struct tcount {
    uint32_t id;
    uint32_t members; /* at most TYPE_MEMBERS_MAX + 1 */
} tcount;

static uint32_t tc_hash(uint32_t id) { return id * 0x9e3779b1u; }

/* The count of `id` in the table (open addressing, `mask + 1` slots), 1 if not there. */
static uint32_t tc_get(const tcount *t, uint32_t mask, uint32_t id)
{
    if (id == 0) /* never an id: 0 marks a free slot */
        return 1;
    for (uint32_t i = tc_hash(id) & mask;; i = (i + 1) & mask) {
        if (t[i].id == id)
            return t[i].members;
        if (t[i].id == 0)
            return 1;
    }
}

static void tc_put(tcount *t, uint32_t mask, uint32_t id, uint32_t members)
{
    for (uint32_t i = tc_hash(id) & mask;; i = (i + 1) & mask) {
        if (t[i].id == 0 || t[i].id == id) {
            t[i] = (tcount){id, members};
            return;
        }
    }
}

static uint32_t tc_add(uint64_t a, uint64_t b)
{
    return a + b > TYPE_MEMBERS_MAX ? TYPE_MEMBERS_MAX + 1 : (uint32_t)(a + b);
}

static nu_status check_type_nesting(nu_device *d, const char *label, const uint32_t *w, size_t n)
{
    size_t types = 0;
    for (size_t at = SPV_HEADER_WORDS; at < n;) {
        uint32_t wc = w[at] >> 16, op = w[at] & 0xffffu;
        if (wc == 0 || wc > n - at)
            return NU_OK; /* the validator says what is wrong */
        types += op == OP_TYPE_STRUCT || op == OP_TYPE_ARRAY || op == OP_TYPE_RUNTIME_ARRAY || op == OP_TYPE_POINTER;
        at += wc;
    }
    if (types == 0)
        return NU_OK;
    size_t slots = 16;
    while (slots < 2 * types)
        slots *= 2;
    tcount *t = nu__calloc(slots, sizeof *t);
    if (!t)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "kernel '%s': out of host memory reading its SPIR-V", label);
    uint32_t mask = (uint32_t)(slots - 1);
    uint64_t total = 0;
    for (size_t at = SPV_HEADER_WORDS; at < n && total <= TYPE_MEMBERS_MAX; at += w[at] >> 16) {
        uint32_t wc = w[at] >> 16, op = w[at] & 0xffffu;
        if (op == OP_TYPE_STRUCT && wc >= 2 && w[at + 1] != 0) {
            uint32_t m = 1;
            for (uint32_t i = 2; i < wc; i++)
                m = tc_add(m, tc_get(t, mask, w[at + i]));
            tc_put(t, mask, w[at + 1], m);
        } else if ((op == OP_TYPE_ARRAY || op == OP_TYPE_RUNTIME_ARRAY) && wc >= 3 && w[at + 1] != 0) {
            tc_put(t, mask, w[at + 1], tc_get(t, mask, w[at + 2]));
        } else if (op == OP_TYPE_POINTER && wc >= 4 && w[at + 1] != 0) {
            uint32_t m = tc_get(t, mask, w[at + 3]);
            tc_put(t, mask, w[at + 1], m);
            total += m;
        } else if (op == OP_VARIABLE && wc >= 4) {
            total += tc_get(t, mask, w[at + 1]);
        }
    }
    nu__free(t);
    if (total > TYPE_MEMBERS_MAX)
        return nu__fail(d, NU_ERROR_UNSUPPORTED,
                        "kernel '%s': its variables' types nest structs too deeply to validate (more than %u members, "
                        "counting each nested use)",
                        label, TYPE_MEMBERS_MAX);
    return NU_OK;
}

static atomic_ullong validations;

uint64_t nu__spirv_validations(void) { return atomic_load(&validations); }

static nu_status validate(nu_device *d, uint32_t api, const char *label, const uint32_t *words, size_t n)
{
    nu_status st = check_type_nesting(d, label, words, n);
    if (st != NU_OK)
        return st;
    atomic_fetch_add(&validations, 1);
    spv_context ctx = spvContextCreate(target_env(api));
    spv_validator_options opts = spvValidatorOptionsCreate();
    if (!ctx || !opts) {
        spvValidatorOptionsDestroy(opts);
        spvContextDestroy(ctx);
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "kernel '%s': out of host memory validating its SPIR-V",
                        label);
    }
    spv_const_binary_t binary = {.code = words, .wordCount = n};
    spv_diagnostic diag = NULL;
    spv_result_t res = spvValidateWithOptions(ctx, opts, &binary, &diag);
    if (res != SPV_SUCCESS) {
        char why[768];
        one_line(why, sizeof why, diag && diag->error ? diag->error : "no diagnostic");
        if (res == SPV_ERROR_OUT_OF_MEMORY)
            st = nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "kernel '%s': out of host memory validating its SPIR-V",
                          label);
        else
            st = nu__fail(d, NU_ERROR_FORMAT,
                          "kernel '%s': invalid SPIR-V for Vulkan %u.%u (SPIRV-Tools validator): %s", label,
                          VK_API_VERSION_MAJOR(api), VK_API_VERSION_MINOR(api), why);
    }
    spvDiagnosticDestroy(diag);
    spvValidatorOptionsDestroy(opts);
    spvContextDestroy(ctx);
    return st;
}

nu_status nu__spirv_check(nu_device *d, uint32_t api_version, const char *label, const uint32_t *words, size_t size,
                          const char *entry, nu__spirv_layout *out)
{
    memset(out, 0, sizeof *out);
    if (size % 4 != 0 || size < SPV_HEADER_WORDS * 4)
        return nu__fail(d, NU_ERROR_FORMAT,
                        "kernel '%s': %zu bytes is not SPIR-V (a whole number of 4-byte words, at least 20 bytes)",
                        label, size);
    if (size > NU__SPIRV_MAX)
        return nu__fail(d, NU_ERROR_FORMAT, "kernel '%s': %zu bytes of SPIR-V is more than the %u MiB nuvec accepts",
                        label, size, NU__SPIRV_MAX >> 20);
    if (words[0] != SPV_MAGIC)
        return nu__fail(d, NU_ERROR_FORMAT, "kernel '%s': not SPIR-V (magic number 0x%08x, expected 0x%08x)", label,
                        words[0], SPV_MAGIC);
    /* The validator ignores the reserved schema word; drivers do not (lavapipe's fails). */
    if (words[4] != 0)
        return nu__fail(d, NU_ERROR_FORMAT, "kernel '%s': the SPIR-V header's reserved word (schema) is 0x%08x, not 0",
                        label, words[4]);
    uint32_t version = words[1], most = nu__spirv_max_version(api_version);
    if (version > most)
        return nu__fail(d, NU_ERROR_UNSUPPORTED,
                        "kernel '%s': SPIR-V %u.%u is newer than the %u.%u that Vulkan %u.%u accepts", label,
                        (version >> 16) & 0xff, (version >> 8) & 0xff, (most >> 16) & 0xff, (most >> 8) & 0xff,
                        VK_API_VERSION_MAJOR(api_version), VK_API_VERSION_MINOR(api_version));
    nu_status st = validate(d, effective_api(api_version), label, words, size / 4);
    if (st != NU_OK)
        return st;
    return nu__spirv_reflect(d, label, words, size / 4, entry, out);
}

/* ---- reflection ----------------------------------------------------------------------- */

#define NO_MEMBER UINT32_MAX

typedef struct def {
    uint32_t id;
    uint32_t at; /* word offset of the defining instruction */
} def;

typedef struct dec {
    uint32_t target, member, kind, value;
} dec;

typedef struct reflection {
    const uint32_t *w;
    size_t n;
    def *defs; /* types, constants and global variables, sorted by id after the walk */
    size_t def_count, def_cap;
    dec *decs; /* sorted by (target, member, kind) after the walk */
    size_t dec_count, dec_cap;
    bool found, other_model;
    uint32_t entry_id;
    uint32_t *iface;    /* the entry point's interface ids, sorted (a copy) */
    size_t iface_count;
    bool local_size_set, local_size_spec;
    uint32_t local_size[3];
    bool size_by_id;            /* LocalSizeId: the size is size_ids' values */
    uint32_t size_ids[3];
    uint32_t workgroup_builtin; /* id decorated BuiltIn WorkgroupSize, 0 if none */
    uint32_t bindings;          /* max binding + 1 over the entry's buffers */
    uint64_t push_extent;       /* bytes the push constant block spans (0: none or unknown) */
    bool has_push;
    unsigned budget;            /* steps left for extent_of (nested types can fan out) */
    nu__spirv_dim dims[3];
} reflection;

static const char *op_name(uint32_t op)
{
    switch (op) {
    case OP_ENTRY_POINT: return "OpEntryPoint";
    case OP_EXECUTION_MODE: return "OpExecutionMode";
    case OP_EXECUTION_MODE_ID: return "OpExecutionModeId";
    case OP_DECORATE: return "OpDecorate";
    case OP_MEMBER_DECORATE: return "OpMemberDecorate";
    case OP_VARIABLE: return "OpVariable";
    case OP_CONSTANT: return "OpConstant";
    default: return "a type or constant instruction";
    }
}

static bool push_def(reflection *r, uint32_t id, uint32_t at)
{
    if (NU__GROW(r->defs, r->def_cap, r->def_count + 1, 64) != NU_OK)
        return false;
    r->defs[r->def_count++] = (def){id, at};
    return true;
}

static bool push_dec(reflection *r, uint32_t target, uint32_t member, uint32_t kind, uint32_t value)
{
    if (NU__GROW(r->decs, r->dec_cap, r->dec_count + 1, 64) != NU_OK)
        return false;
    r->decs[r->dec_count++] = (dec){target, member, kind, value};
    return true;
}

static int def_cmp(const void *a, const void *b)
{
    uint32_t x = ((const def *)a)->id, y = ((const def *)b)->id;
    return x < y ? -1 : x > y;
}

static int dec_key_cmp(uint32_t t, uint32_t m, uint32_t k, const dec *e)
{
    if (t != e->target)
        return t < e->target ? -1 : 1;
    if (m != e->member)
        return m < e->member ? -1 : 1;
    if (k != e->kind)
        return k < e->kind ? -1 : 1;
    return 0;
}

static int dec_cmp(const void *a, const void *b)
{
    const dec *x = a;
    return dec_key_cmp(x->target, x->member, x->kind, b);
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The word offset of the instruction defining `id` (a type, constant or global variable),
 * or 0 (never a valid offset: the header comes first). */
static uint32_t def_at(const reflection *r, uint32_t id)
{
    size_t lo = 0, hi = r->def_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->defs[mid].id < id)
            lo = mid + 1;
        else if (r->defs[mid].id > id)
            hi = mid;
        else
            return r->defs[mid].at;
    }
    return 0;
}

static bool find_dec(const reflection *r, uint32_t target, uint32_t member, uint32_t kind, uint32_t *value)
{
    size_t lo = 0, hi = r->dec_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = dec_key_cmp(target, member, kind, &r->decs[mid]);
        if (c > 0) {
            lo = mid + 1;
        } else if (c < 0) {
            hi = mid;
        } else {
            if (value)
                *value = r->decs[mid].value;
            return true;
        }
    }
    return false;
}

/* Offsets come from the table of definitions, whose instructions the walk checked: they
 * lie inside the module with at least min_words(op) words. */
static uint32_t op_of(const reflection *r, uint32_t at) { return r->w[at] & 0xffffu; }
static uint32_t wc_of(const reflection *r, uint32_t at) { return r->w[at] >> 16; }

static uint32_t value_of(const reflection *r, uint32_t at) { return r->w[at + 3]; }

/* A workgroup size dimension given by the constant `id`: its value, or a specialisation
 * constant's default and SpecId. */
static nu__spirv_dim dim_of(const reflection *r, uint32_t id)
{
    uint32_t at = def_at(r, id), spec_id;
    if (at && op_of(r, at) == OP_CONSTANT)
        return (nu__spirv_dim){value_of(r, at), NU__SPIRV_CONSTANT};
    if (at && op_of(r, at) == OP_SPEC_CONSTANT && find_dec(r, id, NO_MEMBER, DEC_SPEC_ID, &spec_id) &&
        spec_id < NU__SPIRV_CONSTANT)
        return (nu__spirv_dim){value_of(r, at), spec_id};
    return (nu__spirv_dim){0, NU__SPIRV_UNKNOWN};
}

/* The value of a 32-bit OpConstant, false if `id` is not one. */
static bool constant_value(const reflection *r, uint32_t id, uint32_t *value)
{
    uint32_t at = def_at(r, id);
    if (!at || op_of(r, at) != OP_CONSTANT)
        return false;
    *value = r->w[at + 3];
    return true;
}

#define EXTENT_UNKNOWN 0
#define EXTENT_CAP (1ull << 40)
#define EXTENT_BUDGET 100000u

/* a * b + c, at most EXTENT_CAP (operands are at most EXTENT_CAP or 32-bit). */
static uint64_t extent_madd(uint64_t a, uint64_t b, uint64_t c)
{
    if (a && b > EXTENT_CAP / a)
        return EXTENT_CAP;
    uint64_t v = a * b + c;
    return v > EXTENT_CAP ? EXTENT_CAP : v;
}

/* Bytes from the start of a value of `type` to the end of its last byte, as laid out by its
 * Offset / ArrayStride / MatrixStride decorations: a lower bound of what the shader may read,
 * so that a push constant range is never refused wrongly. 0 when it cannot be worked out
 * (specialisation-sized arrays, missing decorations, a malformed module, a type too large to
 * walk within the budget). */
static uint64_t extent_of(reflection *r, uint32_t type, uint32_t matrix_stride, bool row_major, int depth)
{
    if (depth > 16 || r->budget == 0)
        return EXTENT_UNKNOWN;
    r->budget--;
    uint32_t at = def_at(r, type);
    if (!at)
        return EXTENT_UNKNOWN;
    uint32_t wc = wc_of(r, at);
    uint64_t e = EXTENT_UNKNOWN;
    switch (op_of(r, at)) {
    case OP_TYPE_INT:
    case OP_TYPE_FLOAT:
        e = r->w[at + 2] / 8;
        break;
    case OP_TYPE_VECTOR:
        e = extent_madd(extent_of(r, r->w[at + 2], 0, false, depth + 1), r->w[at + 3], 0);
        break;
    case OP_TYPE_MATRIX: {
        uint32_t columns = r->w[at + 3];
        uint32_t col_at = def_at(r, r->w[at + 2]);
        if (!col_at || op_of(r, col_at) != OP_TYPE_VECTOR || columns == 0)
            break;
        uint32_t rows = r->w[col_at + 3];
        uint64_t scalar = extent_of(r, r->w[col_at + 2], 0, false, depth + 1);
        if (rows == 0 || scalar == EXTENT_UNKNOWN)
            break;
        if (!matrix_stride)
            e = extent_madd(extent_madd(columns, rows, 0), scalar, 0);
        else if (row_major)
            e = extent_madd(matrix_stride, rows - 1, extent_madd(columns, scalar, 0));
        else
            e = extent_madd(matrix_stride, columns - 1, extent_madd(rows, scalar, 0));
        break;
    }
    case OP_TYPE_ARRAY: {
        uint32_t length, stride;
        uint64_t elem = extent_of(r, r->w[at + 2], matrix_stride, row_major, depth + 1);
        if (!constant_value(r, r->w[at + 3], &length) || length == 0 || elem == EXTENT_UNKNOWN)
            break;
        if (!find_dec(r, type, NO_MEMBER, DEC_ARRAY_STRIDE, &stride))
            stride = (uint32_t)(elem < UINT32_MAX ? elem : UINT32_MAX);
        e = extent_madd(stride, length - 1, elem);
        break;
    }
    case OP_TYPE_STRUCT:
        for (uint32_t m = 0; m + 2 < wc; m++) {
            uint32_t offset, ms = 0;
            if (!find_dec(r, type, m, DEC_OFFSET, &offset))
                return EXTENT_UNKNOWN;
            find_dec(r, type, m, DEC_MATRIX_STRIDE, &ms);
            bool rm = find_dec(r, type, m, DEC_ROW_MAJOR, NULL);
            uint64_t me = extent_of(r, r->w[at + 2 + m], ms, rm, depth + 1);
            if (me == EXTENT_UNKNOWN)
                return EXTENT_UNKNOWN;
            if (offset + me > e)
                e = offset + me;
        }
        break;
    default:
        break;
    }
    return e > EXTENT_CAP ? EXTENT_CAP : e;
}

static bool in_interface(const reflection *r, uint32_t id)
{
    return r->iface_count && bsearch(&id, r->iface, r->iface_count, sizeof *r->iface, u32_cmp) != NULL;
}

/* Minimum word counts of the instructions the walk reads operands of, and of those it
 * records as definitions (whose operands later lookups read). */
static uint32_t min_words(uint32_t op)
{
    switch (op) {
    case OP_ENTRY_POINT: return 4;
    case OP_EXECUTION_MODE: return 3;
    case OP_EXECUTION_MODE_ID: return 3;
    case OP_TYPE_BOOL: return 2;
    case OP_TYPE_INT: return 4;
    case OP_TYPE_FLOAT: return 3;
    case OP_TYPE_VECTOR: return 4;
    case OP_TYPE_MATRIX: return 4;
    case OP_TYPE_ARRAY: return 4;
    case OP_TYPE_RUNTIME_ARRAY: return 3;
    case OP_TYPE_STRUCT: return 2;
    case OP_TYPE_POINTER: return 4;
    case OP_CONSTANT: return 4;
    case OP_CONSTANT_COMPOSITE: return 3;
    case OP_SPEC_CONSTANT: return 4;
    case OP_SPEC_CONSTANT_COMPOSITE: return 3;
    case OP_VARIABLE: return 4;
    case OP_DECORATE: return 3;
    case OP_MEMBER_DECORATE: return 4;
    default: return 1;
    }
}

/* Walks the instruction stream once, recording what the checks after it need. Every
 * instruction's word count is checked against the words left before any operand is read. */
static nu_status walk(nu_device *d, const char *label, reflection *r, const char *entry)
{
    const uint32_t *w = r->w;
    size_t n = r->n;
    for (size_t at = SPV_HEADER_WORDS; at < n;) {
        uint32_t wc = w[at] >> 16, op = w[at] & 0xffffu;
        if (wc == 0)
            return nu__fail(d, NU_ERROR_FORMAT, "kernel '%s': SPIR-V instruction at word %zu has a word count of 0",
                            label, at);
        if (wc > n - at)
            return nu__fail(d, NU_ERROR_FORMAT,
                            "kernel '%s': SPIR-V instruction at word %zu (%u words) runs past the end (%zu words)",
                            label, at, wc, n);
        if (wc < min_words(op))
            return nu__fail(d, NU_ERROR_FORMAT, "kernel '%s': malformed %s at word %zu (%u words)", label,
                            op_name(op), at, wc);
        bool ok = true;
        switch (op) {
        case OP_ENTRY_POINT: {
            /* The name: a NUL-terminated string padded to whole words. */
            const char *name = (const char *)&w[at + 3];
            size_t max = (size_t)(wc - 3) * 4;
            size_t len = strnlen(name, max);
            if (len == max)
                return nu__fail(d, NU_ERROR_FORMAT, "kernel '%s': OpEntryPoint at word %zu has an unterminated name",
                                label, at);
            if (strcmp(name, entry) != 0 || r->found)
                break;
            if (w[at + 1] != MODEL_GLCOMPUTE) {
                r->other_model = true;
                break;
            }
            size_t name_words = len / 4 + 1; /* at most wc - 3, since len < max */
            r->found = true;
            r->entry_id = w[at + 2];
            r->iface_count = wc - 3 - name_words;
            if (r->iface_count) {
                r->iface = nu__malloc(r->iface_count * sizeof *r->iface);
                if (!r->iface) {
                    ok = false;
                    break;
                }
                memcpy(r->iface, &w[at + 3 + name_words], r->iface_count * sizeof *r->iface);
                qsort(r->iface, r->iface_count, sizeof *r->iface, u32_cmp);
            }
            break;
        }
        case OP_EXECUTION_MODE:
        case OP_EXECUTION_MODE_ID:
            if (!r->found || w[at + 1] != r->entry_id)
                break;
            if (op == OP_EXECUTION_MODE && w[at + 2] == MODE_LOCAL_SIZE) {
                if (wc < 6)
                    return nu__fail(d, NU_ERROR_FORMAT, "kernel '%s': malformed LocalSize at word %zu", label, at);
                r->local_size_set = true;
                memcpy(r->local_size, &w[at + 3], sizeof r->local_size);
            } else if (w[at + 2] == MODE_LOCAL_SIZE_ID) {
                if (wc < 6)
                    return nu__fail(d, NU_ERROR_FORMAT, "kernel '%s': malformed LocalSizeId at word %zu", label, at);
                r->local_size_spec = true;
                r->size_by_id = true;
                memcpy(r->size_ids, &w[at + 3], sizeof r->size_ids);
            }
            break;
        case OP_DECORATE: {
            uint32_t kind = w[at + 2];
            bool valued = kind == DEC_BINDING || kind == DEC_DESCRIPTOR_SET || kind == DEC_ARRAY_STRIDE ||
                          kind == DEC_BUILTIN || kind == DEC_SPEC_ID;
            if (valued && wc < 4)
                return nu__fail(d, NU_ERROR_FORMAT, "kernel '%s': malformed OpDecorate at word %zu", label, at);
            if (kind == DEC_BUILTIN && w[at + 3] == BUILTIN_WORKGROUP_SIZE)
                r->workgroup_builtin = w[at + 1];
            else if (valued || kind == DEC_BLOCK || kind == DEC_BUFFER_BLOCK)
                ok = push_dec(r, w[at + 1], NO_MEMBER, kind, valued ? w[at + 3] : 0);
            break;
        }
        case OP_MEMBER_DECORATE: {
            uint32_t kind = w[at + 3];
            bool valued = kind == DEC_OFFSET || kind == DEC_MATRIX_STRIDE;
            if (valued && wc < 5)
                return nu__fail(d, NU_ERROR_FORMAT, "kernel '%s': malformed OpMemberDecorate at word %zu", label, at);
            if (valued || kind == DEC_ROW_MAJOR)
                ok = push_dec(r, w[at + 1], w[at + 2], kind, valued ? w[at + 4] : 0);
            break;
        }
        case OP_TYPE_BOOL:
        case OP_TYPE_INT:
        case OP_TYPE_FLOAT:
        case OP_TYPE_VECTOR:
        case OP_TYPE_MATRIX:
        case OP_TYPE_ARRAY:
        case OP_TYPE_RUNTIME_ARRAY:
        case OP_TYPE_STRUCT:
        case OP_TYPE_POINTER:
            ok = push_def(r, w[at + 1], (uint32_t)at);
            break;
        case OP_CONSTANT:
        case OP_CONSTANT_COMPOSITE:
        case OP_SPEC_CONSTANT:
        case OP_SPEC_CONSTANT_COMPOSITE:
            ok = push_def(r, w[at + 2], (uint32_t)at);
            break;
        case OP_VARIABLE:
            if (w[at + 3] == SC_UNIFORM_CONSTANT || w[at + 3] == SC_UNIFORM || w[at + 3] == SC_STORAGE_BUFFER ||
                w[at + 3] == SC_PUSH_CONSTANT)
                ok = push_def(r, w[at + 2], (uint32_t)at);
            break;
        default:
            break;
        }
        if (!ok)
            return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "kernel '%s': out of host memory reading its SPIR-V",
                            label);
        at += wc;
    }
    return NU_OK;
}

/* The pointee of a pointer type, or 0. */
static uint32_t pointee(const reflection *r, uint32_t pointer_type)
{
    uint32_t at = def_at(r, pointer_type);
    return at && op_of(r, at) == OP_TYPE_POINTER ? r->w[at + 3] : 0;
}

/* Checks the module's buffers and push constants (after the walk, with the tables sorted). */
static nu_status check_resources(nu_device *d, const char *label, reflection *r)
{
    bool filter = r->w[1] >= 0x00010400u; /* SPIR-V 1.4+ entry points list every global they use */
    for (size_t i = 0; i < r->def_count; i++) {
        uint32_t at = r->defs[i].at;
        if (op_of(r, at) != OP_VARIABLE)
            continue;
        uint32_t id = r->w[at + 2], sc = r->w[at + 3];
        if (filter && !in_interface(r, id))
            continue;
        uint32_t type = pointee(r, r->w[at + 1]);
        uint32_t type_at = type ? def_at(r, type) : 0;
        if (!type_at)
            return nu__fail(d, NU_ERROR_FORMAT, "kernel '%s': variable %%%u has no pointer type", label, id);
        if (sc == SC_PUSH_CONSTANT) {
            r->has_push = true;
            uint64_t e = extent_of(r, type, 0, false, 0);
            if (e > r->push_extent)
                r->push_extent = e;
            continue;
        }
        uint32_t set, binding;
        if (!find_dec(r, id, NO_MEMBER, DEC_DESCRIPTOR_SET, &set) || !find_dec(r, id, NO_MEMBER, DEC_BINDING, &binding))
            return nu__fail(d, NU_ERROR_FORMAT, "kernel '%s': resource variable %%%u lacks a DescriptorSet or Binding",
                            label, id);
        if (set != 0)
            return nu__fail(d, NU_ERROR_FORMAT,
                            "kernel '%s': binding %u is in descriptor set %u; nuvec kernels use set 0 only", label,
                            binding, set);
        uint32_t top = op_of(r, type_at);
        if (sc == SC_UNIFORM_CONSTANT)
            return nu__fail(d, NU_ERROR_FORMAT,
                            "kernel '%s': binding %u is an image, sampler or other non-buffer resource; nuvec binds "
                            "storage buffers only",
                            label, binding);
        if (top == OP_TYPE_ARRAY || top == OP_TYPE_RUNTIME_ARRAY)
            return nu__fail(d, NU_ERROR_FORMAT,
                            "kernel '%s': binding %u is an array of descriptors; nuvec binds one buffer per binding",
                            label, binding);
        if (sc == SC_UNIFORM && !find_dec(r, type, NO_MEMBER, DEC_BUFFER_BLOCK, NULL))
            return nu__fail(d, NU_ERROR_FORMAT,
                            "kernel '%s': binding %u is a uniform buffer; nuvec binds storage buffers only", label,
                            binding);
        if (binding >= 1024)
            return nu__fail(d, NU_ERROR_FORMAT, "kernel '%s': binding %u is beyond any device's push descriptors",
                            label, binding);
        if (binding + 1 > r->bindings)
            r->bindings = binding + 1;
    }
    return NU_OK;
}

static nu_status reflect(nu_device *d, const char *label, reflection *r, const char *entry)
{
    if (r->n < SPV_HEADER_WORDS)
        return nu__fail(d, NU_ERROR_FORMAT, "kernel '%s': %zu words is shorter than a SPIR-V header", label, r->n);
    if (r->n > NU__SPIRV_MAX / 4)
        return nu__fail(d, NU_ERROR_FORMAT, "kernel '%s': %zu words of SPIR-V is more than nuvec accepts", label,
                        r->n);
    nu_status st = walk(d, label, r, entry);
    if (st != NU_OK)
        return st;
    if (!r->found)
        return nu__fail(d, NU_ERROR_FORMAT,
                        r->other_model ? "kernel '%s': the entry point '%s' is not a compute shader (GLCompute)"
                                       : "kernel '%s': the SPIR-V has no compute entry point named '%s'",
                        label, entry);
    if (r->def_count)
        qsort(r->defs, r->def_count, sizeof *r->defs, def_cmp);
    if (r->dec_count)
        qsort(r->decs, r->dec_count, sizeof *r->decs, dec_cmp);
    /* A WorkgroupSize built-in overrides LocalSize(Id): known if it is a constant, set at
     * pipeline creation if it is a specialisation constant. */
    uint32_t wg_at = r->workgroup_builtin ? def_at(r, r->workgroup_builtin) : 0;
    if (wg_at && (op_of(r, wg_at) == OP_SPEC_CONSTANT_COMPOSITE || op_of(r, wg_at) == OP_CONSTANT_COMPOSITE) &&
        wc_of(r, wg_at) >= 6) {
        r->local_size_spec = op_of(r, wg_at) == OP_SPEC_CONSTANT_COMPOSITE;
        r->size_by_id = true;
        memcpy(r->size_ids, &r->w[wg_at + 3], sizeof r->size_ids);
    }
    for (int i = 0; i < 3; i++) {
        if (r->size_by_id)
            r->dims[i] = dim_of(r, r->size_ids[i]);
        else if (r->local_size_set)
            r->dims[i] = (nu__spirv_dim){r->local_size[i], NU__SPIRV_CONSTANT};
        else
            r->dims[i] = (nu__spirv_dim){0, NU__SPIRV_UNKNOWN};
    }
    if (r->size_by_id && !r->local_size_spec && r->dims[0].spec_id == NU__SPIRV_CONSTANT &&
        r->dims[1].spec_id == NU__SPIRV_CONSTANT && r->dims[2].spec_id == NU__SPIRV_CONSTANT) {
        for (int i = 0; i < 3; i++)
            r->local_size[i] = r->dims[i].value;
        r->local_size_set = true;
    }
    if (r->local_size_spec || !r->local_size_set)
        memset(r->local_size, 0, sizeof r->local_size);
    return check_resources(d, label, r);
}

nu_status nu__spirv_reflect(nu_device *d, const char *label, const uint32_t *words, size_t word_count,
                            const char *entry, nu__spirv_layout *out)
{
    memset(out, 0, sizeof *out);
    reflection r;
    memset(&r, 0, sizeof r);
    r.w = words;
    r.n = word_count;
    r.budget = EXTENT_BUDGET;
    nu_status st = reflect(d, label, &r, entry ? entry : "main");
    if (st == NU_OK) {
        out->bindings = r.bindings;
        memcpy(out->local_size, r.local_size, sizeof out->local_size);
        memcpy(out->size, r.dims, sizeof out->size);
        out->has_push = r.has_push;
        out->push_extent = r.push_extent;
    }
    nu__free(r.defs);
    nu__free(r.decs);
    nu__free(r.iface);
    return st;
}
