/* common.c: llm failure messages and host allocation (see common.h). */
#include "common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nuvec_llm.h"

static _Thread_local char message[1024];

/* Allocations left before injected failures start; negative: never. */
static atomic_long fail_countdown = -1;
static atomic_long failed;

nu_status nu_llm__fail(nu_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    return status;
}

const char *nu_llm_error_message(void)
{
    return message;
}

long nu_llm__fail_after(long n)
{
    long was = atomic_exchange(&failed, 0);
    atomic_store(&fail_countdown, n);
    return was;
}

/* Whether this allocation is to fail (failure injection for tests). */
static int injected_failure(void)
{
    long left = atomic_load_explicit(&fail_countdown, memory_order_relaxed);
    for (;;) {
        if (left < 0)
            return 0;
        if (left == 0)
            break;
        if (atomic_compare_exchange_weak(&fail_countdown, &left, left - 1))
            return 0;
    }
    atomic_fetch_add(&failed, 1);
    return 1;
}

void *nu_llm__malloc(size_t size)
{
    if (injected_failure())
        return NULL;
    return malloc(size ? size : 1);
}

void *nu_llm__calloc(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        return NULL;
    if (injected_failure())
        return NULL;
    return calloc(count ? count : 1, size ? size : 1);
}

void *nu_llm__malloc_array(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        return NULL;
    return nu_llm__malloc(count * size);
}

void nu_llm__free(void *ptr)
{
    free(ptr);
}

nu_status nu_llm__read_text(const char *path, char **out, size_t *len)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return nu_llm__fail(NU_ERROR_IO, "cannot open %s: %s", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, cap = 0;
    nu_status st = NU_OK;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            size_t ncap = cap ? cap * 2 : 8192;
            char *nb = ncap > (64u << 20) ? NULL : nu_llm__malloc(ncap);
            if (!nb) {
                st = ncap > (64u << 20) ? nu_llm__fail(NU_ERROR_FORMAT, "%s is larger than 64 MiB", path)
                                        : nu_llm__fail(NU_ERROR_HOST_OUT_OF_MEMORY, "no memory for %s", path);
                break;
            }
            if (buf)
                memcpy(nb, buf, n);
            nu_llm__free(buf);
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + n, 1, 4096, f);
        n += got;
        if (got < 4096)
            break;
    }
    if (st == NU_OK && ferror(f))
        st = nu_llm__fail(NU_ERROR_IO, "cannot read %s", path);
    fclose(f);
    if (st != NU_OK) {
        nu_llm__free(buf);
        return st;
    }
    buf[n] = 0;
    *out = buf;
    if (len)
        *len = n;
    return NU_OK;
}

int32_t nu_llm__argmax(const float *x, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return (int32_t)best;
}
