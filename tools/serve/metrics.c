/* metrics.c: Prometheus text exposition of `nuvec serve`'s counters (metrics.h). */
#include "metrics.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const int metric_codes[METRIC_CODES] = {200, 400, 404, 405, 413, 429, 431, 500, 503, 408};

static const char *const route_names[ROUTE_COUNT] = {"chat", "completion", "tokenize", "detokenize", "apply_template",
                                                     "models", "health", "metrics", "page", "other"};
static const char *const finish_names[FINISH_COUNT] = {"stop", "length", "cancelled", "error"};

void metrics_http(srv_metrics *m, metric_route route, int status)
{
    int k = METRIC_CODES;
    for (int i = 0; i < METRIC_CODES; i++)
        if (metric_codes[i] == status)
            k = i;
    atomic_fetch_add(&m->http[route][k], 1);
}

typedef struct sbuf {
    char *s;
    size_t n, cap;
    bool failed;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...)
{
    for (int tries = 0; tries < 2 && !b->failed; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->failed = true;
            return;
        }
        if (b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t ncap = (b->cap + (size_t)k + 1) * 2;
        char *s = realloc(b->s, ncap);
        if (!s) {
            b->failed = true;
            return;
        }
        b->s = s, b->cap = ncap;
    }
}

static uint64_t rd(const atomic_uint_fast64_t *v)
{
    return (uint64_t)atomic_load(v);
}

static int64_t rdi(const atomic_int_fast64_t *v)
{
    return (int64_t)atomic_load(v);
}

/* The process's resident bytes (Linux /proc/self/statm), 0 where unknown. */
static uint64_t resident_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, rss = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%llu %llu", &size, &rss) != 2)
        rss = 0;
    fclose(f);
    return rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

char *metrics_text(const srv_metrics *m, int ready)
{
    sbuf b = {0};
    put(&b, "# HELP nuvec_ready 1 once the model is loaded\n# TYPE nuvec_ready gauge\nnuvec_ready %d\n", ready);
    put(&b, "# HELP nuvec_http_requests_total HTTP responses by route and status\n"
            "# TYPE nuvec_http_requests_total counter\n");
    for (int r = 0; r < ROUTE_COUNT; r++)
        for (int k = 0; k <= METRIC_CODES; k++) {
            uint64_t v = rd(&m->http[r][k]);
            if (!v)
                continue;
            if (k < METRIC_CODES)
                put(&b, "nuvec_http_requests_total{route=\"%s\",code=\"%d\"} %llu\n", route_names[r], metric_codes[k],
                    (unsigned long long)v);
            else
                put(&b, "nuvec_http_requests_total{route=\"%s\",code=\"other\"} %llu\n", route_names[r],
                    (unsigned long long)v);
        }
    put(&b, "# HELP nuvec_requests_finished_total generations by how they ended\n"
            "# TYPE nuvec_requests_finished_total counter\n");
    for (int f = 0; f < FINISH_COUNT; f++)
        put(&b, "nuvec_requests_finished_total{reason=\"%s\"} %llu\n", finish_names[f],
            (unsigned long long)rd(&m->finished[f]));
    struct {
        const char *name, *help, *type;
        uint64_t v;
    } rows[] = {
        {"nuvec_prompt_tokens_total", "prompt tokens of admitted requests", "counter", rd(&m->prompt_tokens)},
        {"nuvec_prompt_tokens_cached_total", "prompt tokens found in a slot's cache (not prefilled)", "counter",
         rd(&m->cached_tokens)},
        {"nuvec_generated_tokens_total", "tokens generated", "counter", rd(&m->generated_tokens)},
        {"nuvec_steps_total", "model steps run", "counter", rd(&m->steps)},
        {"nuvec_step_rows_total", "rows (tokens) the steps appended", "counter", rd(&m->step_rows)},
        {"nuvec_decode_rows_total", "rows of batched decode", "counter", rd(&m->decode_rows)},
        {"nuvec_queue_rejected_total", "requests refused with 429 (queue full)", "counter", rd(&m->queue_rejected)},
        {"nuvec_queue_length", "requests waiting for a slot", "gauge", (uint64_t)rdi(&m->queued)},
        {"nuvec_queue_capacity", "requests that may wait", "gauge", m->queue_capacity},
        {"nuvec_slots_busy", "slots generating", "gauge", (uint64_t)rdi(&m->active)},
        {"nuvec_slots_total", "slots", "gauge", m->slots},
        {"nuvec_requests_live", "generation requests alive", "gauge", (uint64_t)rdi(&m->live_requests)},
        {"nuvec_requests_live_bytes", "host bytes those requests hold", "gauge", (uint64_t)rdi(&m->live_bytes)},
        {"nuvec_time_to_first_token_seconds_sum", "time from admission request to first token, summed", "counter", 0},
        {"nuvec_time_to_first_token_seconds_count", "requests with a first token", "counter", rd(&m->ttft_count)},
        {"nuvec_device_active_bytes", "the device's active bytes", "gauge", rd(&m->device_active)},
        {"nuvec_model_weights_bytes", "the model's weights on the device", "gauge", rd(&m->device_weights)},
        {"nuvec_model_kv_cache_bytes", "the model's KV cache of all slots", "gauge", rd(&m->device_kv)},
        {"nuvec_process_resident_bytes", "the process's resident memory", "gauge", resident_bytes()},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        put(&b, "# HELP %s %s\n# TYPE %s %s\n", rows[i].name, rows[i].help, rows[i].name, rows[i].type);
        if (!strcmp(rows[i].name, "nuvec_time_to_first_token_seconds_sum"))
            put(&b, "%s %.6f\n", rows[i].name, (double)rd(&m->ttft_us_sum) / 1e6);
        else
            put(&b, "%s %llu\n", rows[i].name, (unsigned long long)rows[i].v);
    }
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}
