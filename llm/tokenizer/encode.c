/* encode.c: nu_llm_tokenize_ex and nu_llm_tokenize: the special tokens split out of the text
 * (special.c), each piece of text between them encoded by the tokenizer's kind (spm.c, bpe.c),
 * bos and eos around, the count kept past the caller's room so that one call tells the size. */
#include <string.h>

#include "tok.h"

void nu_llm__work_free(nu_llm__work *w)
{
    nu_llm__free(w->text);
    nu_llm__free(w->sym);
    nu_llm__free(w->heap);
    nu_llm__free(w->prefixed);
    nu_llm__pretok_work_free(w->match);
}

static bool wanted(nu_llm_add add, bool vocab) { return add == NU_LLM_ADD_YES || (add != NU_LLM_ADD_NO && vocab); }

/* One piece of text: SentencePiece puts its space in front of each (after a special token too, as
 * llama.cpp); byte-level BPE with add_space_prefix (Hugging Face's add_prefix_space) gives one to
 * a piece that does not start with ' '. */
static nu_status encode_text(const nu_llm_tokenizer *t, const char *s, size_t n, nu_llm__work *w, nu_llm__out *o)
{
    if (t->kind == NU_LLM__SPM)
        return nu_llm__spm_encode(t, s, n, true, w, o);
    if (t->add_space_prefix && s[0] != ' ') {
        if (!nu_llm__grow((void **)&w->prefixed, &w->prefixed_cap, n + 1, 1))
            return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "nu_llm_tokenize: out of host memory");
        w->prefixed[0] = ' ';
        memcpy(w->prefixed + 1, s, n);
        return nu_llm__bpe_encode(t, w->prefixed, n + 1, w, o);
    }
    return nu_llm__bpe_encode(t, s, n, w, o);
}

nu_status nu_llm_tokenize_ex(const nu_llm_tokenizer *t, const char *text, size_t len,
                             const nu_llm_tokenize_options *options, int32_t *ids, size_t cap, size_t *count)
{
    static const nu_llm_tokenize_options defaults = {0};
    if (count)
        *count = 0;
    if (!t || !count || (!text && len) || (!ids && cap))
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_tokenize: %s is NULL",
                            !t ? "the tokenizer" : !count ? "count" : !ids && cap ? "ids" : "text");
    const nu_llm_tokenize_options *op = options ? options : &defaults;
    if ((unsigned)op->add_bos > NU_LLM_ADD_NO || (unsigned)op->add_eos > NU_LLM_ADD_NO)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_tokenize: add_bos %d / add_eos %d is not a nu_llm_add",
                            (int)op->add_bos, (int)op->add_eos);
    bool bos = wanted(op->add_bos, t->add_bos), eos = wanted(op->add_eos, t->add_eos);
    int32_t bos_id = t->special[NU_LLM_SPECIAL_BOS], eos_id = t->special[NU_LLM_SPECIAL_EOS];
    if ((bos && bos_id == NU_LLM_NO_TOKEN) || (eos && eos_id == NU_LLM_NO_TOKEN))
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_tokenize: %s asked for, but the vocabulary has none",
                            bos && bos_id == NU_LLM_NO_TOKEN ? "bos" : "eos");
    if (len > NU_LLM_MAX_TEXT)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_tokenize: the text of %zu bytes is too long (at most %u)",
                            len, NU_LLM_MAX_TEXT);
    nu_llm__out o = {ids, cap, 0};
    if (bos)
        nu_llm__emit(&o, bos_id);
    nu_status st = NU_OK;
    if (len) {
        nu_llm__frag *frags = NULL;
        size_t nf = 0;
        nu_llm__work w = {0};
        st = nu_llm__partition(t, text, len, op->parse_special, &frags, &nf);
        for (size_t i = 0; st == NU_OK && i < nf; i++) {
            if (frags[i].token != NU_LLM_NO_TOKEN)
                nu_llm__emit(&o, frags[i].token);
            else
                st = encode_text(t, text + frags[i].start, frags[i].len, &w, &o);
        }
        nu_llm__free(frags);
        nu_llm__work_free(&w);
        if (st != NU_OK)
            return st;
    }
    if (eos)
        nu_llm__emit(&o, eos_id);
    *count = o.n;
    if (o.n > cap)
        return nu_llm__fail(NU_ERROR_OUT_OF_RANGE, "nu_llm_tokenize: the text needs %zu ids, ids has room for %zu", o.n,
                            cap);
    return NU_OK;
}

nu_status nu_llm_tokenize(const nu_llm_tokenizer *t, const char *text, size_t len, int add_bos, int32_t *ids,
                          size_t cap, size_t *count)
{
    nu_llm_tokenize_options o = {add_bos < 0 ? NU_LLM_ADD_DEFAULT : add_bos ? NU_LLM_ADD_YES : NU_LLM_ADD_NO,
                                 NU_LLM_ADD_NO, false};
    return nu_llm_tokenize_ex(t, text, len, &o, ids, cap, count);
}
