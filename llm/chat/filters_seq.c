/* filters_seq.c: the filters on sequences and mappings, with jinja2/filters.py's semantics:
 * attribute paths ("a.b.0") looked up as getitem, case-insensitive keys by default for sort,
 * dictsort, unique, min and max, Python's stable sort, and generators where Jinja2 returns them
 * (map, select, reject, selectattr, rejectattr, unique, items, batch, slice, reverse): evaluated
 * at once here, but used up by iteration, without len() and always true, as in Python. */
#include <stdio.h>
#include <string.h>

#include "filters.h"

static jlist *gen(jstate *st) { return j_list_new(st, JL_GEN, 0); }

/* ---- Attribute getters (make_attrgetter) ------------------------------------------------------- */

typedef struct getter {
    jv parts[16];
    size_t n;
    bool lower;   /* ignore_case: strings lowered */
    jv dflt;      /* used for an Undefined result; JT_NONE: none */
} getter;

static bool all_digits(const char *p, size_t n)
{
    if (!n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            return false;
    return true;
}

/* A getter for `attribute` (a dotted path, an int or none), or for the piece p[0 .. len) of a
 * comma-separated list of paths (multi_init). */
static void getter_part(jstate *st, getter *g, jv attribute, const char *p, size_t len, bool lower, jv dflt)
{
    g->n = 0;
    g->lower = lower;
    g->dflt = dflt;
    if (attribute.t == JT_NONE)
        return;
    if (attribute.t != JT_STR) {
        g->parts[g->n++] = attribute;
        return;
    }
    for (;;) {
        const char *dot = memchr(p, '.', len);
        size_t n = dot ? (size_t)(dot - p) : len;
        if (g->n == 16)
            j_unsupported(st, "an attribute path of more than 16 parts");
        if (all_digits(p, n) && n < 18) {
            int64_t v = 0;
            for (size_t i = 0; i < n; i++)
                v = v * 10 + (p[i] - '0');
            g->parts[g->n++] = jv_int(v);
        } else {
            g->parts[g->n++] = j_str(st, p, n);
        }
        if (!dot)
            break;
        len -= n + 1;
        p = dot + 1;
    }
}

static void getter_init(jstate *st, getter *g, jv attribute, bool lower, jv dflt)
{
    bool str = attribute.t == JT_STR;
    getter_part(st, g, attribute, str ? attribute.s->p : NULL, str ? attribute.s->len : 0, lower, dflt);
}

static jv get(jstate *st, const getter *g, jv item)
{
    for (size_t i = 0; i < g->n; i++) {
        item = j_getitem(st, item, g->parts[i]);
        if (g->dflt.t != JT_NONE && item.t == JT_UNDEF)
            item = g->dflt;
    }
    if (g->lower && item.t == JT_STR)
        item = f_case(st, item, 'l');
    return item;
}

/* make_multi_attrgetter: "a,b" gives a list of both. */
typedef struct multi_getter {
    getter g[8];
    size_t n;
    bool multi;
} multi_getter;

static void multi_init(jstate *st, multi_getter *m, jv attribute, bool lower)
{
    m->n = 0;
    m->multi = attribute.t == JT_STR;
    if (!m->multi) {
        getter_init(st, &m->g[m->n++], attribute, lower, jv_none());
        return;
    }
    const char *p = attribute.s->p;
    size_t len = attribute.s->len;
    for (;;) {
        const char *comma = memchr(p, ',', len);
        size_t n = comma ? (size_t)(comma - p) : len;
        if (m->n == 8)
            j_unsupported(st, "sorting by more than 8 attributes");
        getter_part(st, &m->g[m->n++], attribute, p, n, lower, jv_none());
        if (!comma)
            break;
        len -= n + 1;
        p = comma + 1;
    }
}

static jv multi_get(jstate *st, const multi_getter *m, jv item)
{
    if (!m->multi)
        return get(st, &m->g[0], item);
    jlist *l = j_list_new(st, JL_LIST, m->n);
    for (size_t i = 0; i < m->n; i++)
        l->v[l->n++] = get(st, &m->g[i], item);
    return jv_listv(l);
}

/* ---- Sorting ------------------------------------------------------------------------------------------- */

/* Stable merge sort of items by keys, as Python's sorted(key=, reverse=) (only '<' compares). */
static void merge_sort(jstate *st, jv *items, jv *keys, size_t n, bool reverse, jv *tmp_i, jv *tmp_k)
{
    if (n < 2)
        return;
    size_t h = n / 2;
    merge_sort(st, items, keys, h, reverse, tmp_i, tmp_k);
    merge_sort(st, items + h, keys + h, n - h, reverse, tmp_i, tmp_k);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        j_charge(st, 1);
        /* take the right one first only when it sorts strictly before */
        bool right = reverse ? j_compare(st, keys[i], keys[j], "<") == -1 : j_compare(st, keys[j], keys[i], "<") == -1;
        if (right) {
            tmp_i[k] = items[j];
            tmp_k[k++] = keys[j++];
        } else {
            tmp_i[k] = items[i];
            tmp_k[k++] = keys[i++];
        }
    }
    while (i < h) {
        tmp_i[k] = items[i];
        tmp_k[k++] = keys[i++];
    }
    while (j < n) {
        tmp_i[k] = items[j];
        tmp_k[k++] = keys[j++];
    }
    memcpy(items, tmp_i, n * sizeof(jv));
    memcpy(keys, tmp_k, n * sizeof(jv));
}

static void sort_list(jstate *st, jlist *l, jv *keys, bool reverse)
{
    jv *ti = j_alloc_array(st, l->n ? l->n : 1, sizeof(jv)), *tk = j_alloc_array(st, l->n ? l->n : 1, sizeof(jv));
    merge_sort(st, l->v, keys, l->n, reverse, ti, tk);
}

jv fs_sort(jstate *st, jv v, jargs *a)
{
    jv arg[3];
    j_bind(st, "sort", "reverse=false,case_sensitive=false,attribute=none", a, arg, 3);
    jlist *l = j_to_list(st, v);
    multi_getter m;
    multi_init(st, &m, arg[2], !j_truthy(st, arg[1]));
    jv *keys = j_alloc_array(st, l->n ? l->n : 1, sizeof(jv));
    for (size_t i = 0; i < l->n; i++)
        keys[i] = multi_get(st, &m, l->v[i]);
    sort_list(st, l, keys, j_truthy(st, arg[0]));
    return jv_listv(l);
}

jv fs_dictsort(jstate *st, jv v, jargs *a)
{
    jv arg[3];
    j_bind(st, "dictsort", "case_sensitive=false,by='key',reverse=false", a, arg, 3);
    j_need_defined(st, v);
    int pos;
    if (arg[1].t == JT_STR && !strcmp(arg[1].s->p, "key"))
        pos = 0;
    else if (arg[1].t == JT_STR && !strcmp(arg[1].s->p, "value"))
        pos = 1;
    else
        j_error(st, "You can only sort by either \"key\" or \"value\"");
    if (v.t != JT_DICT)
        j_error(st, "'%s' object has no attribute 'items'", j_type_name(v));
    jlist *l = j_list_new(st, JL_LIST, v.d->n);
    jv *keys = j_alloc_array(st, v.d->n ? v.d->n : 1, sizeof(jv));
    bool lower = !j_truthy(st, arg[0]);
    for (size_t i = 0; i < v.d->n; i++) {
        l->v[l->n++] = j_tuple2(st, v.d->keys[i], v.d->vals[i]);
        jv k = pos ? v.d->vals[i] : v.d->keys[i];
        keys[i] = lower && k.t == JT_STR ? f_case(st, k, 'l') : k;
    }
    sort_list(st, l, keys, j_truthy(st, arg[2]));
    return jv_listv(l);
}

/* ---- Others ------------------------------------------------------------------------------------------------ */

jv fs_attr(jstate *st, jv v, jargs *a)
{
    jv arg[1];
    j_bind(st, "attr", "name", a, arg, 1);
    j_need_defined(st, v);
    if (arg[0].t != JT_STR)
        j_error(st, "attribute name must be string, not '%s'", j_type_name(arg[0]));
    bool found;
    jv r = j_attr_only(st, v, arg[0].s->p, &found);
    return found ? r : j_undef_attr(st, v, arg[0]);
}

jv fs_batch(jstate *st, jv v, jargs *a)
{
    jv arg[2];
    j_bind(st, "batch", "linecount,fill_with=none", a, arg, 2);
    int64_t count = f_int_arg(st, "batch", arg[0]);
    jlist *out = gen(st), *tmp = NULL;
    jiter it;
    j_iter_start(st, v, &it);
    jv x;
    while (j_iter_next(st, &it, &x)) {
        if (tmp && (int64_t)tmp->n == count) {
            j_list_push(st, out, jv_listv(tmp));
            tmp = NULL;
        }
        if (!tmp)
            tmp = j_list_new(st, JL_LIST, 0);
        j_list_push(st, tmp, x);
    }
    if (tmp) {
        if (arg[1].t != JT_NONE)
            while ((int64_t)tmp->n < count)
                j_list_push(st, tmp, arg[1]);
        j_list_push(st, out, jv_listv(tmp));
    }
    return jv_listv(out);
}

jv fs_slice(jstate *st, jv v, jargs *a)
{
    jv arg[2];
    j_bind(st, "slice", "slices,fill_with=none", a, arg, 2);
    int64_t slices = f_int_arg(st, "slice", arg[0]);
    jlist *seq = j_to_list(st, v), *out = gen(st);
    if (slices <= 0) {
        if (slices == 0 && seq->n)
            j_error(st, "integer division or modulo by zero");
        return jv_listv(out);
    }
    int64_t length = (int64_t)seq->n, per = length / slices, extra = length % slices, offset = 0;
    for (int64_t s = 0; s < slices; s++) {
        int64_t start = offset + s * per;
        if (s < extra)
            offset++;
        int64_t end = offset + (s + 1) * per;
        jlist *tmp = j_list_new(st, JL_LIST, 0);
        for (int64_t i = start; i < end && i < length; i++)
            j_list_push(st, tmp, seq->v[i]);
        if (arg[1].t != JT_NONE && s >= extra)
            j_list_push(st, tmp, arg[1]);
        j_list_push(st, out, jv_listv(tmp));
    }
    return jv_listv(out);
}

jv fs_first(jstate *st, jv v)
{
    jiter it;
    j_iter_start(st, v, &it);
    jv x;
    if (j_iter_next(st, &it, &x))
        return x;
    return j_undef_hint(st, "No first item, sequence was empty.");
}

jv fs_last(jstate *st, jv v)
{
    if (v.t == JT_LIST && v.l->kind == JL_GEN)
        j_error(st, "'generator' object is not reversible");
    if (v.t == JT_STR) {
        if (!v.s->len)
            return j_undef_hint(st, "No last item, sequence was empty.");
        size_t i = v.s->len - 1;
        while (i && ((unsigned char)v.s->p[i] & 0xC0) == 0x80)
            i--;
        return j_str(st, v.s->p + i, v.s->len - i);
    }
    jlist *l = j_to_list(st, v);
    if (!l->n)
        return j_undef_hint(st, "No last item, sequence was empty.");
    return l->v[l->n - 1];
}

jv fs_items(jstate *st, jv v)
{
    jlist *out = gen(st);
    if (v.t == JT_UNDEF)
        return jv_listv(out);
    if (v.t != JT_DICT)
        j_error(st, "Can only get item pairs from a mapping.");
    for (size_t i = 0; i < v.d->n; i++)
        j_list_push(st, out, j_tuple2(st, v.d->keys[i], v.d->vals[i]));
    return jv_listv(out);
}

jv fs_join(jstate *st, jv v, jargs *a)
{
    jv arg[2];
    j_bind(st, "join", "d='',attribute=none", a, arg, 2);
    getter g;
    getter_init(st, &g, arg[1], false, jv_none());
    jv sep = j_str_of(st, arg[0]);
    jbuf b = {0};
    jiter it;
    j_iter_start(st, v, &it);
    jv x;
    for (size_t i = 0; j_iter_next(st, &it, &x); i++) {
        if (i)
            j_buf_add(st, &b, sep.s->p, sep.s->len);
        j_to_str(st, &b, arg[1].t == JT_NONE ? x : get(st, &g, x));
    }
    j_charge(st, b.len / 64);
    return j_buf_str(st, &b);
}

/* map(attribute=..., default=...) or map('filter', args...). */
jv fs_map(jstate *st, jv v, jargs *a)
{
    jlist *out = gen(st);
    if (!j_truthy(st, v))
        return jv_listv(out);
    bool by_attr = !a->npos;
    getter g;
    jargs rest = {0};
    jv name = jv_none();
    if (by_attr) {
        jv attribute = jv_undef(NULL), dflt = jv_none();
        for (size_t i = 0; i < a->nkw; i++) {
            if (!strcmp(a->kwn[i], "attribute"))
                attribute = a->kwv[i];
            else if (!strcmp(a->kwn[i], "default"))
                dflt = a->kwv[i];
            else
                j_error(st, "Unexpected keyword argument '%s'", a->kwn[i]);
        }
        if (attribute.t == JT_UNDEF)
            j_error(st, "map requires a filter argument");
        getter_init(st, &g, attribute, false, dflt);
    } else {
        name = a->pos[0];
        rest = (jargs){.pos = a->pos + 1, .npos = a->npos - 1, .kwn = a->kwn, .kwv = a->kwv, .nkw = a->nkw};
    }
    jiter it;
    j_iter_start(st, v, &it);
    jv x;
    while (j_iter_next(st, &it, &x)) {
        j_charge(st, 1);
        j_list_push(st, out, by_attr ? get(st, &g, x) : f_call_by_name(st, name, x, &rest));
    }
    return jv_listv(out);
}

static bool call_test(jstate *st, jv name, jv v, jargs *a)
{
    if (name.t != JT_STR)
        j_error(st, "No test named %s.", "(not a string)");
    int id = j_test_find(name.s->p);
    if (id < 0) {
        if (j_test_jinja(name.s->p))
            j_unsupported(st, "the test '%s' is not supported", name.s->p);
        j_error(st, "No test named '%s'.", name.s->p);
    }
    return j_test_apply(st, id, name.s->p, v, a);
}

jv fs_select(jstate *st, jv v, jargs *a, bool select, bool attr)
{
    jlist *out = gen(st);
    if (!j_truthy(st, v))
        return jv_listv(out);
    size_t off = 0;
    getter g;
    if (attr) {
        if (!a->npos)
            j_error(st, "Missing parameter for attribute name");
        getter_init(st, &g, a->pos[0], false, jv_none());
        off = 1;
    }
    bool has_test = a->npos > off;
    jargs rest = {0};
    if (has_test)
        rest = (jargs){.pos = a->pos + off + 1, .npos = a->npos - off - 1, .kwn = a->kwn, .kwv = a->kwv, .nkw = a->nkw};
    jiter it;
    j_iter_start(st, v, &it);
    jv x;
    while (j_iter_next(st, &it, &x)) {
        j_charge(st, 1);
        jv y = attr ? get(st, &g, x) : x;
        bool r = has_test ? call_test(st, a->pos[off], y, &rest) : j_truthy(st, y);
        if (r == select)
            j_list_push(st, out, x);
    }
    return jv_listv(out);
}

jv fs_minmax(jstate *st, jv v, jargs *a, bool max)
{
    jv arg[2];
    j_bind(st, max ? "max" : "min", "case_sensitive=false,attribute=none", a, arg, 2);
    getter g;
    getter_init(st, &g, arg[1], !j_truthy(st, arg[0]), jv_none());
    jiter it;
    j_iter_start(st, v, &it);
    jv x, best, best_key;
    if (!j_iter_next(st, &it, &best))
        return j_undef_hint(st, "No aggregated item, sequence was empty.");
    best_key = get(st, &g, best);
    while (j_iter_next(st, &it, &x)) {
        jv k = get(st, &g, x);
        int c = j_compare(st, k, best_key, max ? ">" : "<");
        if (c != 2 && (max ? c > 0 : c < 0)) {
            best = x;
            best_key = k;
        }
    }
    return best;
}

jv fs_reverse(jstate *st, jv v)
{
    if (v.t == JT_STR) {
        jbuf b = {0};
        const char *p = v.s->p + v.s->len;
        while (p > v.s->p) {
            const char *q = p - 1;
            while (q > v.s->p && ((unsigned char)*q & 0xC0) == 0x80)
                q--;
            j_buf_add(st, &b, q, (size_t)(p - q));
            p = q;
        }
        return j_buf_str_markup(st, &b, v.markup);
    }
    bool is_gen = v.t == JT_LIST && v.l->kind == JL_GEN;
    if (v.t != JT_UNDEF && v.t != JT_LIST && v.t != JT_DICT)
        j_error(st, "argument must be iterable");
    jlist *l = j_to_list(st, v);
    for (size_t i = 0; i < l->n / 2; i++) {
        jv t = l->v[i];
        l->v[i] = l->v[l->n - 1 - i];
        l->v[l->n - 1 - i] = t;
    }
    if (!is_gen)
        l->kind = JL_GEN; /* reversed() is an iterator; a generator's fallback is a list */
    return jv_listv(l);
}

jv fs_sum(jstate *st, jv v, jargs *a)
{
    jv arg[2];
    j_bind(st, "sum", "attribute=none,start=0", a, arg, 2);
    getter g;
    getter_init(st, &g, arg[0], false, jv_none());
    jv total = arg[1];
    if (total.t == JT_STR)
        j_error(st, "sum() can't sum strings [use ''.join(seq) instead]");
    jiter it;
    j_iter_start(st, v, &it);
    jv x;
    while (j_iter_next(st, &it, &x))
        total = j_binop(st, OP_ADD, total, arg[0].t == JT_NONE ? x : get(st, &g, x));
    return total;
}

jv fs_unique(jstate *st, jv v, jargs *a)
{
    jv arg[2];
    j_bind(st, "unique", "case_sensitive=false,attribute=none", a, arg, 2);
    getter g;
    getter_init(st, &g, arg[1], !j_truthy(st, arg[0]), jv_none());
    jdict *seen = j_dict_new(st, 0);
    jlist *out = gen(st);
    jiter it;
    j_iter_start(st, v, &it);
    jv x;
    while (j_iter_next(st, &it, &x)) {
        jv k = get(st, &g, x);
        if (!j_dict_get(st, seen, k, NULL)) {
            j_dict_set(st, seen, k, jv_none());
            j_list_push(st, out, x);
        }
    }
    return jv_listv(out);
}
