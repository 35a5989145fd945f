/* bench/probes/probe.h: what the throwaway probes under bench/probes share: CHECK (a failed nuvec
 * call prints itself and nuvec's message, and main returns 1) and now() (monotonic seconds). */
#ifndef NUVEC_PROBE_H
#define NUVEC_PROBE_H

#include <stdio.h>
#include <time.h>

#include "nuvec.h"

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        nu_status s_ = (x);                                                                        \
        if (s_ != NU_OK) {                                                                         \
            fprintf(stderr, "%s: %s (%s)\n", #x, nu_status_string(s_), nu_error_message(NULL));   \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static inline double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#endif
