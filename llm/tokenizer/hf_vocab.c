/* hf_vocab.c: a Hugging Face folder's tokenizer: tokenizer.json (json_vocab.c), completed by
 * tokenizer_config.json (add_bos_token, add_eos_token, bos_token, eos_token, unk_token,
 * pad_token, chat_template), config.json and generation_config.json (bos_token_id, and
 * eos_token_id: an id or a list, all of them ending generation), each optional. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "json_vocab.h"
#include "readers.h"

/* JSON files larger than this are refused (tokenizer.json of a 256K vocabulary is ~20 MiB). */
#define MAX_JSON (256u << 20)

/* The JSON in `path` (NU_ERROR_IO when it cannot be read, NU_ERROR_FORMAT when it is not JSON). */
static nu_status read_json(const char *path, cJSON **out)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return nu_llm__fail(NU_ERROR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat s;
    char *text = NULL;
    nu_status st = NU_OK;
    if (fstat(fileno(f), &s) != 0 || !S_ISREG(s.st_mode))
        st = nu_llm__fail(NU_ERROR_IO, "%s is not a regular file", path);
    else if ((uint64_t)s.st_size > MAX_JSON)
        st = nu_llm__fail(NU_ERROR_FORMAT, "%s is larger than %u MiB", path, MAX_JSON >> 20);
    else if (!(text = nu_llm__malloc((size_t)s.st_size + 1)))
        st = nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "no memory for %s", path);
    else if (fread(text, 1, (size_t)s.st_size, f) != (size_t)s.st_size)
        st = nu_llm__fail(NU_ERROR_IO, "cannot read %s", path);
    fclose(f);
    if (st == NU_OK) {
        text[s.st_size] = 0;
        if (!(*out = cJSON_ParseWithLength(text, (size_t)s.st_size)))
            st = nu_llm__fail(NU_ERROR_FORMAT, "%s is not valid JSON", path);
    }
    nu_llm__free(text);
    return st;
}

/* folder/name's JSON, or NULL when the file is not there (other failures are errors). */
static nu_status optional_json(const char *folder, const char *name, cJSON **out)
{
    *out = NULL;
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", folder, name) >= (int)sizeof path)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "the path %s/%s is too long", folder, name);
    struct stat s;
    if (stat(path, &s) != 0 && errno == ENOENT)
        return NU_OK;
    return read_json(path, out);
}

static const cJSON *item(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }

static int32_t id_of(const cJSON *v, uint32_t count)
{
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < count && v->valuedouble == (int32_t)v->valuedouble
               ? (int32_t)v->valuedouble
               : NU_LLM_NO_TOKEN;
}

/* An eos_token_id (an id or a list of them) into the end-of-generation list. */
static void add_eos_ids(const cJSON *v, uint32_t count, int32_t *eog, size_t *n, size_t cap)
{
    if (cJSON_IsNumber(v)) {
        int32_t id = id_of(v, count);
        if (id >= 0 && *n < cap)
            eog[(*n)++] = id;
        return;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, v) if (cJSON_IsNumber(e)) add_eos_ids(e, count, eog, n, cap);
}

/* tokenizer_config.json's chat_template: a string, or a list of {name, template} (the
 * "default" one, else the first). */
static const char *chat_template(const cJSON *t)
{
    if (cJSON_IsString(t))
        return t->valuestring;
    const cJSON *e, *first = NULL;
    cJSON_ArrayForEach(e, t)
    {
        const cJSON *name = item(e, "name"), *body = item(e, "template");
        if (!cJSON_IsString(body))
            continue;
        if (cJSON_IsString(name) && !strcmp(name->valuestring, "default"))
            return body->valuestring;
        first = first ? first : body;
    }
    return first ? first->valuestring : NULL;
}

#define MAX_EOG 64

static nu_status complete(nu_llm__json_vocab *jv, const cJSON *tc, const cJSON *config, const cJSON *gen,
                          nu_llm_tokenizer **out)
{
    nu_llm_vocab *v = &jv->d.v;
    int32_t id;
    /* bos / eos: tokenizer_config.json's names, else the post-processor's, else the ids in
     * config.json or generation_config.json. */
    const cJSON *ids[] = {gen, config};
    for (int k = 0; k < 2; k++) {
        if (v->bos < 0)
            v->bos = id_of(item(ids[k], "bos_token_id"), v->count);
        if (v->eos < 0) {
            const cJSON *e = item(ids[k], "eos_token_id");
            v->eos = id_of(cJSON_IsArray(e) ? cJSON_GetArrayItem(e, 0) : e, v->count);
        }
    }
    if ((id = nu_llm__json_vocab_token(jv, item(tc, "bos_token"))) >= 0)
        v->bos = id;
    if ((id = nu_llm__json_vocab_token(jv, item(tc, "eos_token"))) >= 0)
        v->eos = id;
    if ((id = nu_llm__json_vocab_token(jv, item(tc, "unk_token"))) >= 0 && v->unk < 0)
        v->unk = id;
    if ((id = nu_llm__json_vocab_token(jv, item(tc, "pad_token"))) >= 0)
        jv->d.special[NU_LLM_SPECIAL_PAD] = id;
    if (cJSON_IsBool(item(tc, "add_bos_token")))
        v->add_bos = cJSON_IsTrue(item(tc, "add_bos_token"));
    if (cJSON_IsBool(item(tc, "add_eos_token")))
        v->add_eos = cJSON_IsTrue(item(tc, "add_eos_token"));
    v->add_bos = v->add_bos && v->bos >= 0;
    v->add_eos = v->add_eos && v->eos >= 0;
    const char *tmpl = chat_template(item(tc, "chat_template"));
    if (tmpl) {
        jv->d.chat_template = tmpl;
        jv->d.chat_template_len = strlen(tmpl);
    }
    int32_t eog[MAX_EOG];
    size_t n = 0;
    add_eos_ids(item(config, "eos_token_id"), v->count, eog, &n, MAX_EOG);
    add_eos_ids(item(gen, "eos_token_id"), v->count, eog, &n, MAX_EOG);
    jv->d.eog = eog;
    jv->d.eog_count = n;
    nu_status st = nu_llm__build(&jv->d, out);
    if (st != NU_OK)
        st = nu_llm__fail_in(st, jv->file);
    return st;
}

nu_status nu_llm__tokenizer_from_json(const char *path, const char *folder, nu_llm_tokenizer **out)
{
    *out = NULL;
    cJSON *root = NULL, *tc = NULL, *config = NULL, *gen = NULL;
    nu_llm__json_vocab jv = {0};
    nu_status st = read_json(path, &root);
    if (st == NU_OK)
        st = nu_llm__json_vocab_read(root, path, &jv);
    if (st == NU_OK && (st = optional_json(folder, "tokenizer_config.json", &tc)) == NU_OK &&
        (st = optional_json(folder, "config.json", &config)) == NU_OK &&
        (st = optional_json(folder, "generation_config.json", &gen)) == NU_OK)
        st = complete(&jv, tc, config, gen, out);
    nu_llm__json_vocab_free(&jv);
    cJSON_Delete(root);
    cJSON_Delete(tc);
    cJSON_Delete(config);
    cJSON_Delete(gen);
    return st;
}

nu_status nu_llm__tokenizer_from_folder(const char *folder, nu_llm_tokenizer **out)
{
    *out = NULL;
    char path[4096];
    if (snprintf(path, sizeof path, "%s/tokenizer.json", folder) >= (int)sizeof path)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "the path %s/tokenizer.json is too long", folder);
    return nu_llm__tokenizer_from_json(path, folder, out);
}
