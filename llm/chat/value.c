/* value.c: the arena, the values' constructors, and Python's semantics of truth, equality,
 * ordering, hashing, len() and iteration (see jinja.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h" /* llm/common.h */
#include "jinja.h"

/* ---- Arena -------------------------------------------------------------------------------- */

struct jchunk {
    jchunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

#define CHUNK_MIN (64u << 10)

/* Under AddressSanitizer every allocation gets a block of its exact size, so that ASan sees each
 * object's bounds (a shared chunk would hide an overflow into the next object). */
#if defined(__SANITIZE_ADDRESS__)
#define ARENA_EXACT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_EXACT 1
#endif
#endif

static jchunk *new_chunk(jstate *st, size_t csize)
{
    jarena *a = &st->arena;
    if (csize > SIZE_MAX - sizeof(jchunk))
        j_fail(st, NU_LLM_TEMPLATE_MEMORY, "an allocation of %zu bytes is too large", csize);
    if (a->limit && a->used + csize + sizeof(jchunk) > a->limit)
        j_fail(st, NU_LLM_TEMPLATE_LIMIT, "the memory limit (%zu bytes) is reached", a->limit);
    jchunk *n = nu_llm__malloc(sizeof(jchunk) + csize);
    if (!n)
        j_fail(st, NU_LLM_TEMPLATE_MEMORY, "out of host memory for %zu bytes", csize);
    n->size = csize;
    n->used = 0;
    a->used += csize + sizeof(jchunk);
    return n;
}

void *j_alloc(jstate *st, size_t size)
{
    jarena *a = &st->arena;
#ifdef ARENA_EXACT
    jchunk *e = new_chunk(st, size ? size : 1);
    e->next = a->head;
    a->head = e;
    return e->data;
#else
    size = (size + 15) & ~(size_t)15;
    if (!size)
        size = 16;
    jchunk *c = a->head;
    if (!c || c->size - c->used < size) {
        jchunk *n = new_chunk(st, size > CHUNK_MIN / 2 ? size : CHUNK_MIN);
        if (c && size > CHUNK_MIN / 2) {
            /* a big block goes behind the current chunk, which keeps serving small ones */
            n->next = c->next;
            c->next = n;
        } else {
            n->next = c;
            a->head = n;
        }
        c = n;
    }
    void *p = c->data + c->used;
    c->used += size;
    return p;
#endif
}

void *j_zalloc(jstate *st, size_t size)
{
    void *p = j_alloc(st, size);
    memset(p, 0, size);
    return p;
}

void *j_alloc_array(jstate *st, size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        j_fail(st, NU_LLM_TEMPLATE_LIMIT, "an array of %zu items is too large", count);
    return j_alloc(st, count * size);
}

void j_arena_free(jarena *a)
{
    for (jchunk *c = a->head, *next; c; c = next) {
        next = c->next;
        nu_llm__free(c);
    }
    a->head = NULL;
    a->used = 0;
}

/* ---- Failures and limits -------------------------------------------------------------------- */

_Noreturn void j_fail(jstate *st, nu_llm_template_failure kind, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->message, sizeof st->message, fmt, ap);
    va_end(ap);
    st->failure = kind;
    longjmp(*st->jmp, 1);
}

void j_charge(jstate *st, uint64_t n)
{
    jrender *r = st->r;
    if (!r)
        return;
    r->steps += n;
    if (r->steps > r->step_limit)
        j_fail(st, NU_LLM_TEMPLATE_LIMIT, "the step limit (%llu) is reached", (unsigned long long)r->step_limit);
}

void j_enter(jstate *st)
{
    if (++st->depth > st->depth_limit)
        j_fail(st, NU_LLM_TEMPLATE_LIMIT, "the nesting limit (%u) is reached", st->depth_limit);
}

/* ---- Strings -------------------------------------------------------------------------------- */

jstr *j_str_new(jstate *st, const char *p, size_t len)
{
    if (len > SIZE_MAX - sizeof(jstr) - 1)
        j_fail(st, NU_LLM_TEMPLATE_LIMIT, "a string of %zu bytes is too large", len);
    jstr *s = j_alloc(st, sizeof(jstr) + len + 1);
    s->len = len;
    if (len)
        memcpy(s->p, p, len);
    s->p[len] = 0;
    s->cps = j_utf8_count(s->p, len);
    return s;
}

jv j_str(jstate *st, const char *p, size_t len) { return jv_strv(j_str_new(st, p, len)); }
jv j_cstr(jstate *st, const char *s) { return j_str(st, s, strlen(s)); }

jv j_strf(jstate *st, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    return j_str(st, tmp, n < 0 ? 0 : (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* ---- Buffers -------------------------------------------------------------------------------- */

static void buf_grow(jstate *st, jbuf *b, size_t more)
{
    if (b->limit && b->len + more > b->limit)
        j_fail(st, NU_LLM_TEMPLATE_LIMIT, "the output limit (%zu bytes) is reached", b->limit);
    if (b->len + more <= b->cap)
        return;
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap < b->len + more)
        cap *= 2;
    char *p = j_alloc(st, cap);
    if (b->len)
        memcpy(p, b->p, b->len);
    b->p = p;
    b->cap = cap;
}

void j_buf_add(jstate *st, jbuf *b, const char *p, size_t len)
{
    if (!len)
        return;
    buf_grow(st, b, len);
    memcpy(b->p + b->len, p, len);
    b->len += len;
}

void j_buf_addc(jstate *st, jbuf *b, char c) { j_buf_add(st, b, &c, 1); }
void j_buf_adds(jstate *st, jbuf *b, const char *s) { j_buf_add(st, b, s, strlen(s)); }

void j_buf_addf(jstate *st, jbuf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        j_buf_add(st, b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

void j_buf_addcp(jstate *st, jbuf *b, uint32_t cp)
{
    char tmp[4];
    j_buf_add(st, b, tmp, j_utf8_put(tmp, cp));
}

jv j_buf_str(jstate *st, jbuf *b) { return j_str(st, b->p, b->len); }

jv j_buf_str_markup(jstate *st, jbuf *b, bool markup)
{
    jv v = j_str(st, b->p, b->len);
    v.markup = markup;
    return v;
}

/* ---- Lists and dicts -------------------------------------------------------------------------- */

jlist *j_list_new(jstate *st, jlk kind, size_t cap)
{
    jlist *l = j_zalloc(st, sizeof *l);
    l->kind = kind;
    if (cap) {
        l->v = j_alloc_array(st, cap, sizeof(jv));
        l->cap = cap;
    }
    return l;
}

void j_list_push(jstate *st, jlist *l, jv v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jv *nv = j_alloc_array(st, cap, sizeof(jv));
        if (l->n)
            memcpy(nv, l->v, l->n * sizeof(jv));
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

jv j_tuple2(jstate *st, jv a, jv b)
{
    jlist *t = j_list_new(st, JL_TUPLE, 2);
    t->v[0] = a;
    t->v[1] = b;
    t->n = 2;
    return jv_listv(t);
}

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t hash_bytes(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h;
}

/* Python's hash equivalence classes: numbers equal as == hash alike. */
static uint64_t hash_value(jstate *st, jv v)
{
    switch (v.t) {
    case JT_NONE: return 0x5bd1e995;
    case JT_BOOL: return mix64((uint64_t)v.b);
    case JT_INT: return mix64((uint64_t)v.i);
    case JT_FLOAT:
        if (v.f == floor(v.f) && fabs(v.f) < 9.2e18)
            return mix64((uint64_t)(int64_t)v.f);
        {
            uint64_t bits;
            memcpy(&bits, &v.f, 8);
            return mix64(bits);
        }
    case JT_STR: return hash_bytes(v.s->p, v.s->len);
    case JT_LIST:
        if (v.l->kind == JL_TUPLE) {
            j_enter(st);
            uint64_t h = 0x345678;
            for (size_t i = 0; i < v.l->n; i++)
                h = mix64(h ^ hash_value(st, v.l->v[i]));
            j_leave(st);
            return h;
        }
        if (v.l->kind == JL_GEN || v.l->kind == JL_RANGE)
            return mix64((uint64_t)(uintptr_t)v.l);
        break;
    case JT_DICT: break;
    case JT_UNDEF: return 0x7777;
    default: return mix64((uint64_t)(uintptr_t)v.m);
    }
    j_error(st, "unhashable type: '%s'", j_type_name(v));
}

static void dict_reindex(jstate *st, jdict *d, size_t icap)
{
    d->index = j_zalloc(st, icap * sizeof(uint32_t));
    d->icap = icap;
    for (size_t e = 0; e < d->n; e++) {
        size_t i = hash_value(st, d->keys[e]) & (icap - 1);
        while (d->index[i])
            i = (i + 1) & (icap - 1);
        d->index[i] = (uint32_t)(e + 1);
    }
}

jdict *j_dict_new(jstate *st, size_t cap)
{
    jdict *d = j_zalloc(st, sizeof *d);
    if (cap) {
        d->keys = j_alloc_array(st, cap, sizeof(jv));
        d->vals = j_alloc_array(st, cap, sizeof(jv));
        d->cap = cap;
    }
    return d;
}

/* The entry of `key`, or -1; *slot gets the index slot where it is or would go. */
static long dict_find(jstate *st, const jdict *d, jv key, uint64_t h, size_t *slot)
{
    if (!d->icap)
        return -1;
    size_t i = h & (d->icap - 1);
    while (d->index[i]) {
        size_t e = d->index[i] - 1;
        if (j_equal(st, d->keys[e], key)) {
            if (slot)
                *slot = i;
            return (long)e;
        }
        i = (i + 1) & (d->icap - 1);
    }
    if (slot)
        *slot = i;
    return -1;
}

void j_dict_set(jstate *st, jdict *d, jv key, jv val)
{
    uint64_t h = hash_value(st, key);
    long e = dict_find(st, d, key, h, NULL);
    if (e >= 0) {
        d->vals[e] = val;
        return;
    }
    if (d->n >= UINT32_MAX - 1)
        j_fail(st, NU_LLM_TEMPLATE_LIMIT, "a dict of %zu items is too large", d->n);
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        jv *k = j_alloc_array(st, cap, sizeof(jv)), *v = j_alloc_array(st, cap, sizeof(jv));
        if (d->n) {
            memcpy(k, d->keys, d->n * sizeof(jv));
            memcpy(v, d->vals, d->n * sizeof(jv));
        }
        d->keys = k;
        d->vals = v;
        d->cap = cap;
    }
    d->keys[d->n] = key;
    d->vals[d->n] = val;
    d->n++;
    if (d->n * 2 > d->icap) {
        size_t icap = d->icap ? d->icap : 8;
        while (d->n * 2 > icap)
            icap *= 2;
        dict_reindex(st, d, icap);
    } else {
        size_t slot;
        dict_find(st, d, key, h, &slot);
        d->index[slot] = (uint32_t)d->n;
    }
}

bool j_dict_get(jstate *st, const jdict *d, jv key, jv *val)
{
    long e = dict_find(st, d, key, hash_value(st, key), NULL);
    if (e < 0)
        return false;
    if (val)
        *val = d->vals[e];
    return true;
}

void j_dict_clear(jdict *d)
{
    d->n = 0;
    if (d->icap)
        memset(d->index, 0, d->icap * sizeof(uint32_t));
}

bool j_dict_gets(const jdict *d, const char *key, size_t len, jv *val)
{
    if (!d->icap)
        return false;
    size_t i = hash_bytes(key, len) & (d->icap - 1);
    while (d->index[i]) {
        size_t e = d->index[i] - 1;
        jv k = d->keys[e];
        if (k.t == JT_STR && k.s->len == len && !memcmp(k.s->p, key, len)) {
            if (val)
                *val = d->vals[e];
            return true;
        }
        i = (i + 1) & (d->icap - 1);
    }
    return false;
}

/* ---- Undefined -------------------------------------------------------------------------------- */

jundef *j_undef_new(jstate *st, const char *hint, jv obj, bool has_obj, jv name, jux exc)
{
    jundef *u = j_zalloc(st, sizeof *u);
    u->hint = hint;
    u->obj_type = has_obj ? j_obj_type(st, obj) : NULL;
    u->name = name;
    u->exc = (uint8_t)exc;
    return u;
}

jv j_undef_name(jstate *st, const char *name)
{
    return jv_undef(j_undef_new(st, NULL, jv_none(), false, j_cstr(st, name), JU_UNDEFINED));
}

jv j_undef_hint(jstate *st, const char *hint)
{
    size_t n = strlen(hint);
    char *h = j_alloc(st, n + 1);
    memcpy(h, hint, n + 1);
    return jv_undef(j_undef_new(st, h, jv_none(), false, jv_none(), JU_UNDEFINED));
}

jv j_undef_attr(jstate *st, jv obj, jv name)
{
    return jv_undef(j_undef_new(st, NULL, obj, true, name, JU_UNDEFINED));
}

_Noreturn void j_undef_raise(jstate *st, jv v)
{
    jundef *u = v.u;
    if (u->hint)
        j_error(st, "%s", u->hint);
    jbuf b = {0};
    j_repr(st, &b, u->name);
    j_buf_addc(st, &b, 0);
    if (!u->obj_type)
        j_error(st, "%s is undefined", b.p);
    if (u->name.t != JT_STR)
        j_error(st, "%s has no element %s", u->obj_type, b.p);
    j_error(st, "'%s' has no attribute %s", u->obj_type, b.p);
}

/* ---- Types ------------------------------------------------------------------------------------ */

const char *j_type_name(jv v)
{
    switch (v.t) {
    case JT_UNDEF: return "Undefined";
    case JT_NONE: return "NoneType";
    case JT_BOOL: return "bool";
    case JT_INT: return "int";
    case JT_FLOAT: return "float";
    case JT_STR: return v.markup ? "Markup" : "str";
    case JT_LIST:
        switch (v.l->kind) {
        case JL_TUPLE: return "tuple";
        case JL_ITEMS: return "dict_items";
        case JL_KEYS: return "dict_keys";
        case JL_VALUES: return "dict_values";
        case JL_RANGE: return "range";
        case JL_GEN: return "generator";
        default: return "list";
        }
    case JT_DICT: return "dict";
    case JT_NS: return "Namespace";
    case JT_MACRO: return "Macro";
    case JT_FUNC: return v.fn->id == JF_METHOD ? "builtin_function_or_method" : "function";
    case JT_LOOP: return "LoopContext";
    case JT_SLICE: return "slice";
    case JT_OBJ: return v.obj->kind == JO_CYCLER ? "Cycler" : "Joiner";
    }
    return "object";
}

const char *j_obj_type(jstate *st, jv v)
{
    (void)st;
    switch (v.t) {
    case JT_NONE: return "None";
    case JT_STR: return v.markup ? "markupsafe.Markup object" : "str object";
    case JT_NS: return "jinja2.utils.Namespace object";
    case JT_MACRO: return "jinja2.runtime.Macro object";
    case JT_LOOP: return "jinja2.runtime.LoopContext object";
    case JT_OBJ: return v.obj->kind == JO_CYCLER ? "jinja2.utils.Cycler object" : "jinja2.utils.Joiner object";
    case JT_UNDEF: return "jinja2.runtime.Undefined object";
    case JT_BOOL: return "bool object";
    case JT_INT: return "int object";
    case JT_FLOAT: return "float object";
    case JT_DICT: return "dict object";
    case JT_FUNC: return "builtin_function_or_method object";
    case JT_SLICE: return "slice object";
    case JT_LIST:
        switch (v.l->kind) {
        case JL_TUPLE: return "tuple object";
        case JL_ITEMS: return "dict_items object";
        case JL_KEYS: return "dict_keys object";
        case JL_VALUES: return "dict_values object";
        case JL_RANGE: return "range object";
        case JL_GEN: return "generator object";
        default: return "list object";
        }
    }
    return "object";
}

/* ---- Truth, equality, order ------------------------------------------------------------------ */

bool j_truthy(jstate *st, jv v)
{
    switch (v.t) {
    case JT_UNDEF:
    case JT_NONE: return false;
    case JT_BOOL: return v.b;
    case JT_INT: return v.i != 0;
    case JT_FLOAT: return v.f != 0;
    case JT_STR: return v.s->len != 0;
    case JT_LIST: return v.l->kind == JL_GEN || v.l->n != 0;
    case JT_DICT: return v.d->n != 0;
    case JT_LOOP: return j_len(st, v) != 0;
    default: return true;
    }
}

static bool is_num(jv v) { return v.t == JT_BOOL || v.t == JT_INT || v.t == JT_FLOAT; }
static int64_t as_i(jv v) { return v.t == JT_BOOL ? v.b : v.i; }

/* Exact comparison of an int with a float: -1, 0, 1, or 2 for unordered (NaN). */
static int cmp_int_float(int64_t i, double f)
{
    if (isnan(f))
        return 2;
    if (f >= 9223372036854775808.0)
        return -1;
    if (f < -9223372036854775808.0)
        return 1;
    double fl = floor(f);
    int64_t fi = (int64_t)fl;
    if (i < fi)
        return -1;
    if (i > fi)
        return 1;
    return fl == f ? 0 : -1;
}

/* -1, 0, 1, or 2 (unordered) for two numbers. */
static int num_cmp(jv a, jv b)
{
    if (a.t != JT_FLOAT && b.t != JT_FLOAT) {
        int64_t x = as_i(a), y = as_i(b);
        return x < y ? -1 : x > y;
    }
    if (a.t == JT_FLOAT && b.t == JT_FLOAT) {
        if (isnan(a.f) || isnan(b.f))
            return 2;
        return a.f < b.f ? -1 : a.f > b.f;
    }
    if (a.t == JT_FLOAT) {
        int c = cmp_int_float(as_i(b), a.f);
        return c == 2 ? 2 : -c;
    }
    return cmp_int_float(as_i(a), b.f);
}

static bool is_seq_kind(const jlist *l) { return l->kind == JL_LIST || l->kind == JL_TUPLE || l->kind == JL_RANGE; }

bool j_equal(jstate *st, jv a, jv b)
{
    if (is_num(a) && is_num(b))
        return num_cmp(a, b) == 0;
    if (a.t != b.t)
        return false;
    switch (a.t) {
    case JT_UNDEF:
    case JT_NONE: return true;
    case JT_STR: return a.s->len == b.s->len && !memcmp(a.s->p, b.s->p, a.s->len);
    case JT_LIST: {
        const jlist *x = a.l, *y = b.l;
        if (x == y)
            return true;
        bool xs = x->kind == JL_RANGE ? true : false, ys = y->kind == JL_RANGE;
        if (!is_seq_kind(x) || !is_seq_kind(y))
            return false;
        if ((x->kind == JL_TUPLE) != (y->kind == JL_TUPLE) || xs != ys || x->n != y->n)
            return false;
        j_enter(st);
        bool eq = true;
        for (size_t i = 0; eq && i < x->n; i++)
            eq = j_equal(st, j_list_at(x, i), j_list_at(y, i));
        j_leave(st);
        return eq;
    }
    case JT_DICT: {
        if (a.d == b.d)
            return true;
        if (a.d->n != b.d->n)
            return false;
        j_enter(st);
        bool eq = true;
        for (size_t i = 0; eq && i < a.d->n; i++) {
            jv other;
            eq = j_dict_get(st, b.d, a.d->keys[i], &other) && j_equal(st, a.d->vals[i], other);
        }
        j_leave(st);
        return eq;
    }
    case JT_SLICE:
        return j_equal(st, a.sl->a, b.sl->a) && j_equal(st, a.sl->b, b.sl->b) && j_equal(st, a.sl->c, b.sl->c);
    default: return a.m == b.m;
    }
}

static _Noreturn void cmp_type_error(jstate *st, const char *op, jv a, jv b)
{
    j_error(st, "'%s' not supported between instances of '%s' and '%s'", op, j_type_name(a), j_type_name(b));
}

/* Sequence comparison as Python: the first unequal pair decides, else the lengths. */
static int seq_cmp(jstate *st, const jlist *x, const jlist *y, const char *op, int *unordered)
{
    size_t n = x->n < y->n ? x->n : y->n;
    for (size_t i = 0; i < n; i++) {
        if (j_equal(st, x->v[i], y->v[i]))
            continue;
        if (is_num(x->v[i]) && is_num(y->v[i])) {
            int c = num_cmp(x->v[i], y->v[i]);
            if (c == 2)
                *unordered = 1;
            return c;
        }
        return j_compare(st, x->v[i], y->v[i], op);
    }
    return x->n < y->n ? -1 : x->n > y->n;
}

int j_compare(jstate *st, jv a, jv b, const char *op)
{
    if (a.t == JT_UNDEF)
        j_undef_raise(st, a);
    if (b.t == JT_UNDEF)
        j_undef_raise(st, b);
    if (is_num(a) && is_num(b)) {
        int c = num_cmp(a, b);
        return c == 2 ? 2 : c;
    }
    if (a.t == JT_STR && b.t == JT_STR) {
        size_t n = a.s->len < b.s->len ? a.s->len : b.s->len;
        int c = memcmp(a.s->p, b.s->p, n);
        if (c)
            return c < 0 ? -1 : 1;
        return a.s->len < b.s->len ? -1 : a.s->len > b.s->len;
    }
    if (a.t == JT_LIST && b.t == JT_LIST && (a.l->kind == JL_LIST || a.l->kind == JL_TUPLE) &&
        a.l->kind == b.l->kind) {
        j_enter(st);
        int unordered = 0;
        int c = seq_cmp(st, a.l, b.l, op, &unordered);
        j_leave(st);
        return unordered ? 2 : c;
    }
    cmp_type_error(st, op, a, b);
}

/* ---- len() and iteration -------------------------------------------------------------------- */

size_t j_len(jstate *st, jv v)
{
    switch (v.t) {
    case JT_UNDEF: return 0;
    case JT_STR: return v.s->cps;
    case JT_LIST:
        if (v.l->kind == JL_GEN)
            break;
        return v.l->n;
    case JT_DICT: return v.d->n;
    case JT_LOOP: {
        bool found;
        jv n = j_loop_attr(st, v.loop, "length", &found);
        return (size_t)n.i;
    }
    default: break;
    }
    j_error(st, "object of type '%s' has no len()", j_type_name(v));
}

void j_iter_start(jstate *st, jv v, jiter *it)
{
    it->src = v;
    it->i = 0;
    switch (v.t) {
    case JT_UNDEF:
    case JT_STR:
    case JT_LIST:
    case JT_DICT: return;
    default: j_error(st, "'%s' object is not iterable", j_type_name(v));
    }
}

bool j_iter_next(jstate *st, jiter *it, jv *out)
{
    jv v = it->src;
    switch (v.t) {
    case JT_STR: {
        if (it->i >= v.s->len)
            return false;
        size_t n;
        j_utf8_next(v.s->p + it->i, v.s->p + v.s->len, &n);
        *out = j_str(st, v.s->p + it->i, n);
        out->markup = 0;
        it->i += n;
        return true;
    }
    case JT_LIST:
        if (v.l->kind == JL_GEN) {
            if (v.l->pos >= v.l->n)
                return false;
            *out = v.l->v[v.l->pos++];
            return true;
        }
        if (it->i >= v.l->n)
            return false;
        *out = j_list_at(v.l, it->i++);
        return true;
    case JT_DICT:
        if (it->i >= v.d->n)
            return false;
        *out = v.d->keys[it->i++];
        return true;
    default: return false;
    }
}

jlist *j_to_list(jstate *st, jv v)
{
    jiter it;
    j_iter_start(st, v, &it);
    jlist *l = j_list_new(st, JL_LIST, v.t == JT_LIST ? v.l->n : v.t == JT_DICT ? v.d->n : 0);
    jv x;
    while (j_iter_next(st, &it, &x))
        j_list_push(st, l, x);
    return l;
}
