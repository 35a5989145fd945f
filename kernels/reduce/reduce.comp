#version 450
// reduce: nu_op_reduce and nu_op_argmax with shared-memory team reductions (every device).
// Constants, bindings and push: kernels/reduce/reduce_kernel.glsl.
#define NU_ROWS_SUBGROUPS 0
#include "reduce/reduce_kernel.glsl"
