/* engine.h: the scheduler of `nuvec serve`. One thread owns the model and runs its steps
 * (nu_llm_model_step): the slots that hold a request each append their next rows (a prompt's
 * tokens, in chunks; then one token a step), the slots with one row decode together as one
 * batch, and requests join (when a slot frees) and leave (finished, cancelled) between steps
 * (continuous batching). A new request takes the free slot whose cached tokens share the
 * longest prefix with its prompt (prefix reuse). Requests wait in a bounded queue for a slot.
 * The HTTP threads make requests (srv_request_new), submit them, and read what the engine
 * publishes under the request's lock; the engine calls the request's wake() when it publishes. */
#ifndef SERVE_ENGINE_H
#define SERVE_ENGINE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "api.h"
#include "metrics.h"
#include "nuvec_llm.h"
#include "text.h"

typedef struct srv_request srv_request;

struct srv_request {
    /* Set before submission, then read-only. */
    api_params p;
    int32_t *prompt;          /* the prompt's ids */
    uint32_t n_prompt;
    uint32_t max_tokens;      /* tokens to generate at most (the request's and the server's cap) */
    char id[48];
    int64_t created;          /* Unix seconds */
    void (*wake)(srv_request *r); /* called under mu when something was published (may be NULL) */
    void *http;               /* the HTTP side's state, for wake() */
    int fd;                   /* the client's socket (under mu; -1 once the connection is gone):
                               * polled for a hang-up while the request is queued or running */

    /* The engine's, while queued or running. */
    uint32_t slot;
    uint32_t fed;             /* prompt tokens in the slot's cache */
    uint32_t n_gen;
    int32_t last;             /* the last token produced, fed at the next step */
    nu_llm_sampler *sampler;
    gen_text text;
    double t_admit;
    srv_request *next;        /* the queue */

    /* Published by the engine, under mu. */
    pthread_mutex_t mu;
    char *out;                /* the text released so far (valid UTF-8, NUL-terminated) */
    size_t out_len, out_cap;
    int32_t *toks;            /* the tokens produced so far */
    size_t n_toks, cap_toks;
    bool done;
    metric_finish finish;
    api_error error;          /* FINISH_ERROR's */
    uint32_t cached;          /* prompt tokens found in the cache */
    bool cancelled;           /* the client went away (set by either side) */
    int refs;
    int64_t accounted;        /* the bytes counted in the metrics' live_bytes */
};

/* A request with one reference (the caller's). NULL when out of memory. Takes over *params
 * (cleared) and the prompt (malloc'd ids). */
srv_request *srv_request_new(api_params *params, int32_t *prompt, uint32_t n_prompt, srv_metrics *metrics);
void srv_request_ref(srv_request *r);
void srv_request_unref(srv_request *r, srv_metrics *metrics);
/* The client is gone: the engine drops the request at its next step (its slot is freed). */
void srv_request_cancel(srv_request *r);

typedef struct srv_engine_options {
    uint32_t queue;           /* requests that may wait for a slot */
    uint32_t batch;           /* prompt tokens a step takes at most, over all requests */
    uint32_t ctx;             /* positions a slot holds (the model's max_positions option) */
} srv_engine_options;

typedef struct srv_engine srv_engine;

/* Starts the engine's thread on an open model with slots (nu_llm_model_slots). NULL on failure. */
srv_engine *srv_engine_start(nu_llm_model *model, const srv_engine_options *o, srv_metrics *metrics);
/* Queues r (the engine takes a reference): 0, 429 when the queue is full, 503 when draining
 * (err set). */
int srv_engine_submit(srv_engine *e, srv_request *r, api_error *err);
/* Stops admitting requests (new ones get 503); waits up to timeout_s for the queued and running
 * ones to finish, then cancels what is left and waits for that. */
void srv_engine_drain(srv_engine *e, double timeout_s);
/* Stops the thread (after a drain) and frees the engine; the model stays open. */
void srv_engine_stop(srv_engine *e);

#endif
