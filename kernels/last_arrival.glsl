// last_arrival.glsl: the last workgroup of a launch to arrive at a counter, for work that one
// workgroup does after all the others (attention/attn_splits.glsl's merge of the decode splits,
// matvec_soa.glsl's post-norm). Included with NU_ARRIVAL_BINDING defined: the binding of the
// counters (32-bit words, zero before the first launch; the last to arrive puts its word back to
// zero, so a graph's launches need no fill).
//
// Memory ordering (the GLSL450 model, valid on every device, as kernels/graph/grid_sync.glsl's
// default variant): what the workgroups store for the last one to read must be Coherent; every
// invocation fences its stores (memoryBarrierBuffer, device scope, acquire-release on buffer
// memory) before the workgroup barrier, the first invocation fences again and then increments the
// counter (a relaxed atomic); the workgroup that sees total - 1 arrivals before its own knows
// every other's stores were made available before their arrivals, and fences (acquire) before it
// reads them. No workgroup waits for another, so nothing depends on workgroups being co-resident.

layout(std430, binding = NU_ARRIVAL_BINDING) coherent buffer NuArrival { uint nu_arrival_w[]; };
shared bool nu_arrival_last;

// Called by every invocation of the workgroup (uniform control flow) after its stores: whether
// this workgroup is the last of `total` to arrive at counter word `counter` (then the others'
// stores are visible to it, and the word is zero again for the next launch).
bool nu_last_arrival(uint counter, uint total)
{
    memoryBarrierBuffer();
    barrier();
    if (gl_LocalInvocationIndex == 0u) {
        memoryBarrierBuffer();
        uint before = atomicAdd(nu_arrival_w[counter], 1u);
        nu_arrival_last = before + 1u == total;
        if (nu_arrival_last)
            atomicExchange(nu_arrival_w[counter], 0u); // every workgroup of this launch has arrived
    }
    barrier();
    bool last = nu_arrival_last;
    if (last)
        memoryBarrierBuffer();
    return last;
}
