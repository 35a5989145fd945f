/* common.h: what every module of the llm component shares: failure messages (nu_llm_error_message),
 * host allocation and the CPU's argmax of logits. The component sees only nuvec's public headers, so it cannot use nuvec's
 * own nu__fail and nu__malloc (src/core); these play their part here, including the failure
 * injection that tests use to fail allocations one by one. */
#ifndef NU_LLM_COMMON_H
#define NU_LLM_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "nuvec/status.h"

/* Returns from the calling function with call's status where it is not NU_OK. */
#define NU_LLM_TRY(call)                                                                                           \
    do {                                                                                                           \
        nu_status st_ = (call);                                                                                    \
        if (st_ != NU_OK)                                                                                          \
            return st_;                                                                                            \
    } while (0)

/* Records `fmt` as this thread's last llm failure message; returns `status`. */
nu_status nu_llm__fail(nu_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void *nu_llm__malloc(size_t size);
/* count * size bytes, zeroed; NULL when the product overflows. */
void *nu_llm__calloc(size_t count, size_t size);
/* count * size bytes (uninitialised); NULL when the product overflows. */
void *nu_llm__malloc_array(size_t count, size_t size);
void nu_llm__free(void *ptr);

/* The whole file at `path`, NUL-terminated, in *out (nu_llm__free it); *len (may be NULL) its
 * length. NU_ERROR_IO naming the path; files over 64 MiB are NU_ERROR_FORMAT. */
nu_status nu_llm__read_text(const char *path, char **out, size_t *len);

/* The index of the largest of x[0 .. n) (the lowest of equal largest ones, as the GPU's argmax and
 * nu_llm_sample at temperature 0 take it); 0 for n = 0. */
int32_t nu_llm__argmax(const float *x, uint32_t n);

/* Tests: after nu_llm__fail_after(n) the next n allocations succeed and every later one fails,
 * until nu_llm__fail_after(-1) (the default). Applies to all threads. Returns how many allocations
 * were failed since the previous call. */
long nu_llm__fail_after(long n);

#endif
