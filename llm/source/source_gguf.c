/* source_gguf.c: a GGUF file as a source (source.h), read with nuvec/gguf.h: its metadata in place,
 * its tensor list (nuvec order), and moves of tensors to the device in one pass over the file
 * (nu_gguf_to_device), in the order asked. */
#include <string.h>

#include "common.h"
#include "source_int.h"

#define FN "nu_llm_model_open"

nu_status nu_llm__gguf_open(nu_llm_source *s)
{
    nu_status st = nu_gguf_open(s->device, s->path, &s->gguf);
    if (st != NU_OK)
        return nu_llm__fail(st, FN ": %s", nu_error_message(s->device));
    const char *arch;
    uint64_t alen;
    if ((st = nu_gguf_get_string(s->gguf, "general.architecture", NULL, &arch, &alen)) != NU_OK)
        return nu_llm__fail(st, FN ": %s", nu_error_message(s->device));
    if (!alen || alen >= sizeof s->arch || memchr(arch, 0, (size_t)alen) || memchr(arch, '.', (size_t)alen))
        return nu_llm__fail(NU_ERROR_FORMAT, FN ": general.architecture is not a name (empty, over %zu bytes, or "
                            "holding '.' or NUL)", sizeof s->arch - 1);
    memcpy(s->arch, arch, (size_t)alen);
    s->arch[alen] = 0;
    uint64_t n = nu_gguf_tensor_count(s->gguf);
    if (n && !(s->tensors = nu_llm__calloc((size_t)n, sizeof *s->tensors)))
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN ": no memory");
    for (uint64_t i = 0; i < n; i++) {
        const nu_gguf_tensor_info *t = nu_gguf_tensor(s->gguf, i);
        nu_llm_file_tensor *f = &s->tensors[i];
        f->name = t->name;
        f->dtype = t->dtype;
        f->type_name = t->type_name;
        f->rank = t->rank ? t->rank : 1;
        for (uint32_t d = 0; d < NU_TENSOR_DIMS; d++)
            f->shape[d] = d < f->rank ? (int64_t)t->shape[d] : 1;
        f->index = i;
    }
    s->tensor_count = (size_t)n;
    return NU_OK;
}

nu_status nu_llm__gguf_move(nu_llm_source *s, const nu_llm_file_tensor *const *t, size_t n, const char *name,
                            nu_buffer **buffers, size_t *count, uint32_t *where, uint64_t *offset)
{
    const char **names = nu_llm__malloc_array(n, sizeof *names);
    if (!names)
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN ": no memory");
    for (size_t i = 0; i < n; i++) {
        names[i] = t[i]->name;
        where[i] = 0;
    }
    nu_status st = nu_gguf_to_device(s->gguf, names, n, NULL, &buffers[0], offset);
    nu_llm__free(names);
    if (st != NU_OK)
        return nu_llm__fail(st, FN ": moving %s to the device: %s", s->path,
                            st == NU_ERROR_HOST_OUT_OF_MEMORY ? "no host memory" : nu_error_message(s->device));
    nu_buffer_set_name(buffers[0], name);
    *count = 1;
    return NU_OK;
}

void nu_llm__gguf_close(nu_llm_source *s) { nu_gguf_close(s->gguf); }
