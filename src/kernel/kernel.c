/* kernel.c: compute kernels from SPIR-V (see nuvec/kernel.h and kernel.h).
 *
 * A kernel is a compute pipeline with its push-descriptor set layout and pipeline layout. Its
 * SPIR-V is validated and reflected by spirv.c before any Vulkan call sees it; the device's
 * limits the validator does not know (workgroup size, push constants, push descriptors) are
 * checked here.
 *
 * In-memory cache: a hash table per device, keyed by a 64-bit hash of what determines the
 * pipeline (SPIR-V words, entry point, specialisation constants sorted by id, binding count,
 * push constant size); a hit is confirmed by comparing all of it, so a hash collision can
 * never hand out the wrong pipeline. The debug name is not part of the key: a kernel found in
 * the cache keeps the name it was first created with. Pipelines are compiled outside the lock
 * (two threads compiling different kernels do not wait for each other); when two threads
 * race to create the same kernel, the second to finish destroys its copy and takes the first.
 *
 * Lifetime (a decision): a kernel stays cached until the device closes, even after its last
 * reference (users' and command buffers') is released. Kernels are few and small, keeping them
 * makes re-creating one free, and a command buffer can never find its pipeline destroyed under
 * it. `refs` is therefore bookkeeping only (a release at 0 is ignored). nu_device_close
 * destroys every kernel: handles become invalid then, like buffers.
 *
 * Disk cache: kernel/disk_cache.c (one file per device and driver, loaded at open and saved
 * at close). */
#include "kernel/kernel.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/hash.h"
#include "core/host.h"
#include "vk/block.h"
#include "kernel/disk_cache.h"
#include "kernel/spirv.h"

/* ---- the cache's structures ----------------------------------------------------------- */

/* A cached kernel with the key material compared on a hit (stored after it, one allocation). */
typedef struct kentry {
    nu_kernel k; /* first: a kernel pointer is its entry */
    struct kentry *next;
    const uint32_t *words;
    size_t word_count;
    uint64_t words_hash; /* of the SPIR-V alone (validated_before) */
    const nu_specialization *constants; /* sorted by id */
    uint32_t constant_count;
    const char *entry;
} kentry;

struct nu__kernel_cache {
    pthread_mutex_t lock;
    kentry **buckets;
    size_t bucket_count; /* a power of two */
    size_t count;
    uint32_t max_push_descriptors;
    /* Disk cache: the file (NULL: disabled), what was loaded from it, and whether this run
     * compiled anything (otherwise there is nothing new to save). */
    char *path;
    size_t loaded_bytes;
    uint64_t loaded_hash;
    atomic_bool compiled;
    VkPipelineCache pipeline_cache; /* what the disk cache holds, loaded at open, saved at close */
};

static bool verbose(void) { return nu__env_on("NUVEC_VERBOSE"); }

/* ---- creating kernels ----------------------------------------------------------------- */

static int constant_cmp(const void *a, const void *b)
{
    uint32_t x = ((const nu_specialization *)a)->id, y = ((const nu_specialization *)b)->id;
    return x < y ? -1 : x > y;
}

/* What identifies a kernel in the cache. */
typedef struct kkey {
    const uint32_t *words;
    size_t word_count;
    const char *entry;
    const nu_specialization *constants; /* sorted by id */
    uint32_t constant_count;
    uint32_t bindings, push_size;
    bool sets; /* descriptor sets (UPDATE_AFTER_BIND), not push descriptors */
    bool f16_as_bf16; /* the module is made with its float16_t as bfloat16 (nu__kernel_new_f16_as_bf16) */
    uint64_t hash;
    uint64_t words_hash;
} kkey;

static uint64_t key_hash(const kkey *k)
{
    uint64_t h = nu__hash_bytes(0x6e75766563ull, k->words, k->word_count * 4);
    h = nu__hash_bytes(h, k->entry, strlen(k->entry));
    h = nu__hash_bytes(h, k->constants, k->constant_count * sizeof *k->constants);
    uint32_t tail[4] = {k->bindings, k->push_size, k->sets, k->f16_as_bf16};
    return nu__hash_bytes(h, tail, sizeof tail);
}

static bool key_equal(const kentry *e, const kkey *k)
{
    return e->k.key == k->hash && e->k.bindings == k->bindings && e->k.push_size == k->push_size &&
           e->k.sets == k->sets && e->k.f16_as_bf16 == k->f16_as_bf16 &&
           e->word_count == k->word_count && e->constant_count == k->constant_count &&
           strcmp(e->entry, k->entry) == 0 && memcmp(e->words, k->words, k->word_count * 4) == 0 &&
           (k->constant_count == 0 || memcmp(e->constants, k->constants, k->constant_count * sizeof *k->constants) == 0);
}

/* Under the cache lock. */
static kentry *cache_find(struct nu__kernel_cache *c, const kkey *k)
{
    for (kentry *e = c->buckets[k->hash & (c->bucket_count - 1)]; e; e = e->next)
        if (key_equal(e, k))
            return e;
    return NULL;
}

/* Whether a cached kernel was made from exactly these words: they passed validation on this
 * device then, so creating another kernel from them (other constants, another entry point, or
 * the same kernel again) only reflects. Under the cache lock; kernels are few. */
static bool validated_before(struct nu__kernel_cache *c, const uint32_t *words, size_t word_count, uint64_t hash)
{
    for (size_t i = 0; i < c->bucket_count; i++)
        for (const kentry *e = c->buckets[i]; e; e = e->next)
            if (e->words_hash == hash && e->word_count == word_count &&
                memcmp(e->words, words, word_count * 4) == 0)
                return true;
    return false;
}

/* Under the cache lock. Grows the table when it fills; a failed growth only lengthens chains. */
static void cache_insert(struct nu__kernel_cache *c, kentry *e)
{
    if (c->count + 1 > c->bucket_count) {
        size_t nb = c->bucket_count * 2;
        kentry **b = nu__calloc(nb, sizeof *b);
        if (b) {
            for (size_t i = 0; i < c->bucket_count; i++) {
                for (kentry *x = c->buckets[i], *next; x; x = next) {
                    next = x->next;
                    x->next = b[x->k.key & (nb - 1)];
                    b[x->k.key & (nb - 1)] = x;
                }
            }
            nu__free(c->buckets);
            c->buckets = b;
            c->bucket_count = nb;
        }
    }
    size_t i = e->k.key & (c->bucket_count - 1);
    e->next = c->buckets[i];
    c->buckets[i] = e;
    c->count++;
}

static void destroy_vulkan(nu_device *d, nu_kernel *k)
{
    if (k->pipeline)
        d->vkd.vkDestroyPipeline(d->device, k->pipeline, NULL);
    if (k->layout)
        d->vkd.vkDestroyPipelineLayout(d->device, k->layout, NULL);
    if (k->set_layout)
        d->vkd.vkDestroyDescriptorSetLayout(d->device, k->set_layout, NULL);
}

/* A new entry holding a copy of the key, and the Vulkan objects. */
static nu_status build(nu_device *d, const char *label, const char *name, const kkey *key,
                       const uint32_t local_size[3], kentry **out)
{
    *out = NULL;
    size_t entry_len = strlen(key->entry) + 1;
    size_t words_bytes = key->word_count * 4;
    size_t consts_bytes = key->constant_count * sizeof(nu_specialization);
    kentry *e = nu__calloc(1, sizeof *e + words_bytes + consts_bytes + entry_len);
    if (!e)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "kernel '%s': out of host memory", label);
    char *p = (char *)(e + 1);
    memcpy(p, key->words, words_bytes);
    e->words = (const uint32_t *)p;
    e->word_count = key->word_count;
    e->words_hash = key->words_hash;
    p += words_bytes;
    if (consts_bytes)
        memcpy(p, key->constants, consts_bytes);
    e->constants = (const nu_specialization *)p;
    e->constant_count = key->constant_count;
    p += consts_bytes;
    memcpy(p, key->entry, entry_len);
    e->entry = p;

    nu_kernel *k = &e->k;
    k->device = d;
    atomic_init(&k->refs, 1);
    k->bindings = key->bindings;
    k->push_size = key->push_size;
    k->sets = key->sets;
    k->f16_as_bf16 = key->f16_as_bf16;
    memcpy(k->local_size, local_size, sizeof k->local_size);
    k->key = key->hash;
    size_t nl = strlen(name);
    if (nl < sizeof k->name)
        memcpy(k->name, name, nl + 1);
    else /* keep the end, the informative part of a path */
        snprintf(k->name, sizeof k->name, "...%s", name + nl - (sizeof k->name - 4));

    /* Storage buffers 0..bindings-1, bound per dispatch with push descriptors. */
    VkDescriptorSetLayoutBinding *lb = NULL;
    if (key->bindings) {
        lb = nu__calloc(key->bindings, sizeof *lb);
        if (!lb) {
            nu__free(e);
            return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "kernel '%s': out of host memory", label);
        }
        for (uint32_t i = 0; i < key->bindings; i++)
            lb[i] = (VkDescriptorSetLayoutBinding){.binding = i, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                   .descriptorCount = 1, .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    }
    /* Or, for graphs' slots, descriptor sets updated after they were bound. */
    VkDescriptorBindingFlags after_bind[NU__KERNEL_MAX_SET_BINDINGS];
    for (uint32_t i = 0; i < NU__KERNEL_MAX_SET_BINDINGS; i++)
        after_bind[i] = VK_DESCRIPTOR_BINDING_UPDATE_AFTER_BIND_BIT;
    VkDescriptorSetLayoutBindingFlagsCreateInfo bfi = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_BINDING_FLAGS_CREATE_INFO, .bindingCount = key->bindings,
        .pBindingFlags = after_bind};
    VkDescriptorSetLayoutCreateInfo dli = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                           .pNext = key->sets ? &bfi : NULL,
                                           .flags = key->sets ? VK_DESCRIPTOR_SET_LAYOUT_CREATE_UPDATE_AFTER_BIND_POOL_BIT
                                                              : VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR,
                                           .bindingCount = key->bindings, .pBindings = lb};
    const char *what = "vkCreateDescriptorSetLayout";
    VkResult r = d->vkd.vkCreateDescriptorSetLayout(d->device, &dli, NULL, &k->set_layout);
    nu__free(lb);
    if (r == VK_SUCCESS) {
        VkPushConstantRange pcr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = key->push_size};
        VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                          .setLayoutCount = 1, .pSetLayouts = &k->set_layout,
                                          .pushConstantRangeCount = key->push_size ? 1 : 0,
                                          .pPushConstantRanges = key->push_size ? &pcr : NULL};
        what = "vkCreatePipelineLayout";
        r = d->vkd.vkCreatePipelineLayout(d->device, &pli, NULL, &k->layout);
    }
    VkShaderModule module = VK_NULL_HANDLE;
    if (r == VK_SUCCESS) {
        /* The entry keeps the words as validated; the driver gets them with float16_t made bfloat16. */
        uint32_t *bf16 = NULL;
        size_t bf16_words = 0;
        char why[160];
        if (key->f16_as_bf16) {
            nu_status st = nu__spirv_f16_as_bf16(e->words, e->word_count, &bf16, &bf16_words, why, sizeof why);
            if (st != NU_OK) {
                destroy_vulkan(d, k);
                nu__free(e);
                return nu__fail(d, st, "kernel '%s': cannot make its float16_t bfloat16: %s", label, why);
            }
        }
        VkShaderModuleCreateInfo smi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                        .codeSize = bf16 ? bf16_words * 4 : words_bytes,
                                        .pCode = bf16 ? bf16 : e->words};
        what = "vkCreateShaderModule";
        r = d->vkd.vkCreateShaderModule(d->device, &smi, NULL, &module);
        nu__free(bf16);
    }
    if (r == VK_SUCCESS) {
        VkSpecializationMapEntry *map = NULL;
        uint32_t *data = NULL;
        if (key->constant_count) {
            map = nu__calloc(key->constant_count, sizeof *map);
            data = nu__calloc(key->constant_count, sizeof *data);
            if (!map || !data) {
                nu__free(map);
                nu__free(data);
                d->vkd.vkDestroyShaderModule(d->device, module, NULL);
                destroy_vulkan(d, k);
                nu__free(e);
                return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "kernel '%s': out of host memory", label);
            }
            for (uint32_t i = 0; i < key->constant_count; i++) {
                map[i] = (VkSpecializationMapEntry){.constantID = key->constants[i].id, .offset = i * 4, .size = 4};
                data[i] = key->constants[i].value;
            }
        }
        VkSpecializationInfo spec = {.mapEntryCount = key->constant_count, .pMapEntries = map,
                                     .dataSize = key->constant_count * 4u, .pData = data};
        VkComputePipelineCreateInfo cpi = {
            .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
            .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                      .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = module, .pName = e->entry,
                      .pSpecializationInfo = key->constant_count ? &spec : NULL},
            .layout = k->layout,
            .basePipelineIndex = -1};
        what = "vkCreateComputePipelines";
        r = d->vkd.vkCreateComputePipelines(d->device, d->kernels->pipeline_cache, 1, &cpi, NULL, &k->pipeline);
        if (r != VK_SUCCESS)
            k->pipeline = VK_NULL_HANDLE;
        d->vkd.vkDestroyShaderModule(d->device, module, NULL);
        nu__free(map);
        nu__free(data);
    }
    if (r != VK_SUCCESS) {
        destroy_vulkan(d, k);
        nu__free(e);
        return nu__fail(d, nu__vk_status(r), "kernel '%s': %s failed: %s", label, what, nu__vk_result_name(r));
    }
    nu__device_name_object(d, VK_OBJECT_TYPE_PIPELINE, (uint64_t)k->pipeline, k->name);
    nu__device_name_object(d, VK_OBJECT_TYPE_PIPELINE_LAYOUT, (uint64_t)k->layout, k->name);
    nu__device_name_object(d, VK_OBJECT_TYPE_DESCRIPTOR_SET_LAYOUT, (uint64_t)k->set_layout, k->name);
    *out = e;
    return NU_OK;
}

/* The workgroup size against the device's limits (which the validator does not know), with
 * the specialisation constants given (sorted by id) in place of the defaults. A size computed
 * from other constants is left to the driver. */
static nu_status check_workgroup_size(nu_device *d, const char *label, const nu__spirv_layout *l,
                                      const nu_specialization *constants, uint32_t constant_count)
{
    uint32_t v[3];
    for (int i = 0; i < 3; i++) {
        if (l->size[i].spec_id == NU__SPIRV_UNKNOWN)
            return NU_OK;
        v[i] = l->size[i].value;
        if (l->size[i].spec_id == NU__SPIRV_CONSTANT)
            continue;
        nu_specialization key = {.id = l->size[i].spec_id};
        const nu_specialization *c =
            constant_count ? bsearch(&key, constants, constant_count, sizeof *constants, constant_cmp) : NULL;
        if (c)
            v[i] = c->value;
    }
    const nu_device_info *info = &d->info;
    uint64_t invocations = (uint64_t)v[0] * v[1] * v[2];
    if (v[0] == 0 || v[1] == 0 || v[2] == 0 || v[0] > info->max_workgroup_size[0] ||
        v[1] > info->max_workgroup_size[1] || v[2] > info->max_workgroup_size[2] ||
        invocations > info->max_workgroup_invocations)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                        "kernel '%s': workgroup size %u x %u x %u is outside what %s allows (each from 1 to %u x %u x "
                        "%u, at most %u invocations)",
                        label, v[0], v[1], v[2], info->name, info->max_workgroup_size[0], info->max_workgroup_size[1],
                        info->max_workgroup_size[2], info->max_workgroup_invocations);
    return NU_OK;
}

/* nu_kernel_new once the SPIR-V is in memory. */
static nu_status create(nu_device *d, const nu_kernel_desc *desc, const char *label, const uint32_t *words,
                        size_t size, bool sets, bool f16_as_bf16, nu_kernel **out)
{
    const char *entry = desc->entry && *desc->entry ? desc->entry : "main";
    /* Validated (SPIRV-Tools) and reflected before any driver sees it: see spirv.c. Validation
     * costs about 100 us for a small kernel, so SPIR-V a cached kernel was made from (on this
     * device) is only reflected: nu_kernel_builtin in a loop stays cheap. */
    struct nu__kernel_cache *c = d->kernels;
    uint64_t words_hash = size % 4 == 0 ? nu__hash_bytes(0x73707276ull, words, size) : 0;
    pthread_mutex_lock(&c->lock);
    bool seen = size % 4 == 0 && validated_before(c, words, size / 4, words_hash);
    pthread_mutex_unlock(&c->lock);
    nu__spirv_layout layout;
    nu_status st = seen ? nu__spirv_reflect(d, label, words, size / 4, entry, &layout)
                        : nu__spirv_check(d, d->info.api_version, label, words, size, entry, &layout);
    if (st != NU_OK)
        return st;
    uint32_t bindings = layout.bindings;
    uint32_t local_size[3];
    memcpy(local_size, layout.local_size, sizeof local_size);
    bool has_push = layout.has_push;
    uint64_t push_extent = layout.push_extent;

    if (desc->bindings) {
        if (bindings > desc->bindings)
            return nu__fail(d, NU_ERROR_FORMAT,
                            "kernel '%s': the SPIR-V uses binding %u, beyond the %u binding(s) the description gives",
                            label, bindings - 1, desc->bindings);
        bindings = desc->bindings;
    }
    if (sets ? bindings > NU__KERNEL_MAX_SET_BINDINGS || bindings > d->max_update_after_bind_buffers ||
                   !d->has_update_after_bind
             : bindings > c->max_push_descriptors)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                        "kernel '%s': %u bindings, more than the %u push descriptors %s allows", label, bindings,
                        c->max_push_descriptors, d->info.name);
    uint32_t push = desc->push_constant_size;
    if (has_push && push == 0)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                        "kernel '%s': the SPIR-V declares push constants (%llu bytes), but push_constant_size is 0",
                        label, (unsigned long long)push_extent);
    if (has_push && push_extent > push)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT,
                        "kernel '%s': its push constant block spans %llu bytes, but push_constant_size is %u", label,
                        (unsigned long long)push_extent, push);

    nu_specialization *sorted = NULL;
    if (desc->constant_count) {
        sorted = nu__malloc(desc->constant_count * sizeof *sorted);
        if (!sorted)
            return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "kernel '%s': out of host memory", label);
        memcpy(sorted, desc->constants, desc->constant_count * sizeof *sorted);
        qsort(sorted, desc->constant_count, sizeof *sorted, constant_cmp);
        for (uint32_t i = 1; i < desc->constant_count; i++) {
            if (sorted[i].id == sorted[i - 1].id) {
                uint32_t dup = sorted[i].id;
                nu__free(sorted);
                return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "kernel '%s': specialisation constant %u is given twice",
                                label, dup);
            }
        }
    }
    st = check_workgroup_size(d, label, &layout, sorted, desc->constant_count);
    if (st != NU_OK) {
        nu__free(sorted);
        return st;
    }
    kkey key = {.words = words, .word_count = size / 4, .entry = entry, .constants = sorted,
                .constant_count = desc->constant_count, .bindings = bindings, .push_size = push, .sets = sets,
                .f16_as_bf16 = f16_as_bf16, .words_hash = words_hash};
    key.hash = key_hash(&key);

    pthread_mutex_lock(&c->lock);
    kentry *e = cache_find(c, &key);
    if (e)
        atomic_fetch_add(&e->k.refs, 1);
    pthread_mutex_unlock(&c->lock);
    if (e) {
        nu__free(sorted);
        *out = &e->k;
        return NU_OK;
    }

    /* Compile outside the lock; another thread may have made the same kernel meanwhile. */
    const char *name = desc->name && *desc->name ? desc->name : desc->path ? desc->path : entry;
    kentry *made;
    st = build(d, label, name, &key, local_size, &made);
    if (st != NU_OK) {
        nu__free(sorted);
        return st;
    }
    atomic_store(&c->compiled, true);
    pthread_mutex_lock(&c->lock);
    e = cache_find(c, &key);
    if (e)
        atomic_fetch_add(&e->k.refs, 1);
    else
        cache_insert(c, made);
    pthread_mutex_unlock(&c->lock);
    nu__free(sorted);
    if (e) {
        destroy_vulkan(d, &made->k);
        nu__free(made);
        made = e;
    }
    *out = &made->k;
    return NU_OK;
}

nu_status nu__kernel_from_memory(nu_kernel *k, nu_kernel **out)
{
    *out = atomic_load(&k->from_memory);
    if (*out)
        return NU_OK;
    if (atomic_load(&k->from_memory_refused) || !k->push_size)
        return NU_ERROR_UNSUPPORTED;
    const kentry *e = (const kentry *)k;
    uint32_t *words;
    size_t n;
    nu_status st = nu__spirv_push_to_storage(e->words, e->word_count, k->bindings, &words, &n);
    nu_kernel *v = NULL;
    if (st == NU_OK) {
        char name[96];
        snprintf(name, sizeof name, "%s (push constants from memory)", k->name);
        nu_kernel_desc desc = {.spirv = words, .spirv_size = n * 4, .entry = e->entry, .name = name,
                               .bindings = k->bindings + 1, .constants = e->constants,
                               .constant_count = e->constant_count};
        st = create(k->device, &desc, name, words, n * 4, false, k->f16_as_bf16, &v);
        nu__free(words);
    }
    if (st != NU_OK) {
        if (st != NU_ERROR_HOST_OUT_OF_MEMORY) /* try again after a transient failure */
            atomic_store(&k->from_memory_refused, true);
        return st;
    }
    nu_kernel *expected = NULL;
    if (!atomic_compare_exchange_strong(&k->from_memory, &expected, v)) {
        nu__kernel_release(v); /* another thread made it first: the same cached kernel */
        v = expected;
    }
    *out = v;
    return NU_OK;
}

nu_status nu__kernel_with_sets(nu_kernel *k, nu_kernel **out)
{
    *out = atomic_load(&k->with_sets);
    if (*out)
        return NU_OK;
    if (k->sets) {
        *out = k;
        return NU_OK;
    }
    if (atomic_load(&k->with_sets_refused) || !k->device->has_update_after_bind)
        return NU_ERROR_UNSUPPORTED;
    const kentry *e = (const kentry *)k;
    char name[96];
    snprintf(name, sizeof name, "%s (descriptor sets)", k->name);
    nu_kernel_desc desc = {.spirv = e->words, .spirv_size = e->word_count * 4, .entry = e->entry, .name = name,
                           .bindings = k->bindings, .push_constant_size = k->push_size, .constants = e->constants,
                           .constant_count = e->constant_count};
    nu_kernel *v = NULL;
    nu_status st = create(k->device, &desc, name, e->words, e->word_count * 4, true, k->f16_as_bf16, &v);
    if (st != NU_OK) {
        if (st != NU_ERROR_HOST_OUT_OF_MEMORY)
            atomic_store(&k->with_sets_refused, true);
        return st;
    }
    nu_kernel *expected = NULL;
    if (!atomic_compare_exchange_strong(&k->with_sets, &expected, v)) {
        nu__kernel_release(v);
        v = expected;
    }
    *out = v;
    return NU_OK;
}

static nu_status new_kernel(nu_device *device, const nu_kernel_desc *desc, bool f16_as_bf16, nu_kernel **out)
{
    if (out)
        *out = NULL;
    if (!device || !desc || !out)
        return nu__fail(device, NU_ERROR_INVALID_ARGUMENT, "nu_kernel_new: NULL %s",
                        !device ? "device" : !desc ? "desc" : "out");
    if (!device->kernels)
        return nu__fail(device, NU_ERROR_INVALID_ARGUMENT, "nu_kernel_new: the device is not open");
    if (!desc->spirv == !desc->path)
        return nu__fail(device, NU_ERROR_INVALID_ARGUMENT,
                        "nu_kernel_new: give either spirv (with spirv_size) or path, %s",
                        desc->spirv ? "not both" : "neither was given");
    if (desc->constant_count && !desc->constants)
        return nu__fail(device, NU_ERROR_INVALID_ARGUMENT, "nu_kernel_new: %u constants but constants is NULL",
                        desc->constant_count);
    const char *label = desc->name && *desc->name ? desc->name : desc->path ? desc->path : "(SPIR-V bytes)";
    if (desc->push_constant_size % 4 != 0 || desc->push_constant_size > device->info.max_push_constants)
        return nu__fail(device, NU_ERROR_INVALID_ARGUMENT,
                        "kernel '%s': push_constant_size %u must be a multiple of 4 and at most %u (the device's "
                        "max_push_constants)",
                        label, desc->push_constant_size, device->info.max_push_constants);
    if (!device->has_push_descriptor)
        return nu__fail(device, NU_ERROR_UNSUPPORTED,
                        "kernel '%s': %s lacks VK_KHR_push_descriptor, which nuvec binds kernels' buffers with", label,
                        device->info.name);
    if (desc->path) {
        uint32_t *words;
        size_t size;
        nu_status st = nu__spirv_read_file(device, desc->path, &words, &size);
        if (st != NU_OK)
            return st;
        st = create(device, desc, label, words, size, false, f16_as_bf16, out);
        nu__free(words);
        return st;
    }
    if (((uintptr_t)desc->spirv & 3u) != 0)
        return nu__fail(device, NU_ERROR_INVALID_ARGUMENT, "kernel '%s': spirv is not 4-byte aligned", label);
    return create(device, desc, label, desc->spirv, desc->spirv_size, false, f16_as_bf16, out);
}

nu_status nu_kernel_new(nu_device *device, const nu_kernel_desc *desc, nu_kernel **out)
{
    return new_kernel(device, desc, false, out);
}

nu_status nu__kernel_new_f16_as_bf16(nu_device *device, const nu_kernel_desc *desc, nu_kernel **out)
{
    if (out)
        *out = NULL;
    if (device && device->kernels && !device->has_bf16_coopmat)
        return nu__fail(device, NU_ERROR_UNSUPPORTED, "kernel '%s': %s has no BF16 cooperative matrices enabled",
                        desc && desc->name ? desc->name : "(SPIR-V bytes)", device->info.name);
    return new_kernel(device, desc, true, out);
}

void nu__kernel_retain(nu_kernel *k) { atomic_fetch_add(&k->refs, 1); }

void nu__kernel_release(nu_kernel *k)
{
    /* Cached kernels live until the device closes (see the top of this file): the count only
     * says who uses the kernel, and never goes below 0. */
    unsigned v = atomic_load(&k->refs);
    while (v > 0 && !atomic_compare_exchange_weak(&k->refs, &v, v - 1)) {
    }
}

nu_status nu_kernel_free(nu_kernel *kernel)
{
    if (kernel)
        nu__kernel_release(kernel);
    return NU_OK;
}

const char *nu_kernel_name(const nu_kernel *kernel) { return kernel ? kernel->name : ""; }
uint32_t nu_kernel_bindings(const nu_kernel *kernel) { return kernel ? kernel->bindings : 0; }
uint32_t nu_kernel_push_constant_size(const nu_kernel *kernel) { return kernel ? kernel->push_size : 0; }

void nu_kernel_workgroup_size(const nu_kernel *kernel, uint32_t size[3])
{
    if (!size)
        return;
    for (int i = 0; i < 3; i++)
        size[i] = kernel ? kernel->local_size[i] : 0;
}

nu_status nu_groups_for(uint64_t count, uint32_t per_group, uint32_t groups[3])
{
    if (!groups)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_groups_for: NULL groups");
    groups[0] = groups[1] = groups[2] = 0;
    if (per_group == 0)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_groups_for: 0 elements per workgroup");
    uint64_t needed = count / per_group + (count % per_group != 0);
    if (needed > 65535ull * 65535ull)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT,
                        "nu_groups_for: %llu elements at %u a workgroup need %llu workgroups, more than 65535 x "
                        "65535", (unsigned long long)count, per_group, (unsigned long long)needed);
    groups[2] = 1;
    if (needed <= 65535) {
        groups[0] = (uint32_t)needed;
        groups[1] = 1;
    } else {
        groups[0] = 65535;
        groups[1] = (uint32_t)(needed / 65535 + (needed % 65535 != 0));
    }
    return NU_OK;
}

/* Everything but saving: for fini and for a failed init. */
static void teardown(nu_device *d)
{
    struct nu__kernel_cache *c = d->kernels;
    if (c) {
        if (c->pipeline_cache && d->device)
            d->vkd.vkDestroyPipelineCache(d->device, c->pipeline_cache, NULL);
        for (size_t i = 0; i < c->bucket_count; i++) {
            for (kentry *e = c->buckets[i], *next; e; e = next) {
                next = e->next;
                destroy_vulkan(d, &e->k);
                nu__free(e);
            }
        }
        nu__free(c->buckets);
        nu__free(c->path);
        pthread_mutex_destroy(&c->lock);
        nu__free(c);
        d->kernels = NULL;
    }
}

nu_status nu__kernels_init(nu_device *d)
{
    struct nu__kernel_cache *c = nu__calloc(1, sizeof *c);
    if (!c)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory creating the kernel cache");
    c->bucket_count = 16;
    c->buckets = nu__calloc(c->bucket_count, sizeof *c->buckets);
    if (!c->buckets || pthread_mutex_init(&c->lock, NULL) != 0) {
        nu__free(c->buckets);
        nu__free(c);
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory creating the kernel cache");
    }
    atomic_init(&c->compiled, false);
    d->kernels = c;

    VkPhysicalDevicePushDescriptorPropertiesKHR pd = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PUSH_DESCRIPTOR_PROPERTIES_KHR};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &pd};
    c->max_push_descriptors = 32; /* the minimum the extension guarantees */
    if (d->has_push_descriptor) {
        d->vki.vkGetPhysicalDeviceProperties2(d->physical, &p2);
        if (pd.maxPushDescriptors)
            c->max_push_descriptors = pd.maxPushDescriptors;
    }

    nu_status st = nu__disk_cache_path(d, &c->path);
    if (st != NU_OK) {
        teardown(d);
        return st;
    }
    size_t size = 0;
    unsigned char *file = c->path ? nu__disk_cache_load(d, c->path, &size) : NULL;
    VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
                                    .initialDataSize = size, .pInitialData = file ? file + NU__DISK_CACHE_HEADER : NULL};
    VkResult r = d->vkd.vkCreatePipelineCache(d->device, &ci, NULL, &d->kernels->pipeline_cache);
    if (r != VK_SUCCESS && file) {
        /* The driver refused the data: start empty. */
        if (verbose())
            fprintf(stderr, "nuvec: the driver refused the pipeline cache %s: %s\n", c->path, nu__vk_result_name(r));
        nu__free(file);
        file = NULL;
        size = 0;
        ci.initialDataSize = 0;
        ci.pInitialData = NULL;
        r = d->vkd.vkCreatePipelineCache(d->device, &ci, NULL, &d->kernels->pipeline_cache);
    }
    if (r != VK_SUCCESS) {
        nu__free(file);
        d->kernels->pipeline_cache = VK_NULL_HANDLE;
        teardown(d);
        return nu__fail(d, nu__vk_status(r), "vkCreatePipelineCache failed: %s", nu__vk_result_name(r));
    }
    if (file) {
        c->loaded_bytes = size;
        c->loaded_hash = nu__hash_bytes(0, file + NU__DISK_CACHE_HEADER, size);
        nu__free(file);
    }
    nu__device_name_object(d, VK_OBJECT_TYPE_PIPELINE_CACHE, (uint64_t)d->kernels->pipeline_cache, "nuvec pipeline cache");
    return NU_OK;
}

void nu__kernels_fini(nu_device *d)
{
    struct nu__kernel_cache *c = d->kernels;
    if (c && c->path && d->kernels->pipeline_cache && atomic_load(&c->compiled)) {
        char err[256];
        const char *why = nu__disk_cache_save(d, c->pipeline_cache, c->path, c->loaded_bytes, c->loaded_hash, err,
                                              sizeof err);
        if (why && verbose())
            fprintf(stderr, "nuvec: could not save the pipeline cache %s: %s\n", c->path, why);
    }
    teardown(d);
}

void nu__kernels_cache_info(nu_device *d, nu__kernel_cache_info *out)
{
    memset(out, 0, sizeof *out);
    struct nu__kernel_cache *c = d->kernels;
    if (!c)
        return;
    out->path = c->path;
    out->loaded_bytes = c->loaded_bytes;
    pthread_mutex_lock(&c->lock);
    out->kernels = c->count;
    pthread_mutex_unlock(&c->lock);
}
