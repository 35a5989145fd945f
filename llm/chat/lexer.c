/* lexer.c: Jinja2's lexer (jinja2/lexer.py) with trim_blocks and lstrip_blocks, by hand. Its rules,
 * which decide every byte of whitespace the output keeps:
 *  - the source's \r\n and \r become \n, and one final \n is dropped;
 *  - text runs to the first "{{", "{%" or "{#"; a '-' right after it ("{%-") strips all
 *    whitespace (Python's \s, Unicode) before it; otherwise, for "{%" and "{#" without '+',
 *    lstrip_blocks drops the spaces between the line's start and the tag when nothing else is
 *    between them (also at the text's start when the previous tag ended a line);
 *  - "-%}", "-}}" and "-#}" strip all whitespace after them; "%}" and "#}" drop one \n after
 *    them (trim_blocks) unless written "+%}" / "+#}"; "}}" keeps what follows;
 *  - inside tags: whitespace, floats, integers, names, strings and operators, in that order of
 *    preference; a closing "%}" or "}}" counts only where brackets are balanced;
 *  - {% raw %} ... {% endraw %} is text.
 * String literals are unescaped as Python's unicode-escape codec reads them after
 * backslashreplace (which is what Jinja2 does), so "\n", "\x41", "\u00e9" and unknown escapes
 * such as "\d" (kept as they are) read alike. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "jinja.h"

typedef struct lexer {
    jstate *st;
    const char *s; /* the normalised source */
    size_t n, pos;
    uint32_t line;
    bool line_starting;
    jtoken *t;
    size_t nt, cap;
    int balance[256];
    size_t nbalance;
} lexer;

static uint32_t line_at(const lexer *lx, size_t pos)
{
    uint32_t line = 1;
    for (size_t i = 0; i < pos && i < lx->n; i++)
        line += lx->s[i] == '\n';
    return line;
}

static _Noreturn void lex_fail(lexer *lx, size_t pos, const char *fmt, const char *arg)
{
    lx->st->line = line_at(lx, pos);
    j_fail(lx->st, NU_LLM_TEMPLATE_SYNTAX, fmt, arg);
}

static jtoken *emit(lexer *lx, jtk type)
{
    if (lx->nt == lx->cap) {
        size_t cap = lx->cap ? lx->cap * 2 : 256;
        jtoken *t = j_alloc_array(lx->st, cap, sizeof *t);
        if (lx->nt)
            memcpy(t, lx->t, lx->nt * sizeof *t);
        lx->t = t;
        lx->cap = cap;
    }
    jtoken *t = &lx->t[lx->nt++];
    memset(t, 0, sizeof *t);
    t->type = (uint8_t)type;
    t->line = lx->line;
    return t;
}

static void count_lines(lexer *lx, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        lx->line += lx->s[i] == '\n';
}

/* The length of the Unicode whitespace character at p, or 0. */
static size_t space_at(const lexer *lx, size_t p)
{
    if (p >= lx->n)
        return 0;
    unsigned char c = (unsigned char)lx->s[p];
    if (c < 0x80)
        return j_isspace(c) ? 1 : 0;
    size_t len;
    uint32_t cp = j_utf8_next(lx->s + p, lx->s + lx->n, &len);
    return j_isspace(cp) ? len : 0;
}

static size_t skip_space(const lexer *lx, size_t p)
{
    size_t k;
    while ((k = space_at(lx, p)))
        p += k;
    return p;
}

/* Python's str.rstrip() of s[from, to): the new end. */
static size_t rstrip_end(const lexer *lx, size_t from, size_t to)
{
    size_t end = to;
    while (end > from) {
        size_t b = end - 1;
        while (b > from && ((unsigned char)lx->s[b] & 0xC0) == 0x80)
            b--;
        if (space_at(lx, b) != end - b)
            break;
        end = b;
    }
    return end;
}

/* Emits text s[from, to) before a tag with whitespace control sign `sign` ('-', '+' or 0);
 * lstrip: whether lstrip_blocks applies to this tag. */
static void text_before_tag(lexer *lx, size_t from, size_t to, char sign, bool lstrip)
{
    size_t end = to;
    if (sign == '-') {
        end = rstrip_end(lx, from, to);
    } else if (sign != '+' && lstrip) {
        size_t l = to;
        while (l > from && lx->s[l - 1] != '\n')
            l--;
        if ((l > from || lx->line_starting) && l < to && skip_space(lx, l) == to)
            end = l;
    }
    if (end > from) {
        jtoken *t = emit(lx, TK_DATA);
        t->p = lx->s + from;
        t->len = end - from;
    }
    count_lines(lx, from, to);
}

static bool match(const lexer *lx, size_t p, const char *w)
{
    size_t n = strlen(w);
    return p + n <= lx->n && !memcmp(lx->s + p, w, n);
}

static bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* {%[-+]?\s*raw\s*(-%}\s*|%}) at p: its end, or 0. */
static size_t raw_begin(const lexer *lx, size_t p, char *sign)
{
    size_t q = p + 2;
    *sign = 0;
    if (q < lx->n && (lx->s[q] == '-' || lx->s[q] == '+'))
        *sign = lx->s[q++];
    q = skip_space(lx, q);
    if (!match(lx, q, "raw"))
        return 0;
    q = skip_space(lx, q + 3);
    if (match(lx, q, "-%}"))
        return skip_space(lx, q + 3);
    if (match(lx, q, "%}"))
        return q + 2;
    return 0;
}

/* The endraw tag at p: {%[-+]?\s*endraw\s*(+%}|-%}\s*|%}\n?). Its end, or 0. */
static size_t raw_end(const lexer *lx, size_t p, char *sign)
{
    size_t q = p + 2;
    *sign = 0;
    if (q < lx->n && (lx->s[q] == '-' || lx->s[q] == '+'))
        *sign = lx->s[q++];
    q = skip_space(lx, q);
    if (!match(lx, q, "endraw"))
        return 0;
    q = skip_space(lx, q + 6);
    if (match(lx, q, "+%}"))
        return q + 3;
    if (match(lx, q, "-%}"))
        return skip_space(lx, q + 3);
    if (match(lx, q, "%}"))
        return q + 2 + (q + 2 < lx->n && lx->s[q + 2] == '\n');
    return 0;
}

static void lex_raw(lexer *lx)
{
    for (size_t p = lx->pos; p + 1 < lx->n; p++) {
        char sign;
        size_t end;
        if (lx->s[p] == '{' && lx->s[p + 1] == '%' && (end = raw_end(lx, p, &sign))) {
            text_before_tag(lx, lx->pos, p, sign, true);
            count_lines(lx, p, end);
            lx->line_starting = lx->s[end - 1] == '\n';
            lx->pos = end;
            return;
        }
    }
    lex_fail(lx, lx->pos, "%s", "Missing end of raw directive");
}

static void lex_comment(lexer *lx)
{
    for (size_t p = lx->pos; p + 1 < lx->n; p++) {
        if (lx->s[p] != '#' || lx->s[p + 1] != '}')
            continue;
        size_t end = p + 2;
        if (p > lx->pos && lx->s[p - 1] == '-')
            end = skip_space(lx, end);
        else if (!(p > lx->pos && lx->s[p - 1] == '+') && end < lx->n && lx->s[end] == '\n')
            end++;
        count_lines(lx, lx->pos, end);
        lx->line_starting = lx->s[end - 1] == '\n';
        lx->pos = end;
        return;
    }
    lex_fail(lx, lx->pos, "%s", "Missing end of comment tag");
}

/* Python's unicode-escape decoding of a literal's body s[from, to) (see the file comment). */
static void unescape(lexer *lx, size_t from, size_t to, jtoken *t)
{
    jbuf b = {0};
    const char *s = lx->s;
    size_t i = from;
    while (i < to) {
        size_t j = i;
        while (j < to && s[j] != '\\')
            j++;
        j_buf_add(lx->st, &b, s + i, j - i);
        if (j == to)
            break;
        /* s[j] is a backslash and s[j + 1] exists (the literal's pattern ensures it) */
        char e = s[j + 1];
        i = j + 2;
        int digits = 0;
        switch (e) {
        case '\n': break;
        case '\\': j_buf_addc(lx->st, &b, '\\'); break;
        case '\'': j_buf_addc(lx->st, &b, '\''); break;
        case '"': j_buf_addc(lx->st, &b, '"'); break;
        case 'a': j_buf_addc(lx->st, &b, '\a'); break;
        case 'b': j_buf_addc(lx->st, &b, '\b'); break;
        case 'f': j_buf_addc(lx->st, &b, '\f'); break;
        case 'n': j_buf_addc(lx->st, &b, '\n'); break;
        case 'r': j_buf_addc(lx->st, &b, '\r'); break;
        case 't': j_buf_addc(lx->st, &b, '\t'); break;
        case 'v': j_buf_addc(lx->st, &b, '\v'); break;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        case 'N': j_fail_at(lx->st, line_at(lx, j), NU_LLM_TEMPLATE_UNSUPPORTED, "the \\N{...} escape is not supported");
        default:
            if (e >= '0' && e <= '7') {
                uint32_t v = (uint32_t)(e - '0');
                for (int k = 0; k < 2 && i < to && s[i] >= '0' && s[i] <= '7'; k++)
                    v = v * 8 + (uint32_t)(s[i++] - '0');
                j_buf_addcp(lx->st, &b, v);
            } else if ((unsigned char)e >= 0x80) {
                /* backslashreplace wrote the character as \xhh, \uhhhh or \Uhhhhhhhh, and the
                 * codec reads "\\" as a backslash followed by that text */
                size_t len;
                uint32_t cp = j_utf8_next(s + j + 1, s + to, &len);
                i = j + 1 + len;
                if (cp <= 0xFF)
                    j_buf_addf(lx->st, &b, "\\x%02x", cp);
                else if (cp <= 0xFFFF)
                    j_buf_addf(lx->st, &b, "\\u%04x", cp);
                else
                    j_buf_addf(lx->st, &b, "\\U%08x", cp);
            } else {
                j_buf_addc(lx->st, &b, '\\'); /* unknown escapes stay */
                i = j + 1;
            }
        }
        if (digits) {
            uint32_t v = 0;
            for (int k = 0; k < digits; k++) {
                char c = i < to ? s[i] : 0;
                int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
                if (d < 0)
                    lex_fail(lx, j, "truncated \\%s escape", e == 'x' ? "xXX" : e == 'u' ? "uXXXX" : "UXXXXXXXX");
                v = v * 16 + (uint32_t)d;
                i++;
            }
            if (v > 0x10FFFF)
                lex_fail(lx, j, "%s", "illegal Unicode character");
            if (v >= 0xD800 && v < 0xE000)
                lex_fail(lx, j, "%s", "a lone surrogate escape (\\ud800-\\udfff) is not supported");
            j_buf_addcp(lx->st, &b, v);
        }
    }
    j_buf_addc(lx->st, &b, 0);
    t->p = b.p;
    t->len = b.len - 1;
}

/* Digits with single '_' between them, as Python's (\d+_)*\d+: the end, or `p` if none. */
static size_t digits_us(const lexer *lx, size_t p)
{
    size_t q = p;
    if (q >= lx->n || !is_digit(lx->s[q]))
        return p;
    while (q < lx->n && is_digit(lx->s[q])) {
        q++;
        if (q + 1 < lx->n && lx->s[q] == '_' && is_digit(lx->s[q + 1]))
            q++;
    }
    return q;
}

/* A float at p (Jinja2's float_re, not after a '.'): its end, or 0. */
static size_t float_at(const lexer *lx, size_t p)
{
    if (p > 0 && lx->s[p - 1] == '.')
        return 0;
    size_t q = digits_us(lx, p);
    if (q == p)
        return 0;
    size_t frac = q;
    if (q + 1 < lx->n && lx->s[q] == '.' && is_digit(lx->s[q + 1]))
        frac = digits_us(lx, q + 1);
    size_t e = frac;
    if (e < lx->n && (lx->s[e] == 'e' || lx->s[e] == 'E')) {
        size_t x = e + 1;
        if (x < lx->n && (lx->s[x] == '+' || lx->s[x] == '-'))
            x++;
        size_t xe = digits_us(lx, x);
        if (xe > x)
            return xe;
    }
    return frac > q ? frac : 0;
}

static void number(lexer *lx, size_t p, size_t end, bool is_float)
{
    char tmp[128];
    size_t k = 0;
    for (size_t i = p; i < end && k + 1 < sizeof tmp; i++)
        if (lx->s[i] != '_')
            tmp[k++] = lx->s[i];
    tmp[k] = 0;
    if (end - p >= sizeof tmp - 1)
        lex_fail(lx, p, "%s", "a number literal this long is not supported");
    jtoken *t = emit(lx, is_float ? TK_FLOAT : TK_INT);
    if (is_float) {
        t->f = strtod(tmp, NULL);
        return;
    }
    int base = 10;
    const char *digits = tmp;
    if (tmp[0] == '0' && (tmp[1] == 'x' || tmp[1] == 'X'))
        base = 16, digits = tmp + 2;
    else if (tmp[0] == '0' && (tmp[1] == 'o' || tmp[1] == 'O'))
        base = 8, digits = tmp + 2;
    else if (tmp[0] == '0' && (tmp[1] == 'b' || tmp[1] == 'B'))
        base = 2, digits = tmp + 2;
    uint64_t v = 0;
    for (const char *d = digits; *d; d++) {
        int x = *d <= '9' ? *d - '0' : (*d | 32) - 'a' + 10;
        if (v > (UINT64_MAX - (uint64_t)x) / (uint64_t)base || v * (uint64_t)base + (uint64_t)x > (uint64_t)INT64_MAX)
            j_fail_at(lx->st, lx->line, NU_LLM_TEMPLATE_UNSUPPORTED, "integers beyond 64 bits are not supported");
        v = v * (uint64_t)base + (uint64_t)x;
    }
    t->i = (int64_t)v;
}

/* An integer at p (Jinja2's integer_re): its end, or 0. */
static size_t int_at(const lexer *lx, size_t p)
{
    const char *s = lx->s;
    if (p >= lx->n || !is_digit(s[p]))
        return 0;
    if (s[p] == '0' && p + 1 < lx->n && strchr("xXoObB", s[p + 1]) && s[p + 1]) {
        char k = (char)(s[p + 1] | 32);
        size_t q = p + 2, last = 0;
        for (;;) {
            size_t r = q;
            if (r < lx->n && s[r] == '_')
                r++;
            char c = r < lx->n ? s[r] : 0;
            bool ok = k == 'x' ? (is_digit(c) || ((c | 32) >= 'a' && (c | 32) <= 'f')) : k == 'o' ? (c >= '0' && c <= '7') : (c == '0' || c == '1');
            if (!ok)
                break;
            q = r + 1;
            last = q;
        }
        if (last)
            return last;
    }
    if (s[p] == '0') {
        size_t q = p + 1;
        for (;;) {
            size_t r = q;
            if (r < lx->n && s[r] == '_')
                r++;
            if (r < lx->n && s[r] == '0')
                q = r + 1;
            else
                break;
        }
        return q;
    }
    size_t q = p + 1;
    for (;;) {
        size_t r = q;
        if (r < lx->n && s[r] == '_')
            r++;
        if (r < lx->n && is_digit(s[r]))
            q = r + 1;
        else
            break;
    }
    return q;
}

static const struct { const char *op; jtk type; } OPERATORS[] = {
    {"//", TK_FLOORDIV}, {"**", TK_POW}, {"==", TK_EQ}, {"!=", TK_NE}, {">=", TK_GTEQ}, {"<=", TK_LTEQ},
    {"+", TK_ADD}, {"-", TK_SUB}, {"/", TK_DIV}, {"*", TK_MUL}, {"%", TK_MOD}, {"~", TK_TILDE},
    {"[", TK_LBRACKET}, {"]", TK_RBRACKET}, {"(", TK_LPAREN}, {")", TK_RPAREN}, {"{", TK_LBRACE},
    {"}", TK_RBRACE}, {">", TK_GT}, {"<", TK_LT}, {"=", TK_ASSIGN}, {".", TK_DOT}, {":", TK_COLON},
    {"|", TK_PIPE}, {",", TK_COMMA}, {";", TK_SEMICOLON},
};

/* Inside {{ }} or {% %} until the closing tag. */
static void lex_tag(lexer *lx, bool block)
{
    lx->nbalance = 0;
    for (;;) {
        size_t p = lx->pos;
        if (p >= lx->n)
            lex_fail(lx, p, "%s", block ? "Unexpected end of template: '%}' expected" : "Unexpected end of template: '}}' expected");
        if (!lx->nbalance) {
            size_t end = 0;
            if (block) {
                if (match(lx, p, "+%}"))
                    end = p + 3;
                else if (match(lx, p, "-%}"))
                    end = skip_space(lx, p + 3);
                else if (match(lx, p, "%}"))
                    end = p + 2 + (p + 2 < lx->n && lx->s[p + 2] == '\n');
            } else {
                if (match(lx, p, "-}}"))
                    end = skip_space(lx, p + 3);
                else if (match(lx, p, "}}"))
                    end = p + 2;
            }
            if (end) {
                emit(lx, block ? TK_BLOCK_END : TK_VAR_END);
                count_lines(lx, p, end);
                lx->line_starting = lx->s[end - 1] == '\n';
                lx->pos = end;
                return;
            }
        }
        size_t q = skip_space(lx, p);
        if (q > p) {
            count_lines(lx, p, q);
            lx->pos = q;
            continue;
        }
        if ((q = float_at(lx, p))) {
            number(lx, p, q, true);
            lx->pos = q;
            continue;
        }
        if ((q = int_at(lx, p))) {
            number(lx, p, q, false);
            lx->pos = q;
            continue;
        }
        char c = lx->s[p];
        if (is_name_start(c)) {
            q = p + 1;
            while (q < lx->n && is_name_char(lx->s[q]))
                q++;
            if (q < lx->n && (unsigned char)lx->s[q] >= 0x80)
                j_fail_at(lx->st, lx->line, NU_LLM_TEMPLATE_UNSUPPORTED, "non-ASCII names are not supported");
            jtoken *t = emit(lx, TK_NAME);
            char *name = j_alloc(lx->st, q - p + 1);
            memcpy(name, lx->s + p, q - p);
            name[q - p] = 0;
            t->p = name;
            t->len = q - p;
            lx->pos = q;
            continue;
        }
        if (c == '\'' || c == '"') {
            q = p + 1;
            while (q < lx->n && lx->s[q] != c)
                q += lx->s[q] == '\\' && q + 1 < lx->n ? 2 : 1;
            if (q < lx->n) {
                jtoken *t = emit(lx, TK_STRING);
                unescape(lx, p + 1, q, t);
                count_lines(lx, p, q);
                lx->pos = q + 1;
                continue;
            }
        }
        if ((unsigned char)c >= 0x80)
            j_fail_at(lx->st, lx->line, NU_LLM_TEMPLATE_UNSUPPORTED, "non-ASCII names are not supported");
        size_t k = 0;
        for (; k < sizeof OPERATORS / sizeof OPERATORS[0]; k++)
            if (match(lx, p, OPERATORS[k].op))
                break;
        if (k == sizeof OPERATORS / sizeof OPERATORS[0]) {
            char ch[2] = {c, 0};
            lex_fail(lx, p, "unexpected char '%s'", ch);
        }
        jtk type = OPERATORS[k].type;
        if (type == TK_LBRACE || type == TK_LPAREN || type == TK_LBRACKET) {
            if (lx->nbalance == sizeof lx->balance / sizeof lx->balance[0])
                j_fail_at(lx->st, lx->line, NU_LLM_TEMPLATE_LIMIT, "brackets nested deeper than 256");
            lx->balance[lx->nbalance++] = type == TK_LBRACE ? '}' : type == TK_LPAREN ? ')' : ']';
        } else if (type == TK_RBRACE || type == TK_RPAREN || type == TK_RBRACKET) {
            char got = type == TK_RBRACE ? '}' : type == TK_RPAREN ? ')' : ']';
            char msg[40];
            if (!lx->nbalance) {
                snprintf(msg, sizeof msg, "unexpected '%c'", got);
                lex_fail(lx, p, "%s", msg);
            }
            char want = (char)lx->balance[--lx->nbalance];
            if (want != got) {
                snprintf(msg, sizeof msg, "unexpected '%c', expected '%c'", got, want);
                lex_fail(lx, p, "%s", msg);
            }
        }
        emit(lx, type);
        lx->pos = p + strlen(OPERATORS[k].op);
    }
}

void j_lex(jstate *st, const char *src, size_t len, jtoken **tokens, size_t *count)
{
    /* newlines normalised and one final newline dropped, as Jinja2's tokeniter */
    char *s = j_alloc(st, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
        } else {
            s[n++] = src[i];
        }
    }
    if (n && s[n - 1] == '\n')
        n--;
    s[n] = 0;
    lexer lx = {.st = st, .s = s, .n = n, .line = 1, .line_starting = true};
    while (lx.pos < lx.n) {
        size_t p = lx.pos;
        while (p + 1 < lx.n && !(lx.s[p] == '{' && (lx.s[p + 1] == '{' || lx.s[p + 1] == '%' || lx.s[p + 1] == '#')))
            p++;
        if (p + 1 >= lx.n) { /* no tag: the rest is text */
            jtoken *t = emit(&lx, TK_DATA);
            t->p = lx.s + lx.pos;
            t->len = lx.n - lx.pos;
            count_lines(&lx, lx.pos, lx.n);
            break;
        }
        char kind = lx.s[p + 1], sign = 0;
        size_t tag_end = p + 2;
        if (kind == '%') {
            size_t raw = raw_begin(&lx, p, &sign);
            if (raw) {
                text_before_tag(&lx, lx.pos, p, sign, true);
                count_lines(&lx, p, raw);
                lx.line_starting = lx.s[raw - 1] == '\n';
                lx.pos = raw;
                lex_raw(&lx);
                continue;
            }
        }
        if (tag_end < lx.n && (lx.s[tag_end] == '-' || lx.s[tag_end] == '+'))
            sign = lx.s[tag_end++];
        text_before_tag(&lx, lx.pos, p, sign, kind != '{');
        lx.line_starting = false;
        lx.pos = tag_end;
        if (kind == '#') {
            lex_comment(&lx);
        } else {
            emit(&lx, kind == '%' ? TK_BLOCK_BEGIN : TK_VAR_BEGIN);
            lex_tag(&lx, kind == '%');
        }
    }
    emit(&lx, TK_EOF);
    *tokens = lx.t;
    *count = lx.nt;
}

const char *j_token_desc(const jtoken *t)
{
    static const char *const names[] = {
        [TK_EOF] = "end of template", [TK_DATA] = "template data / text",
        [TK_VAR_BEGIN] = "begin of print statement", [TK_VAR_END] = "end of print statement",
        [TK_BLOCK_BEGIN] = "begin of statement block", [TK_BLOCK_END] = "end of statement block",
        [TK_NAME] = "name", [TK_STRING] = "string", [TK_INT] = "integer", [TK_FLOAT] = "float",
        [TK_ADD] = "+", [TK_SUB] = "-", [TK_DIV] = "/", [TK_FLOORDIV] = "//", [TK_MUL] = "*",
        [TK_MOD] = "%", [TK_POW] = "**", [TK_TILDE] = "~", [TK_LBRACKET] = "[", [TK_RBRACKET] = "]",
        [TK_LPAREN] = "(", [TK_RPAREN] = ")", [TK_LBRACE] = "{", [TK_RBRACE] = "}", [TK_EQ] = "==",
        [TK_NE] = "!=", [TK_GT] = ">", [TK_GTEQ] = ">=", [TK_LT] = "<", [TK_LTEQ] = "<=",
        [TK_ASSIGN] = "=", [TK_DOT] = ".", [TK_COLON] = ":", [TK_PIPE] = "|", [TK_COMMA] = ",",
        [TK_SEMICOLON] = ";",
    };
    if (t->type == TK_NAME)
        return t->p;
    return t->type < sizeof names / sizeof names[0] && names[t->type] ? names[t->type] : "?";
}
