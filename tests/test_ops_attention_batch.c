/* test_ops_attention_batch.c: nu_op_attention's per-row form (rows of a batch of sequences: each
 * row's position and slot from I32 tensors, caches of several slots), sliding windows and logit
 * softcaps in both forms, and every head dim, against tests/attn_ref.c's float64 reference
 * (2^-13 of max |v| plus dst's rounding): decode rows of many sequences at different lengths,
 * a prefill chunk of one sequence, both mixed (tiles whose rows belong to different slots), rows
 * out of range (zeros), both decode kernels and the prefill kernel; a decode step (RoPE, the
 * cache writes, attention) recorded once as a graph and launched with only buffer contents
 * changed, bit-equal to the same ops recorded fresh; the fresh per-row form (the step in
 * attention's one dispatch) against those separate ops; and what the per-row form refuses. */
#include "attn_ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nuvec/trace.h>

static const nu_dtype floats[3] = {NU_DTYPE_F32, NU_DTYPE_F16, NU_DTYPE_BF16};

/* One attention: a cache of S slots (0: a rank-3 cache, one slot) of P positions, T rows. */
typedef struct batch_case {
    int64_t S, P, hq, hkv, D, T;
    const int32_t *pos;  /* per-row positions (NULL: the scalar form, q_position / kv_length / causal) */
    const int32_t *slot; /* per-row slots (NULL: desc.slots NULL) */
    uint32_t q_position, kv_length;
    bool causal;
    uint32_t window, max_length;
    float softcap, scale;
    nu_attention_tune tune;
} batch_case;

/* Runs a case on random q, k, v of dtypes qd, kd, vd (inputs in [-range, range]) into dst of dd
 * and checks it. Where `strided`, the I32 tensors are strided views and k starts one element into
 * its buffer (rows unaligned: the subgroup kernel's lanes read an element at a time); else k's
 * rows are aligned (4 elements a lane, and where head_dim / 4 is not a multiple of the subgroup,
 * lanes past a row's end). */
static void run_batch(nu_device *d, const batch_case *bc, nu_dtype qd, nu_dtype kd, nu_dtype vd, nu_dtype dd, float range,
                      bool strided, uint64_t *seed, const char *label)
{
    int64_t S = bc->S ? bc->S : 1;
    int64_t qs[3] = {bc->T, bc->hq, bc->D}, ks4[4] = {S, bc->P, bc->hkv, bc->D};
    uint32_t krank = bc->S ? 4 : 3;
    const int64_t *ks = bc->S ? ks4 : ks4 + 1;
    nt_tensor q = nt_tensor_random(d, qd, 3, qs, 0, -range, range, seed);
    nt_tensor k = nt_tensor_random(d, kd, krank, ks, strided ? 1 : 0, -range, range, seed);
    nt_tensor v = nt_tensor_random(d, vd, krank, ks, 0, -1, 1, seed);
    nt_tensor dst = nt_tensor_output(d, dd, 3, qs, 0);
    nt_tensor pt = {0}, st = {0};
    nu_attention_desc desc = {.scale = bc->scale, .causal = bc->causal, .q_position = bc->q_position,
                              .kv_length = bc->kv_length, .window = bc->window, .max_length = bc->max_length,
                              .softcap = bc->softcap, .tune = bc->tune};
    if (bc->pos) {
        pt = nt_tensor_i32(d, bc->pos, bc->T, strided ? 3 : 0, strided ? 2 : 1);
        desc.positions = &pt.t;
    }
    if (bc->slot) {
        st = nt_tensor_i32(d, bc->slot, bc->T, strided ? 1 : 0, strided ? 3 : 1);
        desc.slots = &st.t;
    }
    nt_attn_call a = {&dst.t, &q.t, &k.t, &v.t, &desc};
    nt_run(d, nt_record_attention, &a);
    nt_tensor_download(&dst);
    char what[300], tn[120];
    snprintf(what, sizeof what, "%s: %s q, %s k, %s v, %s dst, %lld slots of %lld, tune %s", label, nu_dtype_name(qd),
             nu_dtype_name(kd), nu_dtype_name(vd), nu_dtype_name(dd), (long long)S, (long long)bc->P,
             nt_attn_tune_name(&bc->tune, tn, sizeof tn));
    nt_attn ref = {q.values, k.values, v.values, bc->T, bc->hq, bc->hkv, bc->D, S, bc->P, &desc, bc->pos, bc->slot};
    nt_expect_attention(&dst, &ref, what);
    nt_tensor_free(&q);
    nt_tensor_free(&k);
    nt_tensor_free(&v);
    nt_tensor_free(&dst);
    if (bc->pos)
        nt_tensor_free(&pt);
    if (bc->slot)
        nt_tensor_free(&st);
}

/* Decode rows of many sequences: B rows of B sequences at different lengths (1 key to the cache's
 * last position), the rows' slots in another order than the rows, on the decode path (by row
 * count up to NU_ATTENTION_DECODE_ROWS, asked for past it), both decode kernels, one split and
 * several (merged by attn_combine.comp and by the last split), GQA 1, 4 and 8, rank-3 and rank-4
 * caches, strided I32 views; rows out of range (positions -1 and P, slots -1 and S) give zeros. */
static void decode_rows_of_many_sequences(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 41;
    const int32_t pos4[4] = {0, 299, 137, 64}, slot4[4] = {2, 0, 3, 1};
    const int32_t pos8[8] = {5, 250, -1, 99, 300, 12, 1, 180}, slot8[8] = {4, 1, 0, 7, 2, 6, 3, 5};
    const int32_t pos6[6] = {40, 77, 3, 77, 10, 60}, slot6[6] = {1, 0, 2, -1, 3, 1};
    const int32_t pos3[3] = {63, 0, 31};
    const batch_case cases[] = {
        {4, 300, 8, 8, 64, 4, pos4, slot4, 0, 0, false, 0, 0, 0, 0, {0}},
        {4, 300, 32, 8, 128, 4, pos4, slot4, 0, 0, false, 0, 0, 0, 0, {.no_subgroup = true}},
        {4, 300, 16, 2, 64, 4, pos4, slot4, 0, 0, false, 0, 0, 0, 0, {.chunk = 32, .combine = NU_ATTENTION_COMBINE_FUSED}},
        {8, 301, 8, 2, 128, 8, pos8, slot8, 0, 0, false, 0, 0, 0, 0.15f, {.path = NU_ATTENTION_PATH_DECODE}},
        {8, 301, 8, 1, 64, 8, pos8, slot8, 0, 0, false, 0, 200, 0, 0, {.path = NU_ATTENTION_PATH_DECODE,
                                                                          .no_subgroup = true, .splits = 5}},
        {4, 80, 4, 4, 32, 6, pos6, slot6, 0, 0, false, 0, 0, 0, 0, {.path = NU_ATTENTION_PATH_DECODE, .splits = 3,
                                                                     .combine = NU_ATTENTION_COMBINE_FUSED}},
        {0, 64, 8, 4, 64, 3, pos3, NULL, 0, 0, false, 0, 0, 0, 0, {0}},           /* one slot, slots NULL */
        {2, 64, 8, 4, 64, 3, pos3, NULL, 0, 0, false, 0, 0, 0, 0, {.splits = 1}}, /* slot 0 of two */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char label[64];
        snprintf(label, sizeof label, "decode rows, case %zu", i);
        run_batch(d, &cases[i], floats[i % 3], floats[(i + 1) % 3], floats[(i / 3 + 2) % 3], floats[(i + 2) % 3], 1, i % 2,
                  &seed, label);
    }
    nt_close(d);
}

/* The same rows in the per-row form with a key a thread (tune.by_key: attn_decode_keys.comp) over
 * F16 caches with aligned rows: slots in another order than the rows, rows out of range (zeros),
 * rank-3 and rank-4 caches, one split and several (merged by attn_combine.comp and by the last
 * split), GQA 1, 4 and 8, a window and a softcap; the kernel seen in the trace. */
static void decode_rows_a_key_a_thread(void **state)
{
    (void)state;
    nu_device *d = nt_open_subgroup_arithmetic("decode_rows_a_key_a_thread");
    uint64_t seed = 43;
    const int32_t pos4[4] = {0, 299, 137, 64}, slot4[4] = {2, 0, 3, 1};
    const int32_t pos8[8] = {5, 250, -1, 99, 300, 12, 1, 180}, slot8[8] = {4, 1, 0, 7, 2, 6, 3, 5};
    const int32_t pos3[3] = {63, 0, 31};
    const batch_case cases[] = {
        {4, 300, 32, 8, 128, 4, pos4, slot4, 0, 0, false, 0, 0, 0, 0, {.by_key = true}},
        {4, 300, 16, 2, 64, 4, pos4, slot4, 0, 0, false, 0, 0, 0, 0, {.by_key = true, .chunk = 32,
                                                                      .combine = NU_ATTENTION_COMBINE_FUSED}},
        {8, 301, 8, 8, 128, 8, pos8, slot8, 0, 0, false, 48, 0, 0.5f, 0.15f, {.by_key = true,
                                                                              .path = NU_ATTENTION_PATH_DECODE}},
        {0, 64, 8, 4, 64, 3, pos3, NULL, 0, 0, false, 0, 0, 0, 0, {.by_key = true}},           /* rank-3 cache */
        {2, 64, 8, 4, 64, 3, pos3, NULL, 0, 0, false, 0, 0, 0, 0, {.by_key = true, .splits = 1}},
    };
    char path[512];
    snprintf(path, sizeof path, "%s/nuvec-bykey-rows-%d.json", nt_tmp_dir(), (int)getpid());
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char label[64];
        snprintf(label, sizeof label, "decode rows a key a thread, case %zu", i);
        NT_OK(nu_trace_start(d, path));
        run_batch(d, &cases[i], floats[i % 3], NU_DTYPE_F16, NU_DTYPE_F16, floats[(i + 2) % 3], 1, false, &seed, label);
        NT_OK(nu_trace_stop(d));
        if (!nt_trace_has(path, "attn_decode_keys"))
            fail_msg("%s: attn_decode_keys did not run", label);
    }
    nt_close(d);
}

/* A prefill chunk of one sequence: rows at positions q0 .. q0 + T - 1 of one slot (so rows see
 * each other as their positions allow), on the prefill path (tiles of the default size, and of 4
 * and 8 rows with partial last tiles), the slot given or the cache rank 3, and the same chunk on
 * the decode path; a chunk whose rows come in another order than their positions. */
static void prefill_chunk_of_one_sequence(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 42;
    int32_t p37[37], s37[37], p21[21], s21[21], shuffled[19];
    for (int i = 0; i < 37; i++)
        p37[i] = i, s37[i] = 2;
    for (int i = 0; i < 21; i++)
        p21[i] = 50 + i, s21[i] = 1;
    for (int i = 0; i < 19; i++)
        shuffled[i] = (i * 7) % 19 + 30;
    const batch_case cases[] = {
        {3, 64, 8, 8, 128, 37, p37, s37, 0, 0, false, 0, 0, 0, 0, {0}},
        {2, 128, 16, 2, 64, 21, p21, s21, 0, 0, false, 0, 0, 0, 0, {0}},
        {2, 128, 8, 2, 64, 21, p21, s21, 0, 0, false, 0, 0, 0, 0, {.br = 4, .bc = 5}},
        {0, 90, 4, 1, 32, 19, shuffled, NULL, 0, 0, false, 0, 0, 0, 0.2f, {.br = 8}},
        {2, 128, 8, 2, 64, 21, p21, s21, 0, 0, false, 0, 0, 0, 0, {.path = NU_ATTENTION_PATH_DECODE}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char label[64];
        snprintf(label, sizeof label, "prefill chunk, case %zu", i);
        run_batch(d, &cases[i], floats[(i + 1) % 3], floats[i % 3], floats[(i + 2) % 3], floats[(i / 2) % 3], 1, i % 2,
                  &seed, label);
    }
    nt_close(d);
}

/* A mixed batch: a prefill chunk of one sequence (12 rows, slot 2) with decode rows of three others
 * (slots 0, 3, 1) and rows out of range between them, on the prefill path with tiles of 4, 8 and
 * 32 rows (tiles whose rows belong to several slots take them one after the other) and on the
 * decode path. */
static void mixed_batch(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 43;
    int32_t pos[18], slot[18];
    for (int i = 0; i < 12; i++)
        pos[i] = 20 + i, slot[i] = 2;
    const int32_t tail_pos[6] = {70, -1, 5, 99, 33, 100}, tail_slot[6] = {0, 1, 3, 1, 4, 0};
    for (int i = 0; i < 6; i++)
        pos[12 + i] = tail_pos[i], slot[12 + i] = tail_slot[i];
    /* Rows interleaved: the decode rows among the chunk's. */
    int32_t ipos[18], islot[18];
    for (int i = 0; i < 18; i++) {
        int src = i % 3 == 2 ? 12 + i / 3 : i - (i + 1) / 3;
        ipos[i] = pos[src];
        islot[i] = slot[src];
    }
    const batch_case cases[] = {
        {4, 100, 8, 2, 64, 18, pos, slot, 0, 0, false, 0, 0, 0, 0, {.br = 4, .bc = 8}},
        {4, 100, 8, 2, 64, 18, ipos, islot, 0, 0, false, 0, 0, 0, 0, {.br = 8}},
        {4, 100, 4, 4, 128, 18, ipos, islot, 0, 0, false, 0, 0, 0, 0, {0}},
        {4, 100, 8, 2, 64, 18, ipos, islot, 0, 0, false, 0, 0, 0, 0, {.path = NU_ATTENTION_PATH_DECODE}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char label[64];
        snprintf(label, sizeof label, "mixed batch, case %zu", i);
        run_batch(d, &cases[i], floats[i % 3], floats[(i + 2) % 3], floats[(i + 1) % 3], NU_DTYPE_F32, 1, i % 2, &seed,
                  label);
    }
    nt_close(d);
}

/* Sliding windows: rows before the window fills (all their keys) and past it (the last `window`
 * keys), windows of 1 (a row sees itself) and wider than the cache, in the scalar form (causal,
 * a first chunk and a later one, decode rows) and the per-row form (decode rows and a mixed
 * batch), both decode kernels and the prefill kernel; max_length capped by the window. */
static void sliding_windows(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 44;
    const int32_t pos4[4] = {3, 200, 40, 41}, slot4[4] = {0, 1, 2, 1};
    int32_t pos18[18], slot18[18];
    for (int i = 0; i < 18; i++)
        pos18[i] = i < 12 ? 30 + i : 5 * i, slot18[i] = i < 12 ? 1 : i % 3;
    const batch_case cases[] = {
        /* scalar, prefill from 0: rows 0..9 see all keys, later ones the last 10 */
        {0, 64, 8, 2, 64, 40, NULL, NULL, 0, 40, true, 10, 0, 0, 0, {0}},
        {0, 128, 8, 2, 64, 21, NULL, NULL, 50, 71, true, 16, 0, 0, 0, {.br = 8, .bc = 5}}, /* a later chunk */
        {0, 300, 8, 8, 128, 2, NULL, NULL, 250, 252, true, 64, 0, 0, 0, {0}},              /* decode rows */
        {0, 300, 8, 8, 128, 1, NULL, NULL, 30, 31, true, 64, 0, 0, 0, {.no_subgroup = true}}, /* before the window fills */
        {0, 40, 4, 4, 32, 7, NULL, NULL, 0, 40, true, 1, 0, 0, 0, {0}},                    /* itself only */
        /* per-row */
        {3, 256, 8, 2, 64, 4, pos4, slot4, 0, 0, false, 32, 0, 0, 0, {.splits = 4}},
        {3, 256, 8, 2, 64, 4, pos4, slot4, 0, 0, false, 32, 0, 0, 0, {.no_subgroup = true}},
        {3, 256, 8, 2, 64, 4, pos4, slot4, 0, 0, false, 1000, 0, 0, 0, {0}}, /* wider than the cache */
        {3, 100, 8, 4, 64, 18, pos18, slot18, 0, 0, false, 8, 0, 0, 0, {.br = 4}},
        {3, 100, 8, 4, 64, 18, pos18, slot18, 0, 0, false, 8, 0, 0, 0, {.path = NU_ATTENTION_PATH_DECODE}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char label[64];
        snprintf(label, sizeof label, "window %u, case %zu", cases[i].window, i);
        run_batch(d, &cases[i], floats[(i + 2) % 3], floats[i % 3], floats[(i + 1) % 3], floats[(i / 2) % 3], 1, false,
                  &seed, label);
    }
    nt_close(d);
}

/* Logit softcaps (Gemma 2's 50, and caps the scores reach: with scale 1 the scores' spread is
 * sqrt(D) / 3, past 2 and 5 for many keys), in both forms, on both decode kernels and the prefill
 * kernel, with a window too (Gemma 2's alternating layers). */
static void softcaps(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 45;
    const int32_t pos4[4] = {10, 150, 99, 0}, slot4[4] = {1, 0, 1, 2};
    int32_t pos30[30], slot30[30];
    for (int i = 0; i < 30; i++)
        pos30[i] = i + 5, slot30[i] = 0;
    const batch_case cases[] = {
        {0, 200, 8, 2, 64, 1, NULL, NULL, 150, 151, true, 0, 0, 50, 0, {0}},
        {0, 200, 8, 2, 64, 3, NULL, NULL, 140, 143, true, 0, 0, 2, 1, {.no_subgroup = true}},
        {0, 64, 8, 2, 32, 40, NULL, NULL, 0, 40, true, 0, 0, 5, 1, {0}},
        {3, 160, 8, 4, 64, 4, pos4, slot4, 0, 0, false, 0, 0, 2, 1, {.splits = 3}},
        {3, 160, 8, 4, 64, 4, pos4, slot4, 0, 0, false, 0, 0, 10, 1, {.no_subgroup = true, .splits = 2,
                                                                       .combine = NU_ATTENTION_COMBINE_FUSED}},
        {1, 40, 4, 2, 128, 30, pos30, slot30, 0, 0, false, 8, 0, 5, 1, {0}},
        {3, 160, 8, 4, 64, 4, pos4, slot4, 0, 0, false, 64, 0, 2, 1, {.path = NU_ATTENTION_PATH_PREFILL, .br = 4}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char label[64];
        snprintf(label, sizeof label, "softcap %g, case %zu", (double)cases[i].softcap, i);
        run_batch(d, &cases[i], floats[i % 3], floats[(i + 1) % 3], floats[(i + 2) % 3], NU_DTYPE_F32, 1, false, &seed,
                  label);
    }
    nt_close(d);
}

/* Every head dim the architectures use (64, 80, 96, 128, 256), the tiny models' (8, 16, 32) and
 * other multiples of 8 (40, 200), on the subgroup decode kernel, attn_decode.comp and the prefill
 * kernel, in the per-row form. */
static void every_head_dim(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 46;
    const int64_t dims[] = {8, 16, 32, 40, 64, 80, 96, 128, 200, 256};
    const int32_t pos3[3] = {70, 0, 33}, slot3[3] = {1, 0, 1};
    int32_t p20[20], s20[20];
    for (int i = 0; i < 20; i++)
        p20[i] = 10 + i, s20[i] = 1;
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        int64_t D = dims[i], hq = D >= 200 ? 4 : 8, hkv = D >= 200 ? 2 : 4;
        const batch_case cases[] = {
            {2, 80, hq, hkv, D, 3, pos3, slot3, 0, 0, false, 0, 0, 0, 0, {0}},
            {2, 80, hq, hkv, D, 3, pos3, slot3, 0, 0, false, 0, 0, 0, 0, {.no_subgroup = true, .splits = 2}},
            {2, 40, hq, hkv, D, 20, p20, s20, 0, 0, false, 0, 0, 0, 0, {0}},
        };
        for (size_t j = 0; j < sizeof cases / sizeof cases[0]; j++) {
            char label[64];
            snprintf(label, sizeof label, "head_dim %lld, case %zu", (long long)D, j);
            run_batch(d, &cases[j], floats[(i + j) % 3], floats[(i + 2 * j + 1) % 3], floats[(j + 2) % 3], floats[i % 3],
                      1, false, &seed, label);
        }
    }
    nt_close(d);
}

/* ---- one decode graph for a batch ----------------------------------------------------------- */

/* A batched decode step of B rows: q turned by nu_op_rope with the rows' positions, k written
 * with RoPE and v plainly by nu_op_kv_write at the rows' positions and slots, attention in the
 * per-row form over the slots (the same I32 tensors for all four). */
typedef struct step_bufs {
    nt_tensor q, k, v, qr, out, pos, slot;
    nt_tensor kc, vc;
} step_bufs;

static nu_status record_step(nu_commands *c, step_bufs *b, const nu_rope_desc *rope, const nu_attention_tune *tune,
                             uint32_t max_length)
{
    nu_rope_desc rq = *rope;
    rq.positions = &b->pos.t;
    nu_kv_write_desc kd = {&b->pos.t, &b->slot.t, rope}, vd = {&b->pos.t, &b->slot.t, NULL};
    nu_attention_desc ad = {.positions = &b->pos.t, .slots = &b->slot.t, .max_length = max_length, .window = 48,
                            .tune = *tune};
    nu_status st;
    if ((st = nu_op_rope(c, &b->qr.t, &b->q.t, &rq)) != NU_OK || (st = nu_op_kv_write(c, &b->kc.t, &b->k.t, &kd)) != NU_OK ||
        (st = nu_op_kv_write(c, &b->vc.t, &b->v.t, &vd)) != NU_OK)
        return st;
    return nu_op_attention(c, &b->out.t, &b->qr.t, &b->kc.t, &b->vc.t, &ad);
}

/* Uploads bytes to t's buffer (at its offset) and waits. */
static void upload(nu_device *d, const nt_tensor *t, const void *bytes, size_t size)
{
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    NT_OK(nu_commands_upload(c, t->t.buffer, t->t.offset, bytes, size));
    NT_OK(nu_commands_commit(c));
    NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
    NT_OK(nu_commands_free(c));
}

/* The graph: recorded once for 3 rows over caches of 4 slots of 96 positions, launched for 30
 * steps in which only buffer contents change (q, k, v, and the positions and slots: sequences
 * advancing by one, starting, moving to other slots, a row left out of range), each step's output
 * and caches bit-equal to the same step recorded fresh in a command buffer on a second pair of
 * caches, and the output against the reference; with the splits merged by attn_combine.comp and
 * by the last split, on both decode kernels. */
static void one_graph_serves_changing_batches(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 47;
    const int64_t B = 3, S = 4, P = 96, hq = 8, hkv = 2, D = 64;
    const nu_attention_tune tunes[3] = {{.splits = 3}, {.splits = 4, .combine = NU_ATTENTION_COMBINE_FUSED},
                                        {.no_subgroup = true, .chunk = 16}};
    int64_t qs[3] = {B, hq, D}, ns[3] = {B, hkv, D}, cs[4] = {S, P, hkv, D};
    nu_rope_desc rope = {.layout = NU_ROPE_HALF, .theta = 500000.0f};
    for (int ti = 0; ti < 3; ti++) {
        step_bufs b[2]; /* the graph's, the command buffers' */
        for (int i = 0; i < 2; i++) {
            b[i].q = nt_tensor_output(d, NU_DTYPE_F32, 3, qs, 0);
            b[i].k = nt_tensor_output(d, NU_DTYPE_F32, 3, ns, 0);
            b[i].v = nt_tensor_output(d, NU_DTYPE_F32, 3, ns, 0);
            b[i].qr = nt_tensor_output(d, NU_DTYPE_F32, 3, qs, 0);
            b[i].out = nt_tensor_output(d, NU_DTYPE_F32, 3, qs, 0);
            int32_t zero[3] = {0, 0, 0};
            b[i].pos = nt_tensor_i32(d, zero, B, 0, 1);
            b[i].slot = nt_tensor_i32(d, zero, B, 0, 1);
            b[i].kc = nt_tensor_random(d, NU_DTYPE_F16, 4, cs, 0, -1, 1, &seed);
            b[i].vc = nt_tensor_random(d, NU_DTYPE_BF16, 4, cs, 0, -1, 1, &seed);
        }
        upload(d, &b[1].kc, b[0].kc.bytes, b[0].kc.size); /* the same caches to start */
        upload(d, &b[1].vc, b[0].vc.bytes, b[0].vc.size);
        nu_commands *rec;
        nu_graph *g;
        NT_OK(nu_graph_record(d, &rec));
        NT_OK(record_step(rec, &b[0], &rope, &tunes[ti], (uint32_t)P));
        uint32_t bad;
        assert_int_equal(nu_op_graph_param(rec, NU_OP_VALUE_KV_LENGTH, &bad), NU_ERROR_INVALID_ARGUMENT);
        NT_OK(nu_graph_new(rec, &g));
        /* Three sequences: lengths so far per slot; a step takes rows for the sequences in rows. */
        int32_t len[4] = {0, 40, 90, 0};
        for (int step = 0; step < 30; step++) {
            int32_t pos[3], slot[3];
            for (int r = 0; r < 3; r++) {
                slot[r] = (int32_t)((r + step / 10) % 4); /* sequences move between slots every 10 steps */
                if (len[slot[r]] >= P)
                    len[slot[r]] = 0; /* the slot full: a new sequence starts */
                pos[r] = len[slot[r]]++;
            }
            if (step % 7 == 3)
                pos[1] = -1; /* a row out of range (an idle row of the batch) */
            nt_tensor fresh[3] = {nt_tensor_random(d, NU_DTYPE_F32, 3, qs, 0, -1, 1, &seed),
                                  nt_tensor_random(d, NU_DTYPE_F32, 3, ns, 0, -1, 1, &seed),
                                  nt_tensor_random(d, NU_DTYPE_F32, 3, ns, 0, -1, 1, &seed)};
            for (int i = 0; i < 2; i++) {
                upload(d, &b[i].q, fresh[0].values, fresh[0].numel * 4);
                upload(d, &b[i].k, fresh[1].values, fresh[1].numel * 4);
                upload(d, &b[i].v, fresh[2].values, fresh[2].numel * 4);
                upload(d, &b[i].pos, pos, sizeof pos);
                upload(d, &b[i].slot, slot, sizeof slot);
            }
            NT_OK(nu_graph_launch(g));
            NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
            nu_commands *c;
            NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
            NT_OK(record_step(c, &b[1], &rope, &tunes[ti], (uint32_t)P));
            NT_OK(nu_commands_commit(c));
            NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
            NT_OK(nu_commands_free(c));
            for (int i = 0; i < 2; i++) {
                nt_tensor_download(&b[i].out);
                nt_tensor_download(&b[i].kc);
                nt_tensor_download(&b[i].vc);
                nt_tensor_download(&b[i].qr);
            }
            if (memcmp(b[0].out.bytes, b[1].out.bytes, b[0].out.size) || memcmp(b[0].kc.bytes, b[1].kc.bytes, b[0].kc.size) ||
                memcmp(b[0].vc.bytes, b[1].vc.bytes, b[0].vc.size))
                fail_msg("tune %d, step %d: the graph's output or caches differ from the step recorded fresh", ti, step);
            /* The rows' v where their positions and slots say (the rows in range), exactly. */
            for (int r = 0; r < 3; r++)
                for (int64_t e = 0; pos[r] >= 0 && e < hkv * D; e++) {
                    float want = nt_round_to(NU_DTYPE_BF16, fresh[2].values[r * hkv * D + e]);
                    float got = b[0].vc.values[((int64_t)slot[r] * P + pos[r]) * hkv * D + e];
                    if (got != want)
                        fail_msg("tune %d, step %d: v of row %d at slot %d, position %d, element %lld is %.9g, expected "
                                 "%.9g", ti, step, r, slot[r], pos[r], (long long)e, (double)got, (double)want);
                }
            char what[96];
            snprintf(what, sizeof what, "batched decode graph, tune %d, step %d", ti, step);
            nu_attention_desc ad = {.positions = &b[0].pos.t, .slots = &b[0].slot.t, .window = 48};
            nt_attn ref = {b[1].qr.values, b[1].kc.values, b[1].vc.values, B, hq, hkv, D, S, P, &ad, pos, slot};
            nt_expect_attention(&b[0].out, &ref, what);
            for (int i = 0; i < 3; i++)
                nt_tensor_free(&fresh[i]);
        }
        NT_OK(nu_graph_free(g));
        for (int i = 0; i < 2; i++) {
            nt_tensor *all[9] = {&b[i].q, &b[i].k, &b[i].v, &b[i].qr, &b[i].out, &b[i].pos, &b[i].slot, &b[i].kc, &b[i].vc};
            for (int j = 0; j < 9; j++)
                nt_tensor_free(all[j]);
        }
    }
    nt_close(d);
}

/* ---- the fresh per-row form: a batched decode step inside attention's dispatch ---------------- */

/* A case of the fresh per-row form: heads, head_dim, the cache's dtype, RoPE (0 none, 1
 * interleaved pairs, 2 half pairs over half the head with frequency factors, linear and magnitude
 * scaling), the per-head norms, and whether q, k and v are slices of one stacked [rows, q | k | v]
 * projection (each row's fresh key and value then (hq + 2 hkv) D apart) or three tensors. */
typedef struct fresh_case {
    int64_t hq, hkv, D;
    nu_dtype cache;
    int rope;
    bool q_norm, k_norm, stacked;
    uint32_t window;
    float softcap;
    nu_attention_tune tune;
} fresh_case;

/* A step's new q, k and v: views of one stacked tensor, or three tensors. */
typedef struct fresh_inputs {
    nt_tensor all, parts[3];
    nu_tensor view[3]; /* q, k, v */
    int64_t heads[3];
} fresh_inputs;

static fresh_inputs fresh_inputs_new(nu_device *d, int64_t B, const fresh_case *fc)
{
    fresh_inputs in = {.heads = {fc->hq, fc->hkv, fc->hkv}};
    int64_t as[3] = {B, fc->hq + 2 * fc->hkv, fc->D}, first = 0;
    in.all = nt_tensor_output(d, NU_DTYPE_F32, 3, as, 0);
    for (int i = 0; i < 3; i++) {
        int64_t s[3] = {B, in.heads[i], fc->D};
        if (fc->stacked) {
            NT_OK(nu_tensor_slice(&in.all.t, 1, first, in.heads[i], &in.view[i]));
        } else {
            in.parts[i] = nt_tensor_output(d, NU_DTYPE_F32, 3, s, 0);
            in.view[i] = in.parts[i].t;
        }
        first += in.heads[i];
    }
    return in;
}

/* New random q, k and v ([B, q | k | v heads, D] values in [-1, 1)) uploaded. */
static void fresh_inputs_step(nu_device *d, fresh_inputs *in, int64_t B, int64_t D, bool stacked, uint64_t *seed)
{
    nt_tensor vals = nt_tensor_random(d, NU_DTYPE_F32, 3, in->all.t.shape, 0, -1, 1, seed);
    int64_t row = in->all.t.shape[1] * D, first = 0;
    if (stacked)
        upload(d, &in->all, vals.values, vals.numel * 4);
    for (int i = 0; !stacked && i < 3; i++) {
        float *part = malloc((size_t)(B * in->heads[i] * D) * sizeof *part);
        for (int64_t b = 0; b < B; b++)
            memcpy(part + b * in->heads[i] * D, vals.values + b * row + first * D, (size_t)(in->heads[i] * D) * sizeof *part);
        upload(d, &in->parts[i], part, (size_t)(B * in->heads[i] * D) * sizeof *part);
        free(part);
        first += in->heads[i];
    }
    nt_tensor_free(&vals);
}

static void fresh_inputs_free(fresh_inputs *in, bool stacked)
{
    nt_tensor_free(&in->all);
    for (int i = 0; !stacked && i < 3; i++)
        nt_tensor_free(&in->parts[i]);
}

/* The separate ops a batched decode step runs without the fresh form, on kc and vc: the norms
 * (into qn and kn), nu_op_rope with the positions (into qr), nu_op_kv_write of k (with RoPE) and
 * of v, nu_op_attention's per-row form (into out). */
typedef struct fresh_separate {
    const fresh_case *fc;
    const nu_tensor *q, *k, *v, *pos, *slot, *qn, *kn, *qw, *kw, *qr, *out, *kc, *vc;
    const nu_rope_desc *rope;
    float eps;
} fresh_separate;

static nu_status record_separate(nu_commands *c, void *arg)
{
    const fresh_separate *s = arg;
    const nu_tensor *qsrc = s->q, *ksrc = s->k;
    nu_status st = NU_OK;
    if (s->fc->q_norm && (st = nu_op_rms_norm(c, s->qn, s->q, s->qw, s->eps)) == NU_OK)
        qsrc = s->qn;
    if (st == NU_OK && s->fc->k_norm && (st = nu_op_rms_norm(c, s->kn, s->k, s->kw, s->eps)) == NU_OK)
        ksrc = s->kn;
    nu_rope_desc rq = s->rope ? *s->rope : (nu_rope_desc){0};
    rq.positions = s->pos;
    nu_kv_write_desc kd = {s->pos, s->slot, s->rope}, vd = {s->pos, s->slot, NULL};
    if (st == NU_OK)
        st = s->rope ? nu_op_rope(c, s->qr, qsrc, &rq) : nu_op_copy(c, s->qr, qsrc);
    if (st == NU_OK)
        st = nu_op_kv_write(c, s->kc, ksrc, &kd);
    if (st == NU_OK)
        st = nu_op_kv_write(c, s->vc, s->v, &vd);
    nu_attention_desc ad = {.positions = s->pos, .slots = s->slot, .window = s->fc->window, .softcap = s->fc->softcap,
                            .tune = s->fc->tune};
    return st == NU_OK ? nu_op_attention(c, s->out, s->qr, s->kc, s->vc, &ad) : st;
}

/* Whether the fresh form's a (n floats) matches the separate ops' b: bit for bit, or (the norms'
 * sums in another order) within tol relative to max(1, |b|). Returns the first element that does
 * not, or -1. */
static int64_t fresh_differs(const float *a, const float *b, int64_t n, bool exact, float tol)
{
    for (int64_t i = 0; i < n; i++) {
        if (exact ? memcmp(&a[i], &b[i], sizeof *a) != 0
                  : !(isnan(a[i]) && isnan(b[i])) && !(fabsf(a[i] - b[i]) <= tol * fmaxf(1.0f, fabsf(b[i]))))
            return i;
    }
    return -1;
}

/* One case: B = 5 rows over caches of 6 slots of 40 positions (random contents: the sequences'
 * earlier keys), the fresh per-row form recorded once as a graph and launched for 12 steps in
 * which only buffer contents change (new q, k, v; the rows' slots rotating, each sequence one
 * position on, a full slot starting again at 0; rows out of range by position -1 and 40 and slot
 * 6 and -1, and one at -1 naming another row's slot); each step's dst and caches against the
 * separate ops recorded with the same inputs on a second pair of caches: bit-equal, or with the
 * norms dst within 1e-5 and the keys within one rounding of the cache's dtype; dst against the
 * reference. Then a launch where two rows in range share a slot: the other rows' outputs and the
 * other slots' caches are still the separate ops'. */
static void fresh_rows_case(const fresh_case *fc, int index)
{
    nu_device *d = nt_open();
    uint64_t seed = 60 + (uint64_t)index;
    const int64_t B = 5, S = 6, P = 40, steps = 12, hq = fc->hq, hkv = fc->hkv, D = fc->D;
    int64_t cs[4] = {S, P, hkv, D}, qs[3] = {B, hq, D}, ns[3] = {B, hkv, D}, fs[1] = {D / 4}, ws[1] = {D};
    nt_tensor kc[2], vc[2]; /* the fresh form's caches, the separate ops' */
    for (int i = 0; i < 2; i++) {
        kc[i] = nt_tensor_random(d, fc->cache, 4, cs, 0, -1, 1, &seed);
        vc[i] = nt_tensor_random(d, fc->cache, 4, cs, 0, -1, 1, &seed);
    }
    upload(d, &kc[1], kc[0].bytes, kc[0].size);
    upload(d, &vc[1], vc[0].bytes, vc[0].size);
    fresh_inputs in = fresh_inputs_new(d, B, fc);
    nt_tensor ff = nt_tensor_random(d, NU_DTYPE_F32, 1, fs, 0, 1, 4, &seed);
    nt_tensor qw = nt_tensor_random(d, NU_DTYPE_F32, 1, ws, 0, 0.5, 1.5, &seed);
    nt_tensor kw = nt_tensor_random(d, NU_DTYPE_F32, 1, ws, 0, 0.5, 1.5, &seed);
    nt_tensor qn = nt_tensor_output(d, NU_DTYPE_F32, 3, qs, 0), kn = nt_tensor_output(d, NU_DTYPE_F32, 3, ns, 0);
    nt_tensor qr = nt_tensor_output(d, NU_DTYPE_F32, 3, qs, 0);
    nt_tensor out[2] = {nt_tensor_output(d, NU_DTYPE_F32, 3, qs, 0), nt_tensor_output(d, NU_DTYPE_F32, 3, qs, 0)};
    int32_t zero[5] = {0};
    nt_tensor pt = nt_tensor_i32(d, zero, B, 0, 1), st = nt_tensor_i32(d, zero, B, 0, 1);
    nu_rope_desc rope = {.layout = NU_ROPE_INTERLEAVED, .theta = 500000.0f};
    if (fc->rope == 2)
        rope = (nu_rope_desc){.layout = NU_ROPE_HALF, .rotary_dims = (uint32_t)D / 2, .linear_factor = 4.0f,
                              .freq_factors = &ff.t, .attn_factor = 1.25f};
    const nu_rope_desc *rp = fc->rope ? &rope : NULL;
    const float eps = 1e-6f;
    bool exact = !fc->q_norm && !fc->k_norm;
    /* one rounding of the cache's dtype (the keys of the normalised variants) */
    float ktol = fc->cache == NU_DTYPE_F32 ? 1e-5f : fc->cache == NU_DTYPE_F16 ? 1e-3f : 8e-3f;

    nu_commands *rec;
    NT_OK(nu_graph_record(d, &rec));
    nu_attention_desc fd = {.positions = &pt.t, .slots = &st.t, .window = fc->window, .softcap = fc->softcap,
                            .fresh_k = &in.view[1], .fresh_v = &in.view[2], .fresh_rope = rp,
                            .fresh_q_norm = fc->q_norm ? &qw.t : NULL, .fresh_k_norm = fc->k_norm ? &kw.t : NULL,
                            .fresh_norm_eps = eps, .tune = fc->tune};
    NT_OK(nu_op_attention(rec, &out[0].t, &in.view[0], &kc[0].t, &vc[0].t, &fd));
    uint32_t bad;
    assert_int_equal(nu_op_graph_param(rec, NU_OP_VALUE_KV_LENGTH, &bad), NU_ERROR_INVALID_ARGUMENT);
    nu_graph *g;
    NT_OK(nu_graph_new(rec, &g));
    fresh_separate sep = {fc, &in.view[0], &in.view[1], &in.view[2], &pt.t, &st.t, &qn.t, &kn.t, &qw.t, &kw.t, &qr.t,
                          &out[1].t, &kc[1].t, &vc[1].t, rp, eps};

    int32_t len[6] = {0, 12, 37, 5, 39, 20};
    int64_t kvn = P * hkv * D; /* elements a slot */
    size_t slot_bytes = (size_t)kvn * nu_dtype_size(fc->cache);
    for (int64_t step = 0; step <= steps; step++) {
        bool shared = step == steps; /* the last launch: rows 0 and 1 in one slot */
        int32_t pos[5], slot[5];
        for (int r = 0; r < 5; r++) {
            slot[r] = (int32_t)((r + step) % S);
            if (len[slot[r]] >= P)
                len[slot[r]] = 0; /* the slot full: a new sequence starts */
            pos[r] = len[slot[r]]++;
        }
        switch (step % 5) { /* row 3 out of range, or row 4 naming row 0's slot */
        case 1: pos[3] = -1; break;
        case 2: pos[3] = (int32_t)P; break;
        case 3: slot[3] = (int32_t)S; break;
        case 4: slot[3] = -1; break;
        default: pos[4] = -1, slot[4] = slot[0]; break;
        }
        if (shared)
            slot[1] = slot[0], pos[1] = pos[0] + 1 < P ? pos[0] + 1 : 0;
        fresh_inputs_step(d, &in, B, D, fc->stacked, &seed);
        upload(d, &pt, pos, sizeof pos);
        upload(d, &st, slot, sizeof slot);
        char path[512];
        snprintf(path, sizeof path, "%s/nuvec-fresh-rows-%d.json", nt_tmp_dir(), (int)getpid());
        if (step == 0 && fc->tune.by_key)
            NT_OK(nu_trace_start(d, path));
        NT_OK(nu_graph_launch(g));
        NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
        if (step == 0 && fc->tune.by_key) {
            NT_OK(nu_trace_stop(d));
            if (!nt_trace_has(path, "attn_decode_keys"))
                fail_msg("fresh rows case %d: attn_decode_keys did not run", index);
            remove(path);
        }
        nt_run(d, record_separate, &sep);
        nt_tensor *all[5] = {&out[0], &out[1], &kc[0], &kc[1], &qr};
        for (int i = 0; i < 5; i++)
            nt_tensor_download(all[i]);
        nt_tensor_download(&vc[0]);
        nt_tensor_download(&vc[1]);
        int64_t row = hq * D, at;
        for (int64_t r = 0; r < B; r++) {
            if (shared && r < 2)
                continue;
            if ((at = fresh_differs(out[0].values + r * row, out[1].values + r * row, row, exact, 1e-5f)) >= 0)
                fail_msg("fresh rows case %d, step %lld: dst[%lld, %lld] is %.9g, the separate ops' %.9g", index,
                         (long long)step, (long long)r, (long long)at, (double)out[0].values[r * row + at],
                         (double)out[1].values[r * row + at]);
        }
        for (int64_t s = 0; s < S; s++) {
            if (shared && s == slot[0])
                continue;
            if (memcmp(vc[0].bytes + s * slot_bytes, vc[1].bytes + s * slot_bytes, slot_bytes))
                fail_msg("fresh rows case %d, step %lld: slot %lld's values differ from the separate ops'", index,
                         (long long)step, (long long)s);
            if ((at = fresh_differs(kc[0].values + s * kvn, kc[1].values + s * kvn, kvn, exact, ktol)) >= 0)
                fail_msg("fresh rows case %d, step %lld: slot %lld's key element %lld is %.9g, the separate ops' %.9g",
                         index, (long long)step, (long long)s, (long long)at, (double)kc[0].values[s * kvn + at],
                         (double)kc[1].values[s * kvn + at]);
        }
        if (shared)
            break;
        char what[96];
        snprintf(what, sizeof what, "fresh rows case %d, step %lld", index, (long long)step);
        nu_attention_desc ad = {.positions = &pt.t, .slots = &st.t, .window = fc->window, .softcap = fc->softcap};
        nt_attn ref = {qr.values, kc[1].values, vc[1].values, B, hq, hkv, D, S, P, &ad, pos, slot};
        nt_expect_attention(&out[0], &ref, what);
    }
    NT_OK(nu_graph_free(g));
    fresh_inputs_free(&in, fc->stacked);
    nt_tensor *all[12] = {&kc[0], &kc[1], &vc[0], &vc[1], &ff, &qw, &kw, &qn, &kn, &qr, &out[0], &out[1]};
    for (int i = 0; i < 12; i++)
        nt_tensor_free(all[i]);
    nt_tensor_free(&pt);
    nt_tensor_free(&st);
    nt_close(d);
}

/* The fresh per-row form (nu_attention_desc.fresh_k with positions and slots: a batched decode
 * step's RoPE and cache writes in attention's dispatch) against nu_op_rope, nu_op_kv_write and
 * the per-row form (fresh_rows_case): head dims 64 and 128, GQA 1 to 8, F16, BF16 and F32 caches,
 * interleaved and half pairs (with frequency factors and scaling) and no RoPE, windows and a
 * softcap, both norms and the key's only, both decode kernels, the splits merged by
 * attn_combine.comp and by the last split (forced, and chosen for one query head a workgroup),
 * stacked and separate q, k and v. */
static void fresh_rows_against_separate_ops(void **state)
{
    (void)state;
    const fresh_case cases[] = {
        {8, 2, 64, NU_DTYPE_F16, 1, false, false, true, 0, 0, {.splits = 3, .combine = NU_ATTENTION_COMBINE_SEPARATE}},
        {16, 4, 128, NU_DTYPE_BF16, 2, false, false, false, 5, 0, {.splits = 3, .combine = NU_ATTENTION_COMBINE_FUSED}},
        {4, 4, 64, NU_DTYPE_F32, 0, false, false, true, 7, 2, {.no_subgroup = true, .splits = 2,
                                                                .combine = NU_ATTENTION_COMBINE_FUSED}},
        {8, 2, 128, NU_DTYPE_F16, 2, true, true, true, 0, 0, {.splits = 3, .combine = NU_ATTENTION_COMBINE_FUSED}},
        {8, 4, 64, NU_DTYPE_F32, 1, false, true, false, 16, 0, {.no_subgroup = true, .splits = 4,
                                                                 .combine = NU_ATTENTION_COMBINE_SEPARATE}},
        {8, 1, 128, NU_DTYPE_F16, 1, false, false, false, 0, 0, {.heads = 1}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        fresh_rows_case(&cases[i], (int)i);
}

/* The fresh per-row form with a key a thread (tune.by_key: attn_decode_keys.comp, seen in the
 * trace), against the separate ops with it (fresh_rows_case): F16 caches, head dims 128 and 64,
 * GQA 4 and 2, half pairs with both norms over stacked q, k and v, interleaved pairs with a window
 * and the fused merge. Needs subgroup arithmetic. */
static void fresh_rows_a_key_a_thread(void **state)
{
    (void)state;
    nt_close(nt_open_subgroup_arithmetic("fresh_rows_a_key_a_thread"));
    const fresh_case cases[] = {
        {8, 2, 128, NU_DTYPE_F16, 2, true, true, true, 0, 0, {.by_key = true, .splits = 3}},
        {8, 4, 64, NU_DTYPE_F16, 1, false, false, false, 5, 0, {.by_key = true, .splits = 3,
                                                                 .combine = NU_ATTENTION_COMBINE_FUSED}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        fresh_rows_case(&cases[i], 10 + (int)i);
}

/* What the fresh form refuses in the per-row form (and the scalar form's several rows), each by
 * name; the same call without the fault records. */
static void fresh_rows_refusals(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 70;
    int64_t qs[3] = {3, 8, 64}, ns[3] = {3, 2, 64}, n1[3] = {1, 2, 64}, cs[4] = {4, 16, 2, 64};
    nt_tensor q = nt_tensor_random(d, NU_DTYPE_F32, 3, qs, 0, -1, 1, &seed);
    nt_tensor kn = nt_tensor_random(d, NU_DTYPE_F32, 3, ns, 0, -1, 1, &seed);
    nt_tensor vn = nt_tensor_random(d, NU_DTYPE_F32, 3, ns, 0, -1, 1, &seed);
    nt_tensor k1 = nt_tensor_random(d, NU_DTYPE_F32, 3, n1, 0, -1, 1, &seed);
    nt_tensor kc = nt_tensor_random(d, NU_DTYPE_F16, 4, cs, 0, -1, 1, &seed);
    nt_tensor vc = nt_tensor_random(d, NU_DTYPE_F16, 4, cs, 0, -1, 1, &seed);
    nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 3, qs, 0);
    int32_t p[3] = {1, 2, 3};
    nt_tensor pos = nt_tensor_i32(d, p, 3, 0, 1);
    int64_t wide[3] = {3, 2, 128};
    nt_tensor vw = nt_tensor_random(d, NU_DTYPE_F32, 3, wide, 0, -1, 1, &seed);
    nu_tensor apart; /* heads 128 apart: not head_dim */
    NT_OK(nu_tensor_slice(&vw.t, 2, 0, 64, &apart));
    nu_tensor on_cache = nu_tensor_make(kc.t.buffer, 0, NU_DTYPE_I32, 1, (int64_t[1]){3}); /* I32 over k's bytes */
    nu_rope_desc rope = {.layout = NU_ROPE_HALF}, moved = {.layout = NU_ROPE_HALF, .positions = &pos.t};
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    nu_attention_desc ok = {.positions = &pos.t, .slots = &pos.t, .fresh_k = &kn.t, .fresh_v = &vn.t, .fresh_rope = &rope};
    NT_OK(nu_op_attention(c, &dst.t, &q.t, &kc.t, &vc.t, &ok));
    struct {
        nu_attention_desc ad;
        const nu_tensor *v;
        const char *msg;
    } bad[] = {
        {{.positions = &pos.t, .slots = &pos.t, .fresh_k = &kn.t}, &vc.t, "fresh_v is NULL"},
        {{.positions = &pos.t, .fresh_k = &k1.t, .fresh_v = &vn.t}, &vc.t, "fresh_k must be [tokens, kv_heads, head_dim]"},
        {{.positions = &pos.t, .fresh_k = &kn.t, .fresh_v = &apart}, &vc.t, "fresh_v's heads must be contiguous"},
        {{.positions = &pos.t, .fresh_k = &kn.t, .fresh_v = &vn.t, .fresh_rope = &moved}, &vc.t, "position_offset"},
        {{.positions = &pos.t, .fresh_k = &kn.t, .fresh_v = &vn.t, .tune.path = NU_ATTENTION_PATH_PREFILL}, &vc.t,
         "decode path"},
        {{.positions = &on_cache, .fresh_k = &kn.t, .fresh_v = &vn.t}, &vc.t, "positions overlaps k"},
        {{.positions = &pos.t, .slots = &on_cache, .fresh_k = &kn.t, .fresh_v = &vn.t}, &vc.t, "slots overlaps k"},
        {{.positions = &pos.t, .fresh_k = &kn.t, .fresh_v = &vn.t}, &kc.t, "may not overlap"},
        {{.kv_length = 4, .fresh_k = &kn.t, .fresh_v = &vn.t}, &vc.t, "scalar form with 3 rows"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_attention(c, &dst.t, &q.t, &kc.t, bad[i].v, &bad[i].ad));
        if (!strstr(nu_error_message(d), bad[i].msg))
            fail_msg("fresh refusal %zu: the message '%s' does not name %s", i, nu_error_message(d), bad[i].msg);
    }
    NT_OK(nu_commands_commit(c));
    NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
    nu_commands_free(c);
    nt_tensor *all[9] = {&q, &kn, &vn, &k1, &kc, &vc, &dst, &pos, &vw};
    for (int i = 0; i < 9; i++)
        nt_tensor_free(all[i]);
    nt_close(d);
}

/* The path the op takes by itself (tune.path AUTO): the decode path for rows with slots no more
 * than the cache's slots (a batched decode step, each row its own sequence: 6 rows of 6 slots),
 * the prefill path for more (a prompt's rows: 12 rows of one slot in a cache of 6); traced, and
 * checked against the reference. */
static void auto_path_by_rows_and_slots(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 47;
    int32_t pos6[6], slot6[6], pos12[12], slot12[12];
    for (int i = 0; i < 6; i++)
        pos6[i] = 10 + 7 * i, slot6[i] = 5 - i;
    for (int i = 0; i < 12; i++)
        pos12[i] = 30 + i, slot12[i] = 3;
    const batch_case cases[2] = {
        {6, 64, 8, 2, 64, 6, pos6, slot6, 0, 0, false, 0, 0, 0, 0, {0}},
        {6, 64, 8, 2, 64, 12, pos12, slot12, 0, 0, false, 0, 0, 0, 0, {0}},
    };
    char path[512];
    snprintf(path, sizeof path, "%s/nuvec-attn-auto-%d.json", nt_tmp_dir(), (int)getpid());
    for (int i = 0; i < 2; i++) {
        NT_OK(nu_trace_start(d, path));
        run_batch(d, &cases[i], NU_DTYPE_F32, NU_DTYPE_F16, NU_DTYPE_F16, NU_DTYPE_F32, 1, false, &seed,
                  i ? "auto, 12 rows of one slot" : "auto, 6 rows of 6 slots");
        NT_OK(nu_trace_stop(d));
        bool prefill = nt_trace_has(path, "attn_prefill");
        if (prefill != (i == 1))
            fail_msg("%s rows with slots took the %s path", i ? "12" : "6", prefill ? "prefill" : "decode");
    }
    nt_close(d);
}

/* What the per-row form, windows and softcaps refuse, each by name. */
static void refusals(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    uint64_t seed = 48;
    int64_t qs[3] = {2, 8, 64}, ks[4] = {3, 16, 2, 64}, k5[3] = {16, 2, 64};
    nt_tensor q = nt_tensor_random(d, NU_DTYPE_F32, 3, qs, 0, -1, 1, &seed);
    nt_tensor k = nt_tensor_random(d, NU_DTYPE_F16, 4, ks, 0, -1, 1, &seed);
    nt_tensor k3 = nt_tensor_random(d, NU_DTYPE_F16, 3, k5, 0, -1, 1, &seed);
    nt_tensor dst = nt_tensor_output(d, NU_DTYPE_F32, 3, qs, 0);
    int32_t p[16] = {1, 2, 3};
    nt_tensor pos = nt_tensor_i32(d, p, 2, 0, 1), pos3 = nt_tensor_i32(d, p, 3, 0, 1), pos16 = nt_tensor_i32(d, p, 16, 0, 1);
    nt_tensor posf = nt_tensor_random(d, NU_DTYPE_F32, 1, (int64_t[1]){2}, 0, 0, 3, &seed);
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    nu_attention_desc ok = {.positions = &pos.t, .slots = &pos.t, .window = 4, .softcap = 30};
    NT_OK(nu_op_attention(c, &dst.t, &q.t, &k.t, &k.t, &ok));
    nu_attention_desc scalar_ok = {.causal = true, .kv_length = 16, .window = 4, .softcap = 30};
    NT_OK(nu_op_attention(c, &dst.t, &q.t, &k.t, &k.t, &scalar_ok)); /* slot 0 of the rank-4 cache */
    struct {
        nu_attention_desc ad;
        const char *msg;
    } bad[] = {
        {{.positions = &posf.t}, "positions is F32"},
        {{.positions = &pos3.t}, "positions must be I32 [2]"},
        {{.positions = &pos.t, .slots = &pos3.t}, "slots must be I32 [2]"},
        {{.positions = &pos.t, .kv_length = 16}, "belong to the scalar form"},
        {{.positions = &pos.t, .q_position = 1}, "belong to the scalar form"},
        {{.slots = &pos.t, .causal = true, .kv_length = 16}, "needs desc->positions"},
        {{.kv_length = 16, .window = 8}, "needs causal"},
        {{.positions = &pos.t, .softcap = -1}, "softcap"},
        {{.positions = &pos.t, .softcap = NAN}, "softcap"},
        {{.positions = &pos.t, .softcap = INFINITY}, "softcap"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_attention(c, &dst.t, &q.t, &k.t, &k.t, &bad[i].ad));
        if (!strstr(nu_error_message(d), bad[i].msg))
            fail_msg("refusal %zu: the message '%s' does not name %s", i, nu_error_message(d), bad[i].msg);
    }
    /* k and v of different ranks; dst over the positions. */
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_attention(c, &dst.t, &q.t, &k.t, &k3.t, &ok));
    assert_non_null(strstr(nu_error_message(d), "v is"));
    nu_tensor over = nu_tensor_make(pos16.t.buffer, 16, NU_DTYPE_F32, 3, (int64_t[3]){1, 1, 8});
    nu_tensor q1, p1;
    NT_OK(nu_tensor_slice(&q.t, 0, 0, 1, &q1));
    NT_OK(nu_tensor_slice(&q1, 2, 0, 8, &q1));
    NT_OK(nu_tensor_slice(&q1, 1, 0, 1, &q1));
    NT_OK(nu_tensor_slice(&pos16.t, 0, 8, 1, &p1));
    int64_t k8[4] = {3, 16, 1, 8};
    nt_tensor kk = nt_tensor_random(d, NU_DTYPE_F32, 4, k8, 0, -1, 1, &seed);
    nu_attention_desc od = {.positions = &p1};
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_op_attention(c, &over, &q1, &kk.t, &kk.t, &od));
    assert_non_null(strstr(nu_error_message(d), "overlaps positions"));
    NT_OK(nu_commands_commit(c));
    NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
    nu_commands_free(c);
    nt_tensor_free(&q);
    nt_tensor_free(&k);
    nt_tensor_free(&k3);
    nt_tensor_free(&kk);
    nt_tensor_free(&dst);
    nt_tensor_free(&pos);
    nt_tensor_free(&pos3);
    nt_tensor_free(&pos16);
    nt_tensor_free(&posf);
    nt_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decode_rows_of_many_sequences),
        cmocka_unit_test(decode_rows_a_key_a_thread),
        cmocka_unit_test(prefill_chunk_of_one_sequence),
        cmocka_unit_test(mixed_batch),
        cmocka_unit_test(sliding_windows),
        cmocka_unit_test(softcaps),
        cmocka_unit_test(every_head_dim),
        cmocka_unit_test(one_graph_serves_changing_batches),
        cmocka_unit_test(fresh_rows_against_separate_ops),
        cmocka_unit_test(fresh_rows_a_key_a_thread),
        cmocka_unit_test(fresh_rows_refusals),
        cmocka_unit_test(auto_path_by_rows_and_slots),
        cmocka_unit_test(refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
