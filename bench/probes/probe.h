/* bench/probes/probe.h: what the throwaway probes under bench/probes share: CHECK (a failed nuvec
 * call prints itself and nuvec's message, and main returns 1), now() (monotonic seconds),
 * probe_time (a dispatch's best time), and the matrix-unit probes' F16 product (probe_product:
 * exact operands, the check against the host). */
#ifndef NUVEC_PROBE_H
#define NUVEC_PROBE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* Seconds a dispatch of k over g[3] workgroups: the best of three runs of `reps` dispatches recorded
 * into one command buffer (committed, waited for). */
static inline nu_status probe_time(nu_device *d, nu_kernel *k, const uint32_t g[3], const nu_binding *b, uint32_t nb,
                                   const void *push, uint32_t push_size, uint32_t reps, double *seconds)
{
    double best = 1e30;
    for (int t = 0; t < 3; t++) {
        nu_commands *c;
        nu_status st = nu_commands_new(d, NU_QUEUE_COMPUTE, &c);
        for (uint32_t r = 0; r < reps && st == NU_OK; r++)
            st = nu_commands_dispatch(c, k, g, b, nb, push, push_size);
        double t0 = now();
        if (st == NU_OK)
            st = nu_commands_commit(c);
        if (st == NU_OK)
            st = nu_commands_wait(c, UINT64_MAX);
        double dt = (now() - t0) / reps;
        if (c)
            nu_commands_free(c);
        if (st != NU_OK)
            return st;
        best = dt < best ? dt : best;
    }
    *seconds = best;
    return NU_OK;
}

/* An F16 product's operands for the matrix-unit probes: a [m, k] and w [n, k] with values (i - 8) / 8,
 * i in 0..16 (exact in F16; every sum exact in F32), kept as i on the host for the check, and an
 * F32 dst [m, n] the host can read. */
typedef struct probe_product {
    nu_buffer *dst, *a, *w;
    signed char *ai, *wi;
} probe_product;

/* (i - 8) / 8 as F16 bits, i in 0..16: exact. */
static inline uint16_t probe_half_of(int i)
{
    float f = (float)(i - 8) / 8.0f;
    if (f == 0.0f)
        return 0;
    uint32_t b;
    memcpy(&b, &f, 4);
    uint32_t sign = b >> 31, exp = (b >> 23) & 0xff, man = b & 0x7fffff;
    return (uint16_t)((sign << 15) | ((exp - 127 + 15) << 10) | (man >> 13));
}

static inline nu_status probe_product_new(nu_device *d, size_t m, size_t n, size_t k, probe_product *p)
{
    size_t an = m * k, wn = n * k;
    uint16_t *ah = malloc(an * 2), *wh = malloc(wn * 2);
    *p = (probe_product){.ai = malloc(an), .wi = malloc(wn)};
    nu_status st = ah && wh && p->ai && p->wi ? NU_OK : NU_ERROR_OUT_OF_MEMORY;
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; st == NU_OK && i < an + wn; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        signed char v = (signed char)(x % 17);
        if (i < an)
            p->ai[i] = v, ah[i] = probe_half_of(v);
        else
            p->wi[i - an] = v, wh[i - an] = probe_half_of(v);
    }
    if (st == NU_OK)
        st = nu_buffer_new(d, m * n * 4, NU_STORAGE_SHARED, &p->dst);
    if (st == NU_OK)
        st = nu_buffer_from(d, ah, an * 2, NU_STORAGE_PRIVATE, &p->a);
    if (st == NU_OK)
        st = nu_buffer_from(d, wh, wn * 2, NU_STORAGE_PRIVATE, &p->w);
    free(ah), free(wh);
    return st;
}

/* The largest |dst - exact| over 64 elements of the m x n x k product held in dst's first m n
 * floats. */
static inline double probe_product_error(const probe_product *p, uint32_t m, uint32_t n, uint32_t k)
{
    const void *mem;
    if (nu_buffer_contents(p->dst, &mem) != NU_OK)
        return INFINITY;
    const float *out = mem;
    double worst = 0;
    for (int e = 0; e < 64; e++) {
        uint32_t i = (uint32_t)(e * 7919u) % m, j = (uint32_t)(e * 104729u) % n;
        double want = 0;
        for (uint32_t kk = 0; kk < k; kk++)
            want += ((p->ai[(size_t)i * k + kk] - 8) / 8.0) * ((p->wi[(size_t)j * k + kk] - 8) / 8.0);
        worst = fmax(worst, fabs(out[(size_t)i * n + j] - want));
    }
    return worst;
}

/* Times kernel k (push: m, n, k; workgroup (x, y) the BM x BN tile (y, x) of dst) at 4096^3 and a 7B
 * prefill's 512 x 4096 -> 4096 and -> 11008, each checked: TFLOP/s in tf (0 where bm or bn does
 * not divide the shape or kstep its k), the checks' largest error in *worst. */
static inline nu_status probe_product_shapes(nu_device *d, nu_kernel *k, const probe_product *p, uint32_t bm,
                                             uint32_t bn, uint32_t kstep, double tf[3], double *worst)
{
    static const uint32_t shapes[3][3] = {{4096, 4096, 4096}, {512, 4096, 4096}, {512, 11008, 4096}};
    nu_binding b[3] = {{p->dst, NU_ACCESS_WRITE, 0, 0}, {p->a, NU_ACCESS_READ, 0, 0}, {p->w, NU_ACCESS_READ, 0, 0}};
    *worst = 0;
    for (int s = 0; s < 3; s++) {
        uint32_t push[3] = {shapes[s][0], shapes[s][1], shapes[s][2]};
        uint32_t g[3] = {push[1] / bn, push[0] / bm, 1};
        tf[s] = 0;
        if (push[1] % bn || push[0] % bm || push[2] % kstep)
            continue;
        double best;
        nu_status st = probe_time(d, k, g, b, 3, push, sizeof push, s ? 20 : 5, &best);
        if (st != NU_OK)
            return st;
        tf[s] = 2.0 * push[0] * push[1] * (double)push[2] / best / 1e12;
        *worst = fmax(*worst, probe_product_error(p, push[0], push[1], push[2]));
    }
    return NU_OK;
}

/* The table's head for probe_product_shapes' rows (first column: `what`). */
static inline void probe_product_head(const char *what)
{
    printf("%-40s %12s %16s %17s  check\n", what, "4096^3", "512x4096>4096", "512x4096>11008");
}

static inline void probe_product_free(probe_product *p)
{
    nu_buffer_free(p->dst);
    nu_buffer_free(p->a);
    nu_buffer_free(p->w);
    free(p->ai), free(p->wi);
}

#endif
