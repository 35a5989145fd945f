#version 450
// norm: nu_op_rms_norm and nu_op_layer_norm with shared-memory team reductions (every device).
// Constants, bindings and push: kernels/norm/norm_kernel.glsl.
#define NU_ROWS_SUBGROUPS 0
#include "norm/norm_kernel.glsl"
