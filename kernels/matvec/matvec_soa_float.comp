#version 450
// matvec_soa_float: Q4_0_SOA weights in F32 arithmetic (devices without integer dot products):
// the body and its description are in matvec_soa.glsl.
#define SOA_DOT 0
#include "matvec_soa.glsl"
