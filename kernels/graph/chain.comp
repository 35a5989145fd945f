#version 450
// chain: graph/chain_body.glsl on the GLSL450 memory model (coherent buffers and fences).
#include "graph/chain_body.glsl"
