/* filters.c: the filter table, Python-style argument binding, and the filters on strings and
 * numbers (jinja2/filters.py's semantics; tojson is transformers' json.dumps). The filters on
 * sequences are in filters_seq.c. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filters.h"

/* ---- Binding ---------------------------------------------------------------------------------- */

static jv parse_default(jstate *st, const char *d, size_t n)
{
    if (n == 4 && !memcmp(d, "none", 4))
        return jv_none();
    if (n == 4 && !memcmp(d, "true", 4))
        return jv_bool(true);
    if (n == 5 && !memcmp(d, "false", 5))
        return jv_bool(false);
    if (n >= 2 && d[0] == '\'')
        return j_str(st, d + 1, n - 2);
    if (n && (d[0] == '-' || (d[0] >= '0' && d[0] <= '9'))) {
        char tmp[32];
        memcpy(tmp, d, n < 31 ? n : 31);
        tmp[n < 31 ? n : 31] = 0;
        if (strchr(tmp, '.'))
            return jv_float(strtod(tmp, NULL));
        return jv_int(strtoll(tmp, NULL, 10));
    }
    return jv_undef(NULL); /* "!": required */
}

void j_bind(jstate *st, const char *fname, const char *spec, jargs *args, jv *out, size_t k)
{
    const char *names[16];
    size_t lens[16], n = 0;
    const char *p = spec;
    while (*p && n < 16 && n < k) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        names[n] = p;
        lens[n] = eq ? (size_t)(eq - p) : len;
        out[n] = eq ? parse_default(st, eq + 1, len - (size_t)(eq + 1 - p)) : jv_undef(NULL);
        n++;
        p = e ? e + 1 : p + len;
    }
    bool set[16] = {0};
    if (args->npos > n)
        j_error(st, "%s() takes at most %zu argument(s) (%zu given)", fname, n, args->npos);
    for (size_t i = 0; i < args->npos; i++) {
        out[i] = args->pos[i];
        set[i] = true;
    }
    for (size_t a = 0; a < args->nkw; a++) {
        size_t i = 0;
        for (; i < n; i++)
            if (strlen(args->kwn[a]) == lens[i] && !memcmp(args->kwn[a], names[i], lens[i]))
                break;
        if (i == n)
            j_error(st, "%s() got an unexpected keyword argument '%s'", fname, args->kwn[a]);
        if (set[i])
            j_error(st, "%s() got multiple values for argument '%s'", fname, args->kwn[a]);
        out[i] = args->kwv[a];
        set[i] = true;
    }
    for (size_t i = 0; i < n; i++)
        if (!set[i] && out[i].t == JT_UNDEF && !out[i].u)
            j_error(st, "%s() missing required argument '%.*s'", fname, (int)lens[i], names[i]);
}

/* ---- Helpers ------------------------------------------------------------------------------------ */

jv f_soft_str(jstate *st, jv v)
{
    if (v.t == JT_STR)
        return v;
    return j_str_of(st, v);
}

int64_t f_int_arg(jstate *st, const char *fname, jv v)
{
    if (v.t == JT_INT)
        return v.i;
    if (v.t == JT_BOOL)
        return v.b;
    j_error(st, "%s: an integer is required, not '%s'", fname, j_type_name(v));
}

/* Python's str.lower() / upper() of a string. */
jv f_case(jstate *st, jv s, int which)
{
    jbuf b = {0};
    const char *p = s.s->p, *end = p + s.s->len;
    j_charge(st, s.s->len / 64);
    while (p < end) {
        size_t n;
        uint32_t cp = j_utf8_next(p, end, &n), out[3];
        int k = which == 'u'   ? j_case_upper(cp, out)
                : which == 'l' ? j_case_lower_at(s.s->p, p, end, out)
                               : j_case_title(cp, out);
        for (int i = 0; i < k; i++)
            j_buf_addcp(st, &b, out[i]);
        p += n;
    }
    return j_buf_str_markup(st, &b, s.markup);
}

/* ---- String filters ----------------------------------------------------------------------------- */

static jv f_capitalize(jstate *st, jv s)
{
    s = f_soft_str(st, s);
    return j_method_call(st, s, "capitalize", &(jargs){0});
}

static bool title_sep(uint32_t cp)
{
    return cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || j_isspace(cp);
}

/* Jinja2's title: the text split into runs by [-\s({\[<]+ and the runs between; each run's first
 * character upper-cased and the rest lower-cased (as a string of its own, for the sigma rule). */
static jv f_title(jstate *st, jv s)
{
    s = f_soft_str(st, s);
    jbuf b = {0};
    const char *p = s.s->p, *end = p + s.s->len;
    while (p < end) {
        size_t n;
        bool sep = title_sep(j_utf8_next(p, end, &n));
        const char *q = p + n;
        while (q < end && title_sep(j_utf8_next(q, end, &n)) == sep)
            q += n;
        uint32_t out[3];
        uint32_t first = j_utf8_next(p, q, &n);
        int k = j_case_upper(first, out);
        for (int i = 0; i < k; i++)
            j_buf_addcp(st, &b, out[i]);
        const char *rest = p + n;
        for (const char *r = rest; r < q; r += n) {
            j_utf8_next(r, q, &n);
            k = j_case_lower_at(rest, r, q, out);
            for (int i = 0; i < k; i++)
                j_buf_addcp(st, &b, out[i]);
        }
        p = q;
    }
    return j_buf_str(st, &b);
}

/* A filter that is str method `method` with one argument (trim is strip, center is center). */
static jv via_method(jstate *st, jv v, const char *fname, const char *spec, const char *method, jargs *a)
{
    jv arg[1];
    j_bind(st, fname, spec, a, arg, 1);
    jargs m = {.pos = arg, .npos = 1};
    return j_method_call(st, f_soft_str(st, v), method, &m);
}

static jv f_default(jstate *st, jv v, jargs *a)
{
    jv arg[2];
    j_bind(st, "default", "default_value='',boolean=false", a, arg, 2);
    if (v.t == JT_UNDEF || (j_truthy(st, arg[1]) && !j_truthy(st, v)))
        return arg[0];
    return v;
}

static jv f_escape(jstate *st, jv v, bool force)
{
    if (v.t == JT_STR && v.markup && !force)
        return v;
    jv s = j_str_of(st, v);
    jbuf b = {0};
    j_html_escape(st, &b, s.s->p, s.s->len);
    jv out = j_buf_str(st, &b);
    out.markup = 1;
    return out;
}

/* Python's float() of a string: whitespace around, '_' between digits, inf / nan words. */
static bool parse_float(const jstr *s, double *out)
{
    const char *p = s->p, *end = s->p + s->len;
    while (p < end && j_isspace((unsigned char)*p))
        p++;
    while (end > p && j_isspace((unsigned char)end[-1]))
        end--;
    char tmp[128];
    size_t n = 0;
    for (const char *q = p; q < end; q++) {
        if (*q == '_') {
            if (q == p || q + 1 == end || !(q[-1] >= '0' && q[-1] <= '9') || !(q[1] >= '0' && q[1] <= '9'))
                return false;
            continue;
        }
        if (n + 1 >= sizeof tmp || (unsigned char)*q >= 0x80)
            return false;
        tmp[n++] = *q;
    }
    tmp[n] = 0;
    if (!n)
        return false;
    const char *t = tmp + (tmp[0] == '+' || tmp[0] == '-');
    if (!strcasecmp(t, "inf") || !strcasecmp(t, "infinity") || !strcasecmp(t, "nan")) {
        double v = (t[0] | 32) == 'n' ? NAN : INFINITY;
        *out = tmp[0] == '-' ? -v : v;
        return true;
    }
    for (const char *q = t; *q; q++)
        if (!strchr("0123456789.eE+-", *q))
            return false;
    char *stop;
    errno = 0;
    *out = strtod(tmp, &stop);
    return *stop == 0 && stop != tmp;
}

/* Python's int(str, base) for bases 2..36 and 0. */
static bool parse_int(const jstr *s, int base, int64_t *out)
{
    const char *p = s->p, *end = s->p + s->len;
    while (p < end && j_isspace((unsigned char)*p))
        p++;
    while (end > p && j_isspace((unsigned char)end[-1]))
        end--;
    bool neg = false;
    if (p < end && (*p == '+' || *p == '-'))
        neg = *p++ == '-';
    if (end - p >= 2 && p[0] == '0') {
        char k = (char)(p[1] | 32);
        int pb = k == 'x' ? 16 : k == 'o' ? 8 : k == 'b' ? 2 : 0;
        if (pb && (base == pb || base == 0)) {
            p += 2;
            base = pb;
            if (p < end && *p == '_')
                p++;
        }
    }
    if (base == 0)
        base = 10;
    if (p == end)
        return false;
    uint64_t v = 0;
    for (const char *q = p; q < end; q++) {
        if (*q == '_' && q > p && q + 1 < end && q[1] != '_')
            continue;
        int d = *q >= '0' && *q <= '9' ? *q - '0' : (*q | 32) >= 'a' && (*q | 32) <= 'z' ? (*q | 32) - 'a' + 10 : 99;
        if (d >= base)
            return false;
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
            return false;
        v = v * (uint64_t)base + (uint64_t)d;
        if (v > (uint64_t)INT64_MAX + neg)
            return false;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

static jv f_int(jstate *st, jv v, jargs *a)
{
    jv arg[2];
    j_bind(st, "int", "default=0,base=10", a, arg, 2);
    j_need_defined(st, v);
    int64_t i;
    double f;
    switch (v.t) {
    case JT_INT: return v;
    case JT_BOOL: return jv_int(v.b);
    case JT_FLOAT:
        if (isnan(v.f) || isinf(v.f))
            return arg[0]; /* int() raises ValueError, which the filter turns into the default */
        if (fabs(v.f) >= 9.2e18)
            j_unsupported(st, "integers beyond 64 bits");
        return jv_int((int64_t)v.f);
    case JT_STR:
        if (parse_int(v.s, (int)f_int_arg(st, "int", arg[1]), &i))
            return jv_int(i);
        if (parse_float(v.s, &f) && !isnan(f) && !isinf(f) && fabs(f) < 9.2e18)
            return jv_int((int64_t)f);
        return arg[0];
    default: return arg[0];
    }
}

static jv f_float(jstate *st, jv v, jargs *a)
{
    jv arg[1];
    j_bind(st, "float", "default=0.0", a, arg, 1);
    j_need_defined(st, v);
    double f;
    switch (v.t) {
    case JT_FLOAT: return v;
    case JT_INT: return jv_float((double)v.i);
    case JT_BOOL: return jv_float(v.b);
    case JT_STR: return parse_float(v.s, &f) ? jv_float(f) : arg[0];
    default: return arg[0];
    }
}

static jv f_indent(jstate *st, jv v, jargs *a)
{
    jv arg[3];
    j_bind(st, "indent", "width=4,first=false,blank=false", a, arg, 3);
    j_need_defined(st, v);
    if (v.t != JT_STR)
        j_error(st, "unsupported operand type(s) for +=: '%s' and 'str'", j_type_name(v));
    jbuf ind = {0};
    if (arg[0].t == JT_STR) {
        j_buf_add(st, &ind, arg[0].s->p, arg[0].s->len);
    } else {
        int64_t w = f_int_arg(st, "indent", arg[0]);
        if (w > (1 << 16))
            j_fail(st, NU_LLM_TEMPLATE_LIMIT, "indent(%lld): an indent over 65536 spaces", (long long)w);
        for (int64_t i = 0; i < w; i++)
            j_buf_addc(st, &ind, ' ');
    }
    /* s + "\n", split into lines as str.splitlines() does */
    jbuf src = {0};
    j_buf_add(st, &src, v.s->p, v.s->len);
    j_buf_addc(st, &src, '\n');
    jlist *lines = f_splitlines(st, src.p, src.len);
    bool first = j_truthy(st, arg[1]), blank = j_truthy(st, arg[2]);
    jbuf b = {0};
    if (first)
        j_buf_add(st, &b, ind.p, ind.len);
    for (size_t i = 0; i < lines->n; i++) {
        const jstr *line = lines->v[i].s;
        if (i) {
            j_buf_addc(st, &b, '\n');
            if (blank || line->len)
                j_buf_add(st, &b, ind.p, ind.len);
        }
        j_buf_add(st, &b, line->p, line->len);
    }
    j_charge(st, b.len / 64);
    return j_buf_str_markup(st, &b, v.markup);
}

static jv f_replace(jstate *st, jv v, jargs *a)
{
    jv arg[3];
    j_bind(st, "replace", "old,new,count=none", a, arg, 3);
    jv s = j_str_of(st, v), old = j_str_of(st, arg[0]), rep = j_str_of(st, arg[1]);
    jargs m = {.pos = (jv[3]){old, rep, arg[2].t == JT_NONE ? jv_int(-1) : arg[2]}, .npos = 3};
    return j_method_call(st, s, "replace", &m);
}

static jv f_round(jstate *st, jv v, jargs *a)
{
    jv arg[2];
    j_bind(st, "round", "precision=0,method='common'", a, arg, 2);
    j_need_defined(st, v);
    if (arg[1].t != JT_STR || (strcmp(arg[1].s->p, "common") && strcmp(arg[1].s->p, "ceil") && strcmp(arg[1].s->p, "floor")))
        j_error(st, "method must be common, ceil or floor");
    int64_t prec = f_int_arg(st, "round", arg[0]);
    if (v.t != JT_INT && v.t != JT_BOOL && v.t != JT_FLOAT)
        j_error(st, "type %s doesn't define __round__ method", j_type_name(v));
    if (prec < 0 || prec > 300)
        j_unsupported(st, "round() with a precision of %lld", (long long)prec);
    if (arg[1].s->p[0] == 'c' && arg[1].s->p[1] == 'o') {
        if (v.t != JT_FLOAT)
            return jv_int(v.t == JT_BOOL ? v.b : v.i);
        if (isnan(v.f) || isinf(v.f))
            return v;
        char tmp[400];
        snprintf(tmp, sizeof tmp, "%.*f", (int)prec, v.f); /* correctly rounded, half to even */
        return jv_float(strtod(tmp, NULL));
    }
    double x = v.t == JT_FLOAT ? v.f : (double)(v.t == JT_BOOL ? v.b : v.i), scale = pow(10, (double)prec);
    double r = arg[1].s->p[0] == 'c' ? ceil(x * scale) : floor(x * scale);
    return jv_float(r / scale);
}

static jv f_truncate(jstate *st, jv v, jargs *a)
{
    jv arg[4];
    j_bind(st, "truncate", "length=255,killwords=false,end='...',leeway=none", a, arg, 4);
    jv s = f_soft_str(st, v), end = j_str_of(st, arg[2]);
    int64_t length = f_int_arg(st, "truncate", arg[0]);
    int64_t leeway = arg[3].t == JT_NONE ? 5 : f_int_arg(st, "truncate", arg[3]);
    if (length < (int64_t)end.s->cps)
        j_error(st, "expected length >= %zu, got %lld", end.s->cps, (long long)length);
    if (leeway < 0)
        j_error(st, "expected leeway >= 0, got %lld", (long long)leeway);
    if ((int64_t)s.s->cps <= length + leeway)
        return s;
    size_t cut = j_utf8_offset(s.s, (size_t)(length - (int64_t)end.s->cps));
    size_t keep = cut;
    if (!j_truthy(st, arg[1])) { /* drop the last word: rsplit(" ", 1)[0] */
        const char *sp = NULL;
        for (size_t i = cut; i > 0; i--)
            if (s.s->p[i - 1] == ' ') {
                sp = s.s->p + i - 1;
                break;
            }
        if (sp)
            keep = (size_t)(sp - s.s->p);
    }
    jbuf b = {0};
    if (s.markup) {
        j_buf_add(st, &b, s.s->p, keep);
        j_html_escape(st, &b, end.s->p, end.s->len);
    } else {
        j_buf_add(st, &b, s.s->p, keep);
        j_buf_add(st, &b, end.s->p, end.s->len);
    }
    return j_buf_str_markup(st, &b, s.markup);
}

static jv f_wordcount(jstate *st, jv v)
{
    jv s = f_soft_str(st, v);
    int64_t n = 0;
    bool in = false;
    for (size_t i = 0; i < s.s->len; i++) {
        unsigned char c = (unsigned char)s.s->p[i];
        if (c >= 0x80)
            j_unsupported(st, "wordcount of non-ASCII text");
        bool w = (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z') || c == '_';
        n += w && !in;
        in = w;
    }
    return jv_int(n);
}

static jv f_tojson(jstate *st, jv v, jargs *a)
{
    jv arg[4];
    j_bind(st, "tojson", "ensure_ascii=false,indent=none,separators=none,sort_keys=false", a, arg, 4);
    jjson_opts o = {.ensure_ascii = j_truthy(st, arg[0]), .sort_keys = j_truthy(st, arg[3])};
    jbuf ind = {0};
    if (arg[1].t == JT_STR) {
        o.indent_set = true;
        j_buf_add(st, &ind, arg[1].s->p, arg[1].s->len);
    } else if (arg[1].t != JT_NONE) {
        int64_t w = f_int_arg(st, "tojson", arg[1]);
        if (w > (1 << 16))
            j_fail(st, NU_LLM_TEMPLATE_LIMIT, "tojson(indent=%lld): an indent over 65536 spaces", (long long)w);
        o.indent_set = true;
        for (int64_t i = 0; i < w; i++)
            j_buf_addc(st, &ind, ' ');
    }
    j_buf_addc(st, &ind, 0);
    o.indent = ind.p;
    o.indent_len = ind.len - 1;
    o.item_sep = o.indent_set ? "," : ", ";
    o.key_sep = ": ";
    if (arg[2].t != JT_NONE) {
        jlist *seps = j_to_list(st, arg[2]);
        if (seps->n != 2)
            j_error(st, "separators: %s 2 values to unpack (expected 2, got %zu)", seps->n < 2 ? "not enough" : "too many", seps->n);
        if (seps->v[0].t != JT_STR || seps->v[1].t != JT_STR)
            j_error(st, "separators must be strings");
        o.item_sep = seps->v[0].s->p;
        o.key_sep = seps->v[1].s->p;
        o.item_sep_len = seps->v[0].s->len;
        o.key_sep_len = seps->v[1].s->len;
    } else {
        o.item_sep_len = strlen(o.item_sep);
        o.key_sep_len = 2;
    }
    jbuf b = {0};
    j_tojson(st, &b, v, &o);
    return j_buf_str(st, &b);
}

static jv f_abs(jstate *st, jv v)
{
    if (v.t == JT_INT) {
        if (v.i == INT64_MIN)
            j_unsupported(st, "integer arithmetic beyond 64 bits");
        return jv_int(v.i < 0 ? -v.i : v.i);
    }
    if (v.t == JT_BOOL)
        return jv_int(v.b);
    if (v.t == JT_FLOAT)
        return jv_float(fabs(v.f));
    j_error(st, "bad operand type for abs(): '%s'", j_type_name(v));
}

static jv f_format(jstate *st, jv v, jargs *a)
{
    if (a->npos && a->nkw)
        j_error(st, "can't handle positional and keyword arguments at the same time");
    jv args;
    if (a->nkw) {
        jdict *d = j_dict_new(st, a->nkw);
        for (size_t i = 0; i < a->nkw; i++)
            j_dict_set(st, d, j_cstr(st, a->kwn[i]), a->kwv[i]);
        args = jv_dictv(d);
    } else {
        jlist *t = j_list_new(st, JL_TUPLE, a->npos);
        for (size_t i = 0; i < a->npos; i++)
            t->v[t->n++] = a->pos[i];
        args = jv_listv(t);
    }
    return j_printf_format(st, f_soft_str(st, v), args);
}

/* ---- The table ------------------------------------------------------------------------------------ */

enum {
    F_ABS, F_ATTR, F_BATCH, F_CAPITALIZE, F_CENTER, F_COUNT, F_D, F_DEFAULT, F_DICTSORT, F_E, F_ESCAPE,
    F_FIRST, F_FLOAT, F_FORCEESCAPE, F_FORMAT, F_INDENT, F_INT, F_ITEMS, F_JOIN, F_LAST, F_LENGTH, F_LIST,
    F_LOWER, F_MAP, F_MAX, F_MIN, F_REJECT, F_REJECTATTR, F_REPLACE, F_REVERSE, F_ROUND, F_SAFE, F_SELECT,
    F_SELECTATTR, F_SLICE, F_SORT, F_STRING, F_SUM, F_TITLE, F_TOJSON, F_TRIM, F_TRUNCATE, F_UNIQUE, F_UPPER,
    F_WORDCOUNT, F_COUNT_ALL
};

static const char *const FILTERS[F_COUNT_ALL] = {
    "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
    "first", "float", "forceescape", "format", "indent", "int", "items", "join", "last", "length", "list",
    "lower", "map", "max", "min", "reject", "rejectattr", "replace", "reverse", "round", "safe", "select",
    "selectattr", "slice", "sort", "string", "sum", "title", "tojson", "trim", "truncate", "unique", "upper",
    "wordcount",
};

/* Jinja2's builtins that nuvec lacks (refused by name when a template uses one). */
static const char *const JINJA_ONLY[] = {"filesizeformat", "groupby", "pprint", "random", "striptags", "urlencode",
                                         "urlize", "wordwrap", "xmlattr", NULL};

int j_filter_find(const char *name)
{
    for (int i = 0; i < F_COUNT_ALL; i++)
        if (!strcmp(FILTERS[i], name))
            return i;
    return -1;
}

bool j_filter_jinja(const char *name)
{
    for (const char *const *p = JINJA_ONLY; *p; p++)
        if (!strcmp(*p, name))
            return true;
    return false;
}

static void no_args(jstate *st, const char *name, jargs *a)
{
    if (a->npos || a->nkw)
        j_error(st, "%s() takes no arguments", name);
}

jv j_filter_apply(jstate *st, int fid, const char *name, jv v, jargs *a)
{
    j_charge(st, 1);
    switch (fid) {
    case F_ABS: no_args(st, name, a); return f_abs(st, v);
    case F_CAPITALIZE: no_args(st, name, a); return f_capitalize(st, v);
    case F_CENTER: return via_method(st, v, "center", "width=80", "center", a);
    case F_COUNT:
    case F_LENGTH: no_args(st, name, a); return jv_int((int64_t)j_len(st, v));
    case F_D:
    case F_DEFAULT: return f_default(st, v, a);
    case F_E:
    case F_ESCAPE: no_args(st, name, a); return f_escape(st, v, false);
    case F_FORCEESCAPE: no_args(st, name, a); return f_escape(st, v, true);
    case F_FLOAT: return f_float(st, v, a);
    case F_FORMAT: return f_format(st, v, a);
    case F_INDENT: return f_indent(st, v, a);
    case F_INT: return f_int(st, v, a);
    case F_LOWER: no_args(st, name, a); return f_case(st, f_soft_str(st, v), 'l');
    case F_UPPER: no_args(st, name, a); return f_case(st, f_soft_str(st, v), 'u');
    case F_REPLACE: return f_replace(st, v, a);
    case F_ROUND: return f_round(st, v, a);
    case F_SAFE: {
        no_args(st, name, a);
        jv s = f_soft_str(st, v);
        s.markup = 1;
        return s;
    }
    case F_STRING: no_args(st, name, a); return f_soft_str(st, v);
    case F_TITLE: no_args(st, name, a); return f_title(st, v);
    case F_TOJSON: return f_tojson(st, v, a);
    case F_TRIM: return via_method(st, v, "trim", "chars=none", "strip", a);
    case F_TRUNCATE: return f_truncate(st, v, a);
    case F_WORDCOUNT: no_args(st, name, a); return f_wordcount(st, v);
    case F_ATTR: return fs_attr(st, v, a);
    case F_BATCH: return fs_batch(st, v, a);
    case F_DICTSORT: return fs_dictsort(st, v, a);
    case F_FIRST: no_args(st, name, a); return fs_first(st, v);
    case F_LAST: no_args(st, name, a); return fs_last(st, v);
    case F_ITEMS: no_args(st, name, a); return fs_items(st, v);
    case F_JOIN: return fs_join(st, v, a);
    case F_LIST: no_args(st, name, a); return jv_listv(j_to_list(st, v));
    case F_MAP: return fs_map(st, v, a);
    case F_MAX: return fs_minmax(st, v, a, true);
    case F_MIN: return fs_minmax(st, v, a, false);
    case F_REJECT: return fs_select(st, v, a, false, false);
    case F_REJECTATTR: return fs_select(st, v, a, false, true);
    case F_SELECT: return fs_select(st, v, a, true, false);
    case F_SELECTATTR: return fs_select(st, v, a, true, true);
    case F_REVERSE: no_args(st, name, a); return fs_reverse(st, v);
    case F_SLICE: return fs_slice(st, v, a);
    case F_SORT: return fs_sort(st, v, a);
    case F_SUM: return fs_sum(st, v, a);
    case F_UNIQUE: return fs_unique(st, v, a);
    default: j_fail(st, NU_LLM_TEMPLATE_ERROR, "internal: filter %d", fid);
    }
}

/* A filter by name, as map() and the `filter` test look them up. */
jv f_call_by_name(jstate *st, jv name, jv v, jargs *a)
{
    if (name.t != JT_STR)
        j_error(st, "No filter named %s.", "(not a string)");
    int id = j_filter_find(name.s->p);
    if (id < 0) {
        if (j_filter_jinja(name.s->p))
            j_unsupported(st, "the filter '%s' is not supported", name.s->p);
        j_error(st, "No filter named '%s'.", name.s->p);
    }
    return j_filter_apply(st, id, name.s->p, v, a);
}
