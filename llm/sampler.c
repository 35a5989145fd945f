/* sampler.c: the next token from a step's logits: greedy, temperature, top-k, top-p, seeded
 * (nuvec_llm.h gives the order of the steps).
 *
 * Candidates are ordered by (logit descending, id ascending), a total order, so the survivors of
 * top-k and the order top-p accumulates in do not depend on the sort's implementation. Top-k
 * keeps a min-heap of the k best while scanning the logits once (O(V log k)); only the
 * survivors are sorted. Without top-k and top-p nothing is sorted: the draw walks the ids in
 * order. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "nuvec_llm.h"

#define MAX_TEMPERATURE 1e6f

typedef struct candidate {
    float logit;
    int32_t id;
} candidate;

struct nu_llm_sampler {
    nu_llm_sampler_params params;
    uint64_t s[4]; /* xoshiro256** */
    candidate *scratch;
    double *prob;
    size_t capacity;
};

/* ---- The PRNG: xoshiro256** (Blackman and Vigna), seeded through splitmix64 ---------------- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t next_u64(nu_llm_sampler *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1), 53 bits. */
static double next_unit(nu_llm_sampler *r)
{
    return (double)(next_u64(r) >> 11) * 0x1.0p-53;
}

void nu_llm_sampler_reseed(nu_llm_sampler *r, uint64_t seed)
{
    if (!r)
        return;
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x); /* never all zero: splitmix64 is a bijection of distinct inputs */
    r->params.seed = seed;
}

/* ---- Creation ------------------------------------------------------------------------------- */

nu_status nu_llm_sampler_new(const nu_llm_sampler_params *params, nu_llm_sampler **out)
{
    if (out)
        *out = NULL;
    if (!out)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_sampler_new: out is NULL");
    nu_llm_sampler_params p = params ? *params : (nu_llm_sampler_params){0};
    if (!isfinite(p.temperature) || p.temperature < 0 || p.temperature > MAX_TEMPERATURE)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT,
                            "nu_llm_sampler_new: temperature %g is not in [0, %g] (0: greedy)", (double)p.temperature,
                            (double)MAX_TEMPERATURE);
    if (!(p.top_p >= 0 && p.top_p <= 1))
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_sampler_new: top_p %g is not in [0, 1] (0 or 1: off)",
                            (double)p.top_p);
    nu_llm_sampler *r = nu_llm__calloc(1, sizeof *r);
    if (!r)
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "nu_llm_sampler_new: out of host memory");
    r->params = p;
    nu_llm_sampler_reseed(r, p.seed);
    *out = r;
    return NU_OK;
}

void nu_llm_sampler_free(nu_llm_sampler *r)
{
    if (!r)
        return;
    nu_llm__free(r->scratch);
    nu_llm__free(r->prob);
    nu_llm__free(r);
}

/* ---- Sampling ------------------------------------------------------------------------------- */

/* Whether a ranks before b: the larger logit, then the lower id. */
static bool better(candidate a, candidate b)
{
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

static int compare_candidates(const void *pa, const void *pb)
{
    candidate a = *(const candidate *)pa, b = *(const candidate *)pb;
    return better(a, b) ? -1 : better(b, a) ? 1 : 0;
}

/* Min-heap by `better` (the worst candidate on top), for top-k. */
static void sift_down(candidate *h, size_t n, size_t i)
{
    candidate x = h[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && better(h[c], h[c + 1]))
            c++;
        if (!better(x, h[c]))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

static void sift_up(candidate *h, size_t i)
{
    candidate x = h[i];
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!better(h[up], x))
            break;
        h[i] = h[up];
        i = up;
    }
    h[i] = x;
}

static nu_status reserve(nu_llm_sampler *r, size_t n)
{
    if (n <= r->capacity)
        return NU_OK;
    candidate *c = nu_llm__malloc_array(n, sizeof *c);
    double *p = nu_llm__malloc_array(n, sizeof *p);
    if (!c || !p) {
        nu_llm__free(c);
        nu_llm__free(p);
        return nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "nu_llm_sample: out of host memory for %zu candidates", n);
    }
    nu_llm__free(r->scratch);
    nu_llm__free(r->prob);
    r->scratch = c;
    r->prob = p;
    r->capacity = n;
    return NU_OK;
}

/* The `k` best candidates (by `better`) among the finite logits into r->scratch[0 .. *n), sorted
 * best first if `sorted`, else in id order (only when k takes them all). */
static nu_status select_best(nu_llm_sampler *r, const float *logits, uint32_t vocab, size_t k, bool sorted, size_t *n)
{
    nu_status st = reserve(r, k);
    if (st != NU_OK)
        return st;
    candidate *c = r->scratch;
    size_t m = 0;
    for (uint32_t i = 0; i < vocab; i++) {
        if (isinf(logits[i]))
            continue;
        candidate x = {logits[i], (int32_t)i};
        if (!sorted) {
            c[m++] = x; /* all of them, in id order */
        } else if (m < k) {
            c[m] = x;
            sift_up(c, m++);
        } else if (better(x, c[0])) {
            c[0] = x;
            sift_down(c, m, 0);
        }
    }
    if (sorted)
        qsort(c, m, sizeof *c, compare_candidates);
    *n = m;
    return NU_OK;
}

nu_status nu_llm_sample(nu_llm_sampler *r, const float *logits, uint32_t vocab, int32_t *token)
{
    if (token)
        *token = -1;
    if (!r || !logits || !token)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_sample: %s is NULL",
                            !r ? "the sampler" : !logits ? "logits" : "token");
    if (vocab == 0 || vocab > INT32_MAX)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_sample: vocab %u is not in 1 .. %d", vocab, INT32_MAX);
    /* Checks, and the greedy pick on the way. */
    int32_t best = -1;
    uint32_t finite = 0;
    for (uint32_t i = 0; i < vocab; i++) {
        float x = logits[i];
        if (isnan(x))
            return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_sample: logit %u is NaN", i);
        if (isinf(x)) {
            if (x > 0)
                return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_sample: logit %u is +inf", i);
            continue;
        }
        finite++;
        if (best < 0 || x > logits[best])
            best = (int32_t)i;
    }
    if (!finite)
        return nu_llm__fail(NU_ERROR_INVALID_ARGUMENT, "nu_llm_sample: all %u logits are -inf", vocab);
    const nu_llm_sampler_params *p = &r->params;
    if (p->temperature == 0 || p->top_k == 1 || finite == 1) {
        *token = best;
        return NU_OK;
    }
    bool top_p = p->top_p > 0 && p->top_p < 1;
    /* The survivors of top-k (all finite logits without it). */
    size_t limit = p->top_k && p->top_k < finite ? p->top_k : finite;
    double inv_t = 1.0 / (double)p->temperature, max = (double)logits[best], sum = 0;
    candidate *c = NULL;
    size_t n = 0;
    if (!top_p || limit < finite) {
        nu_status st = select_best(r, logits, vocab, limit, limit < finite, &n);
        if (st != NU_OK)
            return st;
        c = r->scratch;
        for (size_t i = 0; i < n; i++)
            sum += r->prob[i] = exp(((double)c[i].logit - max) * inv_t);
    }
    if (top_p) {
        /* The nucleus: the smallest prefix, best first, whose mass reaches top_p of the survivors'.
         * Without top-k the survivors are the whole vocabulary: rather than sort it, take the best
         * k for a growing k until their mass reaches top_p (usually at once). */
        if (limit == finite)
            for (uint32_t i = 0; i < vocab; i++)
                if (!isinf(logits[i]))
                    sum += exp(((double)logits[i] - max) * inv_t);
        double want = (double)p->top_p * sum, mass = 0;
        size_t k = limit < finite ? limit : (finite < 1024 ? finite : 1024), keep = 0;
        for (;;) {
            if (limit == finite) {
                nu_status st = select_best(r, logits, vocab, k, true, &n);
                if (st != NU_OK)
                    return st;
                c = r->scratch;
                for (size_t i = 0; i < n; i++)
                    r->prob[i] = exp(((double)c[i].logit - max) * inv_t);
            }
            mass = 0;
            keep = 0;
            while (keep < n && mass < want)
                mass += r->prob[keep++];
            if (mass >= want || k == limit)
                break;
            k = k > limit / 8 ? limit : k * 8;
        }
        n = keep ? keep : 1;
        sum = 0;
        for (size_t i = 0; i < n; i++)
            sum += r->prob[i];
    }
    double u = next_unit(r) * sum, acc = 0;
    for (size_t i = 0; i < n; i++) {
        acc += r->prob[i];
        if (u < acc) {
            *token = c[i].id;
            return NU_OK;
        }
    }
    /* Rounding left u at the very top: the last candidate with any mass. */
    size_t last = n - 1;
    while (last > 0 && r->prob[last] == 0)
        last--;
    *token = c[last].id;
    return NU_OK;
}
