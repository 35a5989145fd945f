/* test_llm_memory.c: what a model costs in device memory (nu_llm_model_memory): after opening each
 * shared model file (and a random-weight Q4_0 model whose matrices are repacked to Q4_0_SOA), the
 * device's active bytes grew by exactly what the model reports (weights + KV cache + activations),
 * the weights are the file's tensors once (the repacked ones replace the file's copy: the weights
 * cost what the file's tensors do), and nothing is left after free; the token embedding in host
 * memory (embed_in_host) gives the same logits and leaves the device's report; the memory cap refuses a model
 * that does not fit before any weight moves and leaves the device as it was. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm_files.h"
#include "llm_util.h"
#include "make_gguf.h"
#include "nuvec_llm.h"

/* The bytes of the file's tensors, for a GGUF file (each tensor's size) and a Hugging Face folder
 * (its safetensors file). */
static uint64_t gguf_tensor_bytes(nu_device *d, const char *path, size_t *count)
{
    nu_gguf *g;
    NT_OK(nu_gguf_open(d, path, &g));
    uint64_t sum = 0;
    *count = (size_t)nu_gguf_tensor_count(g);
    for (uint64_t i = 0; i < nu_gguf_tensor_count(g); i++)
        sum += nu_gguf_tensor(g, i)->size;
    nu_gguf_close(g);
    return sum;
}

/* Writes make-gguf's small shape in Q4_0 (rows of 256 and 512: Q4_0_SOA's; its own output matrix)
 * as `name` in the tests' folder; its path goes to path. */
static void small_q4_0(char *path, size_t size, const char *name, uint64_t seed)
{
    snprintf(path, size, "%s/%s", nt_tmp_dir(), name);
    make_gguf_options mo = {.shape = make_gguf_find_shape("small"), .dtype = NU_DTYPE_Q4_0, .path = path, .seed = seed};
    NT_OK(make_gguf(&mo, NULL));
}

/* Opens `path` and checks the report against the device's statistics. */
static void check_model(nu_device *d, const char *path, const nu_llm_model_options *o, uint64_t file_bytes,
                        size_t tensors)
{
    nu_memory_clear_cache(d);
    uint64_t before = nu_memory_active(d);
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, path, o, &m));
    nu_llm_memory mem;
    LLM_OK(nu_llm_model_memory(m, &mem));
    uint64_t grew = nu_memory_active(d) - before;
    printf("%s: weights %llu (file's tensors %llu), KV %llu, activations %llu, total %llu; active grew %llu; "
           "a prefill pass %llu; need %llu\n",
           path, (unsigned long long)mem.weights, (unsigned long long)file_bytes, (unsigned long long)mem.kv_cache,
           (unsigned long long)mem.activations, (unsigned long long)mem.total, (unsigned long long)grew,
           (unsigned long long)mem.prefill_pass, (unsigned long long)mem.need);
    assert_int_equal(mem.total, mem.weights + mem.kv_cache + mem.activations);
    /* the conversions' staging is gone too; an embedding in host memory is a shared buffer of
     * nuvec's pool, but not device memory */
    assert_int_equal(grew, mem.total + mem.weights_in_host);
    /* The weights are the file's tensors once: each padded to the binding alignment and the
     * buffers rounded (at most 256 bytes a tensor and 64 KiB a buffer here). */
    uint64_t weights = mem.weights + mem.weights_in_host;
    if (file_bytes && (weights < file_bytes || weights > file_bytes + 256 * tensors + 8 * 65536))
        fail_msg("%s: the weights take %llu bytes; the file's tensors are %llu", path, (unsigned long long)weights,
                 (unsigned long long)file_bytes);
    assert_true(mem.kv_cache > 0 && mem.activations > 0 && mem.prefill_pass > 0);
    assert_true(mem.need >= mem.total + 2 * mem.prefill_pass - 65536 * 8);
    assert_int_equal(mem.device_active, nu_memory_active(d));
    nu_llm_model_free(m);
    assert_int_equal(nu_memory_active(d), before);
}

static void models_cost_what_they_report(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    static const char *const ggufs[] = {"aidreams260K/model.gguf", "aidreams260K/model-q8_0.gguf",
                                        "aidreams260K/model-q4_0.gguf", "stories260K/model.gguf"};
    for (size_t i = 0; i < sizeof ggufs / sizeof *ggufs; i++) {
        const char *path = llm_model_path(ggufs[i]);
        size_t n;
        uint64_t bytes = gguf_tensor_bytes(d, path, &n);
        check_model(d, path, NULL, bytes, n);
    }
    /* Hugging Face folders (the weights: the safetensors' tensors). */
    check_model(d, llm_model_path("aidreams260K/hf"), NULL, 0, 0);
    check_model(d, llm_model_path("stories260K/hf"), NULL, 0, 0);
    /* F16 weights converted from F32: the F16 copies replace the file's (half its matrices' bytes). */
    nu_llm_model_options f16 = {.weights_f16 = true};
    nu_llm_model *m;
    nu_llm_memory a, b;
    LLM_OK(nu_llm_model_open(d, llm_model_path("aidreams260K/model.gguf"), NULL, &m));
    LLM_OK(nu_llm_model_memory(m, &a));
    nu_llm_model_free(m);
    LLM_OK(nu_llm_model_open(d, llm_model_path("aidreams260K/model.gguf"), &f16, &m));
    LLM_OK(nu_llm_model_memory(m, &b));
    nu_llm_model_free(m);
    assert_true(b.weights < a.weights * 6 / 10); /* matrices halved; the norms (F32) are a few KiB */
    check_model(d, llm_model_path("aidreams260K/model.gguf"), &f16, 0, 0);
    nt_close(d);
}

/* A Q4_0 model whose matrices are all repacked (make-gguf's small shape: rows of 256 and 512): the
 * repacked tensors replace the file's, so the weights cost the file's tensors' bytes. */
static void repacked_weights_replace_the_file(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    char path[1100];
    small_q4_0(path, sizeof path, "llm_mem_small_q4_0.gguf", 3);
    size_t n;
    uint64_t bytes = gguf_tensor_bytes(d, path, &n);
    check_model(d, path, NULL, bytes, n);
    nu_llm_model_options no_repack = {.repack_q4_0 = -1};
    check_model(d, path, &no_repack, bytes, n);
    /* copy_pair: a prefill pass's F16 copies of the repacked matrices in two of the largest
     * matrix's bytes instead of one. */
    nu_llm_model_options pair = {.copy_pair = 1};
    check_model(d, path, &pair, bytes, n);
    nu_llm_model *m;
    nu_llm_memory one, two;
    LLM_OK(nu_llm_model_open(d, path, NULL, &m));
    LLM_OK(nu_llm_model_memory(m, &one));
    const nu_llm_config *c = nu_llm_model_config(m);
    uint64_t q = (uint64_t)c->heads * c->head_dim, widest = q > c->ffn ? q : c->ffn, matrix = 2ull * c->dim * widest;
    nu_llm_model_free(m);
    LLM_OK(nu_llm_model_open(d, path, &pair, &m));
    LLM_OK(nu_llm_model_memory(m, &two));
    nu_llm_model_free(m);
    assert_int_equal(two.prefill_pass, one.prefill_pass + matrix);
    nt_close(d);
}

/* embed_in_host: the token embedding of a model with its own output matrix (make-gguf's small shape,
 * Q4_0) read from a shared buffer gives the logits it gives from device memory, bit for bit, in
 * prefill and decode. Where shared buffers are host memory (a discrete GPU) the report counts it in
 * weights_in_host (by default and with 1) and not in weights; elsewhere (lavapipe) shared buffers
 * are device memory, and weights_in_host is 0. */
static void embedding_in_host_memory(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    char path[1100];
    small_q4_0(path, sizeof path, "llm_mem_embed_q4_0.gguf", 5);
    size_t n;
    uint64_t file_bytes = gguf_tensor_bytes(d, path, &n);
    nu_gguf *g;
    NT_OK(nu_gguf_open(d, path, &g));
    uint64_t embed_bytes = nu_gguf_find_tensor(g, "token_embd.weight")->size;
    nu_gguf_close(g);
    bool host_memory = !nu_device_memory_choice(d)->shared_device_local;
    const int modes[3] = {-1, 1, 0};
    float *logits[3] = {NULL, NULL, NULL};
    uint32_t vocab = 0;
    int32_t prompt[9] = {1, 17, 200, 3, 99, 250, 7, 31, 64};
    for (int i = 0; i < 3; i++) {
        nu_llm_model_options o = {.embed_in_host = modes[i]};
        check_model(d, path, &o, file_bytes, n);
        nu_llm_model *m;
        LLM_OK(nu_llm_model_open(d, path, &o, &m));
        nu_llm_memory mem;
        LLM_OK(nu_llm_model_memory(m, &mem));
        uint64_t want = modes[i] >= 0 && host_memory ? embed_bytes : 0;
        if (mem.weights_in_host < want || mem.weights_in_host > want + 65536)
            fail_msg("embed_in_host %d: %llu bytes of weights in host memory; the embedding is %llu (shared buffers "
                     "%s)", modes[i], (unsigned long long)mem.weights_in_host, (unsigned long long)embed_bytes,
                     host_memory ? "in host memory" : "device-local");
        vocab = nu_llm_model_config(m)->vocab;
        logits[i] = malloc(2 * (size_t)vocab * sizeof(float));
        assert_non_null(logits[i]);
        LLM_OK(nu_llm_model_prefill(m, prompt, 9, logits[i]));
        LLM_OK(nu_llm_model_decode(m, 42, logits[i] + vocab));
        nu_llm_model_free(m);
    }
    for (int i = 1; i < 3; i++)
        if (memcmp(logits[0], logits[i], 2 * (size_t)vocab * sizeof(float)))
            fail_msg("embed_in_host %d: the logits differ from the embedding in device memory's", modes[i]);
    for (int i = 0; i < 3; i++)
        free(logits[i]);
    nt_close(d);
}

/* The cap: a model that needs more is refused before any weight moves (the device as it was);
 * at exactly its need it opens. */
static void memory_cap(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    const char *path = llm_model_path("aidreams260K/model.gguf");
    nu_llm_model *m;
    nu_llm_memory mem;
    LLM_OK(nu_llm_model_open(d, path, NULL, &m));
    LLM_OK(nu_llm_model_memory(m, &mem));
    nu_llm_model_free(m);
    nu_memory_clear_cache(d);
    nu_memory_stats before, after;
    NT_OK(nu_memory_get_stats(d, &before));
    nu_llm_model_options cap = {.max_memory = mem.need - 1};
    m = (nu_llm_model *)1;
    LLM_STATUS(NU_ERROR_OUT_OF_MEMORY, nu_llm_model_open(d, path, &cap, &m));
    assert_null(m);
    assert_non_null(strstr(nu_llm_error_message(), "needs"));
    assert_non_null(strstr(nu_llm_error_message(), "max_memory"));
    NT_OK(nu_memory_get_stats(d, &after));
    assert_int_equal(after.active, before.active);
    assert_int_equal(after.peak, before.peak); /* nothing was allocated on the way */
    assert_int_equal(after.buffers, before.buffers);
    cap.max_memory = mem.need;
    LLM_OK(nu_llm_model_open(d, path, &cap, &m));
    nu_llm_model_free(m);
    /* A smaller cache needs less. */
    nu_llm_model_options small = {.max_positions = 16, .max_memory = mem.need - 1};
    LLM_OK(nu_llm_model_open(d, path, &small, &m));
    nu_llm_model_free(m);
    nt_close(d);
}

/* measure_peaks: prefill and decode record the device's peak while they ran. */
static void peaks(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    nu_llm_model_options o = {.measure_peaks = true};
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, llm_model_path("aidreams260K/model.gguf"), &o, &m));
    nu_llm_memory mem;
    LLM_OK(nu_llm_model_memory(m, &mem));
    assert_true(mem.open_peak >= mem.total);
    assert_int_equal(mem.prefill_peak, 0);
    int32_t prompt[7] = {1, 303, 281, 269, 435, 447, 275};
    LLM_OK(nu_llm_model_prefill(m, prompt, 7, NULL));
    LLM_OK(nu_llm_model_decode(m, 429, NULL));
    LLM_OK(nu_llm_model_memory(m, &mem));
    assert_true(mem.prefill_peak >= mem.device_active); /* the pass's activations on top */
    assert_true(mem.decode_peak >= mem.total);
    nu_llm_model_free(m);
    nt_close(d);
}

/* A prefill of several passes holds one pass's activations: the last, shorter pass takes buffers
 * of the first one's size, so it reuses their memory (in flight) instead of asking for more while
 * they wait in the cache. Passes of 9 rows (more than a matrix-vector product takes) over 12
 * tokens: 9, 9 and 2. */
static void prefill_passes_reuse_one_set(void **state)
{
    (void)state;
    nu_device *d = nt_open();
    nu_llm_model_options o = {.measure_peaks = true, .prefill_chunk = 9};
    nu_llm_model *m;
    LLM_OK(nu_llm_model_open(d, llm_model_path("aidreams260K/model.gguf"), &o, &m));
    nu_memory_clear_cache(d);
    nu_llm_memory mem;
    LLM_OK(nu_llm_model_memory(m, &mem));
    int32_t prompt[20] = {1, 303, 281, 269, 435, 447, 275, 303, 281, 269, 435, 447, 275, 303, 281, 269, 435, 447, 275, 303};
    LLM_OK(nu_llm_model_prefill(m, prompt, 20, NULL)); /* passes of 9, 9 and 2 rows */
    LLM_OK(nu_llm_model_memory(m, &mem));
    uint64_t cached = nu_memory_cache(d);
    printf("a prefill pass %llu bytes; after three passes the cache holds %llu, the peak %llu above %llu\n",
           (unsigned long long)mem.prefill_pass, (unsigned long long)cached,
           (unsigned long long)(mem.prefill_peak - mem.total), (unsigned long long)mem.total);
    if (cached > mem.prefill_pass + 16 * 256) /* each buffer rounded to 256 bytes */
        fail_msg("after a prefill of three passes the cache holds %llu bytes; one pass takes %llu",
                 (unsigned long long)cached, (unsigned long long)mem.prefill_pass);
    if (mem.prefill_peak - mem.total > mem.prefill_pass + 16 * 256)
        fail_msg("the prefill's peak is %llu above the model; one pass takes %llu",
                 (unsigned long long)(mem.prefill_peak - mem.total), (unsigned long long)mem.prefill_pass);
    nu_llm_model_free(m);
    nt_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(models_cost_what_they_report),
        cmocka_unit_test(repacked_weights_replace_the_file),
        cmocka_unit_test(embedding_in_host_memory),
        cmocka_unit_test(memory_cap),
        cmocka_unit_test(peaks),
        cmocka_unit_test(prefill_passes_reuse_one_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
