// reduce.glsl: what the row ops share (reductions, argmax and softmax here, the norms in
// kernels/norm/): teams of threads over rows, reading a row eight elements at a time with
// 16-byte loads or one element at a time through its stride, and reducing across a team with
// subgroup arithmetic or a shared-memory tree.
//
// A workgroup of LOCAL threads (a power of two) handles ROWS rows at a time, one team of
// TEAM = LOCAL / ROWS threads a row; workgroups loop over groups of rows with the grid's stride.
// Every thread of a workgroup runs every team reduction (they hold barriers): threads of a team
// past the last row take part with neutral values.
//
// Before including it, a shader defines:
//   NU_ROWS_SUBGROUPS   1 to compile the subgroup-arithmetic reductions (the *_sg kernels: a
//                       module declaring the capability is only made on devices that have it),
//                       0 for the shared-memory tree alone;
//   the constants LOCAL, ROWS, SUBGROUP (1: reduce with subgroup arithmetic, the host's choice
//   when TEAM is a multiple of the device's largest subgroup size; only with NU_ROWS_SUBGROUPS),
//   VEC (1: 16-byte loads, every row contiguous and its first element 16-byte aligned), UNROLL
//   (vector loads in flight per thread and step), DT_SRC (the dtype read);
//   the binding `src` (NU_TENSOR) and prototypes of
//     void take8(uint pass, float x[8], uint i);   // elements i .. i+7 of the row
//     void take1(uint pass, float x, uint i);      // element i
//   which nu_row_read calls for every element of the row, each thread for its own elements, in
//   increasing order of i.
#if NU_ROWS_SUBGROUPS
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

const uint TEAM = LOCAL / ROWS;

shared float nu_rows_f[LOCAL];
shared uint nu_rows_u[LOCAL];
shared uint nu_rows_i[LOCAL];

uint nu_team() { return gl_LocalInvocationID.x / TEAM; }
uint nu_lane() { return gl_LocalInvocationID.x % TEAM; }

// Row r's first element, in elements from the tensor's first, for a tensor of shape `shape` and
// strides `strides` (4 dimensions, outermost first; the rows are the first three).
uint nu_row_offset(uint r, uvec4 shape, uvec4 strides)
{
    uint i2 = r % shape.z;
    r /= shape.z;
    uint i1 = r % shape.y;
    uint i0 = r / shape.y;
    return i0 * strides.x + i1 * strides.y + i2 * strides.z;
}

// Floats as unsigned keys in the order of their values, NaN above +inf and -0 equal to +0: the
// max reduction and argmax compare keys (GLSL's max() leaves NaN undefined).
uint nu_key(float x)
{
    if (isnan(x))
        return 0xffffffffu;
    uint u = x == 0.0 ? 0u : floatBitsToUint(x);
    return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
}
float nu_unkey(uint k)
{
    return uintBitsToFloat((k & 0x80000000u) != 0u ? (k & 0x7fffffffu) : ~k);
}
// Below every float's key (threads that saw no element).
#define NU_KEY_NONE 0u

// The sum of v over the team, in every thread of the team.
float nu_team_sum(float v)
{
    uint tid = gl_LocalInvocationID.x, base = nu_team() * TEAM;
#if NU_ROWS_SUBGROUPS
    if (SUBGROUP == 1u) {
        float s = subgroupAdd(v);
        barrier(); // earlier reads of the partials are done
        if (subgroupElect())
            nu_rows_f[gl_SubgroupID] = s;
        barrier();
        uint first = base / gl_SubgroupSize, count = TEAM / gl_SubgroupSize;
        float t = 0.0;
        for (uint k = 0u; k < count; k++)
            t += nu_rows_f[first + k];
        return t;
    }
#endif
    barrier();
    nu_rows_f[tid] = v;
    barrier();
    for (uint s = TEAM / 2u; s > 0u; s >>= 1u) {
        if (tid - base < s)
            nu_rows_f[tid] += nu_rows_f[tid + s];
        barrier();
    }
    return nu_rows_f[base];
}

// The largest key over the team.
uint nu_team_max(uint v)
{
    uint tid = gl_LocalInvocationID.x, base = nu_team() * TEAM;
#if NU_ROWS_SUBGROUPS
    if (SUBGROUP == 1u) {
        uint s = subgroupMax(v);
        barrier();
        if (subgroupElect())
            nu_rows_u[gl_SubgroupID] = s;
        barrier();
        uint first = base / gl_SubgroupSize, count = TEAM / gl_SubgroupSize;
        uint t = NU_KEY_NONE;
        for (uint k = 0u; k < count; k++)
            t = max(t, nu_rows_u[first + k]);
        return t;
    }
#endif
    barrier();
    nu_rows_u[tid] = v;
    barrier();
    for (uint s = TEAM / 2u; s > 0u; s >>= 1u) {
        if (tid - base < s)
            nu_rows_u[tid] = max(nu_rows_u[tid], nu_rows_u[tid + s]);
        barrier();
    }
    return nu_rows_u[base];
}

// The largest float over the team (NaN largest).
float nu_team_maxf(float v) { return nu_unkey(nu_team_max(nu_key(v))); }

// The largest key over the team and the smallest index holding it (idx of a thread that saw no
// element: 0xffffffff).
void nu_team_argmax(inout uint key, inout uint idx)
{
    uint tid = gl_LocalInvocationID.x, base = nu_team() * TEAM;
#if NU_ROWS_SUBGROUPS
    if (SUBGROUP == 1u) {
        uint m = subgroupMax(key);
        uint i = subgroupMin(key == m ? idx : 0xffffffffu);
        barrier();
        if (subgroupElect()) {
            nu_rows_u[gl_SubgroupID] = m;
            nu_rows_i[gl_SubgroupID] = i;
        }
        barrier();
        uint first = base / gl_SubgroupSize, count = TEAM / gl_SubgroupSize;
        key = NU_KEY_NONE;
        idx = 0xffffffffu;
        for (uint k = 0u; k < count; k++) {
            uint mk = nu_rows_u[first + k], ik = nu_rows_i[first + k];
            if (mk > key || (mk == key && ik < idx)) {
                key = mk;
                idx = ik;
            }
        }
        return;
    }
#endif
    barrier();
    nu_rows_u[tid] = key;
    nu_rows_i[tid] = idx;
    barrier();
    for (uint s = TEAM / 2u; s > 0u; s >>= 1u) {
        if (tid - base < s) {
            uint mk = nu_rows_u[tid + s], ik = nu_rows_i[tid + s];
            if (mk > nu_rows_u[tid] || (mk == nu_rows_u[tid] && ik < nu_rows_i[tid])) {
                nu_rows_u[tid] = mk;
                nu_rows_i[tid] = ik;
            }
        }
        barrier();
    }
    key = nu_rows_u[base];
    idx = nu_rows_i[base];
}

// Calls take8 / take1 for this thread's elements of the row of n elements whose first element
// is `first` in src's binding, elements `stride` apart (VEC: stride 1 and first 16-byte
// aligned). Vector steps: thread `lane` takes units lane, lane + TEAM, ... of eight elements,
// UNROLL of them loaded before any is used; the last n % 8 elements one a thread.
void nu_row_read(uint pass, uint first, uint stride, uint n)
{
    uint lane = nu_lane();
    if (VEC == 1u) {
        uint vb = nu_vbase(DT_SRC, first), units = n / 8u, u = lane;
        for (; u + (UNROLL - 1u) * TEAM < units; u += UNROLL * TEAM) {
            float x[UNROLL][8];
            for (uint k = 0u; k < UNROLL; k++) {
                NU_LOAD8(src, DT_SRC, vb, u + k * TEAM, x[k])
            }
            for (uint k = 0u; k < UNROLL; k++)
                take8(pass, x[k], (u + k * TEAM) * 8u);
        }
        for (; u < units; u += TEAM) {
            float x[8];
            NU_LOAD8(src, DT_SRC, vb, u, x)
            take8(pass, x, u * 8u);
        }
        uint i = units * 8u + lane;
        if (i < n)
            take1(pass, NU_LOAD(src, DT_SRC, first + i), i);
        return;
    }
    for (uint i = lane; i < n; i += TEAM)
        take1(pass, NU_LOAD(src, DT_SRC, first + i * stride), i);
}
