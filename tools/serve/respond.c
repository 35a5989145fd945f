/* respond.c: the bodies `nuvec serve` answers a generation with, in OpenAI's shapes: a whole
 * chat.completion / text_completion, and the chunks of a stream (respond.h). */
#include "respond.h"

#include <stdlib.h>

#include <cjson/cJSON.h>

static const char *const finish_text[FINISH_COUNT] = {"stop", "length", "cancelled", "error"};

static cJSON *head(const srv_request *r, const char *model, bool chunk)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", r->id);
    cJSON_AddStringToObject(o, "object",
                            r->p.kind == API_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion");
    cJSON_AddNumberToObject(o, "created", (double)r->created);
    cJSON_AddStringToObject(o, "model", model);
    cJSON_AddStringToObject(o, "system_fingerprint", "nuvec");
    return o;
}

static void add_tokens(cJSON *o, const int32_t *toks, size_t n)
{
    cJSON *a = cJSON_AddArrayToObject(o, "tokens");
    for (size_t i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(toks[i]));
}

static void add_usage(cJSON *o, const srv_request *r)
{
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", r->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", r->n_gen);
    cJSON_AddNumberToObject(u, "total_tokens", r->n_prompt + r->n_gen);
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", r->cached);
}

static char *print(cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

char *respond_whole(const srv_request *r, const char *model)
{
    cJSON *o = head(r, model, false), *cs = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON_AddItemToArray(cs, c);
    cJSON_AddNumberToObject(c, "index", 0);
    if (r->p.kind == API_CHAT) {
        cJSON *m = cJSON_AddObjectToObject(c, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        cJSON_AddStringToObject(m, "content", r->out ? r->out : "");
    } else
        cJSON_AddStringToObject(c, "text", r->out ? r->out : "");
    cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddStringToObject(c, "finish_reason", finish_text[r->finish]);
    if (r->p.return_tokens)
        add_tokens(c, r->toks, r->n_toks);
    add_usage(o, r);
    return print(o);
}

char *respond_chunk(const srv_request *r, const char *model, const respond_delta *d)
{
    cJSON *o = head(r, model, true), *cs = cJSON_AddArrayToObject(o, "choices");
    if (d->usage_only) {
        add_usage(o, r);
        return print(o);
    }
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToArray(cs, c);
    cJSON_AddNumberToObject(c, "index", 0);
    if (r->p.kind == API_CHAT) {
        cJSON *delta = cJSON_AddObjectToObject(c, "delta");
        if (d->role)
            cJSON_AddStringToObject(delta, "role", "assistant");
        if (d->text)
            cJSON_AddStringToObject(delta, "content", d->text);
    } else
        cJSON_AddStringToObject(c, "text", d->text ? d->text : "");
    cJSON_AddNullToObject(c, "logprobs");
    if (d->finish)
        cJSON_AddStringToObject(c, "finish_reason", finish_text[r->finish]);
    else
        cJSON_AddNullToObject(c, "finish_reason");
    if (r->p.return_tokens)
        add_tokens(c, d->toks, d->n_toks);
    return print(o);
}
