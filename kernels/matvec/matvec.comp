#version 450
// matvec: nu_op_matvec without subgroup operations (a shared-memory tree reduces the sums).
// Constants, bindings and push: kernels/matvec/matvec_kernel.glsl.
#include "matvec/matvec_kernel.glsl"
