/* unicode.c: UTF-8 and the Unicode properties Python's str methods use (tables in
 * unicode_data.c, generated from the reference's Python). */
#include <string.h>

#include "jinja.h"
#include "unicode_data.h"

uint32_t j_utf8_next(const char *p, const char *end, size_t *len)
{
    const unsigned char *s = (const unsigned char *)p;
    size_t left = (size_t)(end - p);
    if (s[0] < 0x80 || left < 2) {
        *len = 1;
        return s[0];
    }
    if (s[0] < 0xE0) {
        *len = 2;
        return ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
    }
    if (s[0] < 0xF0 || left < 4) {
        *len = left < 3 ? left : 3;
        return ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (left > 2 ? s[2] & 0x3F : 0);
    }
    *len = 4;
    return ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) |
           (s[3] & 0x3F);
}

size_t j_utf8_put(char *out, uint32_t cp)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

bool j_utf8_valid(const char *str, size_t len, size_t *bad)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        size_t n;
        uint32_t min, cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xC2 && c < 0xE0) {
            n = 2, min = 0x80, cp = c & 0x1F;
        } else if (c >= 0xE0 && c < 0xF0) {
            n = 3, min = 0x800, cp = c & 0x0F;
        } else if (c >= 0xF0 && c < 0xF5) {
            n = 4, min = 0x10000, cp = c & 0x07;
        } else {
            break;
        }
        if (len - i < n)
            break;
        size_t k = 1;
        for (; k < n && (s[i + k] & 0xC0) == 0x80; k++)
            cp = (cp << 6) | (s[i + k] & 0x3F);
        if (k < n || cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            break;
        i += n;
    }
    if (bad)
        *bad = i;
    return i == len;
}

size_t j_utf8_count(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

size_t j_utf8_offset(const jstr *s, size_t i)
{
    if (s->cps == s->len)
        return i;
    size_t off = 0;
    for (size_t k = 0; k < i && off < s->len; k++) {
        size_t n;
        j_utf8_next(s->p + off, s->p + s->len, &n);
        off += n;
    }
    return off;
}

bool j_isspace(uint32_t cp)
{
    if (cp < 0x80)
        return (cp >= 9 && cp <= 13) || (cp >= 0x1C && cp <= 0x20);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

static bool in_ranges(const uint32_t (*r)[2], size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid][0])
            hi = mid;
        else if (cp > r[mid][1])
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

bool j_isprintable(uint32_t cp)
{
    if (cp < 0x80)
        return cp >= 0x20 && cp < 0x7F;
    return !in_ranges(j_nonprintable, j_nonprintable_count, cp);
}

static int case_map(uint32_t cp, const j_case_run *runs, size_t nruns, const j_case_multi *multi, size_t nmulti,
                    uint32_t out[3])
{
    size_t lo = 0, hi = nmulti;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < multi[mid].cp)
            hi = mid;
        else if (cp > multi[mid].cp)
            lo = mid + 1;
        else {
            int n = 0;
            while (n < 3 && multi[mid].out[n])
                out[n] = multi[mid].out[n], n++;
            return n;
        }
    }
    lo = 0, hi = nruns;
    while (lo < hi) { /* the last run starting at or before cp */
        size_t mid = (lo + hi) / 2;
        if (runs[mid].start <= cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo) {
        const j_case_run *r = &runs[lo - 1];
        uint32_t k = (cp - r->start) / r->stride;
        if ((cp - r->start) % r->stride == 0 && k < r->count) {
            out[0] = (uint32_t)((int32_t)cp + r->delta);
            return 1;
        }
    }
    out[0] = cp;
    return 1;
}

int j_case_upper(uint32_t cp, uint32_t out[3])
{
    if (cp < 0x80) {
        out[0] = cp >= 'a' && cp <= 'z' ? cp - 32 : cp;
        return 1;
    }
    return case_map(cp, j_upper_runs, j_upper_runs_count, j_upper_multi, j_upper_multi_count, out);
}

int j_case_lower_at(const char *start, const char *at, const char *end, uint32_t out[3])
{
    size_t n;
    uint32_t cp = j_utf8_next(at, end, &n);
    if (cp == 0x3A3) {
        out[0] = j_lower_sigma(start, at, end);
        return 1;
    }
    return j_case_lower(cp, out);
}

int j_case_lower(uint32_t cp, uint32_t out[3])
{
    if (cp < 0x80) {
        out[0] = cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
        return 1;
    }
    return case_map(cp, j_lower_runs, j_lower_runs_count, j_lower_multi, j_lower_multi_count, out);
}

int j_case_title(uint32_t cp, uint32_t out[3])
{
    if (cp < 0x80)
        return j_case_upper(cp, out);
    return case_map(cp, j_title_runs, j_title_runs_count, j_title_multi, j_title_multi_count, out);
}

bool j_is_lower(uint32_t cp)
{
    if (cp < 0x80)
        return cp >= 'a' && cp <= 'z';
    return in_ranges(j_lower_prop, j_lower_prop_count, cp);
}

bool j_is_upper(uint32_t cp)
{
    if (cp < 0x80)
        return cp >= 'A' && cp <= 'Z';
    return in_ranges(j_upper_prop, j_upper_prop_count, cp);
}

bool j_is_titlecase(uint32_t cp) { return cp >= 0x80 && in_ranges(j_title_prop, j_title_prop_count, cp); }

bool j_is_cased(uint32_t cp) { return j_is_lower(cp) || j_is_upper(cp) || j_is_titlecase(cp); }

bool j_case_ignorable(uint32_t cp)
{
    if (cp < 0x80)
        return cp == '\'' || cp == '.' || cp == ':' || cp == '^' || cp == '`';
    return in_ranges(j_ignorable_prop, j_ignorable_prop_count, cp);
}

/* Python's Final_Sigma: a cased letter before (case-ignorable ones skipped) and none after. */
uint32_t j_lower_sigma(const char *start, const char *at, const char *end)
{
    const char *p = at;
    uint32_t c = 0;
    bool before = false;
    while (p > start) {
        const char *q = p - 1;
        while (q > start && ((unsigned char)*q & 0xC0) == 0x80)
            q--;
        size_t n;
        c = j_utf8_next(q, end, &n);
        p = q;
        if (!j_case_ignorable(c)) {
            before = j_is_cased(c);
            break;
        }
    }
    if (!before)
        return 0x3C3;
    size_t n;
    j_utf8_next(at, end, &n);
    for (p = at + n; p < end; p += n) {
        c = j_utf8_next(p, end, &n);
        if (!j_case_ignorable(c))
            return j_is_cased(c) ? 0x3C3 : 0x3C2;
    }
    return 0x3C2;
}
