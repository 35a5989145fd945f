/* template.c: the public chat-template API (nuvec_llm/chat.h): parse and render, each run under
 * one setjmp with its own arena, limits taken from the options, failures turned into a status,
 * nu_llm_error_message() and the caller's nu_llm_template_error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h" /* llm/common.h */
#include "jinja.h"

#define MAX_SOURCE ((size_t)16 << 20)
#define PARSE_MEMORY ((size_t)512 << 20)
#define DEFAULT_OUTPUT ((size_t)16 << 20)
#define DEFAULT_MEMORY ((size_t)256 << 20)
#define DEFAULT_STEPS 50000000ull
#define DEFAULT_DEPTH 1000u

static nu_status status_of(nu_llm_template_failure kind)
{
    switch (kind) {
    case NU_LLM_TEMPLATE_OK: return NU_OK;
    case NU_LLM_TEMPLATE_UNSUPPORTED: return NU_ERROR_UNSUPPORTED;
    case NU_LLM_TEMPLATE_LIMIT: return NU_ERROR_OUT_OF_RANGE;
    case NU_LLM_TEMPLATE_ARGUMENT: return NU_ERROR_INVALID_ARGUMENT;
    case NU_LLM_TEMPLATE_MEMORY: return NU_ERROR_HOST_OUT_OF_MEMORY;
    default: return NU_ERROR_FORMAT;
    }
}

static const char *kind_text(nu_llm_template_failure kind)
{
    switch (kind) {
    case NU_LLM_TEMPLATE_SYNTAX: return "syntax error: ";
    case NU_LLM_TEMPLATE_UNSUPPORTED: return "unsupported: ";
    case NU_LLM_TEMPLATE_RAISED: return "raise_exception: ";
    case NU_LLM_TEMPLATE_LIMIT: return "limit: ";
    default: return "";
    }
}

/* Reports a failure of fn: the status, nu_llm_error_message() and *error. */
static nu_status report(const char *fn, nu_llm_template_failure kind, uint32_t line, const char *msg,
                        nu_llm_template_error *error)
{
    if (error) {
        error->kind = kind;
        error->line = line;
        snprintf(error->message, sizeof error->message, "%s", msg);
    }
    if (line)
        return nu_llm__fail(status_of(kind), "%s: line %u: %s%s", fn, line, kind_text(kind), msg);
    return nu_llm__fail(status_of(kind), "%s: %s%s", fn, kind_text(kind), msg);
}

static void ok(nu_llm_template_error *error)
{
    if (error)
        memset(error, 0, sizeof *error);
}

nu_status nu_llm_template_parse(const char *source, size_t length, nu_llm_template **out, nu_llm_template_error *error)
{
    static const char *const FN = "nu_llm_template_parse";
    if (out)
        *out = NULL;
    ok(error);
    if (!out || (!source && length))
        return report(FN, NU_LLM_TEMPLATE_ARGUMENT, 0, out ? "NULL source" : "NULL out", error);
    if (length > MAX_SOURCE)
        return report(FN, NU_LLM_TEMPLATE_ARGUMENT, 0, "the source is over 16 MiB", error);
    size_t bad;
    if (!j_utf8_valid(source, length, &bad)) {
        char msg[80];
        snprintf(msg, sizeof msg, "the source is not valid UTF-8 (byte %zu)", bad);
        return report(FN, NU_LLM_TEMPLATE_ARGUMENT, 0, msg, error);
    }
    nu_llm_template *tpl = nu_llm__calloc(1, sizeof *tpl);
    if (!tpl)
        return report(FN, NU_LLM_TEMPLATE_MEMORY, 0, "out of host memory", error);
    jmp_buf jb;
    jstate *st = &tpl->st;
    st->jmp = &jb;
    st->arena.limit = PARSE_MEMORY;
    st->depth_limit = 1000;
    if (setjmp(jb)) {
        nu_status s = report(FN, st->failure, st->line, st->message, error);
        j_arena_free(&st->arena);
        nu_llm__free(tpl);
        return s;
    }
    jtoken *tokens;
    size_t count;
    j_lex(st, source ? source : "", length, &tokens, &count);
    jparser p = {.st = st, .t = tokens, .n = count};
    j_parse_template(&p, &tpl->body, &tpl->nbody);
    if (j_cur(&p)->type != TK_EOF)
        j_syntax(&p, j_cur(&p)->line, "unexpected '%s'", j_token_desc(j_cur(&p)));
    st->jmp = NULL;
    *out = tpl;
    return NU_OK;
}

void nu_llm_template_free(nu_llm_template *tpl)
{
    if (!tpl)
        return;
    j_arena_free(&tpl->st.arena);
    nu_llm__free(tpl);
}

/* The state of one render, on the heap: setjmp's caller must not keep what changes in locals. */
typedef struct render_state {
    jstate st;
    jrender r;
    jbuf out;
} render_state;

nu_status nu_llm_template_render(const nu_llm_template *tpl, const char *context, size_t context_length,
                                 const nu_llm_render_options *options, char **out, size_t *out_length,
                                 nu_llm_template_error *error)
{
    static const char *const FN = "nu_llm_template_render";
    if (out)
        *out = NULL;
    if (out_length)
        *out_length = 0;
    ok(error);
    if (!tpl || !out || !out_length || (!context && context_length))
        return report(FN, NU_LLM_TEMPLATE_ARGUMENT, 0,
                      !tpl ? "NULL template" : !out || !out_length ? "NULL out" : "NULL context", error);
    nu_llm_render_options o = options ? *options : (nu_llm_render_options){0};
    render_state *rs = nu_llm__calloc(1, sizeof *rs);
    if (!rs)
        return report(FN, NU_LLM_TEMPLATE_MEMORY, 0, "out of host memory", error);
    jmp_buf jb;
    jstate *st = &rs->st;
    jrender *r = &rs->r;
    st->jmp = &jb;
    st->arena.limit = o.memory_limit ? o.memory_limit : DEFAULT_MEMORY;
    st->depth_limit = o.depth_limit ? o.depth_limit : DEFAULT_DEPTH;
    st->r = r;
    r->st = st;
    r->tpl = tpl;
    r->output_limit = o.output_limit ? o.output_limit : DEFAULT_OUTPUT;
    r->step_limit = o.step_limit ? o.step_limit : DEFAULT_STEPS;
    r->now_s = o.now;
    if (setjmp(jb)) {
        nu_status s = report(FN, st->failure, st->failure == NU_LLM_TEMPLATE_ARGUMENT ? 0 : st->line, st->message, error);
        j_arena_free(&st->arena);
        nu_llm__free(rs);
        return s;
    }
    jv ctx = context_length ? j_json_parse(st, context, context_length, "the context")
                            : jv_dictv(j_dict_new(st, 0));
    if (ctx.t != JT_DICT)
        j_fail(st, NU_LLM_TEMPLATE_ARGUMENT, "the context is a JSON %s, not an object",
               ctx.t == JT_LIST ? "array" : ctx.t == JT_STR ? "string" : "scalar");
    jscope *vars = j_zalloc(st, sizeof *vars);
    vars->parent = NULL;
    vars->vars = ctx.d;
    r->root = j_scope_new(st, vars);
    r->key_loop = j_cstr(st, "loop");
    r->key_caller = j_cstr(st, "caller");
    r->key_varargs = j_cstr(st, "varargs");
    r->key_kwargs = j_cstr(st, "kwargs");
    rs->out.limit = r->output_limit;
    r->out = &rs->out;
    st->line = 0;
    j_exec_body(st, r->root, tpl->body, tpl->nbody);
    char *text = nu_llm__malloc(rs->out.len + 1);
    if (!text)
        j_fail(st, NU_LLM_TEMPLATE_MEMORY, "out of host memory for %zu bytes of output", rs->out.len);
    if (rs->out.len)
        memcpy(text, rs->out.p, rs->out.len);
    text[rs->out.len] = 0;
    *out = text;
    *out_length = rs->out.len;
    j_arena_free(&st->arena);
    nu_llm__free(rs);
    return NU_OK;
}
