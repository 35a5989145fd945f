/* ops_cases.c: the cases of `nuvec bench ops` (bench/ops.c says what each kind measures): the
 * elementwise ops at --size, a 7B Llama decode's matrix-vector products (and every GGUF block
 * format's at an 8B's FFN shapes, Qwen2.5-7B's decode products), the fused decode products
 * beside the separate ops they replace, matrix products (square and the 512-token prefill's),
 * attention (decode, batched decode rows, prefill) and a batched decode step's products. */
#include "ops_cases.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ops_cases(const nu_device_info *info, uint64_t size, ops_case_list *out)
{
    char *big = out->big;
    snprintf(big, sizeof out->big, "%.3g GiB", (double)size / (1u << 30));
    int64_t n32 = (int64_t)(size / 4), n16 = (int64_t)(size / 2);
    /* Rows of 4096 (the hidden size) filling --size in F16. */
    int64_t rows = n16 / 4096 > 0 ? n16 / 4096 : 1;
    double sz = (double)size;
    const char *ew = ">= 0.95x torch", *mv = ">= 85% of copy", *mq = ">= 80% of copy";
    const nu_dtype F32 = NU_DTYPE_F32, F16 = NU_DTYPE_F16, BF16 = NU_DTYPE_BF16, Q8 = NU_DTYPE_Q8_0,
                   Q4 = NU_DTYPE_Q4_0, I32 = NU_DTYPE_I32, U32 = NU_DTYPE_U32;
    /* Matrix-vector products: the four decode shapes (n x k) of a 7B Llama, one token. */
    static const int64_t mvs[4][2] = {{4096, 4096}, {11008, 4096}, {4096, 11008}, {32000, 4096}};
    static const char *const mvn[4] = {"4096x4096", "11008x4096", "4096x11008", "32000x4096"};
    bench_case *cases = out->cases;
    const bench_case fixed[] = {
        {"copy", big, K_COPY, 0, U32, U32, 1, {n32}, 2 * sz, "the reference", 0},
        {"add", big, K_BINARY, NU_BINARY_ADD, F32, F32, 1, {n32}, 3 * sz, ew, 0},
        {"add", big, K_BINARY, NU_BINARY_ADD, F16, F16, 1, {n16}, 3 * sz, ew, 0},
        {"add", big, K_BINARY, NU_BINARY_ADD, BF16, BF16, 1, {n16}, 3 * sz, ew, 0},
        {"mul", big, K_BINARY, NU_BINARY_MUL, F16, F16, 1, {n16}, 3 * sz, ew, 0},
        {"cast", "f32>f16", K_CAST, 0, F32, F16, 1, {n32}, 1.5 * sz, ew, 0},
        {"cast", "f16>f32", K_CAST, 0, F16, F32, 1, {n16 / 2}, 1.5 * sz, ew, 0}, /* F32 dst: --size */
        {"cast", "bf16>f16", K_CAST, 0, BF16, F16, 1, {n16}, 2 * sz, ew, 0},
        {"dequant", "q4_0>f16", K_CAST, 0, Q4, F16, 2, {rows, 4096}, (double)rows * 4096 * (18.0 / 32 + 2), ew, 0},
        {"dequant", "q8_0>f16", K_CAST, 0, Q8, F16, 2, {rows, 4096}, (double)rows * 4096 * (34.0 / 32 + 2), ew, 0},
        {"dequant", "q4_0_soa>f16", K_CAST, 0, NU_DTYPE_Q4_0_SOA, F16, 2, {rows, 4096},
         (double)rows * 4096 * (18.0 / 32 + 2), ew, 0},
        /* The K formats' copies a prefill pass makes of each matrix (Q4_K, Q5_K and Q6_K_SOA by copy.comp's
         * aligned-word path, FAST 3; Q6_K, whose super-blocks start at any even byte, the general way). */
        {"dequant", "q4_k>f16", K_CAST, 0, NU_DTYPE_Q4_K, F16, 2, {rows, 4096}, (double)rows * 4096 * (144.0 / 256 + 2),
         "", 0},
        {"dequant", "q5_k>f16", K_CAST, 0, NU_DTYPE_Q5_K, F16, 2, {rows, 4096}, (double)rows * 4096 * (176.0 / 256 + 2),
         "", 0},
        {"dequant", "q6_k>f16", K_CAST, 0, NU_DTYPE_Q6_K, F16, 2, {rows, 4096}, (double)rows * 4096 * (210.0 / 256 + 2),
         "", 0},
        {"dequant", "q6_k_soa>f16", K_CAST, 0, NU_DTYPE_Q6_K_SOA, F16, 2, {rows, 4096},
         (double)rows * 4096 * (210.0 / 256 + 2), "", 0},
        {"silu", big, K_UNARY, NU_UNARY_SILU, F16, F16, 1, {n16}, 2 * sz, ew, 0},
        {"gelu", big, K_UNARY, NU_UNARY_GELU, F16, F16, 1, {n16}, 2 * sz, ew, 0},
        {"exp", big, K_UNARY, NU_UNARY_EXP, F32, F32, 1, {n32}, 2 * sz, ew, 0},
        {"scale", big, K_UNARY, NU_UNARY_SCALE, BF16, BF16, 1, {n16}, 2 * sz, ew, 0},
        {"swiglu", big, K_SWIGLU, 0, F16, F16, 1, {n16}, 3 * sz, ew, 0},
        {"rms_norm", "rows x 4096", K_RMSNORM, 0, F16, F16, 2, {rows, 4096}, 2 * sz, ew, 0},
        {"layer_norm", "rows x 4096", K_LAYERNORM, 0, F16, F16, 2, {rows, 4096}, 2 * sz, ew, 0},
        {"softmax", "rows x 4096", K_SOFTMAX, 0, F16, F16, 2, {rows, 4096}, 2 * sz, ew, 0},
        {"sum", "rows x 4096", K_REDUCE, NU_REDUCE_SUM, F16, F32, 2, {rows, 4096}, sz, ew, 0},
        {"rope", "rows x 32 x 128", K_ROPE, 0, F16, F16, 3, {rows, 32, 128}, 2 * sz, ew, 0},
        {"rope_half", "rows x 32 x 128", K_ROPE, 1, F16, F16, 3, {rows, 32, 128}, 2 * sz, ew, 0},
        {"gather", "rows of 4096", K_GATHER, 0, F16, F16, 0, {32000, 4096, rows > 32000 ? 32000 : rows},
         2.0 * 2 * 4096 * (double)(rows > 32000 ? 32000 : rows), ew, 0},
        /* Decode shapes: one token. */
        {"add", "4096", K_BINARY, NU_BINARY_ADD, F32, F32, 1, {4096}, 3.0 * 4096 * 4, ew, 0},
        {"mul", "11008", K_BINARY, NU_BINARY_MUL, F16, F16, 1, {11008}, 3.0 * 11008 * 2, ew, 0},
        {"swiglu", "11008", K_SWIGLU, 0, F16, F16, 1, {11008}, 3.0 * 11008 * 2, ew, 0},
        {"rms_norm", "1 x 4096", K_RMSNORM, 0, F32, F32, 2, {1, 4096}, 2.0 * 4096 * 4, ew, 0},
        {"softmax", "32 x 4096", K_SOFTMAX, 0, F32, F32, 2, {32, 4096}, 2.0 * 32 * 4096 * 4, ew, 0},
        {"argmax", "32000", K_ARGMAX, 0, F32, I32, 2, {1, 32000}, 32000.0 * 4, ew, 0},
        {"rope", "1 x 32 x 128", K_ROPE, 0, F32, F32, 3, {1, 32, 128}, 2.0 * 4096 * 4, ew, 0},
        {"gather", "1 of 32000", K_GATHER, 0, F16, F32, 0, {32000, 4096, 1}, 4096.0 * (2 + 4), ew, 0},
    };
    size_t ncases = sizeof fixed / sizeof fixed[0];
    memcpy(cases, fixed, sizeof fixed);
    static const nu_dtype mvd[5] = {NU_DTYPE_F16, NU_DTYPE_BF16, NU_DTYPE_Q8_0, NU_DTYPE_Q4_0, NU_DTYPE_F32};
    for (int di = 0; di < 5; di++)
        for (int si = 0; si < 4; si++) {
            nu_tensor probe = nu_tensor_make(NULL, 0, mvd[di], 2, mvs[si]);
            cases[ncases++] = (bench_case){"matvec", mvn[si], K_MATVEC, 0, mvd[di], F32, 0,
                                           {mvs[si][0], mvs[si][1], 1}, (double)nu_tensor_span_bytes(&probe),
                                           nu_dtype_block_elements(mvd[di]) > 1 ? mq : mv, 0};
        }
    for (int di = 0; di < 4; di++)
        for (int si = 0; si < 4; si++) {
            if (mvd[di] == NU_DTYPE_BF16)
                continue; /* as F16 */
            nu_tensor probe = nu_tensor_make(NULL, 0, mvd[di], 2, mvs[si]);
            cases[ncases++] = (bench_case){"matvec_indep", mvn[si], K_MATVEC, 1, mvd[di], F32, 0,
                                           {mvs[si][0], mvs[si][1], 1}, (double)nu_tensor_span_bytes(&probe),
                                           nu_dtype_block_elements(mvd[di]) > 1 ? mq : mv, 0};
        }
    /* Every GGUF block format at an 8B Llama's FFN shapes (n x k: 14336 x 4096 gate/up, 4096 x 14336
     * down), one token, dependent (each repetition writes the same dst: issue 23's benchmark). */
    static const int64_t ffn[2][2] = {{4096, 14336}, {14336, 4096}};
    static const char *const ffnn[2] = {"4096x14336", "14336x4096"};
    for (int di = 0; di < NU_DTYPE_COUNT; di++) {
        nu_dtype bt = (nu_dtype)di;
        if (nu_dtype_block_elements(bt) <= 1 || bt == NU_DTYPE_Q4_0_SOA)
            continue;
        for (int si = 0; si < 2; si++) {
            nu_tensor probe = nu_tensor_make(NULL, 0, bt, 2, ffn[si]);
            cases[ncases++] = (bench_case){"matvec", ffnn[si], K_MATVEC, 0, bt, F32, 0, {ffn[si][0], ffn[si][1], 1},
                                           (double)nu_tensor_span_bytes(&probe), ">= 75% of copy", 0};
        }
    }
    /* The logits of a Qwen2.5 7B Q4_K_M file (152064 x 3584, Q6_K as llama-quantize leaves output.weight:
     * 447 MB, a tenth of the file's bytes a token; rows of 14 super-blocks), repacked as nuvec loads it
     * (Q6_K_SOA), and Q4_K's at that shape. */
    static const int64_t logits_shape[2] = {152064, 3584};
    static const nu_dtype logits_dt[3] = {NU_DTYPE_Q6_K, NU_DTYPE_Q6_K_SOA, NU_DTYPE_Q4_K};
    for (int di = 0; di < 3; di++) {
        nu_tensor probe = nu_tensor_make(NULL, 0, logits_dt[di], 2, logits_shape);
        cases[ncases++] = (bench_case){"matvec", "152064x3584", K_MATVEC, 0, logits_dt[di], F32, 0,
                                       {logits_shape[0], logits_shape[1], 1}, (double)nu_tensor_span_bytes(&probe),
                                       ">= 75% of copy", 0};
    }
    /* A Qwen2.5 7B Q4_K_M decode layer's products (dim 3584, FFN 18944, 4 KV heads of 128): q and o,
     * k and v (v Q6_K in a third of the layers), down (Q6_K in the same third) and the fused
     * gate-up: rows fewer than 132 x 32 subgroups (n 3584, 512) leave part of the grid idle. */
    static const struct {
        const char *shape;
        int64_t n, k;
        nu_dtype dt;
        bool glu;
    } qwen[6] = {{"qwen 3584x3584", 3584, 3584, NU_DTYPE_Q4_K, false},
                 {"qwen 512x3584", 512, 3584, NU_DTYPE_Q6_K, false},
                 {"qwen 3584x18944", 3584, 18944, NU_DTYPE_Q4_K, false},
                 {"qwen 3584x18944", 3584, 18944, NU_DTYPE_Q6_K, false},
                 {"qwen 2x18944x3584", 18944, 3584, NU_DTYPE_Q4_K, true},
                 {"qwen 512x3584", 512, 3584, NU_DTYPE_Q4_K, false}};
    for (int qi = 0; qi < 6; qi++) {
        int64_t ws[2] = {qwen[qi].glu ? 2 * qwen[qi].n : qwen[qi].n, qwen[qi].k};
        nu_tensor probe = nu_tensor_make(NULL, 0, qwen[qi].dt, 2, ws);
        cases[ncases++] = (bench_case){qwen[qi].glu ? "matvec_glu" : "matvec", qwen[qi].shape,
                                       qwen[qi].glu ? K_MATVEC_GLU : K_MATVEC, 0, qwen[qi].dt, F32, 0,
                                       {qwen[qi].n, qwen[qi].k, 1}, (double)nu_tensor_span_bytes(&probe),
                                       ">= 75% of copy", 0};
    }
    /* The fused products of a decode layer, each after the separate ops it replaces. */
    static const struct {
        const char *shape, *separate;
        mv_form form;
        int64_t n, k;
    } mvf[4] = {{"qkv 6144x4096", "norm, matvec", MV_NORM, 6144, 4096},
                {"o 4096x4096", "matvec, add", MV_RESIDUAL, 4096, 4096},
                {"gu 2x11008x4096", "norm, mv, swiglu", MV_NORM_GLU, 11008, 4096},
                {"down 4096x11008", "matvec, add", MV_RESIDUAL, 4096, 11008}};
    static const nu_dtype mvfd[3] = {NU_DTYPE_F16, NU_DTYPE_Q8_0, NU_DTYPE_Q4_0};
    for (int di = 0; di < 3; di++)
        for (int si = 0; si < 4; si++) {
            int64_t ws[2] = {mvf[si].form == MV_NORM_GLU ? 2 * mvf[si].n : mvf[si].n, mvf[si].k};
            nu_tensor probe = nu_tensor_make(NULL, 0, mvfd[di], 2, ws);
            double bytes = (double)nu_tensor_span_bytes(&probe);
            cases[ncases++] = (bench_case){"matvec_sep", mvf[si].shape, K_MV_SEPARATE, mvf[si].form, mvfd[di], F32, 0,
                                           {mvf[si].n, mvf[si].k}, bytes, mvf[si].separate, 0};
            cases[ncases++] = (bench_case){"matvec_fus", mvf[si].shape, K_MV_FUSED, mvf[si].form, mvfd[di], F32, 0,
                                           {mvf[si].n, mvf[si].k}, bytes, "", 0};
        }
    /* Q4_0 repacked for decode (Q4_0_SOA: nu_op_copy makes it at load), beside Q4_0's rows above;
     * and the FFN's gate and up products as one fused op with the SwiGLU (one stacked weight). */
    for (int si = 0; si < 4; si++)
        for (int sub = 0; sub < 2; sub++) {
            nu_tensor probe = nu_tensor_make(NULL, 0, NU_DTYPE_Q4_0_SOA, 2, mvs[si]);
            cases[ncases++] = (bench_case){sub ? "matvec_indep" : "matvec", mvn[si], K_MATVEC, sub, NU_DTYPE_Q4_0_SOA,
                                           F32, 0, {mvs[si][0], mvs[si][1], 1}, (double)nu_tensor_span_bytes(&probe),
                                           mq, 0};
        }
    for (int di = 0; di < 2; di++) {
        int64_t gu[2] = {2 * 11008, 4096};
        nu_tensor probe = nu_tensor_make(NULL, 0, di ? NU_DTYPE_Q4_0 : NU_DTYPE_Q4_0_SOA, 2, gu);
        cases[ncases++] = (bench_case){"matvec_glu", "2x11008x4096", K_MATVEC_GLU, 0, probe.dtype, F32, 0,
                                       {11008, 4096, 1}, (double)nu_tensor_span_bytes(&probe), mq, 0};
    }
    /* Matrix products (TFLOP/s of 2 m n k) and attention. A CPU device (lavapipe: 2 to 6 GFLOP/s
     * on two shared cores) runs the square product at 512^3 instead of 1024^3 and skips the larger
     * ones, runs the prefill shapes with 16 tokens instead of 512 and without n = 32000 (its F16
     * weight is past lavapipe's 128 MiB binding), attention to 4096 keys and prefill of 128 tokens;
     * what it skips is printed, so that the whole benchmark stays near a minute there. */
    bool cpu = info->type == NU_DEVICE_CPU;
    const char **skipped = out->skipped;
    int nskipped = 0;
    char(*shapes)[OPS_SHAPE_CHARS] = out->shapes;
    int nshapes = 0;
    static const nu_dtype mmd[4] = {NU_DTYPE_F16, NU_DTYPE_BF16, NU_DTYPE_Q8_0, NU_DTYPE_Q4_0};
    static const int64_t sq[3] = {1024, 4096, 8192}, pn[3] = {4096, 11008, 32000};
    for (int di = 0; di < 2; di++)
        for (int si = 0; si < 3; si++) {
            int64_t n = cpu && si == 0 ? 512 : sq[si];
            char *name = shapes[nshapes++];
            snprintf(name, sizeof shapes[0], "%lld^3", (long long)n);
            if (cpu && si > 0) {
                if (di == 0)
                    skipped[nskipped++] = name;
                continue;
            }
            cases[ncases++] = (bench_case){"matmul", name, K_MATMUL, 0, mmd[di], mmd[di], 0, {n, n, n},
                                           3.0 * n * n * 2, si ? ">= 0.6x torch" : "", 2.0 * n * n * n};
        }
    int64_t ptok = cpu ? 16 : 512;
    for (int di = 0; di < 4; di++)
        for (int si = 0; si < 3; si++) {
            bool block = nu_dtype_block_elements(mmd[di]) > 1;
            int64_t n = pn[si], k = 4096;
            char *name = shapes[nshapes++];
            snprintf(name, sizeof shapes[0], "%lldx%lld>%lld", (long long)ptok, (long long)k, (long long)n);
            if (cpu && n > 11008) {
                if (di == 0)
                    skipped[nskipped++] = name;
                continue;
            }
            nu_tensor probe = nu_tensor_make(NULL, 0, mmd[di], 2, (int64_t[2]){n, k});
            double bytes = (double)nu_tensor_span_bytes(&probe) + 2.0 * ptok * (k + n);
            cases[ncases++] = (bench_case){"matmul", name, K_MATMUL, 0, mmd[di], NU_DTYPE_F16, 0, {ptok, n, k}, bytes,
                                           block ? "> matmul_dq" : "vs torch", 2.0 * ptok * n * k};
            if (block)
                cases[ncases++] = (bench_case){"matmul_dq", name, K_MATMUL_DQ, 0, mmd[di], NU_DTYPE_F16, 0, {ptok, n, k},
                                               bytes + 4.0 * n * k, "dequant + F16", 2.0 * ptok * n * k};
        }
    /* The dtypes only the matrix units' product reads as they are (the repacked Q4_0_SOA and
     * Q6_K_SOA, the K formats) at the same prefill shapes, beside their copy to F16 and the F16
     * product (a prefill pass takes one or the other: NU_LLM_DIRECT_ROWS). */
    static const nu_dtype units_only[3] = {NU_DTYPE_Q4_0_SOA, NU_DTYPE_Q4_K, NU_DTYPE_Q6_K_SOA};
    for (int di = 0; di < 3 && info->cooperative_matrix_count && !cpu; di++)
        for (int si = 0; si < 2; si++) {
            int64_t n = pn[si], k = 4096;
            char *name = shapes[nshapes++];
            snprintf(name, sizeof shapes[0], "%lldx%lld>%lld", (long long)ptok, (long long)k, (long long)n);
            nu_tensor probe = nu_tensor_make(NULL, 0, units_only[di], 2, (int64_t[2]){n, k});
            double bytes = (double)nu_tensor_span_bytes(&probe) + 2.0 * ptok * (k + n);
            cases[ncases++] = (bench_case){"matmul", name, K_MATMUL, 0, units_only[di], NU_DTYPE_F16, 0, {ptok, n, k},
                                           bytes, "> matmul_dq", 2.0 * ptok * n * k};
            cases[ncases++] = (bench_case){"matmul_dq", name, K_MATMUL_DQ, 0, units_only[di], NU_DTYPE_F16, 0,
                                           {ptok, n, k}, bytes + 4.0 * n * k, "dequant + F16", 2.0 * ptok * n * k};
        }
    /* A 512-token prefill pass's own F16 products of a 7B layer as the model runs them: q|k|v and
     * gate|up stacked, down with k 11008 (o is 512x4096>4096 above). Not on a CPU device. */
    static const int64_t pf[3][2] = {{12288, 4096}, {22016, 4096}, {4096, 11008}};
    for (int si = 0; si < 3 && !cpu; si++) {
        int64_t n = pf[si][0], k = pf[si][1];
        char *name = shapes[nshapes++];
        snprintf(name, sizeof shapes[0], "%lldx%lld>%lld", (long long)ptok, (long long)k, (long long)n);
        cases[ncases++] = (bench_case){"matmul", name, K_MATMUL, 0, NU_DTYPE_F16, NU_DTYPE_F16, 0, {ptok, n, k},
                                       2.0 * (n * k + ptok * (k + n)), "prefill", 2.0 * ptok * n * k};
    }
    static const int64_t ctx[4] = {512, 4096, 8192, 32768};
    for (int hi = 0; hi < 2; hi++)
        for (int ci = 0; ci < 4; ci++) {
            int64_t kvh = hi ? 32 : 8;
            char *name = shapes[nshapes++];
            snprintf(name, sizeof shapes[0], "%lld kv%lld", (long long)ctx[ci], (long long)kvh);
            if (cpu && ctx[ci] > 4096) {
                skipped[nskipped++] = name;
                continue;
            }
            static const char *const forms[4] = {"attn_dec", "attn_dec2", "attn_decr", "attn_decs"};
            for (int sub = 0; sub < 4; sub++)
                cases[ncases++] = (bench_case){forms[sub], name, K_ATTN_DECODE, sub, NU_DTYPE_F16, NU_DTYPE_F16, 0,
                                               {ctx[ci], kvh}, 2.0 * ctx[ci] * kvh * 128 * 2,
                                               sub == 1   ? "combine=fused"
                                               : sub == 2 ? "per-row form = attn_dec"
                                               : sub == 3 ? "a key a subgroup (bykey=0)"
                                               : kvh == 8 && ctx[ci] >= 8192 ? ">= 70% of copy" : "",
                                               4.0 * ctx[ci] * 32 * 128};
        }
    /* A batched decode step (issue 22): its products at 16 and 64 rows of F16 inputs (nu_op_matmul:
     * the matrix units where the device has them), beside the matrix-vector products of 1 and 8
     * rows the smaller steps take (Q4_0_SOA, Q4_K, Q6_K, Q6_K_SOA; 8 rows of Q6_K on the generic path), GB/s
     * of the weights' bytes; and its attention over 16 and 64 sequences of 512 keys each. */
    const char **skipped_units = out->skipped_units;
    int nunits = 0;
    static const nu_dtype few[4] = {NU_DTYPE_Q4_0_SOA, NU_DTYPE_Q4_K, NU_DTYPE_Q6_K, NU_DTYPE_Q6_K_SOA};
    static const int64_t fewm[4] = {1, 8, 16, 64}, fews[3][2] = {{4096, 4096}, {11008, 4096}, {4096, 11008}};
    for (int di = 0; di < 4; di++)
        for (int si = 0; si < 3; si++)
            for (int mi = 0; mi < 4; mi++) {
                int64_t m = fewm[mi], n = fews[si][0], kk = fews[si][1];
                if (cpu && m > 16)
                    continue; /* lavapipe: the 16-row case says enough */
                char *name = shapes[nshapes++];
                snprintf(name, sizeof shapes[0], "%lldx%lld>%lld", (long long)m, (long long)kk, (long long)n);
                nu_tensor probe = nu_tensor_make(NULL, 0, few[di], 2, fews[si]);
                double wb = (double)nu_tensor_span_bytes(&probe);
                bool repacked = few[di] == NU_DTYPE_Q4_0_SOA || few[di] == NU_DTYPE_Q6_K_SOA;
                if (m > 8 && repacked && !info->cooperative_matrix_count) {
                    if (few[di] == NU_DTYPE_Q4_0_SOA) /* the shapes once: the message names both dtypes */
                        skipped_units[nunits++] = name; /* the products read them on matrix units only */
                    continue;
                }
                if (m <= 8)
                    cases[ncases++] = (bench_case){"rows_mv", name, K_MATVEC, 0, few[di], F32, 0, {n, kk, m}, wb,
                                                   "", 2.0 * m * n * kk};
                else
                    cases[ncases++] = (bench_case){"rows_mm", name, K_MATMUL_ROWS, 0, few[di], F32, 0, {m, n, kk}, wb,
                                                   "", 2.0 * m * n * kk};
            }
    for (int ri = 0; ri < 2; ri++) {
        int64_t R = ri ? 64 : 16, keys = 512, P = 641;
        if (cpu && ri)
            continue;
        char *name = shapes[nshapes++];
        snprintf(name, sizeof shapes[0], "%lld x %lld", (long long)R, (long long)keys);
        cases[ncases++] = (bench_case){"attn_rows", name, K_ATTN_BATCH, 0, NU_DTYPE_F16, NU_DTYPE_F16, 0, {R, keys, P},
                                       2.0 * R * keys * 32 * 128 * 2, ">= 80% of copy", 4.0 * R * keys * 32 * 128};
    }
    /* The decode step's key append with RoPE (32 KV heads of 128, an F32 token into an F16 cache of
     * 4096 positions): one dispatch against rope then kv_append; bytes: src read, the row written. */
    for (int two = 0; two < 2; two++)
        cases[ncases++] = (bench_case){two ? "attn_kvr2" : "attn_kvr", "1 x 32 x 128", K_KV_ROPE, two, NU_DTYPE_F32,
                                       NU_DTYPE_F16, 0, {4096, 32}, 32.0 * 128 * (4 + 2),
                                       two ? "rope + kv_append" : "< attn_kvr2", 0};
    static const int64_t ptoks[2] = {512, 4096};
    for (int ti = 0; ti < 2; ti++) {
        int64_t T = cpu && ti == 0 ? 128 : ptoks[ti];
        char *name = shapes[nshapes++];
        snprintf(name, sizeof shapes[0], "%lld causal", (long long)T);
        if (cpu && ti > 0) {
            skipped[nskipped++] = name;
            continue;
        }
        /* Causal: half of the 4 T^2 D H multiply-adds of the two products. */
        cases[ncases++] = (bench_case){"attn_pre", name, K_ATTN_PREFILL, 0, NU_DTYPE_F16, NU_DTYPE_F16, 0, {T},
                                       4.0 * T * 32 * 128 * 2, ">= 0.5x torch", 2.0 * T * T * 128 * 32};
    }
    /* A later pass of a long prompt's prefill (512 rows at positions 3,456..3,967, the last of a
     * 3,968-token prompt in passes of 512): bytes q, dst, k and v; each row sees position + 1 keys. */
    if (!cpu) {
        cases[ncases++] = (bench_case){"attn_pre", "512 after 3456", K_ATTN_PREFILL, 0, NU_DTYPE_F16, NU_DTYPE_F16, 0,
                                       {512, 3968}, (2.0 * 512 + 2.0 * 3968) * 32 * 128 * 2, "",
                                       4.0 * 512 * (3456 + 256.5) * 128 * 32};
    }
    /* The arrays' sizes (ops_cases.h) bound what is listed here: grow them with the list. */
    if (ncases > OPS_MAX_CASES || nshapes > (int)(sizeof out->shapes / sizeof out->shapes[0])) {
        fprintf(stderr, "ops_cases: %zu cases and %d shapes outgrow ops_cases.h's arrays\n", (size_t)ncases, nshapes);
        abort();
    }
    out->count = ncases;
    out->nskipped = nskipped;
    out->nunits = nunits;
}
