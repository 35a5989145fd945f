/* spirv.h: checking a kernel's SPIR-V before any driver sees it (see spirv.c), and reading the
 * layout nu_kernel_new needs from it. Neither needs an open device nor calls Vulkan, so the
 * fuzz target (fuzz/fuzz_kernel.c) calls them directly. */
#ifndef NU_SPIRV_H
#define NU_SPIRV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nuvec/status.h"

/* The largest SPIR-V accepted, in bytes (real kernels are kilobytes; this keeps word offsets
 * within 32 bits). */
#define NU__SPIRV_MAX (256u << 20)

/* One dimension of the workgroup size: `value`, or, when `spec_id` is a SpecId, the default
 * of that specialisation constant; NU__SPIRV_UNKNOWN when not worked out (computed from
 * other constants, or a malformed module). */
#define NU__SPIRV_CONSTANT UINT32_MAX
#define NU__SPIRV_UNKNOWN (UINT32_MAX - 1)
typedef struct nu__spirv_dim {
    uint32_t value;
    uint32_t spec_id; /* NU__SPIRV_CONSTANT, NU__SPIRV_UNKNOWN or a SpecId */
} nu__spirv_dim;

/* What reflection reads from a module for one entry point. */
typedef struct nu__spirv_layout {
    uint32_t bindings;      /* max binding + 1 over the entry point's storage buffers (set 0) */
    uint32_t local_size[3]; /* LocalSize (or a constant WorkgroupSize); 0s when specialised */
    nu__spirv_dim size[3];  /* the workgroup size, for checking it against the device's limits */
    bool has_push;          /* the entry point uses a push constant block */
    uint64_t push_extent;   /* bytes that block spans (0: unknown) */
} nu__spirv_layout;

/* Checks `size` bytes of SPIR-V at `words` (4-byte aligned) for a device of Vulkan
 * `api_version` (VK_MAKE_API_VERSION) and reads its layout into *out, in this order: the size
 * and header (NU_ERROR_FORMAT), the SPIR-V version (NU_ERROR_UNSUPPORTED when newer than that
 * Vulkan version accepts), SPIRV-Tools' validator for that Vulkan version (NU_ERROR_FORMAT
 * with the validator's diagnostic), then reflection (nu__spirv_reflect). `device` (NULL: none)
 * receives the failure message too; `label` names the kernel in it. Thread-safe. */
nu_status nu__spirv_check(nu_device *device, uint32_t api_version, const char *label, const uint32_t *words,
                          size_t size, const char *entry, nu__spirv_layout *out);

/* Reflection alone, without the validator: the GLCompute entry point `entry`, its workgroup
 * size, storage buffers and push constants, with nu_kernel_new's NU_ERROR_FORMAT cases for
 * what nuvec cannot bind. Safe on any `word_count` words (every word count, operand and id is
 * checked before it is used; work is bounded); only meaningful on a validated module. */
nu_status nu__spirv_reflect(nu_device *device, const char *label, const uint32_t *words, size_t word_count,
                            const char *entry, nu__spirv_layout *out);

/* For graphs: the module with its push constant block turned into a storage buffer at set 0,
 * binding `binding` (same struct and offsets; see spirv.c), in *out (nu__free it), *out_words
 * words. NU_ERROR_UNSUPPORTED when it cannot be done (no single push constant block, SPIR-V
 * before 1.3, a renaming that would use an id before its declaration); the result still needs
 * validation. */
nu_status nu__spirv_push_to_storage(const uint32_t *words, size_t word_count, uint32_t binding, uint32_t **out,
                                    size_t *out_words);

/* The module with its one 16-bit float type made bfloat16 (SPV_KHR_bfloat16), in *out (nu__free
 * it), *out_words words: for kernels written with float16_t where bfloat16 is meant, because no
 * GLSL compiler nuvec builds with knows GL_EXT_bfloat16 (kernels/matmul/matmul_coopmat.glsl's
 * TILES_BF16). The module must use that type only as cooperative matrices' component type (no
 * arithmetic, constants, vectors or storage of it: none of them is allowed on bfloat16, or means
 * the same), which is checked; then OpTypeFloat 16 gains the BFloat16KHR encoding, the Float16
 * capability becomes BFloat16TypeKHR, and BFloat16CooperativeMatrixKHR and the extension
 * SPV_KHR_bfloat16 are declared. NU_ERROR_UNSUPPORTED, with the reason in `why`, where the module
 * does not qualify. Validate the module before (SPIRV-Tools 2025.1, which nuvec builds, predates
 * SPV_KHR_bfloat16 and rejects the result): the rewrite changes nothing else. */
nu_status nu__spirv_f16_as_bf16(const uint32_t *words, size_t word_count, uint32_t **out, size_t *out_words,
                                char *why, size_t why_size);

/* A whole file read into *words (nu__free it), *bytes long: NU_ERROR_IO naming the file where it
 * cannot be opened or read (a folder too), NU_ERROR_FORMAT past NU__SPIRV_MAX bytes. The contents
 * are checked by nu__spirv_check. */
nu_status nu__spirv_read_file(nu_device *d, const char *path, uint32_t **words, size_t *bytes);

/* How many modules SPIRV-Tools' validator has checked in this process (for tests). */
uint64_t nu__spirv_validations(void);

/* The highest SPIR-V version a Vulkan version accepts (without VK_KHR_spirv_1_4), as the
 * header's version word. */
uint32_t nu__spirv_max_version(uint32_t api_version);

#endif
