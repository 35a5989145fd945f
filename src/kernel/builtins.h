/* builtins.h: nuvec's own kernels, GLSL under kernels/ compiled to SPIR-V at build time and
 * embedded (cmake/embed_spirv.cmake writes the table; kernels_table.h indexes it by name). */
#ifndef NU_KERNEL_BUILTINS_H
#define NU_KERNEL_BUILTINS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nu__kernel_spirv {
    const char *name;      /* the file name without .comp */
    const uint32_t *words;
    size_t word_count;
    const char *family;    /* its folder under kernels/ (the kernel library's, src/ops/), or ""
                              for the public builtins nu_kernel_builtin opens */
    bool f16_as_bf16;      /* its float16_t is meant as bfloat16 (its .comp says "// nuvec: float16_t
                              is bfloat16"): made by nu__kernel_new_f16_as_bf16 (kernel.h) */
} nu__kernel_spirv;

extern const nu__kernel_spirv nu__kernels[];
extern const unsigned nu__kernel_count;

/* The public builtin (family "") called `name`, or NULL. */
const nu__kernel_spirv *nu__kernel_find(const char *name);

#endif
