/* source_hf.c: a Hugging Face model folder as a source (source.h): config.json read with cJSON, the
 * tensors of every *.safetensors file of the folder (one, or shards such as
 * model-00001-of-00002.safetensors, in name order), moved to the device a file at a time
 * (nu_safetensors_to_device). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "source_int.h"

#define FN "nu_llm_model_open"

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The folder's *.safetensors names, sorted, into s->file_names. */
static nu_status list_files(nu_llm_source *s)
{
    DIR *dir = opendir(s->path);
    if (!dir)
        return nu_llm__fail(NU_ERROR_IO, FN ": cannot open the folder %s: %s", s->path, strerror(errno));
    struct dirent *e;
    nu_status st = NU_OK;
    size_t count = 0;
    while (st == NU_OK && (e = readdir(dir))) {
        size_t n = strlen(e->d_name);
        if (n <= 12 || strcmp(e->d_name + n - 12, ".safetensors"))
            continue;
        if (count == NU_LLM_MAX_FILES)
            st = nu_llm__fail(NU_ERROR_UNSUPPORTED, FN ": %s has more than %d safetensors files", s->path,
                              NU_LLM_MAX_FILES);
        else if (!(s->file_names[count] = nu_llm__malloc(n + 1)))
            st = nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN ": no memory");
        else
            memcpy(s->file_names[count++], e->d_name, n + 1);
    }
    closedir(dir);
    qsort(s->file_names, count, sizeof *s->file_names, by_name);
    s->file_count = count;
    if (st == NU_OK && !count)
        st = nu_llm__fail(NU_ERROR_IO, FN ": %s has no .safetensors file", s->path);
    return st;
}

nu_status nu_llm__hf_open(nu_llm_source *s)
{
    size_t plen = strlen(s->path);
    char *file = nu_llm__malloc(plen + 300), *text = NULL;
    if (!file)
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN ": no memory");
    snprintf(file, plen + 300, "%s/config.json", s->path);
    nu_status st = nu_llm__read_text(file, &text, NULL);
    if (st == NU_OK && !(s->config = cJSON_Parse(text)))
        st = nu_llm__fail(NU_ERROR_FORMAT, FN ": config.json is not valid JSON");
    nu_llm__free(text);
    const cJSON *arch = NULL;
    if (st == NU_OK && !cJSON_IsObject(s->config))
        st = nu_llm__fail(NU_ERROR_FORMAT, FN ": config.json is not a JSON object");
    if (st == NU_OK) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(s->config, "architectures");
        arch = cJSON_IsArray(list) ? cJSON_GetArrayItem(list, 0) : NULL;
        if (!cJSON_IsString(arch) || !arch->valuestring[0] || strlen(arch->valuestring) >= sizeof s->arch)
            st = nu_llm__fail(NU_ERROR_FORMAT, FN ": config.json has no \"architectures\" list of names");
        else
            snprintf(s->arch, sizeof s->arch, "%s", arch->valuestring);
    }
    if (st == NU_OK)
        st = list_files(s);
    size_t total = 0;
    for (size_t f = 0; st == NU_OK && f < s->file_count; f++) {
        snprintf(file, plen + 300, "%s/%s", s->path, s->file_names[f]);
        if ((st = nu_safetensors_open(s->device, file, &s->files[f])) != NU_OK)
            st = nu_llm__fail(st, FN ": %s", nu_error_message(s->device));
        else
            total += nu_safetensors_count(s->files[f]);
    }
    if (st == NU_OK && total && !(s->tensors = nu_llm__calloc(total, sizeof *s->tensors)))
        st = nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN ": no memory");
    for (size_t f = 0; st == NU_OK && f < s->file_count; f++) {
        size_t n = nu_safetensors_count(s->files[f]);
        for (size_t i = 0; st == NU_OK && i < n; i++) {
            const nu_tensor_info *info = nu_safetensors_tensor(s->files[f], i);
            nu_llm_file_tensor *t = &s->tensors[s->tensor_count++];
            if (info->rank > NU_TENSOR_DIMS)
                st = nu_llm__fail(NU_ERROR_FORMAT, FN ": %s has rank %u; at most %d", info->name, info->rank,
                                  NU_TENSOR_DIMS);
            t->name = info->name;
            t->dtype = info->dtype;
            t->type_name = nu_dtype_name(info->dtype);
            t->rank = info->rank ? info->rank : 1;
            for (uint32_t d = 0; d < NU_TENSOR_DIMS; d++)
                t->shape[d] = d < info->rank ? (int64_t)info->shape[d] : 1;
            t->file = (uint32_t)f;
            t->index = i;
        }
    }
    nu_llm__free(file);
    return st;
}

nu_status nu_llm__hf_move(nu_llm_source *s, const nu_llm_file_tensor *const *t, size_t n, const char *name,
                          nu_buffer **buffers, size_t *count, uint32_t *where, uint64_t *offset)
{
    const char **names = nu_llm__malloc_array(n, sizeof *names);
    uint64_t *at = nu_llm__malloc_array(n, sizeof *at);
    size_t *pick = nu_llm__malloc_array(n, sizeof *pick);
    nu_status st = names && at && pick ? NU_OK : nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, FN ": no memory");
    for (size_t f = 0; st == NU_OK && f < s->file_count; f++) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (t[i]->file == f)
                pick[k] = i, names[k++] = t[i]->name;
        if (!k)
            continue;
        nu_buffer *b = NULL;
        if ((st = nu_safetensors_to_device(s->files[f], names, k, NULL, &b, at)) != NU_OK) {
            st = nu_llm__fail(st, FN ": moving %s/%s to the device: %s", s->path, s->file_names[f],
                              nu_error_message(s->device));
            break;
        }
        nu_buffer_set_name(b, name);
        for (size_t j = 0; j < k; j++)
            where[pick[j]] = (uint32_t)*count, offset[pick[j]] = at[j];
        buffers[(*count)++] = b;
    }
    if (st != NU_OK) {
        for (size_t i = 0; i < *count; i++)
            nu_buffer_free(buffers[i]);
        *count = 0;
    }
    nu_llm__free(names);
    nu_llm__free(at);
    nu_llm__free(pick);
    return st;
}

void nu_llm__hf_close(nu_llm_source *s)
{
    for (size_t f = 0; f < s->file_count; f++) {
        nu_safetensors_close(s->files[f]);
        nu_llm__free(s->file_names[f]);
    }
    cJSON_Delete(s->config);
}
