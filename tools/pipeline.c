/* pipeline.c: see pipeline.h.
 *
 * Step s computes, from the shared input x (read by every step):
 *   t1 = x * x          (mul_f32, an intermediate)
 *   t2 = t1 + x         (add_f32, an intermediate)
 *   y  = t2; y += s * x (a copy, then axpy_f32)
 * and downloads y; the intermediates are freed as soon as the step is committed, while the
 * step still runs. With reuse, the next steps' intermediates take that memory at once (ordered
 * after the step on the GPU); without it, they wait in the cache until the step completes and
 * new memory is allocated meanwhile. x holds small integers, so every value is exact and the
 * check against the CPU is bit for bit. */
#include "pipeline.h"

#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct step {
    nu_commands *c;
    float *result;
    uint32_t index;
} step;

float pipeline_weight(uint32_t layer, uint32_t i)
{
    return (float)((int)((i + layer * 7919u) * 2654435761u >> 28) - 8); /* -8..7 */
}

/* Step s's output against the CPU; x is the input of step s (layer `layer`'s weights). */
static bool check(uint32_t layer, const float *y, uint32_t n, uint32_t s)
{
    for (uint32_t i = 0; i < n; i++) {
        float x = pipeline_weight(layer, i);
        float want = x * x + x + (float)s * x;
        if (y[i] != want)
            return false;
    }
    return true;
}

nu_status pipeline_run(nu_device *d, bool reuse, uint32_t steps, uint32_t elements, uint32_t in_flight,
                          const pipeline_weights *weights, pipeline_result *out)
{
    memset(out, 0, sizeof *out);
    size_t bytes = (size_t)elements * 4;
    nu_kernel *mul = NULL, *add = NULL, *axpy = NULL;
    nu_buffer *x = NULL;
    float *host = weights ? NULL : malloc(bytes);
    step *ring = calloc(in_flight, sizeof *ring);
    nu_status st = (host || weights) && ring ? NU_OK : NU_ERROR_HOST_OUT_OF_MEMORY;
    if (st == NU_OK && (st = nu_kernel_builtin(d, "mul_f32", &mul)) == NU_OK &&
        (st = nu_kernel_builtin(d, "add_f32", &add)) == NU_OK)
        st = nu_kernel_builtin(d, "axpy_f32", &axpy);
    for (uint32_t i = 0; st == NU_OK && host && i < elements; i++)
        host[i] = pipeline_weight(0, i);
    if (st == NU_OK && host)
        st = nu_buffer_from(d, host, bytes, NU_STORAGE_PRIVATE, &x);
    for (uint32_t i = 0; st == NU_OK && i < in_flight; i++)
        if (!(ring[i].result = malloc(bytes)))
            st = NU_ERROR_HOST_OUT_OF_MEMORY;
    nu_device_wait_idle(d, NU_WAIT_FOREVER);
    nu_memory_clear_cache(d);
    nu_memory_reset_peak(d);
    bool ok = true;
    uint32_t groups[3];
    if (st == NU_OK)
        st = nu_groups_for(elements, 256, groups);
    double t0 = cli_now_s();
    for (uint32_t s = 0; st == NU_OK && s < steps + in_flight; s++) {
        step *slot = &ring[s % in_flight];
        if (slot->c) {
            /* The oldest step in flight: wait, check, free. */
            st = nu_commands_wait(slot->c, NU_WAIT_FOREVER);
            uint32_t layer = weights ? 1 + slot->index % weights->layers : 0; /* weights tensor l holds layer l + 1 */
            ok &= st == NU_OK && check(layer, slot->result, elements, slot->index);
            nu_commands_free(slot->c);
            slot->c = NULL;
        }
        if (st != NU_OK || s >= steps)
            continue;
        nu_buffer *t1 = NULL, *t2 = NULL, *y = NULL;
        nu_status (*make)(nu_device *, size_t, nu_storage, nu_buffer **) = reuse ? nu_buffer_new_gpu : nu_buffer_new;
        if ((st = make(d, bytes, NU_STORAGE_PRIVATE, &t1)) == NU_OK &&
            (st = make(d, bytes, NU_STORAGE_PRIVATE, &t2)) == NU_OK &&
            (st = make(d, bytes, NU_STORAGE_PRIVATE, &y)) == NU_OK && (st = nu_commands_new(d, NU_QUEUE_COMPUTE, &slot->c)) == NU_OK) {
            /* The step's input: the shared x, or this step's layer of the weights. */
            nu_buffer *in = weights ? weights->buffer : x;
            size_t off = weights ? (size_t)weights->offsets[s % weights->layers] : 0;
            nu_binding b1[3] = {{t1, NU_ACCESS_WRITE, 0, 0}, {in, NU_ACCESS_READ, off, bytes}, {in, NU_ACCESS_READ, off, bytes}};
            nu_binding b2[3] = {{t2, NU_ACCESS_WRITE, 0, 0}, {t1, NU_ACCESS_READ, 0, 0}, {in, NU_ACCESS_READ, off, bytes}};
            nu_binding b3[2] = {{y, NU_ACCESS_READ_WRITE, 0, 0}, {in, NU_ACCESS_READ, off, bytes}};
            struct {
                float alpha;
                uint32_t count;
            } ax = {(float)s, elements};
            if ((st = nu_commands_dispatch(slot->c, mul, groups, b1, 3, &elements, 4)) == NU_OK &&
                (st = nu_commands_dispatch(slot->c, add, groups, b2, 3, &elements, 4)) == NU_OK &&
                (st = nu_commands_copy(slot->c, y, 0, t2, 0, bytes)) == NU_OK &&
                (st = nu_commands_dispatch(slot->c, axpy, groups, b3, 2, &ax, sizeof ax)) == NU_OK &&
                (st = nu_commands_download(slot->c, y, 0, slot->result, bytes)) == NU_OK)
                st = nu_commands_commit(slot->c);
            slot->index = s;
        }
        /* Freed at once, while the step runs. */
        nu_buffer_free(t1);
        nu_buffer_free(t2);
        nu_buffer_free(y);
        nu_memory_stats ms;
        nu_memory_get_stats(d, &ms);
        if (ms.active + ms.cache + ms.pending > out->held_peak)
            out->held_peak = ms.active + ms.cache + ms.pending;
    }
    out->seconds = cli_now_s() - t0;
    /* Per step: mul reads 2n, writes n; add 2n + n; copy n + n; axpy 2n + n: 11 n floats. */
    out->gbps = (double)steps * 11.0 * (double)bytes / out->seconds / 1e9;
    nu_memory_stats ms;
    nu_memory_get_stats(d, &ms);
    out->peak = ms.peak;
    out->cache = ms.cache;
    out->reserved = ms.reserved;
    out->verified = st == NU_OK && ok;
    for (uint32_t i = 0; ring && i < in_flight; i++) {
        if (ring[i].c) {
            nu_commands_wait(ring[i].c, NU_WAIT_FOREVER);
            nu_commands_free(ring[i].c);
        }
        free(ring[i].result);
    }
    nu_buffer_free(x);
    nu_kernel_free(mul);
    nu_kernel_free(add);
    nu_kernel_free(axpy);
    free(ring);
    free(host);
    return st;
}
