/* http.c: `nuvec serve`'s routes on libmicrohttpd (http.h).
 *
 * A connection's state (conn) lives from its first callback to MHD's completion notice. A
 * generation request is handed to the engine; until it is done the connection is suspended
 * (whole answers) or its stream reader suspends whenever it has sent everything published.
 * conn.suspended is read and written under the request's lock only, and the engine resumes a
 * connection only when that flag says MHD has it suspended (resuming one that is not is
 * undefined in MHD). */
#include "http.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <microhttpd.h>

#include "respond.h"

typedef struct conn {
    srv_state *s;
    struct MHD_Connection *c;
    metric_route route;
    char *body;
    size_t len, cap;
    bool too_big;
    srv_request *req;
    bool suspended;           /* under req->mu */
    /* A stream's bytes not yet taken by MHD, and how far the request's output was sent. */
    char *wire;
    size_t wire_len, wire_off, wire_cap;
    size_t sent_text, sent_toks;
    bool sent_role, sent_end;
} conn;

/* ---- Responses --------------------------------------------------------------------------- */

static enum MHD_Result respond(conn *k, int status, const char *type, char *body, size_t len, bool owned)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        len, body, owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        if (owned)
            free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (status == 429 || status == 503)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    enum MHD_Result rc = MHD_queue_response(k->c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    metrics_http(k->s->mx, k->route, status);
    return rc;
}

static enum MHD_Result respond_json(conn *k, int status, char *json)
{
    if (!json) {
        static char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}";
        return respond(k, 500, "application/json", oom, sizeof oom - 1, false);
    }
    return respond(k, status, "application/json", json, strlen(json), true);
}

static enum MHD_Result respond_error(conn *k, const api_error *e)
{
    return respond_json(k, e->status, api_error_json(e));
}

static enum MHD_Result fail(conn *k, int status, const char *type, const char *code, const char *fmt, const char *arg)
{
    api_error e;
    api_fail(&e, status, type, code, NULL, fmt, arg);
    return respond_error(k, &e);
}

static char *print_json(cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

/* ---- Simple routes ----------------------------------------------------------------------- */

static enum MHD_Result route_models(conn *k)
{
    cJSON *o = cJSON_CreateObject(), *data = cJSON_CreateArray(), *m = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON_AddItemToObject(o, "data", data);
    cJSON_AddItemToArray(data, m);
    cJSON_AddStringToObject(m, "id", k->s->model_name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", 0);
    cJSON_AddStringToObject(m, "owned_by", "nuvec");
    cJSON *meta = cJSON_AddObjectToObject(m, "meta");
    cJSON_AddNumberToObject(meta, "n_ctx", k->s->ctx);
    cJSON_AddNumberToObject(meta, "n_vocab", k->s->cfg->vocab);
    cJSON_AddNumberToObject(meta, "slots", k->s->mx->slots);
    return respond_json(k, 200, print_json(o));
}

static enum MHD_Result route_tokenize(conn *k, api_params *p)
{
    int32_t *ids = NULL;
    uint32_t n = 0;
    api_error e;
    if (chat_prompt_tokenize(k->s->tok, NULL, p->prompt, strlen(p->prompt), p->add_special, &ids, &n, &e))
        return respond_error(k, &e);
    cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "tokens");
    size_t max = nu_llm_tokenizer_max_piece(k->s->tok), len;
    char *piece = malloc(max + 1), *clean = NULL;
    size_t cn = 0, ccap = 0;
    for (uint32_t i = 0; a && i < n; i++) {
        if (!p->with_pieces) {
            cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
            continue;
        }
        cJSON *t = cJSON_CreateObject();
        cJSON_AddItemToArray(a, t);
        cJSON_AddNumberToObject(t, "id", ids[i]);
        cn = 0;
        if (piece && nu_llm_token_to_text(k->s->tok, ids[i], i ? ids[i - 1] : NU_LLM_NO_TOKEN, piece, max, &len) == NU_OK &&
            api_append_utf8(&clean, &cn, &ccap, piece, len))
            cJSON_AddStringToObject(t, "piece", clean);
    }
    free(piece);
    free(clean);
    free(ids);
    return respond_json(k, 200, print_json(o));
}

static enum MHD_Result route_detokenize(conn *k, api_params *p)
{
    for (uint32_t i = 0; i < p->n_ids; i++)
        if ((uint32_t)p->ids[i] >= k->s->cfg->vocab) {
            char what[64];
            snprintf(what, sizeof what, "%d", p->ids[i]);
            return fail(k, 400, "invalid_request_error", NULL, "token id %s is outside the vocabulary", what);
        }
    if (!k->s->tok)
        return fail(k, 400, "invalid_request_error", NULL, "%s", "the model has no tokenizer");
    size_t len = 0;
    char *raw = NULL, *text = NULL, one;
    size_t n = 0, cap = 0;
    nu_llm_detokenize(k->s->tok, p->ids, p->n_ids, &one, 1, &len);
    if (!(raw = malloc(len + 1)) || nu_llm_detokenize(k->s->tok, p->ids, p->n_ids, raw, len + 1, &len) != NU_OK ||
        !api_append_utf8(&text, &n, &cap, raw, len)) {
        free(raw);
        free(text);
        return fail(k, 500, "server_error", NULL, "detokenizing: %s", nu_llm_error_message());
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "content", text);
    free(raw);
    free(text);
    return respond_json(k, 200, print_json(o));
}

static enum MHD_Result route_template(conn *k, api_params *p)
{
    char *text = NULL;
    api_error e;
    if (chat_prompt_render(k->s->prompt, p->messages, strlen(p->messages), &text, &e))
        return respond_error(k, &e);
    char *clean = NULL;
    size_t n = 0, cap = 0;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "prompt", api_append_utf8(&clean, &n, &cap, text, strlen(text)) ? clean : "");
    free(clean);
    free(text);
    return respond_json(k, 200, print_json(o));
}

/* ---- Generations ------------------------------------------------------------------------- */

/* The engine published something (under r->mu): a suspended connection goes on. */
static void wake(srv_request *r)
{
    conn *k = r->http;
    if (k && k->suspended) {
        k->suspended = false;
        MHD_resume_connection(k->c);
    }
}

static bool wire_put(conn *k, const char *a, const char *b, const char *c)
{
    size_t la = strlen(a), lb = b ? strlen(b) : 0, lc = strlen(c);
    if (k->wire_len + la + lb + lc > k->wire_cap) {
        size_t ncap = (k->wire_len + la + lb + lc) * 2 + 256;
        char *w = realloc(k->wire, ncap);
        if (!w)
            return false;
        k->wire = w, k->wire_cap = ncap;
    }
    memcpy(k->wire + k->wire_len, a, la);
    if (lb)
        memcpy(k->wire + k->wire_len + la, b, lb);
    memcpy(k->wire + k->wire_len + la + lb, c, lc);
    k->wire_len += la + lb + lc;
    return true;
}

static bool wire_event(conn *k, char *json)
{
    bool ok = json && wire_put(k, "data: ", json, "\n\n");
    free(json);
    return ok;
}

/* The stream's next bytes: SSE events for what the request published since the last call, or
 * (nothing new) the connection suspended until the engine wakes it. */
static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    conn *k = cls;
    srv_request *r = k->req;
    if (k->wire_off == k->wire_len) {
        k->wire_off = k->wire_len = 0;
        if (k->sent_end)
            return MHD_CONTENT_READER_END_OF_STREAM;
        pthread_mutex_lock(&r->mu);
        bool done = r->done, fresh = r->out_len > k->sent_text || (r->p.return_tokens && r->n_toks > k->sent_toks);
        if (!done && !fresh && k->sent_role) {
            k->suspended = true;
            MHD_suspend_connection(k->c);
            pthread_mutex_unlock(&r->mu);
            return 0;
        }
        bool ok = true;
        if (!k->sent_role && r->p.kind == API_CHAT)
            ok = wire_event(k, respond_chunk(r, k->s->model_name, &(respond_delta){.role = true, .text = ""}));
        k->sent_role = true;
        if (fresh && ok) {
            respond_delta d = {.text = r->out + k->sent_text, .toks = r->toks + k->sent_toks,
                               .n_toks = r->n_toks - k->sent_toks};
            if (d.text[0] || (d.n_toks && r->p.return_tokens))
                ok = wire_event(k, respond_chunk(r, k->s->model_name, &d));
            k->sent_text = r->out_len, k->sent_toks = r->n_toks;
        }
        if (done && ok) {
            if (r->finish == FINISH_ERROR || r->finish == FINISH_CANCELLED) {
                api_error e = r->error;
                if (r->finish == FINISH_CANCELLED)
                    api_fail(&e, 503, "unavailable_error", NULL, NULL, "the request was cancelled (shutdown)");
                ok = wire_event(k, api_error_json(&e));
            } else {
                ok = wire_event(k, respond_chunk(r, k->s->model_name, &(respond_delta){.finish = true}));
                if (ok && r->p.include_usage)
                    ok = wire_event(k, respond_chunk(r, k->s->model_name, &(respond_delta){.usage_only = true}));
            }
            ok = ok && wire_put(k, "data: [DONE]", NULL, "\n\n");
            k->sent_end = true;
        }
        pthread_mutex_unlock(&r->mu);
        if (!ok)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (k->wire_len == 0)
            return 0; /* held-back text only; the engine's next token wakes nothing: come back */
    }
    size_t n = k->wire_len - k->wire_off < max ? k->wire_len - k->wire_off : max;
    memcpy(buf, k->wire + k->wire_off, n);
    k->wire_off += n;
    return (ssize_t)n;
}

/* A finished non-streamed request's answer. */
static enum MHD_Result answer_whole(conn *k)
{
    srv_request *r = k->req;
    if (r->finish == FINISH_ERROR)
        return respond_error(k, &r->error);
    if (r->finish == FINISH_CANCELLED)
        return fail(k, 503, "unavailable_error", NULL, "%s", "the request was cancelled (shutdown)");
    return respond_json(k, 200, respond_whole(r, k->s->model_name));
}

static enum MHD_Result start_generation(conn *k, api_params *p)
{
    srv_state *s = k->s;
    api_error e;
    int32_t *ids = NULL;
    uint32_t n = 0;
    if (p->model && strcmp(p->model, s->model_name)) {
        api_fail(&e, 404, "invalid_request_error", "model_not_found", "model",
                 "the model '%.200s' does not exist (this server has '%.80s')", p->model, s->model_name);
        return respond_error(k, &e);
    }
    if (p->kind == API_CHAT) {
        char *text = NULL;
        int rc = chat_prompt_render(s->prompt, p->messages, strlen(p->messages), &text, &e);
        if (!rc)
            rc = chat_prompt_tokenize(s->tok, s->prompt->bos, text, strlen(text), true, &ids, &n, &e);
        free(text);
        if (rc)
            return respond_error(k, &e);
        for (uint32_t i = 0; s->prompt->builtin && i < 2; i++) { /* ChatML's markers end a reply */
            char **st = realloc(p->stop, (p->n_stop + 1) * sizeof *st);
            if (!st || !(st[p->n_stop] = strdup(chat_prompt_builtin_stops[i]))) {
                p->stop = st ? st : p->stop;
                free(ids);
                return fail(k, 500, "server_error", NULL, "%s", "out of memory");
            }
            p->stop = st;
            p->n_stop++;
        }
    } else if (p->prompt) {
        if (chat_prompt_tokenize(s->tok, NULL, p->prompt, strlen(p->prompt), true, &ids, &n, &e))
            return respond_error(k, &e);
    } else {
        for (uint32_t i = 0; i < p->n_ids; i++)
            if ((uint32_t)p->ids[i] >= s->cfg->vocab) {
                api_fail(&e, 400, "invalid_request_error", NULL, "prompt", "token id %d is outside the vocabulary (%u)",
                         p->ids[i], s->cfg->vocab);
                return respond_error(k, &e);
            }
        ids = p->ids, n = p->n_ids;
        p->ids = NULL, p->n_ids = 0;
    }
    if (!n || n >= s->ctx) {
        free(ids);
        if (!n)
            api_fail(&e, 400, "invalid_request_error", NULL, "prompt", "the prompt is empty (no tokens)");
        else
            api_fail(&e, 400, "invalid_request_error", "context_length_exceeded", p->kind == API_CHAT ? "messages" : "prompt",
                     "the prompt has %u tokens; this server's context holds %u (a prompt may have at most %u)", n, s->ctx,
                     s->ctx - 1);
        return respond_error(k, &e);
    }
    uint32_t max_tokens = p->max_tokens ? p->max_tokens : s->limits.max_tokens;
    bool stream = p->stream;
    srv_request *r = srv_request_new(p, ids, n, s->mx);
    if (!r) {
        free(ids);
        return fail(k, 500, "server_error", NULL, "%s", "out of memory");
    }
    r->max_tokens = max_tokens;
    r->wake = wake;
    r->http = k;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(k->c, MHD_CONNECTION_INFO_CONNECTION_FD);
    r->fd = ci ? ci->connect_fd : -1;
    k->req = r;
    if (srv_engine_submit(s->engine, r, &e))
        return respond_error(k, &e);
    if (stream) {
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_read, k, NULL);
        if (!resp)
            return MHD_NO;
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        enum MHD_Result rc = MHD_queue_response(k->c, 200, resp);
        MHD_destroy_response(resp);
        metrics_http(s->mx, k->route, 200);
        return rc;
    }
    pthread_mutex_lock(&r->mu);
    if (!r->done) {
        k->suspended = true;
        MHD_suspend_connection(k->c);
    }
    bool done = r->done;
    pthread_mutex_unlock(&r->mu);
    return done ? answer_whole(k) : MHD_YES;
}

/* ---- Dispatch ---------------------------------------------------------------------------- */

static const struct {
    const char *path;
    bool post;
    metric_route route;
    api_kind kind;
} routes[] = {
    {"/v1/chat/completions", true, ROUTE_CHAT, API_CHAT},
    {"/v1/completions", true, ROUTE_COMPLETION, API_COMPLETION},
    {"/tokenize", true, ROUTE_TOKENIZE, API_TOKENIZE},
    {"/detokenize", true, ROUTE_DETOKENIZE, API_DETOKENIZE},
    {"/apply-template", true, ROUTE_TEMPLATE, API_TEMPLATE},
    {"/v1/models", false, ROUTE_MODELS, 0},
    {"/health", false, ROUTE_HEALTH, 0},
    {"/metrics", false, ROUTE_METRICS, 0},
    {"/", false, ROUTE_PAGE, 0},
};

static enum MHD_Result dispatch(conn *k, const char *url, const char *method)
{
    srv_state *s = k->s;
    int idx = -1;
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++)
        if (!strcmp(url, routes[i].path) || (!strcmp(routes[i].path, "/") && !strcmp(url, "/index.html")))
            idx = (int)i;
    if (idx < 0)
        return fail(k, 404, "not_found_error", NULL, "no route %s", url);
    k->route = routes[idx].route;
    bool post = !strcmp(method, "POST"), head_or_get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    if (routes[idx].post ? !post : !head_or_get)
        return fail(k, 405, "invalid_request_error", NULL, "method %s is not allowed here", method);
    if (k->too_big) {
        char lim[32];
        snprintf(lim, sizeof lim, "%zu", s->max_body);
        return fail(k, 413, "invalid_request_error", NULL, "the body is larger than this server's limit of %s bytes", lim);
    }
    int ready = atomic_load(&s->ready);
    if (k->route == ROUTE_PAGE)
        return respond(k, 200, "text/html; charset=utf-8", (char *)serve_page_html, serve_page_html_len, false);
    if (k->route == ROUTE_METRICS) {
        char *t = metrics_text(s->mx, ready == SRV_READY);
        return t ? respond(k, 200, "text/plain; version=0.0.4", t, strlen(t), true) : respond_json(k, 500, NULL);
    }
    if (k->route == ROUTE_HEALTH) {
        static char ok[] = "{\"status\":\"ok\"}", loading[] = "{\"status\":\"loading\"}",
                    draining[] = "{\"status\":\"draining\"}";
        return ready == SRV_READY ? respond(k, 200, "application/json", ok, sizeof ok - 1, false)
                                  : ready == SRV_LOADING ? respond(k, 503, "application/json", loading, sizeof loading - 1, false)
                                                         : respond(k, 503, "application/json", draining, sizeof draining - 1, false);
    }
    if (ready != SRV_READY)
        return fail(k, 503, "unavailable_error", NULL, "%s", ready == SRV_LOADING ? "the model is loading" : "the server is shutting down");
    if (k->route == ROUTE_MODELS)
        return route_models(k);
    api_params p;
    api_error e;
    if (api_parse(routes[idx].kind, k->body, k->len, &s->limits, &p, &e))
        return respond_error(k, &e);
    enum MHD_Result rc;
    switch (routes[idx].kind) {
    case API_TOKENIZE: rc = route_tokenize(k, &p); break;
    case API_DETOKENIZE: rc = route_detokenize(k, &p); break;
    case API_TEMPLATE: rc = route_template(k, &p); break;
    default: rc = start_generation(k, &p); break;
    }
    api_params_clear(&p);
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    srv_state *s = cls;
    conn *k = *con_cls;
    if (!k) { /* the headers are in */
        if (!(k = calloc(1, sizeof *k)))
            return MHD_NO;
        k->s = s, k->c = c, k->route = ROUTE_OTHER;
        *con_cls = k;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > s->max_body) { /* refused before the body is read */
            k->too_big = true;
            return dispatch(k, url, method);
        }
        return MHD_YES;
    }
    if (*upload_size) { /* a piece of the body (kept up to the limit; past it only counted) */
        if (k->len + *upload_size > s->max_body)
            k->too_big = true;
        else {
            if (k->len + *upload_size + 1 > k->cap) {
                size_t ncap = (k->len + *upload_size + 1) * 2;
                char *b = realloc(k->body, ncap > s->max_body + 1 ? s->max_body + 1 : ncap);
                if (!b)
                    return MHD_NO;
                k->body = b, k->cap = ncap > s->max_body + 1 ? s->max_body + 1 : ncap;
            }
            memcpy(k->body + k->len, upload, *upload_size);
            k->len += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (k->req) { /* resumed: a whole answer is ready, or not yet */
        srv_request *r = k->req;
        pthread_mutex_lock(&r->mu);
        bool done = r->done;
        if (!done) {
            k->suspended = true;
            MHD_suspend_connection(c);
        }
        pthread_mutex_unlock(&r->mu);
        return done ? answer_whole(k) : MHD_YES;
    }
    return dispatch(k, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode why)
{
    (void)c, (void)why;
    srv_state *s = cls;
    conn *k = *con_cls;
    if (!k)
        return;
    if (k->req) {
        srv_request *r = k->req;
        pthread_mutex_lock(&r->mu);
        if (!r->done)
            r->cancelled = true; /* the client left before the end */
        r->http = NULL;
        r->fd = -1;
        k->suspended = false;
        pthread_mutex_unlock(&r->mu);
        srv_request_unref(r, s->mx);
    }
    free(k->body);
    free(k->wire);
    free(k);
    *con_cls = NULL;
}

static void on_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    fprintf(stderr, "nuvec serve: http: ");
    vfprintf(stderr, fmt, ap);
}

int srv_http_start(srv_state *s, char *msg, size_t cap)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char port[8];
    snprintf(port, sizeof port, "%u", s->port);
    int g = getaddrinfo(s->host, port, &hints, &ai);
    if (g) {
        snprintf(msg, cap, "cannot resolve --host %s: %s", s->host, gai_strerror(g));
        return -1;
    }
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                     (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    s->daemon = MHD_start_daemon(flags, s->port, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, on_log, s,
                                 MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                                 MHD_OPTION_THREAD_POOL_SIZE, (unsigned)s->threads, MHD_OPTION_CONNECTION_LIMIT,
                                 (unsigned)s->max_connections, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->timeout_s,
                                 MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024, MHD_OPTION_NOTIFY_COMPLETED,
                                 on_completed, s, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->daemon) {
        snprintf(msg, cap, "cannot listen on %s port %u (in use, or not an address of this machine)", s->host, s->port);
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    if (di)
        s->port = di->port;
    return 0;
}

void srv_http_quiesce(srv_state *s)
{
    if (s->daemon) {
        MHD_socket fd = MHD_quiesce_daemon(s->daemon);
        if (fd != MHD_INVALID_SOCKET)
            close(fd);
    }
}

void srv_http_stop(srv_state *s)
{
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
    s->daemon = NULL;
}
