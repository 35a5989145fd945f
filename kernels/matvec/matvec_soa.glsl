// matvec_soa.glsl: nu_op_matvec and nu_op_matvec_fused (nuvec/ops.h) against Q4_0_SOA weights
// (nuvec/tensor.h: each row's K / 32 f16 scales, then its K / 32 runs of 16 quant bytes) and
// against Q4_K, Q5_K and Q6_K weights as GGUF stores them (WFMT 1 to 3: below) and Q6_K_SOA
// (WFMT 4), built as
// matvec_soa.comp (integer dot products against x rounded to 8 bits, SOA_DOT 1) and
// matvec_soa_float.comp (F32 arithmetic on the exact values, for devices without them);
// src/ops/matvec_soa.c chooses and records them.
//
// Why: GGUF's Q4_0 blocks are 18 bytes, so the 4-byte loads of a subgroup over them straddle cache
// lines (matvec_dot.comp reads Q4_0 at 28-53% of the H200's copy bandwidth). Here lane l of a
// subgroup reads run b = l, l + lanes, .. of a row: one aligned 16-byte load a lane, a subgroup's
// loads 16 x lanes consecutive bytes, and the lanes' 2-byte scales consecutive too.
//
// Q4_K (WFMT 1) needs no repacking for that: its 144-byte super-blocks are 16-byte aligned,
// a 16-byte header (f16 d, f16 dmin, the 12 bytes of eight 6-bit scales and mins) and eight
// 16-byte runs of quants. Run b of a row (b = 0..K/32-1, as for Q4_0_SOA) is run r = b % 8 of
// super-block b / 8: its bytes are qs[16r..16r+15], whose low nibbles are elements 16h..16h+15
// (h = r % 2) of sub-block a = 2 (r / 2) and whose high nibbles are the same elements of
// sub-block a + 1. Lane l reads run l (and its super-block's header: the 8 lanes of a
// super-block read the same 16 bytes), so a subgroup's loads are again consecutive bytes, the
// headers among them. Each sub-block s has D = d * scale_s and M = dmin * min_s, and
//   run = D_a (dx_a dot(lo, xq_a,h)) - M_a (dx_a sum xq_a,h) + the same for a + 1 with the high
// nibbles, xq_a,h being the 8-bit x of half h of x's block a: phase 1 stores them by run (xlo,
// xhi, xk below).
// Q5_K (WFMT 2) is Q4_K with a fifth bit a quant: 176-byte super-blocks (11 x 16), the header,
// qh[32] (16 bytes a half h: element 64c + 16h + i's fifth bit is bit 2c of byte i, element
// 64c + 32 + 16h + i's bit 2c + 1), then Q4_K's eight runs. A lane also reads its run's qh half
// (shared by the 4 lanes of that half) and ors the two bits into its nibbles.
// Q6_K (WFMT 3): 210-byte super-blocks, ql[128] (low 4 bits), qh[64] (high 2 bits), int8
// scales[16] (one per 16 elements), f16 d; element 128n + 32k + l (half n, quarter k, l < 32) is
// d * scales[8n + 2k + l / 16] * (q - 32), q its nibble of ql[64n + 32 (k % 2) + l] (the low one
// for k < 2) under bits 2k, 2k + 1 of qh[32n + l]. Its runs are ql's eight 16-byte rows: run
// r = 4n + 2j + h (j = 0, 1; h = 0, 1) has at byte i the low bits of element 128n + 32j + 16h + i
// (low nibble, scale 8n + 2j + h) and of element 64 further (high nibble, scale 8n + 2j + 4 + h),
// the high bits of both in byte i of qh's 16-byte chunk 2n + h (shared with run r ^ 2): bits 2j,
// 2j + 1 and 2j + 4, 2j + 5. So lane l again reads run l of the row (8 lanes a super-block, each
// its 16 ql bytes, its qh chunk, the two halves holding its scales and d), and
//   run = D_lo (dx_lo dot(q_lo, xq_lo) - 32 dx_lo sum xq_lo) + the same for hi, D = d * scale
// (a Q4_K run with M = 32 D: xk as Q4_K's), x's block j of a super-block (half h) under the low
// nibbles (j & 2 clear) or high ones of run 4 (j / 4) + 2 (j % 2) + h. 210 = 2 mod 16 (and mod 4),
// so a super-block's bytes start at any even byte (rows of k = 11008, 43 super-blocks, too): a run
// and a qh chunk are the five 4-byte words that cover them, shifted by a half where they start at
// 2 mod 4 (LOAD16U: the same code for either parity, which differs between a subgroup's
// super-blocks). A subgroup's loads still cover consecutive bytes (a lane's 20, 16 on from its
// neighbour's), and the scale and d halves of a super-block's 8 lanes lie in its last 18 bytes.
// The float path: D_lo sum (q_lo - 32) v_lo + the same for hi. H200, 1 row of x (2026-12-02,
// F32 x): 15.0 us at 4096 x 11008 (2.47 TB/s of weights; 2 runs in flight, the default, was best,
// and so were these loads, against two aligned uvec4 a run shifted into place, 15.8 us, or 8
// halves, 19.8) against 38.7 on matvec_dot.comp; Q4_K's runs there: 14.1 us (1.79 TB/s).
// Q6_K_SOA (WFMT 4): the same super-blocks regrouped by 8 (nuvec/tensor.h: 8 x 208 bytes of ql,
// qh and scales, then the 8 d), so a super-block's runs and qh chunks start 16-byte aligned: one
// uvec4 load each (WVEC), where Q6_K takes five words (H100, 2026-12-06: what the aligned loads
// gain was 8-11% at 7B shapes). Lane l reads run l again; a row's super-blocks are found from its
// first one's index in the tensor (rows are whole: row x K / 256).
//
// Work:
// - Phase 1 (the dot path; the float path only where there is a norm): the workgroup reads x's M
//   rows once. With norm_weight (NORM) each thread sums x^2 of its elements (the row's RMS: s =
//   1 / sqrt(mean + eps), reduced with subgroupAdd and shared memory) and what is quantized is
//   x * g, so s is a factor of every dot, applied once at the end. Quantization is
//   matvec_dot.comp's rule (eight threads a block, four elements each): dx = max|v| / 127,
//   q = roundEven(v * 127 / max|v|) clamped to -127..127; stored as xlo (elements 0..15 of the
//   block: the low nibbles' partners) and xhi (16..31), a uvec4 each, and (dx, dx * sum q).
// - With PREFETCH each lane issues the loads of its first chunk of weights (below) before phase 1,
//   so that reading and quantizing x, and the barrier after it, overlap their latency.
// - Phase 2: SPLIT subgroups compute ROWS consecutive rows at a time (with glu_up, GLU, the gate
//   and the up row of each: one workgroup has both dots of a unit), each lane UNROLL runs of each
//   row (and weight) in flight before using any. A Q4_0 run of 16 bytes as four words: word i's
//   low nibbles are elements 4i..4i+3, its high nibbles 16+4i..16+4i+3, so
//   dot = sum_i dot4(w_i & 0x0f0f0f0f, xlo_i) + dot4((w_i >> 4) & 0x0f0f0f0f, xhi_i) and the run
//   adds d * (dx * dot - 8 * dx * sum q).
//   The float path: d * sum_j (q_j - 8) * v_j, v = x (* g), read from x's binding.
// - Epilogue: subgroupAdd (SPLIT > 1: then through shared memory), times s (NORM), plus bias[n]
//   (BIAS), act(gate) * up (GLU: SiLU, or GELU's tanh form with GELU), plus residual (RESID: read
//   by the invocation that writes the element, so it may be dst).
//
// Specialisation constants (src/ops/matvec_soa.c; desc->tune and NUVEC_MATVEC_SOA set the knobs):
//   0 XDT, 1 DDT    x's and dst's dtypes (ops.glsl codes)
//   2 M             rows of x (1..8)
//   3 LOCAL         threads a workgroup (local_size_x), a multiple of the subgroup size
//   4 ROWS          weight rows a subgroup computes at a time (1..8)
//   5 UNROLL        runs a lane has in flight per row and weight (1..8)
//   6 FLAGS         bit 0: weight offsets 16-byte aligned (uvec4 loads; else 8 half loads a run;
//                   Q6_K: unused, 0),
//                   1: NORM, 2: GLU, 3: RESID, 4: x's vector path (rows 16-byte aligned, stride 1),
//                   5: PREFETCH (the first chunk's weight loads issued before phase 1),
//                   6: GELU (the GLU's activation; else SiLU), 7: BIAS,
//                   8: PAIRS (Q4_K, Q5_K: a lane's unit is two runs sharing their scales),
//                   9: POST (the post-norm into the stream, by the last workgroup: below),
//                   10: CHAIN (the next row group's first chunk of weights loaded before this
//                   one's sums are reduced and stored: no drain of the loads between row groups)
//   7 XB            blocks of x shared memory holds a row (dot path; >= K / 32, rounded up to 64)
//   8 SPLIT         subgroups sharing a row group (a power of two dividing the subgroups)
//   9 RDT, 10 GDT   residual's and norm_weight's dtypes
//  11 BDT           bias's dtype
//  12 WFMT          the weights' format: 0 Q4_0_SOA, 1 Q4_K, 2 Q5_K, 3 Q6_K (GGUF's blocks, K a
//                   multiple of 256), 4 Q6_K_SOA
//  13 PDT           POST: the post-norm weight's dtype
//  14 PROBE         diagnostics (NUVEC_MATVEC_SOA probe=, wrong results): bit 0 skips phase 1 (x
//                   not read), bit 1 reads every row group's weights from row 0 (caches, not memory),
//                   bit 2 (Q6_K) reads each ql run and qh chunk as the one aligned uvec4 at or below
//                   its half, as a 16-byte-aligned layout would (LOAD16U)
//  15 XP            phase 1's elements of x a thread (4 or 8: TPB = 32 / XP threads a block)
// Bindings: 0 dst, 1 weight (the gate with GLU), 2 x, 3 up, 4 norm weight, 5 residual, 6 bias
// (unused ones are bound to x), and with POST: 7 the counter, 8 the post-norm's weight, 9 the
// stream, 10 dst again (its coherent view); the placeholders' empty ranges otherwise. Push: below.
//
// POST (nu_matvec_desc.post_norm; Gemma's sandwich norms): after its rows, each workgroup arrives
// at a counter (last_arrival.glsl: dst's stores through the coherent view), and the last one adds
// rms_norm(dst[m, :]) * post weight into stream[m, :] for each of x's M rows (the sum of squares
// over the workgroup, nu_op_rms_norm's 1 / sqrt(mean + eps)) and puts the counter back to zero.
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#include "ops.glsl"
#include "quant.glsl" // nu_q_k4_scale_min (NU_QB undefined: the common part only)
#include "elementwise/activation.glsl"

layout(constant_id = 0) const uint XDT = NU_F32;
layout(constant_id = 1) const uint DDT = NU_F32;
layout(constant_id = 2) const uint M = 1u;
layout(constant_id = 4) const uint ROWS = 1u;
layout(constant_id = 5) const uint UNROLL = 4u;
layout(constant_id = 6) const uint FLAGS = 0u;
layout(constant_id = 7) const uint XB = 64u;
layout(constant_id = 8) const uint SPLIT = 1u;
layout(constant_id = 9) const uint RDT = NU_F32;
layout(constant_id = 10) const uint GDT = NU_F32;
layout(constant_id = 11) const uint BDT = NU_F32;
layout(constant_id = 12) const uint WFMT = 0u;
layout(constant_id = 13) const uint PDT = NU_F32; // POST: the post-norm weight's dtype
layout(constant_id = 14) const uint PROBE = 0u;
layout(constant_id = 15) const uint XP = 8u; // phase 1's elements of x a thread: 4 or 8
layout(local_size_x = 256, local_size_x_id = 3) in; // LOCAL, constant 3
const uint LOCAL = gl_WorkGroupSize.x;

const bool WVEC = (FLAGS & 1u) != 0u;
const bool NORM = (FLAGS & 2u) != 0u;
const bool GLU = (FLAGS & 4u) != 0u;
const bool RESID = (FLAGS & 8u) != 0u;
const bool XVEC = (FLAGS & 16u) != 0u;
const bool PREFETCH = (FLAGS & 32u) != 0u;
const bool GELU = (FLAGS & 64u) != 0u;
const bool BIAS = (FLAGS & 128u) != 0u;
const bool POST = (FLAGS & 512u) != 0u;
const bool CHAIN = (FLAGS & 1024u) != 0u;
// PAIRS (Q4_K, Q5_K): a lane's unit is the two runs 2u, 2u + 1 of a super-block (32 consecutive
// bytes), which share their sub-blocks a, a + 1 and so their scales: the header is read and
// decoded once for both, and the dot path adds the two runs' integer dots before scaling them
// (x's sums by pair of runs: xk). Else a unit is one run.
// (The host sets the flag for those formats only.)
const bool PAIRS = (FLAGS & 256u) != 0u;
const uint RUNS = 1u + ((FLAGS >> 8u) & 1u); // runs a unit
const bool K5 = WFMT == 2u;             // Q5_K
const bool K6S = WFMT == 4u;            // Q6_K_SOA
const bool K6 = WFMT == 3u || K6S;      // Q6_K's values (either layout)
const bool QK = WFMT == 1u || K5 || K6; // a K format: Q4_K, Q5_K or Q6_K (x stored by run, xk)
const bool QE = K5 || K6;               // runs with high bits apart (re: Q5_K's qh half, Q6_K's qh chunk)
const uint SB_HALVES = K6 ? 105u : K5 ? 88u : 72u; // a super-block
const uint QS_HALF = K6 ? 0u : K5 ? 24u : 8u;      // its first run
const uint NW = GLU ? 2u : 1u; // weights read a row
const uint RM = ROWS * M;

#if SOA_DOT
// x's 8-bit values in the order of the runs that take them, so that the lanes' reads (run b at
// m * XB + b) are consecutive 16 bytes (no bank conflicts): xlo holds the low nibbles' partners,
// xhi the high ones'. Q4_0_SOA: elements 0..15 and 16..31 of block b. Q4_K: half h = b % 2 of
// blocks b - h and b - h + 1 (the run's sub-blocks a and a + 1); Q6_K: half h of blocks c and
// c + 2 of its super-block, c = 4 (r / 4) + (r / 2) % 2, r = b % 8.
shared uvec4 xlo[M * XB];
shared uvec4 xhi[M * XB];
shared vec2 xds[QK ? 1u : M * XB]; // Q4_0_SOA: block b's (dx, dx * sum q)
shared vec4 xk[QK ? M * XB : 1u];  // K formats: run b's (dx_a, dx_a+1, dx_a * sum q_a,h, dx_a+1 * sum q_a+1,h);
                                   // PAIRS: unit u's (dx_a, dx_a+1, dx_a * sum q_a, dx_a+1 * sum q_a+1) at u
#endif
shared float red[SPLIT > 1u ? (LOCAL / 8u) * RM * NW : 1u]; // the SPLIT subgroups' partial sums
shared float nsum[NORM ? (LOCAL / 8u) * M : 1u];            // the subgroups' sums of x^2
shared float srow[M];                                        // each row's 1 / RMS
shared float nsum_post[POST ? LOCAL / 8u : 1u], srow_post;   // POST: the subgroups' sums of dst^2, a row's 1 / RMS

NU_TENSOR(writeonly, 0, dst)
NU_TENSOR(readonly, 1, w)
NU_TENSOR(readonly, 2, x)
NU_TENSOR(readonly, 3, up)
NU_TENSOR(readonly, 4, g)
NU_TENSOR(readonly, 5, res)
NU_TENSOR(readonly, 6, bias)
#define NU_ARRIVAL_BINDING 7
#include "last_arrival.glsl"
NU_TENSOR(readonly, 8, pw)
layout(std430, binding = 9) buffer PostStream { float stream_f[]; };
layout(std430, binding = 10) coherent buffer PostDst { float dstc_f[]; };
layout(push_constant) uniform Push {
    uint n, k;             // N and K
    uint first_w, w_row;   // weight's first half in its binding, its row stride in halves (K / 32 * 9)
    uint first_up;         // up's (same layout)
    uint first_x, x_row, x_col;
    uint first_dst;        // dst is contiguous [M, N]
    uint first_g, g_col;   // norm weight [K]
    uint first_r, r_row, r_col; // residual [M, N]
    float eps;
    uint first_bias, bias_col;  // bias [N]
    uint first_pw, pw_col;      // POST: the post-norm's weight [N]
    uint first_s;               // POST: stream [M, N], contiguous
    float post_eps;
} pc;

// Four elements of x's row m from element e (a multiple of 4), times g where NORM (and the sum
// of the squares of x's, before g, added to *ss).
void x_load4(uint m, uint e, out float v[4], inout float ss)
{
    uint i = pc.first_x + m * pc.x_row + e;
    if (XVEC) { // 16-byte aligned rows: one 16-byte (F32) or 8-byte (F16, BF16) load
        if (XDT == NU_F32)
            nu_unpack4(XDT, x_v[i / 4u], v);
        else
            nu_unpack4(XDT, uvec4(x_v2[i / 4u], 0u, 0u), v);
    } else {
        for (uint j = 0u; j < 4u; j++)
            v[j] = NU_LOAD(x, XDT, pc.first_x + m * pc.x_row + (e + j) * pc.x_col);
    }
    if (NORM)
        for (uint j = 0u; j < 4u; j++) {
            ss += v[j] * v[j];
            v[j] *= NU_LOAD(g, GDT, pc.first_g + (e + j) * pc.g_col);
        }
}

// Phase 1. TPB = 32 / XP consecutive threads take a block (thread t elements XP t .. XP t + XP - 1:
// XP 8 by default, so a block's maximum and sums take 4 shuffles, not 6 for every 4 elements); on
// the float path only the sums of squares are wanted. The sums of x^2 per row go to srow as 1 / RMS.
const uint TPB = 32u / XP;
void read_x()
{
    uint blocks = pc.k / 32u, pieces = M * blocks * TPB;
    float ss[M];
    for (uint m = 0u; m < M; m++)
        ss[m] = 0.0;
    if (SOA_DOT == 0 && !NORM)
        return;
    for (uint p0 = 0u; p0 < pieces; p0 += LOCAL) { // uniform bounds: a block's TPB threads are all live or not
        uint p = p0 + gl_LocalInvocationID.x;
        bool live = p < pieces;
        uint blk = p / TPB, t = p % TPB;
        uint m = M == 1u ? 0u : min(blk / blocks, M - 1u), b = M == 1u ? blk : blk % blocks;
        float v[XP];
        float s2 = 0.0;
        for (uint j = 0u; j < XP; j += 4u) {
            float v4[4] = float[4](0.0, 0.0, 0.0, 0.0);
            if (live)
                x_load4(m, b * 32u + XP * t + j, v4, s2);
            v[j] = v4[0]; v[j + 1u] = v4[1]; v[j + 2u] = v4[2]; v[j + 3u] = v4[3];
        }
        ss[m] += s2;
#if SOA_DOT
        float amax = 0.0;
        for (uint j = 0u; j < XP; j++)
            amax = max(amax, abs(v[j]));
        for (uint o = 1u; o < TPB; o *= 2u)
            amax = max(amax, subgroupShuffleXor(amax, o));
        float dx = amax / 127.0, inv = amax > 0.0 ? 127.0 / amax : 0.0;
        uint words[XP / 4u];
        int sum = 0;
        for (uint w4 = 0u; w4 < XP / 4u; w4++) {
            uint word = 0u;
            for (uint j = 0u; j < 4u; j++) // |v| <= max|v|: |v * inv| < 127.5, so q needs no clamp
                word |= (uint(int(roundEven(v[4u * w4 + j] * inv))) & 0xffu) << (8u * j);
            words[w4] = word;
            sum += dotPacked4x8EXT(int(word), 0x01010101);
        }
        for (uint o = 1u; o < TPB / 2u; o *= 2u)
            sum += subgroupShuffleXor(sum, o); // the half's sum (threads 0 .. TPB / 2 - 1: elements 0..15)
        int half_sum = sum;
        sum += subgroupShuffleXor(sum, TPB / 2u);
        if (live) {
            uint i = m * XB + b, h = t / (TPB / 2u), w0 = (t % (TPB / 2u)) * (XP / 4u); // words w0.. of half h
            bool first_of_half = t % (TPB / 2u) == 0u;
            if (QK) { // block b's half h: a low-nibble partner of run b + h (b even) or a high one of b - 1 + h
                // (Q6_K: block j = b % 8 of a super-block, of run 4 (j / 4) + 2 (j % 2) + h, high where j & 2)
                uint run = m * XB + (K6 ? (b & ~7u) + (b & 4u) + 2u * (b & 1u) : b & ~1u) + h;
                uint odd = K6 ? (b >> 1u) & 1u : b & 1u;
                for (uint w4 = 0u; w4 < XP / 4u; w4++)
                    if (odd == 0u)
                        xlo[run][w0 + w4] = words[w4];
                    else
                        xhi[run][w0 + w4] = words[w4];
                if (PAIRS && t == 0u) { // unit b / 2: both halves of blocks a, a + 1
                    xk[m * XB + (b >> 1u)][odd] = dx;
                    xk[m * XB + (b >> 1u)][2u + odd] = dx * float(sum);
                } else if (!PAIRS && first_of_half) {
                    xk[run][odd] = dx;
                    xk[run][2u + odd] = dx * float(half_sum);
                }
            } else {
                for (uint w4 = 0u; w4 < XP / 4u; w4++)
                    if (h == 0u)
                        xlo[i][w0 + w4] = words[w4];
                    else
                        xhi[i][w0 + w4] = words[w4];
                if (t == 0u)
                    xds[i] = vec2(dx, dx * float(sum));
            }
        }
#endif
    }
    if (NORM) {
        for (uint m = 0u; m < M; m++) {
            float s = subgroupAdd(ss[m]);
            if (gl_SubgroupInvocationID == 0u)
                nsum[gl_SubgroupID * M + m] = s;
        }
        barrier();
        if (gl_LocalInvocationID.x < M) {
            uint m = gl_LocalInvocationID.x;
            float s = 0.0;
            for (uint i = 0u; i < gl_NumSubgroups; i++)
                s += nsum[i * M + m];
            srow[m] = 1.0 / sqrt(s / float(pc.k) + pc.eps);
        }
    }
}

// The 16 bytes at half h of a binding NAME (16-byte aligned where WVEC).
#define LOAD16(NAME, h, q)                                                                          \
    if (WVEC) {                                                                                     \
        q = NAME##_v[(h) / 8u];                                                                     \
    } else {                                                                                        \
        q = uvec4(uint(NAME##_h[h]) | (uint(NAME##_h[(h) + 1u]) << 16),                             \
                  uint(NAME##_h[(h) + 2u]) | (uint(NAME##_h[(h) + 3u]) << 16),                      \
                  uint(NAME##_h[(h) + 4u]) | (uint(NAME##_h[(h) + 5u]) << 16),                      \
                  uint(NAME##_h[(h) + 6u]) | (uint(NAME##_h[(h) + 7u]) << 16));                     \
    }
// The 16 bytes at half h of a binding NAME, h any half (Q6_K's runs, 2-byte aligned): the five
// aligned words that cover them, shifted by a half where h is odd (always five loads, so that
// lanes of either parity run the same code; the fifth word is still in the super-block).
#define LOAD16U(NAME, h, q)                                                                         \
    if ((PROBE & 4u) != 0u) {                                                                       \
        q = NAME##_v[(h) >> 3u];                                                                    \
    } else {                                                                                        \
        uint i_ = (h) >> 1u;                                                                        \
        uvec4 a_ = uvec4(NAME##_w[i_], NAME##_w[i_ + 1u], NAME##_w[i_ + 2u], NAME##_w[i_ + 3u]);  \
        uint t_ = NAME##_w[i_ + 4u];                                                                \
        q = ((h) & 1u) != 0u ? (a_ >> 16u) | (uvec4(a_.yzw, t_) << 16u) : a_;                     \
    }
// Run b (16 bytes) of a row (of a binding NAME whose view starts at half `first`; `row` the row's
// first half from there, or Q6_K_SOA's first super-block index: ROW_GROUP), and its scales:
// Q4_0_SOA's f16 in d.x, a K format's super-block header in d (and Q5_K's qh half in e).
// Q6_K: its ql run in q, its qh chunk in e, and d's half, then the halves holding its low and
// high nibbles' scales, in d.xyz.
#define LOAD_RUN(NAME, first, row, blocks, b, q, d, e)                                              \
    {                                                                                               \
        uint base_ = (first) + (row);                                                               \
        if (K6S) {                                                                                  \
            uvec2 at_ = nu_q6s_halves(first, (row) + ((b) >> 3u));                                  \
            uint r_ = (b) & 7u;                                                                     \
            uint hq_ = at_.x + 8u * r_, he_ = at_.x + 64u + 16u * (r_ >> 2u) + 8u * (r_ & 1u);      \
            LOAD16(NAME, hq_, q)                                                                    \
            LOAD16(NAME, he_, e)                                                                    \
            uint sc_ = at_.x + 96u + 4u * (r_ >> 2u) + ((r_ >> 1u) & 1u);                           \
            d = uvec4(uint(NAME##_h[at_.y]), uint(NAME##_h[sc_]), uint(NAME##_h[sc_ + 2u]), 0u);     \
        } else if (K6) {                                                                            \
            uint s_ = base_ + ((b) >> 3u) * SB_HALVES, r_ = (b) & 7u;                               \
            uint hq_ = s_ + 8u * r_, he_ = s_ + 64u + 16u * (r_ >> 2u) + 8u * (r_ & 1u);            \
            LOAD16U(NAME, hq_, q)                                                                   \
            LOAD16U(NAME, he_, e)                                                                   \
            uint sc_ = s_ + 96u + 4u * (r_ >> 2u) + ((r_ >> 1u) & 1u);                              \
            d = uvec4(uint(NAME##_h[s_ + 104u]), uint(NAME##_h[sc_]), uint(NAME##_h[sc_ + 2u]), 0u); \
        } else if (QK) {                                                                            \
            uint s_ = base_ + ((b) >> 3u) * SB_HALVES;                                              \
            uint h_ = s_ + QS_HALF + ((b) & 7u) * 8u;                                               \
            LOAD16(NAME, h_, q)                                                                     \
            LOAD16(NAME, s_, d)                                                                     \
            if (K5) {                                                                               \
                uint e_ = s_ + 8u + ((b) & 1u) * 8u;                                                \
                LOAD16(NAME, e_, e)                                                                 \
            }                                                                                       \
        } else {                                                                                    \
            uint h_ = base_ + (blocks) + (b) * 8u;                                                  \
            LOAD16(NAME, h_, q)                                                                     \
            d = uvec4(uint(NAME##_h[base_ + (b)]), 0u, 0u, 0u);                                     \
        }                                                                                           \
    }

// PAIRS: unit u (runs 2u, 2u + 1: 32 consecutive bytes) of the row whose first half is
// first + row, q0 and q1, its super-block header in d once, and Q5_K's two qh halves in e0, e1.
#define LOAD_PAIR(NAME, first, row, u, q0, q1, d, e0, e1)                                           \
    {                                                                                               \
        uint s_ = (first) + (row) + ((u) >> 2u) * SB_HALVES;                                        \
        uint h_ = s_ + QS_HALF + ((u) & 3u) * 16u;                                                  \
        LOAD16(NAME, h_, q0)                                                                        \
        LOAD16(NAME, h_ + 8u, q1)                                                                   \
        LOAD16(NAME, s_, d)                                                                         \
        if (K5) {                                                                                   \
            LOAD16(NAME, s_ + 8u, e0)                                                               \
            LOAD16(NAME, s_ + 16u, e1)                                                              \
        }                                                                                           \
    }

// The quants of run b under its low nibbles (lo) and high ones (hi), a byte each: Q5_K's fifth
// bits (e, its qh half) or'ed in, or Q6_K's fifth and sixth (e, its qh chunk: bits 2j, 2j + 1
// the low nibbles', 2j + 4, 2j + 5 the high ones', j = (b / 2) % 2).
void run_quants(uvec4 q, uvec4 e, uint b, out uvec4 lo, out uvec4 hi)
{
    lo = q & 0x0f0f0f0fu;
    hi = (q >> 4u) & 0x0f0f0f0fu;
    if (K6) {
        uint s = 2u * ((b >> 1u) & 1u);
        lo |= ((e >> s) & 0x03030303u) << 4u;
        hi |= (e >> s) & 0x30303030u;
    }
    if (K5) {
        uint c = (b & 7u) >> 1u;
        lo |= ((e >> (2u * c)) & 0x01010101u) << 4u;
        hi |= ((e >> (2u * c + 1u)) & 0x01010101u) << 4u;
    }
}

// A K format: the (D, M) of sub-blocks a and a + 1 (a even) from the super-block header hd.
void k4_scales(uvec4 hd, uint a, out vec2 da, out vec2 db)
{
    vec2 d = vec2(nu_q_f16(hd.x & 0xffffu), nu_q_f16(hd.x >> 16u)); // subnormal halves exact
    uvec2 sa = nu_q_k4_scale_min(hd.yzw, a), sb = nu_q_k4_scale_min(hd.yzw, a + 1u);
    da = d * vec2(sa);
    db = d * vec2(sb);
}
// Q6_K: D = d * scale of run b's low nibbles (da) and high ones (db) from LOAD_RUN's d (the scale
// is byte b % 2 of its half), and M = 32 D (the quants' offset, taken as a K format's minimum).
void k6_scales(uvec4 hd, uint b, out vec2 da, out vec2 db)
{
    float d = nu_q_f16(hd.x);
    int o = int(8u * (b & 1u));
    precise float sa = d * float(bitfieldExtract(int(hd.y), o, 8));
    precise float sb = d * float(bitfieldExtract(int(hd.z), o, 8));
    da = vec2(sa, 32.0 * sa);
    db = vec2(sb, 32.0 * sb);
}

#if SOA_DOT
// Run q (scales d, Q5_K's or Q6_K's high bits e) of run b against x's row m.
float run_dot(uvec4 q, uvec4 d, uvec4 e, uint b, uint m)
{
    if (QK) {
        uint i = m * XB + b;
        uvec4 xa = xlo[i], xb = xhi[i], qa, qb;
        run_quants(q, e, b, qa, qb);
        int dota = 0, dotb = 0;
        for (uint j = 0u; j < 4u; j++) {
            dota += dotPacked4x8EXT(int(qa[j]), int(xa[j]));
            dotb += dotPacked4x8EXT(int(qb[j]), int(xb[j]));
        }
        vec2 da, db;
        if (K6)
            k6_scales(d, b, da, db);
        else
            k4_scales(d, b & 6u, da, db);
        vec4 xs = xk[i];
        return da.x * (xs.x * float(dota)) - da.y * xs.z + db.x * (xs.y * float(dotb)) - db.y * xs.w;
    }
    uint i = m * XB + b;
    uvec4 lo = xlo[i], hi = xhi[i];
    int dot = 0;
    for (uint j = 0u; j < 4u; j++)
        dot += dotPacked4x8EXT(int(q[j] & 0x0f0f0f0fu), int(lo[j])) + dotPacked4x8EXT(int((q[j] >> 4u) & 0x0f0f0f0fu), int(hi[j]));
    vec2 ds = xds[i];
    return nu_f16_to_f32(d.x) * (ds.x * float(dot) - 8.0 * ds.y);
}
// PAIRS: unit u (runs q0, q1, header d, Q5_K's qh halves e0, e1) against x's row m: the two
// runs' integer dots added, then scaled once (the sums of x's blocks a, a + 1 in xk[u]).
float pair_dot(uvec4 q0, uvec4 q1, uvec4 d, uvec4 e0, uvec4 e1, uint u, uint m)
{
    uint b = 2u * u, i = m * XB + b;
    uvec4 qa0, qb0, qa1, qb1;
    run_quants(q0, e0, b, qa0, qb0);
    run_quants(q1, e1, b + 1u, qa1, qb1);
    uvec4 xa0 = xlo[i], xb0 = xhi[i], xa1 = xlo[i + 1u], xb1 = xhi[i + 1u];
    int dota = 0, dotb = 0;
    for (uint j = 0u; j < 4u; j++) {
        dota += dotPacked4x8EXT(int(qa0[j]), int(xa0[j])) + dotPacked4x8EXT(int(qa1[j]), int(xa1[j]));
        dotb += dotPacked4x8EXT(int(qb0[j]), int(xb0[j])) + dotPacked4x8EXT(int(qb1[j]), int(xb1[j]));
    }
    vec2 da, db;
    k4_scales(d, b & 6u, da, db);
    vec4 xs = xk[m * XB + u];
    return da.x * (xs.x * float(dota)) - da.y * xs.z + db.x * (xs.y * float(dotb)) - db.y * xs.w;
}
#else
// Run q (scales d, Q5_K's or Q6_K's high bits e) of run b against v, the 32 elements of x (times
// g) its quants multiply: the low nibbles' 16 in v[0..15], the high ones' in v[16..31].
float run_dot_f(uvec4 q, uvec4 d, uvec4 e, uint b, float v[32])
{
    float sa = 0.0, sb = 0.0, va = 0.0, vb = 0.0, off = K6 ? 32.0 : QK ? 0.0 : 8.0; // q - 8, q - 32; Q4_K, Q5_K: q, and M apart
    uvec4 qa, qb;
    run_quants(q, e, b, qa, qb);
    for (uint j = 0u; j < 4u; j++)
        for (uint c = 0u; c < 4u; c++) {
            float lo = v[4u * j + c], hi = v[16u + 4u * j + c];
            sa = fma(float((qa[j] >> (8u * c)) & 0xffu) - off, lo, sa);
            sb = fma(float((qb[j] >> (8u * c)) & 0xffu) - off, hi, sb);
            va += lo;
            vb += hi;
        }
    if (K6) {
        vec2 da, db;
        k6_scales(d, b, da, db);
        return da.x * sa + db.x * sb;
    }
    if (QK) {
        vec2 da, db;
        k4_scales(d, b & 6u, da, db);
        return da.x * sa - da.y * va + db.x * sb - db.y * vb;
    }
    return nu_f16_to_f32(d.x) * (sa + sb);
}
#endif

// The units of chunk u0 (UNROLL units a lane, of each of the ROWS rows at base[] and each weight)
// into rq (a unit's runs at RUNS o + i) / rd / re.
#define LOAD_CHUNK(u0)                                                                              \
    for (uint t = 0u; t < UNROLL; t++) {                                                            \
        uint u = (u0) + t * step;                                                                   \
        if (u < units)                                                                              \
            for (uint r = 0u; r < ROWS; r++)                                                        \
                for (uint wi = 0u; wi < NW; wi++) {                                                 \
                    uint o = (t * ROWS + r) * NW + wi, bs = wi == 0u ? pc.first_w : pc.first_up;   \
                    if (PAIRS) {                                                                    \
                        if (wi == 0u)                                                               \
                            LOAD_PAIR(w, bs, base[r], u, rq[2u * o], rq[2u * o + 1u], rd[o],        \
                                      re[K5 ? 2u * o : 0u], re[K5 ? 2u * o + 1u : 0u])              \
                        else                                                                        \
                            LOAD_PAIR(up, bs, base[r], u, rq[2u * o], rq[2u * o + 1u], rd[o],       \
                                      re[K5 ? 2u * o : 0u], re[K5 ? 2u * o + 1u : 0u])              \
                    } else if (wi == 0u) {                                                          \
                        LOAD_RUN(w, bs, base[r], blocks, u, rq[o], rd[o], re[QE ? o : 0u])          \
                    } else {                                                                        \
                        LOAD_RUN(up, bs, base[r], blocks, u, rq[o], rd[o], re[QE ? o : 0u])         \
                    }                                                                               \
                }                                                                                   \
    }

// A batch's row group: its first row n0 and the rows' first halves from the view's first (Q6_K_SOA:
// their first super-blocks' indices; rows past N repeat the last, not stored).
#define ROW_GROUP(bt)                                                                               \
    gr = (bt) * slots + slot;                                                                       \
    n0 = min(gr, groups - 1u) * ROWS;                                                               \
    for (uint r = 0u; r < ROWS; r++)                                                                \
        base[r] = (PROBE & 2u) != 0u ? 0u : min(n0 + r, pc.n - 1u) * (K6S ? pc.k / 256u : pc.w_row);

// POST: every workgroup arrives; the last adds each row's post-norm of dst into the stream (see
// the header). Called by every invocation (uniform control flow: it has barriers).
void post_norm_add()
{
    uint tid = gl_LocalInvocationID.x;
    if (!nu_last_arrival(0u, gl_NumWorkGroups.x))
        return; // uniform: the workgroup's answer
    for (uint m = 0u; m < M; m++) {
        float ss = 0.0;
        for (uint i = tid; i < pc.n; i += LOCAL) {
            float v = dstc_f[pc.first_dst + m * pc.n + i];
            ss += v * v;
        }
        float s = subgroupAdd(ss);
        if (gl_SubgroupInvocationID == 0u)
            nsum_post[gl_SubgroupID] = s;
        barrier();
        if (tid == 0u) {
            float tot = 0.0;
            for (uint i = 0u; i < gl_NumSubgroups; i++)
                tot += nsum_post[i];
            srow_post = inversesqrt(tot / float(pc.n) + pc.post_eps); // nu_op_rms_norm's
        }
        barrier();
        float rs = srow_post;
        for (uint i = tid; i < pc.n; i += LOCAL) {
            float v = dstc_f[pc.first_dst + m * pc.n + i];
            precise float z = v * rs * NU_LOAD(pw, PDT, pc.first_pw + i * pc.pw_col);
            stream_f[pc.first_s + m * pc.n + i] += z;
        }
        barrier(); // nsum_post and srow_post are the next row's
    }
}

void main()
{
    uint blocks = pc.k / 32u, units = blocks / RUNS;
    uint lane = gl_SubgroupInvocationID, sg_size = gl_SubgroupSize;
    uint slots = gl_NumSubgroups / SPLIT, slot = gl_SubgroupID / SPLIT, part = gl_SubgroupID % SPLIT;
    uint groups = (pc.n + ROWS - 1u) / ROWS;
    uint batches = (groups + slots - 1u) / slots;
    uint step = SPLIT * sg_size; // units between a lane's consecutive ones
    uint gr, n0, base[ROWS];
    uvec4 rq[UNROLL * ROWS * NW * RUNS];
    uvec4 rd[UNROLL * ROWS * NW];
    uvec4 re[QE ? UNROLL * ROWS * NW * RUNS : 1u]; // Q5_K's qh halves, Q6_K's qh chunks
    // PREFETCH: the first chunk's weight loads are issued before x is read and quantized (phase 1
    // and its barrier then run while they are in flight).
    bool pre = PREFETCH && gl_WorkGroupID.x < batches;
    if (pre) {
        ROW_GROUP(gl_WorkGroupID.x)
        LOAD_CHUNK(part * sg_size + lane)
    }
    if ((PROBE & 1u) == 0u)
        read_x();
    barrier();
    float s_m[M];
    for (uint m = 0u; m < M; m++)
        s_m[m] = NORM ? srow[m] : 1.0;
    for (uint bt = gl_WorkGroupID.x; bt < batches; bt += gl_NumWorkGroups.x) { // uniform in the workgroup
        ROW_GROUP(bt)
        float acc[RM * NW];
        for (uint i = 0u; i < RM * NW; i++)
            acc[i] = 0.0;
        for (uint u0 = part * sg_size + lane; u0 < units; u0 += step * UNROLL) {
            if (!pre)
                LOAD_CHUNK(u0)
            pre = false;
            for (uint t = 0u; t < UNROLL; t++) {
                uint u = u0 + t * step;
                if (u >= units)
                    break;
                for (uint m = 0u; m < M; m++) {
#if SOA_DOT
                    for (uint r = 0u; r < ROWS; r++)
                        for (uint wi = 0u; wi < NW; wi++) {
                            uint o = (t * ROWS + r) * NW + wi;
                            if (PAIRS)
                                acc[(wi * ROWS + r) * M + m] += pair_dot(rq[2u * o], rq[2u * o + 1u], rd[o],
                                    re[K5 ? 2u * o : 0u], re[K5 ? 2u * o + 1u : 0u], u, m);
                            else
                                acc[(wi * ROWS + r) * M + m] += run_dot(rq[o], rd[o], re[QE ? o : 0u], u, m);
                        }
#else
                    for (uint i = 0u; i < RUNS; i++) { // the unit's runs
                        uint b = RUNS * u + i;
                        // x's elements under the run's low nibbles (16 from ea), then its high ones' (from eb).
                        uint ea = K6 ? (b >> 3u) * 256u + ((b >> 2u) & 1u) * 128u + ((b >> 1u) & 1u) * 32u + (b & 1u) * 16u
                                : QK ? ((b & ~1u) * 32u + (b & 1u) * 16u) : b * 32u;
                        uint eb = ea + (K6 ? 64u : QK ? 32u : 16u);
                        float v[32];
                        float ss = 0.0;
                        for (uint e = 0u; e < 32u; e += 4u) {
                            float v4[4];
                            x_load4(m, (e < 16u ? ea : eb - 16u) + e, v4, ss);
                            v[e] = v4[0]; v[e + 1u] = v4[1]; v[e + 2u] = v4[2]; v[e + 3u] = v4[3];
                        }
                        for (uint r = 0u; r < ROWS; r++)
                            for (uint wi = 0u; wi < NW; wi++) {
                                uint o = (t * ROWS + r) * NW + wi;
                                acc[(wi * ROWS + r) * M + m] +=
                                    run_dot_f(rq[RUNS * o + i], rd[o], re[QE ? RUNS * o + i : 0u], b, v);
                            }
                    }
#endif
                }
            }
        }
        pre = false; // (a lane with no run in this batch)
        // CHAIN: the next batch's first chunk in flight while this one's sums are reduced and
        // stored (its row group's gr, n0 and bases replace this one's: kept as sgr, sn0).
        uint sgr = gr, sn0 = n0;
        if (CHAIN && bt + gl_NumWorkGroups.x < batches) {
            ROW_GROUP(bt + gl_NumWorkGroups.x)
            LOAD_CHUNK(part * sg_size + lane)
            pre = true;
        }
        bool store = sgr < groups;
        float tot[RM * NW];
        if (SPLIT == 1u) {
            for (uint i = 0u; i < RM * NW; i++)
                tot[i] = subgroupAdd(acc[i]);
        } else {
            for (uint i = 0u; i < RM * NW; i++) {
                float s = subgroupAdd(acc[i]);
                if (lane == 0u)
                    red[gl_SubgroupID * RM * NW + i] = s;
            }
            barrier();
            for (uint i = 0u; i < RM * NW; i++) {
                float s = 0.0;
                for (uint p = 0u; p < SPLIT; p++)
                    s += red[(slot * SPLIT + p) * RM * NW + i];
                tot[i] = s;
            }
            barrier(); // red is reused by the next batch
        }
        // Lane i of the first subgroup of the row group stores element i (ROWS * M may pass the lanes).
        for (uint i0 = 0u; i0 < RM; i0 += sg_size) {
            uint i = i0 + lane;
            // tot is indexed by a lane-dependent i: pick it with a loop the compiler can unroll.
            float gv = 0.0, uv = 0.0;
            for (uint j = 0u; j < RM; j++)
                if (j == i) {
                    gv = tot[j];
                    uv = tot[(NW - 1u) * RM + j];
                }
            uint r = i / M, m = i % M, row = sn0 + r;
            if (part != 0u || !store || i >= RM || row >= pc.n)
                continue;
            float val = gv * s_m[m];
            if (BIAS)
                val += NU_LOAD(bias, BDT, pc.first_bias + row * pc.bias_col);
            if (GLU)
                val = (GELU ? act_gelu_tanh(val) : act_silu(val)) * (uv * s_m[m]);
            if (RESID)
                val += NU_LOAD(res, RDT, pc.first_r + m * pc.r_row + row * pc.r_col);
            if (POST) // F32 dst (the host's rule), through the coherent view the last workgroup reads
                dstc_f[pc.first_dst + m * pc.n + row] = val;
            else
                NU_STORE(dst, DDT, pc.first_dst + m * pc.n + row, val)
        }
    }
    if (POST)
        post_norm_add();
}
