/* hash.c: see hash.h. */
#include "core/hash.h"

#include <string.h>

static uint64_t mix64(uint64_t h)
{
    h ^= h >> 32;
    h *= 0xd6e8feb86659fd93ull;
    h ^= h >> 32;
    h *= 0xd6e8feb86659fd93ull;
    h ^= h >> 32;
    return h;
}

uint64_t nu__hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    h ^= mix64(n + 0x9e3779b97f4a7c15ull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, b, 8);
        h = (h ^ mix64(w)) * 0x9e3779b97f4a7c15ull;
        h = (h << 27) | (h >> 37);
        b += 8;
        n -= 8;
    }
    uint64_t t = 0;
    if (n)
        memcpy(&t, b, n);
    h = (h ^ mix64(t ^ ((uint64_t)n << 56))) * 0x9e3779b97f4a7c15ull;
    return mix64(h);
}
