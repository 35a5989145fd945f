/* list.c: a recording kept as data (see list.h). */
#include "exec/list.h"

#include <string.h>

#include "core/array.h"
#include "core/error.h"
#include "core/host.h"

nu__list *nu__list_new(nu_device *d)
{
    nu__list *l = nu__calloc(1, sizeof *l);
    if (!l) {
        nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory for a graph");
        return NULL;
    }
    l->device = d;
    l->last_user = -1;
    return l;
}

void nu__list_free(nu__list *l)
{
    if (!l)
        return;
    for (uint32_t i = 0; i < l->kernel_count; i++)
        nu__kernel_release(l->kernels[i]);
    for (uint32_t i = 0; i < l->owned_count; i++)
        nu_buffer_free(l->owned[i]);
    nu__free(l->owned);
    nu__free(l->kernels);
    nu__free(l->resources);
    nu__free(l->slots);
    nu__free(l->cmds);
    nu__free(l->refs);
    nu__free(l->push);
    nu__free(l->params);
    nu__free(l);
}

static nu_status oom(nu__list *l)
{
    return nu__fail(l->device, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory recording a graph");
}

nu_status nu__list_adopt(nu__list *l, nu_buffer *b)
{
    if (NU__GROW32(l->owned, l->owned_capacity, l->owned_count + 1, 4) != NU_OK) {
        nu_buffer_free(b);
        return oom(l);
    }
    l->owned[l->owned_count++] = b;
    return NU_OK;
}

nu_status nu__list_keep_kernel(nu__list *l, nu_kernel *k)
{
    for (uint32_t i = l->kernel_count; i-- > 0;)
        if (l->kernels[i] == k)
            return NU_OK;
    if (NU__GROW32(l->kernels, l->kernel_capacity, l->kernel_count + 1, 8) != NU_OK)
        return oom(l);
    nu__kernel_retain(k);
    l->kernels[l->kernel_count++] = k;
    return NU_OK;
}

/* The resource of buffer b (made when new): its index, or NU__NO_RESOURCE for want of memory. */
static uint32_t resource_of(nu__list *l, nu_buffer *b)
{
    unsigned gen = nu__buffer_generation(b);
    for (uint32_t i = l->resource_count; i-- > 0;)
        if (l->resources[i].buffer == b && l->resources[i].generation == gen)
            return i;
    if (NU__GROW32(l->resources, l->resource_capacity, l->resource_count + 1, 8) != NU_OK)
        return NU__NO_RESOURCE;
    l->resources[l->resource_count] = (nu__resource){.buffer = b, .generation = gen, .size = b->size, .slot = -1};
    return l->resource_count++;
}

nu_status nu__list_add(nu__list *l, nu__work work, nu_kernel *kernel, const uint32_t groups[3], const nu__range *r,
                       uint32_t n, const void *push, uint32_t push_size, uint32_t value)
{
    if (NU__GROW32(l->cmds, l->cmd_capacity, l->cmd_count + 1, 16) != NU_OK ||
        NU__GROW32(l->refs, l->ref_capacity, l->ref_count + n, 32) != NU_OK ||
        NU__GROW32(l->push, l->push_capacity, l->push_count + push_size, 256) != NU_OK ||
        (kernel && nu__list_keep_kernel(l, kernel) != NU_OK))
        return oom(l);
    uint32_t resources = l->resource_count, empty = l->empty_refs;
    for (uint32_t i = 0; i < n; i++) {
        nu__ref ref = {.resource = NU__NO_RESOURCE, .offset = r[i].offset, .size = r[i].size, .write = r[i].write};
        if (r[i].size) {
            ref.resource = resource_of(l, r[i].buffer);
            if (ref.resource == NU__NO_RESOURCE) {
                l->resource_count = resources;
                l->empty_refs = empty;
                return oom(l);
            }
        } else {
            ref.offset = (size_t)(l->empty_refs++ % NU__PLACEHOLDER_SLOTS) * NU__PLACEHOLDER_SLOT;
        }
        l->refs[l->ref_count + i] = ref;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t res = l->refs[l->ref_count + i].resource;
        if (res != NU__NO_RESOURCE) {
            l->resources[res].used = true;
            l->resources[res].written |= r[i].write;
        }
    }
    nu__cmd c = {.work = work, .kernel = kernel, .ref_first = l->ref_count, .ref_count = n,
                 .push_first = l->push_count, .push_size = push_size, .value = value};
    if (groups)
        memcpy(c.groups, groups, sizeof c.groups);
    if (push_size)
        memcpy(l->push + l->push_count, push, push_size);
    l->ref_count += n;
    l->push_count += push_size;
    l->cmds[l->cmd_count++] = c;
    l->last_user = -1;
    return NU_OK;
}

nu_status nu__list_slot(nu__list *l, nu_buffer *b, uint32_t *slot)
{
    uint32_t r = resource_of(l, b);
    if (r == NU__NO_RESOURCE)
        return oom(l);
    if (l->resources[r].slot >= 0) {
        *slot = (uint32_t)l->resources[r].slot;
        return NU_OK;
    }
    if (NU__GROW32(l->slots, l->slot_capacity, l->slot_count + 1, 8) != NU_OK)
        return oom(l);
    l->resources[r].slot = (int32_t)l->slot_count;
    l->slots[l->slot_count] = r;
    *slot = l->slot_count++;
    return NU_OK;
}

nu_status nu__list_param(nu__list *l, uint32_t cmd, uint32_t offset, uint32_t size, uint32_t *param)
{
    if (NU__GROW32(l->params, l->param_capacity, l->param_count + 1, 8) != NU_OK)
        return oom(l);
    l->params[l->param_count] = (nu__param){cmd, offset, size};
    *param = l->param_count++;
    return NU_OK;
}

nu_status nu__list_resolve(nu__list *l)
{
    for (uint32_t i = 0; i < l->resource_count; i++) {
        nu__resource *res = &l->resources[i];
        nu_status st = nu__buffer_binding(res->buffer, &res->vk, &res->base);
        if (st != NU_OK)
            return st;
        res->vk_offset = res->base + res->offset;
    }
    return NU_OK;
}

const nu__resource *nu__list_freed(const nu__list *l)
{
    for (uint32_t i = 0; i < l->resource_count; i++)
        if (l->resources[i].used && nu__buffer_generation(l->resources[i].buffer) != l->resources[i].generation)
            return &l->resources[i];
    return NULL;
}
