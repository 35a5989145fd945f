#version 450
// matmul_coopmat: nu_op_matmul on the matrix units with F16 a (F16 or block weights); the body and
// its description are in matmul_coopmat.glsl.
#extension GL_KHR_cooperative_matrix : require // CMakeLists.txt compiles kernels with it by glslang 15
#extension GL_GOOGLE_include_directive : require
#include "matmul_coopmat.glsl"
