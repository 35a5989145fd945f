/* builtins.c: the embedded kernels by name, and nu_kernel_builtin (nuvec/kernel.h): the public
 * builtins' table (push constant sizes, element counts) over kernel.c's nu_kernel_new. */
#include "kernel/builtins.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "kernel/kernel.h"

const nu__kernel_spirv *nu__kernel_find(const char *name)
{
    for (unsigned i = 0; i < nu__kernel_count; i++)
        if (!*nu__kernels[i].family && strcmp(nu__kernels[i].name, name) == 0)
            return &nu__kernels[i];
    return NULL;
}

/* nuvec's own kernels: their push constant sizes (the SPIR-V gives the rest), and where the
 * push constants hold the element count (every binding holds that many elements: f16 ones 2
 * bytes each, the others 4; see the .comp files under kernels/). */
static const struct builtin {
    const char *name;
    uint32_t push_size;
    bool f16;
    uint32_t count_offset;
} builtins[] = {
    {"fill_u32", 8, false, 4}, {"copy_u32", 4, false, 0}, {"add_f32", 4, false, 0}, {"sub_f32", 4, false, 0},
    {"mul_f32", 4, false, 0},  {"axpy_f32", 8, false, 4}, {"add_f16", 4, true, 0},  {"mul_f16", 4, true, 0},
    {"fma_f32", 4, false, 0},
};

nu_status nu_kernel_builtin(nu_device *device, const char *name, nu_kernel **out)
{
    if (out)
        *out = NULL;
    if (!device || !name || !out)
        return nu__fail(device, NU_ERROR_INVALID_ARGUMENT, "nu_kernel_builtin: NULL %s",
                        !device ? "device" : !name ? "name" : "out");
    const nu__kernel_spirv *spv = nu__kernel_find(name);
    const struct builtin *b = NULL;
    for (size_t i = 0; i < sizeof builtins / sizeof *builtins; i++)
        if (strcmp(builtins[i].name, name) == 0)
            b = &builtins[i];
    if (!spv || !b) {
        char list[512] = "";
        size_t len = 0;
        for (unsigned i = 0; i < nu__kernel_count && len < sizeof list; i++)
            if (!*nu__kernels[i].family)
                len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "", nu__kernels[i].name);
        return nu__fail(device, NU_ERROR_INVALID_ARGUMENT, "no builtin kernel named '%s'%s; nuvec's kernels are: %s",
                        name, spv ? " (it has no entry in builtins.c's table)" : "", list);
    }
    if (b->f16 && (!device->info.features[NU_FEATURE_FLOAT16] || !device->info.features[NU_FEATURE_STORAGE_16BIT]))
        return nu__fail(device, NU_ERROR_UNSUPPORTED, "builtin kernel '%s' needs %s and %s, which %s lacks", name,
                        nu_feature_name(NU_FEATURE_FLOAT16), nu_feature_name(NU_FEATURE_STORAGE_16BIT),
                        device->info.name);
    nu_kernel_desc desc = {.spirv = spv->words, .spirv_size = spv->word_count * 4, .name = name,
                           .push_constant_size = b->push_size};
    nu_status st = nu_kernel_new(device, &desc, out);
    if (st == NU_OK) /* dispatches check each binding's range against the count */
        atomic_store_explicit(&(*out)->count_layout, (b->f16 ? 2u : 4u) | b->count_offset << 8,
                              memory_order_relaxed);
    return st;
}
