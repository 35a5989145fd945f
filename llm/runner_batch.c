/* runner_batch.c: batched decode, the runner's buckets of rows (runner.h): a graph of B rows a bucket,
 * each row its own slot and position, built at the first step that needs it; and batched greedy
 * decode's ring of two more graphs a bucket (built at its first call), which feed each other's ids. */
#include <string.h>

#include "common.h"
#include "runner_int.h"

#define FN "nu_llm_model"

static nu_tensor i32_rows(nu_buffer *b, int64_t rows, uint32_t rank)
{
    int64_t shape[2] = {rows, 1};
    return nu_tensor_make(b, 0, NU_DTYPE_I32, rank, shape);
}

/* How a bucket of `rows` rows runs: whether its products read an F16 copy of block weights (A_W16,
 * 86 MiB for a 7B model: only where the step takes the matrix products and some matrix is not read
 * by the matrix units as it is, linear_b; fewer rows take the matrix-vector products, which read
 * every format), whether it takes the fused layer (fewer than matmul_rows), and whether q|k|v and
 * gate|up are one product each (nu_llm__stacked_rows). */
typedef struct bucket_form {
    bool w16, fused, copies, stacked;
} bucket_form;

static bucket_form form_of(const nu_llm_runner *r, uint32_t rows)
{
    bucket_form f;
    f.w16 = nu_llm__runner_pass_w16(r, rows, true);
    f.fused = r->o.fusion && rows < r->o.matmul_rows;
    f.copies = r->o.prefill_f16 && f.w16;
    f.stacked = !f.fused && nu_llm__stacked_rows(rows, f.copies);
    return f;
}

/* Records and builds one graph of the bucket (its rows, activations, slots and logits): its tokens
 * from `tokens`, its positions from `positions`, the argmax ids into `ids` (per-row forms: no
 * parameters). */
static nu_status record_graph(nu_llm_runner *r, nu_llm_bucket *b, nu_buffer *tokens, nu_buffer *positions,
                              nu_buffer *ids, nu_graph **out)
{
    uint32_t rows = b->rows;
    bucket_form f = form_of(r, rows);
    nu_commands *rec = NULL;
    nu_status st = nu_llm__runner_nv(r, nu_graph_record(r->dev, &rec), "recording a batched decode graph");
    if (st == NU_OK) {
        nu_llm_pass p = nu_llm__runner_make_pass(r, rec, rows, 0, 0);
        memcpy(p.act, b->act, sizeof p.act);
        p.graph = true, p.per_row = true, p.max_kv = r->kv->positions;
        /* one row a sequence (nu_llm_model_step sends a slot's only row here; padding rows are out
         * of range): attention's fresh per-row form may run, where fresh_rows asks for it (not by
         * default: on an H100 its attention took 266 us a layer of a 64-row 7B step against 190 for
         * RoPE, the cache writes, attention and its merge as separate ops; bench/RESULTS.md) */
        p.distinct_slots = true;
        p.fresh = r->o.fresh && r->o.fresh_rows;
        p.fused = f.fused;
        p.f16_inputs = r->o.prefill_f16 && rows >= r->o.matmul_rows;
        p.w16 = f.copies; /* (make_pass: prefill_f16) without a copy where it has none */
        p.positions = i32_rows(positions, rows, 1), p.slots = i32_rows(b->slots, rows, 1);
        nu_tensor in = i32_rows(tokens, rows, 1), next = i32_rows(ids, rows, 2);
        int64_t shape[2] = {rows, (int64_t)r->hp->cfg.vocab};
        nu_tensor logits = nu_tensor_make(b->logits, 0, NU_DTYPE_F32, 2, shape);
        st = nu_llm__runner_nv(r,
                               nu_llm__runner_record_forward(r, &p, &in, &logits, &next, b->stage_in, b->stage_out,
                                                             rows, &b->out_pending),
                               "recording a batched decode graph");
    }
    if (st == NU_OK)
        st = nu_llm__runner_nv(r, nu_graph_new(rec, out), "building a batched decode graph");
    else
        nu_commands_free(rec);
    return st;
}

/* Builds the bucket of `rows` rows: its buffers and its graph. */
static nu_status build_bucket(nu_llm_runner *r, nu_llm_bucket *b, uint32_t rows)
{
    uint64_t before = nu_memory_active(r->dev);
    bucket_form f = form_of(r, rows);
    /* A_QKV: the fused layer's rows, or the rows of a step taking q|k|v and gate|up as one product
     * each, which A_GU holds too. */
    size_t sizes[NU_LLM_A_COUNT];
    nu_llm__act_sizes(r->hp, rows, f.fused || f.stacked ? rows : 0, f.stacked ? rows : 0,
                      nu_llm__runner_w16_matrices(&r->o, f.w16), sizes);
    nu_status st = NU_OK;
    for (int i = 0; st == NU_OK && i < NU_LLM_A_COUNT; i++)
        st = nu_llm__runner_nv(r, nu_buffer_new(r->dev, sizes[i], NU_STORAGE_PRIVATE, &b->act[i]),
                               "batched decode activations");
    size_t i32 = (size_t)rows * 4, V = r->hp->cfg.vocab;
    nu_buffer **io[5] = {&b->tokens, &b->positions, &b->slots, &b->logits, &b->ids};
    size_t io_bytes[5] = {i32, i32, i32, r->head ? i32 * V : 4, i32};
    /* The logits stay in device memory, read back (through the GPU) only for the rows that ask
     * for them: shared memory can be the host's, and the product writing rows x vocab floats over
     * the bus, then the argmax reading them back, took 9 of a 25 ms step (H200, 8B, 64 rows:
     * vocab 128,256, 33 MB; bench/RESULTS.md, twelfth session). */
    for (int i = 0; st == NU_OK && i < 5; i++) {
        nu_storage where = io[i] == &b->logits ? NU_STORAGE_PRIVATE : NU_STORAGE_SHARED;
        st = nu_llm__runner_nv(r, nu_buffer_new(r->dev, io_bytes[i], where, io[i]),
                               "batched decode inputs and outputs");
    }
    uint64_t stage = nu_llm__runner_stage_bytes(r->hp, rows);
    if (st == NU_OK && !r->embeds)
        st = nu_llm__runner_nv(r, nu_buffer_new(r->dev, stage, NU_STORAGE_SHARED, &b->stage_in), "a stage buffer");
    if (st == NU_OK && !r->head)
        st = nu_llm__runner_nv(r, nu_buffer_new(r->dev, stage, NU_STORAGE_SHARED, &b->stage_out), "a stage buffer");
    b->rows = rows;
    if (st == NU_OK)
        st = record_graph(r, b, b->tokens, b->positions, b->ids, &b->graph);
    if (st != NU_OK) {
        nu_llm__runner_free_bucket(b);
        return st;
    }
    uint64_t after = nu_memory_active(r->dev);
    r->bytes += after > before ? after - before : 0;
    return NU_OK;
}

/* The bucket's greedy ring (BATCH_RING graphs and their ids and positions), built where it is not
 * yet; on failure what was built of it is freed. */
static nu_status build_ring(nu_llm_runner *r, nu_llm_bucket *b)
{
    if (b->ring[0])
        return NU_OK;
    uint64_t before = nu_memory_active(r->dev);
    size_t i32 = (size_t)b->rows * 4;
    nu_status st = NU_OK;
    for (int j = 0; st == NU_OK && j < BATCH_RING; j++) {
        st = nu_llm__runner_nv(r, nu_buffer_new(r->dev, i32, NU_STORAGE_SHARED, &b->ring_ids[j]),
                               "batched greedy decode ids");
        if (st == NU_OK)
            st = nu_llm__runner_nv(r, nu_buffer_new(r->dev, i32, NU_STORAGE_SHARED, &b->ring_pos[j]),
                                   "batched greedy decode positions");
    }
    for (int j = 0; st == NU_OK && j < BATCH_RING; j++)
        st = record_graph(r, b, b->ring_ids[(j + BATCH_RING - 1) % BATCH_RING], b->ring_pos[j], b->ring_ids[j],
                          &b->ring[j]);
    if (st != NU_OK) {
        for (int j = 0; j < BATCH_RING; j++) {
            nu_graph_free(b->ring[j]);
            nu_buffer_free(b->ring_ids[j]);
            nu_buffer_free(b->ring_pos[j]);
            b->ring[j] = NULL, b->ring_ids[j] = b->ring_pos[j] = NULL;
        }
        return st;
    }
    uint64_t after = nu_memory_active(r->dev);
    r->bytes += after > before ? after - before : 0;
    return NU_OK;
}

/* The bucket of n rows, built where it is not yet. */
nu_status nu_llm__runner_bucket_of(nu_llm_runner *r, uint32_t n, nu_llm_bucket **out)
{
    uint32_t k = 0;
    while ((1u << k) < n)
        k++;
    if (k >= MAX_BUCKETS)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, FN "_step: %u decode rows; at most %u", n, 1u << (MAX_BUCKETS - 1));
    *out = &r->buckets[k];
    return (*out)->graph ? NU_OK : build_bucket(r, *out, 1u << k);
}

/* Step s's bookkeeping: the token each row was fed at step s (tokens, or step s - 1's ids) in its
 * slot's list, the slot one longer. */
static void book_step(nu_llm_runner *r, const int32_t *tokens, const uint32_t *slots, uint32_t n, uint32_t s,
                      const int32_t *ids)
{
    for (uint32_t i = 0; i < n; i++) {
        uint32_t slot = slots[i];
        r->kv->tokens[(size_t)slot * r->kv->positions + r->kv->length[slot]] = s ? ids[(size_t)(s - 1) * n + i] : tokens[i];
        r->kv->length[slot]++;
    }
}

nu_status nu_llm__runner_batch_decode(nu_llm_runner *r, const int32_t *tokens, const uint32_t *slots, uint32_t n,
                                      float *logits, int32_t *ids)
{
    nu_llm_bucket *b;
    TRY(nu_llm__runner_bucket_of(r, n, &b));
    uint32_t B = b->rows;
    int32_t *t = nu_llm__malloc_array(B, 3 * sizeof *t);
    if (!t)
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN "_step: no memory");
    int32_t *pos = t + B, *sl = t + 2 * B;
    for (uint32_t i = 0; i < B; i++) {
        bool real = i < n;
        t[i] = real ? tokens[i] : 0;
        pos[i] = real ? (int32_t)r->kv->length[slots[i]] : -1; /* padding: out of range, writes nothing */
        sl[i] = real ? (int32_t)slots[i] : 0;
    }
    nu_status st = nu_llm__runner_nv(r, nu_buffer_write(b->tokens, 0, t, (size_t)B * 4), "writing the rows' tokens");
    if (st == NU_OK)
        st = nu_llm__runner_nv(r, nu_buffer_write(b->positions, 0, pos, (size_t)B * 4), "writing the rows' positions");
    if (st == NU_OK)
        st = nu_llm__runner_nv(r, nu_buffer_write(b->slots, 0, sl, (size_t)B * 4), "writing the rows' slots");
    if (st == NU_OK)
        st = nu_llm__runner_nv(r, nu_graph_launch(b->graph), "launching a batched decode graph");
    if (st == NU_OK)
        st = nu_llm__runner_nv(r, nu_graph_wait(b->graph, NU_WAIT_FOREVER), "a batched decode graph");
    if (st == NU_OK && logits && r->head)
        st = nu_llm__runner_nv(r, nu_buffer_read(b->logits, 0, logits, (size_t)n * r->hp->cfg.vocab * 4),
                               "reading the logits");
    if (st == NU_OK && ids && r->head)
        st = nu_llm__runner_nv(r, nu_buffer_read(b->ids, 0, ids, (size_t)n * 4), "reading the ids");
    if (st == NU_OK)
        book_step(r, tokens, slots, n, 0, NULL);
    nu_llm__free(t);
    return st;
}

/* Launch k of a batched greedy decode, collected: its graph waited for (with it every earlier launch
 * of that graph) and its ids read into ids + k * n. */
static nu_status ring_collect(nu_llm_runner *r, nu_llm_bucket *b, uint32_t k, uint32_t n, int32_t *ids)
{
    uint32_t j = k % BATCH_RING;
    TRY(nu_llm__runner_nv(r, nu_graph_wait(b->ring[j], NU_WAIT_FOREVER), "a batched greedy decode graph"));
    return nu_llm__runner_nv(r, nu_buffer_read(b->ring_ids[j], 0, ids + (size_t)k * n, (size_t)n * 4),
                             "reading the ids");
}

nu_status nu_llm__runner_batch_greedy(nu_llm_runner *r, const int32_t *tokens, const uint32_t *slots, uint32_t n,
                                      uint32_t steps, int32_t *ids)
{
    if (!r->embeds || !r->head)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, FN "_step_greedy: the ring runs on a model on one device");
    nu_llm_bucket *b;
    TRY(nu_llm__runner_bucket_of(r, n, &b));
    TRY(build_ring(r, b));
    uint32_t B = b->rows;
    int32_t *t = nu_llm__malloc_array(B, 3 * sizeof *t);
    if (!t)
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN "_step_greedy: no memory");
    int32_t *base = t + B, *vals = t + 2 * B; /* base: the rows' lengths before the call */
    for (uint32_t i = 0; i < B; i++) {
        bool real = i < n;
        t[i] = real ? tokens[i] : 0;
        base[i] = real ? (int32_t)r->kv->length[slots[i]] : -1;
    }
    /* the slots (padding rows slot 0: their positions are out of range) and step 0's tokens, in the
     * ids of the graph before the first */
    for (uint32_t i = 0; i < B; i++)
        vals[i] = i < n ? (int32_t)slots[i] : 0;
    nu_status st = nu_llm__runner_nv(r, nu_buffer_write(b->slots, 0, vals, (size_t)B * 4), "writing the rows' slots");
    if (st == NU_OK)
        st = nu_llm__runner_nv(r, nu_buffer_write(b->ring_ids[BATCH_RING - 1], 0, t, (size_t)B * 4),
                               "writing the rows' tokens");
    /* Launch k (graph k % BATCH_RING) is queued while launch k - 1 runs; the ids of launch
     * k - BATCH_RING are read once it completed, before its graph is launched again. */
    uint32_t read = 0; /* steps whose ids are in */
    for (uint32_t k = 0; st == NU_OK && k < steps; k++) {
        uint32_t j = k % BATCH_RING;
        if (k >= BATCH_RING) {
            if ((st = ring_collect(r, b, read, n, ids)) != NU_OK)
                break;
            read++;
        }
        for (uint32_t i = 0; i < B; i++)
            vals[i] = i < n ? base[i] + (int32_t)k : -1; /* padding: out of range, writes nothing */
        st = nu_llm__runner_nv(r, nu_buffer_write(b->ring_pos[j], 0, vals, (size_t)B * 4),
                               "writing the rows' positions");
        if (st == NU_OK)
            st = nu_llm__runner_nv(r, nu_graph_launch(b->ring[j]), "launching a batched greedy decode graph");
    }
    for (; st == NU_OK && read < steps; read++)
        st = ring_collect(r, b, read, n, ids);
    for (int j = 0; st != NU_OK && j < BATCH_RING; j++)
        nu_graph_wait(b->ring[j], NU_WAIT_FOREVER); /* nothing left running on the buffers */
    if (st == NU_OK)
        for (uint32_t s = 0; s < steps; s++)
            book_step(r, tokens, slots, n, s, ids);
    nu_llm__free(t);
    return st;
}

void nu_llm__runner_free_bucket(nu_llm_bucket *b)
{
    nu_graph_wait(b->graph, NU_WAIT_FOREVER);
    nu_graph_free(b->graph);
    for (int j = 0; j < BATCH_RING; j++) {
        nu_graph_wait(b->ring[j], NU_WAIT_FOREVER);
        nu_graph_free(b->ring[j]);
        nu_buffer_free(b->ring_ids[j]);
        nu_buffer_free(b->ring_pos[j]);
    }
    for (int i = 0; i < NU_LLM_A_COUNT; i++)
        nu_buffer_free(b->act[i]);
    nu_buffer *io[7] = {b->tokens, b->positions, b->slots, b->logits, b->ids, b->stage_in, b->stage_out};
    for (int i = 0; i < 7; i++)
        nu_buffer_free(io[i]);
    memset(b, 0, sizeof *b);
}
