/* kernel.h: kernels' internals, for command recording. */
#ifndef NU_KERNEL_H
#define NU_KERNEL_H

#include <stdatomic.h>

#include "vk/device.h"
#include "nuvec/kernel.h"

/* Kernels stay in the device's cache until it closes (see kernel.c): a kernel pointer stays
 * valid until then, whatever `refs` says. */
struct nu_kernel {
    nu_device *device;
    atomic_uint refs;          /* the users' and the command buffers' (bookkeeping only) */
    VkPipeline pipeline;
    VkPipelineLayout layout;
    VkDescriptorSetLayout set_layout; /* a push-descriptor layout of `bindings` storage buffers
                                         (with `sets`: an UPDATE_AFTER_BIND layout for sets) */
    bool sets;                 /* bound with descriptor sets (nu__kernel_with_sets), not pushed */
    uint32_t bindings;
    uint32_t push_size;
    uint32_t local_size[3];    /* 0s when set by specialisation */
    uint64_t key;              /* the in-memory cache's key (a hash of SPIR-V, entry, constants, layout) */
    bool f16_as_bf16;          /* made by nu__kernel_new_f16_as_bf16: its module's float16_t is bfloat16 */
    char name[64];
    /* For nuvec's own kernels (set by nu_kernel_builtin): where the push constants hold the
     * element count, and the bytes of each binding an element takes, as element_size |
     * count_offset << 8; 0 for other kernels, whose accesses nuvec cannot know. Atomic: the
     * kernel is shared, and may be opened as a builtin while another thread dispatches it. */
    atomic_uint count_layout;
    /* For graphs (nu__kernel_from_memory): the same kernel reading its push constants from a
     * storage buffer one binding past its own, made on first use; or refused for good. */
    _Atomic(struct nu_kernel *) from_memory;
    atomic_bool from_memory_refused;
    _Atomic(struct nu_kernel *) with_sets; /* nu__kernel_with_sets's, likewise */
    atomic_bool with_sets_refused;
};

/* nu_kernel_new for SPIR-V whose one 16-bit float type is meant as bfloat16 (kernel/spirv.h,
 * nu__spirv_f16_as_bf16: nuvec's BF16 matrix-unit kernels): validated as it is, then made with that
 * type turned into bfloat16. NU_ERROR_UNSUPPORTED where the device has no BF16 cooperative
 * matrices enabled (nu_device's has_bf16_coopmat) or the module does not qualify. Graph variants
 * (nu__kernel_from_memory, nu__kernel_with_sets) keep the rewrite. */
nu_status nu__kernel_new_f16_as_bf16(nu_device *device, const nu_kernel_desc *desc, nu_kernel **out);

/* The most bindings of a kernel bound with descriptor sets (graphs' slots). */
#define NU__KERNEL_MAX_SET_BINDINGS 32

/* A command buffer keeps the kernels it dispatches alive until it completes. */
void nu__kernel_retain(nu_kernel *k);
void nu__kernel_release(nu_kernel *k);

/* For graphs: the kernel with its push constant block read from a storage buffer at binding
 * k->bindings instead (kernel/spirv.c rewrites the SPIR-V; the result is validated and cached
 * like any kernel, and kept with k). NU_ERROR_UNSUPPORTED (or the validator's status) when the
 * kernel cannot be rewritten, from then on without trying again. Thread-safe. */
nu_status nu__kernel_from_memory(nu_kernel *k, nu_kernel **out);

/* For graphs' slots: the same kernel (pipeline, push constants) bound with descriptor sets of
 * k->bindings storage buffers whose descriptors may be updated after they were bound
 * (UPDATE_AFTER_BIND: the device must have it, nu_device's has_update_after_bind), made on first
 * use, cached and kept with k. NU_ERROR_UNSUPPORTED (for good) when it cannot be made. */
nu_status nu__kernel_with_sets(nu_kernel *k, nu_kernel **out);

/* Per device: the in-memory kernel cache and the VkPipelineCache (loaded from disk at open,
 * saved at close). Called by nu_device_open / nu_device_close. */
nu_status nu__kernels_init(nu_device *d);
void nu__kernels_fini(nu_device *d);

/* What the caches hold, for tests and diagnostics: the disk cache's file (NULL when disabled
 * by NUVEC_CACHE_DIR=off or without a home directory), the bytes of pipeline cache data loaded
 * from it at open (0: none, or the file was ignored), and the kernels cached in memory. */
typedef struct nu__kernel_cache_info {
    const char *path;
    size_t loaded_bytes;
    size_t kernels;
} nu__kernel_cache_info;
void nu__kernels_cache_info(nu_device *d, nu__kernel_cache_info *out);

#endif
