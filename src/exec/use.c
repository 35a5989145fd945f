/* use.c: the lifecycle of a buffer's use by a command buffer (see use.h). */
#include "exec/use.h"

#include "core/host.h"

nu_status nu__use_begin(nu__use *u, nu_buffer *b, bool write)
{
    if (nu__guard_reserve(&b->guard) != NU_OK)
        return NU_ERROR_HOST_OUT_OF_MEMORY;
    *u = (nu__use){b, write};
    nu__guard_retain(&b->guard);
    nu__guard_acquire(&b->guard, write);
    return NU_OK;
}

/* Adds the queue positions GPU work on `g` must wait for to waits[queue]. `*buf` is the caller's
 * array of `*cap` positions, replaced by a larger heap one (`*heap`) when needed. */
static nu_status collect(nu__guard *g, bool write, uint64_t waits[2], nu__fence **buf, size_t *cap, nu__fence **heap)
{
    for (;;) {
        size_t n = nu__guard_pending_fences(g, write, *buf, *cap);
        if (n <= *cap) {
            for (size_t i = 0; i < n; i++) {
                nu__fence f = (*buf)[i];
                if (f.queue < 2 && f.value > waits[f.queue])
                    waits[f.queue] = f.value;
            }
            return NU_OK;
        }
        nu__fence *p = nu__malloc(n * 2 * sizeof *p);
        if (!p)
            return NU_ERROR_HOST_OUT_OF_MEMORY;
        nu__free(*heap);
        *heap = *buf = p;
        *cap = n * 2;
    }
}

nu_status nu__uses_waits(const nu__use *uses, uint32_t n, uint64_t waits[2])
{
    nu__fence local[16], *heap = NULL, *buf = local;
    size_t cap = 16;
    nu_status st = NU_OK;
    for (uint32_t i = 0; i < n && st == NU_OK; i++) {
        nu_buffer *b = uses[i].buffer;
        st = collect(&b->guard, uses[i].write, waits, &buf, &cap, &heap);
        /* Memory handed out while its previous owner's work runs: wait for all of it. */
        if (st == NU_OK && b->alloc.busy)
            st = collect(b->alloc.busy, true, waits, &buf, &cap, &heap);
    }
    nu__free(heap);
    return st;
}

void nu__uses_commit(const nu__use *uses, uint32_t n, nu__fence fence)
{
    for (uint32_t i = 0; i < n; i++) {
        nu__guard *g = &uses[i].buffer->guard;
        nu__guard_record(g, fence, uses[i].write); /* room was reserved when the use began */
        nu__guard_committed(g);
    }
}

void nu__uses_submitted(const nu__use *uses, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        nu__guard_submitted(&uses[i].buffer->guard, uses[i].write);
}

void nu__uses_end(const nu__use *uses, uint32_t n, bool committed, nu__fence fence)
{
    for (uint32_t i = 0; i < n; i++) {
        nu__guard *g = &uses[i].buffer->guard;
        if (!committed) {
            nu__guard_committed(g);
            nu__guard_submitted(g, uses[i].write);
        }
        nu__guard_release_use(g, uses[i].write, committed ? &fence : NULL);
        nu__guard_release(g);
    }
}
