/* nuvec/kernel.h: compute kernels from SPIR-V.
 *
 * A kernel is a compute pipeline: SPIR-V (bytes or a file), its entry point, its storage
 * buffers (set 0, bindings 0..n-1, bound per dispatch with push descriptors), its push
 * constants and specialisation constants. The binding count and the workgroup size are read
 * from the SPIR-V where not given. Pipelines are cached in memory (the same SPIR-V and
 * constants give the same kernel) and on disk (VkPipelineCache, in $NUVEC_CACHE_DIR, else
 * $XDG_CACHE_HOME/nuvec, else ~/.cache/nuvec; NUVEC_CACHE_DIR=off disables it), so that a
 * second run skips the driver's compilation. The disk cache is read when the device opens and
 * written when it closes, one file per device and driver version; a damaged or foreign file is
 * ignored, and failing to write it is silent (a line on stderr with NUVEC_VERBOSE=1).
 *
 * Lifetime: a kernel stays in its device's cache until nu_device_close, which destroys every
 * kernel (handles become invalid then, like buffers). nu_kernel_free releases the caller's
 * reference; creating the same kernel again later costs nothing.
 *
 * nuvec's own kernels (GLSL under kernels/, compiled at build time and embedded) are opened
 * by name with nu_kernel_builtin: see the list in nu_kernel_builtin's comment.
 *
 * Getters accept NULL and return "", 0 or 0s; nu_kernel_free returns NU_OK (NULL too): see
 * nuvec/status.h.
 *
 * Thread safety: kernels may be created, used and freed from any thread; a kernel may be
 * used by several command buffers on several threads at once. */
#ifndef NUVEC_KERNEL_H
#define NUVEC_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

NU_BEGIN_DECLS

typedef struct nu_kernel nu_kernel;

/* A specialisation constant (layout(constant_id = id)): 32 bits, given as raw bits. */
typedef struct nu_specialization {
    uint32_t id;
    uint32_t value;
} nu_specialization;

typedef struct nu_kernel_desc {
    /* The SPIR-V: `spirv` and `spirv_size` (bytes, a multiple of 4), or a file at `path`. */
    const uint32_t *spirv;
    size_t spirv_size;
    const char *path;
    const char *entry;              /* entry point (default "main") */
    const char *name;               /* debug name in captures and traces (default: path or entry) */
    /* Storage buffers at set 0, bindings 0..bindings-1 (0: as many as the SPIR-V declares). */
    uint32_t bindings;
    /* Bytes of push constants, a multiple of 4 (0: none). At most the device's
     * max_push_constants (128 B are always available). */
    uint32_t push_constant_size;
    const nu_specialization *constants;
    uint32_t constant_count;
} nu_kernel_desc;

/* Creates (or finds in the device's cache) the kernel. The SPIR-V is untrusted input: it is
 * checked with SPIRV-Tools' validator for the device's Vulkan version before any driver sees
 * it, so no bytes crash the process. Fails with NU_ERROR_IO for a file that cannot be read,
 * NU_ERROR_FORMAT for bytes that are not valid SPIR-V (truncated, corrupted, or invalid for
 * Vulkan: the message gives the validator's finding) or lack the entry point (a GLCompute
 * OpEntryPoint) or declare bindings outside set 0 / beyond `bindings` / other than storage
 * buffers, NU_ERROR_INVALID_ARGUMENT for sizes the device does not allow (push constants not a
 * multiple of 4, beyond max_push_constants or smaller than the SPIR-V's push constant block;
 * more bindings than the device's push descriptors; a workgroup size, with the constants
 * given, outside max_workgroup_size / max_workgroup_invocations; a constant id given twice),
 * NU_ERROR_UNSUPPORTED without VK_KHR_push_descriptor, for a SPIR-V version newer than the
 * device's Vulkan version accepts, or for variables whose types nest structs beyond what can be
 * validated in reasonable time (more than 2^18 members counting each nested use). A kernel found in the cache keeps the name it was created
 * with (the name is not part of what identifies it). */
nu_status nu_kernel_new(nu_device *device, const nu_kernel_desc *desc, nu_kernel **out);

/* One of nuvec's own kernels, by name (counts are in elements; 32-bit words for the _u32 ones):
 *   fill_u32   binding 0: dst (write); push {uint value; uint count}: dst[i] = value
 *   copy_u32   bindings 0: dst (write), 1: src (read); push {uint count}: dst[i] = src[i]
 *              Each thread copies 4 words (one 16-byte load and store; word by word for the
 *              last count % 4), so dispatch ceil(count / 1024) workgroups:
 *              nu_groups_for(count, 1024, groups).
 *   add_f32, sub_f32, mul_f32  bindings 0: dst, 1: a, 2: b; push {uint count}: dst = a op b
 *   axpy_f32   bindings 0: y (read-write), 1: x; push {float alpha; uint count}: y += alpha*x
 *   fma_f32    bindings 0: dst, 1: a, 2: b, 3: c; push {uint count}: dst = a * b + c
 *   add_f16, mul_f16  as add_f32 on float16 (needs NU_FEATURE_FLOAT16 and STORAGE_16BIT, else
 *              NU_ERROR_UNSUPPORTED)
 * Each uses 256 threads per workgroup. All but copy_u32 take one element per thread: dispatch
 * ceil(count / 256) workgroups, nu_groups_for(count, 256, groups) (past 65535 workgroups it
 * uses y as well). An unknown name fails with NU_ERROR_INVALID_ARGUMENT listing the names.
 * nuvec knows what these kernels touch: nu_commands_dispatch refuses with
 * NU_ERROR_OUT_OF_RANGE a binding whose range holds fewer than `count` elements (an empty
 * range included), which the kernel would read or write past. */
nu_status nu_kernel_builtin(nu_device *device, const char *name, nu_kernel **out);

/* Releases the caller's reference. The kernel stays cached (valid) until the device closes.
 * NU_OK (NULL is ignored). An extra free is harmless (the kernel stays cached until close)
 * but not reported: it cannot be told apart from the release of another reference. */
nu_status nu_kernel_free(nu_kernel *kernel);

const char *nu_kernel_name(const nu_kernel *kernel);
uint32_t nu_kernel_bindings(const nu_kernel *kernel);
uint32_t nu_kernel_push_constant_size(const nu_kernel *kernel);
/* The workgroup size (LocalSize) the SPIR-V declares, or 0s when it uses specialisation. */
void nu_kernel_workgroup_size(const nu_kernel *kernel, uint32_t size[3]);

/* How many workgroups of `kernel` may run as one persistent dispatch on its device: one
 * whose workgroups wait for each other (a device-wide barrier between steps, as nuvec's
 * kernels/graph/grid_sync.glsl has). Vulkan guarantees neither that a dispatch's workgroups run
 * at once nor forward progress between them, so this is a conservative rule per driver: one
 * workgroup per compute unit where the driver reports them (nu_device_info.compute_units), the
 * compute threads on lavapipe, else 1 (always safe: one workgroup needs only barrier()). More
 * workgroups than this may deadlock; nuvec's barriers then time out instead. The environment
 * variable NUVEC_RESIDENT_GROUPS=N overrides the rule (for experiments). 0 for NULL. */
uint32_t nu_kernel_resident_groups(const nu_kernel *kernel);
/* Workgroup counts for `count` elements at `per_group` elements a workgroup: x = ceil(count /
 * per_group), y = z = 1 while that is at most 65535; beyond, x = 65535 and y = ceil(x' /
 * 65535) (x' the groups needed), and the kernel skips the threads past `count`. The builtin
 * kernels number elements gl_GlobalInvocationID.x + gl_GlobalInvocationID.y *
 * gl_NumWorkGroups.x * 256, which fits this layout. count 0 gives x = 0 (an empty dispatch).
 * NU_ERROR_INVALID_ARGUMENT (groups set to 0s) for NULL groups, per_group 0, or a count that
 * needs more than 65535 x 65535 workgroups. */
nu_status nu_groups_for(uint64_t count, uint32_t per_group, uint32_t groups[3]);

NU_END_DECLS
#endif
