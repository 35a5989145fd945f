/* eval.c: expressions: names, the sandbox's getattr and getitem (an attribute before an item for
 * obj.x, an item before an attribute for obj[x]; a missing one is an Undefined that remembers
 * how it was made), calls, operators with Python's semantics (ints within 64 bits), `in`,
 * comparison chains, and markupsafe's Markup for `+` (a safe string escapes what is added). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "jinja.h"

/* ---- Names and scopes ------------------------------------------------------------------------ */

jscope *j_scope_new(jstate *st, jscope *parent)
{
    jscope *s = j_zalloc(st, sizeof *s);
    s->parent = parent;
    s->vars = j_dict_new(st, 0);
    return s;
}

void j_scope_set(jstate *st, jscope *sc, const char *name, jv v)
{
    j_dict_set(st, sc->vars, j_cstr(st, name), v);
}

void j_scope_setv(jstate *st, jscope *sc, jv key, jv v) { j_dict_set(st, sc->vars, key, v); }

jv j_lookup(jstate *st, jscope *sc, const char *name)
{
    size_t len = strlen(name);
    jv v;
    for (jscope *s = sc; s; s = s->parent) {
        if (s->dead)
            j_unsupported(st, "'%s' read by a macro made in a for loop and called after the loop (Jinja2 gives "
                          "its internal 'missing' there)", name);
        if (j_dict_gets(s->vars, name, len, &v))
            return v;
    }
    if (j_global(name, &v))
        return v;
    return j_undef_name(st, name);
}

/* ---- Attributes and items -------------------------------------------------------------------- */

static jv unsafe_attr(jstate *st, jv obj, const char *name)
{
    jbuf b = {0};
    j_buf_adds(st, &b, "access to attribute '");
    j_buf_adds(st, &b, name);
    j_buf_adds(st, &b, "' of '");
    j_buf_adds(st, &b, j_type_name(obj));
    j_buf_adds(st, &b, "' object is unsafe.");
    j_buf_addc(st, &b, 0);
    return jv_undef(j_undef_new(st, b.p, obj, true, j_cstr(st, name), JU_SECURITY));
}

static jv bound(jstate *st, jfn id, jv self, const char *name)
{
    jfunc *f = j_zalloc(st, sizeof *f);
    f->id = (uint8_t)id;
    f->self = self;
    f->method = name;
    return (jv){.t = JT_FUNC, .fn = f};
}

/* Python attributes of numbers and macros that no template reads: refused rather than guessed. */
static bool refused_attr(jv obj, const char *name)
{
    static const char *const num[] = {"real", "imag", "numerator", "denominator", "conjugate", "bit_length",
                                      "bit_count", "to_bytes", "from_bytes", "as_integer_ratio", "is_integer",
                                      "hex", "fromhex", NULL};
    static const char *const macro[] = {"name", "arguments", "defaults", "catch_kwargs", "catch_varargs",
                                        "caller", NULL};
    const char *const *list = obj.t == JT_INT || obj.t == JT_FLOAT || obj.t == JT_BOOL ? num
                              : obj.t == JT_MACRO                                       ? macro
                                                                                        : NULL;
    for (; list && *list; list++)
        if (!strcmp(*list, name))
            return true;
    return false;
}

/* getattr(obj, name) as Python: a real attribute, or *found false. */
jv j_attr_only(jstate *st, jv obj, const char *name, bool *found)
{
    *found = true;
    size_t len = strlen(name);
    if (len > 4 && name[0] == '_' && name[1] == '_' && name[len - 1] == '_' && name[len - 2] == '_')
        return unsafe_attr(st, obj, name); /* Python's internals exist on every object */
    bool unsafe = false;
    switch (obj.t) {
    case JT_STR:
    case JT_DICT:
    case JT_LIST:
        if (j_has_method(obj, name, &unsafe))
            return unsafe ? unsafe_attr(st, obj, name) : bound(st, JF_METHOD, obj, name);
        break;
    case JT_NS: {
        jv v;
        if (j_dict_gets(obj.d, name, len, &v))
            return v;
        break;
    }
    case JT_LOOP: {
        jv v = j_loop_attr(st, obj.loop, name, found);
        if (*found)
            return v;
        break;
    }
    case JT_OBJ:
        if (obj.obj->kind == JO_CYCLER) {
            if (!strcmp(name, "current"))
                return obj.obj->items->v[obj.obj->pos];
            if (!strcmp(name, "next") || !strcmp(name, "reset"))
                return bound(st, JF_OBJ_METHOD, obj, name);
        }
        break;
    default:
        if (refused_attr(obj, name))
            j_unsupported(st, "the attribute '%s' of a %s is not supported", name, j_type_name(obj));
        break;
    }
    *found = false;
    return jv_none();
}

jv j_getattr(jstate *st, jv obj, const char *name)
{
    j_need_defined(st, obj);
    bool found;
    jv v = j_attr_only(st, obj, name, &found);
    if (found)
        return v;
    if (obj.t == JT_DICT && j_dict_gets(obj.d, name, strlen(name), &v))
        return v;
    return j_undef_attr(st, obj, j_cstr(st, name));
}

/* Python's slice.indices(length) and the resulting count. */
static bool slice_bounds(jstate *st, const jslice *s, int64_t length, int64_t *start, int64_t *stop, int64_t *step)
{
    jv parts[3] = {s->a, s->b, s->c};
    for (int i = 0; i < 3; i++)
        if (parts[i].t != JT_NONE && parts[i].t != JT_INT && parts[i].t != JT_BOOL)
            return false; /* a TypeError, which getitem turns into Undefined */
    *step = s->c.t == JT_NONE ? 1 : s->c.t == JT_BOOL ? s->c.b : s->c.i;
    if (*step == 0)
        j_error(st, "slice step cannot be zero");
    if (*step == INT64_MIN)
        *step = -INT64_MAX;
    int64_t lo = *step < 0 ? -1 : 0, hi = *step < 0 ? length - 1 : length;
    for (int k = 0; k < 2; k++) {
        jv x = k ? s->b : s->a;
        int64_t v;
        if (x.t == JT_NONE) {
            v = (k == 0) == (*step < 0) ? hi : lo; /* start: the end a negative step begins at */
        } else {
            v = x.t == JT_BOOL ? x.b : x.i;
            if (v < 0)
                v = v < -length ? lo : v + length;
            else if (v >= length)
                v = hi;
        }
        *(k ? stop : start) = v;
    }
    return true;
}

static int64_t slice_count(int64_t start, int64_t stop, int64_t step)
{
    if (step < 0)
        return stop < start ? (start - stop - 1) / (-step) + 1 : 0;
    return start < stop ? (stop - start - 1) / step + 1 : 0;
}

static bool index_of(jv key, int64_t length, int64_t *at)
{
    if (key.t != JT_INT && key.t != JT_BOOL)
        return false;
    int64_t i = key.t == JT_BOOL ? key.b : key.i;
    if (i < 0)
        i += length;
    if (i < 0 || i >= length)
        return false;
    *at = i;
    return true;
}

/* obj[key] as Python; *ok false for the TypeError / LookupError cases getitem recovers from. */
static jv py_item(jstate *st, jv obj, jv key, bool *ok)
{
    *ok = true;
    switch (obj.t) {
    case JT_STR: {
        const jstr *s = obj.s;
        if (key.t == JT_SLICE) {
            int64_t a, b, c;
            if (!slice_bounds(st, key.sl, (int64_t)s->cps, &a, &b, &c))
                break;
            int64_t n = slice_count(a, b, c);
            j_charge(st, (uint64_t)n / 64);
            jv out;
            if (c == 1) {
                size_t from = j_utf8_offset(s, (size_t)a), to = j_utf8_offset(s, (size_t)(a + n));
                out = j_str(st, s->p + from, to - from);
            } else {
                jbuf b2 = {0};
                for (int64_t k = 0, i = a; k < n; k++, i += c) {
                    size_t off = j_utf8_offset(s, (size_t)i), len;
                    j_utf8_next(s->p + off, s->p + s->len, &len);
                    j_buf_add(st, &b2, s->p + off, len);
                }
                out = j_buf_str(st, &b2);
            }
            out.markup = obj.markup;
            return out;
        }
        int64_t i;
        if (!index_of(key, (int64_t)s->cps, &i))
            break;
        size_t off = j_utf8_offset(s, (size_t)i), len;
        j_utf8_next(s->p + off, s->p + s->len, &len);
        jv out = j_str(st, s->p + off, len);
        out.markup = obj.markup;
        return out;
    }
    case JT_LIST: {
        const jlist *l = obj.l;
        if (l->kind != JL_LIST && l->kind != JL_TUPLE && l->kind != JL_RANGE)
            break;
        if (key.t == JT_SLICE) {
            int64_t a, b, c;
            if (!slice_bounds(st, key.sl, (int64_t)l->n, &a, &b, &c))
                break;
            int64_t n = slice_count(a, b, c);
            if (l->kind == JL_RANGE) { /* a range again, as Python's */
                jlist *out = j_list_new(st, JL_RANGE, 0);
                out->n = (size_t)n;
                out->r[0] = l->r[0] + a * l->r[2];
                out->r[1] = l->r[0] + b * l->r[2];
                out->r[2] = l->r[2] * c;
                return jv_listv(out);
            }
            jlist *out = j_list_new(st, (jlk)l->kind, (size_t)n);
            for (int64_t k = 0, i = a; k < n; k++, i += c)
                out->v[out->n++] = l->v[i];
            return jv_listv(out);
        }
        int64_t i;
        if (!index_of(key, (int64_t)l->n, &i))
            break;
        return j_list_at(l, (size_t)i);
    }
    case JT_DICT: {
        jv v;
        if (key.t == JT_LIST && key.l->kind != JL_TUPLE)
            break; /* unhashable: a TypeError */
        if (key.t == JT_DICT || key.t == JT_SLICE)
            break;
        if (j_dict_get(st, obj.d, key, &v))
            return v;
        break;
    }
    default: break;
    }
    *ok = false;
    return jv_none();
}

jv j_getitem(jstate *st, jv obj, jv key)
{
    j_need_defined(st, obj);
    bool ok;
    jv v = py_item(st, obj, key, &ok);
    if (ok)
        return v;
    if (key.t == JT_STR) {
        bool found;
        v = j_attr_only(st, obj, key.s->p, &found);
        if (found)
            return v;
    }
    return j_undef_attr(st, obj, key);
}

/* ---- Operators --------------------------------------------------------------------------------- */

static bool is_num(jv v) { return v.t == JT_BOOL || v.t == JT_INT || v.t == JT_FLOAT; }
static bool is_int(jv v) { return v.t == JT_BOOL || v.t == JT_INT; }
static int64_t ival(jv v) { return v.t == JT_BOOL ? v.b : v.i; }
static double fval(jv v) { return v.t == JT_FLOAT ? v.f : (double)ival(v); }

static _Noreturn void overflow(jstate *st) { j_unsupported(st, "integer arithmetic beyond 64 bits"); }

static _Noreturn void operand_error(jstate *st, const char *op, jv a, jv b)
{
    if (op[0] == '+' && !op[1] && (a.t == JT_STR || (a.t == JT_LIST && (a.l->kind == JL_LIST || a.l->kind == JL_TUPLE))))
        j_error(st, "can only concatenate %s (not \"%s\") to %s", j_type_name(a), j_type_name(b), j_type_name(a));
    j_error(st, "unsupported operand type(s) for %s: '%s' and '%s'", op, j_type_name(a), j_type_name(b));
}

static jv str_concat(jstate *st, jv a, jv b)
{
    jbuf buf = {0};
    bool markup = a.markup || b.markup;
    if (markup && !a.markup)
        j_html_escape(st, &buf, a.s->p, a.s->len);
    else
        j_buf_add(st, &buf, a.s->p, a.s->len);
    if (markup && !b.markup)
        j_html_escape(st, &buf, b.s->p, b.s->len);
    else
        j_buf_add(st, &buf, b.s->p, b.s->len);
    j_charge(st, buf.len / 64);
    jv out = j_buf_str(st, &buf);
    out.markup = markup;
    return out;
}

static jv repeat(jstate *st, jv seq, int64_t times)
{
    if (times < 0)
        times = 0;
    if (seq.t == JT_STR) {
        if (seq.s->len && (uint64_t)times > SIZE_MAX / seq.s->len)
            j_fail(st, NU_LLM_TEMPLATE_LIMIT, "a repeated string too large");
        size_t total = seq.s->len * (size_t)times;
        if (st->r && total > st->r->output_limit)
            j_fail(st, NU_LLM_TEMPLATE_LIMIT, "a repeated string of %zu bytes is over the output limit", total);
        j_charge(st, total / 64);
        jbuf b = {0};
        for (int64_t i = 0; i < times; i++)
            j_buf_add(st, &b, seq.s->p, seq.s->len);
        return j_buf_str_markup(st, &b, seq.markup);
    }
    const jlist *l = seq.l;
    if (l->n && (uint64_t)times > ((size_t)1 << 28) / l->n)
        j_fail(st, NU_LLM_TEMPLATE_LIMIT, "a repeated list too large");
    jlist *out = j_list_new(st, l->kind == JL_TUPLE ? JL_TUPLE : JL_LIST, l->n * (size_t)times);
    j_charge(st, l->n * (size_t)times / 8);
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < l->n; k++)
            out->v[out->n++] = l->v[k];
    return jv_listv(out);
}

/* Python's float floor division and modulo (floatobject.c's float_divmod). */
static void float_divmod(double vx, double wx, double *div_out, double *mod_out)
{
    double mod = fmod(vx, wx), div = (vx - mod) / wx;
    if (mod) {
        if ((wx < 0) != (mod < 0)) {
            mod += wx;
            div -= 1.0;
        }
    } else {
        mod = copysign(0.0, wx);
    }
    double floordiv;
    if (div) {
        floordiv = floor(div);
        if (div - floordiv > 0.5)
            floordiv += 1.0;
    } else {
        floordiv = copysign(0.0, vx / wx);
    }
    *div_out = floordiv;
    *mod_out = mod;
}

static jv int_pow(jstate *st, int64_t base, int64_t exp)
{
    if (exp < 0) {
        if (base == 0)
            j_error(st, "0.0 cannot be raised to a negative power");
        return jv_float(pow((double)base, (double)exp));
    }
    int64_t r = 1;
    while (exp) {
        if (exp & 1 && __builtin_mul_overflow(r, base, &r))
            overflow(st);
        exp >>= 1;
        if (exp && __builtin_mul_overflow(base, base, &base))
            overflow(st);
    }
    return jv_int(r);
}

jv j_binop(jstate *st, int op, jv a, jv b)
{
    j_need_defined(st, a);
    j_need_defined(st, b);
    static const char *const names[] = {"+", "-", "*", "/", "//", "%", "**"};
    const char *name = names[op];
    if (is_num(a) && is_num(b)) {
        bool ints = is_int(a) && is_int(b);
        int64_t x = ival(a), y = ival(b), r;
        double fx = fval(a), fy = fval(b);
        switch (op) {
        case OP_ADD:
            if (!ints)
                return jv_float(fx + fy);
            if (__builtin_add_overflow(x, y, &r))
                overflow(st);
            return jv_int(r);
        case OP_SUB:
            if (!ints)
                return jv_float(fx - fy);
            if (__builtin_sub_overflow(x, y, &r))
                overflow(st);
            return jv_int(r);
        case OP_MUL:
            if (!ints)
                return jv_float(fx * fy);
            if (__builtin_mul_overflow(x, y, &r))
                overflow(st);
            return jv_int(r);
        case OP_DIV:
            if (fy == 0)
                j_error(st, ints ? "division by zero" : "float division by zero");
            if (ints && (fabs(fx) > 9007199254740992.0 || fabs(fy) > 9007199254740992.0))
                j_unsupported(st, "true division of integers beyond 2**53");
            return jv_float(fx / fy);
        case OP_FLOORDIV:
        case OP_MOD:
            if (ints) {
                if (y == 0)
                    j_error(st, op == OP_MOD ? "integer modulo by zero" : "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) {
                    if (op == OP_MOD)
                        return jv_int(0);
                    overflow(st);
                }
                int64_t q = x / y, m = x % y;
                if (m && ((m < 0) != (y < 0))) {
                    m += y;
                    q -= 1;
                }
                return jv_int(op == OP_MOD ? m : q);
            }
            if (fy == 0)
                j_error(st, op == OP_MOD ? "float modulo" : "float divmod()");
            {
                double d, m;
                float_divmod(fx, fy, &d, &m);
                return jv_float(op == OP_MOD ? m : d);
            }
        case OP_POW:
            if (ints)
                return int_pow(st, x, y);
            if (fx == 0 && fy < 0)
                j_error(st, "0.0 cannot be raised to a negative power");
            if (fx < 0 && fy != floor(fy))
                j_unsupported(st, "a negative number raised to a fractional power (a complex number)");
            return jv_float(pow(fx, fy));
        }
    }
    switch (op) {
    case OP_ADD:
        if (a.t == JT_STR && b.t == JT_STR)
            return str_concat(st, a, b);
        if (a.t == JT_LIST && b.t == JT_LIST && (a.l->kind == JL_LIST || a.l->kind == JL_TUPLE) &&
            a.l->kind == b.l->kind) {
            jlist *out = j_list_new(st, (jlk)a.l->kind, a.l->n + b.l->n);
            if (a.l->n)
                memcpy(out->v, a.l->v, a.l->n * sizeof(jv));
            if (b.l->n)
                memcpy(out->v + a.l->n, b.l->v, b.l->n * sizeof(jv));
            out->n = a.l->n + b.l->n;
            j_charge(st, out->n / 16);
            return jv_listv(out);
        }
        break;
    case OP_MUL: {
        jv seq = a, times = b;
        if (is_int(a) && (b.t == JT_STR || b.t == JT_LIST))
            seq = b, times = a;
        if (is_int(times) && (seq.t == JT_STR || (seq.t == JT_LIST && (seq.l->kind == JL_LIST || seq.l->kind == JL_TUPLE))))
            return repeat(st, seq, ival(times));
        break;
    }
    case OP_MOD:
        if (a.t == JT_STR)
            return j_printf_format(st, a, b);
        break;
    default: break;
    }
    operand_error(st, name, a, b);
}

bool j_contains(jstate *st, jv c, jv item)
{
    switch (c.t) {
    case JT_UNDEF: return false;
    case JT_STR:
        if (item.t != JT_STR)
            j_error(st, "'in <string>' requires string as left operand, not %s", j_type_name(item));
        if (!item.s->len)
            return true;
        j_charge(st, c.s->len / 64);
        return c.s->len >= item.s->len && memmem(c.s->p, c.s->len, item.s->p, item.s->len) != NULL;
    case JT_DICT:
        if ((item.t == JT_LIST && item.l->kind != JL_TUPLE) || item.t == JT_DICT)
            j_error(st, "unhashable type: '%s'", j_type_name(item));
        return j_dict_get(st, c.d, item, NULL);
    case JT_LIST: {
        jiter it;
        j_iter_start(st, c, &it);
        jv x;
        while (j_iter_next(st, &it, &x)) {
            j_charge(st, 1);
            if (j_equal(st, x, item))
                return true;
        }
        return false;
    }
    default: j_error(st, "argument of type '%s' is not iterable", j_type_name(c));
    }
}

/* ---- Calls ---------------------------------------------------------------------------------------- */

static void push_arg(jstate *st, jargs *a, size_t *cap, jv v)
{
    if (a->npos == *cap) {
        size_t c = *cap ? *cap * 2 : 4;
        jv *p = j_alloc_array(st, c, sizeof(jv));
        if (a->npos)
            memcpy(p, a->pos, a->npos * sizeof(jv));
        a->pos = p;
        *cap = c;
    }
    a->pos[a->npos++] = v;
}

static void push_kw(jstate *st, jargs *a, size_t *cap, const char *name, jv v)
{
    for (size_t i = 0; i < a->nkw; i++)
        if (!strcmp(a->kwn[i], name))
            j_error(st, "got multiple values for keyword argument '%s'", name);
    if (a->nkw == *cap) {
        size_t c = *cap ? *cap * 2 : 4;
        const char **n = j_alloc_array(st, c, sizeof(char *));
        jv *v2 = j_alloc_array(st, c, sizeof(jv));
        if (a->nkw) {
            memcpy(n, a->kwn, a->nkw * sizeof(char *));
            memcpy(v2, a->kwv, a->nkw * sizeof(jv));
        }
        a->kwn = n;
        a->kwv = v2;
        *cap = c;
    }
    a->kwn[a->nkw] = name;
    a->kwv[a->nkw++] = v;
}

/* Evaluates a call's (or filter's, test's) arguments. */
static void eval_args(jstate *st, jscope *sc, const jnode *n, jargs *a, const char *extra_kw, jv extra)
{
    memset(a, 0, sizeof *a);
    size_t cap = 0, kwcap = 0;
    for (size_t i = 0; i < n->n; i++)
        push_arg(st, a, &cap, j_eval(st, sc, n->items[i]));
    for (size_t i = 0; i < n->nkw; i++)
        push_kw(st, a, &kwcap, n->kw[i].name, j_eval(st, sc, n->kw[i].value));
    if (extra_kw)
        push_kw(st, a, &kwcap, extra_kw, extra);
    if (n->dyn_args) {
        jv v = j_eval(st, sc, n->dyn_args);
        jiter it;
        j_iter_start(st, v, &it);
        jv x;
        while (j_iter_next(st, &it, &x))
            push_arg(st, a, &cap, x);
    }
    if (n->dyn_kwargs) {
        jv v = j_eval(st, sc, n->dyn_kwargs);
        if (v.t != JT_DICT)
            j_error(st, "argument after ** must be a mapping, not %s", j_type_name(v));
        for (size_t i = 0; i < v.d->n; i++) {
            if (v.d->keys[i].t != JT_STR)
                j_error(st, "keywords must be strings");
            push_kw(st, a, &kwcap, v.d->keys[i].s->p, v.d->vals[i]);
        }
    }
}

jv j_call(jstate *st, jv callee, jargs *args)
{
    switch (callee.t) {
    case JT_UNDEF: j_undef_raise(st, callee);
    case JT_MACRO: return j_macro_call(st, callee.m, args);
    case JT_FUNC: return j_func_call(st, callee.fn, args);
    case JT_LOOP:
        if (args->npos != 1 || args->nkw)
            j_error(st, "loop() takes exactly one argument");
        return j_loop_recurse(st, callee.loop, args->pos[0]);
    case JT_OBJ:
        if (callee.obj->kind == JO_JOINER) {
            if (args->npos || args->nkw)
                j_error(st, "joiner() takes no arguments");
            if (!callee.obj->used) {
                callee.obj->used = true;
                return j_str(st, "", 0);
            }
            return callee.obj->sep;
        }
        break;
    default: break;
    }
    j_error(st, "'%s' object is not callable", j_type_name(callee));
}

/* ---- Expressions ------------------------------------------------------------------------------------ */

static jv eval_compare(jstate *st, jscope *sc, const jnode *n)
{
    jv left = j_eval(st, sc, n->a);
    for (size_t i = 0; i < n->n; i++) {
        jv right = j_eval(st, sc, n->items[i]);
        bool r;
        int op = n->ops[i];
        switch (op) {
        case OP_EQ: r = j_equal(st, left, right); break;
        case OP_NE: r = !j_equal(st, left, right); break;
        case OP_IN: r = j_contains(st, right, left); break;
        case OP_NOTIN: r = !j_contains(st, right, left); break;
        default: {
            static const char *const sym[] = {[OP_LT] = "<", [OP_LTEQ] = "<=", [OP_GT] = ">", [OP_GTEQ] = ">="};
            int c = j_compare(st, left, right, sym[op]);
            r = c != 2 && (op == OP_LT ? c < 0 : op == OP_LTEQ ? c <= 0 : op == OP_GT ? c > 0 : c >= 0);
        }
        }
        if (!r)
            return jv_bool(false);
        left = right;
    }
    return jv_bool(true);
}

static jv eval_call(jstate *st, jscope *sc, const jnode *n)
{
    jargs args;
    const jnode *callee = n->a;
    if (callee->kind == N_GETATTR) {
        jv self = j_eval(st, sc, callee->a);
        j_need_defined(st, self);
        bool unsafe;
        if ((self.t == JT_STR || self.t == JT_DICT || self.t == JT_LIST) && j_has_method(self, callee->name, &unsafe) &&
            !unsafe) {
            eval_args(st, sc, n, &args, NULL, jv_none());
            return j_method_call(st, self, callee->name, &args);
        }
        jv f = j_getattr(st, self, callee->name);
        eval_args(st, sc, n, &args, NULL, jv_none());
        return j_call(st, f, &args);
    }
    jv f = j_eval(st, sc, callee);
    eval_args(st, sc, n, &args, NULL, jv_none());
    return j_call(st, f, &args);
}

/* Calls with one extra keyword argument (a call block's caller). */
jv j_eval_call_with(jstate *st, jscope *sc, const jnode *n, const char *kw, jv v)
{
    jargs args;
    jv f = j_eval(st, sc, n->a);
    eval_args(st, sc, n, &args, kw, v);
    return j_call(st, f, &args);
}

jv j_apply_filter_node(jstate *st, jscope *sc, const jnode *n, jv input)
{
    jargs args;
    eval_args(st, sc, n, &args, NULL, jv_none());
    if (n->fid == 0xffff)
        j_error(st, "No filter named '%s' found.", n->name);
    return j_filter_apply(st, n->fid, n->name, input, &args);
}

static jv eval_node(jstate *st, jscope *sc, const jnode *n)
{
    switch (n->kind) {
    case N_CONST: return n->val;
    case N_NAME: return j_lookup(st, sc, n->name);
    case N_GETATTR: return j_getattr(st, j_eval(st, sc, n->a), n->name);
    case N_GETITEM: {
        jv obj = j_eval(st, sc, n->a);
        return j_getitem(st, obj, j_eval(st, sc, n->b));
    }
    case N_SLICE: {
        jslice *s = j_alloc(st, sizeof *s);
        s->a = n->b ? j_eval(st, sc, n->b) : jv_none();
        s->b = n->c ? j_eval(st, sc, n->c) : jv_none();
        s->c = n->d ? j_eval(st, sc, n->d) : jv_none();
        return (jv){.t = JT_SLICE, .sl = s};
    }
    case N_CALL: return eval_call(st, sc, n);
    case N_FILTER: return j_apply_filter_node(st, sc, n, j_eval(st, sc, n->a));
    case N_TEST: {
        jv v = j_eval(st, sc, n->a);
        jargs args;
        eval_args(st, sc, n, &args, NULL, jv_none());
        if (n->fid == 0xffff)
            j_error(st, "No test named '%s' found.", n->name);
        return jv_bool(j_test_apply(st, n->fid, n->name, v, &args));
    }
    case N_NOT: return jv_bool(!j_truthy(st, j_eval(st, sc, n->a)));
    case N_NEG:
    case N_POS: {
        jv v = j_eval(st, sc, n->a);
        j_need_defined(st, v);
        if (v.t == JT_FLOAT)
            return jv_float(n->kind == N_NEG ? -v.f : v.f);
        if (v.t == JT_INT || v.t == JT_BOOL) {
            int64_t i = ival(v);
            if (n->kind == N_POS)
                return jv_int(i);
            if (i == INT64_MIN)
                overflow(st);
            return jv_int(-i);
        }
        j_error(st, "bad operand type for unary %c: '%s'", n->kind == N_NEG ? '-' : '+', j_type_name(v));
    }
    case N_BINOP: {
        jv a = j_eval(st, sc, n->a);
        return j_binop(st, n->op, a, j_eval(st, sc, n->b));
    }
    case N_AND: {
        jv a = j_eval(st, sc, n->a);
        return j_truthy(st, a) ? j_eval(st, sc, n->b) : a;
    }
    case N_OR: {
        jv a = j_eval(st, sc, n->a);
        return j_truthy(st, a) ? a : j_eval(st, sc, n->b);
    }
    case N_CONCAT: {
        jbuf b = {0};
        for (size_t i = 0; i < n->n; i++)
            j_to_str(st, &b, j_eval(st, sc, n->items[i]));
        j_charge(st, b.len / 64);
        return j_buf_str(st, &b);
    }
    case N_COMPARE: return eval_compare(st, sc, n);
    case N_CONDEXPR:
        if (j_truthy(st, j_eval(st, sc, n->a)))
            return j_eval(st, sc, n->b);
        if (n->c)
            return j_eval(st, sc, n->c);
        return j_undef_hint(st, j_strf(st, "the inline if-expression on line %u evaluated to false and no else "
                                           "section was defined.", n->line).s->p);
    case N_LIST:
    case N_TUPLE: {
        jlist *l = j_list_new(st, n->kind == N_LIST ? JL_LIST : JL_TUPLE, n->n);
        for (size_t i = 0; i < n->n; i++)
            l->v[l->n++] = j_eval(st, sc, n->items[i]);
        return jv_listv(l);
    }
    case N_DICT: {
        jdict *d = j_dict_new(st, n->n / 2);
        for (size_t i = 0; i + 1 < n->n; i += 2) {
            jv k = j_eval(st, sc, n->items[i]);
            j_dict_set(st, d, k, j_eval(st, sc, n->items[i + 1]));
        }
        return jv_dictv(d);
    }
    default: j_fail(st, NU_LLM_TEMPLATE_ERROR, "internal: node %d is not an expression", n->kind);
    }
}

jv j_eval(jstate *st, jscope *sc, const jnode *n)
{
    j_charge(st, 1);
    j_enter(st);
    uint32_t line = st->line;
    st->line = n->line;
    jv v = eval_node(st, sc, n);
    st->line = line;
    j_leave(st);
    return v;
}
