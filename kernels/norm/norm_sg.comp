#version 450
// norm_sg: nu_op_rms_norm and nu_op_layer_norm with subgroup arithmetic (devices that have it).
// Constants, bindings and push: kernels/norm/norm_kernel.glsl.
#define NU_ROWS_SUBGROUPS 1
#include "norm/norm_kernel.glsl"
