/* prompt.c: chat templates and prompt ids (prompt.h). */
#include "prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ChatML, as llama.cpp's server applies it to models without a template. */
static const char chatml[] =
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + (message['content'] if message['content'] is string else '') "
    "+ '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}";

char *const chat_prompt_builtin_stops[2] = {"<|im_end|>", "<|im_start|>"};

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *s = NULL;
    long n;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && n < (16 << 20) && fseek(f, 0, SEEK_SET) == 0 &&
        (s = malloc((size_t)n + 1)) && fread(s, 1, (size_t)n, f) == (size_t)n) {
        s[n] = 0;
        *len = (size_t)n;
    } else {
        free(s);
        s = NULL;
    }
    if (f)
        fclose(f);
    return s;
}

static char *dup_or_null(const char *s)
{
    if (!s)
        return NULL;
    char *d = malloc(strlen(s) + 1);
    return d ? strcpy(d, s) : NULL;
}

int chat_prompt_open(chat_prompt *p, const char *model_path, const char *template_path, const nu_llm_tokenizer *tok,
                     char *msg, size_t cap)
{
    memset(p, 0, sizeof *p);
    p->tok = tok;
    nu_llm_chat_template t = {0};
    const char *src = chatml;
    size_t len = sizeof chatml - 1;
    char *file = NULL;
    bool from_model = nu_llm_chat_template_from_model(model_path, NULL, false, &t) == NU_OK;
    if (template_path) {
        if (!(file = read_file(template_path, &len))) {
            snprintf(msg, cap, "cannot read the chat template %s", template_path);
            nu_llm_chat_template_clear(&t);
            return -1;
        }
        src = file;
        snprintf(p->origin, sizeof p->origin, "the template in %s", template_path);
    } else if (from_model) {
        src = t.source, len = t.length;
        snprintf(p->origin, sizeof p->origin, "the model's chat template%s%s", t.name ? " " : "", t.name ? t.name : "");
    } else {
        p->builtin = true;
        snprintf(p->origin, sizeof p->origin, "ChatML (the model has no chat template: %s)", nu_llm_error_message());
    }
    p->bos = dup_or_null(t.bos_token);
    p->eos = dup_or_null(t.eos_token);
    nu_llm_template_error te;
    nu_status st = nu_llm_template_parse(src, len, &p->tpl, &te);
    nu_llm_chat_template_clear(&t);
    free(file);
    if (st != NU_OK) {
        snprintf(msg, cap, "the chat template (%s) does not parse: line %u: %s", p->origin, te.line, te.message);
        chat_prompt_close(p);
        return -1;
    }
    return 0;
}

void chat_prompt_close(chat_prompt *p)
{
    nu_llm_template_free(p->tpl);
    free(p->bos);
    free(p->eos);
    memset(p, 0, sizeof *p);
}

int chat_prompt_render(const chat_prompt *p, const char *messages, size_t len, char **text, api_error *err)
{
    *text = NULL;
    nu_llm_chat_request rq = {.messages = messages, .messages_length = len, .add_generation_prompt = true,
                              .bos_token = p->bos, .eos_token = p->eos};
    char *ctx = NULL;
    size_t ctx_len = 0, out_len = 0;
    if (nu_llm_chat_context(&rq, &ctx, &ctx_len) != NU_OK)
        return api_fail(err, 400, "invalid_request_error", NULL, "messages", "messages: %s", nu_llm_error_message());
    nu_llm_template_error te;
    nu_status st = nu_llm_template_render(p->tpl, ctx, ctx_len, NULL, text, &out_len, &te);
    free(ctx);
    if (st == NU_OK)
        return 0;
    if (te.kind == NU_LLM_TEMPLATE_MEMORY)
        return api_fail(err, 500, "server_error", NULL, NULL, "out of memory rendering the chat template");
    return api_fail(err, 400, "invalid_request_error", NULL, "messages", "the chat template %s: %s",
                    te.kind == NU_LLM_TEMPLATE_RAISED ? "refused the messages" : "failed", te.message);
}

int chat_prompt_tokenize(const nu_llm_tokenizer *tok, const char *bos, const char *text, size_t len, bool add_special,
                         int32_t **ids, uint32_t *n, api_error *err)
{
    *ids = NULL, *n = 0;
    if (!tok)
        return api_fail(err, 400, "invalid_request_error", NULL, NULL, "the model has no tokenizer: give token ids");
    int add_bos = add_special ? -1 : 0;
    size_t bl = bos ? strlen(bos) : 0;
    if (bl && len >= bl && !memcmp(text, bos, bl)) /* the template wrote bos: the token, once */
        text += bl, len -= bl, add_bos = 1;
    if (len > 64u << 20)
        return api_fail(err, 400, "invalid_request_error", NULL, NULL, "the text is too long (%zu bytes)", len);
    size_t cap = 3 * len + 4, got = 0;
    int32_t *buf = malloc(cap * sizeof *buf);
    if (!buf)
        return api_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    if (nu_llm_tokenize(tok, text, len, add_bos, buf, cap, &got) != NU_OK) {
        free(buf);
        return api_fail(err, 400, "invalid_request_error", NULL, NULL, "tokenizing: %s", nu_llm_error_message());
    }
    *ids = buf, *n = (uint32_t)got;
    return 0;
}
