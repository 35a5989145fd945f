/* host.h: what nuvec takes from the host: every host (CPU) allocation goes through these, so
 * that tests can count live allocations and fail them one by one (SQLite's test_malloc.c);
 * the clock and the deadlines of timed condition-variable waits; environment switches. */
#ifndef NU_HOST_H
#define NU_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds: the clock of every timing and deadline in nuvec. */
uint64_t nu__now_ns(void);
/* Whether the environment variable is set to something other than "" or "0". */
bool nu__env_on(const char *name);
/* `ns` nanoseconds from now on `clock` (the clock the condition variable waits by), for
 * pthread_cond_timedwait. */
struct timespec nu__deadline_after(clockid_t clock, uint64_t ns);

void *nu__malloc(size_t size);
void *nu__calloc(size_t count, size_t size);
void *nu__realloc(void *ptr, size_t size);
void nu__free(void *ptr);
/* A copy of a NUL-terminated string. */
char *nu__strdup(const char *s);

/* Turns on counting and failure injection (off by default: they cost atomic operations on
 * every allocation). Tests turn it on before any other nuvec call. */
void nu__host_count(int on);
/* Failure injection, for tests (with counting on). After nu__host_fail_after(n), the next n allocations succeed
 * and the one after fails (and, with `sticky`, every one after it too); n < 0 turns failures
 * off. Applies to all threads. */
void nu__host_fail_after(long n, int sticky);
/* Allocations made so far (successful or not), and live ones (allocated, not freed). */
uint64_t nu__host_allocations(void);
int64_t nu__host_live(void);
/* Whether an allocation was failed since the last nu__host_fail_after. */
int nu__host_failed(void);

#endif
