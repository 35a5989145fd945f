/* fuzz_llm_template.c: libFuzzer target for the chat-template engine (llm/chat/; built with
 * -DNUVEC_FUZZ=ON; `make fuzz-smoke`, `make fuzz`). The input is a template, optionally followed
 * by a NUL and a render context (JSON); without one, a fixed conversation with tools, tool calls
 * and a system prompt is the context. The template is parsed and rendered twice under small
 * limits (so that an iteration stays fast); checked: a parse or render either succeeds or fails
 * with a status, a failure kind and a message, and clears its out-parameters; the output is
 * valid UTF-8; the two renders agree. ASan and UBSan watch the rest. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nuvec_llm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond))                                                                           \
            abort();                                                                           \
    } while (0)

static const char CONTEXT[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Weather in "
    "Paris?\"}, {\"role\": \"assistant\", \"content\": null, \"reasoning_content\": \"use the tool\", \"tool_calls\": "
    "[{\"id\": \"call_1\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": "
    "{\"city\": \"Paris\", \"days\": 2}}}]}, {\"role\": \"tool\", \"tool_call_id\": \"call_1\", \"content\": "
    "\"18 \\u00b0C\"}, {\"role\": \"assistant\", \"content\": \"It is 18 \\u00b0C. \\ud83c\\udf24\"}], \"tools\": "
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather\", "
    "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": "
    "{\"type\": \"integer\", \"default\": 1}}, \"required\": [\"city\"]}}}], \"documents\": null, "
    "\"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"enable_thinking\": false, "
    "\"n\": 3, \"f\": 1.5}";

static bool valid_utf8(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        size_t k = c < 0x80 ? 1 : c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c < 0xF5 ? 4 : 0;
        if (!k || n - i < k)
            return false;
        for (size_t j = 1; j < k; j++)
            if ((p[i + j] & 0xC0) != 0x80)
                return false;
        uint32_t cp = k == 1 ? c : k == 2 ? c & 0x1F : k == 3 ? c & 0x0F : c & 0x07;
        for (size_t j = 1; j < k; j++)
            cp = (cp << 6) | (p[i + j] & 0x3F);
        if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp < 0xE000))
            return false;
        i += k;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *src = (const char *)data;
    const uint8_t *nul = memchr(data, 0, size);
    size_t src_len = nul ? (size_t)(nul - data) : size;
    const char *ctx = nul ? (const char *)nul + 1 : CONTEXT;
    size_t ctx_len = nul ? size - src_len - 1 : sizeof CONTEXT - 1;

    nu_llm_template *tpl = (nu_llm_template *)1;
    nu_llm_template_error e;
    nu_status st = nu_llm_template_parse(src, src_len, &tpl, &e);
    if (st != NU_OK) {
        CHECK(tpl == NULL && e.kind != NU_LLM_TEMPLATE_OK && nu_llm_error_message()[0]);
        return 0;
    }
    CHECK(tpl && e.kind == NU_LLM_TEMPLATE_OK);
    nu_llm_render_options o = {.now = 1735732800, .output_limit = 1 << 20, .memory_limit = 32 << 20,
                               .step_limit = 200000, .depth_limit = 200};
    char *out[2] = {(char *)1, (char *)1};
    size_t len[2] = {1, 1};
    nu_status rs[2];
    nu_llm_template_error re[2];
    for (int i = 0; i < 2; i++) {
        rs[i] = nu_llm_template_render(tpl, ctx, ctx_len, &o, &out[i], &len[i], &re[i]);
        if (rs[i] != NU_OK) {
            CHECK(out[i] == NULL && len[i] == 0 && re[i].kind != NU_LLM_TEMPLATE_OK && nu_llm_error_message()[0]);
        } else {
            CHECK(out[i] && out[i][len[i]] == 0 && re[i].kind == NU_LLM_TEMPLATE_OK);
            CHECK(valid_utf8(out[i], len[i]));
        }
    }
    /* the same render twice: the same result (strftime_now is pinned) */
    CHECK(rs[0] == rs[1] && re[0].kind == re[1].kind);
    if (rs[0] == NU_OK)
        CHECK(len[0] == len[1] && !memcmp(out[0], out[1], len[0]));
    else
        CHECK(!strcmp(re[0].message, re[1].message));
    free(out[0]);
    free(out[1]);
    nu_llm_template_free(tpl);
    return 0;
}
