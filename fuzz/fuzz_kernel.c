/* fuzz_kernel.c: libFuzzer target for kernel creation's SPIR-V checks (built with
 * -DNUVEC_FUZZ=ON; `make fuzz-smoke`, `make fuzz`): everything nu_kernel_new does with the
 * bytes before a driver sees them (src/kernel/spirv.c: header, SPIRV-Tools' validator, reflection),
 * without a device, and the rewrites of a valid module: graphs' push constants into a storage
 * buffer, and float16_t fragments into bfloat16 ones (nu__spirv_f16_as_bf16). Reflection also runs
 * alone on the raw words, as it must be safe on any input. The seeds are the builtin kernels' SPIR-V and the GLSL under fuzz/kernel_seeds/
 * compile to (the build writes both to build-fuzz/seeds-kernel/).
 *
 * The Vulkan version checked for comes from the low 2 bits of the header's generator word
 * (which neither validation nor reflection reads): 1.0 to 1.3. glslc's modules say 3: 1.3. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <vulkan/vulkan_core.h>

#include "core/host.h"
#include "kernel/spirv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond))                                                                           \
            abort();                                                                           \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint32_t apis[4] = {VK_API_VERSION_1_0, VK_API_VERSION_1_1, VK_API_VERSION_1_2, VK_API_VERSION_1_3};
    uint32_t *w = malloc(size + 4); /* 4-byte aligned, as nu_kernel_new requires */
    CHECK(w);
    memcpy(w, data, size);
    uint32_t api = apis[size >= 12 ? w[2] & 3 : 3];

    nu__spirv_layout layout;
    nu_status st = nu__spirv_check(NULL, api, "fuzz", w, size, "main", &layout);
    CHECK(st == NU_OK || st == NU_ERROR_FORMAT || st == NU_ERROR_UNSUPPORTED);
    if (st == NU_OK) {
        CHECK(layout.bindings <= 1024);
        CHECK(layout.has_push || layout.push_extent == 0);
    }
    /* Graphs' rewrite of a valid module's push constants into a storage buffer: never crashes;
     * where its result validates, the block is binding `bindings` and no push constants remain. */
    if (st == NU_OK && layout.has_push) {
        uint32_t *out = NULL;
        size_t n = 0;
        nu_status wst = nu__spirv_push_to_storage(w, size / 4, layout.bindings, &out, &n);
        CHECK(wst == NU_OK || wst == NU_ERROR_UNSUPPORTED || wst == NU_ERROR_HOST_OUT_OF_MEMORY);
        nu__spirv_layout moved;
        if (wst == NU_OK && nu__spirv_check(NULL, api, "fuzz", out, n * 4, "main", &moved) == NU_OK)
            CHECK(!moved.has_push && moved.bindings == layout.bindings + 1);
        nu__free(out);
    }
    if (st == NU_OK) { /* the bfloat16 rewrite (BF16 matrix-unit kernels) takes validated modules */
        uint32_t *out = NULL;
        size_t n = 0;
        char why[160];
        nu_status bst = nu__spirv_f16_as_bf16(w, size / 4, &out, &n, why, sizeof why);
        CHECK(bst == NU_OK || bst == NU_ERROR_UNSUPPORTED || bst == NU_ERROR_HOST_OUT_OF_MEMORY);
        CHECK(bst != NU_OK || n > size / 4);
        nu__free(out);
    }
    nu__spirv_layout raw;
    nu_status rst = nu__spirv_reflect(NULL, "fuzz", w, size / 4, "main", &raw);
    CHECK(rst == NU_OK || rst == NU_ERROR_FORMAT);
    /* On a module that passed, reflection alone reads the same. */
    CHECK(st != NU_OK || (rst == NU_OK && memcmp(&raw, &layout, sizeof raw) == 0));
    free(w);
    return 0;
}
