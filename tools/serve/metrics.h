/* metrics.h: `nuvec serve`'s counters and gauges, updated by the HTTP threads and the engine's
 * thread (atomics: no lock), written as Prometheus text by GET /metrics. */
#ifndef SERVE_METRICS_H
#define SERVE_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The routes counted apart. */
typedef enum metric_route {
    ROUTE_CHAT, ROUTE_COMPLETION, ROUTE_TOKENIZE, ROUTE_DETOKENIZE, ROUTE_TEMPLATE, ROUTE_MODELS,
    ROUTE_HEALTH, ROUTE_METRICS, ROUTE_PAGE, ROUTE_OTHER, ROUTE_COUNT
} metric_route;

/* How a generation ended. */
typedef enum metric_finish { FINISH_STOP, FINISH_LENGTH, FINISH_CANCELLED, FINISH_ERROR, FINISH_COUNT } metric_finish;

/* HTTP statuses counted apart (others count as "other"). */
enum { METRIC_CODES = 10 };
extern const int metric_codes[METRIC_CODES];

typedef struct srv_metrics {
    atomic_uint_fast64_t http[ROUTE_COUNT][METRIC_CODES + 1]; /* responses by route and status */
    atomic_uint_fast64_t finished[FINISH_COUNT];              /* generations by how they ended */
    atomic_uint_fast64_t prompt_tokens, cached_tokens, generated_tokens;
    atomic_uint_fast64_t steps, step_rows, decode_rows;
    atomic_uint_fast64_t queue_rejected;   /* 429s */
    atomic_int_fast64_t queued, active;    /* gauges: waiting for a slot; in a slot */
    atomic_int_fast64_t live_requests;     /* generation requests alive (queued, active or answering) */
    atomic_int_fast64_t live_bytes;        /* the host bytes they hold (prompts, text) */
    atomic_uint_fast64_t device_active, device_weights, device_kv; /* the model's memory (engine thread) */
    atomic_uint_fast64_t ttft_us_sum, ttft_count;                  /* time to first token */
    uint32_t slots, queue_capacity;
} srv_metrics;

void metrics_http(srv_metrics *m, metric_route route, int status);
/* The Prometheus text (malloc'd, NUL-terminated), with `ready` (1: model loaded). */
char *metrics_text(const srv_metrics *m, int ready);

#endif
