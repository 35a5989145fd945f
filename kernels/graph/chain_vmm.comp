#version 450
// chain_vmm: graph/chain_body.glsl on the Vulkan memory model (needs NU_FEATURE_VULKAN_MEMORY_MODEL
// enabled on the device).
#define NU_GRID_VMM
#include "graph/chain_body.glsl"
