/* fuzz_serve_request.c: libFuzzer target for `nuvec serve`'s request parser (tools/serve/api.c;
 * built with -DNUVEC_FUZZ=ON; `make fuzz-smoke`, `make fuzz`). The first byte picks the route's
 * schema (chat, completion, tokenize, detokenize, apply-template), the rest is the body. Checks
 * what the parser promises: a status of 0 or 4xx/5xx with an error body that is valid JSON of
 * OpenAI's shape, and on success only values inside the limits (stop strings non-empty and short,
 * ids non-negative and not too many, sampling parameters in range, messages as JSON text). The
 * UTF-8 cleaner runs on the body too: its output is valid UTF-8 and as long as promised. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "api.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond))                                                                           \
            abort();                                                                           \
    } while (0)

/* RFC 3629 UTF-8, checked independently of api_append_utf8's own table. */
static int valid_utf8(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i], k, cp;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF)
            k = 2, cp = c & 0x1F;
        else if (c >= 0xE0 && c <= 0xEF)
            k = 3, cp = c & 0x0F;
        else if (c >= 0xF0 && c <= 0xF4)
            k = 4, cp = c & 0x07;
        else
            return 0;
        if (i + k > n)
            return 0;
        for (unsigned j = 1; j < k; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += k;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size)
        return 0;
    api_kind kind = (api_kind)(data[0] % 5);
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    api_limits lim = {.max_tokens = 128, .max_stop = 4, .max_stop_bytes = 16, .max_ids = 64};
    api_params p;
    api_error e;
    int rc = api_parse(kind, body, len, &lim, &p, &e);
    if (rc) {
        CHECK(rc == e.status && rc >= 400 && rc < 600 && e.type && e.message[0]);
        CHECK(!p.model && !p.messages && !p.prompt && !p.ids && !p.stop && !p.n_ids && !p.n_stop);
        char *j = api_error_json(&e);
        CHECK(j);
        cJSON *o = cJSON_Parse(j), *err = cJSON_GetObjectItemCaseSensitive(o, "error");
        CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(err, "message")) &&
              cJSON_IsString(cJSON_GetObjectItemCaseSensitive(err, "type")));
        CHECK(valid_utf8((const unsigned char *)j, strlen(j)));
        cJSON_Delete(o);
        free(j);
    } else {
        CHECK(p.kind == kind);
        CHECK(p.n_stop <= lim.max_stop && p.n_ids <= lim.max_ids && p.max_tokens <= lim.max_tokens);
        for (uint32_t i = 0; i < p.n_stop; i++)
            CHECK(p.stop[i][0] && strlen(p.stop[i]) <= lim.max_stop_bytes);
        for (uint32_t i = 0; i < p.n_ids; i++)
            CHECK(p.ids[i] >= 0);
        CHECK(p.temperature >= 0 && p.temperature <= 100 && p.top_p >= 0 && p.top_p <= 1);
        CHECK(!p.include_usage || p.stream);
        if (kind == API_CHAT || kind == API_TEMPLATE) {
            cJSON *m = cJSON_Parse(p.messages);
            CHECK(cJSON_IsArray(m) && cJSON_GetArraySize(m) > 0);
            for (cJSON *x = m->child; x; x = x->next) {
                cJSON *c = cJSON_GetObjectItemCaseSensitive(x, "content");
                CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(x, "role")));
                CHECK(!c || cJSON_IsString(c) || cJSON_IsNull(c));
            }
            cJSON_Delete(m);
        }
        if (kind == API_COMPLETION)
            CHECK((p.prompt != NULL) != (p.n_ids > 0));
        if (kind == API_TOKENIZE)
            CHECK(p.prompt != NULL);
    }
    api_params_clear(&p);
    char *clean = NULL;
    size_t n = 0, cap = 0;
    CHECK(api_append_utf8(&clean, &n, &cap, body, len));
    CHECK(n <= 3 * len && strlen(clean) == n && valid_utf8((const unsigned char *)clean, n));
    free(clean);
    return 0;
}
