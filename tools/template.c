/* template.c: `nuvec template MODEL --messages FILE.json [--add-generation-prompt] [--tools FILE.json]
 * [--template FILE.jinja] [--name NAME] [--var NAME=JSON ...] [--now SECONDS]` (or --context FILE.json
 * instead of the conversation options): prints the prompt a
 * model's chat template makes of a conversation (libnuvec_llm's Jinja engine, nuvec_llm/chat.h),
 * byte for byte, with no newline added. No device is used. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "nuvec_llm.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nuvec template MODEL --messages FILE.json [--add-generation-prompt] [--tools FILE.json]\n"
            "                      [--template FILE.jinja] [--name NAME] [--var NAME=JSON ...] [--now SECONDS]\n"
            "       nuvec template MODEL --context FILE.json [--template FILE.jinja] [--now SECONDS]\n"
            "  Prints the prompt MODEL's chat template renders for the conversation in --messages (a JSON\n"
            "  array of {role, content, ...} messages), as Hugging Face's apply_chat_template renders it.\n"
            "  MODEL: a GGUF file (tokenizer.chat_template; bos/eos from its vocabulary) or a Hugging Face\n"
            "  folder (chat_template.jinja or tokenizer_config.json). --template FILE.jinja renders that file\n"
            "  instead (MODEL may then be left out; with MODEL, its bos/eos tokens are still used, when it has\n"
            "  a chat template to read them with). --tools:\n"
            "  a JSON array of tool definitions. --name: a named template (default: tool_use with --tools when\n"
            "  the model has one, else default). --var NAME=JSON: one more variable (enable_thinking=false).\n"
            "  --now: strftime_now's time in seconds since 1970 (default: the clock). --context: the template's\n"
            "  variables as one JSON object (messages, tools, add_generation_prompt, bos_token, ...), used as\n"
            "  it is instead of the options above.\n");
}

/* A whole file, NUL-terminated; NULL (with a message) on failure. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "nuvec template: cannot open %s: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        char *nb = cap < ((size_t)64 << 20) ? realloc(buf, cap * 2 + 1) : NULL;
        if (!nb) {
            fprintf(stderr, "nuvec template: %s is too large\n", path);
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    bool err = ferror(f);
    fclose(f);
    if (buf && err) {
        fprintf(stderr, "nuvec template: cannot read %s\n", path);
        free(buf);
        return NULL;
    }
    if (buf) {
        buf[n] = 0;
        *len = n;
    }
    return buf;
}

/* Appends "NAME": JSON to the extra object being built in *extra. */
static bool add_var(char **extra, const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg) {
        fprintf(stderr, "nuvec template: --var wants NAME=JSON, got '%s'\n", arg);
        return false;
    }
    size_t old = *extra ? strlen(*extra) : 0, need = old + strlen(arg) + 8;
    char *e = realloc(*extra, need);
    if (!e)
        return false;
    int n = snprintf(e + (old ? old - 1 : 0), need - (old ? old - 1 : 0), "%s\"%.*s\": %s}", old ? ", " : "{",
                     (int)(eq - arg), arg, eq + 1);
    (void)n;
    *extra = e;
    return true;
}

int cli_template(int argc, char **argv)
{
    const char *model = NULL, *messages_path = NULL, *context_path = NULL, *tools_path = NULL, *template_path = NULL, *name = NULL;
    bool add_gen = false;
    long long now = 0;
    char *extra = NULL;
    int rc = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            free(extra);
            return 0;
        } else if (!strcmp(a, "--add-generation-prompt")) {
            add_gen = true;
        } else if (!strcmp(a, "--messages") && has_value) {
            messages_path = argv[++i];
        } else if (!strcmp(a, "--context") && has_value) {
            context_path = argv[++i];
        } else if (!strcmp(a, "--tools") && has_value) {
            tools_path = argv[++i];
        } else if (!strcmp(a, "--template") && has_value) {
            template_path = argv[++i];
        } else if (!strcmp(a, "--name") && has_value) {
            name = argv[++i];
        } else if (!strcmp(a, "--var") && has_value) {
            if (!add_var(&extra, argv[++i]))
                goto done;
        } else if (!strcmp(a, "--now") && has_value) {
            char *end;
            errno = 0;
            now = strtoll(argv[++i], &end, 10);
            if (errno || *end || now <= 0) {
                fprintf(stderr, "nuvec template: --now wants seconds since 1970, got '%s'\n", argv[i]);
                goto done;
            }
        } else if (a[0] != '-' && !model) {
            model = a;
        } else {
            fprintf(stderr, "nuvec template: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            goto done;
        }
    }
    if ((!messages_path == !context_path) || (!model && !template_path)) {
        usage(stderr);
        rc = 2;
        goto done;
    }
    nu_llm_chat_template ct = {0};
    if (model && nu_llm_chat_template_from_model(model, template_path ? NULL : name, tools_path != NULL, &ct) != NU_OK) {
        if (!template_path) {
            fprintf(stderr, "nuvec template: %s\n", nu_llm_error_message());
            goto done;
        }
        fprintf(stderr, "nuvec template: %s; bos_token and eos_token are left undefined\n", nu_llm_error_message());
    }
    size_t src_len = ct.length, msg_len = 0, tools_len = 0;
    char *src = template_path ? slurp(template_path, &src_len) : NULL;
    char *msgs = slurp(messages_path ? messages_path : context_path, &msg_len);
    char *tools = tools_path ? slurp(tools_path, &tools_len) : NULL;
    char *context = NULL, *out = NULL;
    size_t context_len = 0, out_len = 0;
    nu_llm_template *tpl = NULL;
    if ((template_path && !src) || !msgs || (tools_path && !tools))
        goto cleanup;
    nu_llm_chat_request req = {.messages = msgs, .messages_length = msg_len, .tools = tools, .tools_length = tools_len,
                               .add_generation_prompt = add_gen, .bos_token = ct.bos_token, .eos_token = ct.eos_token,
                               .extra = extra, .extra_length = extra ? strlen(extra) : 0};
    nu_llm_render_options opts = {.now = now};
    if (context_path) {
        context = msgs, context_len = msg_len, msgs = NULL;
    }
    if ((!context && nu_llm_chat_context(&req, &context, &context_len) != NU_OK) ||
        nu_llm_template_parse(src ? src : ct.source, src ? src_len : ct.length, &tpl, NULL) != NU_OK ||
        nu_llm_template_render(tpl, context, context_len, &opts, &out, &out_len, NULL) != NU_OK) {
        fprintf(stderr, "nuvec template: %s\n", nu_llm_error_message());
        goto cleanup;
    }
    rc = fwrite(out, 1, out_len, stdout) == out_len && fflush(stdout) == 0 ? 0 : 1;
cleanup:
    free(out);
    nu_llm_template_free(tpl);
    free(context);
    free(tools);
    free(msgs);
    free(src);
    nu_llm_chat_template_clear(&ct);
done:
    free(extra);
    return rc;
}
