/* builtins.c: the globals of Hugging Face's environment (range with the sandbox's 100,000 cap,
 * dict, namespace, cycler, joiner, raise_exception, strftime_now; lipsum refused), dict and list
 * methods (the ImmutableSandboxedEnvironment's rule: methods that change a list or dict are
 * unsafe, except list.pop and list.clear, which its table misses), and Python's two string
 * formattings: str % args and str.format. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "filters.h"
#include "methods.h"

#define MAX_RANGE 100000

static const char *const DICT_METHODS[] = {"clear", "copy", "fromkeys", "get", "items", "keys", "pop", "popitem",
                                           "setdefault", "update", "values", NULL};
static const char *const DICT_UNSAFE[] = {"clear", "pop", "popitem", "setdefault", "update", NULL};
static const char *const LIST_METHODS[] = {"append", "clear", "copy", "count", "extend", "index", "insert", "pop",
                                           "remove", "reverse", "sort", NULL};
static const char *const LIST_UNSAFE[] = {"append", "reverse", "insert", "sort", "extend", "remove", NULL};
static const char *const TUPLE_METHODS[] = {"count", "index", NULL};

bool j_has_method(jv self, const char *name, bool *unsafe)
{
    *unsafe = false;
    switch (self.t) {
    case JT_STR: return m_str_has(name);
    case JT_DICT:
        *unsafe = m_in(DICT_UNSAFE, name);
        return m_in(DICT_METHODS, name);
    case JT_LIST:
        if (self.l->kind == JL_LIST) {
            *unsafe = m_in(LIST_UNSAFE, name);
            return m_in(LIST_METHODS, name);
        }
        if (self.l->kind == JL_TUPLE || self.l->kind == JL_RANGE)
            return m_in(TUPLE_METHODS, name);
        return false;
    default: return false;
    }
}

static jv list_index(jstate *st, jv self, jargs *a, bool count)
{
    jv arg[3];
    j_bind(st, count ? "count" : "index", count ? "value" : "value,start=0,stop=9223372036854775807", a, arg, count ? 1 : 3);
    const jlist *l = self.l;
    int64_t n = (int64_t)l->n, from = 0, to = n, hits = 0;
    if (!count) {
        from = f_int_arg(st, "index", arg[1]);
        to = f_int_arg(st, "index", arg[2]);
        if (from < 0)
            from = from + n < 0 ? 0 : from + n;
        if (to < 0)
            to = to + n < 0 ? 0 : to + n;
    }
    for (int64_t i = from; i < to && i < n; i++) {
        j_charge(st, 1);
        if (j_equal(st, j_list_at(l, (size_t)i), arg[0])) {
            if (!count)
                return jv_int(i);
            hits++;
        }
    }
    if (!count)
        j_error(st, "%s is not in list", "value");
    return jv_int(hits);
}

jv j_method_call(jstate *st, jv self, const char *name, jargs *a)
{
    j_charge(st, 1);
    bool unsafe;
    if (!j_has_method(self, name, &unsafe))
        j_error(st, "'%s' object has no attribute '%s'", j_type_name(self), name);
    if (unsafe)
        j_fail(st, NU_LLM_TEMPLATE_ERROR, "access to attribute '%s' of '%s' object is unsafe.", name, j_type_name(self));
    if (self.t == JT_STR)
        return m_str_call(st, self, name, a);
    if (self.t == JT_DICT) {
        const jdict *d = self.d;
        if (!strcmp(name, "get")) {
            jv arg[2], v;
            j_bind(st, "get", "key,default=none", a, arg, 2);
            return j_dict_get(st, d, arg[0], &v) ? v : arg[1];
        }
        if (!strcmp(name, "keys") || !strcmp(name, "values") || !strcmp(name, "items")) {
            j_bind(st, name, "", a, NULL, 0);
            jlist *l = j_list_new(st, name[0] == 'k' ? JL_KEYS : name[0] == 'v' ? JL_VALUES : JL_ITEMS, d->n);
            for (size_t i = 0; i < d->n; i++)
                l->v[l->n++] = name[0] == 'k' ? d->keys[i] : name[0] == 'v' ? d->vals[i] : j_tuple2(st, d->keys[i], d->vals[i]);
            return jv_listv(l);
        }
        if (!strcmp(name, "copy")) {
            j_bind(st, name, "", a, NULL, 0);
            jdict *c = j_dict_new(st, d->n);
            for (size_t i = 0; i < d->n; i++)
                j_dict_set(st, c, d->keys[i], d->vals[i]);
            return jv_dictv(c);
        }
        j_unsupported(st, "the dict method '%s' is not supported", name);
    }
    jlist *l = self.l;
    if (!strcmp(name, "index") || !strcmp(name, "count"))
        return list_index(st, self, a, name[0] == 'c');
    if (!strcmp(name, "copy")) {
        j_bind(st, name, "", a, NULL, 0);
        return jv_listv(j_to_list(st, self));
    }
    if (!strcmp(name, "clear")) {
        j_bind(st, name, "", a, NULL, 0);
        l->n = 0;
        return jv_none();
    }
    /* pop */
    jv arg[1];
    j_bind(st, "pop", "index=-1", a, arg, 1);
    if (!l->n)
        j_error(st, "pop from empty list");
    int64_t i = f_int_arg(st, "pop", arg[0]);
    if (i < 0)
        i += (int64_t)l->n;
    if (i < 0 || i >= (int64_t)l->n)
        j_error(st, "pop index out of range");
    jv v = l->v[i];
    memmove(l->v + i, l->v + i + 1, (l->n - (size_t)i - 1) * sizeof(jv));
    l->n--;
    return v;
}

/* ---- Globals ------------------------------------------------------------------------------------------- */

static jfunc G_RANGE = {.id = JF_RANGE}, G_DICT = {.id = JF_DICT}, G_NAMESPACE = {.id = JF_NAMESPACE},
             G_RAISE = {.id = JF_RAISE}, G_STRFTIME = {.id = JF_STRFTIME}, G_CYCLER = {.id = JF_CYCLER},
             G_JOINER = {.id = JF_JOINER}, G_LIPSUM = {.id = JF_LIPSUM};

bool j_global(const char *name, jv *out)
{
    static const struct { const char *name; jfunc *fn; } table[] = {
        {"range", &G_RANGE}, {"dict", &G_DICT}, {"namespace", &G_NAMESPACE}, {"raise_exception", &G_RAISE},
        {"strftime_now", &G_STRFTIME}, {"cycler", &G_CYCLER}, {"joiner", &G_JOINER}, {"lipsum", &G_LIPSUM},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(table[i].name, name)) {
            *out = (jv){.t = JT_FUNC, .fn = table[i].fn};
            return true;
        }
    return false;
}

/* dict(*args, **kwargs): a mapping or an iterable of pairs, then the keywords. */
static jdict *make_dict(jstate *st, const char *fname, jargs *a)
{
    if (a->npos > 1)
        j_error(st, "%s expected at most 1 argument, got %zu", fname, a->npos);
    jdict *d = j_dict_new(st, 0);
    if (a->npos) {
        jv src = a->pos[0];
        if (src.t == JT_DICT || src.t == JT_NS) {
            for (size_t i = 0; i < src.d->n; i++)
                j_dict_set(st, d, src.d->keys[i], src.d->vals[i]);
        } else {
            jiter it;
            j_iter_start(st, src, &it);
            jv x;
            while (j_iter_next(st, &it, &x)) {
                jlist *pair = j_to_list(st, x);
                if (pair->n != 2)
                    j_error(st, "dictionary update sequence element has length %zu; 2 is required", pair->n);
                j_dict_set(st, d, pair->v[0], pair->v[1]);
            }
        }
    }
    for (size_t i = 0; i < a->nkw; i++)
        j_dict_set(st, d, j_cstr(st, a->kwn[i]), a->kwv[i]);
    return d;
}

static jv range(jstate *st, jargs *a)
{
    if (a->nkw)
        j_error(st, "range() takes no keyword arguments");
    if (!a->npos || a->npos > 3)
        j_error(st, "range expected at least 1 argument, got %zu", a->npos);
    int64_t v[3] = {0, 0, 1};
    for (size_t i = 0; i < a->npos; i++) {
        if (a->pos[i].t != JT_INT && a->pos[i].t != JT_BOOL)
            j_error(st, "'%s' object cannot be interpreted as an integer", j_type_name(a->pos[i]));
        v[a->npos == 1 ? 1 : i] = a->pos[i].t == JT_BOOL ? a->pos[i].b : a->pos[i].i;
    }
    if (v[2] == 0)
        j_error(st, "range() arg 3 must not be zero");
    __int128 start = v[0], stop = v[1], step = v[2], count = 0;
    if (step > 0 && start < stop)
        count = (stop - start - 1) / step + 1;
    else if (step < 0 && start > stop)
        count = (start - stop - 1) / (-step) + 1;
    if (count > MAX_RANGE)
        j_error(st, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", MAX_RANGE);
    int64_t n = (int64_t)count;
    jlist *l = j_list_new(st, JL_RANGE, 0);
    l->n = (size_t)n;
    memcpy(l->r, v, sizeof v);
    return jv_listv(l);
}

/* datetime.now().strftime(fmt): %f is microseconds, %z and %Z are empty (a naive datetime); the
 * rest is the C library's, as Python's time.strftime. */
static jv strftime_now(jstate *st, jargs *a)
{
    jv arg[1];
    j_bind(st, "strftime_now", "format", a, arg, 1);
    if (arg[0].t != JT_STR)
        j_error(st, "strftime() argument 1 must be str, not %s", j_type_name(arg[0]));
    struct timespec ts;
    time_t t;
    long usec = 0;
    if (st->r->now_s) {
        t = (time_t)st->r->now_s;
    } else {
        clock_gettime(CLOCK_REALTIME, &ts);
        t = ts.tv_sec;
        usec = ts.tv_nsec / 1000;
    }
    struct tm tm;
    localtime_r(&t, &tm);
    jbuf b = {0};
    const char *p = arg[0].s->p, *end = p + arg[0].s->len;
    while (p < end) {
        if (*p != '%' || p + 1 >= end) {
            j_buf_addc(st, &b, *p++);
            continue;
        }
        /* one directive: glibc's flags and width, an E or O modifier, the conversion */
        const char *q = p + 1;
        while (q < end && strchr("_-0^#", *q) && q - p < 4)
            q++;
        while (q < end && *q >= '0' && *q <= '9' && q - p < 8)
            q++;
        if (q < end && (*q == 'E' || *q == 'O'))
            q++;
        char c = q < end ? *q : 0;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '%')) {
            j_buf_addc(st, &b, *p++); /* not a directive: the '%' stays, as the C library leaves it */
            continue;
        }
        q++;
        if (c == 'f') {
            j_buf_addf(st, &b, "%06ld", usec);
        } else if (c == 'z' || c == 'Z') {
            /* a naive datetime has no zone */
        } else {
            char spec[16], out[256];
            snprintf(spec, sizeof spec, "%.*s", (int)(q - p), p);
            size_t n = strftime(out, sizeof out, spec, &tm);
            j_buf_add(st, &b, out, n);
        }
        p = q;
    }
    return j_buf_str(st, &b);
}

static jv cycler_next(jstate *st, jobj *o, const char *m, jargs *a)
{
    j_bind(st, m, "", a, NULL, 0);
    if (!strcmp(m, "reset")) {
        o->pos = 0;
        return jv_none();
    }
    jv v = o->items->v[o->pos];
    o->pos = (o->pos + 1) % o->items->n;
    return v;
}

jv j_func_call(jstate *st, jfunc *fn, jargs *a)
{
    j_charge(st, 1);
    switch (fn->id) {
    case JF_RANGE: return range(st, a);
    case JF_DICT: return jv_dictv(make_dict(st, "dict", a));
    case JF_NAMESPACE: return (jv){.t = JT_NS, .d = make_dict(st, "Namespace", a)};
    case JF_RAISE: {
        jv arg[1];
        j_bind(st, "raise_exception", "message", a, arg, 1);
        jv msg = j_str_of(st, arg[0]);
        j_fail(st, NU_LLM_TEMPLATE_RAISED, "%s", msg.s->p);
    }
    case JF_STRFTIME: return strftime_now(st, a);
    case JF_CYCLER: {
        if (a->nkw)
            j_error(st, "cycler() takes no keyword arguments");
        if (!a->npos)
            j_error(st, "at least one item has to be provided");
        jobj *o = j_zalloc(st, sizeof *o);
        o->kind = JO_CYCLER;
        o->items = j_list_new(st, JL_TUPLE, a->npos);
        memcpy(o->items->v, a->pos, a->npos * sizeof(jv));
        o->items->n = a->npos;
        return (jv){.t = JT_OBJ, .obj = o};
    }
    case JF_JOINER: {
        jv arg[1];
        j_bind(st, "joiner", "sep=', '", a, arg, 1);
        jobj *o = j_zalloc(st, sizeof *o);
        o->kind = JO_JOINER;
        o->sep = arg[0];
        return (jv){.t = JT_OBJ, .obj = o};
    }
    case JF_LIPSUM: j_unsupported(st, "lipsum() (random text) is not supported");
    case JF_METHOD: return j_method_call(st, fn->self, fn->method, a);
    case JF_LOOP_CYCLE: return j_loop_cycle(st, fn->self.loop, a);
    case JF_LOOP_CHANGED: return j_loop_changed(st, fn->self.loop, a);
    case JF_OBJ_METHOD: return cycler_next(st, fn->self.obj, fn->method, a);
    default: j_error(st, "not callable");
    }
}

/* ---- str % args ------------------------------------------------------------------------------------------ */

static void pad_to(jstate *st, jbuf *b, const char *p, size_t len, size_t cps, int64_t width, bool left)
{
    int64_t pad = width > (int64_t)cps ? width - (int64_t)cps : 0;
    if (pad > (1 << 24))
        j_fail(st, NU_LLM_TEMPLATE_LIMIT, "a format width over the limit");
    if (!left)
        for (int64_t i = 0; i < pad; i++)
            j_buf_addc(st, b, ' ');
    j_buf_add(st, b, p, len);
    if (left)
        for (int64_t i = 0; i < pad; i++)
            j_buf_addc(st, b, ' ');
}

jv j_printf_format(jstate *st, jv fmt, jv args)
{
    if (fmt.markup)
        j_unsupported(st, "the %% operator on a safe (Markup) string");
    const jlist *tuple = args.t == JT_LIST && args.l->kind == JL_TUPLE ? args.l : NULL;
    size_t next = 0, nargs = tuple ? tuple->n : 1;
    bool used_mapping = false;
    jbuf b = {0};
    const char *p = fmt.s->p, *end = p + fmt.s->len;
    while (p < end) {
        if (*p != '%') {
            j_buf_addc(st, &b, *p++);
            continue;
        }
        p++;
        if (p < end && *p == '%') {
            j_buf_addc(st, &b, '%');
            p++;
            continue;
        }
        jv arg;
        bool have = false;
        if (p < end && *p == '(') {
            const char *q = memchr(p, ')', (size_t)(end - p));
            if (!q)
                j_error(st, "incomplete format key");
            if (args.t != JT_DICT)
                j_error(st, "format requires a mapping");
            if (!j_dict_get(st, args.d, j_str(st, p + 1, (size_t)(q - p - 1)), &arg))
                j_error(st, "KeyError: '%.*s'", (int)(q - p - 1), p + 1);
            have = used_mapping = true;
            p = q + 1;
        }
        char flags[8] = {0};
        size_t nf = 0;
        while (p < end && strchr("-+ #0", *p) && nf < 7)
            flags[nf++] = *p++;
        int64_t width = -1, prec = -1;
        if (p < end && *p == '*')
            j_unsupported(st, "'*' widths in %% formatting");
        for (; p < end && *p >= '0' && *p <= '9'; p++)
            width = width > (1 << 20) ? width : (width < 0 ? 0 : width) * 10 + (*p - '0'); /* no overflow */
        if (p < end && *p == '.') {
            prec = 0;
            for (p++; p < end && *p >= '0' && *p <= '9'; p++)
                prec = prec > (1 << 20) ? prec : prec * 10 + (*p - '0');
        }
        if (width > (1 << 20) || prec > (1 << 20))
            j_fail(st, NU_LLM_TEMPLATE_LIMIT, "a format width over the limit");
        if (p == end)
            j_error(st, "incomplete format");
        char conv = *p++;
        if (!have) {
            if (next >= nargs)
                j_error(st, "not enough arguments for format string");
            arg = tuple ? tuple->v[next] : args;
            next++;
        }
        bool left = strchr(flags, '-') != NULL;
        if (conv == 's' || conv == 'r') {
            jbuf t = {0};
            if (conv == 's')
                j_to_str(st, &t, arg);
            else
                j_repr(st, &t, arg);
            size_t len = t.len, cps = j_utf8_count(t.p, t.len);
            if (prec >= 0 && (size_t)prec < cps) {
                size_t off = 0;
                for (int64_t k = 0; k < prec; k++) {
                    size_t n;
                    j_utf8_next(t.p + off, t.p + t.len, &n);
                    off += n;
                }
                len = off;
                cps = (size_t)prec;
            }
            pad_to(st, &b, t.p, len, cps, width, left);
            continue;
        }
        if (!strchr("diuxXofFeEgG", conv))
            j_unsupported(st, "the %%%c conversion", conv);
        bool is_num = arg.t == JT_INT || arg.t == JT_BOOL || arg.t == JT_FLOAT;
        if (!is_num)
            j_error(st, "%%%c format: a real number is required, not %s", conv, j_type_name(arg));
        char spec[32], out[512];
        size_t k = 0;
        spec[k++] = '%';
        for (size_t i = 0; i < nf; i++)
            spec[k++] = flags[i];
        spec[k++] = '*';
        if (prec >= 0 || !strchr("diuxXo", conv)) { /* C ignores the 0 flag of an int given a precision */
            spec[k++] = '.';
            spec[k++] = '*';
        }
        int w = (int)(width < 0 ? 0 : width), pr = (int)(prec < 0 ? 6 : prec);
        if (strchr("diuxXo", conv)) {
            if (arg.t == JT_FLOAT && strchr("xXo", conv))
                j_error(st, "%%%c format: an integer is required, not float", conv);
            long long iv = arg.t == JT_FLOAT ? (long long)arg.f : arg.t == JT_BOOL ? arg.b : arg.i;
            memcpy(spec + k, "ll", 2);
            k += 2;
            spec[k++] = conv == 'i' || conv == 'u' ? 'd' : conv;
            spec[k] = 0;
            if (prec >= 0)
                snprintf(out, sizeof out, spec, w, pr, iv);
            else
                snprintf(out, sizeof out, spec, w, iv);
        } else {
            double fv = arg.t == JT_FLOAT ? arg.f : (double)(arg.t == JT_BOOL ? arg.b : arg.i);
            spec[k++] = conv;
            spec[k] = 0;
            snprintf(out, sizeof out, spec, w, pr, fv);
        }
        j_buf_adds(st, &b, out);
    }
    if (!used_mapping && next < nargs && args.t != JT_DICT)
        j_error(st, "not all arguments converted during string formatting");
    return j_buf_str(st, &b);
}

/* ---- str.format ----------------------------------------------------------------------------------------------- */

/* format(value, spec) for the specs templates use: [[fill]align][sign][0][width][.precision][type]. */
static void format_value(jstate *st, jbuf *b, jv v, const char *spec, size_t len)
{
    if (!len) {
        j_to_str(st, b, v);
        return;
    }
    const char *p = spec, *end = spec + len;
    uint32_t fill = ' ';
    char align = 0;
    size_t n;
    if (end - p >= 2) {
        uint32_t c = j_utf8_next(p, end, &n);
        if (p + n < end && strchr("<>^=", p[n])) {
            fill = c;
            align = p[n];
            p += n + 1;
        }
    }
    if (!align && p < end && strchr("<>^=", *p))
        align = *p++;
    char sign = 0;
    if (p < end && strchr("+- ", *p))
        sign = *p++;
    if (p < end && *p == '0') {
        if (!align) {
            fill = '0';
            align = '=';
        }
        p++;
    }
    /* Digits past the limits below stop counting (the spec is refused there): no overflow. */
    int64_t width = 0, prec = -1;
    for (; p < end && *p >= '0' && *p <= '9'; p++)
        width = width > (1 << 20) ? width : width * 10 + (*p - '0');
    if (p < end && *p == '.') {
        prec = 0;
        for (p++; p < end && *p >= '0' && *p <= '9'; p++)
            prec = prec > 1000 ? prec : prec * 10 + (*p - '0');
    }
    char type = p < end ? *p++ : 0;
    if (p != end || width > (1 << 20) || prec > 1000)
        j_unsupported(st, "the format spec '%.*s'", (int)len, spec);
    jbuf body = {0};
    bool numeric = false;
    if (v.t == JT_STR && (!type || type == 's')) {
        size_t cut = v.s->len;
        if (prec >= 0 && (size_t)prec < v.s->cps)
            cut = j_utf8_offset(v.s, (size_t)prec);
        j_buf_add(st, &body, v.s->p, cut);
        if (!align)
            align = '<';
    } else if ((v.t == JT_INT || v.t == JT_BOOL) && (!type || type == 'd') && prec < 0) {
        int64_t i = v.t == JT_BOOL ? v.b : v.i;
        j_buf_addf(st, &body, "%s%lld", i >= 0 && sign == '+' ? "+" : i >= 0 && sign == ' ' ? " " : "", (long long)i);
        numeric = true;
    } else if ((v.t == JT_INT || v.t == JT_BOOL || v.t == JT_FLOAT) && type && strchr("fFeEgG%", type)) {
        double f = v.t == JT_FLOAT ? v.f : (double)(v.t == JT_BOOL ? v.b : v.i);
        char fs[16];
        snprintf(fs, sizeof fs, "%%%s.*%c", sign == '+' ? "+" : sign == ' ' ? " " : "", type == '%' ? 'f' : type);
        j_buf_addf(st, &body, fs, (int)(prec < 0 ? 6 : prec), type == '%' ? f * 100 : f);
        if (type == '%')
            j_buf_addc(st, &body, '%');
        numeric = true;
    } else {
        j_unsupported(st, "the format spec '%.*s' for a %s", (int)len, spec, j_type_name(v));
    }
    if (!align)
        align = numeric ? '>' : '<';
    size_t cps = j_utf8_count(body.p, body.len);
    int64_t pad = width > (int64_t)cps ? width - (int64_t)cps : 0, left = 0;
    if (align == '>')
        left = pad;
    else if (align == '^')
        left = pad / 2;
    else if (align == '=') {
        if (body.len && strchr("+- ", body.p[0])) {
            j_buf_addc(st, b, body.p[0]);
            memmove(body.p, body.p + 1, --body.len);
        }
        left = pad;
    }
    for (int64_t i = 0; i < left; i++)
        j_buf_addcp(st, b, fill);
    j_buf_add(st, b, body.p, body.len);
    for (int64_t i = left; i < pad; i++)
        j_buf_addcp(st, b, fill);
}

jv m_format(jstate *st, jv self, jargs *a)
{
    jbuf b = {0};
    const char *p = self.s->p, *end = p + self.s->len;
    size_t auto_index = 0;
    bool manual = false, automatic = false;
    while (p < end) {
        if (*p == '}') {
            if (p + 1 < end && p[1] == '}') {
                j_buf_addc(st, &b, '}');
                p += 2;
                continue;
            }
            j_error(st, "Single '}' encountered in format string");
        }
        if (*p != '{') {
            j_buf_addc(st, &b, *p++);
            continue;
        }
        if (p + 1 < end && p[1] == '{') {
            j_buf_addc(st, &b, '{');
            p += 2;
            continue;
        }
        const char *q = memchr(p, '}', (size_t)(end - p));
        if (!q)
            j_error(st, "expected '}' before end of string");
        const char *field = p + 1, *fend = q;
        if (memchr(field, '{', (size_t)(fend - field)))
            j_unsupported(st, "nested replacement fields in str.format");
        const char *colon = memchr(field, ':', (size_t)(fend - field));
        const char *bang = memchr(field, '!', (size_t)((colon ? colon : fend) - field));
        const char *name_end = bang ? bang : colon ? colon : fend;
        /* the argument: auto, an index, or a keyword; then .attr / [key] parts */
        const char *part = field;
        while (part < name_end && *part != '.' && *part != '[')
            part++;
        jv v;
        if (part == field) {
            if (manual)
                j_error(st, "cannot switch from manual field specification to automatic field numbering");
            automatic = true;
            if (auto_index >= a->npos)
                j_error(st, "Replacement index %zu out of range for positional args tuple", auto_index);
            v = a->pos[auto_index++];
        } else if (*field >= '0' && *field <= '9') {
            if (automatic)
                j_error(st, "cannot switch from automatic field numbering to manual field specification");
            manual = true;
            size_t i = 0;
            for (const char *d = field; d < part; d++) /* saturating: past npos either way, no wrap */
                i = i > a->npos ? i : i * 10 + (size_t)(*d - '0');
            if (i >= a->npos)
                j_error(st, "Replacement index %zu out of range for positional args tuple", i);
            v = a->pos[i];
        } else {
            size_t k = 0;
            for (; k < a->nkw; k++)
                if (strlen(a->kwn[k]) == (size_t)(part - field) && !memcmp(a->kwn[k], field, (size_t)(part - field)))
                    break;
            if (k == a->nkw)
                j_error(st, "KeyError: '%.*s'", (int)(part - field), field);
            v = a->kwv[k];
        }
        while (part < name_end) {
            if (*part == '.') {
                const char *s = ++part;
                while (part < name_end && *part != '.' && *part != '[')
                    part++;
                jv attr = j_str(st, s, (size_t)(part - s));
                v = j_getattr(st, v, attr.s->p);
            } else {
                const char *s = ++part;
                const char *close = memchr(s, ']', (size_t)(name_end - s));
                if (!close)
                    j_error(st, "Missing ']' in format string");
                bool digits = close > s;
                for (const char *d = s; d < close; d++)
                    digits &= *d >= '0' && *d <= '9';
                jv key = j_str(st, s, (size_t)(close - s));
                if (digits) {
                    int64_t i = 0;
                    for (const char *d = s; d < close && i <= INT64_MAX / 10 - 9; d++) /* no overflow */
                        i = i * 10 + (*d - '0');
                    key = jv_int(i);
                }
                v = j_getitem(st, v, key);
                part = close + 1;
            }
        }
        if (bang) {
            char c = bang + 1 < fend ? bang[1] : 0;
            jbuf t = {0};
            if (c == 'r')
                j_repr(st, &t, v);
            else if (c == 's')
                j_to_str(st, &t, v);
            else
                j_unsupported(st, "the conversion '!%c' in str.format", c);
            v = j_buf_str(st, &t);
        }
        if (v.t == JT_UNDEF && colon)
            j_undef_raise(st, v);
        format_value(st, &b, v, colon ? colon + 1 : fend, colon ? (size_t)(fend - colon - 1) : 0);
        p = q + 1;
    }
    return j_buf_str(st, &b);
}
