/* api.c: request bodies of `nuvec serve` parsed and checked (api.h). cJSON reads the body; each
 * member is then checked for its type and range here, so that nothing downstream sees a value
 * OpenAI's schema would refuse. */
#include "api.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

int api_fail(api_error *err, int status, const char *type, const char *code, const char *param, const char *fmt, ...)
{
    err->status = status;
    err->type = type;
    err->code = code;
    snprintf(err->param, sizeof err->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return status;
}

#define BAD(param, ...) api_fail(err, 400, "invalid_request_error", NULL, param, __VA_ARGS__)

char *api_error_json(const api_error *e)
{
    cJSON *o = cJSON_CreateObject(), *in = cJSON_AddObjectToObject(o, "error");
    char *text = NULL;
    if (in) {
        /* The message may quote the client's bytes: keep the JSON valid UTF-8. */
        char *msg = NULL;
        size_t n = 0, cap = 0;
        cJSON_AddStringToObject(in, "message", api_append_utf8(&msg, &n, &cap, e->message, strlen(e->message)) ? msg : "");
        free(msg);
        cJSON_AddStringToObject(in, "type", e->type ? e->type : "server_error");
        if (e->param[0])
            cJSON_AddStringToObject(in, "param", e->param);
        else
            cJSON_AddNullToObject(in, "param");
        if (e->code)
            cJSON_AddStringToObject(in, "code", e->code);
        else
            cJSON_AddNullToObject(in, "code");
        text = cJSON_PrintUnformatted(o);
    }
    cJSON_Delete(o);
    return text;
}

bool api_append_utf8(char **buf, size_t *n, size_t *cap, const char *s, size_t len)
{
    if (*n + 3 * len + 1 > *cap) {
        size_t ncap = (*n + 3 * len + 1) * 2;
        char *b = realloc(*buf, ncap);
        if (!b)
            return false;
        *buf = b, *cap = ncap;
    }
    const unsigned char *u = (const unsigned char *)s;
    char *o = *buf + *n;
    for (size_t i = 0; i < len;) {
        unsigned c = u[i];
        size_t k = c == 0                    ? 0
                   : c < 0x80                ? 1
                   : c >= 0xC2 && c <= 0xDF ? 2
                   : c >= 0xE0 && c <= 0xEF ? 3
                   : c >= 0xF0 && c <= 0xF4 ? 4
                                             : 0;
        size_t ok = k ? 1 : 0;
        /* RFC 3629's second-byte ranges keep out overlong forms, surrogates and > U+10FFFF. */
        for (size_t j = 1; k && j < k && i + j < len; j++) {
            unsigned lo = 0x80, hi = 0xBF, b = u[i + j];
            if (j == 1)
                lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
            if (b < lo || b > hi)
                break;
            ok = j + 1;
        }
        if (k && ok == k) {
            memcpy(o, u + i, k);
            o += k, i += k;
        } else { /* a maximal invalid subpart: one U+FFFD */
            memcpy(o, "\xEF\xBF\xBD", 3);
            o += 3, i += ok ? ok : 1;
        }
    }
    *o = 0;
    *n = (size_t)(o - *buf);
    return true;
}

static char *dup_text(const char *s)
{
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d)
        memcpy(d, s, n + 1);
    return d;
}

/* A JSON number that is an integer in [lo, hi]. */
static bool as_int(const cJSON *v, double lo, double hi, double *out)
{
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble) ||
        v->valuedouble < lo || v->valuedouble > hi)
        return false;
    *out = v->valuedouble;
    return true;
}

/* A member that is absent or null counts as not given. */
static const cJSON *member(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static int get_bool(const cJSON *o, const char *name, bool *out, api_error *err)
{
    const cJSON *v = member(o, name);
    if (!v)
        return 0;
    if (!cJSON_IsBool(v))
        return BAD(name, "'%s' must be a boolean", name);
    *out = cJSON_IsTrue(v);
    return 0;
}

static int get_float(const cJSON *o, const char *name, float lo, float hi, float *out, api_error *err)
{
    const cJSON *v = member(o, name);
    if (!v)
        return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi)
        return BAD(name, "'%s' must be a number from %g to %g", name, lo, hi);
    *out = (float)v->valuedouble;
    return 0;
}

/* The messages, each checked, with array contents (text parts) joined into one string. */
static int parse_messages(const cJSON *root, api_params *p, api_error *err)
{
    const cJSON *ms = member(root, "messages");
    if (!ms)
        return BAD("messages", "'messages' is required");
    if (!cJSON_IsArray(ms) || !cJSON_GetArraySize(ms))
        return BAD("messages", "'messages' must be a non-empty array");
    cJSON *copy = cJSON_CreateArray();
    if (!copy)
        return api_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    int i = 0, rc = 0;
    for (const cJSON *m = ms->child; m && !rc; m = m->next, i++) {
        char name[40];
        snprintf(name, sizeof name, "messages[%d]", i);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsObject(m)) {
            rc = BAD(name, "'%s' must be an object", name);
            break;
        }
        if (!cJSON_IsString(role) || !role->valuestring[0]) {
            rc = BAD(name, "'%s.role' must be a non-empty string", name);
            break;
        }
        cJSON *mc = cJSON_Duplicate(m, true);
        if (!mc || !cJSON_AddItemToArray(copy, mc)) {
            cJSON_Delete(mc);
            rc = api_fail(err, 500, "server_error", NULL, NULL, "out of memory");
            break;
        }
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!content || cJSON_IsNull(content) || cJSON_IsString(content))
            continue;
        if (!cJSON_IsArray(content)) {
            rc = BAD(name, "'%s.content' must be a string, an array of text parts or null", name);
            break;
        }
        char *joined = NULL;
        size_t n = 0, cap = 0;
        for (const cJSON *part = content->child; part; part = part->next) {
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type"),
                        *text = cJSON_GetObjectItemCaseSensitive(part, "text");
            if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(text)) {
                rc = BAD(name, "'%s.content' parts must be {\"type\": \"text\", \"text\": string} (only text is served)",
                         name);
                break;
            }
            size_t len = strlen(text->valuestring);
            char *j = realloc(joined, n + len + 1);
            if (!j) {
                rc = api_fail(err, 500, "server_error", NULL, NULL, "out of memory");
                break;
            }
            joined = j;
            memcpy(joined + n, text->valuestring, len + 1);
            n += len;
            (void)cap;
        }
        if (!rc && !cJSON_ReplaceItemInObjectCaseSensitive(mc, "content", cJSON_CreateString(joined ? joined : "")))
            rc = api_fail(err, 500, "server_error", NULL, NULL, "out of memory");
        free(joined);
    }
    if (!rc && !(p->messages = cJSON_PrintUnformatted(copy)))
        rc = api_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    cJSON_Delete(copy);
    return rc;
}

static int parse_ids(const cJSON *arr, const char *name, const api_limits *lim, api_params *p, api_error *err)
{
    int n = cJSON_GetArraySize(arr);
    if ((uint32_t)n > lim->max_ids)
        return BAD(name, "'%s' has %d token ids, more than the %u allowed", name, n, lim->max_ids);
    if (!(p->ids = malloc(((size_t)n + 1) * sizeof *p->ids)))
        return api_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    for (const cJSON *v = arr->child; v; v = v->next) {
        double d;
        if (!as_int(v, 0, INT32_MAX, &d))
            return BAD(name, "'%s' must hold token ids (integers from 0)", name);
        p->ids[p->n_ids++] = (int32_t)d;
    }
    return 0;
}

static int parse_stop(const cJSON *root, const api_limits *lim, api_params *p, api_error *err)
{
    const cJSON *s = member(root, "stop");
    if (!s)
        return 0;
    if (!cJSON_IsString(s) && !cJSON_IsArray(s))
        return BAD("stop", "'stop' must be a string or an array of strings");
    int n = cJSON_IsString(s) ? 1 : cJSON_GetArraySize(s);
    if ((uint32_t)n > lim->max_stop)
        return BAD("stop", "'stop' has %d strings, more than the %u allowed", n, lim->max_stop);
    if (!n)
        return 0;
    if (!(p->stop = calloc((size_t)n, sizeof *p->stop)))
        return api_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    for (const cJSON *v = cJSON_IsString(s) ? s : s->child; v; v = cJSON_IsString(s) ? NULL : v->next) {
        if (!cJSON_IsString(v) || !v->valuestring[0] || strlen(v->valuestring) > lim->max_stop_bytes)
            return BAD("stop", "each stop string must be a non-empty string of at most %u bytes", lim->max_stop_bytes);
        if (!(p->stop[p->n_stop] = dup_text(v->valuestring)))
            return api_fail(err, 500, "server_error", NULL, NULL, "out of memory");
        p->n_stop++;
    }
    return 0;
}

/* Parameters nuvec does not run: refused rather than silently ignored. */
static int refuse_unsupported(const cJSON *root, api_error *err)
{
    double n;
    const cJSON *v;
    if ((v = member(root, "n")) && (!as_int(v, 1, 1, &n)))
        return BAD("n", "'n' must be 1 (one choice a request)");
    static const char *const zero[] = {"presence_penalty", "frequency_penalty"};
    for (size_t i = 0; i < 2; i++)
        if ((v = member(root, zero[i])) && (!cJSON_IsNumber(v) || v->valuedouble != 0))
            return BAD(zero[i], "'%s' is not supported (only 0)", zero[i]);
    if ((v = member(root, "logprobs")) && !cJSON_IsFalse(v) && !(cJSON_IsNumber(v) && v->valuedouble == 0))
        return BAD("logprobs", "'logprobs' is not supported");
    if ((v = member(root, "tools")) && !(cJSON_IsArray(v) && !cJSON_GetArraySize(v)))
        return BAD("tools", "'tools' is not supported");
    if ((v = member(root, "response_format"))) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(v, "type");
        if (!cJSON_IsObject(v) || !cJSON_IsString(t) || strcmp(t->valuestring, "text"))
            return BAD("response_format", "'response_format' other than {\"type\": \"text\"} is not supported");
    }
    return 0;
}

static int parse_generation(const cJSON *root, const api_limits *lim, api_params *p, api_error *err)
{
    int rc;
    const cJSON *v;
    if ((rc = refuse_unsupported(root, err)) || (rc = get_bool(root, "stream", &p->stream, err)) ||
        (rc = get_bool(root, "return_tokens", &p->return_tokens, err)) ||
        (rc = get_bool(root, "ignore_eos", &p->ignore_eos, err)) ||
        (rc = get_float(root, "temperature", 0, 100, &p->temperature, err)) ||
        (rc = get_float(root, "top_p", 0, 1, &p->top_p, err)) || (rc = parse_stop(root, lim, p, err)))
        return rc;
    if ((v = member(root, "stream_options"))) {
        if (!cJSON_IsObject(v))
            return BAD("stream_options", "'stream_options' must be an object");
        if (!p->stream)
            return BAD("stream_options", "'stream_options' is only allowed with stream true");
        if ((rc = get_bool(v, "include_usage", &p->include_usage, err)))
            return rc;
    }
    double d;
    if ((v = member(root, "top_k"))) {
        if (!as_int(v, 0, UINT32_MAX, &d))
            return BAD("top_k", "'top_k' must be an integer from 0");
        p->top_k = (uint32_t)d;
    }
    if ((v = member(root, "seed"))) {
        if (!as_int(v, -9223372036854775808.0, 18446744073709549568.0, &d))
            return BAD("seed", "'seed' must be an integer");
        p->seed = d < 0 ? (uint64_t)(int64_t)d : (uint64_t)d;
        p->has_seed = true;
    }
    const char *mt = member(root, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if ((v = member(root, mt))) {
        if (!as_int(v, -1, (double)lim->max_tokens, &d) || d == 0)
            return BAD(mt, "'%s' must be an integer from 1 to %u (or -1: until the context ends)", mt, lim->max_tokens);
        p->max_tokens = d < 0 ? 0 : (uint32_t)d;
    }
    if ((v = member(root, "model")) && !cJSON_IsString(v))
        return BAD("model", "'model' must be a string");
    if (v && !(p->model = dup_text(v->valuestring)))
        return api_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    return 0;
}

static int parse_prompt(const cJSON *root, const api_limits *lim, api_params *p, api_error *err)
{
    const cJSON *v = member(root, "prompt");
    if (!v)
        return BAD("prompt", "'prompt' is required");
    if (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 1 && (cJSON_IsString(v->child) || cJSON_IsArray(v->child)))
        v = v->child; /* ["text"] or [[ids]]: one prompt */
    if (cJSON_IsString(v))
        return (p->prompt = dup_text(v->valuestring)) ? 0 : api_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    if (cJSON_IsArray(v) && cJSON_GetArraySize(v) > 0 && cJSON_IsNumber(v->child))
        return parse_ids(v, "prompt", lim, p, err);
    return BAD("prompt", "'prompt' must be a string, or one array of token ids (one prompt a request)");
}

int api_parse(api_kind kind, const char *body, size_t len, const api_limits *lim, api_params *out, api_error *err)
{
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->temperature = 1, out->top_p = 1, out->add_special = true;
    const char *end = NULL;
    cJSON *root = body && len ? cJSON_ParseWithLengthOpts(body, len, &end, false) : NULL;
    int rc = 0;
    if (root) /* nothing but white space after the value */
        for (; end < body + len && rc == 0; end++)
            if (*end != ' ' && *end != '\t' && *end != '\r' && *end != '\n')
                rc = BAD(NULL, "the body has bytes after its JSON value (at byte %zu)", (size_t)(end - body));
    if (!root)
        rc = BAD(NULL, "the body is not valid JSON%s", len ? "" : " (it is empty)");
    else if (!rc && !cJSON_IsObject(root))
        rc = BAD(NULL, "the body must be a JSON object");
    else if (!rc) {
        const cJSON *v;
        switch (kind) {
        case API_CHAT:
            if (!(rc = parse_generation(root, lim, out, err)))
                rc = parse_messages(root, out, err);
            break;
        case API_COMPLETION:
            if (!(rc = parse_generation(root, lim, out, err)))
                rc = parse_prompt(root, lim, out, err);
            break;
        case API_TEMPLATE:
            rc = parse_messages(root, out, err);
            break;
        case API_TOKENIZE:
            if (!(v = member(root, "content")) || !cJSON_IsString(v))
                rc = BAD("content", "'content' must be a string");
            else if (!(rc = get_bool(root, "add_special", &out->add_special, err)) &&
                     !(rc = get_bool(root, "with_pieces", &out->with_pieces, err)) && !(out->prompt = dup_text(v->valuestring)))
                rc = api_fail(err, 500, "server_error", NULL, NULL, "out of memory");
            break;
        case API_DETOKENIZE:
            if (!(v = member(root, "tokens")) || !cJSON_IsArray(v))
                rc = BAD("tokens", "'tokens' must be an array of token ids");
            else
                rc = parse_ids(v, "tokens", lim, out, err);
            break;
        }
    }
    cJSON_Delete(root);
    if (rc)
        api_params_clear(out);
    return rc;
}

void api_params_clear(api_params *p)
{
    if (!p)
        return;
    free(p->model);
    free(p->messages);
    free(p->prompt);
    free(p->ids);
    for (uint32_t i = 0; i < p->n_stop; i++)
        free(p->stop[i]);
    free(p->stop);
    api_kind kind = p->kind;
    memset(p, 0, sizeof *p);
    p->kind = kind;
}
