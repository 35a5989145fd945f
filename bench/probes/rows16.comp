#version 450
// bench/probes/rows16.comp: a 16-row product against Q4_0_SOA weights whose weight fragments are
// built in registers (no shared-memory tile of w, no workgroup barrier a step), to learn whether
// that is what the few-row products of kernels/matmul/matmul_coopmat.comp lack (bench/RESULTS.md:
// at 16 rows they take 60% of their time with no global loads at all). bench/probes/rows16.c runs it.
//
//   out[split, m, j] = sum over the split's k of a[m, k] * w[j, k],  m < 16, a F16 [16, K]
//
// What it showed (H100, bench/RESULTS.md, twenty-first session): no faster than matmul_coopmat's
// 16-row tiles, with a staged in shared memory (through the buffer it was twice as slow), and
// barely faster with no weight loads at all.
// MODE 1 dumps the fragment layouts instead: what element i of each lane's A, B and accumulator
// fragments holds (the matrices loaded from index-valued ones), so the product's B construction
// (below: NVIDIA's mma.m16n8k16 layout, assumed) can be checked against the driver.
// A subgroup takes 16 FN columns j0.. and the split's k: for each 32-k block, lane t (q = t % 4,
// r = t / 4) reads the 16-byte quant run and the scale of rows j0 + r + 8 i (i < 2 FN) and builds,
// from words q / 2 and 2 + q / 2, elements k = 2q, 2q + 1, 2q + 8, 2q + 9 of each (the low nibbles
// for the block's first 16 k, the high ones for the second 16). The workgroup stages a's 16 rows
// over the split's k in shared memory first (ASRC 1; at most KMAX), or each fragment of a is
// loaded from the buffer (ASRC 0). BSRC 1 builds w's fragments through the subgroup's own shared
// rows instead (main_shared).
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
layout(local_size_x = 128, local_size_x_id = 0) in;
layout(constant_id = 1) const uint MODE = 0u;   // 0 the product, 1 the layouts
layout(constant_id = 2) const uint GROUP = 2u;  // blocks an iteration: the next group's loads in flight
layout(constant_id = 3) const uint ASRC = 0u;   // a: 0 from the buffer (coopMatLoad), 1 staged in shared memory
layout(constant_id = 4) const uint PROBE = 0u;  // 1: no weight loads (constants)
layout(constant_id = 5) const uint KMAX = 1024u; // ASRC 1: the most k a split stages
layout(constant_id = 6) const uint ACCS = 2u;   // BSRC 1: accumulators (1 or 2: alternate blocks' halves)
#ifndef FN
#define FN 1u // 16-column fragments a subgroup (BSRC 0): a compile-time constant, so that acc[] stays in registers
#endif
layout(constant_id = 7) const uint BSRC = 0u;   // w's fragments: 0 built in registers, 1 through the subgroup's own shared rows
const uint LOCAL = gl_WorkGroupSize.x;

layout(std430, binding = 0) buffer Out { float o[]; };
layout(std430, binding = 1) readonly buffer A16 { float16_t a_h[]; };
layout(std430, binding = 1) readonly buffer A4 { uvec4 a_v[]; };
layout(std430, binding = 2) readonly buffer W { uint w_w[]; };
layout(std430, binding = 2) readonly buffer W4 { uvec4 w_v[]; };
layout(std430, binding = 2) readonly buffer WH { float16_t w_h[]; };
layout(push_constant) uniform Push { uint n, k, k_per; } pc;

#define MA coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define MB coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define MC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

const uint AROW = (KMAX + 8u) / 8u; // uvec4 a staged row
shared uvec4 ash[ASRC == 1u ? 16u * AROW : 1u];
// BSRC 1: a subgroup's 2 x GROUP blocks of 16 rows x 32 k (rows of 40 halves: 5 uvec4)
const uint BSLOT = 16u * 5u;
shared uvec4 bsh[BSRC == 1u ? (LOCAL / 32u) * 2u * GROUP * BSLOT : 1u];

f16vec2 lo_pair(uint x, float16_t d) { return (unpackFloat2x16((x & 0xfu) | ((x & 0xf00u) << 8u) | 0x64006400u) - f16vec2(1032.0hf)) * d; }
f16vec2 hi_pair(uint x, float16_t d) { return (unpackFloat2x16(((x >> 4u) & 0xfu) | ((x & 0xf000u) << 4u) | 0x64006400u) - f16vec2(1032.0hf)) * d; }

void dump()
{
    uint t = gl_SubgroupInvocationID;
    MA fa;
    MB fb;
    MC fc;
    coopMatLoad(fa, a_h, 0u, 16u, gl_CooperativeMatrixLayoutRowMajor);      // A(m, k) = 16 m + k
    coopMatLoad(fb, a_h, 256u, 16u, gl_CooperativeMatrixLayoutColumnMajor); // B(k, n) at 16 n + k = 16 k + n
    coopMatLoad(fc, o, 0u, 16u, gl_CooperativeMatrixLayoutRowMajor);       // C(m, n) = 16 m + n
    uint base = 256u + t * 32u;
    o[base] = float(fa.length());
    for (uint i = 0u; i < fa.length(); i++) o[base + 1u + i] = float(fa[i]);
    for (uint i = 0u; i < fb.length(); i++) o[base + 10u + i] = float(fb[i]);
    for (uint i = 0u; i < fc.length(); i++) o[base + 19u + i] = fc[i];
}

uint pack_lo(uint x, float16_t d) { return packFloat2x16(lo_pair(x, d)); }
uint pack_hi(uint x, float16_t d) { return packFloat2x16(hi_pair(x, d)); }

// BSRC 1: lane t takes row t / 2's words 2h, 2h + 1 (h = t % 2) of each block: elements 8h..8h+7
// (low nibbles) and 16 + 8h.. (high), stored at their (row, k) in the subgroup's slot, which
// coopMatLoad then reads as any B.
void main_shared(uint j0, uint k0, uint nb, uint split)
{
    uint t = gl_SubgroupInvocationID, r2 = t >> 1u, h = t & 1u;
    uint wrow = pc.k / 32u * 9u, hr = (j0 + r2) * wrow;
    uint qw = (hr + pc.k / 32u) / 2u + 2u * h, b0 = k0 / 32u;
    uint mine = gl_SubgroupID * 2u * GROUP * BSLOT;
    bool inside = j0 < pc.n;
    MC acc0 = MC(0.0), acc1 = MC(0.0);
    uvec2 cw[GROUP], nw[GROUP];
    float16_t cd[GROUP], nd[GROUP];
    [[unroll]] for (uint g = 0u; g < GROUP; g++) {
        uint b = b0 + g;
        bool ok = inside && g < nb && PROBE == 0u;
        cw[g] = ok ? uvec2(w_w[qw + 4u * b], w_w[qw + 4u * b + 1u]) : uvec2(0x12345678u);
        cd[g] = ok ? w_h[hr + b] : float16_t(0.0);
    }
    uint flip = 0u;
    for (uint it = 0u; it < nb; it += GROUP) {
        if (it + GROUP < nb) {
            [[unroll]] for (uint g = 0u; g < GROUP; g++) {
                uint b = b0 + it + GROUP + g;
                bool ok = inside && it + GROUP + g < nb && PROBE == 0u;
                nw[g] = ok ? uvec2(w_w[qw + 4u * b], w_w[qw + 4u * b + 1u]) : uvec2(0x12345678u);
                nd[g] = ok ? w_h[hr + b] : float16_t(0.0);
            }
        }
        [[unroll]] for (uint g = 0u; g < GROUP; g++) {
            uint at = mine + (flip * GROUP + g) * BSLOT + r2 * 5u + h;
            uint x0 = cw[g].x, x1 = cw[g].y;
            bsh[at] = uvec4(pack_lo(x0, cd[g]), pack_lo(x0 >> 16u, cd[g]), pack_lo(x1, cd[g]), pack_lo(x1 >> 16u, cd[g]));
            bsh[at + 2u] = uvec4(pack_hi(x0, cd[g]), pack_hi(x0 >> 16u, cd[g]), pack_hi(x1, cd[g]), pack_hi(x1 >> 16u, cd[g]));
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        [[unroll]] for (uint g = 0u; g < GROUP; g++) {
            if (it + g < nb) {
                uint kb = 32u * (it + g);
                MA fa0, fa1;
                if (ASRC == 1u) {
                    coopMatLoad(fa0, ash, kb / 8u, AROW, gl_CooperativeMatrixLayoutRowMajor);
                    coopMatLoad(fa1, ash, kb / 8u + 2u, AROW, gl_CooperativeMatrixLayoutRowMajor);
                } else {
                    coopMatLoad(fa0, a_v, (k0 + kb) / 8u, pc.k / 8u, gl_CooperativeMatrixLayoutRowMajor);
                    coopMatLoad(fa1, a_v, (k0 + kb) / 8u + 2u, pc.k / 8u, gl_CooperativeMatrixLayoutRowMajor);
                }
                MB fb0, fb1;
                uint slot = mine + (flip * GROUP + g) * BSLOT;
                coopMatLoad(fb0, bsh, slot, 5u, gl_CooperativeMatrixLayoutColumnMajor);
                coopMatLoad(fb1, bsh, slot + 2u, 5u, gl_CooperativeMatrixLayoutColumnMajor);
                acc0 = coopMatMulAdd(fa0, fb0, acc0);
                if (ACCS == 2u)
                    acc1 = coopMatMulAdd(fa1, fb1, acc1);
                else
                    acc0 = coopMatMulAdd(fa1, fb1, acc0);
            }
        }
        flip ^= 1u;
        [[unroll]] for (uint g = 0u; g < GROUP; g++) { cw[g] = nw[g]; cd[g] = nd[g]; }
    }
    if (ACCS == 2u)
        for (uint i = 0u; i < acc0.length(); i++) acc0[i] += acc1[i];
    if (inside)
        coopMatStore(acc0, o, split * 16u * pc.n + j0, pc.n, gl_CooperativeMatrixLayoutRowMajor);
}

void main()
{
    if (MODE == 1u) {
        if (gl_WorkGroupID.x == 0u && gl_SubgroupID == 0u)
            dump();
        return;
    }
    uint t = gl_SubgroupInvocationID, q = t & 3u, r = t >> 2u;
    uint j0 = (gl_WorkGroupID.x * (LOCAL / 32u) + gl_SubgroupID) * 16u * FN;
    uint split = gl_WorkGroupID.y, k0 = split * pc.k_per, nb = min(pc.k_per, pc.k - k0) / 32u;
    uint wrow = pc.k / 32u * 9u; // halves a row
    uint s = 16u * (q & 1u);
    bool lowq = (q >> 1u) == 0u;
    uint b0 = k0 / 32u;

    if (ASRC == 1u) { // the split's k of a's 16 rows, once: 8 loads in flight a thread
        uint per = nb * 4u, total = 16u * per; // uvec4 a row, all
        for (uint e0 = 0u; e0 < total; e0 += 8u * LOCAL) {
            uvec4 v[8];
            [[unroll]] for (uint u = 0u; u < 8u; u++) {
                uint e = e0 + u * LOCAL + gl_LocalInvocationID.x;
                v[u] = e < total ? a_v[((e / per) * pc.k + k0) / 8u + e % per] : uvec4(0u);
            }
            [[unroll]] for (uint u = 0u; u < 8u; u++) {
                uint e = e0 + u * LOCAL + gl_LocalInvocationID.x;
                if (e < total)
                    ash[(e / per) * AROW + e % per] = v[u];
            }
        }
        barrier();
    }
    if (BSRC == 1u) {
        main_shared(j0, k0, nb, split);
        return;
    }
    const uint RL = 2u * FN; // rows a lane reads: r + 8 i
    bool inside = j0 < pc.n;
    uint qrow[RL], hrow[RL];
    [[unroll]] for (uint i = 0u; i < RL; i++) {
        hrow[i] = (j0 + r + 8u * i) * wrow;
        qrow[i] = (hrow[i] + pc.k / 32u) / 8u; // uvec4: the row's first run
    }
    MC acc[2u * FN];
    [[unroll]] for (uint i = 0u; i < 2u * FN; i++) acc[i] = MC(0.0);
    uvec4 cw[GROUP * RL], nw[GROUP * RL];
    float16_t cd[GROUP * RL], nd[GROUP * RL];
    [[unroll]] for (uint g = 0u; g < GROUP; g++) {
        bool ok = inside && g < nb && PROBE == 0u;
        [[unroll]] for (uint i = 0u; i < RL; i++) {
            cw[g * RL + i] = ok ? w_v[qrow[i] + b0 + g] : uvec4(0x11111111u * (i + 1u));
            cd[g * RL + i] = ok ? w_h[hrow[i] + b0 + g] : float16_t(0.0);
        }
    }
    for (uint it = 0u; it < nb; it += GROUP) {
        if (it + GROUP < nb) {
            [[unroll]] for (uint g = 0u; g < GROUP; g++) {
                uint b = b0 + it + GROUP + g;
                bool ok = inside && it + GROUP + g < nb && PROBE == 0u;
                [[unroll]] for (uint i = 0u; i < RL; i++) {
                    nw[g * RL + i] = ok ? w_v[qrow[i] + b] : uvec4(0x11111111u * (i + 1u));
                    nd[g * RL + i] = ok ? w_h[hrow[i] + b] : float16_t(0.0);
                }
            }
        }
        [[unroll]] for (uint g = 0u; g < GROUP; g++) {
            if (it + g < nb) {
                uint kb = 32u * (it + g); // k within the split
                MA fa0, fa1;
                if (ASRC == 1u) {
                    coopMatLoad(fa0, ash, kb / 8u, AROW, gl_CooperativeMatrixLayoutRowMajor);
                    coopMatLoad(fa1, ash, kb / 8u + 2u, AROW, gl_CooperativeMatrixLayoutRowMajor);
                } else {
                    coopMatLoad(fa0, a_v, (k0 + kb) / 8u, pc.k / 8u, gl_CooperativeMatrixLayoutRowMajor);
                    coopMatLoad(fa1, a_v, (k0 + kb) / 8u + 2u, pc.k / 8u, gl_CooperativeMatrixLayoutRowMajor);
                }
                [[unroll]] for (uint f = 0u; f < FN; f++) {
                    uvec4 wa = cw[g * RL + 2u * f], wb = cw[g * RL + 2u * f + 1u];
                    float16_t da = cd[g * RL + 2u * f], db = cd[g * RL + 2u * f + 1u];
                    uint xa0 = (lowq ? wa.x : wa.y) >> s, xa1 = (lowq ? wa.z : wa.w) >> s;
                    uint xb0 = (lowq ? wb.x : wb.y) >> s, xb1 = (lowq ? wb.z : wb.w) >> s;
                    MB fb0, fb1;
                    f16vec2 p;
                    p = lo_pair(xa0, da); fb0[0] = p.x; fb0[1] = p.y;
                    p = lo_pair(xa1, da); fb0[2] = p.x; fb0[3] = p.y;
                    p = lo_pair(xb0, db); fb0[4] = p.x; fb0[5] = p.y;
                    p = lo_pair(xb1, db); fb0[6] = p.x; fb0[7] = p.y;
                    p = hi_pair(xa0, da); fb1[0] = p.x; fb1[1] = p.y;
                    p = hi_pair(xa1, da); fb1[2] = p.x; fb1[3] = p.y;
                    p = hi_pair(xb0, db); fb1[4] = p.x; fb1[5] = p.y;
                    p = hi_pair(xb1, db); fb1[6] = p.x; fb1[7] = p.y;
                    acc[2u * f] = coopMatMulAdd(fa0, fb0, acc[2u * f]);
                    acc[2u * f + 1u] = coopMatMulAdd(fa1, fb1, acc[2u * f + 1u]);
                }
            }
        }
        [[unroll]] for (uint g = 0u; g < GROUP * RL; g++) { cw[g] = nw[g]; cd[g] = nd[g]; }
    }
    [[unroll]] for (uint f = 0u; f < FN; f++) {
        for (uint i = 0u; i < acc[2u * f].length(); i++) acc[2u * f][i] += acc[2u * f + 1u][i];
        if (j0 + 16u * f < pc.n)
            coopMatStore(acc[2u * f], o, split * 16u * pc.n + j0 + 16u * f, pc.n, gl_CooperativeMatrixLayoutRowMajor);
    }
}
