/* op.c: what the kernel library's ops share (see op.h). */
#include "ops/op.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/host.h"
#include "exec/commands.h"
#include "exec/graph.h"
#include "kernel/builtins.h"
#include "kernel/kernel.h"
#include "kernels_table.h"
#include "memory/buffer.h"

/* The kernels the ops dispatched on this device, each with its constants: a few dozen at most,
 * so a list searched under a lock. */
typedef struct op_kernel {
    unsigned id;
    uint32_t n;
    uint32_t constants[NU__OP_MAX_CONSTANTS];
    nu_kernel *kernel;
} op_kernel;

/* The developer overrides' values (nu__op_env_knobs), each read once per device: the variable's
 * name (the callers' string constants) and a copy of its value (NULL: unset). */
typedef struct op_env {
    const char *var;
    char *value;
} op_env;

struct nu__ops {
    pthread_mutex_t lock;
    op_kernel *kernels;
    size_t count, capacity;
    op_env *env;
    size_t env_count, env_capacity;
    int fragments; /* nu__op_fragments_quad: 0 not yet asked, 1 the quad layout, -1 another or none */
};

nu_status nu__ops_init(nu_device *d)
{
    struct nu__ops *o = nu__calloc(1, sizeof *o);
    if (!o)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory opening a device");
    pthread_mutex_init(&o->lock, NULL);
    d->ops = o;
    return NU_OK;
}

void nu__ops_fini(nu_device *d)
{
    struct nu__ops *o = d->ops;
    if (!o)
        return;
    for (size_t i = 0; i < o->count; i++)
        nu_kernel_free(o->kernels[i].kernel);
    nu__free(o->kernels);
    for (size_t i = 0; i < o->env_count; i++)
        nu__free(o->env[i].value);
    nu__free(o->env);
    pthread_mutex_destroy(&o->lock);
    nu__free(o);
    d->ops = NULL;
}

nu_status nu_op_graph_param(nu_commands *c, nu_op_value value, uint32_t *param)
{
    static const char *const names[] = {"position", "q_position", "kv_length"};
    if ((unsigned)value >= sizeof names / sizeof names[0]) {
        if (param)
            *param = 0;
        return nu__fail(c ? c->s.device : NULL, NU_ERROR_INVALID_ARGUMENT, "nu_op_graph_param: value %d is not "
                        "a nu_op_value", (int)value);
    }
    return nu__graph_value_param(c, "nu_op_graph_param", (uint32_t)value, names[value], param);
}

bool nu__op_tensor_cores(const nu_device *d, nu_dtype operands, uint32_t min_subgroup)
{
    const nu_device_info *in = &d->info;
    if (!in->features[NU_FEATURE_COOPERATIVE_MATRIX] || !in->features[NU_FEATURE_VULKAN_MEMORY_MODEL] ||
        in->subgroup_size < min_subgroup || (operands == NU_DTYPE_BF16 && !d->has_bf16_coopmat))
        return false;
    for (uint32_t i = 0; i < in->cooperative_matrix_count && i < NU_MAX_COOPERATIVE_MATRIX_SHAPES; i++) {
        const nu_cooperative_matrix_shape *s = &in->cooperative_matrix[i];
        if (s->m == 16 && s->n == 16 && s->k == 16 && s->a == operands && s->b == operands &&
            s->c == NU_DTYPE_F32 && s->result == NU_DTYPE_F32)
            return true;
    }
    return false;
}

/* The quad layout of a 16 x 16 fragment (NVIDIA's mma.m16n8k16): lane t's element i holds row
 * t / 4 + 8 ((i >> 2) & 1), column 2 (t % 4) + (i & 1) + 8 ((i >> 1) & 1), 8 elements a lane. */
static bool quad_layout(const float *elements, float length)
{
    if (length != 8.0f)
        return false;
    for (uint32_t t = 0; t < 32; t++)
        for (uint32_t i = 0; i < 8; i++) {
            uint32_t r = t / 4 + 8 * ((i >> 2) & 1), c = 2 * (t % 4) + (i & 1) + 8 * ((i >> 1) & 1);
            if (elements[t * 16 + i] != (float)(16 * r + c))
                return false;
        }
    return true;
}

/* Runs kernels/matmul/coopmat_layout.comp once and reads what each lane's fragment elements hold. */
static bool probe_fragments(nu_device *d)
{
    nu_kernel *k;
    nu_buffer *out = NULL;
    nu_commands *c = NULL;
    float result[2 + 2 * 32 * 16];
    const uint32_t groups[3] = {1, 1, 1};
    bool quad = false;
    if (nu__op_kernel(d, NU__K_coopmat_layout, 0, NULL, 0, &k) != NU_OK ||
        nu_buffer_new(d, sizeof result, NU_STORAGE_PRIVATE, &out) != NU_OK)
        goto done;
    nu_buffer_set_name(out, "nu_op fragment layout probe");
    nu_binding bind = {.buffer = out, .access = NU_ACCESS_WRITE, .offset = 0, .size = sizeof result};
    if (nu_commands_new(d, NU_QUEUE_COMPUTE, &c) == NU_OK && nu_commands_fill(c, out, 0, sizeof result, 0) == NU_OK &&
        nu_commands_dispatch(c, k, groups, &bind, 1, NULL, 0) == NU_OK &&
        nu_commands_download(c, out, 0, result, sizeof result) == NU_OK && nu_commands_commit(c) == NU_OK &&
        nu_commands_wait(c, NU_WAIT_FOREVER) == NU_OK)
        quad = quad_layout(result + 2, result[0]) && quad_layout(result + 2 + 32 * 16, result[1]);
done:
    nu_commands_free(c);
    nu_buffer_free(out);
    return quad;
}

bool nu__op_fragments_quad(nu_device *d)
{
    struct nu__ops *o = d->ops;
    if (!nu__op_tensor_cores(d, NU_DTYPE_F16, 32) || d->info.subgroup_size != 32)
        return false;
    pthread_mutex_lock(&o->lock);
    int known = o->fragments;
    pthread_mutex_unlock(&o->lock);
    if (known)
        return known > 0;
    bool quad = probe_fragments(d); /* two threads may both run it: the same answer */
    pthread_mutex_lock(&o->lock);
    o->fragments = quad ? 1 : -1;
    pthread_mutex_unlock(&o->lock);
    return quad;
}

nu_status nu__op_counters(nu_device *d, const char *op, size_t n, const char *name, nu_buffer **out)
{
    *out = NULL;
    uint32_t *zero = nu__calloc(n, sizeof *zero);
    if (!zero)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", op);
    nu_status st = nu_buffer_from(d, zero, n * sizeof *zero, NU_STORAGE_PRIVATE, out);
    nu__free(zero);
    if (st == NU_OK)
        nu_buffer_set_name(*out, name);
    return st;
}

nu_status nu__op_kernel(nu_device *d, unsigned id, uint32_t push_size, const uint32_t *constants, uint32_t n,
                        nu_kernel **out)
{
    struct nu__ops *o = d->ops;
    *out = NULL;
    if (id >= nu__kernel_count || n > NU__OP_MAX_CONSTANTS)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "no op kernel %u with %u constants", id, n);
    pthread_mutex_lock(&o->lock);
    for (size_t i = 0; i < o->count; i++) {
        op_kernel *k = &o->kernels[i];
        if (k->id == id && k->n == n && (!n || memcmp(k->constants, constants, n * sizeof *constants) == 0)) {
            *out = k->kernel;
            pthread_mutex_unlock(&o->lock);
            return NU_OK;
        }
    }
    nu_status st = NU_OK;
    if (NU__GROW(o->kernels, o->capacity, o->count + 1, 16) != NU_OK) {
        pthread_mutex_unlock(&o->lock);
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory creating an op's kernel");
    }
    nu_specialization spec[NU__OP_MAX_CONSTANTS];
    for (uint32_t i = 0; i < n; i++)
        spec[i] = (nu_specialization){i, constants[i]};
    const nu__kernel_spirv *spv = &nu__kernels[id];
    nu_kernel_desc desc = {.spirv = spv->words, .spirv_size = spv->word_count * 4, .name = spv->name,
                           .push_constant_size = push_size, .constants = spec, .constant_count = n};
    nu_kernel *k = NULL;
    st = spv->f16_as_bf16 ? nu__kernel_new_f16_as_bf16(d, &desc, &k) : nu_kernel_new(d, &desc, &k);
    if (st == NU_OK) {
        op_kernel *e = &o->kernels[o->count++];
        memset(e, 0, sizeof *e);
        e->id = id;
        e->n = n;
        if (n) /* constants may be NULL when there are none */
            memcpy(e->constants, constants, n * sizeof *constants);
        e->kernel = k;
        *out = k;
    }
    pthread_mutex_unlock(&o->lock);
    return st;
}

uint32_t nu__op_dtype_code(nu_dtype dtype) { return nu__dtype_code(dtype); }

uint32_t nu__op_block_halves(const nu_tensor *t, int64_t stride)
{
    return (uint32_t)((uint64_t)stride / nu_dtype_block_elements(t->dtype) * (nu_dtype_block_bytes(t->dtype) / 2));
}

static const char *dtype_list(uint32_t dtypes, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = 0;
    for (unsigned i = 0; i < NU_DTYPE_COUNT && n < size; i++)
        if (dtypes & (1u << i))
            n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? ", " : "", nu_dtype_name((nu_dtype)i));
    return buf;
}

nu_status nu__op_check(const char *op, const char *name, const nu_tensor *t, uint32_t dtypes)
{
    char what[96];
    snprintf(what, sizeof what, "%s: %s", op, name);
    nu_status st = nu_tensor_check(t, what);
    if (st != NU_OK)
        return st;
    nu_device *d = t->buffer->device;
    if (!(dtypes & (1u << t->dtype))) {
        char list[160];
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s is %s; it takes %s", what, nu_dtype_name(t->dtype),
                        dtype_list(dtypes, list, sizeof list));
    }
    bool block = nu_dtype_block_elements(t->dtype) > 1;
    uint32_t unit = block ? 2 : (uint32_t)nu_dtype_size(t->dtype);
    if (t->offset % unit)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: offset %llu is not a multiple of %u bytes", what,
                        (unsigned long long)t->offset, unit);
    /* Shaders index in 32 bits: every element's index (and a block tensor's halves) fits. */
    uint64_t span = nu_tensor_span_bytes(t) / unit;
    if (span >= (1ull << 32) || nu_tensor_numel(t) >= (1ull << 32))
        return nu__fail(d, NU_ERROR_UNSUPPORTED, "%s: %llu elements are more than ops index (2^32 - 1)", what,
                        (unsigned long long)nu_tensor_numel(t));
    if ((unit == 2 || block) && !d->info.features[NU_FEATURE_STORAGE_16BIT])
        return nu__fail(d, NU_ERROR_UNSUPPORTED, "%s: %s needs 16-bit storage (storageBuffer16BitAccess), which %s lacks",
                        what, nu_dtype_name(t->dtype), d->info.name);
    return NU_OK;
}

nu_status nu__op_no_soa(const char *op, const char *name, const nu_tensor *t)
{
    char what[96];
    snprintf(what, sizeof what, "%s: %s", op, name);
    nu_status st = nu_tensor_check(t, what);
    if (st != NU_OK || !(NU__OP_REPACKED & NU__OP_DTYPE(t->dtype)))
        return st;
    return nu__fail(t->buffer->device, NU_ERROR_INVALID_ARGUMENT,
                    "%s is %s, which only nu_op_matvec, nu_op_matmul and nu_op_copy read (its blocks are repacked "
                    "for their loads); %s takes the %s tensor it was made from", what, nu_dtype_name(t->dtype), op,
                    t->dtype == NU_DTYPE_Q4_0_SOA ? "Q4_0" : "Q6_K");
}

nu_status nu__op_same_shape(const char *op, const char *an, const nu_tensor *a, const char *bn, const nu_tensor *b)
{
    bool same = a->rank == b->rank;
    for (uint32_t i = 0; same && i < a->rank; i++)
        same = a->shape[i] == b->shape[i];
    if (same)
        return NU_OK;
    char sa[96], sb[96];
    size_t na = 0, nb = 0;
    for (uint32_t i = 0; i < a->rank && i < NU_TENSOR_DIMS; i++)
        na += (size_t)snprintf(sa + na, sizeof sa - na, "%s%lld", i ? "x" : "", (long long)a->shape[i]);
    for (uint32_t i = 0; i < b->rank && i < NU_TENSOR_DIMS; i++)
        nb += (size_t)snprintf(sb + nb, sizeof sb - nb, "%s%lld", i ? "x" : "", (long long)b->shape[i]);
    return nu__fail(a->buffer->device, NU_ERROR_INVALID_ARGUMENT, "%s: %s is %s but %s is %s", op, an, sa, bn, sb);
}

nu_status nu__op_contiguous(const char *op, const char *name, const nu_tensor *t)
{
    if (nu_tensor_is_contiguous(t))
        return NU_OK;
    return nu__fail(t->buffer->device, NU_ERROR_INVALID_ARGUMENT, "%s: %s must be contiguous (row-major)", op, name);
}

bool nu__op_overlap(const nu_tensor *a, const nu_tensor *b)
{
    if (a->buffer != b->buffer)
        return false;
    uint64_t na = nu_tensor_span_bytes(a), nb = nu_tensor_span_bytes(b);
    if (!na || !nb)
        return false;
    return a->offset < b->offset + nb && b->offset < a->offset + na;
}

bool nu__op_same_view(const nu_tensor *a, const nu_tensor *b)
{
    if (a->buffer != b->buffer || a->offset != b->offset || a->dtype != b->dtype || a->rank != b->rank)
        return false;
    for (uint32_t i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i] || (a->shape[i] > 1 && a->strides[i] != b->strides[i]))
            return false;
    return true;
}

nu_status nu__op_no_alias(const char *op, const nu_tensor *dst, const char *name, const nu_tensor *src, bool in_place)
{
    if (!nu__op_overlap(dst, src) || (in_place && nu__op_same_view(dst, src)))
        return NU_OK;
    return nu__fail(dst->buffer->device, NU_ERROR_INVALID_ARGUMENT, "%s: dst overlaps %s%s", op, name,
                    in_place ? " (only the same view may be written in place)" : "");
}

nu_status nu__op_bind(const char *op, const nu_tensor *t, nu_access access, nu_binding *out, uint32_t *first)
{
    nu_device *d = t->buffer->device;
    /* At least 16 bytes: the shaders' vector paths load 16 bytes at a time from the binding's
     * start (a device may allow bindings at 4-byte offsets). */
    uint64_t align = d->info.min_storage_buffer_offset_alignment > 16 ? d->info.min_storage_buffer_offset_alignment : 16;
    uint64_t start = t->offset / align * align;
    uint64_t end = t->offset + nu_tensor_span_bytes(t);
    uint64_t size = t->buffer->size;
    uint64_t rounded = (end + 3) / 4 * 4;
    if (rounded <= size)
        end = rounded;
    if (end - start > d->info.max_storage_buffer_range)
        return nu__fail(d, NU_ERROR_UNSUPPORTED, "%s: a tensor of %llu bytes is more than one binding covers on %s (%llu)",
                        op, (unsigned long long)(end - start), d->info.name,
                        (unsigned long long)d->info.max_storage_buffer_range);
    uint32_t unit = nu_dtype_block_elements(t->dtype) > 1 ? 2 : (uint32_t)nu_dtype_size(t->dtype);
    *out = (nu_binding){.buffer = t->buffer, .access = access, .offset = (size_t)start, .size = (size_t)(end - start)};
    if (end == start) /* an empty tensor: the dispatch is skipped, but the binding stays valid */
        out->size = 0;
    *first = (uint32_t)((t->offset - start) / unit);
    return NU_OK;
}

void nu__op_groups(uint64_t threads, uint32_t local, uint32_t groups[3])
{
    uint64_t g = (threads + local - 1) / local;
    groups[0] = (uint32_t)(g > 65535 ? 65535 : g);
    groups[1] = groups[2] = 1;
}

void nu__op_dims4(const nu_tensor *t, uint32_t shape[4], uint32_t strides[4])
{
    uint32_t lead = NU_TENSOR_DIMS - t->rank;
    for (uint32_t i = 0; i < NU_TENSOR_DIMS; i++) {
        shape[i] = i < lead ? 1 : (uint32_t)t->shape[i - lead];
        strides[i] = i < lead ? 0 : (uint32_t)t->strides[i - lead];
    }
}

uint32_t nu__op_vector_path(const nu_tensor *const *t, const uint32_t *first, int n)
{
    bool f32 = false, aligned16 = true, aligned_step4 = true;
    for (int i = 0; i < n; i++) {
        if (!nu_tensor_is_contiguous(t[i]))
            return 0;
        uint64_t es = nu_dtype_size(t[i]->dtype), at = (uint64_t)first[i] * es;
        f32 |= es == 4;
        aligned16 &= at % 16 == 0;
        aligned_step4 &= at % (4 * es) == 0;
    }
    if (f32)
        return aligned_step4 ? 2 : 0;
    return aligned16 ? 1 : 0;
}

/* var's value as the device first read it, copied into buf (size bytes; "" where unset). */
static nu_status env_value(nu_device *d, const char *var, char *buf, size_t size)
{
    struct nu__ops *o = d->ops;
    buf[0] = 0;
    pthread_mutex_lock(&o->lock);
    size_t i = 0;
    while (i < o->env_count && strcmp(o->env[i].var, var))
        i++;
    if (i == o->env_count) { /* the first use on this device: read it now, once */
        const char *s = getenv(var);
        char *copy = NULL;
        if ((s && !(copy = nu__strdup(s))) || NU__GROW(o->env, o->env_capacity, o->env_count + 1, 8) != NU_OK) {
            nu__free(copy);
            pthread_mutex_unlock(&o->lock);
            return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory reading %s", var);
        }
        o->env[o->env_count++] = (op_env){var, copy};
    }
    if (o->env[i].value)
        snprintf(buf, size, "%s", o->env[i].value);
    pthread_mutex_unlock(&o->lock);
    return NU_OK;
}

nu_status nu__op_env_knobs(nu_device *d, const char *fn, const char *var, const char *help,
                           bool (*apply)(void *ctx, const char *key, const char *value), void *ctx)
{
    char buf[256];
    nu_status st = env_value(d, var, buf, sizeof buf);
    if (st != NU_OK || !buf[0])
        return st;
    for (char *save = NULL, *tok = strtok_r(buf, " ,", &save); tok; tok = strtok_r(NULL, " ,", &save)) {
        char *eq = strchr(tok, '=');
        bool ok;
        if (eq) {
            *eq = 0;
            ok = apply(ctx, tok, eq + 1);
            *eq = '=';
        } else {
            ok = apply(ctx, tok, ""); /* a bare word */
        }
        if (!ok)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: %s has '%s'; it takes %s", fn, var, tok, help);
    }
    return NU_OK;
}

bool nu__op_knob_u32(const char *value, uint32_t min, uint32_t max, bool pow2, uint32_t *out)
{
    char *end = NULL;
    unsigned long v = strtoul(value, &end, 10);
    if (end == value || *end || v < min || v > max || (pow2 && (v & (v - 1))))
        return false;
    *out = (uint32_t)v;
    return true;
}

nu_status nu__op_tune_check(nu_device *d, const char *fn, const nu__op_field *fields, int n)
{
    for (int i = 0; i < n; i++)
        if (fields[i].value && !fields[i].ok)
            return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: tune.%s is %u; it takes 0 (the default) or %s", fn,
                            fields[i].name, fields[i].value, fields[i].range);
    return NU_OK;
}

void nu__op_tune_take(uint32_t *const *to, const uint32_t *given, int n)
{
    for (int i = 0; i < n; i++)
        if (given[i])
            *to[i] = given[i];
}
