/* hash.h: a fast 64-bit hash of bytes (hash.c): the kernel cache's keys and its file's checksum.
 * Not cryptographic. */
#ifndef NU_CORE_HASH_H
#define NU_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

/* Folds `n` bytes into `h`, 8 at a time; the length takes part so that prefixes differ. */
uint64_t nu__hash_bytes(uint64_t h, const void *p, size_t n);

#endif
