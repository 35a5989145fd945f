/* weights.c: the roster's tensors onto the device, once each (weights.h). */
#include "weights.h"

#include <stdio.h>
#include <string.h>

#include "common.h"

#define FN "nu_llm_model_open"

static const char *const ROLE_NAMES[NU_LLM_W_ROLE_COUNT] = {
    [NU_LLM_W_EMBED] = "embed",          [NU_LLM_W_OUT_NORM] = "out_norm",   [NU_LLM_W_OUTPUT] = "output",
    [NU_LLM_W_ROPE_FREQS] = "rope_freqs", [NU_LLM_W_ROPE_LONG] = "rope_long", [NU_LLM_W_ROPE_SHORT] = "rope_short",
    [NU_LLM_W_ATTN_NORM] = "attn_norm",  [NU_LLM_W_Q] = "q",                 [NU_LLM_W_K] = "k",
    [NU_LLM_W_V] = "v",                  [NU_LLM_W_Q_BIAS] = "q_bias",       [NU_LLM_W_K_BIAS] = "k_bias",
    [NU_LLM_W_V_BIAS] = "v_bias",        [NU_LLM_W_QKV] = "qkv",             [NU_LLM_W_Q_NORM] = "q_norm",
    [NU_LLM_W_K_NORM] = "k_norm",        [NU_LLM_W_O] = "o",                 [NU_LLM_W_ATTN_POST_NORM] = "attn_post_norm",
    [NU_LLM_W_FFN_NORM] = "ffn_norm",    [NU_LLM_W_GATE] = "gate",           [NU_LLM_W_UP] = "up",
    [NU_LLM_W_GATE_UP] = "gate_up",      [NU_LLM_W_DOWN] = "down",           [NU_LLM_W_FFN_POST_NORM] = "ffn_post_norm"};

const char *nu_llm__role_name(nu_llm_role r) { return r < NU_LLM_W_ROLE_COUNT ? ROLE_NAMES[r] : "?"; }

/* One roster tensor of the file, planned: where its view goes and in what dtype. */
typedef struct planned {
    const nu_llm_file_tensor *file;
    nu_llm_role role;
    uint32_t layer;  /* UINT32_MAX for the global ones */
    nu_dtype target; /* the file's dtype (moved as it is), F16, Q4_0_SOA or Q6_K_SOA (converted) */
    bool add_offset; /* a norm's weight with hp.norm_offset added (converted to F32) */
    bool shared;     /* copied by the CPU into a shared buffer (embed_shared) */
    uint32_t rank;
    int64_t shape[2];
} planned;

static int64_t dim_of(const nu_llm_hparams *hp, nu_llm_dim d)
{
    const nu_llm_config *c = &hp->cfg;
    switch (d) {
    case NU_LLM_DIM_MODEL: return c->dim;
    case NU_LLM_DIM_Q: return (int64_t)c->heads * c->head_dim;
    case NU_LLM_DIM_KV: return (int64_t)c->kv_heads * c->head_dim;
    case NU_LLM_DIM_QKV: return ((int64_t)c->heads + 2 * (int64_t)c->kv_heads) * c->head_dim;
    case NU_LLM_DIM_FFN: return c->ffn;
    case NU_LLM_DIM_FFN2: return 2 * (int64_t)c->ffn;
    case NU_LLM_DIM_HEAD: return c->head_dim;
    case NU_LLM_DIM_VOCAB: return c->vocab;
    case NU_LLM_DIM_HALF_HEAD: return c->head_dim / 2;
    default: return 0;
    }
}

static bool is_float(nu_dtype t) { return t == NU_DTYPE_F32 || t == NU_DTYPE_F16 || t == NU_DTYPE_BF16; }

/* A block dtype the products and the gather read from a file. */
static bool is_repacked(nu_dtype t) { return t == NU_DTYPE_Q4_0_SOA || t == NU_DTYPE_Q6_K_SOA; }
static bool is_block(nu_dtype t) { return t < NU_DTYPE_COUNT && nu_dtype_block_elements(t) > 1 && !is_repacked(t); }

bool nu_llm__weights_direct_dtype(nu_dtype t) { return t == NU_DTYPE_Q4_0_SOA || t == NU_DTYPE_Q4_K; }

/* nu_llm_weights' dtype flags (repacked, blocks, k_formats, blocks_copied, layers_other_blocks) for
 * one planned tensor, the same whether planned (nu_llm__weights_plan) or loaded. */
static void note_dtypes(nu_llm_weights *w, const planned *p)
{
    nu_dtype t = p->target;
    w->repacked |= t == NU_DTYPE_Q4_0_SOA;
    w->blocks |= is_block(p->file->dtype);
    w->k_formats |= p->file->dtype == NU_DTYPE_Q4_K || p->file->dtype == NU_DTYPE_Q6_K;
    w->blocks_copied |= is_block(t) && t != NU_DTYPE_Q8_0 && t != NU_DTYPE_Q4_0 && t != NU_DTYPE_Q4_K && t != NU_DTYPE_Q6_K;
    w->layers_other_blocks |= p->layer != UINT32_MAX && nu_dtype_block_elements(t) > 1 && !nu_llm__weights_direct_dtype(t);
}

static void tensor_name(const nu_llm_source *s, const nu_llm_tensor_spec *spec, uint32_t layer, char *out, size_t n)
{
    const char *pattern = nu_llm__source_kind(s) == NU_LLM_SOURCE_GGUF ? spec->gguf : spec->hf;
    if (strstr(pattern, "%u"))
        snprintf(out, n, pattern, layer);
    else
        snprintf(out, n, "%s", pattern);
}

/* Checks a file tensor against its roster entry. */
static nu_status check(const nu_llm_file_tensor *f, const nu_llm_tensor_spec *spec, const nu_llm_hparams *hp,
                       uint32_t layer, planned *p)
{
    p->rank = spec->cols == NU_LLM_DIM_NONE ? 1 : 2;
    p->shape[0] = dim_of(hp, spec->rows);
    p->shape[1] = p->rank == 2 ? dim_of(hp, spec->cols) : 1;
    bool shape_ok = f->rank == p->rank && f->shape[0] == p->shape[0] && (p->rank == 1 || f->shape[1] == p->shape[1]);
    if (!shape_ok) {
        char got[96] = "", want[64];
        size_t at = 0;
        for (uint32_t d = 0; d < f->rank; d++)
            at += (size_t)snprintf(got + at, sizeof got - at, "%s%lld", d ? ", " : "", (long long)f->shape[d]);
        if (p->rank == 2)
            snprintf(want, sizeof want, "%lld, %lld", (long long)p->shape[0], (long long)p->shape[1]);
        else
            snprintf(want, sizeof want, "%lld", (long long)p->shape[0]);
        if (layer == UINT32_MAX)
            return nu_llm__fail(NU_ERROR_FORMAT, FN ": weight %s (%s) has shape [%s]; [%s] expected",
                                nu_llm__role_name(spec->role), f->name, got, want);
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": weight %s of layer %u (%s) has shape [%s]; [%s] expected",
                            nu_llm__role_name(spec->role), layer, f->name, got, want);
    }
    if (f->dtype == NU_DTYPE_COUNT || (!is_float(f->dtype) && !(is_block(f->dtype) && (spec->flags & NU_LLM_T_MATRIX))))
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": tensor %s is %s; F32, F16, BF16%s expected", f->name,
                            f->type_name ? f->type_name : nu_dtype_name(f->dtype),
                            spec->flags & NU_LLM_T_MATRIX ? " or a block format the products read" : " (a vector)");
    bool factors = spec->role == NU_LLM_W_ROPE_FREQS || spec->role == NU_LLM_W_ROPE_LONG ||
                   spec->role == NU_LLM_W_ROPE_SHORT;
    if (factors && f->dtype != NU_DTYPE_F32)
        return nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": tensor %s is %s; F32 expected", f->name, nu_dtype_name(f->dtype));
    p->file = f;
    p->role = spec->role;
    p->layer = layer;
    p->target = f->dtype;
    return NU_OK;
}

/* Whether the tensor is converted on the device (rather than moved as the file has it). */
static bool converts(const planned *p) { return p->target != p->file->dtype || p->add_offset; }

static uint64_t target_bytes(const planned *p)
{
    uint64_t n = (uint64_t)p->shape[0] * (uint64_t)p->shape[1];
    return n / nu_dtype_block_elements(p->target) * nu_dtype_block_bytes(p->target);
}

/* Where a converted tensor goes in its group's buffer after `at` bytes: at a 16-byte boundary (the
 * repacked layouts' aligned loads; the repacked sizes are multiples of 16, so back-to-back
 * matrices of one dtype stay back to back and stack). */
static uint64_t aligned16(uint64_t at) { return (at + 15) / 16 * 16; }

/* Whether `rows` rows of a Q6_K matrix p are whole groups of 8 super-blocks (nuvec/tensor.h). */
static bool whole_groups(const planned *p, int64_t rows) { return (uint64_t)rows * (uint64_t)(p->shape[1] / 256) % 8 == 0; }

/* Whether a Q6_K matrix is repacked to Q6_K_SOA (16-byte-aligned super-blocks for the products'
 * loads): rows of a multiple of 256 and whole groups of 8 super-blocks, and so is each part of a
 * fused q|k|v or gate|up matrix (its row slices serve as the parts); never the token embedding
 * (the gather reads the file's blocks). */
static bool repacks_q6_k(const planned *p, const nu_llm_hparams *hp)
{
    if (p->rank != 2 || p->file->dtype != NU_DTYPE_Q6_K || p->role == NU_LLM_W_EMBED || p->shape[1] % 256 ||
        !whole_groups(p, p->shape[0]))
        return false;
    if (p->role == NU_LLM_W_QKV)
        return whole_groups(p, dim_of(hp, NU_LLM_DIM_Q)) && whole_groups(p, dim_of(hp, NU_LLM_DIM_KV));
    if (p->role == NU_LLM_W_GATE_UP)
        return whole_groups(p, dim_of(hp, NU_LLM_DIM_FFN));
    return true;
}

/* Whether every planned matrix of layer l's span [from, to) may be repacked to Q4_0_SOA. */
static bool layer_repacks(const planned *p, size_t from, size_t to)
{
    bool any = false;
    for (size_t i = from; i < to; i++) {
        if (p[i].rank != 2)
            continue;
        if (p[i].file->dtype != NU_DTYPE_Q4_0 || p[i].shape[1] % 256)
            return false;
        any = true;
    }
    return any;
}

/* The plan: every roster tensor the file has, global ones first, then each layer's in roster order;
 * targets chosen by the options. *count receives how many. */
static nu_status plan_all(const nu_llm_source *s, const nu_llm_arch *a, const nu_llm_hparams *hp,
                          const nu_llm_weights_options *o, planned **out, size_t *count)
{
    const nu_llm_config *c = &hp->cfg;
    size_t cap = a->roster_count * (size_t)(c->layers + 1), n = 0;
    planned *p = nu_llm__calloc(cap, sizeof *p);
    if (!p)
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN ": no memory");
    nu_status st = NU_OK;
    uint32_t from = o->first, to = o->end ? o->end : c->layers;
    bool embeds = from == 0, head = to == c->layers;
    for (uint32_t pass = 0; st == NU_OK && pass <= c->layers; pass++) {
        uint32_t layer = pass == 0 ? UINT32_MAX : pass - 1;
        if (pass > 0 && (layer < from || layer >= to))
            continue; /* another device's layer */
        size_t first = n;
        for (uint32_t r = 0; st == NU_OK && r < a->roster_count; r++) {
            const nu_llm_tensor_spec *spec = &a->roster[r];
            bool global = spec->role < NU_LLM_W_GLOBAL_COUNT;
            if (global != (pass == 0))
                continue;
            if ((spec->role == NU_LLM_W_EMBED && !embeds && !(head && c->tied_embeddings)) ||
                ((spec->role == NU_LLM_W_OUT_NORM || spec->role == NU_LLM_W_OUTPUT) && !head))
                continue; /* the first device's input, the last one's output */
            if (spec->role == NU_LLM_W_OUTPUT && c->tied_embeddings)
                continue; /* tied: the embedding serves (a stored lm_head is what transformers ties away) */
            if (!(nu_llm__source_kind(s) == NU_LLM_SOURCE_GGUF ? spec->gguf : spec->hf))
                continue; /* not a tensor of this format (made from the metadata, if at all) */
            char name[160];
            tensor_name(s, spec, layer, name, sizeof name);
            const nu_llm_file_tensor *f = nu_llm__source_find(s, name);
            if (!f) {
                if (spec->flags & NU_LLM_T_OPTIONAL && !(spec->role == NU_LLM_W_OUTPUT))
                    continue;
                st = nu_llm__fail(NU_ERROR_FORMAT, FN ": the model has no tensor %s", name);
                break;
            }
            if ((st = check(f, spec, hp, layer, &p[n])) != NU_OK)
                break;
            if (o->f16 && (spec->flags & NU_LLM_T_MATRIX) && is_float(f->dtype) && f->dtype != NU_DTYPE_F16)
                p[n].target = NU_DTYPE_F16;
            if (hp->norm_offset != 0 && (spec->flags & NU_LLM_T_NORM))
                p[n].target = NU_DTYPE_F32, p[n].add_offset = true;
            n++;
        }
        bool repack = o->repack_q4_0 && st == NU_OK &&
                      (pass > 0 ? layer_repacks(p, first, n)
                                : !c->tied_embeddings && n > first && p[n - 1].role == NU_LLM_W_OUTPUT &&
                                      layer_repacks(p, n - 1, n));
        for (size_t i = pass > 0 ? first : n - (repack ? 1 : 0); repack && i < n; i++)
            if (p[i].rank == 2)
                p[i].target = NU_DTYPE_Q4_0_SOA;
        for (size_t i = first; o->repack_q6_k && st == NU_OK && i < n; i++)
            if (repacks_q6_k(&p[i], hp))
                p[i].target = NU_DTYPE_Q6_K_SOA;
    }
    if (st != NU_OK) {
        nu_llm__free(p);
        return st;
    }
    for (size_t i = 0; o->embed_shared && !c->tied_embeddings && i < n; i++)
        p[i].shared = p[i].role == NU_LLM_W_EMBED && p[i].layer == UINT32_MAX && !converts(&p[i]);
    *out = p;
    *count = n;
    return NU_OK;
}

nu_status nu_llm__weights_plan(const nu_llm_source *s, const nu_llm_arch *a, const nu_llm_hparams *hp,
                               const nu_llm_weights_options *o, uint64_t *bytes, uint64_t *shared_bytes,
                               nu_llm_weights *dtypes)
{
    planned *p;
    size_t n;
    *bytes = *shared_bytes = 0;
    *dtypes = (nu_llm_weights){0};
    nu_status st = plan_all(s, a, hp, o, &p, &n);
    if (st != NU_OK)
        return st;
    for (size_t i = 0; i < n; i++) {
        *bytes += target_bytes(&p[i]);
        *shared_bytes += p[i].shared ? target_bytes(&p[i]) : 0;
        note_dtypes(dtypes, &p[i]);
    }
    nu_llm__free(p);
    return NU_OK;
}

static nu_status keep(nu_llm_weights *w, nu_buffer *b)
{
    if (w->buffer_count == w->buffer_cap) {
        uint32_t cap = w->buffer_cap ? w->buffer_cap * 2 : 16;
        nu_buffer **nb = nu_llm__calloc(cap, sizeof *nb);
        if (!nb) {
            nu_buffer_free(b);
            return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN ": no memory");
        }
        if (w->buffers)
            memcpy(nb, w->buffers, w->buffer_count * sizeof *nb);
        nu_llm__free(w->buffers);
        w->buffers = nb;
        w->buffer_cap = cap;
    }
    w->buffers[w->buffer_count++] = b;
    w->bytes += nu_buffer_accounted_bytes(b);
    return NU_OK;
}

static nu_tensor *slot_of(nu_llm_weights *w, const planned *p, bool **has)
{
    if (p->layer == UINT32_MAX) {
        *has = &w->has_global[p->role];
        return &w->global[p->role];
    }
    *has = &w->layers[p->layer].has[p->role];
    return &w->layers[p->layer].w[p->role];
}

static nu_tensor view_of(const planned *p, nu_buffer *b, uint64_t offset, nu_dtype dtype)
{
    return nu_tensor_make(b, offset, dtype, p->rank, p->shape);
}

/* Moves planned tensors pick[0 .. k) (all of one target group) to the device as they are. */
static nu_status move_as_is(nu_device *d, nu_llm_source *s, nu_llm_weights *w, planned *p, const size_t *pick,
                            size_t k)
{
    const nu_llm_file_tensor **t = nu_llm__malloc_array(k, sizeof *t);
    uint32_t *where = nu_llm__malloc_array(k, sizeof *where);
    uint64_t *offset = nu_llm__malloc_array(k, sizeof *offset);
    size_t files = nu_llm__source_files(s), count = 0;
    nu_buffer **bufs = nu_llm__calloc(files, sizeof *bufs);
    nu_status st = t && where && offset && bufs ? NU_OK : nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN ": no memory");
    for (size_t i = 0; st == NU_OK && i < k; i++)
        t[i] = p[pick[i]].file;
    if (st == NU_OK)
        st = nu_llm__source_move(s, t, k, "llm weights", bufs, &count, where, offset);
    uint32_t first = w->buffer_count;
    for (size_t b = 0; b < count; b++)
        if (st == NU_OK)
            st = keep(w, bufs[b]);
        else
            nu_buffer_free(bufs[b]);
    for (size_t i = 0; st == NU_OK && i < k; i++) {
        bool *has;
        nu_tensor *dst = slot_of(w, &p[pick[i]], &has);
        *dst = view_of(&p[pick[i]], w->buffers[first + where[i]], offset[i], p[pick[i]].file->dtype);
        *has = true;
        if ((st = nu_tensor_check(dst, p[pick[i]].file->name)) != NU_OK)
            st = nu_llm__fail(st, FN ": %s", nu_error_message(d));
    }
    nu_llm__free(t), nu_llm__free(where), nu_llm__free(offset), nu_llm__free(bufs);
    return st;
}

/* Copies planned tensor q (the embedding) from the file's mapping into a new shared buffer of its own:
 * host memory on a discrete GPU, whose work reads a step's rows of it over the bus. */
static nu_status copy_to_shared(nu_device *d, nu_llm_source *s, nu_llm_weights *w, const planned *q)
{
    uint64_t bytes = target_bytes(q);
    nu_buffer *b = NULL;
    void *dst = NULL;
    nu_status st = nu_buffer_new(d, (size_t)bytes, NU_STORAGE_SHARED, &b);
    if (st == NU_OK)
        st = nu_buffer_contents_mut(b, &dst);
    if (st != NU_OK) {
        nu_buffer_free(b);
        return nu_llm__fail(st, FN ": %s in a shared buffer (%llu bytes): %s", q->file->name,
                            (unsigned long long)bytes, nu_error_message(d));
    }
    if ((st = nu_llm__source_read(s, q->file, dst, bytes)) != NU_OK) {
        nu_buffer_free(b);
        return st;
    }
    nu_buffer_set_name(b, "llm weights (shared)");
    if ((st = keep(w, b)) != NU_OK)
        return st;
    w->shared_bytes += nu_buffer_accounted_bytes(b);
    bool *has;
    nu_tensor *dst_view = slot_of(w, q, &has);
    *dst_view = view_of(q, b, 0, q->file->dtype);
    *has = true;
    if ((st = nu_tensor_check(dst_view, q->file->name)) != NU_OK)
        st = nu_llm__fail(st, FN ": %s", nu_error_message(d));
    return st;
}

/* Converts planned tensors pick[0 .. k) (one layer's, say): their file bytes into staging, then
 * nu_op_copy into one new buffer in pick order; staging freed after the commit (its memory returns
 * when the copies are done). The commit's command buffer goes to *inflight (the caller waits). */
/* The one-element F32 tensor `value` (a norm offset to add), uploaded by c into a new buffer *b
 * (the caller frees it after committing c). */
static nu_status scalar_tensor(nu_device *d, nu_commands *c, float value, nu_buffer **b, nu_tensor *out)
{
    int64_t one = 1;
    nu_status st = nu_buffer_new(d, 4, NU_STORAGE_PRIVATE, b);
    if (st == NU_OK)
        st = nu_commands_upload(c, *b, 0, &value, 4);
    if (st != NU_OK)
        return nu_llm__fail(st, FN ": the norms' offset: %s", nu_error_message(d));
    *out = nu_tensor_make(*b, 0, NU_DTYPE_F32, 1, &one);
    return NU_OK;
}

static nu_status convert(nu_device *d, nu_llm_source *s, nu_llm_weights *w, planned *p, const size_t *pick, size_t k,
                         float norm_offset, nu_commands **inflight)
{
    size_t files = nu_llm__source_files(s), count = 0;
    const nu_llm_file_tensor **t = nu_llm__malloc_array(k, sizeof *t);
    uint32_t *where = nu_llm__malloc_array(k, sizeof *where);
    uint64_t *offset = nu_llm__malloc_array(k, sizeof *offset);
    nu_buffer **staging = nu_llm__calloc(files, sizeof *staging), *out = NULL, *offset_buf = NULL;
    nu_commands *c = NULL;
    nu_tensor offset_t = {0};
    nu_status st = t && where && offset && staging ? NU_OK : nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN ": no memory");
    uint64_t bytes = 0;
    for (size_t i = 0; st == NU_OK && i < k; i++) {
        t[i] = p[pick[i]].file;
        bytes = aligned16(bytes) + target_bytes(&p[pick[i]]);
    }
    if (st == NU_OK)
        st = nu_llm__source_move(s, t, k, "llm weights staging", staging, &count, where, offset);
    if (st == NU_OK && (st = nu_buffer_new(d, bytes, NU_STORAGE_PRIVATE, &out)) != NU_OK)
        st = nu_llm__fail(st, FN ": converted weights (%llu bytes): %s", (unsigned long long)bytes, nu_error_message(d));
    if (st == NU_OK) {
        nu_buffer_set_name(out, "llm weights");
        st = keep(w, out);
    }
    if (st == NU_OK && (st = nu_commands_new(d, NU_QUEUE_COMPUTE, &c)) != NU_OK)
        st = nu_llm__fail(st, FN ": %s", nu_error_message(d));
    uint64_t at = 0;
    for (size_t i = 0; st == NU_OK && i < k; i++) {
        planned *q = &p[pick[i]];
        at = aligned16(at);
        nu_tensor src = view_of(q, staging[where[i]], offset[i], q->file->dtype), dst = view_of(q, out, at, q->target);
        bool *has;
        if (q->add_offset && !offset_buf && (st = scalar_tensor(d, c, norm_offset, &offset_buf, &offset_t)) != NU_OK)
            break;
        if ((st = nu_op_copy(c, &dst, &src)) != NU_OK ||
            (q->add_offset && (st = nu_op_add(c, &dst, &dst, &offset_t)) != NU_OK)) {
            st = nu_llm__fail(st, FN ": converting %s to %s: %s", q->file->name, nu_dtype_name(q->target),
                              nu_error_message(d));
            break;
        }
        *slot_of(w, q, &has) = dst;
        *has = true;
        at += target_bytes(q);
        w->repacked |= q->target == NU_DTYPE_Q4_0_SOA;
    }
    if (st == NU_OK && (st = nu_commands_commit(c)) != NU_OK)
        st = nu_llm__fail(st, FN ": converting weights: %s", nu_error_message(d));
    for (size_t b = 0; b < count; b++)
        nu_buffer_free(staging[b]); /* its memory is kept until the copies complete */
    nu_buffer_free(offset_buf);
    if (st == NU_OK)
        *inflight = c;
    else
        nu_commands_free(c);
    nu_llm__free(t), nu_llm__free(where), nu_llm__free(offset), nu_llm__free(staging);
    return st;
}

static nu_status finish(nu_device *d, nu_commands **c)
{
    if (!*c)
        return NU_OK;
    nu_status st = nu_commands_wait(*c, NU_WAIT_FOREVER);
    if (st != NU_OK)
        st = nu_llm__fail(st, FN ": converting weights: %s", nu_error_message(d));
    nu_commands_free(*c);
    *c = NULL;
    return st;
}

/* RoPE frequency divisors the architecture made from the metadata, as the device tensor of `role`. */
static nu_status made_rope_factors(nu_device *d, nu_llm_weights *w, const nu_llm_hparams *hp, nu_llm_role role,
                                   const float *factors)
{
    int64_t n = hp->cfg.head_dim / 2;
    nu_buffer *b = NULL;
    nu_status st = nu_buffer_new(d, (size_t)n * 4, NU_STORAGE_PRIVATE, &b);
    nu_commands *c = NULL;
    if (st == NU_OK)
        st = nu_commands_new(d, NU_QUEUE_COMPUTE, &c);
    if (st == NU_OK)
        st = nu_commands_upload(c, b, 0, factors, (size_t)n * 4);
    if (st == NU_OK)
        st = nu_commands_commit(c);
    if (st == NU_OK)
        st = nu_commands_wait(c, NU_WAIT_FOREVER);
    nu_commands_free(c);
    if (st != NU_OK) {
        nu_buffer_free(b);
        return nu_llm__fail(st, FN ": the RoPE frequency factors: %s", nu_error_message(d));
    }
    nu_buffer_set_name(b, "llm rope factors");
    if ((st = keep(w, b)) != NU_OK)
        return st;
    w->global[role] = nu_tensor_make(b, 0, NU_DTYPE_F32, 1, &n);
    w->has_global[role] = true;
    return NU_OK;
}

/* A fused matrix's row slices as the separate roles: rows [0, n0), [n0, n0 + n1), ... */
static nu_status split_rows(nu_llm_layer_w *y, nu_llm_role fused, const nu_llm_role *roles, const int64_t *rows,
                            int count)
{
    int64_t at = 0;
    for (int i = 0; i < count; i++) {
        nu_status st = nu_tensor_slice(&y->w[fused], 0, at, rows[i], &y->w[roles[i]]);
        if (st != NU_OK)
            return nu_llm__fail(st, FN ": slicing a fused %s matrix", nu_llm__role_name(fused));
        y->has[roles[i]] = true;
        at += rows[i];
    }
    return NU_OK;
}

/* a's and b's rows as one matrix (or vector) where b follows a in the same buffer with the same dtype. */
static bool stacked(const nu_tensor *a, const nu_tensor *b, nu_tensor *out)
{
    if (a->buffer != b->buffer || a->dtype != b->dtype || a->rank != b->rank || a->rank > 2 ||
        (a->rank == 2 && a->shape[1] != b->shape[1]) || !nu_tensor_is_contiguous(a) || !nu_tensor_is_contiguous(b) ||
        b->offset != a->offset + nu_tensor_span_bytes(a))
        return false;
    int64_t shape[2] = {a->shape[0] + b->shape[0], a->rank == 2 ? a->shape[1] : 1};
    *out = nu_tensor_make(a->buffer, a->offset, a->dtype, a->rank, shape);
    return true;
}

nu_status nu_llm__weights_load(nu_device *d, nu_llm_source *s, const nu_llm_arch *a, const nu_llm_hparams *hp,
                               const nu_llm_weights_options *o, nu_llm_weights *w)
{
    memset(w, 0, sizeof *w);
    const nu_llm_config *c = &hp->cfg;
    planned *p = NULL;
    size_t n = 0;
    size_t *pick = NULL;
    nu_commands *inflight = NULL;
    nu_status st = plan_all(s, a, hp, o, &p, &n);
    if (st == NU_OK && !(w->layers = nu_llm__calloc(c->layers, sizeof *w->layers)))
        st = nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN ": no memory");
    if (st == NU_OK && !(pick = nu_llm__malloc_array(n ? n : 1, sizeof *pick)))
        st = nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN ": no memory");
    w->layer_count = c->layers;
    /* Everything kept as the file has it, in one move (roster order). */
    size_t k = 0;
    for (size_t i = 0; st == NU_OK && i < n; i++) {
        if (!converts(&p[i]) && !p[i].shared)
            pick[k++] = i;
        note_dtypes(w, &p[i]);
    }
    if (st == NU_OK && k)
        st = move_as_is(d, s, w, p, pick, k);
    for (size_t i = 0; st == NU_OK && i < n; i++)
        if (p[i].shared)
            st = copy_to_shared(d, s, w, &p[i]);
    /* The converted ones a group (the globals, then each layer) at a time, one group in flight. */
    bool converted = false;
    for (size_t i = 0; st == NU_OK && i < n;) {
        size_t j = i;
        k = 0;
        while (j < n && p[j].layer == p[i].layer) {
            if (converts(&p[j]))
                pick[k++] = j;
            j++;
        }
        if (k) {
            nu_commands *next = NULL;
            st = convert(d, s, w, p, pick, k, hp->norm_offset, &next);
            nu_status done = finish(d, &inflight);
            st = st != NU_OK ? st : done;
            inflight = next;
            converted = true;
        }
        i = j;
    }
    nu_status done = finish(d, &inflight);
    st = st != NU_OK ? st : done;
    if (st == NU_OK && converted && !o->keep_cache)
        nu_memory_clear_cache(d); /* the staging's memory, returned when the copies completed */
    if (st == NU_OK && hp->rope_factors_made && !w->has_global[NU_LLM_W_ROPE_FREQS])
        st = made_rope_factors(d, w, hp, NU_LLM_W_ROPE_FREQS, hp->rope_factors);
    if (st == NU_OK && hp->longrope_made && !w->has_global[NU_LLM_W_ROPE_LONG])
        st = made_rope_factors(d, w, hp, NU_LLM_W_ROPE_LONG, hp->rope_long);
    if (st == NU_OK && hp->longrope_made && !w->has_global[NU_LLM_W_ROPE_SHORT])
        st = made_rope_factors(d, w, hp, NU_LLM_W_ROPE_SHORT, hp->rope_short);
    if (st == NU_OK && c->tied_embeddings && (!o->end || o->end == c->layers)) {
        w->global[NU_LLM_W_OUTPUT] = w->global[NU_LLM_W_EMBED];
        w->has_global[NU_LLM_W_OUTPUT] = true;
    }
    int64_t Q = (int64_t)c->heads * c->head_dim, KV = (int64_t)c->kv_heads * c->head_dim;
    for (uint32_t l = o->first; st == NU_OK && l < (o->end ? o->end : c->layers); l++) {
        nu_llm_layer_w *y = &w->layers[l];
        static const nu_llm_role qkv[3] = {NU_LLM_W_Q, NU_LLM_W_K, NU_LLM_W_V}, gu[2] = {NU_LLM_W_GATE, NU_LLM_W_UP};
        const int64_t qkv_rows[3] = {Q, KV, KV}, gu_rows[2] = {c->ffn, c->ffn};
        if (y->has[NU_LLM_W_QKV] && (st = split_rows(y, NU_LLM_W_QKV, qkv, qkv_rows, 3)) == NU_OK)
            y->qkv = y->w[NU_LLM_W_QKV], y->qkv_stacked = o->stack;
        if (st == NU_OK && y->has[NU_LLM_W_GATE_UP] && (st = split_rows(y, NU_LLM_W_GATE_UP, gu, gu_rows, 2)) == NU_OK)
            y->gate_up = y->w[NU_LLM_W_GATE_UP], y->gate_up_stacked = o->stack;
        if (st != NU_OK || !o->stack)
            continue;
        nu_tensor qk, qkb;
        if (!y->has[NU_LLM_W_QKV])
            y->qkv_stacked = stacked(&y->w[NU_LLM_W_Q], &y->w[NU_LLM_W_K], &qk) && stacked(&qk, &y->w[NU_LLM_W_V], &y->qkv);
        if (!y->has[NU_LLM_W_GATE_UP])
            y->gate_up_stacked = stacked(&y->w[NU_LLM_W_GATE], &y->w[NU_LLM_W_UP], &y->gate_up);
        y->qkv_bias_stacked = y->has[NU_LLM_W_Q_BIAS] && y->has[NU_LLM_W_K_BIAS] && y->has[NU_LLM_W_V_BIAS] &&
                              stacked(&y->w[NU_LLM_W_Q_BIAS], &y->w[NU_LLM_W_K_BIAS], &qkb) &&
                              stacked(&qkb, &y->w[NU_LLM_W_V_BIAS], &y->qkv_bias);
    }
    nu_llm__free(p);
    nu_llm__free(pick);
    if (st != NU_OK)
        nu_llm__weights_free(w);
    return st;
}

void nu_llm__weights_free(nu_llm_weights *w)
{
    for (uint32_t i = 0; i < w->buffer_count; i++)
        nu_buffer_free(w->buffers[i]);
    nu_llm__free(w->buffers);
    nu_llm__free(w->layers);
    memset(w, 0, sizeof *w);
}
