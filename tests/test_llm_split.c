/* test_llm_split.c: a model split by layers over several devices (nu_llm_model_open_split), on
 * lavapipe as one physical device opened as two or three nuvec devices: stories260K (5 layers, GQA,
 * tied embeddings), aidreams260K's Q4_0 file and make-gguf's gemma3-tiny (6 layers, sandwich
 * norms, sliding windows, tied) give exactly the logits of the same model on one device: a prompt
 * prefilled in chunks of 3 (each chunk through every share), decode steps, greedy decode's ids,
 * a batched step mixing a new sequence's prompt with other sequences' decode rows, and batched
 * greedy decode (by the ring of graphs on one device, step by step when split); by the
 * decode graphs, by command buffers, and by the separate ops. The layers are shared as the weights
 * say, at least one a device; one nuvec device given twice works and its memory counts once; bad
 * counts, weights and devices are refused by name; a device lost
 * on either side gives NU_ERROR_DEVICE_LOST with a message and leaves the position as it was. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/submission.h"
#include "llm_files.h"
#include "llm_util.h"
#include "make_gguf.h"
#include "nuvec_llm.h"

enum { V = 512, PROMPT = 11, DECODES = 5, GREEDY = 8, MAX_SHARES = 3 };

static int32_t token(uint32_t i) { return i ? (int32_t)(3 + (i * 97) % (V - 3)) : 1; }

/* make-gguf's gemma3-tiny in F32 at a tmp path. */
static const char *gemma3_file(void)
{
    static char path[1100];
    snprintf(path, sizeof path, "%s/llm_split_gemma3-tiny.gguf", nt_tmp_dir());
    make_gguf_options o = {.shape = make_gguf_find_shape("gemma3-tiny"), .dtype = NU_DTYPE_F32, .path = path,
                           .seed = 5, .threads = 1};
    assert_non_null(o.shape);
    if (make_gguf(&o, NULL) != NU_OK)
        fail_msg("make_gguf gemma3-tiny: %s", nu_error_message(NULL));
    return path;
}

/* What a run gives: the prompt's logits, each decode step's, greedy decode's ids, and a batched
 * step's (two sequences decoding, one starting). */
typedef struct outputs {
    float prompt[V], decode[DECODES][V];
    int32_t greedy[GREEDY];
    uint32_t greedy_n;
    float step[3][V];
    int32_t batch_greedy[3 * 2]; /* nu_llm_model_step_greedy: 3 steps of slots 1 and 2 */
} outputs;

static void run(nu_llm_model *m, outputs *o)
{
    int32_t p[PROMPT];
    for (uint32_t i = 0; i < PROMPT; i++)
        p[i] = token(i);
    LLM_OK(nu_llm_model_prefill(m, p, PROMPT, o->prompt));
    for (uint32_t k = 0; k < DECODES; k++)
        LLM_OK(nu_llm_model_decode(m, token(PROMPT + k), o->decode[k]));
    assert_int_equal(nu_llm_model_position(m), PROMPT + DECODES);
    nu_llm_model_reset(m);
    LLM_OK(nu_llm_model_prefill(m, p, 4, NULL));
    LLM_OK(nu_llm_model_decode_greedy(m, token(4), GREEDY, o->greedy, &o->greedy_n, -1, NULL, NULL));
    assert_int_equal(o->greedy_n, GREEDY);
    assert_int_equal(nu_llm_model_position(m), 4 + GREEDY);
    /* slots 1 and 2 hold 5 and 3 tokens; a step decodes one row of each and starts slot 3 */
    uint32_t s[3];
    for (int i = 0; i < 3; i++)
        LLM_OK(nu_llm_model_seq_acquire(m, NULL, 0, &s[i], NULL));
    nu_llm_row rows[16];
    uint32_t n = 0;
    for (uint32_t i = 0; i < 5; i++)
        rows[n++] = (nu_llm_row){p[i], s[0], NU_LLM_OUTPUT_NONE};
    for (uint32_t i = 0; i < 3; i++)
        rows[n++] = (nu_llm_row){p[i + 5], s[1], NU_LLM_OUTPUT_NONE};
    LLM_OK(nu_llm_model_step(m, rows, n, NULL, NULL));
    n = 0;
    rows[n++] = (nu_llm_row){token(40), s[0], NU_LLM_OUTPUT_LOGITS};
    rows[n++] = (nu_llm_row){token(41), s[1], NU_LLM_OUTPUT_LOGITS};
    for (uint32_t i = 0; i < 4; i++)
        rows[n++] = (nu_llm_row){p[i + 2], s[2], i == 3 ? NU_LLM_OUTPUT_LOGITS : NU_LLM_OUTPUT_NONE};
    LLM_OK(nu_llm_model_step(m, rows, n, &o->step[0][0], NULL));
    assert_int_equal(nu_llm_model_seq_length(m, s[0], NULL), 6);
    assert_int_equal(nu_llm_model_seq_length(m, s[2], NULL), 4);
    nu_llm_row two[2] = {{token(42), s[0], NU_LLM_OUTPUT_NONE}, {token(43), s[1], NU_LLM_OUTPUT_NONE}};
    LLM_OK(nu_llm_model_step_greedy(m, two, 2, 3, o->batch_greedy));
    assert_int_equal(nu_llm_model_seq_length(m, s[0], NULL), 9);
    for (int i = 0; i < 3; i++)
        LLM_OK(nu_llm_model_seq_release(m, s[i]));
}

static void expect_same(const outputs *split, const outputs *one, const char *what)
{
    struct {
        const void *a, *b;
        size_t bytes;
        const char *name;
    } parts[] = {{split->prompt, one->prompt, sizeof one->prompt, "the prompt's logits"},
                 {split->decode, one->decode, sizeof one->decode, "the decode steps' logits"},
                 {split->greedy, one->greedy, sizeof one->greedy, "greedy decode's ids"},
                 {split->step, one->step, sizeof one->step, "the batched step's logits"},
                 {split->batch_greedy, one->batch_greedy, sizeof one->batch_greedy, "batched greedy decode's ids"}};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        if (memcmp(parts[i].a, parts[i].b, parts[i].bytes)) {
            const float *a = parts[i].a, *b = parts[i].b;
            double worst = 0;
            for (size_t k = 0; i != 2 && i != 4 && k < parts[i].bytes / 4; k++)
                worst = fmax(worst, fabs((double)a[k] - b[k]));
            fail_msg("%s: %s differ from one device's (largest difference %g)", what, parts[i].name, worst);
        }
}

/* The model at `path` with options `o` on one device, then split over 2 and 3 devices. */
static void split_matches_one_device(nu_device *const *d, const char *path, const nu_llm_model_options *o,
                                     const char *what)
{
    static outputs one, split;
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d[0], path, o, &m));
    assert_int_equal(nu_llm_model_devices(m), 1);
    memset(&one, 0, sizeof one);
    run(m, &one);
    nu_llm_model_free(m);
    static const double weights[2][MAX_SHARES] = {{1, 1, 0}, {1, 2, 1}};
    for (uint32_t count = 2; count <= MAX_SHARES; count++) {
        LLM_OK(nu_llm_model_open_split(d, count, weights[count - 2], path, o, &m));
        assert_int_equal(nu_llm_model_devices(m), count);
        uint32_t at = 0;
        for (uint32_t i = 0; i < count; i++) {
            nu_device *dev;
            uint32_t first, end;
            LLM_OK(nu_llm_model_device_layers(m, i, &dev, &first, &end));
            assert_ptr_equal(dev, d[i]);
            assert_int_equal(first, at);
            assert_true(end > first);
            at = end;
        }
        assert_int_equal(at, nu_llm_model_config(m)->layers);
        memset(&split, 0, sizeof split);
        run(m, &split);
        char label[160];
        snprintf(label, sizeof label, "%s over %u devices", what, count);
        expect_same(&split, &one, label);
        nu_llm_model_free(m);
    }
}

static nu_device *devices[MAX_SHARES];

static int open_devices(void **state)
{
    (void)state;
    for (int i = 0; i < MAX_SHARES; i++)
        devices[i] = nt_open();
    return 0;
}

static int close_devices(void **state)
{
    (void)state;
    for (int i = 0; i < MAX_SHARES; i++)
        nt_close(devices[i]);
    return 0;
}

static void stories_split(void **state)
{
    (void)state;
    nu_llm_model_options o = {.slots = 4, .prefill_chunk = 3};
    split_matches_one_device(devices, llm_model_path("stories260K/hf"), &o, "stories260K");
    nu_llm_model_options cmds = o;
    cmds.decode_by_commands = true;
    split_matches_one_device(devices, llm_model_path("stories260K/hf"), &cmds, "stories260K by command buffers");
    nu_llm_model_options ops = o;
    ops.fusion = -1;
    split_matches_one_device(devices, llm_model_path("stories260K/hf"), &ops, "stories260K by the separate ops");
}

static void quantized_and_gemma_split(void **state)
{
    (void)state;
    nu_llm_model_options o = {.slots = 4, .prefill_chunk = 3};
    split_matches_one_device(devices, llm_model_path("aidreams260K/model-q4_0.gguf"), &o, "aidreams260K Q4_0");
    split_matches_one_device(devices, gemma3_file(), &o, "gemma3-tiny");
    nu_llm_model_options ops = o;
    ops.fusion = -1;
    split_matches_one_device(devices, gemma3_file(), &ops, "gemma3-tiny by the separate ops");
}

static void shares_and_refusals(void **state)
{
    (void)state;
    const char *path = llm_model_path("stories260K/hf");
    nu_llm_model *m = (nu_llm_model *)1;
    /* 5 layers: weights 1:4 give the first device 1, the second 4; by free memory, some each */
    LLM_OK(nu_llm_model_open_split(devices, 2, (const double[]){1, 4}, path, NULL, &m));
    uint32_t first, end;
    LLM_OK(nu_llm_model_device_layers(m, 0, NULL, &first, &end));
    assert_int_equal(first, 0), assert_int_equal(end, 1);
    LLM_OK(nu_llm_model_device_layers(m, 1, NULL, &first, &end));
    assert_int_equal(first, 1), assert_int_equal(end, 5);
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_model_device_layers(m, 2, NULL, &first, &end));
    nu_llm_model_free(m);
    LLM_OK(nu_llm_model_open_split(devices, 3, NULL, path, NULL, &m));
    for (uint32_t i = 0; i < 3; i++) {
        LLM_OK(nu_llm_model_device_layers(m, i, NULL, &first, &end));
        assert_true(end > first);
    }
    nu_llm_model_free(m);
    /* the same nuvec device twice: two shares on it, its memory counted once */
    nu_device *same[2] = {devices[0], devices[0]};
    LLM_OK(nu_llm_model_open(devices[0], path, NULL, &m));
    float one[V], two[V];
    int32_t p[3] = {1, 200, 300};
    LLM_OK(nu_llm_model_prefill(m, p, 3, one));
    nu_llm_model_free(m);
    LLM_OK(nu_llm_model_open_split(same, 2, NULL, path, NULL, &m));
    LLM_OK(nu_llm_model_prefill(m, p, 3, two));
    assert_memory_equal(one, two, sizeof one);
    nu_llm_memory mem;
    LLM_OK(nu_llm_model_memory(m, &mem));
    nu_memory_stats ms;
    NT_OK(nu_memory_get_stats(devices[0], &ms));
    assert_int_equal(mem.device_active, ms.active);
    assert_true(mem.weights > 0 && mem.kv_cache > 0 && mem.total == mem.weights + mem.kv_cache + mem.activations);
    nu_llm_model_free(m);
    nu_device *six[6] = {devices[0], devices[1], devices[2], devices[0], devices[1], devices[2]};
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_model_open_split(six, 6, NULL, path, NULL, &m));
    assert_null(m);
    assert_non_null(strstr(nu_llm_error_message(), "6 devices for 5 layers"));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_model_open_split(devices, 2, (const double[]){1, 0}, path, NULL, &m));
    assert_non_null(strstr(nu_llm_error_message(), "weight 1"));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_model_open_split(devices, 2, (const double[]){NAN, 1}, path, NULL, &m));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_model_open_split(devices, 0, NULL, path, NULL, &m));
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_model_open_split(devices, NU_LLM_MAX_DEVICES + 1, NULL, path, NULL, &m));
    nu_device *with_null[2] = {devices[0], NULL};
    LLM_STATUS(NU_ERROR_INVALID_ARGUMENT, nu_llm_model_open_split(with_null, 2, NULL, path, NULL, &m));
    assert_non_null(strstr(nu_llm_error_message(), "device 1 is NULL"));
    LLM_STATUS(NU_ERROR_IO, nu_llm_model_open_split(devices, 2, NULL, "/nonexistent/model.gguf", NULL, &m));
    /* a cap too small for one share's layers names the device */
    nu_llm_model_options tight = {.max_memory = 200000};
    LLM_STATUS(NU_ERROR_OUT_OF_MEMORY, nu_llm_model_open_split(devices, 2, (const double[]){1, 4}, path, &tight, &m));
    assert_non_null(strstr(nu_llm_error_message(), "on device 0 of 2"));
    assert_int_equal(nu_llm_model_devices(NULL), 0);
}

/* A device lost on side `lost` (0: the first share's, 1: the second's) of a model split over two
 * devices of their own: decode, greedy decode and a step give NU_ERROR_DEVICE_LOST with a message;
 * the position stays where it was. */
static void loss_on(int lost)
{
    nu_device *d[2] = {nt_open(), nt_open()};
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open_split(d, 2, NULL, llm_model_path("stories260K/hf"), NULL, &m));
    int32_t p[3] = {1, 300, 400};
    float logits[V];
    LLM_OK(nu_llm_model_prefill(m, p, 3, logits));
    nu__device_simulate_loss(d[lost]);
    LLM_STATUS(NU_ERROR_DEVICE_LOST, nu_llm_model_decode(m, 5, logits));
    assert_int_equal(nu_llm_model_position(m), 3);
    int32_t out[4];
    uint32_t produced = 9;
    LLM_STATUS(NU_ERROR_DEVICE_LOST, nu_llm_model_decode_greedy(m, 5, 4, out, &produced, -1, NULL, NULL));
    assert_int_equal(produced, 0);
    LLM_STATUS(NU_ERROR_DEVICE_LOST, nu_llm_model_prefill(m, p, 3, logits));
    assert_int_equal(nu_llm_model_position(m), 3);
    nu_llm_model_free(m);
    /* the other side's device still works */
    nu_buffer *b;
    NT_OK(nu_buffer_new(d[!lost], 64, NU_STORAGE_SHARED, &b));
    NT_OK(nu_buffer_write(b, 0, p, sizeof p));
    nu_buffer_free(b);
    nt_close(d[0]);
    nt_close(d[1]);
}

static void device_loss(void **state)
{
    (void)state;
    loss_on(0);
    loss_on(1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stories_split),
        cmocka_unit_test(quantized_and_gemma_split),
        cmocka_unit_test(shares_and_refusals),
        cmocka_unit_test(device_loss),
    };
    return cmocka_run_group_tests(tests, open_devices, close_devices);
}
