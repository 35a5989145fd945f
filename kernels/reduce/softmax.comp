#version 450
// softmax: nu_op_softmax with shared-memory team reductions (every device).
// Constants, bindings and push: kernels/reduce/softmax_kernel.glsl.
#define NU_ROWS_SUBGROUPS 0
#include "reduce/softmax_kernel.glsl"
