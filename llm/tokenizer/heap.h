/* heap.h: the merge queue both BPE kinds use (spm.c, bpe.c): a 4-ary min-heap of 16-byte entries
 * ordered by one 64-bit key (the kind's priority, then the left symbol's position). Four children
 * to a node halve the depth of a binary heap and put siblings in one cache line: a word of a
 * million symbols keeps millions of entries, and their cache misses are most of its time. */
#ifndef NU_LLM_HEAP_H
#define NU_LLM_HEAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct nu_llm__entry {
    uint64_t key; /* smaller first; the low 32 bits are the left symbol's index */
    int32_t a, b; /* the kind's check that the entry is current */
} nu_llm__entry;

typedef struct nu_llm__heap {
    nu_llm__entry *e;
    size_t n;
} nu_llm__heap;

static inline void nu_llm__heap_down(nu_llm__heap *h, size_t i)
{
    nu_llm__entry x = h->e[i];
    for (;;) {
        size_t c = 4 * i + 1, best = c;
        if (c >= h->n)
            break;
        size_t end = c + 4 < h->n ? c + 4 : h->n;
        for (size_t k = c + 1; k < end; k++)
            if (h->e[k].key < h->e[best].key)
                best = k;
        if (h->e[best].key >= x.key)
            break;
        h->e[i] = h->e[best];
        i = best;
    }
    h->e[i] = x;
}

/* Orders entries e[0 .. n) already there (Floyd's: O(n)). */
static inline void nu_llm__heap_make(nu_llm__heap *h)
{
    for (size_t i = h->n / 4 + 1; i-- > 0;)
        if (i < h->n)
            nu_llm__heap_down(h, i);
}

static inline void nu_llm__heap_push(nu_llm__heap *h, nu_llm__entry x)
{
    size_t i = h->n++;
    while (i > 0) {
        size_t up = (i - 1) / 4;
        if (h->e[up].key <= x.key)
            break;
        h->e[i] = h->e[up];
        i = up;
    }
    h->e[i] = x;
}

static inline nu_llm__entry nu_llm__heap_pop(nu_llm__heap *h)
{
    nu_llm__entry top = h->e[0];
    h->e[0] = h->e[--h->n];
    if (h->n)
        nu_llm__heap_down(h, 0);
    return top;
}

#endif
