/* format.c: values as text the way Python writes them: str(), repr(), float's shortest repr,
 * json.dumps (transformers' tojson) and markupsafe's escape. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja.h"

void j_float_repr(jstate *st, jbuf *b, double f)
{
    if (isnan(f)) {
        j_buf_adds(st, b, "nan");
        return;
    }
    if (isinf(f)) {
        j_buf_adds(st, b, f < 0 ? "-inf" : "inf");
        return;
    }
    /* the shortest digits that read back as f (printf rounds correctly) */
    char tmp[40];
    int prec = 0;
    for (; prec < 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec, f);
        if (strtod(tmp, NULL) == f)
            break;
    }
    snprintf(tmp, sizeof tmp, "%.*e", prec, f);
    /* tmp is [-]d[.ddd]e[+-]XX: take the digits and the exponent */
    char digits[20];
    size_t nd = 0;
    const char *p = tmp;
    bool neg = *p == '-';
    if (neg)
        p++;
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    int exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    if (neg)
        j_buf_addc(st, b, '-');
    int decpt = exp10 + 1; /* the value is 0.digits x 10^decpt */
    if (decpt <= -4 || decpt > 16) {
        j_buf_addc(st, b, digits[0]);
        if (nd > 1) {
            j_buf_addc(st, b, '.');
            j_buf_add(st, b, digits + 1, nd - 1);
        }
        j_buf_addf(st, b, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
        return;
    }
    if (decpt <= 0) {
        j_buf_adds(st, b, "0.");
        for (int i = 0; i < -decpt; i++)
            j_buf_addc(st, b, '0');
        j_buf_add(st, b, digits, nd);
        return;
    }
    if ((size_t)decpt >= nd) {
        j_buf_add(st, b, digits, nd);
        for (size_t i = nd; i < (size_t)decpt; i++)
            j_buf_addc(st, b, '0');
        j_buf_adds(st, b, ".0");
        return;
    }
    j_buf_add(st, b, digits, (size_t)decpt);
    j_buf_addc(st, b, '.');
    j_buf_add(st, b, digits + decpt, nd - (size_t)decpt);
}

static void str_repr(jstate *st, jbuf *b, const jstr *s)
{
    char quote = '\'';
    if (memchr(s->p, '\'', s->len) && !memchr(s->p, '"', s->len))
        quote = '"';
    j_buf_addc(st, b, quote);
    const char *p = s->p, *end = s->p + s->len;
    while (p < end) {
        size_t n;
        uint32_t c = j_utf8_next(p, end, &n);
        if (c == (uint32_t)quote || c == '\\') {
            j_buf_addc(st, b, '\\');
            j_buf_addc(st, b, (char)c);
        } else if (c == '\t') {
            j_buf_adds(st, b, "\\t");
        } else if (c == '\n') {
            j_buf_adds(st, b, "\\n");
        } else if (c == '\r') {
            j_buf_adds(st, b, "\\r");
        } else if (c < 0x20 || c == 0x7F) {
            j_buf_addf(st, b, "\\x%02x", c);
        } else if (c < 0x7F || j_isprintable(c)) {
            j_buf_add(st, b, p, n);
        } else if (c <= 0xFF) {
            j_buf_addf(st, b, "\\x%02x", c);
        } else if (c <= 0xFFFF) {
            j_buf_addf(st, b, "\\u%04x", c);
        } else {
            j_buf_addf(st, b, "\\U%08x", c);
        }
        p += n;
    }
    j_buf_addc(st, b, quote);
}

static void dict_repr(jstate *st, jbuf *b, const jdict *d)
{
    j_buf_addc(st, b, '{');
    for (size_t i = 0; i < d->n; i++) {
        if (i)
            j_buf_adds(st, b, ", ");
        j_repr(st, b, d->keys[i]);
        j_buf_adds(st, b, ": ");
        j_repr(st, b, d->vals[i]);
    }
    j_buf_addc(st, b, '}');
}

static void items_repr(jstate *st, jbuf *b, const jlist *l, const char *open, const char *close)
{
    j_buf_adds(st, b, open);
    for (size_t i = 0; i < l->n; i++) {
        if (i)
            j_buf_adds(st, b, ", ");
        j_repr(st, b, l->v[i]);
    }
    j_buf_adds(st, b, close);
}

/* The text of the values whose str() and repr() agree. */
static void common_repr(jstate *st, jbuf *b, jv v)
{
    switch (v.t) {
    case JT_NONE: j_buf_adds(st, b, "None"); return;
    case JT_BOOL: j_buf_adds(st, b, v.b ? "True" : "False"); return;
    case JT_INT: j_buf_addf(st, b, "%lld", (long long)v.i); return;
    case JT_FLOAT: j_float_repr(st, b, v.f); return;
    case JT_LIST: {
        const jlist *l = v.l;
        switch (l->kind) {
        case JL_LIST: items_repr(st, b, l, "[", "]"); return;
        case JL_TUPLE: items_repr(st, b, l, "(", l->n == 1 ? ",)" : ")"); return;
        case JL_ITEMS: items_repr(st, b, l, "dict_items([", "])"); return;
        case JL_KEYS: items_repr(st, b, l, "dict_keys([", "])"); return;
        case JL_VALUES: items_repr(st, b, l, "dict_values([", "])"); return;
        case JL_RANGE:
            if (l->r[2] == 1)
                j_buf_addf(st, b, "range(%lld, %lld)", (long long)l->r[0], (long long)l->r[1]);
            else
                j_buf_addf(st, b, "range(%lld, %lld, %lld)", (long long)l->r[0], (long long)l->r[1],
                           (long long)l->r[2]);
            return;
        default: j_unsupported(st, "printing a generator (Python prints its address)");
        }
    }
    case JT_DICT: dict_repr(st, b, v.d); return;
    case JT_NS:
        j_buf_adds(st, b, "<Namespace ");
        dict_repr(st, b, v.d);
        j_buf_addc(st, b, '>');
        return;
    case JT_MACRO:
        j_buf_adds(st, b, "<Macro ");
        str_repr(st, b, j_str_new(st, v.m->name, strlen(v.m->name)));
        j_buf_addc(st, b, '>');
        return;
    case JT_LOOP: {
        bool found;
        jv i = j_loop_attr(st, v.loop, "index", &found), n = j_loop_attr(st, v.loop, "length", &found);
        j_buf_addf(st, b, "<LoopContext %lld/%lld>", (long long)i.i, (long long)n.i);
        return;
    }
    case JT_SLICE:
        j_buf_adds(st, b, "slice(");
        j_repr(st, b, v.sl->a);
        j_buf_adds(st, b, ", ");
        j_repr(st, b, v.sl->b);
        j_buf_adds(st, b, ", ");
        j_repr(st, b, v.sl->c);
        j_buf_addc(st, b, ')');
        return;
    case JT_FUNC:
        j_unsupported(st, "printing a function (Python prints its address)");
    case JT_OBJ:
        j_unsupported(st, "printing a %s object (Python prints its address)", j_type_name(v));
    default: return;
    }
}

void j_repr(jstate *st, jbuf *b, jv v)
{
    j_enter(st);
    j_charge(st, 1);
    if (v.t == JT_STR) {
        if (v.markup)
            j_buf_adds(st, b, "Markup(");
        str_repr(st, b, v.s);
        if (v.markup)
            j_buf_addc(st, b, ')');
    } else if (v.t == JT_UNDEF) {
        j_buf_adds(st, b, "Undefined");
    } else {
        common_repr(st, b, v);
    }
    j_leave(st);
}

void j_to_str(jstate *st, jbuf *b, jv v)
{
    if (v.t == JT_STR)
        j_buf_add(st, b, v.s->p, v.s->len);
    else if (v.t != JT_UNDEF)
        j_repr(st, b, v);
}

jv j_str_of(jstate *st, jv v)
{
    if (v.t == JT_STR) {
        v.markup = 0;
        return v;
    }
    jbuf b = {0};
    j_to_str(st, &b, v);
    return j_buf_str(st, &b);
}

/* ---- JSON ---------------------------------------------------------------------------------- */

static void json_string(jstate *st, jbuf *b, const char *p, size_t len, bool ascii)
{
    const char *end = p + len;
    j_buf_addc(st, b, '"');
    while (p < end) {
        unsigned char c = (unsigned char)*p;
        const char *esc = NULL;
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default: break;
        }
        if (esc) {
            j_buf_adds(st, b, esc);
            p++;
        } else if (c < 0x20) {
            j_buf_addf(st, b, "\\u%04x", c);
            p++;
        } else if (c < 0x80 || !ascii) {
            const char *q = p + 1;
            while (q < end && (unsigned char)*q >= 0x20 && *q != '"' && *q != '\\' && ((unsigned char)*q < 0x80 || !ascii))
                q++;
            j_buf_add(st, b, p, (size_t)(q - p));
            p = q;
        } else {
            size_t n;
            uint32_t cp = j_utf8_next(p, end, &n);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                j_buf_addf(st, b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else {
                j_buf_addf(st, b, "\\u%04x", cp);
            }
            p += n;
        }
    }
    j_buf_addc(st, b, '"');
}

static void json_float(jstate *st, jbuf *b, double f)
{
    if (isnan(f))
        j_buf_adds(st, b, "NaN");
    else if (isinf(f))
        j_buf_adds(st, b, f < 0 ? "-Infinity" : "Infinity");
    else
        j_float_repr(st, b, f);
}

static void json_newline(jstate *st, jbuf *b, const jjson_opts *o, int level)
{
    j_buf_addc(st, b, '\n');
    for (int i = 0; i < level; i++)
        j_buf_add(st, b, o->indent, o->indent_len);
}

/* A dict key as json.dumps writes it, or a TypeError. */
static void json_key(jstate *st, jbuf *b, jv k, const jjson_opts *o)
{
    switch (k.t) {
    case JT_STR: json_string(st, b, k.s->p, k.s->len, o->ensure_ascii); return;
    case JT_FLOAT: {
        jbuf t = {0};
        json_float(st, &t, k.f);
        json_string(st, b, t.p, t.len, false);
        return;
    }
    case JT_BOOL: j_buf_adds(st, b, k.b ? "\"true\"" : "\"false\""); return;
    case JT_NONE: j_buf_adds(st, b, "\"null\""); return;
    case JT_INT: j_buf_addf(st, b, "\"%lld\"", (long long)k.i); return;
    default: j_error(st, "keys must be str, int, float, bool or None, not %s", j_type_name(k));
    }
}

static void json_value(jstate *st, jbuf *b, jv v, const jjson_opts *o, int level);

/* The entries of d in sorted key order (json.dumps' sort_keys: sorted(d.items())). */
static size_t *json_sorted(jstate *st, const jdict *d)
{
    size_t *ix = j_alloc_array(st, d->n ? d->n : 1, sizeof(size_t));
    for (size_t i = 0; i < d->n; i++)
        ix[i] = i;
    /* insertion sort: stable and no callback state; dicts in templates are small */
    for (size_t i = 1; i < d->n; i++) {
        size_t x = ix[i], j = i;
        j_charge(st, i);
        while (j > 0 && j_compare(st, d->keys[x], d->keys[ix[j - 1]], "<") == -1) {
            ix[j] = ix[j - 1];
            j--;
        }
        ix[j] = x;
    }
    return ix;
}

static void json_value(jstate *st, jbuf *b, jv v, const jjson_opts *o, int level)
{
    j_enter(st);
    j_charge(st, 1);
    switch (v.t) {
    case JT_NONE: j_buf_adds(st, b, "null"); break;
    case JT_BOOL: j_buf_adds(st, b, v.b ? "true" : "false"); break;
    case JT_INT: j_buf_addf(st, b, "%lld", (long long)v.i); break;
    case JT_FLOAT: json_float(st, b, v.f); break;
    case JT_STR: json_string(st, b, v.s->p, v.s->len, o->ensure_ascii); break;
    case JT_LIST:
        if (v.l->kind != JL_LIST && v.l->kind != JL_TUPLE)
            goto unserializable;
        if (!v.l->n) {
            j_buf_adds(st, b, "[]");
            break;
        }
        j_buf_addc(st, b, '[');
        for (size_t i = 0; i < v.l->n; i++) {
            if (i)
                j_buf_add(st, b, o->item_sep, o->item_sep_len);
            if (o->indent_set)
                json_newline(st, b, o, level + 1);
            json_value(st, b, v.l->v[i], o, level + 1);
        }
        if (o->indent_set)
            json_newline(st, b, o, level);
        j_buf_addc(st, b, ']');
        break;
    case JT_DICT: {
        const jdict *d = v.d;
        if (!d->n) {
            j_buf_adds(st, b, "{}");
            break;
        }
        size_t *ix = o->sort_keys ? json_sorted(st, d) : NULL;
        j_buf_addc(st, b, '{');
        for (size_t k = 0; k < d->n; k++) {
            size_t i = ix ? ix[k] : k;
            if (k)
                j_buf_add(st, b, o->item_sep, o->item_sep_len);
            if (o->indent_set)
                json_newline(st, b, o, level + 1);
            json_key(st, b, d->keys[i], o);
            j_buf_add(st, b, o->key_sep, o->key_sep_len);
            json_value(st, b, d->vals[i], o, level + 1);
        }
        if (o->indent_set)
            json_newline(st, b, o, level);
        j_buf_addc(st, b, '}');
        break;
    }
    default:
    unserializable:
        j_error(st, "Object of type %s is not JSON serializable", j_type_name(v));
    }
    j_leave(st);
}

void j_tojson(jstate *st, jbuf *b, jv v, const jjson_opts *o)
{
    json_value(st, b, v, o, 0);
}

void j_html_escape(jstate *st, jbuf *b, const char *p, size_t len)
{
    const char *end = p + len;
    while (p < end) {
        const char *q = p;
        while (q < end && *q != '&' && *q != '<' && *q != '>' && *q != '\'' && *q != '"')
            q++;
        j_buf_add(st, b, p, (size_t)(q - p));
        if (q == end)
            break;
        switch (*q) {
        case '&': j_buf_adds(st, b, "&amp;"); break;
        case '<': j_buf_adds(st, b, "&lt;"); break;
        case '>': j_buf_adds(st, b, "&gt;"); break;
        case '\'': j_buf_adds(st, b, "&#39;"); break;
        default: j_buf_adds(st, b, "&#34;"); break;
        }
        p = q + 1;
    }
}
