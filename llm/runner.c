/* runner.c: prefill passes, the decode graph and greedy decode's ring of graphs (runner.h). */
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "runner_int.h"

#define FN "nu_llm_model"

nu_status nu_llm__runner_nv(nu_llm_runner *r, nu_status st, const char *what)
{
    if (st != NU_OK)
        return nu_llm__fail(st, FN ": %s: %s", what, nu_error_message(r->dev));
    return NU_OK;
}

const char *nu_llm__runner_note(const nu_llm_runner *r) { return r->note; }
uint64_t nu_llm__runner_bytes(const nu_llm_runner *r) { return r->bytes; }
uint32_t nu_llm__runner_chunk(const nu_llm_runner *r) { return r->o.chunk; }

/* The rows of A_QKV a prefill pass of `rows` rows needs: only fused passes (no more rows than a
 * matrix-vector product takes) write q, k and v as one product. */
static uint32_t prefill_qkv_rows(const nu_llm_runner_options *o, uint32_t rows)
{
    uint32_t fused = o->matvec_rows ? o->matvec_rows : NU_MATVEC_MAX_ROWS;
    return o->fusion ? (rows < fused ? rows : fused) : 0;
}

/* A_W16's size in a layer's largest matrices for a pass that copies block weights (w16) or not. */
uint32_t nu_llm__runner_w16_matrices(const nu_llm_runner_options *o, bool w16)
{
    return w16 ? (o->copy_pair ? 2u : 1u) : 0u;
}

static uint64_t act_bytes(const nu_llm_hparams *hp, uint32_t rows, uint32_t qkv_rows, uint32_t w16_matrices)
{
    size_t sizes[NU_LLM_A_COUNT];
    nu_llm__act_sizes(hp, rows, qkv_rows, 0, w16_matrices, sizes);
    uint64_t sum = 0;
    for (int i = 0; i < NU_LLM_A_COUNT; i++)
        sum += sizes[i];
    return sum;
}

uint64_t nu_llm__runner_stage_bytes(const nu_llm_hparams *hp, uint32_t cap) { return 2ull * cap * hp->cfg.dim * 4; }

/* A prefill pass of o->chunk rows: its activations and its ids. */
static uint64_t pass_bytes(const nu_llm_hparams *hp, const nu_llm_runner_options *o, bool w16)
{
    return act_bytes(hp, o->chunk, prefill_qkv_rows(o, o->chunk), nu_llm__runner_w16_matrices(o, w16)) +
           (uint64_t)o->chunk * 4;
}

void nu_llm__runner_sizes(const nu_llm_hparams *hp, const nu_llm_runner_options *o, bool w16, uint64_t *held,
                          uint64_t *pass)
{
    uint32_t stages = (o->first > 0) + (o->end && o->end < hp->cfg.layers);
    *held = act_bytes(hp, NU_MATVEC_MAX_ROWS, NU_MATVEC_MAX_ROWS, 0) + (uint64_t)o->chunk * 4 +
            (uint64_t)hp->cfg.vocab * 4 * 2 /* logits, greedy's */ + 4 + (uint64_t)NU_LLM_GREEDY_MAX_DEPTH * ID_STRIDE * NU_LLM_GREEDY_MAX_UNROLL +
            stages * nu_llm__runner_stage_bytes(hp, o->chunk + 1);
    *pass = pass_bytes(hp, o, w16);
}

uint64_t nu_llm__runner_pass_bytes(const nu_llm_runner *r)
{
    return pass_bytes(r->hp, &r->o, nu_llm__runner_pass_w16(r, r->o.chunk, false));
}

static nu_status new_buffer(nu_llm_runner *r, size_t bytes, nu_storage storage, const char *name, nu_buffer **out)
{
    nu_status st = nu_llm__runner_nv(r, nu_buffer_new(r->dev, bytes, storage, out), name);
    if (st == NU_OK) {
        nu_buffer_set_name(*out, name);
        r->bytes += nu_buffer_accounted_bytes(*out);
    }
    return st;
}

nu_llm_pass nu_llm__runner_make_pass(nu_llm_runner *r, nu_commands *c, uint32_t rows, uint32_t slot, uint32_t start)
{
    nu_llm_pass p = {.c = c, .hp = r->hp, .kv = r->kv, .rows = rows, .slot = slot, .start = start};
    p.matvec_rows = r->o.matvec_rows, p.matmul_rows = r->o.matmul_rows;
    p.direct_rows = r->o.direct_rows ? r->o.direct_rows : NU_LLM_DIRECT_ROWS;
    p.direct_by_dtype = !r->o.direct_rows;
    p.fused = r->o.fusion && rows <= r->o.matvec_rows;
    p.f16_inputs = r->o.prefill_f16 && rows > r->o.matvec_rows;
    p.w16 = r->o.prefill_f16;
    p.matrix_units = r->units;
    p.fresh = r->o.fresh;
    p.post_fusion = r->o.post_fusion;
    p.product_glu = r->o.product_glu;
    p.ahead = r->o.ahead_on ? &r->o.ahead : NULL;
    p.rope_freqs = r->w->has_global[NU_LLM_W_ROPE_FREQS] ? &r->w->global[NU_LLM_W_ROPE_FREQS] : NULL;
    if (r->hp->longrope) { /* LongRoPE: the long divisors for a cache past the original context (llama.cpp's choice) */
        nu_llm_role role = r->kv->positions > r->hp->rope_original_context ? NU_LLM_W_ROPE_LONG : NU_LLM_W_ROPE_SHORT;
        p.rope_freqs = r->w->has_global[role] ? &r->w->global[role] : NULL;
    }
    return p;
}

nu_status nu_llm__runner_record_forward(nu_llm_runner *r, nu_llm_pass *p, const nu_tensor *ids, const nu_tensor *logits,
                                const nu_tensor *next, nu_buffer *stage_in, nu_buffer *stage_out, uint32_t cap,
                                bool *out_pending)
{
    const nu_llm_weights *w = r->w;
    if (r->embeds)
        TRY(nu_llm__blk_embed(p, &w->global[NU_LLM_W_EMBED], ids));
    else
        TRY(nu_llm__blk_stage_in(p, stage_in, cap, &w->layers[r->first]));
    for (uint32_t l = r->first; l < r->end; l++) {
        p->next_layer = l + 1 < r->end ? &w->layers[l + 1] : NULL;
        TRY(r->arch->layer(p, &w->layers[l], l));
    }
    if (!r->head)
        return nu_llm__blk_stage_out(p, stage_out, cap, &w->layers[r->end - 1], out_pending);
    return nu_llm__blk_logits(p, &w->global[NU_LLM_W_OUT_NORM], &w->global[NU_LLM_W_OUTPUT], logits, next);
}

/* The runner's logits buffer as [1, vocab]. */
static nu_tensor one_logits(nu_llm_runner *r)
{
    int64_t shape[2] = {1, r->hp->cfg.vocab};
    return nu_tensor_make(r->logits, 0, NU_DTYPE_F32, 2, shape);
}

/* Id u of greedy ring buffer j, as a gather's ids (rank 1) or an argmax's output (rank 2). */
static nu_tensor ring_id(nu_llm_runner *r, uint32_t j, uint32_t u, uint32_t rank)
{
    int64_t shape[2] = {1, 1};
    return nu_tensor_make(r->ring[j], (uint64_t)u * ID_STRIDE, NU_DTYPE_I32, rank, shape);
}

static int greedy_slot(uint32_t j, uint32_t u) { return 2 + (int)(j * NU_LLM_GREEDY_MAX_UNROLL + u); }

/* Records and builds graph g: decode's one pass, or greedy graph j's `unroll` passes (pass 0 reads
 * the ring's previous graph's last id, pass u > 0 the id pass u - 1 wrote). */
static nu_status record_graph(nu_llm_runner *r, int g)
{
    nu_commands *rec = NULL;
    nu_status st = nu_graph_record(r->dev, &rec);
    int64_t one = 1;
    uint32_t U = r->o.greedy_unroll, layers = r->hp->cfg.layers;
    if (st == NU_OK && (g == G_DECODE || g == G_ARGMAX)) {
        nu_tensor gid = nu_tensor_make(r->gid, 0, NU_DTYPE_I32, 1, &one);
        nu_llm_pass p = nu_llm__runner_make_pass(r, rec, 1, 0, 0);
        memcpy(p.act, r->act, sizeof p.act);
        p.graph = true, p.max_kv = r->kv->positions, p.params = r->params + (size_t)(g == G_ARGMAX) * layers;
        nu_tensor logits = one_logits(r);
        int64_t shape[2] = {1, 1};
        nu_tensor next = nu_tensor_make(r->arg_id, 0, NU_DTYPE_I32, 2, shape);
        if (g == G_ARGMAX)
            logits.buffer = r->glogits;
        st = nu_llm__runner_record_forward(r, &p, &gid, &logits, g == G_ARGMAX ? &next : NULL, r->dec_in, r->dec_out, 1,
                            &r->dec_out_pending);
    }
    uint32_t j = (uint32_t)(g - G_GREEDY), to = (j + 1) % (r->o.greedy_depth ? r->o.greedy_depth : 1);
    for (uint32_t u = 0; st == NU_OK && g >= G_GREEDY && u < U; u++) {
        nu_tensor gid = u ? ring_id(r, to, u - 1, 1) : ring_id(r, j, U - 1, 1), next = ring_id(r, to, u, 2);
        nu_llm_pass p = nu_llm__runner_make_pass(r, rec, 1, 0, 0);
        memcpy(p.act, r->act, sizeof p.act);
        p.graph = true, p.max_kv = r->kv->positions, p.params = r->params + (size_t)greedy_slot(j, u) * layers;
        nu_tensor logits = one_logits(r);
        logits.buffer = r->glogits;
        st = nu_llm__runner_record_forward(r, &p, &gid, &logits, &next, NULL, NULL, 0, NULL);
    }
    if (st == NU_OK)
        st = nu_graph_new(rec, &r->graph[g]);
    if (st != NU_OK)
        nu_commands_free(rec);
    return st;
}

/* record_graph, with the device memory the graph keeps (the ops' temporary buffers its recording
 * holds: attention's partials) counted in the runner's bytes: the device's active bytes before
 * and after (the model is used by one thread at a time; other users of the device at the same
 * time would be counted too). */
static nu_status build_graph(nu_llm_runner *r, int g)
{
    uint64_t before = nu_memory_active(r->dev);
    nu_status st = record_graph(r, g);
    uint64_t after = nu_memory_active(r->dev);
    if (st == NU_OK && after > before)
        r->bytes += after - before;
    return st;
}

nu_status nu_llm__runner_new(nu_device *d, const nu_llm_arch *a, const nu_llm_hparams *hp, const nu_llm_weights *w,
                             nu_llm_kv *kv, const nu_llm_runner_options *o, nu_llm_runner **out)
{
    *out = NULL;
    nu_llm_runner *r = nu_llm__calloc(1, sizeof *r);
    if (!r || !(r->params = nu_llm__calloc((size_t)P_SLOTS * hp->cfg.layers, sizeof *r->params))) {
        nu_llm__free(r);
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN "_open: no memory");
    }
    r->dev = d, r->arch = a, r->hp = hp, r->w = w, r->kv = kv, r->o = *o;
    r->first = o->first, r->end = o->end ? o->end : hp->cfg.layers;
    r->embeds = r->first == 0, r->head = r->end == hp->cfg.layers;
    r->units = nu_llm__runner_units(d, o);
    /* matmul_rows 0: by the weights. 16 where Q4_K, Q6_K or Q4_0_SOA matrices are read as they are
     * by the matrix units (linear_b). Q4_K's and Q6_K's matrix-vector products over 8 rows run x's
     * rows in passes of as many as fit in shared memory (2 for the FFN's k = 11008) or, for Q6_K,
     * on the float path, so a group of 8 rows reads the weights several times (H200, 7B Q4_K_M, 16
     * rows: 855.7 tokens/s with the products against 631.7 by groups); Q4_0_SOA's 8-row product
     * costs 2.7x its one-row one, and the 16-row product with a block a thread (matmul_coopmat's VEC) beats two
     * such groups (7B Q4_0, 16 rows: 1,743 tokens/s against 1,370; bench/RESULTS.md 2026-12-02).
     * Else 64. */
    if (!r->o.matmul_rows)
        r->o.matmul_rows = (w->k_formats || w->repacked) && r->units ? 16 : 64;
    /* The fused layer's gate-up product reads both matrices in one dtype: a file that stores
     * them in two (a per-tensor mix) runs the separate ops. */
    for (uint32_t l = 0; l < hp->cfg.layers; l++)
        if (w->layers[l].has[NU_LLM_W_GATE] && w->layers[l].has[NU_LLM_W_UP] &&
            w->layers[l].w[NU_LLM_W_GATE].dtype != w->layers[l].w[NU_LLM_W_UP].dtype)
            r->o.fusion = false;
    size_t sizes[NU_LLM_A_COUNT];
    /* decode passes: one row (greedy: one a pass) */
    nu_llm__act_sizes(hp, NU_MATVEC_MAX_ROWS, NU_MATVEC_MAX_ROWS, 0, 0, sizes);
    static const char *const names[NU_LLM_A_COUNT] = {
        "llm x", "llm xn", "llm q", "llm k", "llm v", "llm att", "llm tmp", "llm gate", "llm up",
        "llm qkv row", "llm gate-up row", "llm f16 input", "llm f16 q", "llm f16 weight"};
    nu_status st = NU_OK;
    for (int i = 0; st == NU_OK && i < NU_LLM_A_COUNT; i++)
        st = new_buffer(r, sizes[i], NU_STORAGE_PRIVATE, names[i], &r->act[i]);
    if (st == NU_OK)
        st = new_buffer(r, (size_t)o->chunk * 4, NU_STORAGE_SHARED, "llm ids", &r->ids);
    if (st == NU_OK)
        st = new_buffer(r, (size_t)hp->cfg.vocab * 4, NU_STORAGE_SHARED, "llm logits", &r->logits);
    if (st == NU_OK)
        st = new_buffer(r, 4, NU_STORAGE_SHARED, "llm graph id", &r->gid);
    for (int j = 0; st == NU_OK && j < NU_LLM_GREEDY_MAX_DEPTH; j++)
        st = new_buffer(r, ID_STRIDE * NU_LLM_GREEDY_MAX_UNROLL, NU_STORAGE_SHARED, "llm greedy ids", &r->ring[j]);
    uint64_t stage_pass = nu_llm__runner_stage_bytes(hp, o->chunk), stage_dec = nu_llm__runner_stage_bytes(hp, 1);
    if (st == NU_OK && !r->embeds &&
        (st = new_buffer(r, stage_pass, NU_STORAGE_SHARED, "llm pass in", &r->pass_in)) == NU_OK)
        st = new_buffer(r, stage_dec, NU_STORAGE_SHARED, "llm decode in", &r->dec_in);
    if (st == NU_OK && !r->head &&
        (st = new_buffer(r, stage_pass, NU_STORAGE_SHARED, "llm pass out", &r->pass_out)) == NU_OK)
        st = new_buffer(r, stage_dec, NU_STORAGE_SHARED, "llm decode out", &r->dec_out);
    if (st == NU_OK && !r->o.by_commands && build_graph(r, G_DECODE) != NU_OK) {
        snprintf(r->note, sizeof r->note, "decode records a command buffer per token: the decode graph failed: %s",
                 nu_error_message(d));
        r->o.by_commands = true;
    }
    if (st != NU_OK) {
        nu_llm__runner_free(r);
        return st;
    }
    *out = r;
    return NU_OK;
}

void nu_llm__runner_free(nu_llm_runner *r)
{
    if (!r)
        return;
    nu_llm__runner_pass_end(r, NULL);
    for (int k = 0; k < MAX_BUCKETS; k++)
        nu_llm__runner_free_bucket(&r->buckets[k]);
    for (int g = 0; g < G_COUNT; g++) {
        nu_graph_wait(r->graph[g], NU_WAIT_FOREVER);
        nu_graph_free(r->graph[g]);
    }
    for (int i = 0; i < NU_LLM_A_COUNT; i++)
        nu_buffer_free(r->act[i]);
    nu_buffer_free(r->ids);
    nu_buffer_free(r->logits);
    nu_buffer_free(r->glogits);
    nu_buffer_free(r->gid);
    nu_buffer_free(r->arg_id);
    for (int j = 0; j < NU_LLM_GREEDY_MAX_DEPTH; j++)
        nu_buffer_free(r->ring[j]);
    nu_buffer *stages[4] = {r->pass_in, r->pass_out, r->dec_in, r->dec_out};
    for (int i = 0; i < 4; i++)
        nu_buffer_free(stages[i]);
    nu_llm__free(r->params);
    nu_llm__free(r);
}

static nu_status read_logits(nu_llm_runner *r, float *logits)
{
    if (!logits || !r->head)
        return NU_OK;
    return nu_llm__runner_nv(r, nu_buffer_read(r->logits, 0, logits, (size_t)r->hp->cfg.vocab * 4),
                             "reading the logits");
}

/* A prefill pass's activations from nu_buffer_new_gpu: each pass frees its own right after its
 * commit; the next pass's come from that memory while the GPU still runs the previous pass,
 * ordered after its uses (in-flight reuse: nuvec/buffer.h), so the CPU records pass i + 1 while
 * pass i runs and the activations hold about one pass's memory. Every pass of a prefill takes
 * buffers of the same size (`rows`: its first pass's), so that a shorter last pass reuses them too
 * instead of asking for memory of another size while they sit in the cache. */
static void free_pass(nu_buffer **set)
{
    for (int i = 0; i < NU_LLM_A_COUNT; i++) {
        nu_buffer_free(set[i]);
        set[i] = NULL;
    }
}

bool nu_llm__runner_units(nu_device *d, const nu_llm_runner_options *o)
{
    return o->prefill_f16 && nu_device_get_info(d)->features[NU_FEATURE_COOPERATIVE_MATRIX];
}

bool nu_llm__runner_copies(const nu_llm_runner_options *o, const nu_llm_weights *w, bool units, uint32_t rows,
                           bool graph)
{
    bool w16 = (o->prefill_f16 && w->blocks) || w->repacked;
    uint32_t direct_rows = o->direct_rows ? o->direct_rows : NU_LLM_DIRECT_ROWS;
    bool direct = units && !w->blocks_copied &&
                  (graph || rows <= direct_rows || (!o->direct_rows && !w->layers_other_blocks));
    return w16 && !direct;
}

bool nu_llm__runner_pass_w16(const nu_llm_runner *r, uint32_t rows, bool graph)
{
    bool products = graph ? rows >= r->o.matmul_rows : rows > r->o.matvec_rows;
    return products && nu_llm__runner_copies(&r->o, r->w, r->units, rows, graph);
}

static nu_status pass_buffers(nu_llm_runner *r, uint32_t rows, nu_buffer **set, nu_buffer **ids)
{
    size_t sizes[NU_LLM_A_COUNT];
    nu_llm__act_sizes(r->hp, rows, prefill_qkv_rows(&r->o, rows), 0,
                      nu_llm__runner_w16_matrices(&r->o, nu_llm__runner_pass_w16(r, rows, false)), sizes);
    memset(set, 0, sizeof *set * NU_LLM_A_COUNT);
    nu_status st = nu_llm__runner_nv(r, nu_buffer_new_gpu(r->dev, (size_t)rows * 4, NU_STORAGE_PRIVATE, ids),
                                     "a prefill pass's ids");
    for (int i = 0; st == NU_OK && i < NU_LLM_A_COUNT; i++)
        st = nu_llm__runner_nv(r, nu_buffer_new_gpu(r->dev, sizes[i], NU_STORAGE_PRIVATE, &set[i]),
                               "a prefill pass's activations");
    if (st != NU_OK) {
        free_pass(set);
        nu_buffer_free(*ids);
        *ids = NULL;
    }
    return st;
}

/* Records and commits one pass of `rows` tokens of slot `slot` from position `pos`, its
 * activations `size` rows (freed right after the commit: the next pass may take their memory,
 * after this one's uses); *out receives the commands, to wait for. */
static nu_status commit_pass(nu_llm_runner *r, uint32_t slot, const int32_t *tokens, uint32_t rows, uint32_t pos,
                             uint32_t size, nu_commands **out)
{
    *out = NULL;
    nu_buffer *set[NU_LLM_A_COUNT], *ids = NULL;
    TRY(pass_buffers(r, size, set, &ids));
    nu_commands *c = NULL;
    nu_status st;
    if ((st = nu_llm__runner_nv(r, nu_commands_new(r->dev, NU_QUEUE_COMPUTE, &c), "commands")) == NU_OK &&
        (st = nu_llm__runner_nv(r, nu_commands_upload(c, ids, 0, tokens, (size_t)rows * 4),
                                "the token ids")) == NU_OK) {
        int64_t shape = rows;
        nu_tensor t = nu_tensor_make(ids, 0, NU_DTYPE_I32, 1, &shape);
        nu_llm_pass p = nu_llm__runner_make_pass(r, c, rows, slot, pos);
        memcpy(p.act, set, sizeof p.act);
        nu_tensor out_logits = one_logits(r);
        st = nu_llm__runner_nv(r,
                               nu_llm__runner_record_forward(r, &p, &t, &out_logits, NULL, r->pass_in, r->pass_out,
                                                             r->o.chunk, &r->pass_out_pending),
                               "recording the forward pass");
    }
    if (st == NU_OK)
        st = nu_llm__runner_nv(r, nu_commands_commit(c), "the forward pass");
    free_pass(set);
    nu_buffer_free(ids);
    if (st != NU_OK)
        nu_commands_free(c);
    else
        *out = c;
    return st;
}

/* Passes of at most `chunk` rows, each committed without waiting for the one before (which the
 * next commit waits for instead): the KV cache orders them (nuvec/command.h). */
nu_status nu_llm__runner_prefill(nu_llm_runner *r, uint32_t slot, const int32_t *tokens, uint32_t n, float *logits)
{
    uint32_t start = r->kv->length[slot], pos = start, first = n < r->o.chunk ? n : r->o.chunk;
    if ((!r->embeds || !r->head) && n > r->o.chunk) /* one pass: its hidden state goes to the next share */
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, FN ": %u rows for a share of a split model; at most %u", n,
                            r->o.chunk);
    nu_commands *prev = NULL;
    nu_status st = NU_OK;
    for (uint32_t done = 0; done < n && st == NU_OK;) {
        uint32_t rows = n - done < r->o.chunk ? n - done : r->o.chunk;
        nu_commands *c;
        if ((st = commit_pass(r, slot, tokens + done, rows, pos, first, &c)) != NU_OK)
            break;
        if (prev) {
            st = nu_llm__runner_nv(r, nu_commands_wait(prev, NU_WAIT_FOREVER), "the forward pass");
            nu_commands_free(prev);
        }
        prev = c;
        pos += rows;
        done += rows;
    }
    if (prev) {
        nu_status w = nu_llm__runner_nv(r, nu_commands_wait(prev, NU_WAIT_FOREVER), "the forward pass");
        st = st != NU_OK ? st : w;
        nu_commands_free(prev);
    }
    if (st != NU_OK)
        return st;
    memcpy(r->kv->tokens + (size_t)slot * r->kv->positions + start, tokens, (size_t)n * sizeof *tokens);
    r->kv->length[slot] = pos;
    return read_logits(r, logits);
}

nu_status nu_llm__runner_pass_begin(nu_llm_runner *r, uint32_t slot, const int32_t *tokens, uint32_t n, uint32_t size)
{
    if (r->in_flight || n > r->o.chunk || size > r->o.chunk || n > size)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, FN ": a pass of %u rows (buffers of %u; at most %u)%s", n, size,
                            r->o.chunk, r->in_flight ? " while one is in flight" : "");
    uint32_t pos = r->kv->length[slot];
    TRY(commit_pass(r, slot, tokens, n, pos, size, &r->in_flight));
    memcpy(r->kv->tokens + (size_t)slot * r->kv->positions + pos, tokens, (size_t)n * sizeof *tokens);
    r->kv->length[slot] = pos + n;
    return NU_OK;
}

nu_status nu_llm__runner_pass_end(nu_llm_runner *r, float *logits)
{
    if (!r->in_flight)
        return NU_OK;
    nu_status st = nu_llm__runner_nv(r, nu_commands_wait(r->in_flight, NU_WAIT_FOREVER), "the forward pass");
    nu_commands_free(r->in_flight);
    r->in_flight = NULL;
    return st != NU_OK ? st : read_logits(r, logits);
}

/* The parameters in slot g of graph gr for the token at `pos`. */
static nu_status set_params(nu_llm_runner *r, nu_graph *gr, int g, uint32_t pos)
{
    uint32_t len = pos + 1, layers = r->hp->cfg.layers;
    int32_t ipos = (int32_t)pos;
    const nu_llm_layer_params *pp = r->params + (size_t)g * layers;
    for (uint32_t l = r->first; l < r->end; l++) {
        if (!pp[l].fresh) { /* the fresh form: the position is kv_length - 1 */
            TRY(nu_llm__runner_nv(r, nu_graph_set_param(gr, pp[l].q_rope, &ipos, 4), "a graph parameter"));
            TRY(nu_llm__runner_nv(r, nu_graph_set_param(gr, pp[l].k_pos, &pos, 4), "a graph parameter"));
            TRY(nu_llm__runner_nv(r, nu_graph_set_param(gr, pp[l].v_pos, &pos, 4), "a graph parameter"));
        }
        TRY(nu_llm__runner_nv(r, nu_graph_set_param(gr, pp[l].kv_len, &len, 4), "a graph parameter"));
        if (pp[l].windowed) /* a sliding-window layer's attention: the row's position */
            TRY(nu_llm__runner_nv(r, nu_graph_set_param(gr, pp[l].q_pos, &pos, 4), "a graph parameter"));
    }
    return NU_OK;
}

nu_status nu_llm__runner_decode(nu_llm_runner *r, int32_t token, float *logits)
{
    if (r->o.by_commands)
        return nu_llm__runner_prefill(r, 0, &token, 1, logits);
    uint32_t pos = r->kv->length[0];
    TRY(nu_llm__runner_nv(r, nu_buffer_write(r->gid, 0, &token, 4), "writing the token id"));
    TRY(set_params(r, r->graph[G_DECODE], 0, pos));
    TRY(nu_llm__runner_nv(r, nu_graph_launch(r->graph[G_DECODE]), "launching the decode graph"));
    TRY(nu_llm__runner_nv(r, nu_graph_wait(r->graph[G_DECODE], NU_WAIT_FOREVER), "the decode graph"));
    r->kv->tokens[pos] = token;
    r->kv->length[0] = pos + 1;
    return read_logits(r, logits);
}

nu_status nu_llm__runner_decode_argmax(nu_llm_runner *r, int32_t token, int32_t *id)
{
    if (!r->head)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, FN "_decode_greedy: the argmax of a share without the logits");
    if (!r->o.by_commands && !r->o.greedy_on_cpu && !r->graph[G_ARGMAX] && !r->argmax_by_cpu) {
        nu_status st = r->glogits ? NU_OK
                                  : new_buffer(r, (size_t)r->hp->cfg.vocab * 4, NU_STORAGE_PRIVATE, "llm greedy logits",
                                               &r->glogits);
        if (st == NU_OK && !r->arg_id)
            st = new_buffer(r, 4, NU_STORAGE_SHARED, "llm argmax id", &r->arg_id);
        if (st == NU_OK)
            st = build_graph(r, G_ARGMAX);
        if (st != NU_OK) {
            snprintf(r->note, sizeof r->note, "greedy decode reads the logits back each token: its graph failed: %s",
                     nu_error_message(r->dev));
            r->argmax_by_cpu = true;
        }
    }
    if (!r->graph[G_ARGMAX]) { /* the logits back, their argmax here (greedy_by_logits's) */
        uint32_t V = r->hp->cfg.vocab;
        float *logits = nu_llm__malloc_array(V, sizeof *logits);
        if (!logits)
            return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN "_decode_greedy: no memory");
        nu_status st = nu_llm__runner_decode(r, token, logits);
        *id = st == NU_OK ? nu_llm__argmax(logits, V) : 0;
        nu_llm__free(logits);
        return st;
    }
    uint32_t pos = r->kv->length[0];
    TRY(nu_llm__runner_nv(r, nu_buffer_write(r->gid, 0, &token, 4), "writing the token id"));
    TRY(set_params(r, r->graph[G_ARGMAX], 1, pos));
    TRY(nu_llm__runner_nv(r, nu_graph_launch(r->graph[G_ARGMAX]), "launching the decode graph"));
    TRY(nu_llm__runner_nv(r, nu_graph_wait(r->graph[G_ARGMAX], NU_WAIT_FOREVER), "the decode graph"));
    TRY(nu_llm__runner_nv(r, nu_buffer_read(r->arg_id, 0, id, 4), "reading the token id"));
    r->kv->tokens[pos] = token;
    r->kv->length[0] = pos + 1;
    return NU_OK;
}

/* The greedy ring, built at the first greedy decode: a model that is only prefilled, or decoded
 * for its logits, never pays for it. Where it cannot be built, greedy decode goes token by token
 * (the logits read back) and the note says why. */
static void build_greedy_graphs(nu_llm_runner *r)
{
    if (r->o.greedy_on_cpu) {
        r->greedy_by_cpu = true;
        return;
    }
    nu_status st = r->glogits ? NU_OK
                              : new_buffer(r, (size_t)r->hp->cfg.vocab * 4, NU_STORAGE_PRIVATE, "llm greedy logits",
                                           &r->glogits);
    for (uint32_t j = 0; st == NU_OK && j < r->o.greedy_depth; j++)
        st = build_graph(r, G_GREEDY + (int)j);
    if (st == NU_OK) {
        r->depth = r->o.greedy_depth;
        return;
    }
    snprintf(r->note, sizeof r->note, "greedy decode reads the logits back each token: its graphs failed: %s",
             nu_error_message(r->dev));
    for (int g = G_GREEDY; g < G_COUNT; g++) {
        nu_graph_free(r->graph[g]);
        r->graph[g] = NULL;
    }
    r->greedy_by_cpu = true;
}

/* Greedy decode one token at a time: decode, logits back, the argmax on the CPU (the lowest id of
 * equal largest logits, as the GPU's argmax and nu_llm_sample at temperature 0). */
static nu_status greedy_by_logits(nu_llm_runner *r, int32_t token, uint32_t n, int32_t *out, uint32_t *produced,
                                  int32_t stop_token, bool (*on_token)(void *, int32_t), void *user)
{
    uint32_t V = r->hp->cfg.vocab;
    float *logits = nu_llm__malloc_array(V, sizeof *logits);
    if (!logits)
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN "_decode_greedy: no memory");
    nu_status st = NU_OK;
    for (uint32_t k = 0; k < n; k++) {
        if ((st = nu_llm__runner_decode(r, k ? out[k - 1] : token, logits)) != NU_OK)
            break;
        out[k] = nu_llm__argmax(logits, V);
        *produced = k + 1;
        if ((on_token && !on_token(user, out[k])) || out[k] == stop_token)
            break;
    }
    nu_llm__free(logits);
    return st;
}

/* Launch k of a greedy decode from position p: tokens at p + k * unroll + u, by the ring's graph
 * k % depth (its pass 0 reads the last id launch k - 1 wrote). */
static nu_status greedy_launch(nu_llm_runner *r, uint32_t p, uint32_t k)
{
    uint32_t j = k % r->depth, U = r->o.greedy_unroll;
    nu_graph *g = r->graph[G_GREEDY + j];
    for (uint32_t u = 0; u < U; u++)
        TRY(set_params(r, g, greedy_slot(j, u), p + k * U + u));
    return nu_llm__runner_nv(r, nu_graph_launch(g), "launching a greedy decode graph");
}

static nu_status greedy_by_graphs(nu_llm_runner *r, int32_t token, uint32_t n, int32_t *out, uint32_t *produced,
                                  int32_t stop_token, bool (*on_token)(void *, int32_t), void *user)
{
    const uint32_t p = r->kv->length[0], D = r->depth, U = r->o.greedy_unroll, launches = (n + U - 1) / U;
    int32_t ids[NU_LLM_GREEDY_MAX_UNROLL * ID_STRIDE / 4];
    nu_status st = nu_llm__runner_nv(r, nu_buffer_write(r->ring[0], (size_t)(U - 1) * ID_STRIDE, &token, 4),
                                     "writing the token id");
    for (uint32_t k = 0; st == NU_OK && k < D && k < launches; k++)
        st = greedy_launch(r, p, k);
    bool done = false;
    for (uint32_t k = 0; st == NU_OK && !done && k < launches; k++) {
        uint32_t first = k * U, count = n - first < U ? n - first : U; /* tokens of this launch wanted */
        if ((st = nu_llm__runner_nv(r, nu_graph_wait(r->graph[G_GREEDY + k % D], NU_WAIT_FOREVER),
                                    "a greedy decode graph")) != NU_OK ||
            (st = nu_llm__runner_nv(r,
                                    nu_buffer_read(r->ring[(k + 1) % D], 0, ids, (size_t)(count - 1) * ID_STRIDE + 4),
                                    "reading token ids")) != NU_OK)
            break;
        uint32_t give = 0; /* tokens to give: up to and with a stop_token */
        bool stopped = false;
        while (give < count && !stopped) {
            out[first + give] = ids[give * (ID_STRIDE / 4)];
            stopped = out[first + give++] == stop_token;
        }
        done = stopped || first + count == n;
        if (!done && k + D < launches && (st = greedy_launch(r, p, k + D)) != NU_OK) /* before the callback: the GPU keeps busy */
            break;
        for (uint32_t u = 0; u < give; u++) {
            *produced = first + u + 1;
            if (on_token && !on_token(user, out[first + u])) {
                done = true;
                break;
            }
        }
    }
    /* Speculative launches finish before the model is used again (their buffers are the model's). */
    for (uint32_t j = 0; j < D; j++) {
        nu_status w =
            nu_llm__runner_nv(r, nu_graph_wait(r->graph[G_GREEDY + j], NU_WAIT_FOREVER), "a greedy decode graph");
        if (st == NU_OK)
            st = w;
    }
    /* On failure too: the tokens given to on_token are in the cache. */
    uint32_t fed = *produced;
    int32_t *cached = r->kv->tokens + p;
    for (uint32_t i = 0; i < fed; i++)
        cached[i] = i ? out[i - 1] : token;
    r->kv->length[0] = p + fed;
    return st;
}

nu_status nu_llm__runner_greedy(nu_llm_runner *r, int32_t token, uint32_t n, int32_t *out, uint32_t *produced,
                                int32_t stop_token, bool (*on_token)(void *user, int32_t id), void *user)
{
    if (!r->embeds || !r->head) /* a share of a split model: the model decodes token by token */
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, FN "_decode_greedy: a share of a split model");
    if (!r->o.by_commands && !r->depth && !r->greedy_by_cpu)
        build_greedy_graphs(r);
    return r->o.by_commands || r->greedy_by_cpu ? greedy_by_logits(r, token, n, out, produced, stop_token, on_token, user)
                                                : greedy_by_graphs(r, token, n, out, produced, stop_token, on_token, user);
}

/* ---- a share of a split model ------------------------------------------------------------ */

/* The stage buffer (in or out) of `kind` and its rows: decode by command buffers runs prefill
 * passes; a bucket is built for `rows` where `in` asks and there is none. */
static nu_status stage_of(nu_llm_runner *r, nu_llm_stage kind, uint32_t rows, bool in, nu_buffer **buf, uint32_t *cap,
                          bool *pending)
{
    if (kind == NU_LLM_STAGE_DECODE && r->o.by_commands)
        kind = NU_LLM_STAGE_PASS;
    *buf = NULL;
    if (kind == NU_LLM_STAGE_BATCH) {
        nu_llm_bucket *b;
        TRY(nu_llm__runner_bucket_of(r, rows, &b));
        *buf = in ? b->stage_in : b->stage_out, *cap = b->rows, *pending = b->out_pending;
    } else if (kind == NU_LLM_STAGE_DECODE) {
        *buf = in ? r->dec_in : r->dec_out, *cap = 1, *pending = r->dec_out_pending;
    } else {
        *buf = in ? r->pass_in : r->pass_out, *cap = r->o.chunk, *pending = r->pass_out_pending;
    }
    if (!*buf || rows > *cap)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, FN ": no hidden state of %u rows to hand %s", rows,
                            in ? "to the first share" : "on from the last share");
    return NU_OK;
}

nu_status nu_llm__runner_hand_over(nu_llm_runner *from, nu_llm_runner *to, nu_llm_stage kind, uint32_t rows)
{
    nu_buffer *out, *in;
    uint32_t out_cap, in_cap;
    bool pending, unused;
    TRY(stage_of(from, kind, rows, false, &out, &out_cap, &pending));
    TRY(stage_of(to, kind, rows, true, &in, &in_cap, &unused));
    size_t row = (size_t)from->hp->cfg.dim * 4, bytes = rows * row;
    const void *x; /* the shared buffer's bytes, written into the next device's: one copy */
    nu_status st = nu_llm__runner_nv(from, nu_buffer_contents(out, &x), "reading the hidden state");
    for (int half = 0; st == NU_OK && half < 1 + pending; half++) /* x, then the output still to add */
        st = nu_llm__runner_nv(to, nu_buffer_write(in, half * in_cap * row, (const char *)x + half * out_cap * row,
                                                   bytes),
                               "writing the hidden state");
    return st;
}
