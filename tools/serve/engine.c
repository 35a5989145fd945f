/* engine.c: the scheduler thread over nu_llm_model_step (engine.h).
 *
 * Locks: e->mu guards the queue and the engine's flags; r->mu guards what a request publishes
 * (and its fd). The engine takes e->mu before r->mu, never the other way; wake() runs under r->mu
 * and only resumes the HTTP connection. The model is touched by this thread alone. */
#include "engine.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct srv_engine {
    nu_llm_model *m;
    const nu_llm_config *cfg;
    const nu_llm_tokenizer *tok;
    srv_metrics *mx;
    srv_engine_options o;
    uint32_t slots, ctx;
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t work, idle;
    srv_request *qhead, *qtail;
    uint32_t nq;
    srv_request **active; /* by slot */
    uint32_t nactive;
    bool draining, stopping, cancel_all, busy;
    nu_llm_row *rows;
    srv_request **out_req; /* the request of each row with an output, in row order */
    float *logits;
    int32_t *ids;
    double last_poll;
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ---- Requests ---------------------------------------------------------------------------- */

/* The host bytes a request holds, counted into live_bytes as they change (metrics accounts
 * every byte back at the end). */
static void account(srv_request *r, srv_metrics *mx)
{
    int64_t held = (int64_t)(sizeof *r + r->n_prompt * sizeof *r->prompt + r->out_cap + r->cap_toks * sizeof *r->toks +
                             r->text.cap);
    atomic_fetch_add(&mx->live_bytes, held - r->accounted);
    r->accounted = held;
}

srv_request *srv_request_new(api_params *params, int32_t *prompt, uint32_t n_prompt, srv_metrics *mx)
{
    srv_request *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    static atomic_uint_fast64_t serial;
    r->p = *params;
    memset(params, 0, sizeof *params);
    r->prompt = prompt;
    r->n_prompt = n_prompt;
    r->fd = -1;
    r->refs = 1;
    r->created = (int64_t)time(NULL);
    r->t_admit = now_s();
    snprintf(r->id, sizeof r->id, "%s-%llx%06llx", r->p.kind == API_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)r->created, (unsigned long long)atomic_fetch_add(&serial, 1));
    pthread_mutex_init(&r->mu, NULL);
    atomic_fetch_add(&mx->live_requests, 1);
    account(r, mx);
    return r;
}

void srv_request_ref(srv_request *r)
{
    pthread_mutex_lock(&r->mu);
    r->refs++;
    pthread_mutex_unlock(&r->mu);
}

void srv_request_unref(srv_request *r, srv_metrics *mx)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    int left = --r->refs;
    pthread_mutex_unlock(&r->mu);
    if (left)
        return;
    atomic_fetch_sub(&mx->live_bytes, r->accounted);
    atomic_fetch_sub(&mx->live_requests, 1);
    nu_llm_sampler_free(r->sampler);
    gen_text_free(&r->text);
    api_params_clear(&r->p);
    free(r->prompt);
    free(r->out);
    free(r->toks);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

void srv_request_cancel(srv_request *r)
{
    pthread_mutex_lock(&r->mu);
    r->cancelled = true;
    pthread_mutex_unlock(&r->mu);
}

static bool is_cancelled(srv_engine *e, srv_request *r)
{
    pthread_mutex_lock(&r->mu);
    bool c = r->cancelled || e->cancel_all;
    pthread_mutex_unlock(&r->mu);
    return c;
}

/* Gives out what the text allows now (all of it when final); under r->mu, then wakes. */
static bool publish(srv_engine *e, srv_request *r, bool final, const int32_t *tok)
{
    size_t ready = gen_text_ready(&r->text, final);
    pthread_mutex_lock(&r->mu);
    bool ok = api_append_utf8(&r->out, &r->out_len, &r->out_cap, r->text.raw ? r->text.raw + r->text.released : "",
                              ready - r->text.released);
    if (ok)
        r->text.released = ready;
    if (ok && tok) {
        if (r->n_toks == r->cap_toks) {
            size_t ncap = r->cap_toks ? r->cap_toks * 2 : 16;
            int32_t *t = realloc(r->toks, ncap * sizeof *t);
            if (!t)
                ok = false;
            else
                r->toks = t, r->cap_toks = ncap;
        }
        if (ok)
            r->toks[r->n_toks++] = *tok;
    }
    account(r, e->mx);
    if (r->wake)
        r->wake(r);
    pthread_mutex_unlock(&r->mu);
    return ok;
}

/* Ends a request: its slot freed (its tokens stay for prefix reuse), the rest of its text
 * given out, done set, the engine's reference dropped. */
static void finish(srv_engine *e, srv_request *r, metric_finish how, int status, const char *msg)
{
    if (r->slot != UINT32_MAX) {
        nu_llm_model_seq_release(e->m, r->slot);
        e->active[r->slot] = NULL;
        e->nactive--;
        atomic_fetch_sub(&e->mx->active, 1);
        r->slot = UINT32_MAX;
    }
    if (how != FINISH_ERROR && !publish(e, r, true, NULL))
        how = FINISH_ERROR, status = 500, msg = "out of memory";
    pthread_mutex_lock(&r->mu);
    r->done = true;
    r->finish = how;
    if (how == FINISH_ERROR)
        api_fail(&r->error, status, status >= 500 ? "server_error" : "invalid_request_error", NULL, NULL, "%s", msg);
    if (r->wake)
        r->wake(r);
    pthread_mutex_unlock(&r->mu);
    atomic_fetch_add(&e->mx->finished[how], 1);
    srv_request_unref(r, e->mx);
}

/* ---- The loop ---------------------------------------------------------------------------- */

static void poll_one(srv_request *r)
{
    pthread_mutex_lock(&r->mu);
    if (r->fd >= 0) {
        struct pollfd p = {r->fd, POLLRDHUP, 0};
        if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)))
            r->cancelled = true;
    }
    pthread_mutex_unlock(&r->mu);
}

/* Clients that hung up (a socket that reads end-of-file or fails) cancel their requests, queued
 * or running: MHD does not watch a suspended connection. At most every 20 ms. */
static void poll_hangups(srv_engine *e)
{
    double t = now_s();
    if (t - e->last_poll < 0.02)
        return;
    e->last_poll = t;
    pthread_mutex_lock(&e->mu);
    for (uint32_t s = 0; s < e->slots; s++)
        if (e->active[s])
            poll_one(e->active[s]);
    for (srv_request *r = e->qhead; r; r = r->next)
        poll_one(r);
    pthread_mutex_unlock(&e->mu);
}

/* Moves queued requests into free slots: each takes the free slot sharing the longest prefix
 * with its prompt (all of it but the last token, which must run for its logits). */
static void admit(srv_engine *e)
{
    pthread_mutex_lock(&e->mu);
    while (e->qhead && e->nactive < e->slots) {
        srv_request *r = e->qhead;
        e->qhead = r->next;
        if (!e->qhead)
            e->qtail = NULL;
        e->nq--;
        atomic_fetch_sub(&e->mx->queued, 1);
        pthread_mutex_unlock(&e->mu);
        uint32_t slot = UINT32_MAX, reused = 0;
        /* Without a seed, each request its own (OpenAI's: sampling differs run to run). */
        static uint64_t unseeded;
        uint64_t seed = r->p.has_seed ? r->p.seed : (uint64_t)time(NULL) ^ (++unseeded * 0x9E3779B97F4A7C15ull);
        nu_llm_sampler_params sp = {r->p.temperature, r->p.top_k, r->p.top_p, seed};
        if (is_cancelled(e, r))
            finish(e, r, FINISH_CANCELLED, 0, NULL);
        else if (nu_llm_model_seq_acquire(e->m, r->prompt, r->n_prompt - 1, &slot, &reused) != NU_OK)
            finish(e, r, FINISH_ERROR, 500, nu_llm_error_message());
        else if (nu_llm_sampler_new(&sp, &r->sampler) != NU_OK) {
            nu_llm_model_seq_release(e->m, slot);
            finish(e, r, FINISH_ERROR, 400, nu_llm_error_message());
        } else {
            r->slot = slot;
            r->fed = reused;
            gen_text_init(&r->text, e->tok, r->prompt[r->n_prompt - 1], r->p.stop, r->p.n_stop);
            e->active[slot] = r;
            e->nactive++;
            atomic_fetch_add(&e->mx->active, 1);
            atomic_fetch_add(&e->mx->prompt_tokens, r->n_prompt);
            atomic_fetch_add(&e->mx->cached_tokens, reused);
            pthread_mutex_lock(&r->mu);
            r->cached = reused;
            pthread_mutex_unlock(&r->mu);
        }
        pthread_mutex_lock(&e->mu);
    }
    pthread_mutex_unlock(&e->mu);
}

/* A token produced for r: ends it at an end-of-generation token, a stop string, max_tokens or
 * the end of its slot's positions; else it is fed at the next step. */
static void take_token(srv_engine *e, srv_request *r, int32_t tok, double t)
{
    if (r->n_gen++ == 0) {
        atomic_fetch_add(&e->mx->ttft_us_sum, (uint64_t)((t - r->t_admit) * 1e6));
        atomic_fetch_add(&e->mx->ttft_count, 1);
    }
    atomic_fetch_add(&e->mx->generated_tokens, 1);
    char msg[200];
    if (!r->p.ignore_eos && gen_text_is_eog(e->tok, e->cfg, tok)) {
        finish(e, r, FINISH_STOP, 0, NULL);
        return;
    }
    if (!gen_text_push(&r->text, tok, msg, sizeof msg)) {
        finish(e, r, FINISH_ERROR, 500, msg);
        return;
    }
    if (!publish(e, r, false, &tok)) {
        finish(e, r, FINISH_ERROR, 500, "out of memory");
        return;
    }
    r->last = tok;
    if (r->text.stopped)
        finish(e, r, FINISH_STOP, 0, NULL);
    else if (r->n_gen >= r->max_tokens || r->n_prompt + r->n_gen > e->ctx)
        finish(e, r, FINISH_LENGTH, 0, NULL);
}

static void run_step(srv_engine *e)
{
    uint32_t n = 0, nout = 0, budget = e->o.batch;
    for (uint32_t s = 0; s < e->slots; s++) {
        srv_request *r = e->active[s];
        if (!r)
            continue;
        nu_llm_output out = r->p.temperature == 0 ? NU_LLM_OUTPUT_ARGMAX : NU_LLM_OUTPUT_LOGITS;
        if (r->fed < r->n_prompt) { /* the prompt, budget rows at most */
            uint32_t k = r->n_prompt - r->fed;
            if (k > budget)
                k = budget;
            if (!k)
                continue;
            budget -= k;
            for (uint32_t i = 0; i < k; i++)
                e->rows[n++] = (nu_llm_row){r->prompt[r->fed + i], s, NU_LLM_OUTPUT_NONE};
            r->fed += k;
            if (r->fed < r->n_prompt)
                continue;
        } else
            e->rows[n++] = (nu_llm_row){r->last, s, NU_LLM_OUTPUT_NONE};
        e->rows[n - 1].output = out;
        e->out_req[nout++] = r;
    }
    if (!n)
        return;
    uint32_t decode = 0; /* the slots with one row: they decode as one batch */
    for (uint32_t i = 0, j; i < n; i = j) {
        for (j = i; j < n && e->rows[j].slot == e->rows[i].slot; j++)
            ;
        decode += j - i == 1;
    }
    nu_status st = nu_llm_model_step(e->m, e->rows, n, e->logits, e->ids);
    double t = now_s();
    atomic_fetch_add(&e->mx->steps, 1);
    atomic_fetch_add(&e->mx->step_rows, n);
    atomic_fetch_add(&e->mx->decode_rows, decode);
    if (st != NU_OK) { /* every request of the step fails; the others and the server go on */
        char msg[300];
        snprintf(msg, sizeof msg, "the model's step failed: %s", nu_llm_error_message());
        for (uint32_t s = 0; s < e->slots; s++)
            if (e->active[s])
                finish(e, e->active[s], FINISH_ERROR, 500, msg);
        return;
    }
    uint32_t li = 0, ai = 0;
    for (uint32_t k = 0; k < nout; k++) {
        srv_request *r = e->out_req[k];
        int32_t tok;
        if (r->p.temperature == 0)
            tok = e->ids[ai++];
        else if (nu_llm_sample(r->sampler, e->logits + (size_t)li++ * e->cfg->vocab, e->cfg->vocab, &tok) != NU_OK) {
            finish(e, r, FINISH_ERROR, 500, nu_llm_error_message());
            continue;
        }
        take_token(e, r, tok, t);
    }
}

static void refresh_memory(srv_engine *e)
{
    nu_llm_memory mem;
    if (nu_llm_model_memory(e->m, &mem) != NU_OK)
        return;
    atomic_store(&e->mx->device_active, mem.device_active);
    atomic_store(&e->mx->device_weights, mem.weights);
    atomic_store(&e->mx->device_kv, mem.kv_cache);
}

static void *engine_main(void *arg)
{
    srv_engine *e = arg;
    for (;;) {
        pthread_mutex_lock(&e->mu);
        while (!e->stopping && !e->qhead && !e->nactive) {
            e->busy = false;
            pthread_cond_broadcast(&e->idle);
            pthread_cond_wait(&e->work, &e->mu);
        }
        e->busy = true;
        bool stop = e->stopping && !e->qhead && !e->nactive;
        pthread_mutex_unlock(&e->mu);
        if (stop)
            break;
        admit(e);
        poll_hangups(e);
        for (uint32_t s = 0; s < e->slots; s++)
            if (e->active[s] && is_cancelled(e, e->active[s]))
                finish(e, e->active[s], FINISH_CANCELLED, 0, NULL);
        run_step(e);
        refresh_memory(e);
    }
    pthread_mutex_lock(&e->mu);
    e->busy = false;
    pthread_cond_broadcast(&e->idle);
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

/* One decode step of each batch size the slots can make (1, 2, 4, ... rows: each its own graph,
 * built at its first use), so that no request waits for a graph to be built and the device's
 * memory is at its serving level from the start. The slots hold one token after it (bos at
 * position 0, which any prompt starting with bos reuses as it is). */
static nu_status warm_up(srv_engine *e)
{
    int32_t tok = e->cfg->bos >= 0 ? e->cfg->bos : 0;
    nu_status st = NU_OK;
    for (uint32_t k = 1; st == NU_OK; k = k * 2 > e->slots && k < e->slots ? e->slots : k * 2) {
        uint32_t got = 0, slot;
        for (; got < k && (st = nu_llm_model_seq_acquire(e->m, NULL, 0, &slot, NULL)) == NU_OK; got++)
            e->rows[got] = (nu_llm_row){tok, slot, NU_LLM_OUTPUT_NONE};
        if (st == NU_OK)
            st = nu_llm_model_step(e->m, e->rows, k, NULL, NULL);
        for (uint32_t i = 0; i < got; i++)
            nu_llm_model_seq_release(e->m, e->rows[i].slot);
        if (k >= e->slots)
            break;
    }
    refresh_memory(e);
    return st;
}

srv_engine *srv_engine_start(nu_llm_model *m, const srv_engine_options *o, srv_metrics *mx)
{
    srv_engine *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->m = m;
    e->cfg = nu_llm_model_config(m);
    e->tok = nu_llm_model_tokenizer(m);
    e->mx = mx;
    e->o = *o;
    e->slots = nu_llm_model_slots(m);
    e->ctx = o->ctx;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->work, NULL);
    pthread_cond_init(&e->idle, NULL);
    e->active = calloc(e->slots, sizeof *e->active);
    e->rows = malloc(((size_t)e->o.batch + e->slots) * sizeof *e->rows);
    e->out_req = malloc(e->slots * sizeof *e->out_req);
    e->logits = malloc((size_t)e->slots * e->cfg->vocab * sizeof *e->logits);
    e->ids = malloc(e->slots * sizeof *e->ids);
    mx->slots = e->slots;
    mx->queue_capacity = o->queue;
    if (!e->active || !e->rows || !e->out_req || !e->logits || !e->ids || warm_up(e) != NU_OK ||
        pthread_create(&e->thread, NULL, engine_main, e)) {
        srv_engine_stop(e);
        return NULL;
    }
    e->started = true;
    return e;
}

int srv_engine_submit(srv_engine *e, srv_request *r, api_error *err)
{
    pthread_mutex_lock(&e->mu);
    int rc = 0;
    if (e->draining || e->stopping)
        rc = api_fail(err, 503, "unavailable_error", NULL, NULL, "the server is shutting down");
    else if (e->nactive + e->nq >= e->slots + e->o.queue) {
        rc = api_fail(err, 429, "rate_limit_error", "queue_full", NULL,
                      "the server is busy: %u requests generating and %u waiting; try again", e->nactive, e->nq);
        atomic_fetch_add(&e->mx->queue_rejected, 1);
    } else {
        srv_request_ref(r);
        r->slot = UINT32_MAX;
        r->next = NULL;
        if (e->qtail)
            e->qtail->next = r;
        else
            e->qhead = r;
        e->qtail = r;
        e->nq++;
        atomic_fetch_add(&e->mx->queued, 1);
        pthread_cond_signal(&e->work);
    }
    pthread_mutex_unlock(&e->mu);
    return rc;
}

static bool wait_idle(srv_engine *e, double timeout_s)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)timeout_s;
    until.tv_nsec += (long)((timeout_s - (double)(time_t)timeout_s) * 1e9);
    if (until.tv_nsec >= 1000000000L)
        until.tv_sec++, until.tv_nsec -= 1000000000L;
    int rc = 0;
    while ((e->busy || e->qhead || e->nactive) && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&e->idle, &e->mu, &until);
    return !(e->busy || e->qhead || e->nactive);
}

void srv_engine_drain(srv_engine *e, double timeout_s)
{
    if (!e || !e->started)
        return;
    pthread_mutex_lock(&e->mu);
    e->draining = true;
    if (!wait_idle(e, timeout_s)) {
        e->cancel_all = true;
        pthread_cond_signal(&e->work);
        wait_idle(e, 60);
    }
    pthread_mutex_unlock(&e->mu);
}

void srv_engine_stop(srv_engine *e)
{
    if (!e)
        return;
    if (e->started) {
        pthread_mutex_lock(&e->mu);
        e->stopping = true;
        e->cancel_all = true;
        pthread_cond_signal(&e->work);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->thread, NULL);
    }
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->work);
    pthread_cond_destroy(&e->idle);
    free(e->active);
    free(e->rows);
    free(e->out_req);
    free(e->logits);
    free(e->ids);
    free(e);
}
