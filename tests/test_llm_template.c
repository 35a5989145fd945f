/* test_llm_template.c: chat templates (llm/chat/, nuvec_llm/chat.h), no device needed.
 *  - Against the reference: every template of the models folder (NUVEC_MODELS_DIR/templates)
 *    rendered with every conversation of tests/chat_corpus/, and the small templates of
 *    tests/jinja_snippets.txt, by nuvec and by tests/render_jinja.py (Debian's python3-jinja2 set
 *    up as Hugging Face does; /usr/bin/python3, NUVEC_JINJA_PYTHON overrides): the same bytes, or
 *    the same failure (raise_exception: the same message). The summary is printed.
 *  - The engine's pieces with their expected text (checked against the reference when written):
 *    whitespace control, Undefined, numbers, tojson, loops, macros, namespace, filters, methods,
 *    raise_exception, strftime_now at a pinned time.
 *  - Refusals by name, syntax errors with lines, the limits, the API's checks, every host
 *    allocation failed in turn, threads rendering one template at once, nu_llm_chat_context.
 * Where templates come from (GGUF files, Hugging Face folders) and `nuvec template`:
 * test_llm_chat_source.c. */
#include "harness.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "llm_util.h"
#include "nuvec_llm.h"

#define NOW 1735732800 /* 2025-01-01 12:00:00 UTC, strftime_now's pinned time */

static const char *models_dir(void)
{
    const char *env = getenv("NUVEC_MODELS_DIR");
    return env && env[0] ? env : NUVEC_MODELS_DIR;
}

/* strftime_now shows local time: both renderers run in UTC. */
static int utc(void **state)
{
    (void)state;
    setenv("TZ", "UTC", 1);
    tzset();
    return 0;
}

/* ---- Rendering helpers ------------------------------------------------------------------------ */

typedef struct result {
    nu_status status;
    nu_llm_template_error error;
    char *text;
    size_t len;
} result;

static result render_opts(const char *src, const char *ctx, const nu_llm_render_options *opts)
{
    result r = {0};
    nu_llm_template *tpl = NULL;
    r.status = nu_llm_template_parse(src, strlen(src), &tpl, &r.error);
    if (r.status == NU_OK) {
        nu_llm_render_options o = opts ? *opts : (nu_llm_render_options){0};
        if (!o.now)
            o.now = NOW;
        r.status = nu_llm_template_render(tpl, ctx, ctx ? strlen(ctx) : 0, &o, &r.text, &r.len, &r.error);
        nu_llm_template_free(tpl);
    }
    return r;
}

static result render(const char *src, const char *ctx) { return render_opts(src, ctx, NULL); }

static void expect(const char *src, const char *ctx, const char *want)
{
    result r = render(src, ctx);
    if (r.status != NU_OK)
        fail_msg("%s\nfailed: %s", src, nu_llm_error_message());
    if (strcmp(r.text, want))
        fail_msg("%s\nrendered: [%s]\nexpected: [%s]", src, r.text, want);
    assert_int_equal(r.len, strlen(want));
    free(r.text);
}

static void expect_failure(const char *src, const char *ctx, nu_status status, nu_llm_template_failure kind,
                           const char *message)
{
    result r = render(src, ctx);
    if (r.status != status || r.error.kind != kind)
        fail_msg("%s\nexpected %s (kind %d), got %s (kind %d): %s", src, nu_status_string(status), kind,
                 nu_status_string(r.status), r.error.kind, r.status ? nu_llm_error_message() : r.text);
    assert_null(r.text);
    assert_int_equal(r.len, 0);
    if (!strstr(r.error.message, message) || !strstr(nu_llm_error_message(), message))
        fail_msg("%s\nmessage [%s] / [%s] lacks [%s]", src, r.error.message, nu_llm_error_message(), message);
}

/* ---- The engine's pieces ------------------------------------------------------------------------ */

static void whitespace_control(void **state)
{
    (void)state;
    expect("{% if true %}\nx\n{% endif %}\ny", NULL, "x\ny");
    expect("  {% if true %}\n  a\n  {% endif %}\n  {{ 'b' }}", NULL, "  a\n  b");
    expect("a  {%- if true -%}  b  {%- endif -%}  c", NULL, "abc");
    expect("  {%+ if true +%}\nx{% endif %}", NULL, "  \nx");
    expect("[ {{- 'v' -}} ]{# c #}\n{#- c -#} [{{ 'w' }}]", NULL, "[v][w]");
    expect("a\r\n{% if true %}\r\nb\r\n{% endif %}\rc\n", NULL, "a\nb\nc");
    expect("x\xC2\xA0{{- 'y' -}}\xE3\x80\x80z", NULL, "xyz"); /* U+00A0 and U+3000 are whitespace */
    expect("{% raw %}{{ x }}{% endraw %}", NULL, "{{ x }}");
    expect("a\n\n", NULL, "a\n"); /* one final newline dropped */
}

static void undefined_semantics(void **state)
{
    (void)state;
    expect("[{{ nope }}][{{ nope is defined }}][{{ nope | default('d') }}][{{ nope | length }}][{{ nope ~ 'x' }}]", NULL,
           "[][False][d][0][x]");
    expect("{{ d.missing }}|{{ d.missing is defined }}|{{ d['missing'] | default(1) }}", "{\"d\": {\"a\": 1}}", "|False|1");
    expect_failure("{{ nope.attr }}", NULL, NU_ERROR_FORMAT, NU_LLM_TEMPLATE_ERROR, "'nope' is undefined");
    expect_failure("{{ d.a.b.c }}", "{\"d\": {\"a\": 1}}", NU_ERROR_FORMAT, NU_LLM_TEMPLATE_ERROR,
                   "'int object' has no attribute 'b'");
    expect_failure("{{ l[3] }}{{ l[3] + 1 }}", "{\"l\": [1]}", NU_ERROR_FORMAT, NU_LLM_TEMPLATE_ERROR,
                   "list object has no element 3");
}

static void numbers_as_python_prints_them(void **state)
{
    (void)state;
    expect("{{ 1.0 }} {{ 1e-05 }} {{ 1e16 }} {{ 0.1 + 0.2 }} {{ 10 / 4 }} {{ 7 // -2 }} {{ -7 % 3 }} {{ 2 ** -2 }} "
           "{{ 1.5e300 * 1e10 }} {{ -0.0 }} {{ true }} {{ none }} {{ 1e15 }} {{ 0.0001 }} {{ 123456789.125 }}",
           NULL, "1.0 1e-05 1e+16 0.30000000000000004 2.5 -4 2 0.25 inf -0.0 True None 1000000000000000.0 0.0001 "
                 "123456789.125");
    /* JSON numbers keep their kind: 3 is an int, 3.0 a float */
    expect("{{ x }} {{ y }} {{ z }} {{ x + y }} {{ [x, y, z] }}", "{\"x\": 3, \"y\": 3.0, \"z\": 1e100}",
           "3 3.0 1e+100 6.0 [3, 3.0, 1e+100]");
    expect("{{ 2.675 | round(2) }} {{ 2.5 | round }} {{ 7 | round }} {{ '12' | int + 1 }} {{ 'x' | float }}", NULL,
           "2.67 2.0 7 13 0.0");
}

static void tojson_options(void **state)
{
    (void)state;
    expect("{{ v | tojson }}", "{\"v\": {\"a\": [1, 2.0, null, true], \"b\": \"\xC3\xA9\\n\\\"\", \"c\": {}}}",
           "{\"a\": [1, 2.0, null, true], \"b\": \"\xC3\xA9\\n\\\"\", \"c\": {}}");
    expect("{{ v | tojson(indent=2) }}", "{\"v\": {\"a\": [1, {\"b\": []}]}}",
           "{\n  \"a\": [\n    1,\n    {\n      \"b\": []\n    }\n  ]\n}");
    expect("{{ v | tojson(separators=(',', ':'), sort_keys=true) }}", "{\"v\": {\"b\": 1, \"a\": [1, 2]}}",
           "{\"a\":[1,2],\"b\":1}");
    expect("{{ v | tojson(ensure_ascii=true) }}", "{\"v\": \"\xC3\xA9\xF0\x9F\x98\x80\"}", "\"\\u00e9\\ud83d\\ude00\"");
    expect("{{ v | tojson(indent='\\t') }}", "{\"v\": [1]}", "[\n\t1\n]");
    expect_failure("{{ nope | tojson }}", NULL, NU_ERROR_FORMAT, NU_LLM_TEMPLATE_ERROR,
                   "Object of type Undefined is not JSON serializable");
}

static void loops(void **state)
{
    (void)state;
    expect("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}"
           "{{ loop.last }}{{ loop.length }}{% endfor %}",
           NULL, "1032TrueFalse32121FalseFalse33210FalseTrue3");
    expect("{% for x in [1, 2, 3] %}[{{ loop.previtem }},{{ loop.nextitem }}]{{ loop.cycle('a', 'b') }}{% endfor %}", NULL,
           "[,2]a[1,3]b[2,]a");
    expect("{% for x in range(7) if x is odd %}{{ x }}{{ ',' if not loop.last }}{% endfor %}", NULL, "1,3,5");
    expect("{% for x in [] %}x{% else %}empty{% endfor %}{% for x in range(9) %}{% if x > 3 %}{% break %}{% endif %}"
           "{% if x is odd %}{% continue %}{% endif %}{{ x }}{% endfor %}",
           NULL, "empty02");
    expect("{% for n in t recursive %}{{ n.v }}{% if n.c %}({{ loop(n.c) }}){% endif %}{{ loop.depth }}{% endfor %}",
           "{\"t\": [{\"v\": \"a\", \"c\": [{\"v\": \"b\", \"c\": []}]}, {\"v\": \"c\", \"c\": []}]}", "a(b2)1c1");
    /* a set in a loop body lasts one iteration */
    expect("{% set x = 0 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}", NULL, "120");
}

static void macros(void **state)
{
    (void)state;
    expect("{% macro m(a, b=a * 2, c='c') %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(1) }}|{{ m(1, c='z') }}|{{ m(b=5, a=2) }}",
           NULL, "12c|12z|25c");
    expect("{% macro m() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, k=3) }}", NULL, "(1, 2){'k': 3}");
    expect("{% macro box(t) %}[{{ t }}:{{ caller('in') }}]{% endmacro %}{% call(x) box('T') %}<{{ x }}>{% endcall %}",
           NULL, "[T:<in>]");
    expect("{% macro f(n) %}{{ n }}{% if n > 0 %},{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}", NULL, "3,2,1,0");
    expect_failure("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}", NULL, NU_ERROR_FORMAT, NU_LLM_TEMPLATE_ERROR,
                   "macro 'm' takes not more than 1 argument(s)");
}

static void namespaces_filters_methods(void **state)
{
    (void)state;
    expect("{% set ns = namespace(n=0, last=none) %}{% for m in ['a', 'b'] %}{% set ns.n = ns.n + 1 %}"
           "{% set ns.last = m %}{% endfor %}{{ ns.n }}{{ ns.last }}{{ ns }}",
           NULL, "2b<Namespace {'n': 2, 'last': 'b'}>");
    expect_failure("{% set x = 1 %}{% set x.y = 2 %}", NULL, NU_ERROR_FORMAT, NU_LLM_TEMPLATE_ERROR,
                   "cannot assign attribute on non-namespace object");
    expect("{{ '  a  ' | trim }}|{{ 'ab' | upper }}|{{ 'AB' | lower }}|{{ 'a b' | replace(' ', '-') }}|{{ [1, 2] | length }}"
           "|{{ {'b': 1, 'a': 2} | items | list }}|{{ {'b': 1, 'a': 2} | dictsort }}|{{ [3, 1, 2] | sort | join(',') }}",
           NULL, "a|AB|ab|a-b|2|[('b', 1), ('a', 2)]|[('a', 2), ('b', 1)]|1,2,3");
    expect("{{ m | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }}|{{ m | rejectattr('role', "
           "'eq', 'user') | list | length }}|{{ [1, 2, 3] | select('odd') | list }}|{{ m | map(attribute='role') | unique | list }}",
           "{\"m\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"assistant\", \"content\": \"b\"}, "
           "{\"role\": \"user\", \"content\": \"c\"}]}",
           "['a', 'c']|1|[1, 3]|['user', 'assistant']");
    expect("{{ 'a\\nb' | indent(2, true) }}|{{ 'abc' | first }}{{ 'abc' | last }}|{{ [1, 2, 3] | batch(2) | list }}|"
           "{{ 'hello world' | title }}|{{ 'x' | center(5) }}|{{ 'foo bar baz' | truncate(9) }}|{{ ('<a>' | safe) + '<b>' }}"
           "|{{ '<a>' | e }}",
           NULL, "  a\n  b|ac|[[1, 2], [3]]|Hello World|  x  |foo bar baz|<a>&lt;b&gt;|&lt;a&gt;");
    expect("{{ ' a b '.strip() }}|{{ 'a,b'.split(',') }}|{{ 'ab'.startswith('a') }}|{{ 'Hi'.lower() }}|{{ '{}!'.format('x') }}"
           "|{{ 'a-b'.replace('-', '+') }}|{{ d.get('k', 0) }}|{{ d.items() | list }}|{{ 'abc'[::-1] }}|{{ 'h\xC3\xA9llo'[1:3] }}",
           "{\"d\": {\"k\": 1}}", "a b|['a', 'b']|True|hi|x!|a+b|1|[('k', 1)]|cba|\xC3\xA9l");
    /* the immutable sandbox: list.append is unsafe, as in Hugging Face */
    expect_failure("{% set l = [1, 2] %}{% set _ = l.append(3) %}", NULL, NU_ERROR_FORMAT, NU_LLM_TEMPLATE_ERROR,
                   "access to attribute 'append' of 'list' object is unsafe.");
}

static void raise_exception_and_strftime(void **state)
{
    (void)state;
    const char *msg = "Conversation roles must alternate user/assistant/user/assistant/...";
    char src[200];
    snprintf(src, sizeof src, "line one\n{{ raise_exception('%s') }}", msg);
    result r = render(src, NULL);
    assert_int_equal(r.status, NU_ERROR_FORMAT);
    assert_int_equal(r.error.kind, NU_LLM_TEMPLATE_RAISED);
    assert_string_equal(r.error.message, msg); /* as given, for a server to return */
    assert_int_equal(r.error.line, 2);
    assert_non_null(strstr(nu_llm_error_message(), "line 2: raise_exception: Conversation roles"));
    expect("{{ strftime_now('%d %b %Y %H:%M') }}[{{ strftime_now('%z%Z') }}]", NULL, "01 Jan 2025 12:00[]");
    /* without a pinned time, the clock: this year */
    nu_llm_template *tpl;
    LLM_OK(nu_llm_template_parse("{{ strftime_now('%Y') }}", 24, &tpl, NULL));
    char *text;
    size_t len;
    LLM_OK(nu_llm_template_render(tpl, "{}", 2, NULL, &text, &len, NULL));
    char year[8];
    time_t now = time(NULL);
    strftime(year, sizeof year, "%Y", localtime(&now));
    assert_string_equal(text, year);
    free(text);
    nu_llm_template_free(tpl);
}

/* ---- Refusals, syntax errors, limits ---------------------------------------------------------------- */

static void expect_parse_failure(const char *src, nu_status status, nu_llm_template_failure kind, uint32_t line,
                                 const char *message)
{
    nu_llm_template *tpl = (nu_llm_template *)1;
    nu_llm_template_error e;
    nu_status s = nu_llm_template_parse(src, strlen(src), &tpl, &e);
    if (s != status || e.kind != kind || e.line != line || !strstr(e.message, message))
        fail_msg("%s\nexpected %s kind %d line %u [%s], got %s kind %d line %u [%s]", src, nu_status_string(status), kind,
                 line, message, nu_status_string(s), e.kind, e.line, e.message);
    assert_null(tpl);
}

static void refusals_by_name(void **state)
{
    (void)state;
    static const char *const tags[] = {"extends", "include", "import", "from", "block", "autoescape"};
    for (size_t i = 0; i < 6; i++) {
        char src[80];
        snprintf(src, sizeof src, "ok\n{%% %s 'x' %%}", tags[i]);
        expect_parse_failure(src, NU_ERROR_UNSUPPORTED, NU_LLM_TEMPLATE_UNSUPPORTED, 2, tags[i]);
    }
    expect_parse_failure("{{ x | wordwrap(5) }}", NU_ERROR_UNSUPPORTED, NU_LLM_TEMPLATE_UNSUPPORTED, 1, "'wordwrap'");
    expect_parse_failure("\n\n{% if x %}{{ x | groupby('a') }}{% endif %}", NU_ERROR_UNSUPPORTED,
                         NU_LLM_TEMPLATE_UNSUPPORTED, 3, "'groupby'");
    expect_parse_failure("{{ 99999999999999999999 }}", NU_ERROR_UNSUPPORTED, NU_LLM_TEMPLATE_UNSUPPORTED, 1, "64 bits");
    expect_parse_failure("{{ caf\xC3\xA9 }}", NU_ERROR_UNSUPPORTED, NU_LLM_TEMPLATE_UNSUPPORTED, 1, "non-ASCII names");
    expect_parse_failure("{{ '\\N{BULLET}' }}", NU_ERROR_UNSUPPORTED, NU_LLM_TEMPLATE_UNSUPPORTED, 1, "\\N{");
    /* what Python would print with an address, and what nuvec lacks at run time */
    expect_failure("{{ range }}", NULL, NU_ERROR_UNSUPPORTED, NU_LLM_TEMPLATE_UNSUPPORTED, "printing a function");
    expect_failure("{{ [1] | select }}", NULL, NU_ERROR_UNSUPPORTED, NU_LLM_TEMPLATE_UNSUPPORTED, "printing a generator");
    expect_failure("{{ 9223372036854775807 + 1 }}", NULL, NU_ERROR_UNSUPPORTED, NU_LLM_TEMPLATE_UNSUPPORTED, "64 bits");
    expect_failure("{{ 'abc'.casefold() }}", NULL, NU_ERROR_UNSUPPORTED, NU_LLM_TEMPLATE_UNSUPPORTED, "'casefold'");
    expect_failure("{{ lipsum() }}", NULL, NU_ERROR_UNSUPPORTED, NU_LLM_TEMPLATE_UNSUPPORTED, "lipsum");
    /* a format width or precision past nuvec's limits, however many digits (they once overflowed) */
    expect_failure("{{ '{:1111111111111111111111d}'.format(1) }}", NULL, NU_ERROR_UNSUPPORTED,
                   NU_LLM_TEMPLATE_UNSUPPORTED, "format spec");
    expect_failure("{{ '{:.99999999999999999999f}'.format(1.5) }}", NULL, NU_ERROR_UNSUPPORTED,
                   NU_LLM_TEMPLATE_UNSUPPORTED, "format spec");
    expect_failure("{{ '%99999999999999999999d' % 1 }}", NULL, NU_ERROR_OUT_OF_RANGE, NU_LLM_TEMPLATE_LIMIT, "format width");
    expect_failure("{{ '{18446744073709551617}'.format(1, 2) }}", NULL, NU_ERROR_FORMAT, NU_LLM_TEMPLATE_ERROR,
                   "out of range");
    /* Jinja2 leaves its 'missing' sentinel in a finished loop's variables */
    expect_failure("{% set ns = namespace() %}{% for x in [1] %}{% macro m() %}{{ x }}{% endmacro %}{% set ns.m = m %}"
                   "{% endfor %}{{ ns.m() }}",
                   NULL, NU_ERROR_UNSUPPORTED, NU_LLM_TEMPLATE_UNSUPPORTED, "called after the loop");
    /* Jinja2's own refusals: unknown filters at parse time, or when run inside an if */
    expect_parse_failure("{{ x | from_json }}", NU_ERROR_FORMAT, NU_LLM_TEMPLATE_SYNTAX, 1, "No filter named 'from_json'.");
    expect("{% if false %}{{ x | from_json }}{% endif %}ok", NULL, "ok");
    expect_failure("\n{% if true %}{{ '1' | from_json }}{% endif %}", NULL, NU_ERROR_FORMAT, NU_LLM_TEMPLATE_ERROR,
                   "No filter named 'from_json' found.");
}

static void syntax_errors(void **state)
{
    (void)state;
    expect_parse_failure("a\n{% if %}", NU_ERROR_FORMAT, NU_LLM_TEMPLATE_SYNTAX, 2, "Expected an expression");
    expect_parse_failure("{% for x in y %}\n\n{% endif %}", NU_ERROR_FORMAT, NU_LLM_TEMPLATE_SYNTAX, 3,
                         "Encountered unknown tag 'endif'");
    expect_parse_failure("{% frobnicate %}", NU_ERROR_FORMAT, NU_LLM_TEMPLATE_SYNTAX, 1, "unknown tag 'frobnicate'");
    expect_parse_failure("{% if true %}x", NU_ERROR_FORMAT, NU_LLM_TEMPLATE_SYNTAX, 1, "Unexpected end of template");
    expect_parse_failure("x\n{{ (1 }}", NU_ERROR_FORMAT, NU_LLM_TEMPLATE_SYNTAX, 2, "unexpected '}', expected ')'");
    expect_parse_failure("{% break %}", NU_ERROR_FORMAT, NU_LLM_TEMPLATE_SYNTAX, 1, "'break' outside loop");
    expect_parse_failure("{% for x in y %}{% macro m() %}{% break %}{% endmacro %}{% endfor %}", NU_ERROR_FORMAT,
                         NU_LLM_TEMPLATE_SYNTAX, 1, "'break' outside loop");
    expect_parse_failure("{% do x %}", NU_ERROR_FORMAT, NU_LLM_TEMPLATE_SYNTAX, 1, "unknown tag 'do'");
    expect_parse_failure("{# open", NU_ERROR_FORMAT, NU_LLM_TEMPLATE_SYNTAX, 1, "Missing end of comment tag");
    expect_parse_failure("{{ 'a\\x4' }}", NU_ERROR_FORMAT, NU_LLM_TEMPLATE_SYNTAX, 1, "truncated \\xXX escape");
}

static void limits(void **state)
{
    (void)state;
    nu_llm_render_options o = {.step_limit = 1000000};
    result r = render_opts("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", NULL, &o);
    assert_int_equal(r.status, NU_ERROR_OUT_OF_RANGE);
    assert_int_equal(r.error.kind, NU_LLM_TEMPLATE_LIMIT);
    assert_non_null(strstr(r.error.message, "step limit (1000000)"));
    r = render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", NULL);
    assert_int_equal(r.error.kind, NU_LLM_TEMPLATE_LIMIT);
    assert_non_null(strstr(r.error.message, "nesting limit"));
    o = (nu_llm_render_options){.output_limit = 1 << 20};
    r = render_opts("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", NULL, &o);
    assert_int_equal(r.error.kind, NU_LLM_TEMPLATE_LIMIT);
    assert_non_null(strstr(r.error.message, "output limit"));
    o = (nu_llm_render_options){.memory_limit = 64 << 20};
    r = render_opts("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                    NULL, &o);
    assert_int_equal(r.error.kind, NU_LLM_TEMPLATE_LIMIT);
    assert_non_null(strstr(r.error.message, "memory limit"));
    r = render("{{ 'x' * 1000000000000 }}", NULL);
    assert_int_equal(r.error.kind, NU_LLM_TEMPLATE_LIMIT);
    /* the sandbox's own bound, a Jinja2 error */
    expect_failure("{{ range(100001) | length }}", NULL, NU_ERROR_FORMAT, NU_LLM_TEMPLATE_ERROR, "MAX_RANGE (100000)");
    /* nesting at parse time */
    char deep[400];
    memset(deep, 0, sizeof deep);
    strcpy(deep, "{{ ");
    for (int i = 0; i < 150; i++)
        strcat(deep, "(");
    strcat(deep, "1");
    for (int i = 0; i < 150; i++)
        strcat(deep, ")");
    strcat(deep, " }}");
    expect_parse_failure(deep, NU_ERROR_OUT_OF_RANGE, NU_LLM_TEMPLATE_LIMIT, 1, "nested deeper than 100");
    expect("{{ ((((((((((((((((((((((((((((((1)))))))))))))))))))))))))))))) }}", NULL, "1"); /* 30 deep: fine */
    char *blocks = malloc(100 * 26 + 1);
    blocks[0] = 0;
    for (int i = 0; i < 100; i++)
        strcat(blocks, "{% if true %}");
    for (int i = 0; i < 100; i++)
        strcat(blocks, "{% endif %}");
    expect_parse_failure(blocks, NU_ERROR_OUT_OF_RANGE, NU_LLM_TEMPLATE_LIMIT, 1, "nested deeper than 64");
    free(blocks);
    /* a source over 16 MiB */
    size_t big = ((size_t)16 << 20) + 1;
    char *huge = malloc(big);
    memset(huge, 'x', big);
    nu_llm_template *tpl;
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_template_parse(huge, big, &tpl, NULL));
    free(huge);
}

static void api_checks(void **state)
{
    (void)state;
    nu_llm_template *tpl = NULL;
    nu_llm_template_error e;
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_template_parse("x", 1, NULL, NULL));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_template_parse(NULL, 1, &tpl, NULL));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_template_parse("a\xFF", 2, &tpl, &e));
    assert_non_null(strstr(e.message, "UTF-8 (byte 1)"));
    LLM_OK(nu_llm_template_parse(NULL, 0, &tpl, &e)); /* the empty template */
    assert_int_equal(e.kind, NU_LLM_TEMPLATE_OK);
    char *text = (char *)1;
    size_t len = 9;
    LLM_OK(nu_llm_template_render(tpl, NULL, 0, NULL, &text, &len, NULL));
    assert_string_equal(text, "");
    assert_int_equal(len, 0);
    free(text);
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_template_render(NULL, "{}", 2, NULL, &text, &len, NULL));
    assert_null(text);
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_template_render(tpl, "{}", 2, NULL, NULL, &len, NULL));
    static const char *const bad[] = {"[1]", "{\"a\": }", "{\"a\": 1} x", "{\"a\": \"\\ud800\"}", "{\"a\": \"\x01\"}",
                                      "\"s\"", "{\"a\": 123456789012345678901234}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        nu_status s = nu_llm_template_render(tpl, bad[i], strlen(bad[i]), NULL, &text, &len, &e);
        if (s == NU_OK || (e.kind != NU_LLM_TEMPLATE_ARGUMENT && e.kind != NU_LLM_TEMPLATE_UNSUPPORTED))
            fail_msg("context %s: %s kind %d", bad[i], nu_status_string(s), e.kind);
        assert_null(text);
        assert_int_equal(len, 0);
    }
    nu_llm_template_free(tpl);
    nu_llm_template_free(NULL);
    /* JSON as Python reads it: NaN, Infinity, repeated keys (the last value at the first place) */
    expect("{{ a }} {{ b }} {{ d }}", "{\"a\": NaN, \"b\": -Infinity, \"d\": {\"x\": 1, \"y\": 2, \"x\": 3}}",
           "nan -inf {'x': 3, 'y': 2}");
}

/* Every host allocation of a parse and of a render fails in turn: a clean failure each time. */
static void every_allocation_fails_cleanly(void **state)
{
    (void)state;
    const char *src = "{% macro m(x) %}<{{ x | upper }}>{% endmacro %}{% for msg in messages %}{{ m(msg.content) }}"
                      "{{ msg | tojson(indent=1) }}{% endfor %}{{ messages | map(attribute='role') | join(',') }}";
    const char *ctx = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\"}]}";
    result want = render(src, ctx);
    assert_int_equal(want.status, NU_OK);
    nu_llm_template *tpl = NULL;
    long n = 0;
    for (;; n++) { /* the parse, failed at each of its allocations */
        nu_llm__fail_after(n);
        nu_status s = nu_llm_template_parse(src, strlen(src), &tpl, NULL);
        nu_llm__fail_after(-1);
        if (s == NU_OK)
            break;
        assert_int_equal(s, NU_ERROR_HOST_OUT_OF_MEMORY);
        assert_null(tpl);
    }
    assert_true(n > 0);
    for (n = 0;; n++) { /* the render */
        char *text = (char *)1;
        size_t len = 1;
        nu_llm__fail_after(n);
        nu_status s = nu_llm_template_render(tpl, ctx, strlen(ctx), NULL, &text, &len, NULL);
        nu_llm__fail_after(-1);
        if (s == NU_OK) {
            assert_string_equal(text, want.text);
            free(text);
            break;
        }
        assert_int_equal(s, NU_ERROR_HOST_OUT_OF_MEMORY);
        assert_null(text);
        assert_int_equal(len, 0);
    }
    assert_true(n > 0);
    nu_llm_template_free(tpl);
    free(want.text);
}

typedef struct thread_job {
    const nu_llm_template *tpl;
    const char *ctx, *want;
    int failures;
} thread_job;

static void *render_many(void *arg)
{
    thread_job *j = arg;
    for (int i = 0; i < 50; i++) {
        char *text;
        size_t len;
        if (nu_llm_template_render(j->tpl, j->ctx, strlen(j->ctx), NULL, &text, &len, NULL) != NU_OK ||
            strcmp(text, j->want))
            j->failures++;
        else
            free(text);
    }
    return NULL;
}

/* A template is immutable once parsed: threads render it at once. */
static void threads_share_a_template(void **state)
{
    (void)state;
    const char *src = "{% for m in messages %}{{ loop.index }}:{{ m.content | upper }};{% endfor %}{{ messages | tojson }}";
    const char *ctx = "{\"messages\": [{\"content\": \"a\"}, {\"content\": \"b\"}]}";
    result want = render(src, ctx);
    assert_int_equal(want.status, NU_OK);
    nu_llm_template *tpl;
    LLM_OK(nu_llm_template_parse(src, strlen(src), &tpl, NULL));
    pthread_t t[4];
    thread_job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (thread_job){tpl, ctx, want.text, 0};
        assert_int_equal(pthread_create(&t[i], NULL, render_many, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(jobs[i].failures, 0);
    }
    nu_llm_template_free(tpl);
    free(want.text);
}

/* ---- Against the reference -------------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The files of dir ending in suffix, sorted, as full paths. */
static char **list_dir(const char *dir, const char *suffix, size_t *n)
{
    DIR *d = opendir(dir);
    if (!d)
        fail_msg("%s is missing (set NUVEC_MODELS_DIR to the folder of the test models)", dir);
    char **out = NULL;
    *n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name), sl = strlen(suffix);
        if (len <= sl || strcmp(e->d_name + len - sl, suffix))
            continue;
        out = realloc(out, (*n + 1) * sizeof *out);
        out[*n] = malloc(strlen(dir) + len + 2);
        sprintf(out[(*n)++], "%s/%s", dir, e->d_name);
    }
    closedir(d);
    qsort(out, *n, sizeof *out, cmp_str);
    return out;
}

typedef struct snippet {
    char name[80];
    char *source;
    char *vars; /* the @vars JSON text as written (numbers keep their spelling), or "{}" */
} snippet;

/* tests/jinja_snippets.txt: "=== NAME", an optional "@vars JSON" line, the template's lines. */
static snippet *read_snippets(size_t *n)
{
    char *text = nt_read_file(NUVEC_TESTS_DIR "/jinja_snippets.txt");
    snippet *out = NULL;
    *n = 0;
    char *p = text;
    snippet *cur = NULL;
    size_t body = 0;
    while (p && *p) {
        char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len >= 4 && !strncmp(p, "=== ", 4)) {
            out = realloc(out, (*n + 1) * sizeof *out);
            cur = &out[(*n)++];
            snprintf(cur->name, sizeof cur->name, "%.*s", (int)(len - 4), p + 4);
            cur->source = calloc(1, 1);
            cur->vars = strdup("{}");
            body = 0;
        } else if (cur && !body && len > 6 && !strncmp(p, "@vars ", 6)) {
            free(cur->vars);
            cur->vars = strndup(p + 6, len - 6);
        } else if (cur) {
            size_t old = strlen(cur->source);
            cur->source = realloc(cur->source, old + len + 2);
            sprintf(cur->source + old, "%s%.*s", body ? "\n" : "", (int)len, p);
            body++;
        }
        p = nl ? nl + 1 : NULL;
    }
    free(text);
    return out;
}

static void json_string(FILE *f, const char *s)
{
    cJSON *j = cJSON_CreateString(s);
    char *t = cJSON_PrintUnformatted(j);
    fputs(t, f);
    free(t);
    cJSON_Delete(j);
}

/* Whether nuvec's result agrees with the reference's; why not, in why. */
static bool agrees(const cJSON *ref, const result *ours, char *why, size_t cap)
{
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(ref, "text");
    if (cJSON_IsString(text)) {
        if (ours->status != NU_OK) {
            snprintf(why, cap, "Jinja2 renders it, nuvec fails: %s", ours->error.message);
            return false;
        }
        if (strcmp(text->valuestring, ours->text)) {
            size_t i = 0;
            while (text->valuestring[i] && text->valuestring[i] == ours->text[i])
                i++;
            snprintf(why, cap, "differs at byte %zu: Jinja2 [%.40s], nuvec [%.40s]", i, text->valuestring + i,
                     ours->text + i);
            return false;
        }
        return true;
    }
    const char *kind = cJSON_GetObjectItemCaseSensitive(ref, "error")->valuestring;
    const char *msg = cJSON_GetObjectItemCaseSensitive(ref, "message")->valuestring;
    nu_llm_template_failure want = !strcmp(kind, "raised") ? NU_LLM_TEMPLATE_RAISED
                                   : !strcmp(kind, "syntax") ? NU_LLM_TEMPLATE_SYNTAX
                                                             : NU_LLM_TEMPLATE_ERROR;
    if (ours->status == NU_OK || ours->error.kind != want) {
        snprintf(why, cap, "Jinja2 fails (%s: %.200s), nuvec %s%.200s", kind, msg, ours->status ? "fails otherwise: " : "renders",
                 ours->status ? ours->error.message : "");
        return false;
    }
    if (want == NU_LLM_TEMPLATE_RAISED && strcmp(msg, ours->error.message)) {
        snprintf(why, cap, "raise_exception messages differ: [%.200s] [%.200s]", msg, ours->error.message);
        return false;
    }
    return true;
}

/* Every template of the models folder with every conversation of tests/chat_corpus/, and every
 * snippet of tests/jinja_snippets.txt: nuvec and Debian's python3-jinja2 agree. */
static void renders_as_jinja2_renders(void **state)
{
    (void)state;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/templates", models_dir());
    size_t nt, nc, ns;
    char **templates = list_dir(dir, ".jinja", &nt), **contexts = list_dir(NUVEC_TESTS_DIR "/chat_corpus", ".json", &nc);
    snippet *snips = read_snippets(&ns);
    assert_true(nt >= 1 && nc >= 10 && ns >= 100);
    char jobs_path[4200], out_path[4200];
    snprintf(jobs_path, sizeof jobs_path, "%s/template_jobs.json", nt_tmp_dir());
    snprintf(out_path, sizeof out_path, "%s/template_results.json", nt_tmp_dir());
    FILE *f = fopen(jobs_path, "w");
    assert_non_null(f);
    fprintf(f, "{\"now\": %d, \"jobs\": [", NOW);
    for (size_t t = 0; t < nt; t++)
        for (size_t c = 0; c < nc; c++) {
            fprintf(f, "%s{\"template\": ", t || c ? ", " : "");
            json_string(f, templates[t]);
            fputs(", \"context\": ", f);
            json_string(f, contexts[c]);
            fputs("}", f);
        }
    for (size_t s = 0; s < ns; s++) {
        fputs(", {\"source\": ", f);
        json_string(f, snips[s].source);
        fprintf(f, ", \"vars\": %s}", snips[s].vars);
    }
    fputs("]}", f);
    fclose(f);
    const char *py = getenv("NUVEC_JINJA_PYTHON");
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "TZ=UTC '%s' '%s/render_jinja.py' '%s' '%s'", py && py[0] ? py : "/usr/bin/python3",
             NUVEC_TESTS_DIR, jobs_path, out_path);
    int rc = system(cmd);
    if (rc != 0)
        fail_msg("the reference renderer failed (exit status %d): it needs Debian's python3-jinja2 (make deps installs "
                 "it): %s", WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, cmd);
    char *out = nt_read_file(out_path);
    cJSON *root = cJSON_Parse(out);
    free(out);
    assert_non_null(root);
    const cJSON *results = cJSON_GetObjectItemCaseSensitive(root, "results");
    assert_int_equal(cJSON_GetArraySize(results), (int)(nt * nc + ns));
    char **ctx_text = calloc(nc, sizeof *ctx_text);
    for (size_t c = 0; c < nc; c++)
        ctx_text[c] = nt_read_file(contexts[c]);
    const cJSON *r = results->child;
    size_t templates_alike = 0, texts = 0, failures = 0, raised = 0, messages = 0, bad = 0;
    char why[600];
    for (size_t t = 0; t < nt; t++) {
        char *src = nt_read_file(templates[t]);
        size_t alike = 0;
        for (size_t c = 0; c < nc; c++, r = r->next) {
            result ours = render(src, ctx_text[c]);
            bool ok = agrees(r, &ours, why, sizeof why);
            if (ok) {
                alike++;
                if (ours.status == NU_OK) {
                    texts++;
                } else {
                    failures++;
                    raised += ours.error.kind == NU_LLM_TEMPLATE_RAISED;
                    messages += !strcmp(cJSON_GetObjectItemCaseSensitive(r, "message")->valuestring, ours.error.message);
                }
            } else {
                bad++;
                print_message("DIFFERS: %s with %s: %s\n", strrchr(templates[t], '/') + 1, strrchr(contexts[c], '/') + 1,
                              why);
            }
            if (ours.error.kind == NU_LLM_TEMPLATE_UNSUPPORTED) /* what the engine lacks, by name */
                print_message("unsupported: %s with %s: %s\n", strrchr(templates[t], '/') + 1,
                              strrchr(contexts[c], '/') + 1, ours.error.message);
            free(ours.text);
        }
        templates_alike += alike == nc;
        free(src);
    }
    print_message("templates: %zu of %zu render as Jinja2 does with all %zu conversations (%zu renders byte for byte, "
                  "%zu failing alike: %zu raise_exception with the same message, %zu of all with the same message)\n",
                  templates_alike, nt, nc, texts, failures, raised, messages);
    size_t snips_alike = 0;
    for (size_t s = 0; s < ns; s++, r = r->next) {
        result ours = render(snips[s].source, snips[s].vars);
        if (agrees(r, &ours, why, sizeof why))
            snips_alike++;
        else
            print_message("DIFFERS: snippet %s: %s\n", snips[s].name, why);
        free(ours.text);
        free(snips[s].source);
        free(snips[s].vars);
    }
    print_message("snippets: %zu of %zu render as Jinja2 does\n", snips_alike, ns);
    cJSON_Delete(root);
    for (size_t c = 0; c < nc; c++) {
        free(ctx_text[c]);
        free(contexts[c]);
    }
    for (size_t t = 0; t < nt; t++)
        free(templates[t]);
    free(ctx_text);
    free(contexts);
    free(templates);
    free(snips);
    assert_int_equal(bad + (ns - snips_alike), 0);
}

/* ---- Render contexts --------------------------------------------------------------------------------- */

static void chat_contexts(void **state)
{
    (void)state;
    const char *msgs = "[{\"role\": \"user\", \"content\": \"hi\", \"x\": 1.0}]";
    nu_llm_chat_request req = {.messages = msgs, .messages_length = strlen(msgs), .add_generation_prompt = true,
                               .bos_token = "<s>", .eos_token = "</s>\"\n"};
    char *ctx;
    size_t len;
    LLM_OK(nu_llm_chat_context(&req, &ctx, &len));
    assert_int_equal(len, strlen(ctx));
    const char *src = "{{ messages[0].content }}|{{ messages[0].x }}|{{ tools }}|{{ documents }}|{{ add_generation_prompt }}"
                      "|{{ bos_token }}|{{ eos_token | tojson }}|{{ enable_thinking is defined }}";
    expect(src, ctx, "hi|1.0|None|None|True|<s>|\"</s>\\\"\\n\"|False");
    free(ctx);
    req.extra = "{\"enable_thinking\": false, \"add_generation_prompt\": false}";
    req.extra_length = strlen(req.extra);
    req.tools = "[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]";
    req.tools_length = strlen(req.tools);
    LLM_OK(nu_llm_chat_context(&req, &ctx, &len));
    expect("{{ add_generation_prompt }}|{{ enable_thinking }}|{{ tools[0].function.name }}", ctx, "False|False|f");
    free(ctx);
    req.extra = "{ }";
    req.extra_length = 3;
    LLM_OK(nu_llm_chat_context(&req, &ctx, &len));
    free(ctx);
    nu_llm_chat_request bad = req;
    bad.messages = "{}";
    bad.messages_length = 2;
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_chat_context(&bad, &ctx, &len));
    assert_non_null(strstr(nu_llm_error_message(), "messages is not a JSON array"));
    assert_null(ctx);
    bad = req;
    bad.tools = "[1,";
    bad.tools_length = 3;
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_chat_context(&bad, &ctx, &len));
    assert_non_null(strstr(nu_llm_error_message(), "tools: "));
    bad = req;
    bad.extra = "[]";
    bad.extra_length = 2;
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_chat_context(&bad, &ctx, &len));
    bad = req;
    bad.bos_token = "\xFF";
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_chat_context(&bad, &ctx, &len));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_chat_context(NULL, &ctx, &len));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(whitespace_control),
        cmocka_unit_test(undefined_semantics),
        cmocka_unit_test(numbers_as_python_prints_them),
        cmocka_unit_test(tojson_options),
        cmocka_unit_test(loops),
        cmocka_unit_test(macros),
        cmocka_unit_test(namespaces_filters_methods),
        cmocka_unit_test(raise_exception_and_strftime),
        cmocka_unit_test(refusals_by_name),
        cmocka_unit_test(syntax_errors),
        cmocka_unit_test(limits),
        cmocka_unit_test(api_checks),
        cmocka_unit_test(every_allocation_fails_cleanly),
        cmocka_unit_test(threads_share_a_template),
        cmocka_unit_test(renders_as_jinja2_renders),
        cmocka_unit_test(chat_contexts),
    };
    return cmocka_run_group_tests(tests, utc, NULL);
}
