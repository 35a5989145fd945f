/* grid.c: persistent dispatches (grid.h; kernels/graph/grid_sync.glsl, chain_body.glsl). */
#include "ops/grid.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels_table.h"
#include "nuvec/kernel.h"
#include "ops/op.h"

/* The chain kernel's push constants (chain_body.glsl's Push). */
typedef struct chain_push {
    uint32_t count, steps, shift, groups, spin_limit;
} chain_push;

nu_status nu__grid_sync_new(nu_device *d, nu_buffer **out)
{
    static const uint32_t zero[NU__GRID_SYNC_SIZE / 4];
    nu_buffer *b = NULL;
    nu_status st = nu_buffer_new(d, NU__GRID_SYNC_SIZE, NU_STORAGE_PRIVATE, &b);
    if (st == NU_OK)
        st = nu_buffer_write(b, 0, zero, sizeof zero);
    if (st != NU_OK) {
        nu_buffer_free(b);
        b = NULL;
    }
    *out = b;
    return st;
}

uint32_t nu__grid_spin_default(const nu_device *d)
{
    const char *v = getenv("NUVEC_GRID_SPIN");
    if (v && *v) {
        char *end;
        unsigned long n = strtoul(v, &end, 10);
        if (!*end && n > 0 && n <= UINT32_MAX)
            return (uint32_t)n;
    }
    return d->info.type == NU_DEVICE_CPU ? 1u << 25 : 1u << 22;
}

bool nu__grid_vmm(const nu_device *d)
{
    const char *v = getenv("NUVEC_GRID_SYNC");
    /* vk/logical.c enables vulkanMemoryModel only with cooperative matrices (the feature flag
     * alone says what the device supports). */
    return v && !strcmp(v, "vmm") && d->info.features[NU_FEATURE_VULKAN_MEMORY_MODEL] &&
           d->info.features[NU_FEATURE_COOPERATIVE_MATRIX];
}

nu_status nu__grid_check(nu_buffer *sync)
{
    nu_device *d = nu_buffer_device(sync);
    uint32_t words[NU__GRID_SYNC_SIZE / 4];
    nu_status st = nu_buffer_read(sync, 0, words, sizeof words);
    if (st != NU_OK)
        return st;
    if (!words[2])
        return NU_OK;
    static const uint32_t zero[NU__GRID_SYNC_SIZE / 4];
    if ((st = nu_buffer_write(sync, 0, zero, sizeof zero)) != NU_OK)
        return st;
    return nu__fail(d, NU_ERROR_TIMEOUT,
                    "grid barrier timed out: workgroups not co-resident (a persistent dispatch's workgroups waited for "
                    "others that never arrived; its results are not valid)");
}

nu_status nu__op_chain_kernel(nu_device *d, nu_kernel **out)
{
    if (nu__grid_vmm(d))
        return nu__op_kernel(d, NU__K_chain_vmm, sizeof(chain_push), NULL, 0, out);
    uint32_t cpu_polls = d->info.type == NU_DEVICE_CPU; /* grid_sync.glsl's NU_GRID_CPU_POLLS */
    return nu__op_kernel(d, NU__K_chain, sizeof(chain_push), &cpu_polls, 1, out);
}

nu_status nu__op_chain(nu_commands *c, const nu__chain *ch)
{
    const char *fn = "nu__op_chain";
    if (!c || !ch || !ch->in || !ch->b || !ch->x || !ch->sync)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "%s: NULL command buffer, description or buffer", fn);
    nu_device *d = nu_buffer_device(ch->x);
    uint32_t sync_groups = ch->sync_groups ? ch->sync_groups : ch->groups;
    if (!ch->count || !ch->steps || !ch->groups || ch->shift >= ch->count || sync_groups < ch->groups)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                        "%s: count %u, steps %u, groups %u, shift %u, sync_groups %u (count, steps and groups must be "
                        "positive, shift below count, sync_groups at least groups)",
                        fn, ch->count, ch->steps, ch->groups, ch->shift, sync_groups);
    if (ch->count > UINT32_MAX / 8)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "%s: count %u is too large (x holds 2 * count floats)", fn,
                        ch->count);
    nu_kernel *k;
    nu_status st = nu__op_chain_kernel(d, &k);
    if (st != NU_OK)
        return st;
    uint32_t resident = nu_kernel_resident_groups(k);
    if (ch->groups > resident)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                        "%s: %u workgroups cannot be co-resident on this device (at most %u: "
                        "nu_kernel_resident_groups)",
                        fn, ch->groups, resident);
    size_t n = (size_t)ch->count * 4;
    nu_binding bind[4] = {{ch->in, NU_ACCESS_READ, 0, n},
                          {ch->b, NU_ACCESS_READ, 0, n},
                          {ch->x, NU_ACCESS_READ_WRITE, 0, 2 * n},
                          {ch->sync, NU_ACCESS_READ_WRITE, 0, NU__GRID_SYNC_SIZE}};
    chain_push push = {ch->count, ch->steps, ch->shift, sync_groups,
                       ch->spin_limit ? ch->spin_limit : nu__grid_spin_default(d)};
    uint32_t groups[3] = {ch->groups, 1, 1};
    return nu_commands_dispatch(c, k, groups, bind, 4, &push, sizeof push);
}
