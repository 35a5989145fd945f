/* kernels.h: nuvec's own kernels, GLSL under kernels/ compiled to SPIR-V at build time and
 * embedded (cmake/embed_spirv.cmake writes the table). */
#ifndef NU_KERNELS_H
#define NU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

typedef struct nu__kernel_spirv {
    const char *name;      /* the file name without .comp */
    const uint32_t *words;
    size_t word_count;
} nu__kernel_spirv;

extern const nu__kernel_spirv nu__kernels[];
extern const unsigned nu__kernel_count;

/* The embedded kernel called `name`, or NULL. */
const nu__kernel_spirv *nu__kernel_find(const char *name);

#endif
