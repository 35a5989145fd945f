/* model_sequences.c: the model's sequences and batches (nuvec_llm.h's "Sequences and batches"): the
 * slots the model hands out, and the steps that append rows to several of them at once (prefill
 * passes for a slot's several rows, one batched decode for the slots with one), over the shares
 * (shares.h). */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "model_int.h"

uint32_t nu_llm_model_slots(const nu_llm_model *m) { return m ? m->kv->slots : 0; }

static bool held(const nu_llm_model *m, uint32_t slot) { return slot < m->kv->slots && m->kv->used[slot]; }

nu_status nu_llm_model_seq_acquire(nu_llm_model *m, const int32_t *prefix, uint32_t n, uint32_t *slot, uint32_t *reused)
{
    if (slot)
        *slot = UINT32_MAX;
    if (reused)
        *reused = 0;
    if (!m || !slot || (!prefix && n))
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_seq_acquire: NULL %s",
                            !m ? "model" : !slot ? "slot" : "prefix");
    uint32_t kept = 0;
    nu_status st = nu_llm__kv_acquire_prefix(m->kv, prefix, n, slot, &kept);
    if (st != NU_OK)
        return *slot = UINT32_MAX, st;
    nu_llm__shares_mirror_slot(&m->sh, *slot);
    if (reused)
        *reused = kept;
    return st;
}

nu_status nu_llm_model_seq_release(nu_llm_model *m, uint32_t slot)
{
    if (!m || !held(m, slot))
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_seq_release: %s", m ? "the slot is not held" : "NULL model");
    nu_llm__kv_release(m->kv, slot);
    nu_llm__shares_mirror_slot(&m->sh, slot);
    return NU_OK;
}

nu_status nu_llm_model_seq_truncate(nu_llm_model *m, uint32_t slot, uint32_t length)
{
    if (!m || !held(m, slot) || length > m->kv->length[slot])
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_seq_truncate: %s",
                            !m ? "NULL model" : !held(m, slot) ? "the slot is not held" : "a length past the slot's");
    nu_llm__shares_set_length(&m->sh, slot, length);
    return NU_OK;
}

uint32_t nu_llm_model_seq_length(const nu_llm_model *m, uint32_t slot, const int32_t **tokens)
{
    if (tokens)
        *tokens = NULL;
    if (!m || !held(m, slot))
        return 0;
    if (tokens)
        *tokens = m->kv->tokens + (size_t)slot * m->kv->positions;
    return m->kv->length[slot];
}


/* Checks a step: slots held, ids, room, outputs on slots' last rows only; counts[slot] = rows. */
static nu_status check_step(const nu_llm_model *m, const nu_llm_row *rows, uint32_t n, const float *logits,
                            const int32_t *ids, uint32_t *counts)
{
    static const char fn[] = "nu_llm_model_step";
    for (uint32_t i = 0; i < n; i++) {
        const nu_llm_row *r = &rows[i];
        if (!held(m, r->slot))
            return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "%s: row %u's slot %u is not held", fn, i, r->slot);
        if (r->token < 0 || (uint32_t)r->token >= m->hp.cfg.vocab)
            return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "%s: row %u's token is %d; ids are 0 to %u", fn, i, r->token,
                                m->hp.cfg.vocab - 1);
        if (r->output > NU_LLM_OUTPUT_ARGMAX || (r->output == NU_LLM_OUTPUT_LOGITS && !logits) ||
            (r->output == NU_LLM_OUTPUT_ARGMAX && !ids))
            return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "%s: row %u's output is %d with %s", fn, i, (int)r->output,
                                r->output == NU_LLM_OUTPUT_LOGITS ? "NULL logits" : "NULL ids");
        counts[r->slot]++;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t s = rows[i].slot;
        if (counts[s] > m->kv->positions - m->kv->length[s])
            return nu_llm__fail(NU_ERROR_OUT_OF_RANGE, "%s: %u tokens at position %u of slot %u overflow the cache's %u "
                                "positions", fn, counts[s], m->kv->length[s], s, m->kv->positions);
        for (uint32_t j = i + 1; rows[i].output != NU_LLM_OUTPUT_NONE && j < n; j++)
            if (rows[j].slot == s)
                return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "%s: row %u asks for an output but is not slot %u's last "
                                    "row (row %u is)", fn, i, s, j);
    }
    return NU_OK;
}

nu_status nu_llm_model_step(nu_llm_model *m, const nu_llm_row *rows, uint32_t n, float *logits, int32_t *ids)
{
    if (!m || !rows || !n)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_model_step: %s",
                            !m ? "NULL model" : !rows ? "NULL rows" : "no rows");
    const uint32_t V = m->hp.cfg.vocab;
    uint32_t *counts = nu_llm__calloc(m->kv->slots, sizeof *counts);
    int32_t *tokens = nu_llm__malloc_array(n, sizeof *tokens), *dec_ids = nu_llm__malloc_array(n, sizeof *dec_ids);
    int32_t *dec_tokens = nu_llm__malloc_array(n, sizeof *dec_tokens);
    uint32_t *dec_slots = nu_llm__malloc_array(n, sizeof *dec_slots), *dec_row = nu_llm__malloc_array(n, sizeof *dec_row);
    float *dec_logits = NULL, *one = nu_llm__malloc_array(V, sizeof *one);
    nu_status st = counts && tokens && dec_tokens && dec_ids && dec_slots && dec_row && one
                       ? check_step(m, rows, n, logits, ids, counts)
                       : nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "nu_llm_model_step: no memory");
    /* Where each output goes: the k-th row with LOGITS to logits + k * V, the k-th with ARGMAX to ids[k]. */
    uint32_t n_dec = 0;
    bool dec_wants_logits = false;
    nu_llm__model_peak_start(m);
    for (uint32_t i = 0; st == NU_OK && i < n; i++) {
        uint32_t s = rows[i].slot;
        if (counts[s] == 1) { /* a decode row */
            dec_slots[n_dec] = s, dec_row[n_dec] = i, dec_tokens[n_dec++] = rows[i].token;
            dec_wants_logits |= rows[i].output == NU_LLM_OUTPUT_LOGITS;
            continue;
        }
        if (counts[s] == 0)
            continue; /* this slot's prefill ran at its first row */
        uint32_t k = 0;
        nu_llm_output out = NU_LLM_OUTPUT_NONE;
        for (uint32_t j = i; j < n; j++)
            if (rows[j].slot == s)
                tokens[k++] = rows[j].token, out = rows[j].output;
        counts[s] = 0;
        st = nu_llm__shares_prefill(&m->sh, s, tokens, k, out != NU_LLM_OUTPUT_NONE ? one : NULL);
        if (st == NU_OK && out != NU_LLM_OUTPUT_NONE) { /* its last row's output, placed below */
            uint32_t last = n;
            while (rows[--last].slot != s) {
            }
            uint32_t nl = 0, na = 0;
            for (uint32_t j = 0; j < last; j++)
                nl += rows[j].output == NU_LLM_OUTPUT_LOGITS, na += rows[j].output == NU_LLM_OUTPUT_ARGMAX;
            if (out == NU_LLM_OUTPUT_LOGITS)
                memcpy(logits + (size_t)nl * V, one, (size_t)V * sizeof *one);
            else
                ids[na] = nu_llm__argmax(one, V);
        }
    }
    if (st == NU_OK && n_dec && dec_wants_logits &&
        !(dec_logits = nu_llm__malloc_array((size_t)n_dec * V, sizeof *dec_logits)))
        st = nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "nu_llm_model_step: no memory");
    if (st == NU_OK && n_dec)
        st = nu_llm__shares_batch(&m->sh, dec_tokens, dec_slots, n_dec, dec_logits, dec_ids);
    for (uint32_t d = 0; st == NU_OK && d < n_dec; d++) {
        uint32_t i = dec_row[d], nl = 0, na = 0;
        for (uint32_t j = 0; j < i; j++)
            nl += rows[j].output == NU_LLM_OUTPUT_LOGITS, na += rows[j].output == NU_LLM_OUTPUT_ARGMAX;
        if (rows[i].output == NU_LLM_OUTPUT_LOGITS)
            memcpy(logits + (size_t)nl * V, dec_logits + (size_t)d * V, (size_t)V * sizeof *one);
        else if (rows[i].output == NU_LLM_OUTPUT_ARGMAX)
            ids[na] = dec_ids[d];
    }
    nu_llm__model_peak_end(m, &m->decode_peak);
    nu_llm__free(counts), nu_llm__free(tokens), nu_llm__free(dec_tokens), nu_llm__free(dec_ids), nu_llm__free(dec_slots);
    nu_llm__free(dec_row), nu_llm__free(dec_logits), nu_llm__free(one);
    return st;
}

nu_status nu_llm_model_step_greedy(nu_llm_model *m, const nu_llm_row *rows, uint32_t n, uint32_t steps, int32_t *ids)
{
    static const char fn[] = "nu_llm_model_step_greedy";
    if (!m || !rows || !ids || !n || !steps)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "%s: %s", fn,
                            !m ? "NULL model" : !rows ? "NULL rows" : !ids ? "NULL ids" : !n ? "no rows" : "no steps");
    uint32_t *seen = nu_llm__calloc(m->kv->slots, sizeof *seen), *slots = nu_llm__malloc_array(n, sizeof *slots);
    int32_t *tokens = nu_llm__malloc_array(n, sizeof *tokens);
    nu_status st = seen && slots && tokens ? NU_OK : nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "%s: no memory", fn);
    for (uint32_t i = 0; st == NU_OK && i < n; i++) {
        const nu_llm_row *r = &rows[i];
        if (!held(m, r->slot))
            st = nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "%s: row %u's slot %u is not held", fn, i, r->slot);
        else if (seen[r->slot]++)
            st = nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "%s: slot %u has two rows (one row a slot)", fn, r->slot);
        else if (r->token < 0 || (uint32_t)r->token >= m->hp.cfg.vocab)
            st = nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "%s: row %u's token is %d; ids are 0 to %u", fn, i, r->token,
                              m->hp.cfg.vocab - 1);
        else if (steps > m->kv->positions - m->kv->length[r->slot])
            st = nu_llm__fail(NU_ERROR_OUT_OF_RANGE, "%s: %u steps at position %u of slot %u overflow the cache's %u "
                              "positions", fn, steps, m->kv->length[r->slot], r->slot, m->kv->positions);
        else
            slots[i] = r->slot, tokens[i] = r->token;
    }
    if (st == NU_OK) {
        nu_llm__model_peak_start(m);
        st = nu_llm__shares_batch_greedy(&m->sh, tokens, slots, n, steps, ids);
        nu_llm__model_peak_end(m, &m->decode_peak);
    }
    nu_llm__free(seen), nu_llm__free(slots), nu_llm__free(tokens);
    return st;
}
