#version 450
// reduce_sg: nu_op_reduce and nu_op_argmax with subgroup arithmetic (devices that have it).
// Constants, bindings and push: kernels/reduce/reduce_kernel.glsl.
#define NU_ROWS_SUBGROUPS 1
#include "reduce/reduce_kernel.glsl"
