/* unicode_data.h: the generated Unicode tables (unicode_data.c, from unicode_data.py). Ranges are
 * sorted, disjoint [lo, hi] pairs; a case run maps start + k * stride to itself + delta for k <
 * count; one-to-many mappings are listed apart (up to 3 code points, 0-padded). */
#ifndef NU_LLM_CHAT_UNICODE_DATA_H
#define NU_LLM_CHAT_UNICODE_DATA_H

#include <stddef.h>
#include <stdint.h>

typedef struct j_case_run {
    uint32_t start;
    uint16_t count;
    uint8_t stride;
    int32_t delta;
} j_case_run;

typedef struct j_case_multi {
    uint32_t cp;
    uint32_t out[3];
} j_case_multi;

extern const uint32_t j_nonprintable[][2], j_lower_prop[][2], j_upper_prop[][2], j_title_prop[][2], j_ignorable_prop[][2];
extern const size_t j_nonprintable_count, j_lower_prop_count, j_upper_prop_count, j_title_prop_count,
    j_ignorable_prop_count;
extern const j_case_run j_upper_runs[], j_lower_runs[], j_title_runs[];
extern const size_t j_upper_runs_count, j_lower_runs_count, j_title_runs_count;
extern const j_case_multi j_upper_multi[], j_lower_multi[], j_title_multi[];
extern const size_t j_upper_multi_count, j_lower_multi_count, j_title_multi_count;

#endif
