/* test_llm_sampler.c: the llm component's sampler (llm/sampler.c), no device needed: greedy,
 * the distributions of temperature, top-k and top-p checked by frequencies over many seeded
 * draws against the probabilities computed here, seeds (same seed same tokens, a fixed stream),
 * masked (-inf) logits, the checks, and host allocation failures. */
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "llm_util.h"
#include "nuvec_llm.h"

static nu_llm_sampler *make(float temperature, uint32_t top_k, float top_p, uint64_t seed)
{
    nu_llm_sampler_params p = {.temperature = temperature, .top_k = top_k, .top_p = top_p, .seed = seed};
    nu_llm_sampler *s = NULL;
    LLM_OK(nu_llm_sampler_new(&p, &s));
    assert_non_null(s);
    return s;
}

static int32_t sample(nu_llm_sampler *s, const float *logits, uint32_t n)
{
    int32_t tok = -7;
    LLM_OK(nu_llm_sample(s, logits, n, &tok));
    assert_true(tok >= 0 && (uint32_t)tok < n);
    return tok;
}

static void greedy(void **state)
{
    (void)state;
    nu_llm_sampler *s = NULL;
    LLM_OK(nu_llm_sampler_new(NULL, &s)); /* defaults: greedy */
    float logits[6] = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f, -INFINITY};
    for (int i = 0; i < 10; i++)
        assert_int_equal(sample(s, logits, 6), 1); /* the lowest id of the tied largest */
    logits[4] = 3.5f;
    assert_int_equal(sample(s, logits, 6), 4);
    float one = -1e30f;
    assert_int_equal(sample(s, &one, 1), 0);
    float masked[3] = {-INFINITY, -INFINITY, -5.0f};
    assert_int_equal(sample(s, masked, 3), 2);
    nu_llm_sampler_free(s);

    /* top-k 1 and a tiny top-p are greedy at any temperature. */
    float l[5] = {1.0f, 2.0f, 2.5f, 2.5f, 0.0f};
    nu_llm_sampler *k1 = make(1.5f, 1, 0, 1), *p0 = make(1.5f, 0, 1e-6f, 2), *both = make(0.7f, 3, 1e-6f, 3);
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(sample(k1, l, 5), 2);
        assert_int_equal(sample(p0, l, 5), 2);
        assert_int_equal(sample(both, l, 5), 2);
    }
    nu_llm_sampler_free(k1);
    nu_llm_sampler_free(p0);
    nu_llm_sampler_free(both);
}

/* Draws `draws` tokens and checks every token's frequency against p[] within 5 standard
 * deviations (plus a little), and that tokens with p 0 never come. */
static void check_frequencies(nu_llm_sampler *s, const float *logits, uint32_t n, const double *p, int draws)
{
    int *seen = calloc(n, sizeof *seen);
    assert_non_null(seen);
    for (int i = 0; i < draws; i++)
        seen[sample(s, logits, n)]++;
    for (uint32_t i = 0; i < n; i++) {
        double want = p[i] * draws, sd = sqrt(draws * p[i] * (1 - p[i]));
        if (p[i] == 0 && seen[i])
            fail_msg("token %u: drawn %d times, probability 0", i, seen[i]);
        if (fabs(seen[i] - want) > 5 * sd + 2)
            fail_msg("token %u: drawn %d times of %d, expected %.1f (sd %.1f)", i, seen[i], draws, want, sd);
    }
    free(seen);
}

/* softmax(logits / t) restricted to the ids with keep[i]. */
static void softmax(const float *logits, uint32_t n, double t, const bool *keep, double *p)
{
    double max = -INFINITY, sum = 0;
    for (uint32_t i = 0; i < n; i++)
        if (keep[i] && logits[i] > max)
            max = logits[i];
    for (uint32_t i = 0; i < n; i++)
        sum += p[i] = keep[i] ? exp((logits[i] - max) / t) : 0;
    for (uint32_t i = 0; i < n; i++)
        p[i] /= sum;
}

static void temperature_top_k_top_p_distributions(void **state)
{
    (void)state;
    enum { N = 8, DRAWS = 20000 };
    const float logits[N] = {1.0f, 2.0f, 0.5f, -1.0f, 2.0f, 1.5f, -INFINITY, 0.0f};
    bool keep[N];
    double p[N];

    /* Temperature alone: softmax(logits / t). */
    const float temps[] = {0.5f, 1.0f, 2.0f};
    for (size_t k = 0; k < 3; k++) {
        for (int i = 0; i < N; i++)
            keep[i] = i != 6;
        softmax(logits, N, temps[k], keep, p);
        nu_llm_sampler *s = make(temps[k], 0, 1.0f, 100 + k);
        check_frequencies(s, logits, N, p, DRAWS);
        nu_llm_sampler_free(s);
    }

    /* top-k 3: ids 1 and 4 (2.0) and 5 (1.5). */
    for (int i = 0; i < N; i++)
        keep[i] = i == 1 || i == 4 || i == 5;
    softmax(logits, N, 1.0, keep, p);
    nu_llm_sampler *s = make(1.0f, 3, 0, 7);
    check_frequencies(s, logits, N, p, DRAWS);
    nu_llm_sampler_free(s);
    /* top-k 1 of a tie at the cut: the lower id; top-k 2 keeps both 2.0s. */
    for (int i = 0; i < N; i++)
        keep[i] = i == 1 || i == 4;
    softmax(logits, N, 1.0, keep, p);
    s = make(1.0f, 2, 0, 8);
    check_frequencies(s, logits, N, p, DRAWS);
    nu_llm_sampler_free(s);
    /* top-k above the number of finite logits: all of them. */
    for (int i = 0; i < N; i++)
        keep[i] = i != 6;
    softmax(logits, N, 0.8, keep, p);
    s = make(0.8f, 100, 0, 9);
    check_frequencies(s, logits, N, p, DRAWS);
    nu_llm_sampler_free(s);

    /* top-p: sorted probabilities at t = 1 are (ids 1, 4) 0.2629 each, 5 0.1594, 0 0.0967, 2 0.0587,
     * 7 0.0356, 3 0.0131. top-p 0.6 keeps 1, 4, 5 (0.685 reaches 0.6; 0.526 does not). */
    for (int i = 0; i < N; i++)
        keep[i] = i != 6;
    softmax(logits, N, 1.0, keep, p);
    double mass = p[1] + p[4];
    assert_true(mass < 0.6 && mass + p[5] >= 0.6);
    for (int i = 0; i < N; i++)
        keep[i] = i == 1 || i == 4 || i == 5;
    softmax(logits, N, 1.0, keep, p);
    s = make(1.0f, 0, 0.6f, 10);
    check_frequencies(s, logits, N, p, DRAWS);
    nu_llm_sampler_free(s);
    /* top-k 5 then top-p 0.9 over the renormalised survivors (ids 1, 4, 5, 0, 2). */
    for (int i = 0; i < N; i++)
        keep[i] = i == 1 || i == 4 || i == 5 || i == 0 || i == 2;
    softmax(logits, N, 1.0, keep, p);
    double acc = 0;
    const int order[] = {1, 4, 5, 0, 2};
    int kept = 0;
    while (acc < 0.9)
        acc += p[order[kept++]];
    assert_int_equal(kept, 4); /* 0.932 with id 0; 0.840 without */
    for (int i = 0; i < N; i++)
        keep[i] = i == 1 || i == 4 || i == 5 || i == 0;
    softmax(logits, N, 1.0, keep, p);
    s = make(1.0f, 5, 0.9f, 11);
    check_frequencies(s, logits, N, p, DRAWS);
    nu_llm_sampler_free(s);

    /* A large vocabulary with top-k: only the k best ever come, about uniformly for equal logits. */
    enum { V = 5000 };
    float *big = malloc(V * sizeof *big);
    double *bp = malloc(V * sizeof *bp);
    bool *bk = malloc(V * sizeof *bk);
    assert_true(big && bp && bk);
    uint64_t rng = 5;
    for (int i = 0; i < V; i++)
        big[i] = (float)(nt_rand(&rng) % 1000) / 100.0f;
    for (int i = 0; i < 10; i++)
        big[(i * 487) % V] = 20.0f + (float)(i % 3) * 0.25f;
    for (int i = 0; i < V; i++)
        bk[i] = big[i] >= 20.0f;
    softmax(big, V, 1.0, bk, bp);
    s = make(1.0f, 10, 0, 12);
    check_frequencies(s, big, V, bp, DRAWS);
    nu_llm_sampler_free(s);
    free(big);
    free(bp);
    free(bk);
}

/* top-p over a large vocabulary, where the nucleus is large: 50,000 equal logits and top-p 0.5
 * keep ids 0 .. 24,999 (ties go to the lower id), uniformly. Also the time a draw takes at Llama
 * 3's vocabulary size. */
static void top_p_over_a_large_vocabulary(void **state)
{
    (void)state;
    enum { V = 50000, DRAWS = 4000 };
    float *flat = calloc(V, sizeof *flat);
    assert_non_null(flat);
    nu_llm_sampler *s = make(1.0f, 0, 0.5f, 77);
    int low = 0, high = 0;
    for (int i = 0; i < DRAWS; i++) {
        int32_t t = sample(s, flat, V);
        assert_true(t < V / 2);
        low += t < V / 4;
        high += t >= V / 4;
    }
    assert_true(abs(low - high) < 5 * 64 + 2); /* sd of the difference: sqrt(4000) */
    nu_llm_sampler_free(s);
    free(flat);

    enum { LLAMA3 = 128256 };
    float *logits = malloc(LLAMA3 * sizeof *logits);
    assert_non_null(logits);
    uint64_t rng = 3;
    for (int i = 0; i < LLAMA3; i++)
        logits[i] = (float)(nt_rand(&rng) % 100000) / 5000.0f; /* 0 .. 20 */
    const nu_llm_sampler_params kinds[] = {
        {.temperature = 0.8f}, {.temperature = 0.8f, .top_k = 40}, {.temperature = 0.8f, .top_p = 0.95f},
        {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f}};
    const char *names[] = {"temperature", "top-k 40", "top-p 0.95", "top-k 40 + top-p 0.95"};
    for (int k = 0; k < 4; k++) {
        LLM_OK(nu_llm_sampler_new(&kinds[k], &s));
        clock_t c0 = clock();
        for (int i = 0; i < 20; i++)
            sample(s, logits, LLAMA3);
        print_message("%s over %d logits: %.2f ms a draw\n", names[k], LLAMA3,
                      (double)(clock() - c0) * 1000 / CLOCKS_PER_SEC / 20);
        nu_llm_sampler_free(s);
    }
    free(logits);
}

static void seeds(void **state)
{
    (void)state;
    float logits[16];
    for (int i = 0; i < 16; i++)
        logits[i] = (float)((i * 7) % 5) * 0.3f;
    nu_llm_sampler *a = make(1.0f, 0, 0, 42), *b = make(1.0f, 0, 0, 42), *c = make(1.0f, 0, 0, 43);
    int32_t first[200];
    int differ = 0;
    for (int i = 0; i < 200; i++) {
        first[i] = sample(a, logits, 16);
        assert_int_equal(sample(b, logits, 16), first[i]);
        differ += sample(c, logits, 16) != first[i];
    }
    assert_true(differ > 50);
    /* Reseeding restarts the stream. */
    nu_llm_sampler_reseed(a, 42);
    for (int i = 0; i < 200; i++)
        assert_int_equal(sample(a, logits, 16), first[i]);
    nu_llm_sampler_reseed(NULL, 1);
    /* The stream is fixed (xoshiro256** from splitmix64): these tokens on every platform. Uniform
     * logits over 16 ids: token = floor(u * 16) of the PRNG's doubles. */
    float flat[16] = {0};
    nu_llm_sampler *z = make(1.0f, 0, 0, 0);
    int32_t got[8];
    for (int i = 0; i < 8; i++)
        got[i] = sample(z, flat, 16);
    /* Worked out apart from the library (a Python transcription of the published splitmix64 and
     * xoshiro256**; splitmix64 from 0 gives 0xe220a8397b1dcdaf first, its published value): with
     * 16 equal logits the token is the top 4 bits of each 64-bit output. */
    const int32_t stream[8] = {9, 11, 1, 6, 11, 15, 6, 8};
    assert_memory_equal(got, stream, sizeof stream);
    nu_llm_sampler *z2 = make(1.0f, 0, 0, 0);
    for (int i = 0; i < 8; i++)
        assert_int_equal(sample(z2, flat, 16), got[i]);
    nu_llm_sampler_free(a);
    nu_llm_sampler_free(b);
    nu_llm_sampler_free(c);
    nu_llm_sampler_free(z);
    nu_llm_sampler_free(z2);
}

static void checks(void **state)
{
    (void)state;
    nu_llm_sampler *s = (nu_llm_sampler *)&s;
    nu_llm_sampler_params bad[] = {
        {.temperature = -0.1f},    {.temperature = NAN},   {.temperature = INFINITY}, {.temperature = 2e6f},
        {.top_p = -0.01f},         {.top_p = 1.5f},        {.top_p = NAN},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s = (nu_llm_sampler *)&s;
        LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_sampler_new(&bad[i], &s));
        assert_null(s);
    }
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_sampler_new(NULL, NULL));

    s = make(1.0f, 0, 0, 1);
    float logits[4] = {0, 1, 2, 3};
    int32_t tok = 5;
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_sample(s, logits, 0, &tok));
    assert_int_equal(tok, -1);
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_sample(s, logits, 0x80000000u, &tok));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_sample(NULL, logits, 4, &tok));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_sample(s, NULL, 4, &tok));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_sample(s, logits, 4, NULL));
    logits[2] = NAN;
    tok = 5;
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_sample(s, logits, 4, &tok));
    assert_int_equal(tok, -1);
    assert_non_null(strstr(nu_llm_error_message(), "logit 2 is NaN"));
    logits[2] = INFINITY;
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_sample(s, logits, 4, &tok));
    assert_non_null(strstr(nu_llm_error_message(), "+inf"));
    float masked[3] = {-INFINITY, -INFINITY, -INFINITY};
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_sample(s, masked, 3, &tok));
    assert_non_null(strstr(nu_llm_error_message(), "-inf"));
    /* Greedy samplers check the logits too. */
    nu_llm_sampler *g = make(0, 0, 0, 0);
    logits[2] = NAN;
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_sample(g, logits, 4, &tok));
    nu_llm_sampler_free(g);
    /* Extreme temperatures work: tiny is greedy, huge is about uniform, and nothing overflows. */
    float wide[3] = {-3e38f, 0, 3e38f};
    nu_llm_sampler *cold = make(1e-30f, 0, 0, 1), *hot = make(1e6f, 0, 0, 1);
    assert_int_equal(sample(cold, wide, 3), 2);
    sample(hot, wide, 3);
    nu_llm_sampler_free(cold);
    nu_llm_sampler_free(hot);
    nu_llm_sampler_free(s);
    nu_llm_sampler_free(NULL);
}

static void every_allocation_fails_cleanly(void **state)
{
    (void)state;
    float logits[64];
    for (int i = 0; i < 64; i++)
        logits[i] = (float)(i % 9);
    bool finished = false;
    for (long k = 0; k < 20 && !finished; k++) {
        nu_llm__fail_after(k);
        nu_llm_sampler *s = NULL;
        int32_t tok = 3;
        nu_llm_sampler_params p = {.temperature = 1.0f, .top_k = 10, .top_p = 0.9f, .seed = 1};
        nu_status st = nu_llm_sampler_new(&p, &s);
        if (st == NU_OK) {
            st = nu_llm_sample(s, logits, 64, &tok);
            if (st == NU_OK) {
                assert_true(tok >= 0 && tok < 64);
                finished = true;
            } else {
                assert_int_equal(tok, -1);
            }
        } else {
            assert_null(s);
        }
        long failed = nu_llm__fail_after(-1);
        if (st != NU_OK) {
            assert_int_equal(st, NU_ERROR_HOST_OUT_OF_MEMORY);
            assert_true(failed > 0);
        }
        nu_llm_sampler_free(s);
    }
    assert_true(finished);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(greedy),
        cmocka_unit_test(temperature_top_k_top_p_distributions),
        cmocka_unit_test(top_p_over_a_large_vocabulary),
        cmocka_unit_test(seeds),
        cmocka_unit_test(checks),
        cmocka_unit_test(every_allocation_fails_cleanly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
