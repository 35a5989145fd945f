/* test_llm_chat_source.c: where chat templates come from (llm/chat/source.c,
 * nu_llm_chat_template_from_model): a GGUF file written here with tools/gguf_write.h (its
 * template, a named one, bos/eos from the vocabulary), Hugging Face folders (named templates in
 * tokenizer_config.json, AddedToken objects, chat_template.jinja first), their errors; and
 * `nuvec template` on both (its output, --tools choosing tool_use, --var, --template, exit
 * statuses and messages). No device needed. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf_write.h"
#include "llm_util.h"
#include "nuvec_llm.h"

#define GGUF_TEMPLATE                                                                                        \
    "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{{ eos_token }}{% endfor %}"        \
    "{% if add_generation_prompt %}[assistant]{% endif %}"
#define GGUF_TOOL_TEMPLATE "{{ bos_token }}TOOLS:{{ tools | map(attribute='function.name') | join(',') }}|{{ messages | length }}"

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A GGUF file with a vocabulary, chat templates and one small tensor (the template reader needs
 * none; a file without any trips gguf_write.c on an empty tensor table). */
static void write_gguf(const char *path, bool with_templates)
{
    gguf_writer *w;
    NT_OK(gguf_writer_new(0, &w));
    NT_OK(gguf_writer_string(w, "general.architecture", "llama"));
    static const char *const tokens[] = {"<unk>", "<s>", "</s>", "hi"};
    NT_OK(gguf_writer_string_array(w, "tokenizer.ggml.tokens", tokens, 4));
    NT_OK(gguf_writer_u32(w, "tokenizer.ggml.bos_token_id", 1));
    NT_OK(gguf_writer_u32(w, "tokenizer.ggml.eos_token_id", 2));
    if (with_templates) {
        NT_OK(gguf_writer_string(w, "tokenizer.chat_template", GGUF_TEMPLATE));
        NT_OK(gguf_writer_string(w, "tokenizer.chat_template.tool_use", GGUF_TOOL_TEMPLATE));
    }
    NT_OK(gguf_writer_tensor(w, "token_embd.weight", NU_DTYPE_F32, 1, (uint64_t[]){4}));
    NT_OK(gguf_writer_begin(w, path));
    static const float data[4] = {0};
    NT_OK(gguf_writer_data(w, data, sizeof data));
    NT_OK(gguf_writer_finish(w));
    gguf_writer_free(w);
}

static void templates_from_models(void **state)
{
    (void)state;
    char gguf[4200], bare[4200], dir[4200], dir2[4200], path[4300];
    snprintf(gguf, sizeof gguf, "%s/chat.gguf", nt_tmp_dir());
    snprintf(bare, sizeof bare, "%s/bare.gguf", nt_tmp_dir());
    write_gguf(gguf, true);
    write_gguf(bare, false);
    nu_llm_chat_template ct;
    LLM_OK(nu_llm_chat_template_from_model(gguf, NULL, false, &ct));
    assert_string_equal(ct.source, GGUF_TEMPLATE);
    assert_int_equal(ct.length, strlen(GGUF_TEMPLATE));
    assert_null(ct.name);
    assert_string_equal(ct.bos_token, "<s>");
    assert_string_equal(ct.eos_token, "</s>");
    nu_llm_chat_template_clear(&ct);
    assert_null(ct.source);
    LLM_OK(nu_llm_chat_template_from_model(gguf, NULL, true, &ct)); /* transformers picks tool_use with tools */
    assert_string_equal(ct.source, GGUF_TOOL_TEMPLATE);
    assert_string_equal(ct.name, "tool_use");
    nu_llm_chat_template_clear(&ct);
    LLM_OK(nu_llm_chat_template_from_model(gguf, "default", true, &ct));
    assert_string_equal(ct.source, GGUF_TEMPLATE);
    nu_llm_chat_template_clear(&ct);
    LLM_STATUS(NU_ERROR_FORMAT, nu_llm_chat_template_from_model(gguf, "nope", false, &ct));
    assert_non_null(strstr(nu_llm_error_message(), "named templates: tool_use"));
    assert_null(ct.source);
    LLM_STATUS(NU_ERROR_FORMAT, nu_llm_chat_template_from_model(bare, NULL, false, &ct));
    assert_non_null(strstr(nu_llm_error_message(), "has no chat template"));
    snprintf(path, sizeof path, "%s/missing.gguf", nt_tmp_dir());
    LLM_STATUS(NU_ERROR_IO, nu_llm_chat_template_from_model(path, NULL, false, &ct));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_chat_template_from_model(NULL, NULL, false, &ct));
    /* a Hugging Face folder: named templates in tokenizer_config.json, tokens as AddedToken objects */
    snprintf(dir, sizeof dir, "%s/hf_chat", nt_tmp_dir());
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    write_file(path, "{\"bos_token\": {\"__type\": \"AddedToken\", \"content\": \"<|begin|>\"}, \"eos_token\": \"<|end|>\", "
                     "\"chat_template\": [{\"name\": \"default\", \"template\": \"D{{ bos_token }}\"}, "
                     "{\"name\": \"tool_use\", \"template\": \"T{{ tools | length }}\"}]}");
    LLM_OK(nu_llm_chat_template_from_model(dir, NULL, false, &ct));
    assert_string_equal(ct.source, "D{{ bos_token }}");
    assert_string_equal(ct.name, "default");
    assert_string_equal(ct.bos_token, "<|begin|>");
    assert_string_equal(ct.eos_token, "<|end|>");
    nu_llm_chat_template_clear(&ct);
    LLM_OK(nu_llm_chat_template_from_model(dir, NULL, true, &ct));
    assert_string_equal(ct.source, "T{{ tools | length }}");
    nu_llm_chat_template_clear(&ct);
    LLM_STATUS(NU_ERROR_FORMAT, nu_llm_chat_template_from_model(dir, "other", false, &ct));
    assert_non_null(strstr(nu_llm_error_message(), "it has: default, tool_use"));
    /* chat_template.jinja wins over tokenizer_config.json's */
    snprintf(dir2, sizeof dir2, "%s/hf_chat2", nt_tmp_dir());
    mkdir(dir2, 0755);
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir2);
    remove(path); /* from an earlier run */
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir2);
    write_file(path, "{\"bos_token\": null, \"chat_template\": \"config\"}");
    LLM_OK(nu_llm_chat_template_from_model(dir2, NULL, false, &ct));
    assert_string_equal(ct.source, "config");
    assert_null(ct.bos_token);
    nu_llm_chat_template_clear(&ct);
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir2);
    write_file(path, "file {{ 1 }}\n");
    LLM_OK(nu_llm_chat_template_from_model(dir2, NULL, false, &ct));
    assert_string_equal(ct.source, "file {{ 1 }}\n");
    nu_llm_chat_template_clear(&ct);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir2);
    write_file(path, "{not json");
    LLM_STATUS(NU_ERROR_FORMAT, nu_llm_chat_template_from_model(dir2, NULL, false, &ct));
    nu_llm_chat_template_clear(NULL);
}

/* Runs a command; its stdout in *out (free() it), its exit status returned, stderr in err. */
static int run(const char *cmd, char **out, char *err, size_t errcap)
{
    char errfile[4200], full[18000];
    snprintf(errfile, sizeof errfile, "%s/template_cli.err", nt_tmp_dir());
    snprintf(full, sizeof full, "%s 2>'%s'", cmd, errfile);
    FILE *p = popen(full, "r");
    assert_non_null(p);
    size_t n = 0, cap = 4096;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += got;
        if (cap - n < 2)
            buf = realloc(buf, cap *= 2);
    }
    buf[n] = 0;
    int rc = pclose(p);
    *out = buf;
    char *e = nt_read_file(errfile);
    snprintf(err, errcap, "%s", e);
    free(e);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* Runs `nuvec template ARGS...`: its exit status must be want_rc, its stdout want_out (NULL: any),
 * its stderr must hold want_err (NULL: any). */
static void cli(int want_rc, const char *want_out, const char *want_err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void cli(int want_rc, const char *want_out, const char *want_err, const char *fmt, ...)
{
    char args[12000], cmd[13000], err[2000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "'%s' template %s", NUVEC_TOOL, args);
    char *out;
    int rc = run(cmd, &out, err, sizeof err);
    if (rc != want_rc || (want_out && strcmp(out, want_out)) || (want_err && !strstr(err, want_err)))
        fail_msg("%s\nexit status %d (expected %d)\nstdout [%s]\nstderr [%s]", cmd, rc, want_rc, out, err);
    free(out);
}

static void cli_on_gguf_and_folder(void **state)
{
    (void)state;
    char gguf[4200], dir[4200], msgs[4200], tools[4200], tpl[4200];
    snprintf(gguf, sizeof gguf, "%s/cli.gguf", nt_tmp_dir());
    write_gguf(gguf, true);
    snprintf(dir, sizeof dir, "%s/hf_cli", nt_tmp_dir());
    mkdir(dir, 0755);
    char path[4300];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    write_file(path, "{\"bos_token\": \"<B>\", \"eos_token\": {\"content\": \"<E>\"}, \"chat_template\": "
                     "\"{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content }}{{ eos_token }}\\n{% endfor %}"
                     "{% if enable_thinking is defined %}think={{ enable_thinking }}{% endif %}\"}");
    snprintf(msgs, sizeof msgs, "%s/cli_messages.json", nt_tmp_dir());
    write_file(msgs, "[{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo \\u00e9\"}]");
    snprintf(tools, sizeof tools, "%s/cli_tools.json", nt_tmp_dir());
    write_file(tools, "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}, "
                      "{\"type\": \"function\", \"function\": {\"name\": \"search\"}}]");
    snprintf(tpl, sizeof tpl, "%s/cli.jinja", nt_tmp_dir());
    write_file(tpl, "{{ raise_exception('no ' ~ messages[0].role) if messages | length > 5 }}{{ bos_token }}+{{ messages | length }}\n");
    cli(0, "<s>[user]hi</s>[assistant]yo \xC3\xA9</s>[assistant]", NULL, "'%s' --messages '%s' --add-generation-prompt",
        gguf, msgs);
    cli(0, "<s>[user]hi</s>[assistant]yo \xC3\xA9</s>", NULL, "'%s' --messages '%s'", gguf, msgs);
    cli(0, "<s>TOOLS:get_weather,search|2", NULL, "'%s' --messages '%s' --tools '%s'", gguf, msgs, tools);
    cli(0, "<B>user: hi<E>\nassistant: yo \xC3\xA9<E>\nthink=False", NULL, "'%s' --messages '%s' --var enable_thinking=false",
        dir, msgs);
    /* --template with a model: the model's tokens, the file's template */
    cli(0, "<s>+2", NULL, "'%s' --template '%s' --messages '%s'", gguf, tpl, msgs);
    /* failures: usage (2), a missing model, bad JSON, a template that raises (1) */
    cli(2, NULL, NULL, "'%s'", gguf);
    cli(1, NULL, "cannot open", "'%s/nothing.gguf' --messages '%s'", nt_tmp_dir(), msgs);
    cli(1, NULL, "messages", "'%s' --messages '%s'", gguf, tpl);
    write_file(tpl, "{{ raise_exception('Only user and assistant roles are supported!') }}");
    cli(1, "", "raise_exception: Only user and assistant roles are supported!", "--template '%s' --messages '%s'", tpl, msgs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(templates_from_models),
        cmocka_unit_test(cli_on_gguf_and_folder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
