/* bench_util.h: what the alloc, dispatch and submit benchmarks share: clocks, medians, opening the
 * device without validation, option parsing, the device's JSON description, and the hand-written
 * Vulkan submission they compare nuvec against (on nuvec's own compute queue, under its lock). */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "vk/device.h"
#include "nuvec.h"

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);
/* The median of v (sorted in place), and the p-th percentile (0..100, nearest rank) of a sorted v. */
double bench_median(double *v, int n);
double bench_percentile_sorted(const double *v, int n, double p);
/* "1.23x", "0.98x", "1421x". */
const char *bench_ratio_text(char *buf, size_t len, double ratio);
/* "0.41", "12.3", "586": microseconds with about three significant digits. */
const char *bench_us_text(char *buf, size_t len, double us);

/* Parses a decimal count in [lo, hi] for option `opt` of benchmark `bench`; false (with a
 * message on stderr) when it is not one. */
bool bench_parse_count(const char *bench, const char *opt, const char *text, long lo, long hi, long *out);

/* The options every benchmark takes, for its option loop at argv[*i] (after its own options):
 * --json, --device NAME (stepping *i past NAME), --help or -h (usage on stdout), and anything
 * else, an unknown or incomplete option (a message and usage on stderr). Returns
 * BENCH_OPTION_TAKEN to go on, else the status the benchmark returns (0 after --help, 2). */
#define BENCH_OPTION_TAKEN (-1)
int bench_common_option(const char *bench, int argc, char **argv, int *i, bool *json, const char **select,
                           void (*usage)(FILE *f));

/* Opens the device chosen by `select` (NULL: NUVEC_DEVICE or the default order) without
 * validation (a NUVEC_VALIDATION in the environment is dropped with a note: the layer would be
 * measured). Prints why on stderr and returns false on failure. */
/* Leaves NUVEC_VALIDATION off for the process, saying so where it was on. */
void bench_no_validation(const char *bench);
bool bench_open(const char *bench, const char *select, nu_device **out);

/* The device's "device" object for a benchmark's JSON document. */
void bench_json_device(cJSON *root, const nu_device *d);
/* Prints a cJSON document to stdout and deletes it; the process status (1: out of memory). */
int bench_json_print(const char *bench, cJSON *root);

/* A hand-written Vulkan path: its own command pool, one primary command buffer, a timeline
 * semaphore, a fence and a timestamp query pool of two queries, all on nuvec's compute queue. */
typedef struct bench_vk {
    nu_device *d;
    VkCommandPool pool;
    VkCommandBuffer cmd;
    VkSemaphore timeline;
    uint64_t value;          /* the last value a submission signals */
    VkFence fence;
    VkQueryPool queries;     /* VK_NULL_HANDLE where the queue cannot write timestamps */
    uint64_t timestamp_mask; /* the queue family's valid timestamp bits */
} bench_vk;

/* Creates the objects (queries only where timestamps work); prints why on failure. The pool is
 * TRANSIENT (reset whole, as nuvec's) or RESET_COMMAND_BUFFER (its buffer reset alone). */
bool bench_vk_init(bench_vk *v, nu_device *d, const char *bench, bool transient);
void bench_vk_fini(bench_vk *v);
/* Submits `cmd` to nuvec's compute queue (under its lock), signalling `fence` if one is given,
 * else the next timeline value (as a plain fence-waiting program would, or a timeline one). */
VkResult bench_vk_submit(bench_vk *v, VkCommandBuffer cmd, VkFence fence);
/* Waits for the last submission's timeline value: spinning on vkGetSemaphoreCounterValue
 * (spin) or blocking in vkWaitSemaphores; VK_TIMEOUT after 60 s. */
VkResult bench_vk_wait(bench_vk *v, bool spin);
/* Records a reset of the two queries and the first timestamp (top of pipe) / the second
 * (bottom of pipe) into any command buffer of the compute queue; no-ops without queries. */
void bench_vk_timestamp_begin(bench_vk *v, VkCommandBuffer cmd);
void bench_vk_timestamp_end(bench_vk *v, VkCommandBuffer cmd);
/* Nanoseconds between the two timestamps of completed work; a negative value without queries
 * or when the results are not available. */
double bench_vk_timestamp_ns(bench_vk *v);

#endif
