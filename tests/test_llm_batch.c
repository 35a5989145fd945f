/* test_llm_batch.c: a batch of sequences as the unit of work (nu_llm_model_step and the sequence
 * slots): aidreams260K's greedy continuations of prompts of different lengths, decoded together in
 * one batch, give each exactly the ids (and within 1e-4 the logits) it gets alone; sequences join
 * and leave the batch between steps (a step mixing a new sequence's prefill with the others'
 * decode rows), a released slot is reused, a new sequence takes over a released slot's cached
 * prefix (only the rest is prefilled) and continues as it would alone; batches past
 * NU_MATVEC_MAX_ROWS rows (by groups of rows, and on the matrix products with matmul_rows 16; per-row
 * attention) and padded buckets (3 rows in a graph of 4) too; batched decode with attention's fresh
 * per-row form and without it give the same ids (and in F32 the same logits); greedy steps in one
 * call (nu_llm_model_step_greedy) give each sequence the ids it gets alone; refusals name the
 * problem. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm_files.h"
#include "llm_util.h"
#include "nuvec_llm.h"
#include <nuvec/trace.h>

enum { V = 512, GEN = 12, MAX_PROMPT = 24, SEQS = 12 };

/* Prompt s: BOS then s * 2 + 2 ids of a fixed pattern (lengths 3 to 25). */
static uint32_t prompt(int s, int32_t *out)
{
    uint32_t n = (uint32_t)(s % 6) * 4 + 3;
    out[0] = 1;
    for (uint32_t i = 1; i < n; i++)
        out[i] = (int32_t)(3 + (s * 131 + i * 37) % 500);
    return n;
}

static int32_t argmax(const float *x)
{
    int32_t best = 0;
    for (int i = 1; i < V; i++)
        best = x[i] > x[best] ? i : best;
    return best;
}

/* The ids and logits sequence s gets alone: prefill, then GEN - 1 decode steps. */
static void alone(nu_llm_model *m, int s, int32_t *ids, float *logits)
{
    int32_t p[MAX_PROMPT + 2];
    uint32_t n = prompt(s, p);
    nu_llm_model_reset(m);
    LLM_OK(nu_llm_model_prefill(m, p, n, logits));
    ids[0] = argmax(logits);
    for (int k = 1; k < GEN; k++) {
        LLM_OK(nu_llm_model_decode(m, ids[k - 1], logits + (size_t)k * V));
        ids[k] = argmax(logits + (size_t)k * V);
    }
}

typedef struct seq {
    int id;           /* which prompt */
    uint32_t slot;
    int produced;     /* tokens generated so far */
    int32_t ids[GEN];
    float logits[GEN * V];
} seq;

/* A step for the running sequences: each new one's prompt rows (its last asks for logits), each
 * running one's last token; afterwards every one has one more token. */
static void step(nu_llm_model *m, seq **run, int count)
{
    nu_llm_row rows[SEQS * (MAX_PROMPT + 2)];
    uint32_t n = 0;
    for (int i = 0; i < count; i++) {
        seq *q = run[i];
        if (q->produced == 0) {
            int32_t p[MAX_PROMPT + 2];
            uint32_t pn = prompt(q->id, p);
            uint32_t have = nu_llm_model_seq_length(m, q->slot, NULL); /* a reused prefix */
            for (uint32_t j = have; j < pn; j++)
                rows[n++] = (nu_llm_row){p[j], q->slot, j + 1 == pn ? NU_LLM_OUTPUT_LOGITS : NU_LLM_OUTPUT_NONE};
        } else {
            rows[n++] = (nu_llm_row){q->ids[q->produced - 1], q->slot, NU_LLM_OUTPUT_LOGITS};
        }
    }
    float *logits = malloc(sizeof(float) * V * count);
    LLM_OK(nu_llm_model_step(m, rows, n, logits, NULL));
    for (int i = 0; i < count; i++) {
        seq *q = run[i];
        memcpy(q->logits + (size_t)q->produced * V, logits + (size_t)i * V, sizeof(float) * V);
        q->ids[q->produced] = argmax(logits + (size_t)i * V);
        q->produced++;
    }
    free(logits);
}

/* Fails unless q has ids and its logits are within tolerance of logits; returns how far they are. */
static double expect_alone_within(const seq *q, const int32_t *ids, const float *logits, double tolerance)
{
    if (memcmp(q->ids, ids, sizeof q->ids)) {
        char a[256] = "", b[256] = "";
        for (int k = 0; k < GEN; k++) {
            snprintf(a + strlen(a), sizeof a - strlen(a), " %d", q->ids[k]);
            snprintf(b + strlen(b), sizeof b - strlen(b), " %d", ids[k]);
        }
        fail_msg("sequence %d in the batch:%s; alone:%s", q->id, a, b);
    }
    double worst = 0;
    for (int i = 0; i < GEN * V; i++)
        worst = fmax(worst, fabs((double)q->logits[i] - logits[i]));
    if (worst > tolerance)
        fail_msg("sequence %d's logits in the batch differ from alone by %g (tolerance %g)", q->id, worst, tolerance);
    return worst;
}

static void expect_alone(const seq *q, const int32_t *ids, const float *logits)
{
    (void)expect_alone_within(q, ids, logits, 1e-4);
}

/* 10 sequences (prompts 2 to 11) decoded together (a bucket of 16) with options o: their ids and
 * logits into out[0..9]. */
static void ten_together(nu_device *d, const nu_llm_model_options *o, seq *out)
{
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, llm_model_path("aidreams260K/model.gguf"), o, &m));
    seq *run[10];
    for (int i = 0; i < 10; i++) {
        out[i] = (seq){.id = i + 2};
        LLM_OK(nu_llm_model_seq_acquire(m, NULL, 0, &out[i].slot, NULL));
        run[i] = &out[i];
    }
    while (out[0].produced < GEN)
        step(m, run, 10);
    nu_llm_model_free(m);
}

static void batch_gives_what_each_gets_alone(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    const char *path = llm_model_path("aidreams260K/model.gguf");
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, path, NULL, &m));
    static int32_t ref_ids[SEQS][GEN];
    static float ref_logits[SEQS][GEN * V];
    for (int s = 0; s < SEQS; s++)
        alone(m, s, ref_ids[s], ref_logits[s]);
    nu_llm_model_free(m);

    nu_llm_model_options o = {.slots = 4};
    LLM_OK(nu_llm_model_open(d, path, &o, &m));
    assert_int_equal(nu_llm_model_slots(m), 4);
    LLM_OK(nu_llm_model_seq_release(m, 0)); /* slot 0 too, for this test's sequences */
    static seq seqs[SEQS];
    seq *run[SEQS];
    /* 4 sequences of different prompt lengths, together from the first step. */
    for (int i = 0; i < 4; i++) {
        seqs[i] = (seq){.id = i};
        LLM_OK(nu_llm_model_seq_acquire(m, NULL, 0, &seqs[i].slot, NULL));
        run[i] = &seqs[i];
    }
    int count = 4;
    for (int k = 0; k < 5; k++)
        step(m, run, count);
    /* Sequence 0 leaves after 5 tokens; sequence 4 joins in its slot, its prefill in the same
     * step as the other three's decode rows. */
    uint32_t freed = seqs[0].slot;
    int32_t keep[GEN];
    memcpy(keep, seqs[0].ids, sizeof keep);
    LLM_OK(nu_llm_model_seq_release(m, freed));
    seqs[4] = (seq){.id = 4};
    LLM_OK(nu_llm_model_seq_acquire(m, NULL, 0, &seqs[4].slot, NULL));
    assert_int_equal(seqs[4].slot, freed); /* the released slot is reused */
    run[0] = &seqs[4];
    while (seqs[1].produced < GEN)
        step(m, run, count);
    for (int i = 1; i < 4; i++)
        expect_alone(&seqs[i], ref_ids[i], ref_logits[i]);
    assert_memory_equal(keep, ref_ids[0], 5 * sizeof *keep); /* sequence 0's first five */
    /* 3 rows (a bucket of 4: one padded row that must write nothing). */
    seq *three[3] = {&seqs[4]};
    count = 1;
    for (int i = 1; i < 3; i++) {
        LLM_OK(nu_llm_model_seq_release(m, seqs[i].slot));
        seqs[i + 4] = (seq){.id = i + 4};
        LLM_OK(nu_llm_model_seq_acquire(m, NULL, 0, &seqs[i + 4].slot, NULL));
        three[count++] = &seqs[i + 4];
    }
    while (seqs[4].produced < GEN)
        step(m, three, 3);
    while (seqs[5].produced < GEN)
        step(m, three + 1, 2);
    for (int i = 4; i < 7; i++)
        expect_alone(&seqs[i], ref_ids[i], ref_logits[i]);
    nu_llm_model_free(m);
    /* 10 sequences at once: decode rows past NU_MATVEC_MAX_ROWS (a bucket of 16): by groups of 8
     * rows (the default below matmul_rows), then on the matrix products (matmul_rows 16), then
     * those with F16 inputs (prefill_f16 1, as devices with matrix units take them: the norms,
     * RoPE, attention and the GLU write F16 for the next op; q|k|v and gate|up one product each;
     * against F32 alone, within 0.01). */
    o.slots = SEQS;
    for (int products = 0; products < 3; products++) {
        o.matmul_rows = products ? 16 : 0;
        o.prefill_f16 = products == 2 ? 1 : 0;
        ten_together(d, &o, seqs);
        double worst = 0;
        for (int i = 0; i < 10; i++)
            worst = fmax(worst, expect_alone_within(&seqs[i], ref_ids[i + 2], ref_logits[i + 2],
                                                    products == 2 ? 0.01 : 1e-4));
        if (products == 2 && worst == 0)
            fail_msg("F16 inputs gave F32's logits exactly: the F16 path did not run");
        printf("10 sequences, %s: logits within %g of alone\n",
               (const char *[]){"groups of rows", "matrix products", "matrix products, F16 inputs"}[products], worst);
    }
    nt_close(d);
}

/* The largest difference between the logits of a and b (10 sequences each); fails unless their
 * ids are the same. */
static double ten_differ(const seq *a, const seq *b, const char *what)
{
    double worst = 0;
    for (int i = 0; i < 10; i++) {
        if (memcmp(a[i].ids, b[i].ids, sizeof a[i].ids))
            fail_msg("%s: sequence %d's ids differ", what, a[i].id);
        for (int k = 0; k < GEN * V; k++)
            worst = fmax(worst, fabs((double)a[i].logits[k] - b[i].logits[k]));
    }
    return worst;
}

/* ten_together under a trace (nuvec/trace.h): how many dispatches of `kernel` ran. */
static int ten_together_ran(nu_device *d, const nu_llm_model_options *o, seq *out, const char *kernel)
{
    char path[512], want[64];
    snprintf(path, sizeof path, "%s/llm_batch_glu_trace.json", nt_tmp_dir());
    NT_OK(nu_trace_start(d, path));
    ten_together(d, o, out);
    NT_OK(nu_trace_stop(d));
    char *text = nt_read_file(path), *w = text;
    for (const char *c = text; *c; c++) /* the writer's spacing aside */
        if (*c != ' ' && *c != '\t' && *c != '\n' && *c != '\r')
            *w++ = *c;
    *w = 0;
    snprintf(want, sizeof want, "\"name\":\"%s", kernel);
    int count = 0;
    for (const char *at = strstr(text, want); at; at = strstr(at + 1, want))
        count++;
    free(text);
    remove(path);
    return count;
}

/* A batched step's stacked gate|up matrix product applying the GLU in its own last dispatch
 * (product_glu, the default: nu_matmul_desc.glu_stacked) and the GLU as an op of its own
 * (product_glu -1): 10 sequences on the matrix products (matmul_rows 16), in F32 and with F16
 * inputs: the same ids, the logits within 1e-5 (F32: the same product and the same F32
 * activation; only how the compiler schedules them may differ) and 1e-3 (F16); traced, the
 * default runs fewer swiglu dispatches (the batched steps' go). */
static void the_products_glu_and_the_glu_op_agree(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    static seq fused[10], apart[10];
    const char *names[2] = {"matrix products", "matrix products, F16 inputs"};
    nu_llm_model_options o = {.slots = SEQS, .matmul_rows = 16};
    for (int f16 = 0; f16 < 2; f16++) {
        o.prefill_f16 = f16 ? 1 : 0;
        o.product_glu = 0;
        int with = ten_together_ran(d, &o, fused, "swiglu");
        o.product_glu = -1;
        int without = ten_together_ran(d, &o, apart, "swiglu");
        if (!(with < without)) /* (the prompts' prefill passes run swiglu either way) */
            fail_msg("%s: %d swiglu dispatches with the product's GLU, %d without", names[f16], with, without);
        double worst = ten_differ(fused, apart, names[f16]);
        if (!(worst <= (f16 ? 1e-3 : 1e-5)))
            fail_msg("%s: the product's GLU gives logits %g from the GLU op's", names[f16], worst);
        printf("10 sequences, %s: the product's GLU within %g of the GLU op's\n", names[f16], worst);
    }
    nt_close(d);
}

/* Batched decode with attention's fresh per-row form (fresh_attention 1: each row's RoPE and
 * cache writes in attention's dispatch) and without it (the default, 0, and -1: nu_op_rope and
 * nu_op_kv_write before attention), 10 sequences by groups of rows, on the matrix products, and
 * those with F16 inputs: the same ids; in F32 the same logits bit for bit (the fresh form gives
 * the separate ops' bits); with F16 inputs within 0.01 but not equal (the fresh form reads q in
 * F32 where the separate ops round the rotated q to F16: so the fresh form ran). The default
 * gives the separate ops' logits exactly, and the developer override NUVEC_LLM_FRESH_ROWS the
 * fresh form's. */
static void fresh_form_and_separate_ops_agree(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    static seq fresh[10], separate[10], overridden[10], plain[10];
    const char *names[3] = {"groups of rows", "matrix products", "matrix products, F16 inputs"};
    nu_llm_model_options o = {.slots = SEQS};
    for (int products = 0; products < 3; products++) {
        o.matmul_rows = products ? 16 : 0;
        o.prefill_f16 = products == 2 ? 1 : 0;
        o.fresh_attention = 1;
        ten_together(d, &o, fresh);
        o.fresh_attention = -1;
        ten_together(d, &o, separate);
        double worst = ten_differ(fresh, separate, names[products]);
        if (products < 2 ? worst != 0 : !(worst > 0 && worst <= 0.01))
            fail_msg("%s: the fresh form's logits are %g from the separate ops'", names[products], worst);
        printf("10 sequences, %s: the fresh form's logits within %g of the separate ops'\n", names[products], worst);
    }
    o.fresh_attention = 0; /* the last options: F16 inputs */
    ten_together(d, &o, plain);
    if (ten_differ(plain, separate, "the default") != 0)
        fail_msg("the default did not give the separate ops' logits");
    assert_int_equal(setenv("NUVEC_LLM_FRESH_ROWS", "1", 1), 0);
    ten_together(d, &o, overridden);
    unsetenv("NUVEC_LLM_FRESH_ROWS");
    if (ten_differ(overridden, fresh, "NUVEC_LLM_FRESH_ROWS") != 0)
        fail_msg("NUVEC_LLM_FRESH_ROWS did not give the fresh form's logits");
    nt_close(d);
}

/* A new sequence takes over the free slot whose cached tokens share the longest prefix with it:
 * only the rest is prefilled, and it continues as it would alone. */
static void prefix_reuse(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    nu_llm_model_options o = {.slots = 3};
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, llm_model_path("aidreams260K/model.gguf"), &o, &m));
    int32_t ref_ids[GEN];
    static float ref_logits[GEN * V];
    alone(m, 5, ref_ids, ref_logits);
    int32_t p[MAX_PROMPT + 2];
    uint32_t n = prompt(5, p);
    /* A first sequence with this prompt and 3 tokens more, then released. */
    uint32_t a, b, reused;
    LLM_OK(nu_llm_model_seq_acquire(m, NULL, 0, &a, &reused));
    assert_int_equal(reused, 0);
    static seq first;
    first = (seq){.id = 5, .slot = a};
    seq *run[1] = {&first};
    for (int k = 0; k < 4; k++)
        step(m, run, 1);
    LLM_OK(nu_llm_model_seq_release(m, a));
    /* Another slot holds something else. */
    LLM_OK(nu_llm_model_seq_acquire(m, NULL, 0, &b, NULL));
    assert_int_not_equal(a, b); /* an empty slot rather than a's cached prefix */
    nu_llm_row other[2] = {{1, b, NU_LLM_OUTPUT_NONE}, {9, b, NU_LLM_OUTPUT_NONE}};
    LLM_OK(nu_llm_model_step(m, other, 2, NULL, NULL));
    LLM_OK(nu_llm_model_seq_release(m, b));
    /* The prompt again: slot a, its n prompt tokens cached (not the 3 generated after them: the
     * prefix is the prompt's). */
    uint32_t c;
    LLM_OK(nu_llm_model_seq_acquire(m, p, n - 1, &c, &reused));
    assert_int_equal(c, a);
    assert_int_equal(reused, n - 1);
    assert_int_equal(nu_llm_model_seq_length(m, c, NULL), n - 1);
    static seq again;
    again = (seq){.id = 5, .slot = c};
    run[0] = &again;
    while (again.produced < GEN)
        step(m, run, 1);
    expect_alone(&again, ref_ids, ref_logits);
    /* Truncate: keep the prompt, decode the rest again. */
    LLM_OK(nu_llm_model_seq_truncate(m, c, n));
    nu_llm_row r = {ref_ids[0], c, NU_LLM_OUTPUT_ARGMAX};
    int32_t id;
    LLM_OK(nu_llm_model_step(m, &r, 1, NULL, &id));
    assert_int_equal(id, ref_ids[1]);
    nu_llm_model_free(m);
    nt_close(d);
}

/* nu_llm_model_step_greedy: 4 sequences of different prompt lengths, prefilled in one step, then
 * decoded greedily 5 steps in one call (the ids on the GPU between steps), then 3 of them (a
 * bucket of 4 with a padding row) the rest in another: every id is the one each sequence gets
 * alone, and each slot holds its prompt and the ids fed; refusals name the problem and run nothing. */
static void greedy_steps_give_the_ids_alone(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    const char *path = llm_model_path("aidreams260K/model.gguf");
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, path, NULL, &m));
    static int32_t ref_ids[4][GEN];
    static float ref_logits[GEN * V];
    for (int s = 0; s < 4; s++)
        alone(m, s, ref_ids[s], ref_logits);
    nu_llm_model_free(m);

    nu_llm_model_options o = {.slots = 4};
    LLM_OK(nu_llm_model_open(d, path, &o, &m));
    LLM_OK(nu_llm_model_seq_release(m, 0));
    uint32_t slot[4], plen[4];
    nu_llm_row rows[4 * (MAX_PROMPT + 2)];
    uint32_t n = 0;
    for (int i = 0; i < 4; i++) {
        int32_t p[MAX_PROMPT + 2];
        LLM_OK(nu_llm_model_seq_acquire(m, NULL, 0, &slot[i], NULL));
        plen[i] = prompt(i, p);
        for (uint32_t j = 0; j < plen[i]; j++)
            rows[n++] = (nu_llm_row){p[j], slot[i], j + 1 == plen[i] ? NU_LLM_OUTPUT_ARGMAX : NU_LLM_OUTPUT_NONE};
    }
    int32_t first[4], ids[4 * GEN];
    LLM_OK(nu_llm_model_step(m, rows, n, NULL, first));
    for (int i = 0; i < 4; i++) {
        assert_int_equal(first[i], ref_ids[i][0]);
        rows[i] = (nu_llm_row){first[i], slot[i], NU_LLM_OUTPUT_NONE};
    }
    LLM_OK(nu_llm_model_step_greedy(m, rows, 4, 5, ids));
    for (int k = 0; k < 5; k++)
        for (int i = 0; i < 4; i++)
            if (ids[k * 4 + i] != ref_ids[i][k + 1])
                fail_msg("step %d, sequence %d: id %d, alone %d", k, i, ids[k * 4 + i], ref_ids[i][k + 1]);
    for (int i = 0; i < 4; i++) { /* the prompt, then the ids fed: the first and steps 0 .. 3's */
        const int32_t *t;
        assert_int_equal(nu_llm_model_seq_length(m, slot[i], &t), plen[i] + 5);
        assert_memory_equal(t + plen[i], ref_ids[i], 5 * sizeof *t);
    }
    /* sequence 0 leaves; the other three go on from step 4's ids, in a bucket of 4 */
    LLM_OK(nu_llm_model_seq_release(m, slot[0]));
    for (int i = 1; i < 4; i++)
        rows[i - 1] = (nu_llm_row){ids[4 * 4 + i], slot[i], NU_LLM_OUTPUT_NONE};
    LLM_OK(nu_llm_model_step_greedy(m, rows, 3, GEN - 6, ids));
    for (int k = 0; k < GEN - 6; k++)
        for (int i = 1; i < 4; i++)
            if (ids[k * 3 + i - 1] != ref_ids[i][k + 6])
                fail_msg("second call, step %d, sequence %d: id %d, alone %d", k, i, ids[k * 3 + i - 1],
                         ref_ids[i][k + 6]);
    /* refusals: a slot twice, no steps, a slot not held, NULL ids, more steps than positions */
    uint32_t len1 = nu_llm_model_seq_length(m, slot[1], NULL);
    nu_llm_row twice[2] = {{1, slot[1], NU_LLM_OUTPUT_NONE}, {2, slot[1], NU_LLM_OUTPUT_NONE}};
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_model_step_greedy(m, twice, 2, 1, ids));
    assert_non_null(strstr(nu_llm_error_message(), "two rows"));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_model_step_greedy(m, twice, 1, 0, ids));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_model_step_greedy(m, twice, 1, 1, NULL));
    nu_llm_row gone = {1, slot[0], NU_LLM_OUTPUT_NONE};
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_model_step_greedy(m, &gone, 1, 1, ids));
    assert_non_null(strstr(nu_llm_error_message(), "not held"));
    LLM_STATUS(NU_ERROR_OUT_OF_RANGE, nu_llm_model_step_greedy(m, twice, 1, 1u << 30, ids));
    assert_int_equal(nu_llm_model_seq_length(m, slot[1], NULL), len1); /* nothing ran */
    nu_llm_model_free(m);
    nt_close(d);
}

static void refusals(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    nu_llm_model_options o = {.slots = 2, .max_positions = 16};
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, llm_model_path("aidreams260K/model.gguf"), &o, &m));
    uint32_t s;
    LLM_OK(nu_llm_model_seq_acquire(m, NULL, 0, &s, NULL));
    assert_int_equal(s, 1);
    uint32_t none;
    LLM_STATUS(NU_ERROR_BUSY, nu_llm_model_seq_acquire(m, NULL, 0, &none, NULL));
    assert_int_equal(none, UINT32_MAX);
    float logits[V];
    int32_t id;
    nu_llm_row bad_slot = {1, 7, NU_LLM_OUTPUT_NONE}, bad_token = {512, s, NU_LLM_OUTPUT_NONE},
               no_out = {1, s, NU_LLM_OUTPUT_LOGITS};
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_model_step(m, &bad_slot, 1, NULL, NULL));
    assert_non_null(strstr(nu_llm_error_message(), "slot 7"));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_model_step(m, &bad_token, 1, NULL, NULL));
    assert_non_null(strstr(nu_llm_error_message(), "512"));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_model_step(m, &no_out, 1, NULL, NULL));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_model_step(m, &no_out, 0, logits, NULL));
    nu_llm_row early[2] = {{1, s, NU_LLM_OUTPUT_ARGMAX}, {5, s, NU_LLM_OUTPUT_NONE}};
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_model_step(m, early, 2, NULL, &id));
    assert_non_null(strstr(nu_llm_error_message(), "last row"));
    nu_llm_row many[17];
    for (int i = 0; i < 17; i++)
        many[i] = (nu_llm_row){1, s, NU_LLM_OUTPUT_NONE};
    LLM_STATUS(NU_ERROR_OUT_OF_RANGE, nu_llm_model_step(m, many, 17, NULL, NULL));
    assert_int_equal(nu_llm_model_seq_length(m, s, NULL), 0); /* nothing ran */
    LLM_OK(nu_llm_model_step(m, many, 16, NULL, NULL));
    assert_int_equal(nu_llm_model_seq_length(m, s, NULL), 16);
    LLM_STATUS(NU_ERROR_OUT_OF_RANGE, nu_llm_model_step(m, many, 1, NULL, NULL));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_model_seq_truncate(m, s, 17));
    LLM_OK(nu_llm_model_seq_release(m, s));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_model_seq_release(m, s));
    assert_int_equal(nu_llm_model_seq_length(m, s, NULL), 0);
    nu_llm_model_free(m);
    nu_llm_model_options huge = {.slots = 40000};
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_model_open(d, llm_model_path("aidreams260K/model.gguf"), &huge, &m));
    nt_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(batch_gives_what_each_gets_alone),
        cmocka_unit_test(fresh_form_and_separate_ops_agree),
        cmocka_unit_test(the_products_glu_and_the_glu_op_agree),
        cmocka_unit_test(prefix_reuse),
        cmocka_unit_test(greedy_steps_give_the_ids_alone),
        cmocka_unit_test(refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
