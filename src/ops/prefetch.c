/* prefetch.c: reading bytes into the device's caches ahead of the op that needs them
 * (nu_op_prefetch; kernels/copy/prefetch.comp). */
#include "core/error.h"
#include "exec/commands.h"
#include "kernels_table.h"
#include "ops/op.h"

/* prefetch.comp's push constants. */
typedef struct prefetch_push {
    uint32_t vecs, words, salt;
} prefetch_push;

/* The kernel's store happens by chance only, where a thread's loads fold to this word. */
#define PREFETCH_SALT 0x9e3779b9u

nu_status nu_op_prefetch(nu_commands *c, const nu_tensor *src, const nu_prefetch_desc *desc)
{
    const char *fn = "nu_op_prefetch";
    if (!c)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL command buffer", fn);
    nu_prefetch_desc o = desc ? *desc : (nu_prefetch_desc){0};
    nu_status st;
    if (!src)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL src", fn);
    if ((st = nu_tensor_check(src, "nu_op_prefetch: src")) != NU_OK ||
        (o.after && (st = nu_tensor_check(o.after, "nu_op_prefetch: after")) != NU_OK))
        return st;
    nu_device *d = nu_buffer_device(src->buffer);
    uint64_t span = nu_tensor_span_bytes(src);
    if (o.bytes > span)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: bytes %llu is past src's %llu bytes", fn,
                        (unsigned long long)o.bytes, (unsigned long long)span);
    if (o.after && nu_buffer_device(o.after->buffer) != d)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: after is on another device than src", fn);
    uint64_t want = o.bytes ? o.bytes : span;
    if (!want)
        return NU_OK;
    /* The binding: from src's first byte rounded down to the device's (and the kernel's 16-byte)
     * alignment, to its last wanted byte rounded up to a whole word where the buffer has it, at
     * most one binding's range (a longer span is read in part: nothing depends on it). */
    uint64_t align = d->info.min_storage_buffer_offset_alignment > 16 ? d->info.min_storage_buffer_offset_alignment : 16;
    uint64_t start = src->offset / align * align, end = src->offset + want, size = nu_buffer_size(src->buffer);
    end = (end + 3) / 4 * 4 <= size ? (end + 3) / 4 * 4 : end;
    if (end - start > d->info.max_storage_buffer_range)
        end = start + d->info.max_storage_buffer_range / 16 * 16;
    prefetch_push push = {(uint32_t)((end - start) / 16), (uint32_t)((end - start) / 4), PREFETCH_SALT};
    nu_kernel *k;
    if ((st = nu__op_kernel(d, NU__K_prefetch, sizeof push, NULL, 0, &k)) != NU_OK)
        return st;
    nu_buffer *sink;
    if ((st = nu_buffer_new_gpu(d, (size_t)(2 * align), NU_STORAGE_PRIVATE, &sink)) != NU_OK)
        return st;
    nu_buffer_set_name(sink, "nuvec prefetch sink");
    /* The sink: the kernel's store at 0, and 16 bytes to read where after is NULL one binding
     * alignment on (apart, so that the dispatch's own accesses do not overlap). Once the dispatch
     * is recorded the recording owns it: it lives as long as the recorded work (a graph's, or
     * until a commit's work completes). */
    nu_binding bind[3] = {
        {.buffer = src->buffer, .access = NU_ACCESS_READ, .offset = (size_t)start, .size = (size_t)(end - start)},
        {.buffer = sink, .access = NU_ACCESS_WRITE, .offset = 0, .size = 16},
        {.buffer = sink, .access = NU_ACCESS_READ, .offset = (size_t)align, .size = 16}, /* where after is NULL */
    };
    if (o.after) {
        uint32_t first;
        if ((st = nu__op_bind(fn, o.after, NU_ACCESS_READ, &bind[2], &first)) != NU_OK) {
            nu_buffer_free(sink);
            return st;
        }
        if (!bind[2].size) /* an empty after: nothing to follow */
            bind[2] = (nu_binding){.buffer = sink, .access = NU_ACCESS_READ, .offset = (size_t)align, .size = 16};
    }
    uint32_t groups[3] = {o.groups ? o.groups : d->info.compute_units ? d->info.compute_units : 16, 1, 1};
    /* No more workgroups than the range has loads for (lavapipe ends a loop nest past 65535
     * iterations: a long range on few workgroups would read only its start, harmlessly). */
    uint64_t needed = ((uint64_t)push.vecs + 255) / 256;
    if (groups[0] > needed)
        groups[0] = needed ? (uint32_t)needed : 1;
    if (groups[0] > 65535)
        groups[0] = 65535;
    if ((st = nu_commands_dispatch(c, k, groups, bind, 3, &push, sizeof push)) != NU_OK) {
        nu_buffer_free(sink);
        return st;
    }
    return nu__commands_adopt(c, sink);
}
