/* parser.c: statements, as jinja2/parser.py parses them, with loopcontrols' break/continue and
 * transformers' {% generation %}. Node layouts (see parse_expr.c for expressions):
 *   N_OUTPUT items (N_CONST text or expressions); N_IF a body orelse (an elif is an N_IF alone
 *   in orelse); N_FOR a (target) b (iterable) c (loop filter or NULL) body orelse, op recursive;
 *   N_SET a = b; N_SETBLOCK a c (filter chain or NULL) body; N_MACRO name kw (params with
 *   defaults or NULL) body, op JM_* flags; N_CALLBLOCK a (the call) kw body op; N_FILTERBLOCK c
 *   body; N_WITH items (target, value pairs) body; N_BREAK; N_CONTINUE; N_GENERATION body.
 * A filter chain's innermost filter has a NULL input: the block's text goes there.
 * Refused by name: extends, include, import, from, block, autoescape; do is not a tag (Hugging
 * Face does not load jinja2.ext.do). */
#include <stdio.h>
#include <string.h>

#include "jinja.h"

typedef struct ends {
    const char *const *names; /* the end tags this body stops at */
    const struct ends *outer;
    const char *tag;          /* the block's own tag (for messages) */
} ends;

static bool at_end(jparser *p, const char *const *names)
{
    for (; names && *names; names++)
        if (j_is_name(j_cur(p), *names))
            return true;
    return false;
}

static void subparse(jparser *p, const ends *e, jnode ***body, size_t *nbody);

/* The message Jinja2 gives for a tag that does not belong where it is. */
static _Noreturn void unknown_tag(jparser *p, const ends *e, const char *name, uint32_t line)
{
    char msg[400];
    if (name)
        snprintf(msg, sizeof msg, "Encountered unknown tag '%s'.", name);
    else
        snprintf(msg, sizeof msg, "Unexpected end of template.");
    if (e && e->names) {
        size_t len = strlen(msg);
        snprintf(msg + len, sizeof msg - len, " Jinja was looking for the following tags: ");
        for (const char *const *n = e->names; *n; n++) {
            len = strlen(msg);
            snprintf(msg + len, sizeof msg - len, "%s'%s'", n == e->names ? "" : " or ", *n);
        }
        len = strlen(msg);
        snprintf(msg + len, sizeof msg - len, ". The innermost block that needs to be closed is '%s'.", e->tag);
    }
    j_syntax(p, line, "%s", msg);
}

/* The body of a block up to one of `names`; leaves the end tag's name as the current token. */
static void statements(jparser *p, const char *tag, const char *const *names, jnode ***body, size_t *n)
{
    j_skip(p, TK_COLON);
    j_expect(p, TK_BLOCK_END);
    ends e = {.names = names, .tag = tag};
    subparse(p, &e, body, n);
    if (j_cur(p)->type == TK_EOF)
        unknown_tag(p, &e, NULL, j_cur(p)->line);
}

/* An assignment target: a name, a (possibly nested) tuple of names, or ns.attr. */
static void check_target(jparser *p, jnode *t)
{
    if (t->kind == N_NAME) {
        static const char *const consts[] = {"true", "false", "none", "True", "False", "None"};
        for (size_t i = 0; i < 6; i++)
            if (!strcmp(t->name, consts[i]))
                j_syntax(p, t->line, "can't assign to 'const'");
        return;
    }
    if (t->kind == N_TUPLE) {
        for (size_t i = 0; i < t->n; i++)
            check_target(p, t->items[i]);
        return;
    }
    if (t->kind == N_NSREF)
        return;
    j_syntax(p, t->line, "can't assign to '%s'",
             t->kind == N_CONST ? "const" : t->kind == N_LIST ? "list" : t->kind == N_DICT ? "dict" : "expression");
}

static jnode *assign_target(jparser *p, bool with_namespace, const char *const *extra_end)
{
    jnode *t;
    if (with_namespace && j_look(p)->type == TK_DOT && j_cur(p)->type == TK_NAME) {
        jtoken *name = j_expect(p, TK_NAME);
        j_next(p);
        jtoken *attr = j_expect(p, TK_NAME);
        t = j_node(p, N_NSREF, name->line);
        t->name = name->p;
        t->val = j_cstr(p->st, attr->p); /* the attribute's name */
    } else {
        t = j_parse_tuple(p, true, true, extra_end, false);
    }
    check_target(p, t);
    return t;
}

static jnode *name_target(jparser *p)
{
    jtoken *t = j_expect(p, TK_NAME);
    jnode *n = j_node(p, N_NAME, t->line);
    n->name = t->p;
    n->val = j_str(p->st, t->p, t->len);
    check_target(p, n);
    return n;
}

/* Whether the subtree reads the name (Jinja2's find_undeclared, for caller/varargs/kwargs). */
static bool reads_name(const jnode *n, const char *name)
{
    if (!n)
        return false;
    if (n->kind == N_NAME && !strcmp(n->name, name))
        return true;
    if (reads_name(n->a, name) || reads_name(n->b, name) || reads_name(n->c, name) || reads_name(n->d, name) ||
        reads_name(n->dyn_args, name) || reads_name(n->dyn_kwargs, name))
        return true;
    for (size_t i = 0; i < n->n; i++)
        if (reads_name(n->items[i], name))
            return true;
    for (size_t i = 0; i < n->nkw; i++)
        if (reads_name(n->kw[i].value, name))
            return true;
    for (size_t i = 0; i < n->nbody; i++)
        if (reads_name(n->body[i], name))
            return true;
    for (size_t i = 0; i < n->norelse; i++)
        if (reads_name(n->orelse[i], name))
            return true;
    return false;
}

static void signature(jparser *p, jnode *m)
{
    j_expect(p, TK_LPAREN);
    size_t cap = 0;
    bool defaults = false;
    while (j_cur(p)->type != TK_RPAREN) {
        if (m->nkw)
            j_expect(p, TK_COMMA);
        jnode *arg = name_target(p);
        jnode *def = NULL;
        if (j_skip(p, TK_ASSIGN)) {
            def = j_parse_expression(p, true);
            defaults = true;
        } else if (defaults) {
            j_syntax(p, arg->line, "non-default argument follows default argument");
        }
        j_push_kw(p, m, &cap, arg->name, def, arg->val);
    }
    j_expect(p, TK_RPAREN);
}

static void macro_flags(jnode *m)
{
    for (size_t i = 0; i < m->nbody; i++) {
        if (reads_name(m->body[i], "varargs"))
            m->op |= JM_VARARGS;
        if (reads_name(m->body[i], "kwargs"))
            m->op |= JM_KWARGS;
        if (reads_name(m->body[i], "caller"))
            m->op |= JM_CALLER;
    }
}

/* A body in a new Jinja2 frame: not soft, and (for functions) outside any loop. */
static void frame_body(jparser *p, bool function, const char *tag, const char *const *names, jnode ***body,
                       size_t *n)
{
    uint32_t soft = p->soft, loops = p->loops;
    p->soft = 0;
    if (function)
        p->loops = 0;
    statements(p, tag, names, body, n);
    p->soft = soft;
    p->loops = loops;
}

static jnode *parse_statement(jparser *p);

static jnode *parse_if(jparser *p)
{
    jnode *top = j_node(p, N_IF, j_cur(p)->line), *node = top;
    j_next(p);
    static const char *const names[] = {"elif", "else", "endif", NULL};
    static const char *const endif[] = {"endif", NULL};
    p->soft++;
    for (;;) {
        node->a = j_parse_tuple(p, false, false, NULL, false);
        statements(p, "if", names, &node->body, &node->nbody);
        jtoken *t = j_cur(p);
        j_next(p);
        if (j_is_name(t, "elif")) {
            jnode *e = j_node(p, N_IF, j_cur(p)->line);
            node->orelse = j_alloc(p->st, sizeof(jnode *));
            node->orelse[0] = e;
            node->norelse = 1;
            node = e;
            continue;
        }
        if (j_is_name(t, "else")) {
            statements(p, "if", endif, &node->orelse, &node->norelse);
            j_next(p);
        }
        break;
    }
    p->soft--;
    return top;
}

static jnode *parse_for(jparser *p)
{
    jnode *n = j_node(p, N_FOR, j_cur(p)->line);
    j_next(p);
    static const char *const in[] = {"in", NULL}, *const rec[] = {"recursive", NULL};
    n->a = assign_target(p, false, in);
    j_expect_name(p, "in");
    n->b = j_parse_tuple(p, false, false, rec, false);
    if (j_skip_name(p, "if")) {
        uint32_t soft = p->soft;
        p->soft = 0;
        n->c = j_parse_expression(p, true);
        p->soft = soft;
    }
    n->op = j_skip_name(p, "recursive") ? JFOR_RECURSIVE : 0;
    static const char *const names[] = {"endfor", "else", NULL}, *const endfor[] = {"endfor", NULL};
    p->loops++;
    frame_body(p, false, "for", names, &n->body, &n->nbody);
    p->loops--;
    if (j_is_name(j_cur(p), "else")) {
        j_next(p);
        frame_body(p, false, "for", endfor, &n->orelse, &n->norelse);
    }
    j_next(p);
    return n;
}

static jnode *parse_set(jparser *p)
{
    uint32_t line = j_cur(p)->line;
    j_next(p);
    jnode *target = assign_target(p, true, NULL);
    if (j_skip(p, TK_ASSIGN)) {
        jnode *n = j_node(p, N_SET, line);
        n->a = target;
        n->b = j_parse_tuple(p, false, true, NULL, false);
        return n;
    }
    jnode *n = j_node(p, N_SETBLOCK, line);
    n->a = target;
    uint32_t soft = p->soft;
    p->soft = 0;
    n->c = j_cur(p)->type == TK_PIPE ? j_parse_filter(p, NULL, false) : NULL;
    p->soft = soft;
    static const char *const names[] = {"endset", NULL};
    uint32_t loops = p->loops;
    p->loops = 0; /* a break inside would leave the capture half done: refused as outside a loop */
    frame_body(p, false, "set", names, &n->body, &n->nbody);
    p->loops = loops;
    j_next(p);
    return n;
}

static jnode *parse_macro(jparser *p)
{
    jnode *n = j_node(p, N_MACRO, j_cur(p)->line);
    j_next(p);
    n->name = name_target(p)->name;
    signature(p, n);
    static const char *const names[] = {"endmacro", NULL};
    frame_body(p, true, "macro", names, &n->body, &n->nbody);
    j_next(p);
    macro_flags(n);
    return n;
}

static jnode *parse_call_block(jparser *p)
{
    jnode *n = j_node(p, N_CALLBLOCK, j_cur(p)->line);
    j_next(p);
    if (j_cur(p)->type == TK_LPAREN)
        signature(p, n);
    n->a = j_parse_expression(p, true);
    if (n->a->kind != N_CALL)
        j_syntax(p, n->line, "expected call");
    n->name = "caller";
    static const char *const names[] = {"endcall", NULL};
    frame_body(p, true, "call", names, &n->body, &n->nbody);
    j_next(p);
    macro_flags(n);
    return n;
}

static jnode *parse_filter_block(jparser *p)
{
    jnode *n = j_node(p, N_FILTERBLOCK, j_cur(p)->line);
    j_next(p);
    uint32_t soft = p->soft;
    p->soft = 0;
    n->c = j_parse_filter(p, NULL, true);
    p->soft = soft;
    static const char *const names[] = {"endfilter", NULL};
    uint32_t loops = p->loops;
    p->loops = 0;
    frame_body(p, false, "filter", names, &n->body, &n->nbody);
    p->loops = loops;
    j_next(p);
    return n;
}

static jnode *parse_with(jparser *p)
{
    jnode *n = j_node(p, N_WITH, j_cur(p)->line);
    j_next(p);
    size_t cap = 0;
    while (j_cur(p)->type != TK_BLOCK_END) {
        if (n->n)
            j_expect(p, TK_COMMA);
        jnode *target = assign_target(p, false, NULL);
        j_expect(p, TK_ASSIGN);
        j_push_node(p, &n->items, &n->n, &cap, target);
        j_push_node(p, &n->items, &n->n, &cap, j_parse_expression(p, true));
    }
    static const char *const names[] = {"endwith", NULL};
    frame_body(p, false, "with", names, &n->body, &n->nbody);
    j_next(p);
    return n;
}

static jnode *parse_print(jparser *p)
{
    jnode *n = j_node(p, N_OUTPUT, j_cur(p)->line);
    j_next(p);
    size_t cap = 0;
    while (j_cur(p)->type != TK_BLOCK_END) {
        if (n->n)
            j_expect(p, TK_COMMA);
        j_push_node(p, &n->items, &n->n, &cap, j_parse_expression(p, true));
    }
    return n;
}

static jnode *parse_generation(jparser *p)
{
    jnode *n = j_node(p, N_GENERATION, j_cur(p)->line);
    j_next(p);
    static const char *const names[] = {"endgeneration", NULL};
    frame_body(p, true, "generation", names, &n->body, &n->nbody);
    j_next(p);
    return n;
}

static jnode *parse_statement(jparser *p)
{
    jtoken *t = j_cur(p);
    if (t->type != TK_NAME)
        j_syntax(p, t->line, "tag name expected");
    const char *name = t->p;
    if (!strcmp(name, "if"))
        return parse_if(p);
    if (!strcmp(name, "for"))
        return parse_for(p);
    if (!strcmp(name, "set"))
        return parse_set(p);
    if (!strcmp(name, "macro"))
        return parse_macro(p);
    if (!strcmp(name, "call"))
        return parse_call_block(p);
    if (!strcmp(name, "filter"))
        return parse_filter_block(p);
    if (!strcmp(name, "with"))
        return parse_with(p);
    if (!strcmp(name, "print"))
        return parse_print(p);
    if (!strcmp(name, "generation"))
        return parse_generation(p);
    if (!strcmp(name, "break") || !strcmp(name, "continue")) {
        if (!p->loops)
            j_syntax(p, t->line, "'%s' outside loop", name);
        j_next(p);
        return j_node(p, name[0] == 'b' ? N_BREAK : N_CONTINUE, t->line);
    }
    static const char *const refused[] = {"extends", "include", "import", "from", "block", "autoescape"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (!strcmp(name, refused[i]))
            j_fail_at(p->st, t->line, NU_LLM_TEMPLATE_UNSUPPORTED, "the tag '%s' is not supported", name);
    unknown_tag(p, p->ends, name, t->line);
}

static void subparse(jparser *p, const ends *e, jnode ***body, size_t *nbody)
{
    size_t cap = 0;
    jnode *out = NULL;
    size_t outcap = 0;
    const ends *saved = p->ends;
    ends here = e ? *e : (ends){0};
    here.outer = saved;
    for (;;) {
        jtoken *t = j_cur(p);
        if (t->type == TK_EOF)
            break;
        if (t->type == TK_DATA || t->type == TK_VAR_BEGIN) {
            if (!out) {
                out = j_node(p, N_OUTPUT, t->line);
                outcap = 0;
                j_push_node(p, body, nbody, &cap, out);
            }
            jnode *x;
            if (t->type == TK_DATA) {
                x = j_node(p, N_CONST, t->line);
                x->val = j_str(p->st, t->p, t->len);
                j_next(p);
            } else {
                j_next(p);
                x = j_parse_tuple(p, false, true, NULL, false);
                j_expect(p, TK_VAR_END);
            }
            j_push_node(p, &out->items, &out->n, &outcap, x);
            continue;
        }
        if (t->type != TK_BLOCK_BEGIN)
            j_syntax(p, t->line, "unexpected '%s'", j_token_desc(t));
        out = NULL;
        j_next(p);
        if (e && at_end(p, e->names))
            return;
        p->ends = e ? &here : saved;
        if (p->blocks++ >= 64)
            j_fail_at(p->st, t->line, NU_LLM_TEMPLATE_LIMIT, "blocks nested deeper than 64");
        jnode *s = parse_statement(p);
        p->blocks--;
        p->ends = saved;
        j_push_node(p, body, nbody, &cap, s);
        j_expect(p, TK_BLOCK_END);
    }
}

void j_parse_template(jparser *p, jnode ***body, size_t *n)
{
    *body = NULL;
    *n = 0;
    p->ends = NULL;
    subparse(p, NULL, body, n);
}
