/* http.h: `nuvec serve`'s HTTP side on GNU libmicrohttpd: a thread pool polls the sockets; a
 * request that waits for the engine suspends its connection (no thread is held), and the
 * engine's wake() resumes it; streams are Server-Sent Events read from the request's published
 * text. The routes: GET / (the chat page), /health, /metrics, /v1/models; POST
 * /v1/chat/completions, /v1/completions, /tokenize, /detokenize, /apply-template. */
#ifndef SERVE_HTTP_H
#define SERVE_HTTP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "engine.h"
#include "metrics.h"
#include "prompt.h"

enum { SRV_LOADING = 0, SRV_READY = 1, SRV_DRAINING = 2 };

/* What the HTTP threads share; the fields after `ready` are set before ready becomes
 * SRV_READY and read-only after. */
typedef struct srv_state {
    const char *host;
    uint16_t port;             /* 0: any free port (the one bound is written back) */
    uint32_t threads;          /* the pool's threads */
    uint32_t max_connections;
    uint32_t timeout_s;        /* an idle connection (headers, body, or a client not reading) is closed */
    size_t max_body;           /* bytes of a request body */
    srv_metrics *mx;
    atomic_int ready;
    srv_engine *engine;
    const nu_llm_tokenizer *tok;
    const nu_llm_config *cfg;
    const chat_prompt *prompt;
    const char *model_name;    /* what /v1/models lists and requests may name */
    uint32_t ctx;              /* positions a slot holds */
    api_limits limits;
    struct MHD_Daemon *daemon;
} srv_state;

/* Starts listening (s->port gets the port bound). 0, or -1 with msg set. */
int srv_http_start(srv_state *s, char *msg, size_t cap);
/* Stops accepting connections (those open go on). */
void srv_http_quiesce(srv_state *s);
void srv_http_stop(srv_state *s);

/* The chat page (tools/serve/page/index.html, embedded at build time). */
extern const char serve_page_html[];
extern const size_t serve_page_html_len;

#endif
