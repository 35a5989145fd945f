/* model_int.h: the model's state, shared only by model.c (opening, prefill, decode, greedy
 * decode, memory) and model_sequences.c (the slots and the batched steps). Not seen outside the
 * model. */
#ifndef NU_LLM_MODEL_INT_H
#define NU_LLM_MODEL_INT_H

#include "nuvec_llm.h"

#include "arch/arch.h"
#include "kv_cache.h"
#include "shares.h"
#include "source/source.h"

struct nu_llm_model {
    nu_llm_source *src;
    const nu_llm_arch *arch;
    nu_llm_hparams hp;
    nu_llm_shares sh; /* the devices and their layers (one share on one device) */
    nu_llm_kv *kv;    /* the first share's cache: the slots' lengths and tokens the model reads */
    nu_llm_tokenizer *tok;
    char tok_note[256];
    bool measure_peaks;
    uint64_t need, open_peak, prefill_peak, decode_peak; /* nu_llm_memory's */
};

/* With measure_peaks: the devices' peaks reset before a call's work (start), read after and
 * summed into *into (end). */
void nu_llm__model_peak_start(nu_llm_model *m);
void nu_llm__model_peak_end(nu_llm_model *m, uint64_t *into);

#endif
