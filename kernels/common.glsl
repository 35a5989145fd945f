// Shared by nuvec's kernels: the workgroup size every elementwise kernel uses.
#define NU_LOCAL_SIZE 256

// The element (thread) index of this invocation. Large dispatches spread workgroups over x and
// y (nu_groups_for: x at most 65535), so the index counts whole rows of x first. Such a grid
// can hold more than 2^32 threads; an index past 2^32 - 1 is reported as 0xFFFFFFFF (never
// below a 32-bit count) instead of wrapping around onto elements other threads own.
uint nu_index()
{
    uint hi, lo, carry;
    umulExtended(gl_GlobalInvocationID.y, gl_NumWorkGroups.x * NU_LOCAL_SIZE, hi, lo);
    uint i = uaddCarry(lo, gl_GlobalInvocationID.x, carry);
    return (hi | carry) != 0u ? 0xFFFFFFFFu : i;
}
