/* predicates.c: Jinja2's tests (`x is defined`, `x is string`, ...; jinja2/tests.py), all of them,
 * with Python's notions of number, mapping, sequence and iterable for nuvec's values. */
#include <stdio.h>
#include <string.h>

#include "jinja.h"

enum {
    T_ODD, T_EVEN, T_DIVISIBLEBY, T_DEFINED, T_UNDEFINED, T_FILTER, T_TEST, T_NONE, T_BOOLEAN, T_FALSE, T_TRUE,
    T_INTEGER, T_FLOAT, T_LOWER, T_UPPER, T_STRING, T_MAPPING, T_NUMBER, T_SEQUENCE, T_ITERABLE, T_CALLABLE,
    T_SAMEAS, T_ESCAPED, T_IN, T_EQ, T_NE, T_GT, T_GE, T_LT, T_LE, T_COUNT
};

static const struct { const char *name; int id; } TESTS[] = {
    {"odd", T_ODD}, {"even", T_EVEN}, {"divisibleby", T_DIVISIBLEBY}, {"defined", T_DEFINED},
    {"undefined", T_UNDEFINED}, {"filter", T_FILTER}, {"test", T_TEST}, {"none", T_NONE},
    {"boolean", T_BOOLEAN}, {"false", T_FALSE}, {"true", T_TRUE}, {"integer", T_INTEGER}, {"float", T_FLOAT},
    {"lower", T_LOWER}, {"upper", T_UPPER}, {"string", T_STRING}, {"mapping", T_MAPPING}, {"number", T_NUMBER},
    {"sequence", T_SEQUENCE}, {"iterable", T_ITERABLE}, {"callable", T_CALLABLE}, {"sameas", T_SAMEAS},
    {"escaped", T_ESCAPED}, {"in", T_IN}, {"==", T_EQ}, {"eq", T_EQ}, {"equalto", T_EQ}, {"!=", T_NE},
    {"ne", T_NE}, {">", T_GT}, {"gt", T_GT}, {"greaterthan", T_GT}, {"ge", T_GE}, {">=", T_GE}, {"<", T_LT},
    {"lt", T_LT}, {"lessthan", T_LT}, {"<=", T_LE}, {"le", T_LE},
};
#define NTESTS (sizeof TESTS / sizeof TESTS[0])

int j_test_find(const char *name)
{
    for (size_t i = 0; i < NTESTS; i++)
        if (!strcmp(TESTS[i].name, name))
            return (int)i;
    return -1;
}

bool j_test_jinja(const char *name)
{
    (void)name;
    return false; /* nuvec has every test Jinja2 has */
}

static jv one_arg(jstate *st, const char *name, jargs *a)
{
    jv v;
    j_bind(st, name, "other", a, &v, 1);
    return v;
}

/* Python's str.islower() / isupper(): some cased character, and none of the other case. */
static bool str_case(const jstr *s, bool lower)
{
    bool cased = false;
    const char *p = s->p, *end = p + s->len;
    while (p < end) {
        size_t n;
        uint32_t cp = j_utf8_next(p, end, &n);
        p += n;
        bool is_lower = j_is_lower(cp), is_upper = j_is_upper(cp), is_title = j_is_titlecase(cp);
        if (lower ? (is_upper || is_title) : (is_lower || is_title))
            return false;
        if (lower ? is_lower : is_upper)
            cased = true;
    }
    return cased;
}

static bool modulo_test(jstate *st, jv v, int64_t by, int64_t want)
{
    jv r = j_binop(st, OP_MOD, v, jv_int(by));
    return j_equal(st, r, jv_int(want));
}

bool j_test_apply(jstate *st, int tid, const char *name, jv v, jargs *a)
{
    j_charge(st, 1);
    int id = TESTS[tid].id;
    if (id != T_DIVISIBLEBY && id != T_SAMEAS && id != T_IN && id < T_EQ && (a->npos || a->nkw))
        j_error(st, "%s() takes 1 positional argument but %zu were given", name, 1 + a->npos + a->nkw);
    switch (id) {
    case T_ODD: return modulo_test(st, v, 2, 1);
    case T_EVEN: return modulo_test(st, v, 2, 0);
    case T_DIVISIBLEBY: {
        jv by = one_arg(st, name, a);
        return j_equal(st, j_binop(st, OP_MOD, v, by), jv_int(0));
    }
    case T_DEFINED: return v.t != JT_UNDEF;
    case T_UNDEFINED: return v.t == JT_UNDEF;
    case T_FILTER: return v.t == JT_STR && (j_filter_find(v.s->p) >= 0 || j_filter_jinja(v.s->p));
    case T_TEST: return v.t == JT_STR && j_test_find(v.s->p) >= 0;
    case T_NONE: return v.t == JT_NONE;
    case T_BOOLEAN: return v.t == JT_BOOL;
    case T_FALSE: return v.t == JT_BOOL && !v.b;
    case T_TRUE: return v.t == JT_BOOL && v.b;
    case T_INTEGER: return v.t == JT_INT;
    case T_FLOAT: return v.t == JT_FLOAT;
    case T_LOWER:
    case T_UPPER: {
        jv s = j_str_of(st, v);
        return str_case(s.s, id == T_LOWER);
    }
    case T_STRING: return v.t == JT_STR;
    case T_MAPPING: return v.t == JT_DICT;
    case T_NUMBER: return v.t == JT_INT || v.t == JT_FLOAT || v.t == JT_BOOL;
    case T_SEQUENCE:
        /* len() and __getitem__: str, list, tuple, range, dict, Undefined (which has both) */
        return v.t == JT_STR || v.t == JT_DICT || v.t == JT_UNDEF ||
               (v.t == JT_LIST && (v.l->kind == JL_LIST || v.l->kind == JL_TUPLE || v.l->kind == JL_RANGE));
    case T_ITERABLE: return v.t == JT_STR || v.t == JT_LIST || v.t == JT_DICT || v.t == JT_UNDEF || v.t == JT_LOOP;
    case T_CALLABLE:
        /* Undefined defines __call__ (to raise), so Python calls it callable */
        return v.t == JT_MACRO || v.t == JT_FUNC || (v.t == JT_OBJ && v.obj->kind == JO_JOINER) || v.t == JT_LOOP ||
               v.t == JT_UNDEF;
    case T_SAMEAS: {
        jv o = one_arg(st, name, a);
        if (v.t != o.t)
            return false;
        switch (v.t) {
        case JT_NONE: return true;
        case JT_BOOL: return v.b == o.b;
        case JT_INT:
            if (v.i >= -5 && v.i <= 256)
                return v.i == o.i; /* CPython's small ints are shared */
            j_unsupported(st, "'sameas' on integers (object identity)");
        case JT_FLOAT:
        case JT_STR: j_unsupported(st, "'sameas' on %s values (object identity)", j_type_name(v));
        case JT_UNDEF: return v.u == o.u;
        default: return v.m == o.m;
        }
    }
    case T_ESCAPED: return v.t == JT_STR && v.markup;
    case T_IN: return j_contains(st, one_arg(st, name, a), v);
    case T_EQ: return j_equal(st, v, one_arg(st, name, a));
    case T_NE: return !j_equal(st, v, one_arg(st, name, a));
    default: {
        jv o = one_arg(st, name, a);
        static const char *const sym[] = {[T_GT] = ">", [T_GE] = ">=", [T_LT] = "<", [T_LE] = "<="};
        int c = j_compare(st, v, o, sym[id]);
        if (c == 2)
            return false;
        return id == T_GT ? c > 0 : id == T_GE ? c >= 0 : id == T_LT ? c < 0 : c <= 0;
    }
    }
}
