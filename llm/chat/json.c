/* json.c: JSON text into values, as Python's json.loads reads it: integers stay integers (within
 * 64 bits; larger ones are refused), numbers with a fraction or an exponent are floats, NaN,
 * Infinity and -Infinity are accepted, an object keeps its keys' order (a repeated key: the last
 * value, at the first one's place), strings must be UTF-8 without raw control characters and
 * without lone surrogates (Python keeps those; nuvec's strings are UTF-8). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jinja.h"

typedef struct jsonp {
    jstate *st;
    const char *p, *start, *end;
    const char *what;
} jsonp;

static _Noreturn void bad(jsonp *j, const char *why)
{
    j_fail(j->st, NU_LLM_TEMPLATE_ARGUMENT, "%s: %s at byte %zu", j->what, why, (size_t)(j->p - j->start));
}

static void ws(jsonp *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static bool word(jsonp *j, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n))
        return false;
    j->p += n;
    return true;
}

static int hex4(jsonp *j)
{
    if (j->end - j->p < 4)
        bad(j, "a truncated \\u escape");
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = j->p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            bad(j, "an invalid \\u escape");
        v = v * 16 + d;
    }
    j->p += 4;
    return v;
}

static jv string(jsonp *j)
{
    j->p++; /* the opening quote */
    jbuf b = {0};
    for (;;) {
        const char *q = j->p;
        while (q < j->end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20)
            q++;
        size_t badat;
        if (!j_utf8_valid(j->p, (size_t)(q - j->p), &badat)) {
            j->p += badat;
            bad(j, "invalid UTF-8");
        }
        j_buf_add(j->st, &b, j->p, (size_t)(q - j->p));
        j->p = q;
        if (q == j->end)
            bad(j, "an unterminated string");
        if (*q == '"') {
            j->p++;
            return j_buf_str(j->st, &b);
        }
        if ((unsigned char)*q < 0x20)
            bad(j, "a control character in a string");
        j->p++; /* the backslash */
        if (j->p == j->end)
            bad(j, "an unterminated string");
        char e = *j->p++;
        switch (e) {
        case '"': j_buf_addc(j->st, &b, '"'); break;
        case '\\': j_buf_addc(j->st, &b, '\\'); break;
        case '/': j_buf_addc(j->st, &b, '/'); break;
        case 'b': j_buf_addc(j->st, &b, '\b'); break;
        case 'f': j_buf_addc(j->st, &b, '\f'); break;
        case 'n': j_buf_addc(j->st, &b, '\n'); break;
        case 'r': j_buf_addc(j->st, &b, '\r'); break;
        case 't': j_buf_addc(j->st, &b, '\t'); break;
        case 'u': {
            uint32_t cp = (uint32_t)hex4(j);
            if (cp >= 0xD800 && cp < 0xDC00 && j->end - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u') {
                const char *save = j->p;
                j->p += 2;
                uint32_t lo = (uint32_t)hex4(j);
                if (lo >= 0xDC00 && lo < 0xE000)
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                else
                    j->p = save;
            }
            if (cp >= 0xD800 && cp < 0xE000)
                bad(j, "a lone surrogate (\\ud800-\\udfff) in a string");
            j_buf_addcp(j->st, &b, cp);
            break;
        }
        default: j->p--; bad(j, "an invalid escape");
        }
    }
}

static jv number(jsonp *j)
{
    const char *s = j->p;
    bool is_float = false;
    if (j->p < j->end && *j->p == '-')
        j->p++;
    if (j->p < j->end && *j->p == '0')
        j->p++;
    else if (j->p < j->end && *j->p >= '1' && *j->p <= '9')
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
            j->p++;
    else
        bad(j, "an invalid value");
    if (j->end - j->p >= 2 && *j->p == '.' && j->p[1] >= '0' && j->p[1] <= '9') {
        is_float = true;
        j->p++;
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
            j->p++;
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        const char *e = j->p + 1;
        if (e < j->end && (*e == '+' || *e == '-'))
            e++;
        if (e < j->end && *e >= '0' && *e <= '9') {
            is_float = true;
            j->p = e;
            while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
                j->p++;
        }
    }
    char tmp[64];
    size_t n = (size_t)(j->p - s);
    if (n >= sizeof tmp) {
        if (!is_float)
            j_unsupported(j->st, "%s: an integer beyond 64 bits at byte %zu", j->what, (size_t)(s - j->start));
        char *big = j_alloc(j->st, n + 1);
        memcpy(big, s, n);
        big[n] = 0;
        return jv_float(strtod(big, NULL));
    }
    memcpy(tmp, s, n);
    tmp[n] = 0;
    if (is_float)
        return jv_float(strtod(tmp, NULL));
    errno = 0;
    long long v = strtoll(tmp, NULL, 10);
    if (errno == ERANGE)
        j_unsupported(j->st, "%s: an integer beyond 64 bits at byte %zu", j->what, (size_t)(s - j->start));
    return jv_int(v);
}

static jv value(jsonp *j)
{
    ws(j);
    if (j->p == j->end)
        bad(j, "the text ends where a value should be");
    char c = *j->p;
    if (c == '"')
        return string(j);
    if (c == '{' || c == '[') {
        j_enter(j->st);
        j->p++;
        ws(j);
        jv out;
        if (c == '[') {
            jlist *l = j_list_new(j->st, JL_LIST, 0);
            if (j->p < j->end && *j->p == ']') {
                j->p++;
            } else {
                for (;;) {
                    j_list_push(j->st, l, value(j));
                    ws(j);
                    if (j->p < j->end && *j->p == ',') {
                        j->p++;
                        continue;
                    }
                    if (j->p < j->end && *j->p == ']') {
                        j->p++;
                        break;
                    }
                    bad(j, "',' or ']' expected");
                }
            }
            out = jv_listv(l);
        } else {
            jdict *d = j_dict_new(j->st, 0);
            if (j->p < j->end && *j->p == '}') {
                j->p++;
            } else {
                for (;;) {
                    ws(j);
                    if (j->p == j->end || *j->p != '"')
                        bad(j, "a string key expected");
                    jv k = string(j);
                    ws(j);
                    if (j->p == j->end || *j->p != ':')
                        bad(j, "':' expected");
                    j->p++;
                    jv v = value(j);
                    j_dict_set(j->st, d, k, v);
                    ws(j);
                    if (j->p < j->end && *j->p == ',') {
                        j->p++;
                        continue;
                    }
                    if (j->p < j->end && *j->p == '}') {
                        j->p++;
                        break;
                    }
                    bad(j, "',' or '}' expected");
                }
            }
            out = jv_dictv(d);
        }
        j_leave(j->st);
        return out;
    }
    if (word(j, "true"))
        return jv_bool(true);
    if (word(j, "false"))
        return jv_bool(false);
    if (word(j, "null"))
        return jv_none();
    if (word(j, "NaN"))
        return jv_float(NAN);
    if (word(j, "Infinity"))
        return jv_float(INFINITY);
    if (word(j, "-Infinity"))
        return jv_float(-INFINITY);
    return number(j);
}

jv j_json_parse(jstate *st, const char *text, size_t len, const char *what)
{
    jsonp j = {.st = st, .p = text, .start = text, .end = text + len, .what = what};
    jv v = value(&j);
    ws(&j);
    if (j.p != j.end)
        bad(&j, "extra data after the value");
    return v;
}
