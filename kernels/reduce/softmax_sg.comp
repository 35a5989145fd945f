#version 450
// softmax_sg: nu_op_softmax with subgroup arithmetic (devices that have it).
// Constants, bindings and push: kernels/reduce/softmax_kernel.glsl.
#define NU_ROWS_SUBGROUPS 1
#include "reduce/softmax_kernel.glsl"
