/* test_trace.c: timelines. A trace holds every dispatch, copy, fill, upload, download and
 * barrier with a GPU duration (graph launches' dispatches too), CPU spans for record / commit /
 * wait, and the GPU times of work a barrier orders do not overlap. Also: refusals, and NUVEC_TRACE. */
#include "harness.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[512];

static cJSON *load(const char *file)
{
    char *text = nt_read_file(file);
    cJSON *doc = cJSON_Parse(text);
    free(text);
    if (!doc)
        fail_msg("%s is not JSON", file);
    return doc;
}

typedef struct span {
    double ts, dur;
    int tid;
} span;

/* The complete ("X") events called `name`, in order of start. */
static int events(cJSON *doc, const char *name, span *out, int capacity)
{
    cJSON *list = cJSON_GetObjectItem(doc, "traceEvents");
    assert_true(cJSON_IsArray(list));
    int n = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, list)
    {
        cJSON *ph = cJSON_GetObjectItem(e, "ph"), *nm = cJSON_GetObjectItem(e, "name");
        if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "X") || !cJSON_IsString(nm) || strcmp(nm->valuestring, name))
            continue;
        cJSON *ts = cJSON_GetObjectItem(e, "ts"), *dur = cJSON_GetObjectItem(e, "dur"), *tid = cJSON_GetObjectItem(e, "tid");
        assert_true(cJSON_IsNumber(ts) && cJSON_IsNumber(dur) && cJSON_IsNumber(tid));
        assert_true(ts->valuedouble >= 0 && dur->valuedouble >= 0);
        if (n < capacity)
            out[n] = (span){ts->valuedouble, dur->valuedouble, tid->valueint};
        n++;
    }
    for (int i = 1; i < n && i < capacity; i++) /* insertion sort by start */
        for (int j = i; j > 0 && out[j].ts < out[j - 1].ts; j--) {
            span t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

static void every_command_is_in_the_trace(void **state)
{
    snprintf(path, sizeof path, "%s/nuvec-trace-%d.json", nt_tmp_dir(), (int)getpid());
    nu_device *d = nt_open();
    NT_OK(nu_trace_start(d, path));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_trace_start(d, path)); /* one at a time */
    nu_kernel *add;
    NT_OK(nu_kernel_builtin(d, "add_f32", &add));
    enum { CHAIN = 8 };
    nu_buffer *x, *b[CHAIN + 1], *shared;
    NT_OK(nu_buffer_new(d, 4096, NU_STORAGE_PRIVATE, &x));
    NT_OK(nu_buffer_new(d, 4096, NU_STORAGE_SHARED, &shared));
    for (int i = 0; i <= CHAIN; i++)
        NT_OK(nu_buffer_new(d, 4096, NU_STORAGE_PRIVATE, &b[i]));
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    float ones[1024];
    for (int i = 0; i < 1024; i++)
        ones[i] = 1;
    NT_OK(nu_commands_upload(c, x, 0, ones, sizeof ones));
    NT_OK(nu_commands_fill(c, b[0], 0, 4096, 0));
    uint32_t n = 1024, groups[3] = {4, 1, 1};
    for (int i = 0; i < CHAIN; i++) { /* b[i+1] = b[i] + x: each waits for the last */
        nu_binding bind[3] = {{b[i + 1], NU_ACCESS_WRITE, 0, 0}, {b[i], NU_ACCESS_READ, 0, 0}, {x, NU_ACCESS_READ, 0, 0}};
        NT_OK(nu_commands_dispatch(c, add, groups, bind, 3, &n, 4));
    }
    NT_OK(nu_commands_copy(c, shared, 1, b[CHAIN], 1, 100)); /* unaligned: the copy engine */
    float out[4];
    NT_OK(nu_commands_download(c, b[CHAIN], 0, out, sizeof out));
    NT_OK(nu_commands_commit(c));
    NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
    assert_true(out[0] == CHAIN);
    nu_commands_free(c);
    NT_OK(nu_trace_stop(d));
    NT_OK(nu_trace_stop(d)); /* nothing running: nothing to do */

    cJSON *doc = load(path);
    span s[64];
    assert_int_equal(events(doc, "add_f32", s, 64), CHAIN);
    /* The chain's dispatches are ordered by barriers: their GPU times must not overlap. */
    for (int i = 0; i + 1 < CHAIN; i++) {
        assert_int_equal(s[i].tid, s[i + 1].tid);
        if (s[i].ts + s[i].dur > s[i + 1].ts + 0.001)
            fail_msg("dispatch %d ends at %.3f us, after dispatch %d starts at %.3f us", i, s[i].ts + s[i].dur, i + 1,
                     s[i + 1].ts);
    }
    assert_true(events(doc, "barrier", s, 64) >= CHAIN - 1);
    assert_int_equal(events(doc, "upload", s, 64), 1);
    assert_int_equal(events(doc, "fill_u32", s, 64), 1);
    assert_int_equal(events(doc, "copy", s, 64), 1);
    assert_int_equal(events(doc, "download", s, 64), 1);
    assert_int_equal(events(doc, "record", s, 64), 1);
    assert_int_equal(events(doc, "commit", s, 64), 1);
    assert_int_equal(events(doc, "wait", s, 64), 1);
    assert_int_equal(s[0].tid, 3); /* the CPU track */
    cJSON_Delete(doc);

    /* After stop nothing is traced. */
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    NT_OK(nu_commands_fill(c, b[0], 0, 4096, 0));
    NT_OK(nu_commands_commit(c));
    NT_OK(nu_commands_wait(c, NU_WAIT_FOREVER));
    nu_commands_free(c);
    for (int i = 0; i <= CHAIN; i++)
        nu_buffer_free(b[i]);
    nu_buffer_free(x);
    nu_buffer_free(shared);
    nu_kernel_free(add);
    nt_close(d);
    unlink(path);
}

/* Graph launches: a graph built before the trace starts, launched three times while it runs
 * (its copies encoded again with timestamps; launches reuse them), gives an event per dispatch
 * and launch, ordered as the chain's barriers order them; a launch after the trace stops adds
 * none (its copy encoded again without), and the graph's results stay right throughout. */
static void graph_launches_are_traced(void **state)
{
    (void)state;
    snprintf(path, sizeof path, "%s/nuvec-trace-graph-%d.json", nt_tmp_dir(), (int)getpid());
    nu_device *d = nt_open();
    nu_kernel *add;
    NT_OK(nu_kernel_builtin(d, "add_f32", &add));
    enum { CHAIN = 5, LAUNCHES = 3 };
    nu_buffer *x, *b[CHAIN + 1];
    NT_OK(nu_buffer_new(d, 4096, NU_STORAGE_SHARED, &x));
    for (int i = 0; i <= CHAIN; i++)
        NT_OK(nu_buffer_new(d, 4096, NU_STORAGE_SHARED, &b[i]));
    float ones[1024], zeros[1024] = {0};
    for (int i = 0; i < 1024; i++)
        ones[i] = 1;
    NT_OK(nu_buffer_write(x, 0, ones, sizeof ones));
    nu_commands *rec;
    NT_OK(nu_graph_record(d, &rec));
    uint32_t n = 1024, groups[3] = {4, 1, 1};
    for (int i = 0; i < CHAIN; i++) { /* b[i+1] = b[i] + x */
        nu_binding bind[3] = {{b[i + 1], NU_ACCESS_WRITE, 0, 0}, {b[i], NU_ACCESS_READ, 0, 0}, {x, NU_ACCESS_READ, 0, 0}};
        NT_OK(nu_commands_dispatch(rec, add, groups, bind, 3, &n, 4));
    }
    nu_graph *g;
    NT_OK(nu_graph_new(rec, &g));
    NT_OK(nu_graph_launch(g)); /* encoded and launched before the trace */
    NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
    NT_OK(nu_trace_start(d, path));
    float out[4];
    for (int l = 0; l < LAUNCHES; l++) {
        NT_OK(nu_buffer_write(b[0], 0, zeros, sizeof zeros));
        NT_OK(nu_graph_launch(g));
        NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
        NT_OK(nu_buffer_read(b[CHAIN], 0, out, sizeof out));
        assert_true(out[0] == CHAIN && out[3] == CHAIN);
    }
    NT_OK(nu_trace_stop(d));
    NT_OK(nu_graph_launch(g)); /* after the trace: encoded again without timestamps */
    NT_OK(nu_graph_wait(g, NU_WAIT_FOREVER));
    NT_OK(nu_buffer_read(b[CHAIN], 0, out, sizeof out));
    assert_true(out[0] == CHAIN);

    cJSON *doc = load(path);
    span s[64];
    int count = events(doc, "add_f32", s, 64);
    if (count != CHAIN * LAUNCHES)
        fail_msg("%d add_f32 events in the trace of %d launches of %d dispatches", count, LAUNCHES, CHAIN);
    for (int i = 0; i + 1 < count; i++) { /* each launch's chain ordered by its barriers, launches in turn */
        assert_int_equal(s[i].tid, 1);
        if (s[i].ts + s[i].dur > s[i + 1].ts + 0.001)
            fail_msg("graph dispatch %d ends at %.3f us, after dispatch %d starts at %.3f us", i, s[i].ts + s[i].dur,
                     i + 1, s[i + 1].ts);
    }
    assert_true(events(doc, "barrier", s, 64) >= (CHAIN - 1) * LAUNCHES);
    cJSON_Delete(doc);
    NT_OK(nu_graph_free(g));
    for (int i = 0; i <= CHAIN; i++)
        nu_buffer_free(b[i]);
    nu_buffer_free(x);
    nu_kernel_free(add);
    nt_close(d);
    unlink(path);
}

static void bad_paths_are_refused(void **state)
{
    nu_device *d = nt_open();
    NT_STATUS(NU_ERROR_IO, nu_trace_start(d, "/nonexistent-directory-of-nuvec/trace.json"));
    assert_non_null(strstr(nu_error_message(d), "/nonexistent-directory-of-nuvec/trace.json"));
    NT_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_trace_start(d, ""));
    NT_OK(nu_trace_stop(d));
    nt_close(d);
}

static void nuvec_trace_traces_from_open_to_close(void **state)
{
    snprintf(path, sizeof path, "%s/nuvec-env-trace-%d.json", nt_tmp_dir(), (int)getpid());
    setenv("NUVEC_TRACE", path, 1);
    nu_device *d = nt_open();
    unsetenv("NUVEC_TRACE");
    nu_buffer *b;
    NT_OK(nu_buffer_new(d, 1024, NU_STORAGE_PRIVATE, &b));
    nu_commands *c;
    NT_OK(nu_commands_new(d, NU_QUEUE_COMPUTE, &c));
    NT_OK(nu_commands_fill(c, b, 0, 1024, 3));
    NT_OK(nu_commands_commit(c));
    nu_commands_free(c); /* not waited for: close waits and writes */
    nu_buffer_free(b);
    nt_close(d);
    cJSON *doc = load(path);
    span s[4];
    assert_int_equal(events(doc, "fill_u32", s, 4), 1);
    cJSON_Delete(doc);
    unlink(path);
}

/* Starting and stopping traces while other threads create, record and commit command buffers
 * (documented as allowed): the per-queue state a start sets is published to them, also over
 * a trace they began under (ThreadSanitizer, `make tsan`, watches). */
static nu_device *shared_dev;
static atomic_bool stop_recording;

static void *record_until_stopped(void *arg)
{
    nu_buffer *b = arg;
    while (!atomic_load(&stop_recording)) {
        nu_commands *c;
        if (nu_commands_new(shared_dev, NU_QUEUE_COMPUTE, &c) != NU_OK)
            return "nu_commands_new failed";
        nu_status st = nu_commands_fill(c, b, 0, 256, 1);
        if (st == NU_OK)
            st = nu_commands_commit(c);
        if (st == NU_OK)
            st = nu_commands_wait(c, NU_WAIT_FOREVER);
        nu_commands_free(c);
        if (st != NU_OK)
            return "recording or running failed";
    }
    return NULL;
}

static void traces_start_while_threads_record(void **state)
{
    snprintf(path, sizeof path, "%s/nuvec-trace-threads-%d.json", nt_tmp_dir(), (int)getpid());
    shared_dev = nt_open();
    nu_buffer *b[2];
    pthread_t t[2];
    atomic_store(&stop_recording, false);
    for (int i = 0; i < 2; i++) {
        NT_OK(nu_buffer_new(shared_dev, 256, NU_STORAGE_PRIVATE, &b[i]));
        assert_int_equal(pthread_create(&t[i], NULL, record_until_stopped, b[i]), 0);
    }
    for (int i = 0; i < 6; i++) {
        NT_OK(nu_trace_start(shared_dev, path));
        usleep(3000);
        NT_OK(nu_trace_stop(shared_dev));
        usleep(1000);
    }
    atomic_store(&stop_recording, true);
    for (int i = 0; i < 2; i++) {
        void *err;
        pthread_join(t[i], &err);
        if (err)
            fail_msg("thread %d: %s: %s", i, (const char *)err, nu_error_message(NULL));
        nu_buffer_free(b[i]);
    }
    nt_close(shared_dev);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_command_is_in_the_trace),
        cmocka_unit_test(graph_launches_are_traced),
        cmocka_unit_test(bad_paths_are_refused),
        cmocka_unit_test(nuvec_trace_traces_from_open_to_close),
        cmocka_unit_test(traces_start_while_threads_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
