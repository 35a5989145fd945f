/* filters.h: what filters.c and filters_seq.c share. */
#ifndef NU_LLM_CHAT_FILTERS_H
#define NU_LLM_CHAT_FILTERS_H

#include "jinja.h"

/* markupsafe's soft_str: a string stays as it is (a Markup too), anything else becomes str(). */
jv f_soft_str(jstate *st, jv v);
/* An int argument (bools count), or a TypeError naming the filter. */
int64_t f_int_arg(jstate *st, const char *fname, jv v);
/* Python's upper ('u'), lower ('l') or per-character title ('t') of a string. */
jv f_case(jstate *st, jv s, int which);
/* str.splitlines() of p[0 .. len) (without the line ends). */
jlist *f_splitlines(jstate *st, const char *p, size_t len);
/* A builtin filter called by name (map). */
jv f_call_by_name(jstate *st, jv name, jv v, jargs *a);

/* The filters on sequences and mappings (filters_seq.c). */
jv fs_attr(jstate *st, jv v, jargs *a);
jv fs_batch(jstate *st, jv v, jargs *a);
jv fs_dictsort(jstate *st, jv v, jargs *a);
jv fs_first(jstate *st, jv v);
jv fs_last(jstate *st, jv v);
jv fs_items(jstate *st, jv v);
jv fs_join(jstate *st, jv v, jargs *a);
jv fs_map(jstate *st, jv v, jargs *a);
jv fs_minmax(jstate *st, jv v, jargs *a, bool max);
jv fs_select(jstate *st, jv v, jargs *a, bool select, bool attr);
jv fs_reverse(jstate *st, jv v);
jv fs_slice(jstate *st, jv v, jargs *a);
jv fs_sort(jstate *st, jv v, jargs *a);
jv fs_sum(jstate *st, jv v, jargs *a);
jv fs_unique(jstate *st, jv v, jargs *a);

#endif
