/* trace.c: timelines (see nuvec/trace.h).
 *
 * GPU side: a traced command buffer writes a timestamp before and after each command into
 * query pools of its own (reset from the host when made); completion reads them and adds one
 * event per command to the device's trace. A graph's copy encoded while a trace runs keeps its
 * pools (tc->keep): each launch's completion reads them and resets them for the next launch. GPU ticks become CPU time
 * through an offset measured when the trace starts: a command buffer that only writes a
 * timestamp is submitted on each queue between two CPU clock reads, and the timestamp is
 * taken to fall midway (good to the round trip, tens of microseconds).
 * CPU side: recording (nu_commands_new to commit), commit and wait are spans on a CPU track.
 * Events are kept in memory and written as Chrome trace-event JSON (cJSON) at stop. */
#include "debug/trace.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/array.h"
#include "core/error.h"
#include "core/host.h"
#include "nuvec/command.h" /* nu_device_wait_idle, before writing a trace */
#include "vk/queue.h"

#define POOL_QUERIES 256

typedef struct event {
    char name[48];
    int track;             /* 0: compute queue, 1: transfer queue, 2: CPU */
    uint64_t start_ns, end_ns;
} event;

typedef struct nu__trace {
    pthread_mutex_t lock;  /* the events, the path, and the per-queue state below */
    atomic_bool active;
    char *path;
    event *events;
    size_t count, capacity;
    bool env;              /* started by NUVEC_TRACE: written at close */
    /* Per queue: whether timestamps work, the tick mask, and GPU ns -> CPU ns. Set by
     * nu_trace_start under `lock` (other threads may be creating or completing command
     * buffers of an earlier trace meanwhile) and read under it. */
    bool timed[2];
    uint64_t mask[2];
    int64_t offset_ns[2];
    double period_ns;
} nu__trace;

uint64_t nu__trace_now(void) { return nu__now_ns(); }

static void add_event(nu__trace *t, const char *name, int track, uint64_t start, uint64_t end)
{
    pthread_mutex_lock(&t->lock);
    if (NU__GROW(t->events, t->capacity, t->count + 1, 1024) != NU_OK) {
        pthread_mutex_unlock(&t->lock); /* out of host memory: the event is dropped */
        return;
    }
    event *e = &t->events[t->count++];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->track = track;
    e->start_ns = start;
    e->end_ns = end < start ? start : end;
    pthread_mutex_unlock(&t->lock);
}

/* An acquire load: nu_trace_start publishes the per-queue state (timed, mask, offset_ns) with
 * its store of `active`, and threads that see a trace running read that state next. */
bool nu__trace_active(nu_device *d) { return d->trace && atomic_load_explicit(&d->trace->active, memory_order_acquire); }

void nu__trace_cpu(nu_device *d, const char *name, uint64_t start_ns, uint64_t end_ns)
{
    if (nu__trace_active(d))
        add_event(d->trace, name, 2, start_ns, end_ns);
}

/* ---- per command buffer ------------------------------------------------------------------- */

static void free_cmd(nu_device *d, nu__trace_cmd *tc)
{
    for (uint32_t i = 0; i < tc->pool_count; i++)
        d->vkd.vkDestroyQueryPool(d->device, tc->pools[i], NULL);
    nu__free(tc->pools);
    nu__free(tc->spans);
    nu__free(tc);
}

/* The next query of the command buffer (a new pool, reset in the command buffer, when the
 * last is full); UINT32_MAX when none can be had. */
static uint32_t next_query(nu__trace_cmd *tc)
{
    nu_device *d = tc->device;
    if (tc->queries == tc->pool_count * POOL_QUERIES) {
        if (NU__GROW32(tc->pools, tc->pool_capacity, tc->pool_count + 1, 4) != NU_OK)
            return UINT32_MAX;
        VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                    .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = POOL_QUERIES};
        VkQueryPool pool;
        if (d->vkd.vkCreateQueryPool(d->device, &qi, NULL, &pool) != VK_SUCCESS)
            return UINT32_MAX;
        d->vkd.vkResetQueryPool(d->device, pool, 0, POOL_QUERIES); /* transfer-only queues cannot reset */
        tc->pools[tc->pool_count++] = pool;
    }
    return tc->queries++;
}

static void write_timestamp(nu__trace_cmd *tc, uint32_t query, VkPipelineStageFlagBits stage)
{
    tc->device->vkd.vkCmdWriteTimestamp(tc->cmd, stage, tc->pools[query / POOL_QUERIES], query % POOL_QUERIES);
}

uint32_t nu__trace_command_begin(nu__trace_cmd *tc)
{
    if (!tc)
        return UINT32_MAX;
    /* Pairs take two consecutive queries of one pool: skip the last query of a pool. */
    if (tc->queries % POOL_QUERIES == POOL_QUERIES - 1)
        tc->queries++;
    uint32_t q = next_query(tc);
    if (q == UINT32_MAX || next_query(tc) == UINT32_MAX)
        return UINT32_MAX;
    /* Right after a barrier, the command starts when the barrier's wait ends: a bottom-of-pipe
     * stamp (written once all earlier work completed) says so; otherwise top of pipe. */
    write_timestamp(tc, q, tc->after_barrier ? VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT : VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT);
    return q;
}

void nu__trace_command_end(nu__trace_cmd *tc, uint32_t query, const char *name, bool barrier)
{
    if (!tc)
        return;
    tc->after_barrier = barrier;
    if (query == UINT32_MAX)
        return;
    write_timestamp(tc, query + 1, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT);
    if (NU__GROW32(tc->spans, tc->span_capacity, tc->span_count + 1, 64) != NU_OK)
        return; /* out of host memory: this command goes untimed */
    nu__trace_span *s = &tc->spans[tc->span_count++];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->query = query;
}

void nu__trace_command_done(nu__trace_cmd *tc, bool completed)
{
    if (!tc)
        return;
    nu_device *d = tc->device;
    nu__trace *t = d->trace;
    int q = (int)tc->queue;
    if (completed && nu__trace_active(d)) {
        pthread_mutex_lock(&t->lock);
        uint64_t mask = t->mask[q];
        int64_t offset_ns = t->offset_ns[q];
        double period_ns = t->period_ns;
        pthread_mutex_unlock(&t->lock);
        uint64_t stamps[POOL_QUERIES];
        for (uint32_t p = 0; p < tc->pool_count; p++) {
            uint32_t first = p * POOL_QUERIES, n = tc->queries - first < POOL_QUERIES ? tc->queries - first : POOL_QUERIES;
            if (d->vkd.vkGetQueryPoolResults(d->device, tc->pools[p], 0, n, sizeof stamps, stamps, sizeof stamps[0],
                                             VK_QUERY_RESULT_64_BIT) != VK_SUCCESS)
                continue;
            for (uint32_t i = 0; i < tc->span_count; i++) {
                uint32_t b = tc->spans[i].query;
                if (b < first || b + 1 >= first + n)
                    continue;
                uint64_t g0 = stamps[b - first] & mask, g1 = stamps[b + 1 - first] & mask;
                int64_t s0 = (int64_t)((double)g0 * period_ns) + offset_ns;
                int64_t s1 = (int64_t)((double)g1 * period_ns) + offset_ns;
                add_event(t, tc->spans[i].name, q, s0 > 0 ? (uint64_t)s0 : 0, s1 > 0 ? (uint64_t)s1 : 0);
            }
        }
    }
    if (!tc->keep) {
        free_cmd(d, tc);
        return;
    }
    /* Read or not, the queries are written again by the next submission: reset them now (the
     * command buffer is not pending). */
    for (uint32_t p = 0; p < tc->pool_count; p++)
        d->vkd.vkResetQueryPool(d->device, tc->pools[p], 0, POOL_QUERIES);
}

void nu__trace_command_free(nu__trace_cmd *tc)
{
    if (tc)
        free_cmd(tc->device, tc);
}

/* ---- starting and stopping ---------------------------------------------------------------- */

/* Measures GPU ns -> CPU ns for queue q (see the file comment): *offset_ns, for ticks of
 * `period_ns` masked by `mask`. */
static bool calibrate(nu_device *d, int q, uint64_t mask, double period_ns, int64_t *offset_ns)
{
    nu__queue *queue = &d->queues[q];
    VkCommandPool pool;
    VkCommandBuffer cmd;
    VkQueryPool qp;
    if (nu__queue_command_pool(d, queue, 0, "the trace's calibration", &pool, &cmd) != NU_OK)
        return false;
    VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = 1};
    bool ok = false;
    if (d->vkd.vkCreateQueryPool(d->device, &qi, NULL, &qp) == VK_SUCCESS) {
        VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
        d->vkd.vkResetQueryPool(d->device, qp, 0, 1);
        if (d->vkd.vkBeginCommandBuffer(cmd, &bi) == VK_SUCCESS) {
            d->vkd.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp, 0);
            if (d->vkd.vkEndCommandBuffer(cmd) == VK_SUCCESS) {
                uint64_t value, t0 = nu__trace_now();
                VkResult r = nu__queue_submit(d, queue, &cmd, 1, NULL, 0, NULL, NULL, &value);
                uint64_t stamp = 0;
                if (r == VK_SUCCESS && nu__queue_wait(d, queue, value, 10ull * 1000000000u, NULL) == NU_OK &&
                    d->vkd.vkGetQueryPoolResults(d->device, qp, 0, 1, sizeof stamp, &stamp, sizeof stamp,
                                                 VK_QUERY_RESULT_64_BIT) == VK_SUCCESS) {
                    uint64_t t1 = nu__trace_now();
                    double gpu = (double)(stamp & mask) * period_ns;
                    *offset_ns = (int64_t)(t0 / 2 + t1 / 2) - (int64_t)gpu;
                    ok = true;
                }
            }
        }
        d->vkd.vkDestroyQueryPool(d->device, qp, NULL);
    }
    d->vkd.vkDestroyCommandPool(d->device, pool, NULL);
    return ok;
}

nu_status nu_trace_start(nu_device *d, const char *path)
{
    if (!d || !path || !*path)
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "nu_trace_start: NULL device or empty path");
    nu__trace *t = d->trace;
    if (atomic_load(&t->active))
        return nu__fail(d, NU_ERROR_INVALID_ARGUMENT, "nu_trace_start: a trace to %s is already running", t->path);
    /* The file is written at stop; find out now whether it can be. */
    FILE *f = fopen(path, "w");
    if (!f)
        return nu__fail(d, NU_ERROR_IO, "nu_trace_start: cannot write %s: %s", path, strerror(errno));
    fclose(f);
    char *copy = nu__strdup(path);
    if (!copy)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory starting a trace");
    uint32_t n = 0;
    d->vki.vkGetPhysicalDeviceQueueFamilyProperties(d->physical, &n, NULL);
    VkQueueFamilyProperties *qf = nu__calloc(n ? n : 1, sizeof *qf);
    if (!qf) {
        nu__free(copy);
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory starting a trace");
    }
    d->vki.vkGetPhysicalDeviceQueueFamilyProperties(d->physical, &n, qf);
    /* Measured into locals: command buffers of an earlier trace may still read the state. */
    double period_ns = d->info.timestamp_period;
    bool timed[2] = {false, false};
    uint64_t mask[2] = {0, 0};
    int64_t offset_ns[2] = {0, 0};
    for (int q = 0; q < 2; q++) {
        if (!d->queues[q].timeline || d->queues[q].family >= n)
            continue;
        uint32_t bits = qf[d->queues[q].family].timestampValidBits;
        mask[q] = bits >= 64 ? UINT64_MAX : ((1ull << bits) - 1);
        /* Without valid bits the queue has no timestamps: its commands go untimed. */
        timed[q] = bits > 0 && period_ns > 0 && calibrate(d, q, mask[q], period_ns, &offset_ns[q]);
    }
    nu__free(qf);
    pthread_mutex_lock(&t->lock);
    nu__free(t->path);
    t->path = copy;
    t->count = 0;
    t->period_ns = period_ns;
    for (int q = 0; q < 2; q++) {
        t->timed[q] = timed[q];
        t->mask[q] = mask[q];
        t->offset_ns[q] = offset_ns[q];
    }
    pthread_mutex_unlock(&t->lock);
    atomic_store_explicit(&t->active, true, memory_order_release); /* publishes the state above */
    return NU_OK;
}

static void add_number(cJSON *o, const char *k, double v) { cJSON_AddItemToObject(o, k, cJSON_CreateNumber(v)); }

static cJSON *metadata(const char *what, int tid, const char *name)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "name", what);
    cJSON_AddStringToObject(m, "ph", "M");
    add_number(m, "pid", 1);
    add_number(m, "tid", tid);
    cJSON *args = cJSON_AddObjectToObject(m, "args");
    cJSON_AddStringToObject(args, "name", name);
    return m;
}

/* Writes the events as Chrome trace-event JSON. */
static nu_status write_trace(nu_device *d, nu__trace *t)
{
    static const char *tracks[3] = {"compute queue (GPU)", "transfer queue (GPU)", "CPU"};
    cJSON *root = cJSON_CreateObject();
    cJSON *list = root ? cJSON_AddArrayToObject(root, "traceEvents") : NULL;
    if (!list) {
        cJSON_Delete(root);
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory writing the trace");
    }
    cJSON_AddStringToObject(root, "displayTimeUnit", "ns");
    char process[NU_NAME_SIZE + 16];
    snprintf(process, sizeof process, "nuvec: %s", d->info.name);
    cJSON_AddItemToArray(list, metadata("process_name", 0, process));
    for (int i = 0; i < 3; i++)
        cJSON_AddItemToArray(list, metadata("thread_name", i + 1, tracks[i]));
    uint64_t base = UINT64_MAX;
    for (size_t i = 0; i < t->count; i++)
        base = t->events[i].start_ns < base ? t->events[i].start_ns : base;
    for (size_t i = 0; i < t->count; i++) {
        const event *e = &t->events[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", e->name);
        cJSON_AddStringToObject(o, "cat", e->track == 2 ? "cpu" : "gpu");
        cJSON_AddStringToObject(o, "ph", "X");
        add_number(o, "pid", 1);
        add_number(o, "tid", e->track + 1);
        add_number(o, "ts", (double)(e->start_ns - base) / 1000.0); /* microseconds */
        add_number(o, "dur", (double)(e->end_ns - e->start_ns) / 1000.0);
        cJSON_AddItemToArray(list, o);
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!text)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory writing the trace");
    FILE *f = fopen(t->path, "w");
    nu_status st = NU_OK;
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        st = nu__fail(d, NU_ERROR_IO, "writing the trace %s: %s", t->path, strerror(errno));
        f = NULL;
    }
    (void)f;
    free(text); /* cJSON's own allocation */
    return st;
}

nu_status nu_trace_stop(nu_device *d)
{
    if (!d)
        return nu__fail(NULL, NU_ERROR_INVALID_ARGUMENT, "nu_trace_stop: NULL device");
    nu__trace *t = d->trace;
    if (!atomic_load(&t->active))
        return NU_OK;
    /* Traced work still running adds its events when it completes. */
    nu_status st = nu_device_wait_idle(d, NU_WAIT_FOREVER);
    atomic_store(&t->active, false);
    pthread_mutex_lock(&t->lock);
    nu_status wst = write_trace(d, t);
    t->count = 0;
    pthread_mutex_unlock(&t->lock);
    return st != NU_OK ? st : wst;
}

/* ---- per device --------------------------------------------------------------------------- */

nu_status nu__trace_init(nu_device *d)
{
    nu__trace *t = nu__calloc(1, sizeof *t);
    if (!t)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory opening a device");
    pthread_mutex_init(&t->lock, NULL);
    atomic_init(&t->active, false);
    d->trace = t;
    const char *env = getenv("NUVEC_TRACE");
    if (env && *env) {
        nu_status st = nu_trace_start(d, env);
        if (st != NU_OK)
            return st; /* NUVEC_TRACE names a file that cannot be written: say so at open */
        t->env = true;
    }
    return NU_OK;
}

void nu__trace_fini(nu_device *d)
{
    nu__trace *t = d->trace;
    if (!t)
        return;
    if (atomic_load(&t->active)) {
        nu_status st = nu_trace_stop(d);
        if (st != NU_OK)
            fprintf(stderr, "nuvec: the trace %s was not written: %s\n", t->path, nu_error_message(d));
    }
    nu__free(t->events);
    nu__free(t->path);
    pthread_mutex_destroy(&t->lock);
    nu__free(t);
    d->trace = NULL;
}

nu_status nu__trace_command_new(nu_device *d, uint32_t queue, VkCommandBuffer cmd, nu__trace_cmd **out,
                                uint64_t *record_start)
{
    *out = NULL;
    *record_start = 0;
    if (!nu__trace_active(d))
        return NU_OK;
    *record_start = nu__trace_now();
    pthread_mutex_lock(&d->trace->lock);
    bool timed = d->trace->timed[queue];
    pthread_mutex_unlock(&d->trace->lock);
    if (!timed)
        return NU_OK;
    nu__trace_cmd *tc = nu__calloc(1, sizeof *tc);
    if (!tc)
        return nu__fail(d, NU_ERROR_HOST_OUT_OF_MEMORY, "out of host memory tracing a command buffer");
    tc->device = d;
    tc->cmd = cmd;
    tc->queue = queue;
    *out = tc;
    return NU_OK;
}
