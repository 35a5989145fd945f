/* builtins.c: lookup of the embedded kernels. */
#include "kernel/builtins.h"

#include <string.h>

const nu__kernel_spirv *nu__kernel_find(const char *name)
{
    for (unsigned i = 0; i < nu__kernel_count; i++)
        if (!*nu__kernels[i].family && strcmp(nu__kernels[i].name, name) == 0)
            return &nu__kernels[i];
    return NULL;
}
