#version 450
// matvec_soa: Q4_0_SOA weights with 4x8-bit integer dot products (GL_EXT_integer_dot_product;
// compiled by glslang 15): the body and its description are in matvec_soa.glsl.
#extension GL_KHR_shader_subgroup_shuffle : enable
#extension GL_EXT_integer_dot_product : require
#extension GL_GOOGLE_include_directive : require // glslc enables it itself; glslang needs it asked
#define SOA_DOT 1
#include "matvec_soa.glsl"
