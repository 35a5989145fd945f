/* exec.c: statements, with Jinja2's scoping: `if` shares its scope; a for loop's every iteration,
 * a macro call, a call block's caller, and the bodies of filter, set and with blocks each get a
 * new scope whose lookups fall through to the enclosing one (what Jinja2's frames amount to: a
 * {% set %} in a loop body is gone at the next iteration and after the loop; namespace()
 * objects are how templates carry state out). The loop variable is Jinja2's LoopContext:
 * index, index0, revindex, revindex0, first, last, length, previtem, nextitem, depth, depth0,
 * cycle(), changed(), and loop(items) for recursive loops; a loop filter (for x in y if c) is
 * applied lazily, and length forces the rest as Jinja2 does. */
#include <stdio.h>
#include <string.h>

#include "jinja.h"

struct jloop {
    const jnode *node;   /* the N_FOR */
    jscope *outer;       /* where the loop runs (and its filter and recursion see) */
    jv src;              /* the iterable */
    jiter it;
    jlist *rest;         /* once length is forced: the items not yet reached */
    jscope *test_scope;  /* where the loop filter sees the item (reused) */
    size_t rest_pos;
    int64_t index0, depth0, length;
    bool length_known, has_after, has_changed;
    jv cur, before, after, last_changed;
};

/* ---- Assignment ---------------------------------------------------------------------------- */

static void assign(jstate *st, jscope *sc, const jnode *target, jv v)
{
    switch (target->kind) {
    case N_NAME: j_scope_setv(st, sc, target->val, v); return;
    case N_NSREF: {
        jv ns = j_lookup(st, sc, target->name);
        if (ns.t != JT_NS)
            j_error(st, "cannot assign attribute on non-namespace object");
        j_dict_set(st, ns.d, target->val, v);
        return;
    }
    case N_TUPLE: {
        if (v.t != JT_STR && v.t != JT_LIST && v.t != JT_DICT && v.t != JT_UNDEF)
            j_error(st, "cannot unpack non-iterable %s object", j_type_name(v));
        jlist *items = j_to_list(st, v);
        if (items->n < target->n)
            j_error(st, "not enough values to unpack (expected %zu, got %zu)", target->n, items->n);
        if (items->n > target->n)
            j_error(st, "too many values to unpack (expected %zu)", target->n);
        for (size_t i = 0; i < target->n; i++)
            assign(st, sc, target->items[i], items->v[i]);
        return;
    }
    default: j_error(st, "can't assign to this target");
    }
}

/* ---- Output and captures ------------------------------------------------------------------------ */

jv j_capture(jstate *st, jscope *sc, jnode *const *body, size_t n)
{
    jrender *r = st->r;
    jbuf buf = {.limit = r->output_limit}, *saved = r->out;
    r->out = &buf;
    jflow f = j_exec_body(st, sc, body, n);
    (void)f; /* the parser refuses break / continue where they could leave a capture */
    r->out = saved;
    return j_buf_str(st, &buf);
}

/* Applies a block's filter chain (innermost filter first) to its text. */
static jv filter_chain(jstate *st, jscope *sc, const jnode *f, jv text)
{
    if (f->a)
        text = filter_chain(st, sc, f->a, text);
    return j_apply_filter_node(st, sc, f, text);
}

static void output(jstate *st, jscope *sc, const jnode *n)
{
    jbuf *out = st->r->out;
    for (size_t i = 0; i < n->n; i++) {
        const jnode *x = n->items[i];
        jv v = x->kind == N_CONST ? x->val : j_eval(st, sc, x);
        j_to_str(st, out, v);
    }
}

/* ---- Loops ------------------------------------------------------------------------------------------ */

/* The next item of the source that passes the loop filter. */
static bool raw_next(jstate *st, jloop *l, jv *out)
{
    for (;;) {
        jv v;
        if (l->rest) {
            if (l->rest_pos >= l->rest->n)
                return false;
            *out = l->rest->v[l->rest_pos++];
            return true; /* rest holds filtered items already */
        }
        if (!j_iter_next(st, &l->it, &v))
            return false;
        j_charge(st, 1);
        if (!l->node->c) {
            *out = v;
            return true;
        }
        if (!l->test_scope)
            l->test_scope = j_scope_new(st, l->outer);
        j_dict_clear(l->test_scope->vars);
        assign(st, l->test_scope, l->node->a, v);
        if (j_truthy(st, j_eval(st, l->test_scope, l->node->c))) {
            *out = v;
            return true;
        }
    }
}

static bool peek(jstate *st, jloop *l)
{
    if (!l->has_after)
        l->has_after = raw_next(st, l, &l->after);
    return l->has_after;
}

static bool loop_next(jstate *st, jloop *l, jv *out)
{
    if (l->has_after) {
        *out = l->after;
        l->has_after = false;
    } else if (!raw_next(st, l, out)) {
        return false;
    }
    l->index0++;
    l->before = l->cur;
    l->cur = *out;
    return true;
}

static int64_t loop_length(jstate *st, jloop *l)
{
    if (l->length_known)
        return l->length;
    jv s = l->src;
    bool has_len = !l->node->c && (s.t == JT_UNDEF || s.t == JT_STR || s.t == JT_DICT ||
                                   (s.t == JT_LIST && s.l->kind != JL_GEN));
    if (has_len)
        return (int64_t)j_len(st, s); /* live: a list popped in the loop is shorter */
    jlist *rest = j_list_new(st, JL_LIST, 0);
    jv v;
    while (raw_next(st, l, &v))
        j_list_push(st, rest, v);
    l->rest = rest;
    l->rest_pos = 0;
    l->length = (int64_t)rest->n + l->index0 + 1 + (l->has_after ? 1 : 0);
    l->length_known = true;
    return l->length;
}

jv j_loop_attr(jstate *st, jloop *l, const char *name, bool *found)
{
    *found = true;
    if (!strcmp(name, "index0"))
        return jv_int(l->index0);
    if (!strcmp(name, "index"))
        return jv_int(l->index0 + 1);
    if (!strcmp(name, "first"))
        return jv_bool(l->index0 == 0);
    if (!strcmp(name, "length"))
        return jv_int(loop_length(st, l));
    if (!strcmp(name, "revindex"))
        return jv_int(loop_length(st, l) - l->index0);
    if (!strcmp(name, "revindex0"))
        return jv_int(loop_length(st, l) - l->index0 - 1);
    if (!strcmp(name, "last"))
        return jv_bool(!peek(st, l));
    if (!strcmp(name, "depth"))
        return jv_int(l->depth0 + 1);
    if (!strcmp(name, "depth0"))
        return jv_int(l->depth0);
    if (!strcmp(name, "previtem"))
        return l->index0 == 0 ? j_undef_hint(st, "there is no previous item") : l->before;
    if (!strcmp(name, "nextitem"))
        return peek(st, l) ? l->after : j_undef_hint(st, "there is no next item");
    if (!strcmp(name, "cycle") || !strcmp(name, "changed")) {
        jfunc *f = j_zalloc(st, sizeof *f);
        f->id = name[1] == 'y' ? JF_LOOP_CYCLE : JF_LOOP_CHANGED;
        f->self = (jv){.t = JT_LOOP, .loop = l};
        return (jv){.t = JT_FUNC, .fn = f};
    }
    *found = false;
    return jv_none();
}

jv j_loop_changed(jstate *st, jloop *l, jargs *args)
{
    jlist *t = j_list_new(st, JL_TUPLE, args->npos);
    for (size_t i = 0; i < args->npos; i++)
        t->v[t->n++] = args->pos[i];
    jv v = jv_listv(t);
    if (l->has_changed && j_equal(st, l->last_changed, v))
        return jv_bool(false);
    l->has_changed = true;
    l->last_changed = v;
    return jv_bool(true);
}

jv j_loop_cycle(jstate *st, jloop *l, jargs *args)
{
    if (!args->npos)
        j_error(st, "no items for cycling given");
    return args->pos[(size_t)l->index0 % args->npos];
}

/* Runs a for loop over `items` (at recursion depth depth0), its output into the current buffer. */
static jflow run_for(jstate *st, jscope *outer, const jnode *n, jv items, int64_t depth0)
{
    jloop *l = j_zalloc(st, sizeof *l);
    l->node = n;
    l->outer = outer;
    l->src = items;
    l->index0 = -1;
    l->depth0 = depth0;
    l->cur = l->before = l->after = jv_none();
    j_iter_start(st, items, &l->it);
    jv loopv = {.t = JT_LOOP, .loop = l};
    bool any = false;
    jv v;
    /* Jinja2's loop frame: one set of variables for the whole loop, reset at each iteration's
     * start (a name set in the body reads the enclosing value again); a macro defined in the
     * body sees the current iteration's values */
    jscope *sc = NULL;
    while (loop_next(st, l, &v)) {
        any = true;
        j_charge(st, 1);
        if (!sc)
            sc = j_scope_new(st, outer);
        else
            j_dict_clear(sc->vars);
        assign(st, sc, n->a, v);
        j_scope_setv(st, sc, st->r->key_loop, loopv);
        jflow f = j_exec_body(st, sc, n->body, n->nbody);
        if (f == JFLOW_BREAK)
            break;
    }
    if (sc)
        sc->dead = true; /* Jinja2 sets the frame's variables to its 'missing' sentinel */
    if (!any && n->norelse)
        return j_exec_body(st, j_scope_new(st, outer), n->orelse, n->norelse);
    return JFLOW_NORMAL;
}

jv j_loop_recurse(jstate *st, jloop *l, jv items)
{
    if (!(l->node->op & JFOR_RECURSIVE))
        j_error(st, "The loop must have the 'recursive' marker to be called recursively.");
    j_enter(st);
    jrender *r = st->r;
    jbuf buf = {.limit = r->output_limit}, *saved = r->out;
    r->out = &buf;
    run_for(st, l->outer, l->node, items, l->depth0 + 1);
    r->out = saved;
    j_leave(st);
    return j_buf_str(st, &buf);
}

/* ---- Macros ------------------------------------------------------------------------------------------- */

static jv make_macro(jstate *st, const jnode *def, jscope *closure, const char *name)
{
    jmacro *m = j_alloc(st, sizeof *m);
    m->def = def;
    m->closure = closure;
    m->name = name;
    return (jv){.t = JT_MACRO, .m = m};
}

jv j_macro_call(jstate *st, jmacro *m, jargs *args)
{
    const jnode *def = m->def;
    size_t nparams = def->nkw;
    jscope *sc = j_scope_new(st, m->closure);
    bool *given = j_zalloc(st, nparams ? nparams : 1);
    bool *used_kw = j_zalloc(st, args->nkw ? args->nkw : 1);
    for (size_t i = 0; i < nparams && i < args->npos; i++) {
        j_scope_setv(st, sc, def->kw[i].key, args->pos[i]);
        given[i] = true;
    }
    bool found_caller = false;
    for (size_t i = args->npos; i < nparams; i++) {
        if (!strcmp(def->kw[i].name, "caller"))
            found_caller = true;
        for (size_t k = 0; k < args->nkw; k++) {
            if (!used_kw[k] && !strcmp(args->kwn[k], def->kw[i].name)) {
                j_scope_setv(st, sc, def->kw[i].key, args->kwv[k]);
                given[i] = used_kw[k] = true;
            }
        }
    }
    if ((def->op & JM_CALLER) && !found_caller) {
        jv caller = jv_none();
        bool have = false;
        for (size_t k = 0; k < args->nkw; k++)
            if (!used_kw[k] && !strcmp(args->kwn[k], "caller")) {
                caller = args->kwv[k];
                used_kw[k] = have = true;
            }
        if (!have || caller.t == JT_NONE)
            caller = jv_undef(j_undef_new(st, "No caller defined", jv_none(), false, j_cstr(st, "caller"), JU_UNDEFINED));
        j_scope_setv(st, sc, st->r->key_caller, caller);
    }
    if (def->op & JM_KWARGS) {
        jdict *kw = j_dict_new(st, 0);
        for (size_t k = 0; k < args->nkw; k++)
            if (!used_kw[k])
                j_dict_set(st, kw, j_cstr(st, args->kwn[k]), args->kwv[k]);
        j_scope_setv(st, sc, st->r->key_kwargs, jv_dictv(kw));
    } else {
        for (size_t k = 0; k < args->nkw; k++) {
            if (used_kw[k])
                continue;
            if (!strcmp(args->kwn[k], "caller"))
                j_error(st, "macro '%s' was invoked with two values for the special caller argument. This is most likely a bug.", m->name);
            j_error(st, "macro '%s' takes no keyword argument '%s'", m->name, args->kwn[k]);
        }
    }
    if (def->op & JM_VARARGS) {
        jlist *extra = j_list_new(st, JL_TUPLE, 0);
        for (size_t i = nparams; i < args->npos; i++)
            j_list_push(st, extra, args->pos[i]);
        j_scope_setv(st, sc, st->r->key_varargs, jv_listv(extra));
    } else if (args->npos > nparams) {
        j_error(st, "macro '%s' takes not more than %zu argument(s)", m->name, nparams);
    }
    for (size_t i = 0; i < nparams; i++) {
        if (given[i])
            continue;
        if (def->kw[i].value) {
            j_scope_setv(st, sc, def->kw[i].key, j_eval(st, sc, def->kw[i].value));
        } else {
            char hint[200];
            snprintf(hint, sizeof hint, "parameter '%s' was not provided", def->kw[i].name);
            jv u = jv_undef(j_undef_new(st, NULL, jv_none(), false, j_cstr(st, def->kw[i].name), JU_UNDEFINED));
            u.u->hint = j_cstr(st, hint).s->p;
            j_scope_setv(st, sc, def->kw[i].key, u);
        }
    }
    j_enter(st);
    jv out = j_capture(st, sc, def->body, def->nbody);
    j_leave(st);
    return out;
}

/* ---- Statements ------------------------------------------------------------------------------------------ */

static jflow exec(jstate *st, jscope *sc, const jnode *n)
{
    switch (n->kind) {
    case N_OUTPUT: output(st, sc, n); return JFLOW_NORMAL;
    case N_IF:
        if (j_truthy(st, j_eval(st, sc, n->a)))
            return j_exec_body(st, sc, n->body, n->nbody);
        return j_exec_body(st, sc, n->orelse, n->norelse);
    case N_FOR: return run_for(st, sc, n, j_eval(st, sc, n->b), 0);
    case N_SET: assign(st, sc, n->a, j_eval(st, sc, n->b)); return JFLOW_NORMAL;
    case N_SETBLOCK: {
        jscope *inner = j_scope_new(st, sc);
        jv text = j_capture(st, inner, n->body, n->nbody);
        if (n->c)
            text = filter_chain(st, inner, n->c, text);
        assign(st, sc, n->a, text);
        return JFLOW_NORMAL;
    }
    case N_MACRO: j_scope_set(st, sc, n->name, make_macro(st, n, sc, n->name)); return JFLOW_NORMAL;
    case N_CALLBLOCK: {
        jv caller = make_macro(st, n, sc, "caller");
        jv v = j_eval_call_with(st, sc, n->a, "caller", caller);
        j_to_str(st, st->r->out, v);
        return JFLOW_NORMAL;
    }
    case N_FILTERBLOCK: {
        jscope *inner = j_scope_new(st, sc);
        jv text = j_capture(st, inner, n->body, n->nbody);
        j_to_str(st, st->r->out, filter_chain(st, inner, n->c, text));
        return JFLOW_NORMAL;
    }
    case N_WITH: {
        jscope *inner = j_scope_new(st, sc);
        for (size_t i = 0; i + 1 < n->n; i += 2)
            assign(st, inner, n->items[i], j_eval(st, sc, n->items[i + 1]));
        return j_exec_body(st, inner, n->body, n->nbody);
    }
    case N_GENERATION: {
        jv text = j_capture(st, j_scope_new(st, sc), n->body, n->nbody);
        j_to_str(st, st->r->out, text);
        return JFLOW_NORMAL;
    }
    case N_BREAK: return JFLOW_BREAK;
    case N_CONTINUE: return JFLOW_CONTINUE;
    default: j_fail(st, NU_LLM_TEMPLATE_ERROR, "internal: node %d is not a statement", n->kind);
    }
}

jflow j_exec_body(jstate *st, jscope *sc, jnode *const *body, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        j_charge(st, 1);
        j_enter(st);
        uint32_t line = st->line;
        st->line = body[i]->line;
        jflow f = exec(st, sc, body[i]);
        st->line = line;
        j_leave(st);
        if (f != JFLOW_NORMAL)
            return f;
    }
    return JFLOW_NORMAL;
}
