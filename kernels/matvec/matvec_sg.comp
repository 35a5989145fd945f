#version 450
// matvec_sg: nu_op_matvec with subgroup arithmetic (devices that have it; FLAGS bit 0 chooses).
// Constants, bindings and push: kernels/matvec/matvec_kernel.glsl.
#define NU_MATVEC_SUBGROUPS 1
#include "matvec/matvec_kernel.glsl"
