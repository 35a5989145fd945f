/* parse_expr.c: expressions, as jinja2/parser.py parses them (the same precedence and quirks:
 * filters and tests bind tighter than arithmetic, `-x|f` is `(-x)|f`, a test takes one argument
 * without parentheses, `a if b` without else gives Undefined). Node layouts:
 *   N_CONST val; N_NAME name; N_GETATTR a.name; N_GETITEM a[b]; N_SLICE b:c:d (NULL: omitted);
 *   N_CALL a(items, kw, dyn_args, dyn_kwargs); N_FILTER a|name(items, kw) (a NULL in filter
 *   blocks); N_TEST a is name(items, kw); N_NOT/N_NEG/N_POS a; N_BINOP a op b; N_AND/N_OR a b;
 *   N_CONCAT items; N_COMPARE a (ops[i] items[i])...; N_CONDEXPR b if a else c (c may be NULL);
 *   N_LIST/N_TUPLE items; N_DICT items as key, value pairs; N_NSREF name.attr (in name, val). */
#include <stdio.h>
#include <string.h>

#include "jinja.h"

#define MAX_NESTING 200 /* brackets and unary operators, two units a level: ~100 levels as Jinja2's */

jnode *j_node(jparser *p, jnk kind, uint32_t line)
{
    jnode *n = j_zalloc(p->st, sizeof *n);
    n->kind = (uint8_t)kind;
    n->line = line;
    return n;
}

jtoken *j_cur(jparser *p) { return &p->t[p->pos]; }
jtoken *j_look(jparser *p) { return &p->t[p->pos + 1 < p->n ? p->pos + 1 : p->pos]; }

void j_next(jparser *p)
{
    if (p->pos + 1 < p->n)
        p->pos++;
}

bool j_is_name(const jtoken *t, const char *name) { return t->type == TK_NAME && !strcmp(t->p, name); }

bool j_skip_name(jparser *p, const char *name)
{
    if (!j_is_name(j_cur(p), name))
        return false;
    j_next(p);
    return true;
}

bool j_skip(jparser *p, jtk type)
{
    if (j_cur(p)->type != type)
        return false;
    j_next(p);
    return true;
}

_Noreturn void j_syntax(jparser *p, uint32_t line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->st->message, sizeof p->st->message, fmt, ap);
    va_end(ap);
    p->st->line = line;
    p->st->failure = NU_LLM_TEMPLATE_SYNTAX;
    longjmp(*p->st->jmp, 1);
}

static const char *type_desc(jtk type)
{
    jtoken t = {.type = (uint8_t)type};
    return j_token_desc(&t);
}

jtoken *j_expect(jparser *p, jtk type)
{
    jtoken *t = j_cur(p);
    if (t->type != type) {
        if (t->type == TK_EOF)
            j_syntax(p, t->line, "unexpected end of template, expected '%s'.", type_desc(type));
        j_syntax(p, t->line, "expected token '%s', got '%s'", type_desc(type), j_token_desc(t));
    }
    j_next(p);
    return t;
}

void j_expect_name(jparser *p, const char *name)
{
    jtoken *t = j_cur(p);
    if (!j_is_name(t, name))
        j_syntax(p, t->line, "expected token '%s', got '%s'", name, j_token_desc(t));
    j_next(p);
}

void j_push_kw(jparser *p, jnode *n, size_t *cap, const char *name, jnode *value, jv key)
{
    if (n->nkw == *cap) {
        size_t c = *cap ? *cap * 2 : 4;
        jkw *kw = j_alloc_array(p->st, c, sizeof *kw);
        if (n->nkw)
            memcpy(kw, n->kw, n->nkw * sizeof *kw);
        n->kw = kw;
        *cap = c;
    }
    n->kw[n->nkw++] = (jkw){.name = name, .value = value, .key = key};
}

static void enter(jparser *p)
{
    if (++p->depth > MAX_NESTING)
        j_fail_at(p->st, j_cur(p)->line, NU_LLM_TEMPLATE_LIMIT, "an expression nested deeper than %d", MAX_NESTING / 2);
}

void j_push_node(jparser *p, jnode ***items, size_t *n, size_t *cap, jnode *x)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 4;
        jnode **v = j_alloc_array(p->st, c, sizeof *v);
        if (*n)
            memcpy(v, *items, *n * sizeof *v);
        *items = v;
        *cap = c;
    }
    (*items)[(*n)++] = x;
}

static jnode *parse_or(jparser *p);
static jnode *parse_unary(jparser *p, bool with_filter);

static jnode *parse_condexpr(jparser *p)
{
    uint32_t line = j_cur(p)->line;
    jnode *expr1 = parse_or(p);
    while (j_skip_name(p, "if")) {
        p->soft++; /* Jinja2 compiles conditional expressions in a soft frame */
        jnode *n = j_node(p, N_CONDEXPR, line);
        n->a = parse_or(p);
        n->b = expr1;
        n->c = j_skip_name(p, "else") ? parse_condexpr(p) : NULL;
        p->soft--;
        expr1 = n;
        line = j_cur(p)->line;
    }
    return expr1;
}

jnode *j_parse_expression(jparser *p, bool with_condexpr)
{
    return with_condexpr ? parse_condexpr(p) : parse_or(p);
}

static jnode *parse_not(jparser *p);

/* a (keyword b)*: left-associative `and` / `or`. */
static jnode *bool_chain(jparser *p, const char *keyword, jnk kind, jnode *(*operand)(jparser *))
{
    uint32_t line = j_cur(p)->line;
    jnode *left = operand(p);
    while (j_skip_name(p, keyword)) {
        jnode *n = j_node(p, kind, line);
        n->a = left;
        n->b = operand(p);
        left = n;
        line = j_cur(p)->line;
    }
    return left;
}

static jnode *parse_and(jparser *p) { return bool_chain(p, "and", N_AND, parse_not); }
static jnode *parse_or(jparser *p) { return bool_chain(p, "or", N_OR, parse_and); }

static jnode *parse_math1(jparser *p);

static jnode *parse_compare(jparser *p)
{
    uint32_t line = j_cur(p)->line;
    jnode *expr = parse_math1(p);
    jnode *cmp = NULL;
    size_t cap = 0, opcap = 0;
    for (;;) {
        jtk t = j_cur(p)->type;
        int op;
        if (t == TK_EQ) op = OP_EQ;
        else if (t == TK_NE) op = OP_NE;
        else if (t == TK_LT) op = OP_LT;
        else if (t == TK_LTEQ) op = OP_LTEQ;
        else if (t == TK_GT) op = OP_GT;
        else if (t == TK_GTEQ) op = OP_GTEQ;
        else if (j_is_name(j_cur(p), "in")) op = OP_IN;
        else if (j_is_name(j_cur(p), "not") && j_is_name(j_look(p), "in")) op = OP_NOTIN;
        else break;
        j_next(p);
        if (op == OP_NOTIN)
            j_next(p);
        if (!cmp) {
            cmp = j_node(p, N_COMPARE, line);
            cmp->a = expr;
        }
        if (cmp->n == opcap) {
            size_t c = opcap ? opcap * 2 : 4;
            uint8_t *ops = j_alloc(p->st, c);
            if (cmp->n)
                memcpy(ops, cmp->ops, cmp->n);
            cmp->ops = ops;
            opcap = c;
        }
        cmp->ops[cmp->n] = (uint8_t)op;
        j_push_node(p, &cmp->items, &cmp->n, &cap, parse_math1(p));
        line = j_cur(p)->line;
    }
    return cmp ? cmp : expr;
}

static jnode *parse_not(jparser *p)
{
    if (j_is_name(j_cur(p), "not")) {
        jnode *n = j_node(p, N_NOT, j_cur(p)->line);
        j_next(p);
        enter(p);
        n->a = parse_not(p);
        p->depth--;
        return n;
    }
    return parse_compare(p);
}

static jnode *binop(jparser *p, uint32_t line, int op, jnode *a, jnode *b)
{
    jnode *n = j_node(p, N_BINOP, line);
    n->op = (uint8_t)op;
    n->a = a;
    n->b = b;
    return n;
}

static jnode *parse_concat(jparser *p);

static jnode *parse_math1(jparser *p)
{
    uint32_t line = j_cur(p)->line;
    jnode *left = parse_concat(p);
    while (j_cur(p)->type == TK_ADD || j_cur(p)->type == TK_SUB) {
        int op = j_cur(p)->type == TK_ADD ? OP_ADD : OP_SUB;
        j_next(p);
        left = binop(p, line, op, left, parse_concat(p));
        line = j_cur(p)->line;
    }
    return left;
}

static jnode *parse_math2(jparser *p);

static jnode *parse_concat(jparser *p)
{
    uint32_t line = j_cur(p)->line;
    jnode *first = parse_math2(p);
    if (j_cur(p)->type != TK_TILDE)
        return first;
    jnode *n = j_node(p, N_CONCAT, line);
    size_t cap = 0;
    j_push_node(p, &n->items, &n->n, &cap, first);
    while (j_skip(p, TK_TILDE))
        j_push_node(p, &n->items, &n->n, &cap, parse_math2(p));
    return n;
}

static jnode *parse_pow(jparser *p);

static jnode *parse_math2(jparser *p)
{
    uint32_t line = j_cur(p)->line;
    jnode *left = parse_pow(p);
    for (;;) {
        jtk t = j_cur(p)->type;
        int op = t == TK_MUL ? OP_MUL : t == TK_DIV ? OP_DIV : t == TK_FLOORDIV ? OP_FLOORDIV : t == TK_MOD ? OP_MOD : -1;
        if (op < 0)
            break;
        j_next(p);
        left = binop(p, line, op, left, parse_pow(p));
        line = j_cur(p)->line;
    }
    return left;
}

static jnode *parse_pow(jparser *p)
{
    uint32_t line = j_cur(p)->line;
    jnode *left = parse_unary(p, true);
    while (j_skip(p, TK_POW)) {
        left = binop(p, line, OP_POW, left, parse_unary(p, true));
        line = j_cur(p)->line;
    }
    return left;
}

static jnode *parse_postfix(jparser *p, jnode *node);
static jnode *parse_filter_expr(jparser *p, jnode *node);

static jnode *parse_unary(jparser *p, bool with_filter)
{
    jtoken *t = j_cur(p);
    jnode *node;
    enter(p);
    if (t->type == TK_SUB || t->type == TK_ADD) {
        node = j_node(p, t->type == TK_SUB ? N_NEG : N_POS, t->line);
        j_next(p);
        node->a = parse_unary(p, false);
    } else {
        node = j_parse_primary(p);
    }
    node = parse_postfix(p, node);
    if (with_filter)
        node = parse_filter_expr(p, node);
    p->depth--;
    return node;
}

static jnode *parse_list(jparser *p, bool dict)
{
    jtoken *t = j_cur(p);
    j_next(p);
    jnode *n = j_node(p, dict ? N_DICT : N_LIST, t->line);
    size_t cap = 0;
    jtk close = dict ? TK_RBRACE : TK_RBRACKET;
    while (j_cur(p)->type != close) {
        if (n->n)
            j_expect(p, TK_COMMA);
        if (j_cur(p)->type == close)
            break;
        j_push_node(p, &n->items, &n->n, &cap, j_parse_expression(p, true));
        if (dict) {
            j_expect(p, TK_COLON);
            j_push_node(p, &n->items, &n->n, &cap, j_parse_expression(p, true));
        }
    }
    j_expect(p, close);
    return n;
}

jnode *j_parse_primary(jparser *p)
{
    jtoken *t = j_cur(p);
    jnode *n;
    switch (t->type) {
    case TK_NAME:
        if (!strcmp(t->p, "true") || !strcmp(t->p, "True") || !strcmp(t->p, "false") || !strcmp(t->p, "False")) {
            n = j_node(p, N_CONST, t->line);
            n->val = jv_bool(t->p[0] == 't' || t->p[0] == 'T');
        } else if (!strcmp(t->p, "none") || !strcmp(t->p, "None")) {
            n = j_node(p, N_CONST, t->line);
            n->val = jv_none();
        } else {
            n = j_node(p, N_NAME, t->line);
            n->name = t->p;
            n->val = j_str(p->st, t->p, t->len);
        }
        j_next(p);
        return n;
    case TK_STRING: {
        n = j_node(p, N_CONST, t->line);
        jbuf b = {0};
        while (j_cur(p)->type == TK_STRING) {
            j_buf_add(p->st, &b, j_cur(p)->p, j_cur(p)->len);
            j_next(p);
        }
        n->val = j_buf_str(p->st, &b);
        return n;
    }
    case TK_INT:
    case TK_FLOAT:
        n = j_node(p, N_CONST, t->line);
        n->val = t->type == TK_INT ? jv_int(t->i) : jv_float(t->f);
        j_next(p);
        return n;
    case TK_LPAREN:
        j_next(p);
        n = j_parse_tuple(p, false, true, NULL, true);
        j_expect(p, TK_RPAREN);
        return n;
    case TK_LBRACKET: return parse_list(p, false);
    case TK_LBRACE: return parse_list(p, true);
    default:
        if (t->type == TK_EOF)
            j_syntax(p, t->line, "unexpected end of template");
        j_syntax(p, t->line, "unexpected '%s'", j_token_desc(t));
    }
}

static bool is_tuple_end(jparser *p, const char *const *extra_end)
{
    jtk t = j_cur(p)->type;
    if (t == TK_VAR_END || t == TK_BLOCK_END || t == TK_RPAREN)
        return true;
    for (; extra_end && *extra_end; extra_end++)
        if (j_is_name(j_cur(p), *extra_end))
            return true;
    return false;
}

jnode *j_parse_tuple(jparser *p, bool simplified, bool with_condexpr, const char *const *extra_end,
                     bool explicit_parens)
{
    uint32_t line = j_cur(p)->line;
    jnode *tuple = j_node(p, N_TUPLE, line);
    size_t cap = 0;
    bool is_tuple = false;
    enter(p);
    for (;;) {
        if (tuple->n)
            j_expect(p, TK_COMMA);
        if (is_tuple_end(p, extra_end))
            break;
        jnode *x = simplified ? j_parse_primary(p) : j_parse_expression(p, with_condexpr);
        j_push_node(p, &tuple->items, &tuple->n, &cap, x);
        if (j_cur(p)->type == TK_COMMA)
            is_tuple = true;
        else
            break;
    }
    p->depth--;
    if (!is_tuple) {
        if (tuple->n)
            return tuple->items[0];
        if (!explicit_parens)
            j_syntax(p, j_cur(p)->line, "Expected an expression, got '%s'", j_token_desc(j_cur(p)));
    }
    return tuple;
}

static jnode *parse_subscribed(jparser *p)
{
    uint32_t line = j_cur(p)->line;
    jnode *start = NULL;
    if (j_cur(p)->type == TK_COLON) {
        j_next(p);
    } else {
        jnode *node = j_parse_expression(p, true);
        if (j_cur(p)->type != TK_COLON)
            return node;
        j_next(p);
        start = node;
    }
    jnode *s = j_node(p, N_SLICE, line);
    s->b = start;
    jtk t = j_cur(p)->type;
    if (t != TK_COLON && t != TK_RBRACKET && t != TK_COMMA)
        s->c = j_parse_expression(p, true);
    if (j_cur(p)->type == TK_COLON) {
        j_next(p);
        t = j_cur(p)->type;
        if (t != TK_RBRACKET && t != TK_COMMA)
            s->d = j_parse_expression(p, true);
    }
    return s;
}

static jnode *parse_subscript(jparser *p, jnode *node)
{
    jtoken *t = j_cur(p);
    j_next(p);
    if (t->type == TK_DOT) {
        jtoken *a = j_cur(p);
        j_next(p);
        if (a->type == TK_NAME) {
            jnode *n = j_node(p, N_GETATTR, t->line);
            n->a = node;
            n->name = a->p;
            return n;
        }
        if (a->type != TK_INT)
            j_syntax(p, a->line, "expected name or number");
        jnode *n = j_node(p, N_GETITEM, t->line), *k = j_node(p, N_CONST, a->line);
        k->val = jv_int(a->i);
        n->a = node;
        n->b = k;
        return n;
    }
    /* '[' */
    jnode *key = j_node(p, N_TUPLE, t->line);
    size_t cap = 0;
    while (j_cur(p)->type != TK_RBRACKET) {
        if (key->n)
            j_expect(p, TK_COMMA);
        j_push_node(p, &key->items, &key->n, &cap, parse_subscribed(p));
    }
    j_expect(p, TK_RBRACKET);
    jnode *n = j_node(p, N_GETITEM, t->line);
    n->a = node;
    n->b = key->n == 1 ? key->items[0] : key;
    return n;
}

void j_parse_call_args(jparser *p, jnode *call)
{
    jtoken *open = j_expect(p, TK_LPAREN);
    size_t cap = 0, kwcap = 0;
    bool require_comma = false;
    while (j_cur(p)->type != TK_RPAREN) {
        if (require_comma) {
            j_expect(p, TK_COMMA);
            if (j_cur(p)->type == TK_RPAREN)
                break;
        }
        jtoken *t = j_cur(p);
        if (t->type == TK_MUL) {
            if (call->dyn_args || call->dyn_kwargs)
                j_syntax(p, open->line, "invalid syntax for function call expression");
            j_next(p);
            call->dyn_args = j_parse_expression(p, true);
        } else if (t->type == TK_POW) {
            if (call->dyn_kwargs)
                j_syntax(p, open->line, "invalid syntax for function call expression");
            j_next(p);
            call->dyn_kwargs = j_parse_expression(p, true);
        } else if (t->type == TK_NAME && j_look(p)->type == TK_ASSIGN) {
            if (call->dyn_kwargs)
                j_syntax(p, open->line, "invalid syntax for function call expression");
            j_next(p);
            j_next(p);
            j_push_kw(p, call, &kwcap, t->p, j_parse_expression(p, true), jv_none());
        } else {
            if (call->dyn_args || call->dyn_kwargs || call->nkw)
                j_syntax(p, open->line, "invalid syntax for function call expression");
            j_push_node(p, &call->items, &call->n, &cap, j_parse_expression(p, true));
        }
        require_comma = true;
    }
    j_expect(p, TK_RPAREN);
}

static jnode *parse_call(jparser *p, jnode *node)
{
    jnode *call = j_node(p, N_CALL, j_cur(p)->line);
    call->a = node;
    j_parse_call_args(p, call);
    return call;
}

static jnode *parse_postfix(jparser *p, jnode *node)
{
    for (;;) {
        jtk t = j_cur(p)->type;
        if (t == TK_DOT || t == TK_LBRACKET)
            node = parse_subscript(p, node);
        else if (t == TK_LPAREN)
            node = parse_call(p, node);
        else
            return node;
    }
}

/* A dotted filter or test name. */
static const char *dotted_name(jparser *p)
{
    jtoken *t = j_expect(p, TK_NAME);
    if (j_cur(p)->type != TK_DOT)
        return t->p;
    jbuf b = {0};
    j_buf_adds(p->st, &b, t->p);
    while (j_skip(p, TK_DOT)) {
        j_buf_addc(p->st, &b, '.');
        j_buf_adds(p->st, &b, j_expect(p, TK_NAME)->p);
    }
    j_buf_addc(p->st, &b, 0);
    return b.p;
}

/* Resolves a filter or test name as Jinja2's compiler does: one it lacks at all is an error at
 * parse time except in an if or a conditional expression, where it fails when run; one Jinja2
 * has but nuvec lacks is refused by name. */
static void resolve(jparser *p, jnode *n, bool filter)
{
    int id = filter ? j_filter_find(n->name) : j_test_find(n->name);
    if (id >= 0) {
        n->fid = (uint16_t)id;
        return;
    }
    if (filter ? j_filter_jinja(n->name) : j_test_jinja(n->name))
        j_fail_at(p->st, n->line, NU_LLM_TEMPLATE_UNSUPPORTED, "the %s '%s' is not supported", filter ? "filter" : "test", n->name);
    if (!p->soft)
        j_syntax(p, n->line, "No %s named '%s'.", filter ? "filter" : "test", n->name);
    n->fid = 0xffff;
}

jnode *j_parse_filter(jparser *p, jnode *node, bool start_inline)
{
    while (j_cur(p)->type == TK_PIPE || start_inline) {
        if (!start_inline)
            j_next(p);
        uint32_t line = j_cur(p)->line;
        jnode *f = j_node(p, N_FILTER, line);
        f->name = dotted_name(p);
        f->a = node;
        if (j_cur(p)->type == TK_LPAREN)
            j_parse_call_args(p, f);
        resolve(p, f, true);
        node = f;
        start_inline = false;
    }
    return node;
}

static jnode *parse_test(jparser *p, jnode *node)
{
    jtoken *is = j_cur(p);
    j_next(p);
    bool negated = j_skip_name(p, "not");
    jnode *t = j_node(p, N_TEST, is->line);
    t->a = node;
    t->name = dotted_name(p);
    jtoken *c = j_cur(p);
    if (c->type == TK_LPAREN) {
        j_parse_call_args(p, t);
    } else if ((c->type == TK_NAME || c->type == TK_STRING || c->type == TK_INT || c->type == TK_FLOAT ||
                c->type == TK_LPAREN || c->type == TK_LBRACKET || c->type == TK_LBRACE) &&
               !j_is_name(c, "else") && !j_is_name(c, "or") && !j_is_name(c, "and")) {
        if (j_is_name(c, "is"))
            j_syntax(p, c->line, "You cannot chain multiple tests with is");
        jnode *arg = parse_postfix(p, j_parse_primary(p));
        t->items = j_alloc(p->st, sizeof(jnode *));
        t->items[0] = arg;
        t->n = 1;
    }
    resolve(p, t, false);
    if (!negated)
        return t;
    jnode *n = j_node(p, N_NOT, is->line);
    n->a = t;
    return n;
}

static jnode *parse_filter_expr(jparser *p, jnode *node)
{
    for (;;) {
        jtoken *t = j_cur(p);
        if (t->type == TK_PIPE)
            node = j_parse_filter(p, node, false);
        else if (j_is_name(t, "is"))
            node = parse_test(p, node);
        else if (t->type == TK_LPAREN)
            node = parse_call(p, node);
        else
            return node;
    }
}
