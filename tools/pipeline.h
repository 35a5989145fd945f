/* pipeline.h: the pipelined computation that `nuvec demo` shows and `nuvec bench pipeline`
 * measures: several steps in flight, each reading a large input (or a layer of weights) and writing
 * intermediates, with or without reuse of memory still used by in-flight steps. */
#ifndef TOOLS_PIPELINE_H
#define TOOLS_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "nuvec.h"

typedef struct pipeline_result {
    double seconds;        /* wall time of all steps */
    double gbps;           /* bytes the GPU read and wrote per second */
    uint64_t peak;         /* allocator's peak active bytes during the loop */
    uint64_t held_peak;    /* largest active + cache + pending seen after a step was
                              committed: the memory the loop kept from the device (what the
                              limit bounds) */
    uint64_t cache;        /* allocator's cache bytes at the end */
    uint64_t reserved;     /* device memory held at the end */
    bool verified;         /* every step's output matched the CPU */
} pipeline_result;

/* Weights the steps read instead of one input: step s reads tensor l = s % layers, `elements`
 * floats at offsets[l] of `buffer`, whose values are pipeline_weight(l + 1, i). */
typedef struct pipeline_weights {
    nu_buffer *buffer;
    const uint64_t *offsets;
    uint32_t layers;
} pipeline_weights;

/* The value of element i of weights tensor `layer` (layer 0 is the input without weights):
 * a small integer, so that every result is exact. */
float pipeline_weight(uint32_t layer, uint32_t i);

/* Runs `steps` steps over `elements` floats with at most `in_flight` steps committed and not
 * waited for. Intermediates come from nu_buffer_new_gpu when `reuse`, else nu_buffer_new. */
nu_status pipeline_run(nu_device *d, bool reuse, uint32_t steps, uint32_t elements, uint32_t in_flight,
                          const pipeline_weights *weights, pipeline_result *out);

#endif
