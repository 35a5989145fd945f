#version 450
// nuvec: float16_t is bfloat16
// matmul_coopmat_bf16: nu_op_matmul on the matrix units with BF16 a and w. Its SPIR-V holds float16_t
// fragments, turned into BF16 ones when the kernel is made (src/kernel/spirv_rewrite.c,
// nu__spirv_f16_as_bf16); the body and its description are in matmul_coopmat.glsl (TILES_BF16).
#extension GL_KHR_cooperative_matrix : require // CMakeLists.txt compiles kernels with it by glslang 15
#extension GL_GOOGLE_include_directive : require
#define TILES_BF16
#include "matmul_coopmat.glsl"
