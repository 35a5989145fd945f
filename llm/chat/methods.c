/* methods.c: Python's str methods as templates call them (indices in code points, whitespace as
 * str.isspace, case by the generated tables), and markupsafe's Markup versions: on a safe
 * string, the methods markupsafe wraps escape their string arguments and return a safe string.
 * Dict and list methods and the globals are in builtins.c. */
#include <stdio.h>
#include <string.h>

#include "filters.h"
#include "methods.h"

static const char *const STR_METHODS[] = {
    "capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find", "format",
    "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier", "islower",
    "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower", "lstrip", "maketrans",
    "partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit",
    "rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title", "translate", "upper", "zfill", NULL};

/* markupsafe's simple escaping wrappers (their string arguments are escaped). */
static const char *const MARKUP_ESCAPING[] = {"capitalize", "title", "lower", "upper", "replace", "ljust", "rjust",
                                              "lstrip", "rstrip", "center", "strip", "zfill", NULL};

bool m_in(const char *const *list, const char *name)
{
    for (; *list; list++)
        if (!strcmp(*list, name))
            return true;
    return false;
}

bool m_str_has(const char *name) { return m_in(STR_METHODS, name); }

static jstr *need_str(jstate *st, const char *m, jv v, const char *what)
{
    if (v.t != JT_STR)
        j_error(st, "%s() argument %s must be str, not %s", m, what, j_type_name(v));
    return v.s;
}

/* Code point positions as Python's str slicing adjusts start / end (None: the ends). */
static void cp_range(jstate *st, const jstr *s, jv start, jv end, size_t *from, size_t *to)
{
    int64_t n = (int64_t)s->cps, a = 0, b = n;
    if (start.t != JT_NONE) {
        a = f_int_arg(st, "slice", start);
        if (a < 0)
            a = a + n < 0 ? 0 : a + n;
    }
    if (end.t != JT_NONE) {
        b = f_int_arg(st, "slice", end);
        if (b < 0)
            b = b + n < 0 ? 0 : b + n;
    }
    if (b > n)
        b = n;
    *from = (size_t)a;
    *to = (size_t)(b < a ? a : b);
}

/* ---- Searching ---------------------------------------------------------------------------------- */

/* The code point index of the first (or last) occurrence of sub in s's code points [a, b), -1. */
static int64_t find_in(jstate *st, const jstr *s, const jstr *sub, size_t a, size_t b, bool last)
{
    if (a > s->cps)
        return -1;
    size_t off = j_utf8_offset(s, a), end = j_utf8_offset(s, b);
    j_charge(st, (end - off) / 64);
    if (sub->len > end - off)
        return -1;
    const char *hit = NULL;
    if (!last) {
        hit = sub->len ? memmem(s->p + off, end - off, sub->p, sub->len) : s->p + off;
    } else {
        for (size_t i = end - sub->len + 1; i-- > off;)
            if (!memcmp(s->p + i, sub->p, sub->len)) {
                hit = s->p + i;
                break;
            }
    }
    if (!hit)
        return -1;
    return (int64_t)j_utf8_count(s->p, (size_t)(hit - s->p));
}

static jv m_find(jstate *st, const char *m, jv self, jargs *a, bool last, bool raise)
{
    jv arg[3];
    j_bind(st, m, "sub,start=none,end=none", a, arg, 3);
    size_t from, to;
    cp_range(st, self.s, arg[1], arg[2], &from, &to);
    int64_t i = find_in(st, self.s, need_str(st, m, arg[0], "1"), from, to, last);
    if (i < 0 && raise)
        j_error(st, "substring not found");
    return jv_int(i);
}

static jv m_count(jstate *st, jv self, jargs *a)
{
    jv arg[3];
    j_bind(st, "count", "sub,start=none,end=none", a, arg, 3);
    const jstr *sub = need_str(st, "count", arg[0], "1");
    size_t from, to;
    cp_range(st, self.s, arg[1], arg[2], &from, &to);
    if (from > self.s->cps)
        return jv_int(0);
    if (!sub->len)
        return jv_int((int64_t)(to - from) + 1);
    size_t off = j_utf8_offset(self.s, from), end = j_utf8_offset(self.s, to);
    int64_t n = 0;
    j_charge(st, (end - off) / 64);
    const char *p = self.s->p + off, *e = self.s->p + end;
    while ((size_t)(e - p) >= sub->len && (p = memmem(p, (size_t)(e - p), sub->p, sub->len))) {
        n++;
        p += sub->len;
    }
    return jv_int(n);
}

static jv m_affix(jstate *st, const char *m, jv self, jargs *a, bool end_side)
{
    jv arg[3];
    j_bind(st, m, "prefix,start=none,end=none", a, arg, 3);
    size_t from, to;
    cp_range(st, self.s, arg[1], arg[2], &from, &to);
    if (from > self.s->cps)
        return jv_bool(false);
    size_t off = j_utf8_offset(self.s, from), end = j_utf8_offset(self.s, to);
    jlist one = {.kind = JL_TUPLE, .n = 1, .v = arg};
    const jlist *cands = arg[0].t == JT_LIST && arg[0].l->kind == JL_TUPLE ? arg[0].l : &one;
    for (size_t i = 0; i < cands->n; i++) {
        const jstr *x = need_str(st, m, cands->v[i], "1");
        if (x->len <= end - off &&
            !memcmp(end_side ? self.s->p + end - x->len : self.s->p + off, x->p, x->len))
            return jv_bool(true);
    }
    return jv_bool(false);
}

/* ---- Stripping and splitting ---------------------------------------------------------------------- */

static bool in_chars(const jstr *chars, uint32_t cp)
{
    if (!chars)
        return j_isspace(cp);
    const char *p = chars->p, *end = p + chars->len;
    while (p < end) {
        size_t n;
        if (j_utf8_next(p, end, &n) == cp)
            return true;
        p += n;
    }
    return false;
}

static jv m_strip(jstate *st, const char *m, jv self, jargs *a, bool left, bool right)
{
    jv arg[1];
    j_bind(st, m, "chars=none", a, arg, 1);
    const jstr *chars = arg[0].t == JT_NONE ? NULL : need_str(st, m, arg[0], "1");
    const char *p = self.s->p, *end = p + self.s->len;
    size_t n;
    while (left && p < end && in_chars(chars, j_utf8_next(p, end, &n)))
        p += n;
    while (right && end > p) {
        const char *q = end - 1;
        while (q > p && ((unsigned char)*q & 0xC0) == 0x80)
            q--;
        if (!in_chars(chars, j_utf8_next(q, end, &n)))
            break;
        end = q;
    }
    jv out = j_str(st, p, (size_t)(end - p));
    out.markup = self.markup;
    return out;
}

jlist *f_splitlines(jstate *st, const char *p, size_t len)
{
    jlist *out = j_list_new(st, JL_LIST, 0);
    const char *end = p + len, *line = p;
    while (p < end) {
        size_t n;
        uint32_t cp = j_utf8_next(p, end, &n);
        bool brk = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C || cp == 0x1D || cp == 0x1E ||
                   cp == 0x85 || cp == 0x2028 || cp == 0x2029;
        if (!brk) {
            p += n;
            continue;
        }
        j_list_push(st, out, j_str(st, line, (size_t)(p - line)));
        p += n;
        if (cp == '\r' && p < end && *p == '\n')
            p++;
        line = p;
    }
    if (line < end)
        j_list_push(st, out, j_str(st, line, (size_t)(end - line)));
    return out;
}

static bool space_at(const char *p, const char *end, size_t *n)
{
    return j_isspace(j_utf8_next(p, end, n));
}

static jv m_split(jstate *st, const char *m, jv self, jargs *a, bool from_right)
{
    jv arg[2];
    j_bind(st, m, "sep=none,maxsplit=-1", a, arg, 2);
    int64_t max = f_int_arg(st, m, arg[1]);
    jlist *out = j_list_new(st, JL_LIST, 0);
    const char *s = self.s->p, *end = s + self.s->len;
    j_charge(st, self.s->len / 64);
    if (arg[0].t != JT_NONE) {
        const jstr *sep = need_str(st, m, arg[0], "1");
        if (!sep->len)
            j_error(st, "empty separator");
        if (!from_right) {
            const char *p = s, *hit;
            while ((max < 0 || (int64_t)out->n < max) && (size_t)(end - p) >= sep->len &&
                   (hit = memmem(p, (size_t)(end - p), sep->p, sep->len))) {
                j_list_push(st, out, j_str(st, p, (size_t)(hit - p)));
                p = hit + sep->len;
            }
            j_list_push(st, out, j_str(st, p, (size_t)(end - p)));
        } else {
            const char *q = end;
            jlist *rev = j_list_new(st, JL_LIST, 0);
            while (max < 0 || (int64_t)rev->n < max) {
                const char *hit = NULL;
                size_t qlen = (size_t)(q - s);
                if (qlen >= sep->len)
                    for (size_t at = qlen - sep->len + 1; at-- > 0;)
                        if (!memcmp(s + at, sep->p, sep->len)) {
                            hit = s + at;
                            break;
                        }
                if (!hit)
                    break;
                j_list_push(st, rev, j_str(st, hit + sep->len, (size_t)(q - hit - sep->len)));
                q = hit;
            }
            j_list_push(st, out, j_str(st, s, (size_t)(q - s)));
            for (size_t i = rev->n; i-- > 0;)
                j_list_push(st, out, rev->v[i]);
        }
    } else if (!from_right) {
        const char *p = s;
        size_t n;
        for (;;) {
            while (p < end && space_at(p, end, &n))
                p += n;
            if (p == end)
                break;
            if (max >= 0 && (int64_t)out->n == max) {
                const char *e2 = end; /* the rest keeps its trailing whitespace */
                j_list_push(st, out, j_str(st, p, (size_t)(e2 - p)));
                break;
            }
            const char *w = p;
            while (p < end && !space_at(p, end, &n))
                p += n;
            j_list_push(st, out, j_str(st, w, (size_t)(p - w)));
        }
    } else {
        jlist *rev = j_list_new(st, JL_LIST, 0);
        const char *q = end;
        size_t n;
        for (;;) {
            while (q > s) { /* skip whitespace backwards */
                const char *c = q - 1;
                while (c > s && ((unsigned char)*c & 0xC0) == 0x80)
                    c--;
                if (!space_at(c, end, &n))
                    break;
                q = c;
            }
            if (q == s)
                break;
            if (max >= 0 && (int64_t)rev->n == max) {
                j_list_push(st, rev, j_str(st, s, (size_t)(q - s)));
                break;
            }
            const char *w = q;
            while (w > s) {
                const char *c = w - 1;
                while (c > s && ((unsigned char)*c & 0xC0) == 0x80)
                    c--;
                if (space_at(c, end, &n))
                    break;
                w = c;
            }
            j_list_push(st, rev, j_str(st, w, (size_t)(q - w)));
            q = w;
        }
        for (size_t i = rev->n; i-- > 0;)
            j_list_push(st, out, rev->v[i]);
    }
    if (self.markup)
        for (size_t i = 0; i < out->n; i++)
            out->v[i].markup = 1;
    return jv_listv(out);
}

/* ---- Transforming ---------------------------------------------------------------------------------- */

static jv m_replace(jstate *st, jv self, jargs *a)
{
    jv arg[3];
    j_bind(st, "replace", "old,new,count=-1", a, arg, 3);
    const jstr *old = need_str(st, "replace", arg[0], "1"), *rep = need_str(st, "replace", arg[1], "2");
    int64_t count = f_int_arg(st, "replace", arg[2]);
    const jstr *s = self.s;
    jbuf b = {.limit = st->r ? st->r->output_limit : 0};
    j_charge(st, s->len / 64);
    const char *p = s->p, *end = s->p + s->len;
    int64_t done = 0;
    if (!old->len) {
        while (count < 0 || done < count) {
            j_buf_add(st, &b, rep->p, rep->len);
            done++;
            if (p == end)
                break;
            size_t n;
            j_utf8_next(p, end, &n);
            j_buf_add(st, &b, p, n);
            p += n;
        }
        j_buf_add(st, &b, p, (size_t)(end - p));
    } else {
        const char *hit;
        while ((count < 0 || done < count) && (size_t)(end - p) >= old->len &&
               (hit = memmem(p, (size_t)(end - p), old->p, old->len))) {
            j_buf_add(st, &b, p, (size_t)(hit - p));
            j_buf_add(st, &b, rep->p, rep->len);
            p = hit + old->len;
            done++;
        }
        j_buf_add(st, &b, p, (size_t)(end - p));
    }
    return j_buf_str_markup(st, &b, self.markup);
}

static jv m_pad(jstate *st, const char *m, jv self, jargs *a)
{
    jv arg[2];
    j_bind(st, m, "width,fillchar=' '", a, arg, 2);
    int64_t width = f_int_arg(st, m, arg[0]);
    const jstr *fill = need_str(st, m, arg[1], "2");
    if (fill->cps != 1)
        j_error(st, "The fill character must be exactly one character long");
    int64_t len = (int64_t)self.s->cps;
    if (width <= len)
        return self;
    if (width > (1 << 24))
        j_fail(st, NU_LLM_TEMPLATE_LIMIT, "%s(%lld): a string over the limit", m, (long long)width);
    int64_t marg = width - len, left = m[0] == 'l' ? 0 : m[0] == 'r' ? marg : marg / 2 + (marg & width & 1);
    jbuf b = {0};
    for (int64_t i = 0; i < left; i++)
        j_buf_add(st, &b, fill->p, fill->len);
    j_buf_add(st, &b, self.s->p, self.s->len);
    for (int64_t i = left; i < marg; i++)
        j_buf_add(st, &b, fill->p, fill->len);
    return j_buf_str_markup(st, &b, self.markup);
}

static jv m_zfill(jstate *st, jv self, jargs *a)
{
    jv arg[1];
    j_bind(st, "zfill", "width", a, arg, 1);
    int64_t width = f_int_arg(st, "zfill", arg[0]), len = (int64_t)self.s->cps;
    if (width <= len)
        return self;
    if (width > (1 << 24))
        j_fail(st, NU_LLM_TEMPLATE_LIMIT, "zfill(%lld): a string over the limit", (long long)width);
    jbuf b = {0};
    const char *p = self.s->p;
    size_t skip = self.s->len && (p[0] == '+' || p[0] == '-');
    j_buf_add(st, &b, p, skip);
    for (int64_t i = 0; i < width - len; i++)
        j_buf_addc(st, &b, '0');
    j_buf_add(st, &b, p + skip, self.s->len - skip);
    return j_buf_str_markup(st, &b, self.markup);
}

/* str.title() and str.capitalize() (Python: title case after an uncased character, lower case
 * after a cased one; capitalize: title case first, lower case after). */
static jv m_titlecase(jstate *st, jv self, bool capitalize)
{
    jbuf b = {0};
    const char *p = self.s->p, *end = p + self.s->len;
    bool prev_cased = false, first = true;
    while (p < end) {
        size_t n;
        uint32_t cp = j_utf8_next(p, end, &n), out[3];
        bool upper = capitalize ? first : !prev_cased;
        int k = upper ? j_case_title(cp, out) : j_case_lower_at(self.s->p, p, end, out);
        for (int i = 0; i < k; i++)
            j_buf_addcp(st, &b, out[i]);
        prev_cased = j_is_cased(cp);
        first = false;
        p += n;
    }
    return j_buf_str_markup(st, &b, self.markup);
}

static jv m_join(jstate *st, jv self, jargs *a)
{
    jv arg[1];
    j_bind(st, "join", "iterable", a, arg, 1);
    jbuf b = {0};
    jiter it;
    j_iter_start(st, arg[0], &it);
    jv x;
    for (size_t i = 0; j_iter_next(st, &it, &x); i++) {
        if (x.t != JT_STR)
            j_error(st, "sequence item %zu: expected str instance, %s found", i, j_type_name(x));
        if (i)
            j_buf_add(st, &b, self.s->p, self.s->len);
        j_buf_add(st, &b, x.s->p, x.s->len);
    }
    j_charge(st, b.len / 64);
    return j_buf_str(st, &b);
}

static jv m_partition(jstate *st, const char *m, jv self, jargs *a, bool last)
{
    jv arg[1];
    j_bind(st, m, "sep", a, arg, 1);
    const jstr *sep = need_str(st, m, arg[0], "1");
    if (!sep->len)
        j_error(st, "empty separator");
    int64_t i = find_in(st, self.s, sep, 0, self.s->cps, last);
    jlist *t = j_list_new(st, JL_TUPLE, 3);
    if (i < 0) {
        jv e = j_str(st, "", 0);
        t->v[0] = last ? e : self;
        t->v[1] = e;
        t->v[2] = last ? self : e;
    } else {
        size_t off = j_utf8_offset(self.s, (size_t)i);
        t->v[0] = j_str(st, self.s->p, off);
        t->v[1] = arg[0];
        t->v[2] = j_str(st, self.s->p + off + sep->len, self.s->len - off - sep->len);
    }
    t->n = 3;
    return jv_listv(t);
}

static jv m_affix_remove(jstate *st, const char *m, jv self, jargs *a, bool suffix)
{
    jv arg[1];
    j_bind(st, m, "affix", a, arg, 1);
    const jstr *x = need_str(st, m, arg[0], "1");
    if (x->len > self.s->len || memcmp(suffix ? self.s->p + self.s->len - x->len : self.s->p, x->p, x->len))
        return self;
    return j_str(st, self.s->p + (suffix ? 0 : x->len), self.s->len - x->len);
}

/* Python's per-character predicates over the whole string (False for an empty one). */
static jv m_is(jstate *st, const char *m, jv self)
{
    const char *p = self.s->p, *end = p + self.s->len;
    if (!strcmp(m, "isascii")) {
        for (; p < end; p++)
            if ((unsigned char)*p >= 0x80)
                return jv_bool(false);
        return jv_bool(true);
    }
    if (!strcmp(m, "islower") || !strcmp(m, "isupper") || !strcmp(m, "istitle")) {
        bool cased = false, prev_cased = false;
        while (p < end) {
            size_t n;
            uint32_t cp = j_utf8_next(p, end, &n);
            p += n;
            bool lo = j_is_lower(cp), up = j_is_upper(cp), ti = j_is_titlecase(cp);
            if (m[2] == 'l') {
                if (up || ti)
                    return jv_bool(false);
                cased |= lo;
            } else if (m[2] == 'u') {
                if (lo || ti)
                    return jv_bool(false);
                cased |= up;
            } else if (up || ti) {
                if (prev_cased)
                    return jv_bool(false);
                prev_cased = cased = true;
            } else if (lo) {
                if (!prev_cased)
                    return jv_bool(false);
                prev_cased = cased = true;
            } else {
                prev_cased = false;
            }
        }
        return jv_bool(cased);
    }
    if (p == end)
        return jv_bool(false);
    for (; p < end;) {
        size_t n;
        uint32_t c = j_utf8_next(p, end, &n);
        p += n;
        bool ok;
        if (!strcmp(m, "isspace")) {
            ok = j_isspace(c);
        } else if (!strcmp(m, "isprintable")) {
            ok = j_isprintable(c);
        } else {
            if (c >= 0x80)
                j_unsupported(st, "str.%s() of non-ASCII text", m);
            bool digit = c >= '0' && c <= '9', alpha = (c | 32) >= 'a' && (c | 32) <= 'z';
            ok = !strcmp(m, "isalpha") ? alpha : !strcmp(m, "isalnum") ? alpha || digit : digit;
        }
        if (!ok)
            return jv_bool(false);
    }
    return jv_bool(true);
}

/* Escapes a Markup method's string arguments, as markupsafe's wrappers do. */
static void escape_args(jstate *st, jargs *a)
{
    jv *pos = j_alloc_array(st, a->npos ? a->npos : 1, sizeof(jv));
    for (size_t i = 0; i < a->npos; i++) {
        pos[i] = a->pos[i];
        if (pos[i].t == JT_STR && !pos[i].markup) {
            jbuf b = {0};
            j_html_escape(st, &b, pos[i].s->p, pos[i].s->len);
            pos[i] = j_buf_str(st, &b);
        }
    }
    a->pos = pos;
}

jv m_str_call(jstate *st, jv self, const char *m, jargs *a)
{
    jargs escaped;
    if (self.markup) {
        if (m_in(MARKUP_ESCAPING, m)) {
            escaped = *a;
            escape_args(st, &escaped);
            a = &escaped;
        } else if (!strcmp(m, "join") || !strcmp(m, "format") || !strcmp(m, "format_map") || !strcmp(m, "partition") ||
                   !strcmp(m, "rpartition")) {
            j_unsupported(st, "str.%s() of a safe (Markup) string", m);
        }
    }
    if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip"))
        return m_strip(st, m, self, a, m[0] != 'r', m[0] != 'l');
    if (!strcmp(m, "split") || !strcmp(m, "rsplit"))
        return m_split(st, m, self, a, m[0] == 'r');
    if (!strcmp(m, "splitlines")) {
        jv arg[1];
        j_bind(st, m, "keepends=false", a, arg, 1);
        if (j_truthy(st, arg[0]))
            j_unsupported(st, "str.splitlines(keepends=True)");
        jlist *l = f_splitlines(st, self.s->p, self.s->len);
        for (size_t i = 0; i < l->n; i++)
            l->v[i].markup = self.markup;
        return jv_listv(l);
    }
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith"))
        return m_affix(st, m, self, a, m[0] == 'e');
    if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "index") || !strcmp(m, "rindex"))
        return m_find(st, m, self, a, m[0] == 'r', !strcmp(m, "index") || !strcmp(m, "rindex"));
    if (!strcmp(m, "count"))
        return m_count(st, self, a);
    if (!strcmp(m, "replace"))
        return m_replace(st, self, a);
    if (!strcmp(m, "upper") || !strcmp(m, "lower")) {
        j_bind(st, m, "", a, NULL, 0);
        return f_case(st, self, m[0]);
    }
    if (!strcmp(m, "title") || !strcmp(m, "capitalize")) {
        j_bind(st, m, "", a, NULL, 0);
        return m_titlecase(st, self, m[0] == 'c');
    }
    if (!strcmp(m, "center") || !strcmp(m, "ljust") || !strcmp(m, "rjust"))
        return m_pad(st, m, self, a);
    if (!strcmp(m, "zfill"))
        return m_zfill(st, self, a);
    if (!strcmp(m, "join"))
        return m_join(st, self, a);
    if (!strcmp(m, "partition") || !strcmp(m, "rpartition"))
        return m_partition(st, m, self, a, m[0] == 'r');
    if (!strcmp(m, "removeprefix") || !strcmp(m, "removesuffix"))
        return m_affix_remove(st, m, self, a, m[6] == 's');
    if (!strcmp(m, "format"))
        return m_format(st, self, a);
    if (!strncmp(m, "is", 2) && strcmp(m, "isidentifier") && strcmp(m, "isdecimal") && strcmp(m, "isnumeric")) {
        j_bind(st, m, "", a, NULL, 0);
        return m_is(st, m, self);
    }
    if (!strcmp(m, "isdecimal") || !strcmp(m, "isnumeric")) {
        j_bind(st, m, "", a, NULL, 0);
        return m_is(st, "isdigit", self);
    }
    j_unsupported(st, "the str method '%s' is not supported", m);
}
