/* llm.c: `nuvec bench llm`: a Llama model end to end through libnuvec_llm (llm/include/nuvec_llm.h):
 * the time from opening the device to the first generated token, prompt tokens/s (one prefill of
 * -p random tokens), decode tokens/s (-n greedy tokens by nu_llm_model_decode_greedy: the argmax
 * on the GPU feeding the next launch, two launches queued, as `nuvec generate` does at --temp 0;
 * JSON decode_tokens_per_s, which before 2026-12-01's greedy decode measured the next figure),
 * the same tokens the old way (one decode graph launch each, the logits read back and the argmax
 * taken on the CPU every token, as a sampling program does: decode_readback_tokens_per_s), and
 * the greedy decode's weight bytes read per second as a fraction of the copy bandwidth measured
 * in the same run. The model is a file (--model: a .gguf or a Hugging Face folder) or a random-weight GGUF of a
 * named shape written first (--shape llama-7b|llama-8b|tiny|small --dtype f16|q8_0|q4_0, by nuvec
 * make-gguf's writer, into $TMPDIR and removed afterwards unless --keep). llama.cpp's side is
 * bench/llamacpp.sh on the same file, PyTorch's bench/torch_llm.py (bench/h200.sh's llm step runs
 * all three). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices.h"
#include "bench.h"
#include "bench_util.h"
#include "cli.h"
#include "llm_memory.h"
#include "make_gguf.h"
#include "nuvec_llm.h"
#include "tool_error.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: nuvec bench llm (--model PATH | --shape llama-7b|llama-8b|tiny|small --dtype f16|q8_0|q4_0 [--keep])\n"
               "                       [-p TOKENS] [-n TOKENS] [--kv f32|f16] [--batch B,B,... [--same-prompts] [--by-step]] [--json]\n"
               "                       [--device NAME | --devices LIST [--split layer] [--split-weights W,W,...]]\n"
               "  Opens the model (a .gguf file or a Hugging Face folder; with --shape a random-weight GGUF\n"
               "  written first into $TMPDIR, removed afterwards unless --keep), then: the time from opening\n"
               "  the device to the first generated token, one prefill of -p random tokens (default 512),\n"
               "  -n greedy decode steps (default 128) with the ids kept on the GPU (nu_llm_model_decode_greedy,\n"
               "  as nuvec generate does; JSON decode_tokens_per_s) and again with the logits read back and the\n"
               "  argmax on the CPU each token (decode_readback_tokens_per_s), and greedy decode's weight bytes\n"
               "  read per second against the copy bandwidth measured in the same run. --kv: the KV cache's\n"
               "  dtype (default f16).\n"
               "  --batch B,B,...: instead, for each B, B independent sequences decoding greedily at once\n"
               "  (nu_llm_model_step_greedy: the ids stay on the GPU, a step's launch queued while the one\n"
               "  before runs): their prompts of different lengths (sequence i: -p * (1 - i / (2 B)) tokens,\n"
               "  from -p down to about -p / 2) prefilled in one step (nu_llm_model_step), then -n steps of B\n"
               "  rows (the first, which builds the graphs, not timed; the first B runs once untimed before\n"
               "  the measurement, so that the kernels' pipelines are made); aggregate and per-sequence decode\n"
               "  tokens/s and the prefill's tokens/s. --same-prompts: every prompt -p tokens, as llama.cpp's\n"
               "  batched-bench has them (bench/llamacpp.sh batched, -npp): the same keys a step for\n"
               "  attention to read, for a side-by-side comparison. --by-step: decode by one\n"
               "  nu_llm_model_step a step instead (the ids back on the CPU before the next step's launch).\n");
}

/* The bytes of weights one decode step reads: every tensor of a GGUF file but the token
 * embedding (one row of it is read), which counts in full where it is also the output matrix
 * (no output.weight). 0 where unknown (a Hugging Face folder). */
static uint64_t decode_weight_bytes(nu_device *d, const char *path)
{
    size_t len = strlen(path);
    if (len < 5 || strcmp(path + len - 5, ".gguf"))
        return 0;
    nu_gguf *g;
    if (nu_gguf_open(d, path, &g) != NU_OK)
        return 0;
    uint64_t bytes = 0;
    bool output = nu_gguf_find_tensor(g, "output.weight") != NULL;
    for (uint64_t i = 0; i < nu_gguf_tensor_count(g); i++) {
        const nu_gguf_tensor_info *t = nu_gguf_tensor(g, i);
        if (!strcmp(t->name, "token_embd.weight") && output)
            continue;
        bytes += t->size;
    }
    nu_gguf_close(g);
    return bytes;
}

/* Read + write GB/s of a compute-shader copy of `size` bytes (best of 5). */
static double copy_gbps(nu_device *d, size_t size)
{
    nu_buffer *a, *b;
    if (nu_buffer_new(d, size, NU_STORAGE_PRIVATE, &a) != NU_OK)
        return 0;
    if (nu_buffer_new(d, size, NU_STORAGE_PRIVATE, &b) != NU_OK) {
        nu_buffer_free(a);
        return 0;
    }
    double best = 0;
    for (int r = 0; r < 6; r++) {
        nu_commands *c;
        if (nu_commands_new(d, NU_QUEUE_COMPUTE, &c) != NU_OK)
            break;
        uint64_t t0 = bench_now_ns();
        nu_status st = nu_commands_copy(c, b, 0, a, 0, size);
        if (st == NU_OK && (st = nu_commands_commit(c)) == NU_OK)
            st = nu_commands_wait(c, NU_WAIT_FOREVER);
        double s = (double)(bench_now_ns() - t0) * 1e-9;
        nu_commands_free(c);
        if (st != NU_OK)
            break;
        if (r > 0 && 2.0 * (double)size / s / 1e9 > best) /* the first is a warm-up */
            best = 2.0 * (double)size / s / 1e9;
    }
    nu_buffer_free(a);
    nu_buffer_free(b);
    return best;
}

static int32_t argmax(const float *v, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (v[i] > v[best])
            best = i;
    return (int32_t)best;
}

/* "1,4,16" into counts[0 .. *n), each 1 .. 4096; false for anything else. */
static bool parse_batches(const char *s, uint32_t *counts, uint32_t *n, uint32_t cap)
{
    *n = 0;
    while (*s) {
        char *end;
        unsigned long v = strtoul(s, &end, 10);
        if (end == s || v < 1 || v > 4096 || *n == cap || (*end && *end != ','))
            return false;
        counts[(*n)++] = (uint32_t)v;
        s = *end ? end + 1 : end;
    }
    return *n > 0;
}

/* One batch: B sequences (slots acquired and released here) prefilled in one step, then `gen` steps of
 * B rows. *n: the prompt rows; *prefill_s, *decode_s: the prefill's time and the timed steps' (the
 * first, or by nu_llm_model_step_greedy the first two, build the graphs of B rows: not timed);
 * *timed: how many steps *decode_s covers. x: the prompts' random state. */
static nu_status one_batch(nu_llm_model *m, uint32_t vocab, uint32_t B, long prompt, long gen, bool same_prompts,
                           bool by_step, nu_llm_row *rows, uint32_t *slots, int32_t *ids, uint64_t *x, uint32_t *n,
                           double *prefill_s, double *decode_s, long *timed)
{
    nu_status st = NU_OK;
    uint32_t acquired = 0;
    *n = 0;
    *prefill_s = *decode_s = 0;
    for (uint32_t i = 0; i < B && st == NU_OK; i++)
        if ((st = nu_llm_model_seq_acquire(m, NULL, 0, &slots[i], NULL)) == NU_OK)
            acquired++;
    for (uint32_t i = 0; i < B; i++) {
        long len = same_prompts ? prompt : prompt - (long)((uint64_t)i * (uint64_t)prompt / (2u * B));
        for (long j = 0; j < len; j++) {
            *x = *x * 6364136223846793005ull + 1442695040888963407ull;
            rows[(*n)++] = (nu_llm_row){(int32_t)((*x >> 33) % vocab), slots[i],
                                        j + 1 == len ? NU_LLM_OUTPUT_ARGMAX : NU_LLM_OUTPUT_NONE};
        }
    }
    uint64_t t0 = bench_now_ns();
    if (st == NU_OK)
        st = nu_llm_model_step(m, rows, *n, NULL, ids);
    *prefill_s = (double)(bench_now_ns() - t0) * 1e-9;
    long warm = by_step || gen < 3 ? 1 : 2;
    *timed = gen - warm;
    for (long k = 0; st == NU_OK && k < gen; k++) {
        for (uint32_t i = 0; i < B; i++)
            rows[i] = (nu_llm_row){ids[i], slots[i], NU_LLM_OUTPUT_ARGMAX};
        uint64_t a = bench_now_ns();
        if (by_step || k == 0) {
            st = nu_llm_model_step(m, rows, B, NULL, ids);
        } else if (k < warm) {
            st = nu_llm_model_step_greedy(m, rows, B, 1, ids);
        } else { /* the timed steps in one call; the last step's ids first in ids */
            st = nu_llm_model_step_greedy(m, rows, B, (uint32_t)*timed, ids);
            *decode_s += (double)(bench_now_ns() - a) * 1e-9;
            if (st == NU_OK)
                memmove(ids, ids + (size_t)(*timed - 1) * B, sizeof *ids * B);
            break;
        }
        if (k >= warm)
            *decode_s += (double)(bench_now_ns() - a) * 1e-9;
    }
    for (uint32_t i = 0; i < acquired; i++)
        nu_llm_model_seq_release(m, slots[i]);
    return st;
}

/* The batched measurement (--batch): one model of the largest B's slots; for each B, B sequences
 * prefilled in one step and decoded -n steps together. The first B runs once untimed before
 * anything is timed, so that the kernels' pipelines are made by then: on a machine whose pipeline
 * cache was empty, the first timed prefill of 16 sequences spent most of its time making them
 * (H100, 7B Q4_0, -p 128: 868 tokens/s, against 2,011 with the cache filled by an earlier run:
 * bench/RESULTS.md, twenty-sixth session). */
static int bench_batches(nu_device *d, const cli_devices *devs, const char *model_path, nu_dtype kv, long prompt,
                         long gen, const uint32_t *batches, uint32_t nb, bool same_prompts, bool by_step, bool json)
{
    uint32_t most = 0;
    for (uint32_t i = 0; i < nb; i++)
        most = batches[i] > most ? batches[i] : most;
    nu_llm_model_options mo = {.kv_dtype = kv, .max_positions = (uint32_t)(prompt + gen + 1), .slots = most,
                               .measure_peaks = true};
    nu_llm_model *m = NULL;
    nu_status st = cli_model_open(devs, d, model_path, &mo, &m);
    if (st != NU_OK) {
        fprintf(stderr, "nuvec bench llm: %s: %s (%s)\n", model_path, nu_status_string(st), nu_llm_error_message());
        return 1;
    }
    char split[512];
    cli_describe_split(m, split, sizeof split);
    if (*split)
        fprintf(stderr, "nuvec bench llm: %s\n", split);
    const nu_llm_config *cfg = nu_llm_model_config(m);
    nu_llm_model_seq_release(m, 0); /* every slot for the sequences */
    size_t rows_cap = (size_t)most * (size_t)prompt;
    nu_llm_row *rows = malloc(sizeof *rows * rows_cap);
    uint32_t *slots = malloc(sizeof *slots * most);
    int32_t *ids = malloc(sizeof *ids * most * (size_t)(gen > 1 ? gen : 1));
    cJSON *root = json ? cJSON_CreateObject() : NULL, *list = root ? cJSON_AddArrayToObject(root, "batches") : NULL;
    if (root) {
        bench_json_device(root, d);
        cJSON_AddStringToObject(root, "model", model_path);
        cJSON_AddNumberToObject(root, "prompt_tokens", (double)prompt);
        cJSON_AddNumberToObject(root, "decode_tokens", (double)gen);
        cJSON_AddBoolToObject(root, "same_prompts", same_prompts);
        cJSON_AddStringToObject(root, "decode_by", by_step ? "nu_llm_model_step" : "nu_llm_model_step_greedy");
    } else {
        printf("nuvec bench llm --batch on %s: %s\n", nu_device_get_info(d)->name, model_path);
        printf("  %8s %14s %16s %16s\n", "B", "prefill tok/s", "decode tok/s", "per sequence");
    }
    int status = rows && slots && ids ? 0 : 1;
    uint64_t x = 0x9e3779b97f4a7c15ull, warm_x = x;
    uint32_t n;
    double prefill_s, decode_s;
    long timed;
    if (status == 0 && nb) { /* the warm-up (above): its own prompts, the same shapes */
        st = one_batch(m, cfg->vocab, batches[0], prompt, gen < 3 ? gen : 3, same_prompts, by_step, rows, slots, ids,
                       &warm_x, &n, &prefill_s, &decode_s, &timed);
        if (st != NU_OK) {
            fprintf(stderr, "nuvec bench llm: warm-up batch %u: %s (%s)\n", batches[0], nu_status_string(st),
                    nu_llm_error_message());
            status = 1;
        }
    }
    for (uint32_t bi = 0; status == 0 && bi < nb; bi++) {
        uint32_t B = batches[bi];
        st = one_batch(m, cfg->vocab, B, prompt, gen, same_prompts, by_step, rows, slots, ids, &x, &n, &prefill_s,
                       &decode_s, &timed);
        if (st != NU_OK) {
            fprintf(stderr, "nuvec bench llm: batch %u: %s (%s)\n", B, nu_status_string(st), nu_llm_error_message());
            status = 1;
            break;
        }
        double steps = (double)timed, agg = decode_s > 0 ? steps * B / decode_s : 0, per = agg / B;
        double pps = prefill_s > 0 ? n / prefill_s : 0;
        if (list) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "sequences", B);
            cJSON_AddNumberToObject(o, "prompt_rows", n);
            cJSON_AddNumberToObject(o, "prefill_tokens_per_s", pps);
            cJSON_AddNumberToObject(o, "decode_tokens_per_s", agg);
            cJSON_AddNumberToObject(o, "decode_tokens_per_s_per_sequence", per);
            cJSON_AddItemToArray(list, o);
        } else {
            printf("  %8u %14.0f %16.1f %16.1f\n", B, pps, agg, per);
        }
    }
    if (root) {
        cli_llm_memory_json(root, m);
        if (status == 0)
            status = bench_json_print("llm", root);
        else
            cJSON_Delete(root);
    } else if (status == 0) {
        printf("  ");
        cli_llm_memory_line(stdout, m);
    }
    free(rows), free(slots), free(ids);
    nu_llm_model_free(m);
    return status;
}

int bench_llm(int argc, char **argv)
{
    uint64_t t_start = bench_now_ns();
    const char *model_path = NULL, *shape = NULL, *dtype = NULL, *select = NULL, *kv = "f16";
    long prompt = 512, gen = 128;
    bool json = false, keep = false, same_prompts = false, by_step = false;
    uint32_t batches[32], nb = 0;
    cli_devices devs = {0};
    char why[512] = "";
    bool ok;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model_path = argv[++i];
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc)
            shape = argv[++i];
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc)
            dtype = argv[++i];
        else if (!strcmp(argv[i], "--kv") && i + 1 < argc)
            kv = argv[++i];
        else if (!strcmp(argv[i], "--keep"))
            keep = true;
        else if (!strcmp(argv[i], "--same-prompts"))
            same_prompts = true;
        else if (!strcmp(argv[i], "--by-step"))
            by_step = true;
        else if (i + 1 < argc && cli_devices_option(&devs, argv[i], argv[i + 1], &ok, why, sizeof why)) {
            if (!ok) {
                fprintf(stderr, "nuvec bench llm: %s\n", why);
                return 2;
            }
            i++;
        }
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
            if (!parse_batches(argv[++i], batches, &nb, 32)) {
                fprintf(stderr, "nuvec bench llm: --batch wants counts like 1,4,16,64 (1 to 4096, at most 32)\n");
                return 2;
            }
        }
        else if (!strcmp(argv[i], "-p") && i + 1 < argc) {
            if (!bench_parse_count("llm", "-p", argv[++i], 1, 1 << 20, &prompt))
                return 2;
        } else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
            if (!bench_parse_count("llm", "-n", argv[++i], 1, 1 << 20, &gen))
                return 2;
        } else {
            int r = bench_common_option("llm", argc, argv, &i, &json, &select, usage);
            if (r != BENCH_OPTION_TAKEN)
                return r;
        }
    }
    if (!model_path == !shape || (shape && !dtype) || (strcmp(kv, "f16") && strcmp(kv, "f32"))) {
        fprintf(stderr, "nuvec bench llm: give --model PATH, or --shape NAME with --dtype T (and --kv f16 or f32)\n");
        usage(stderr);
        return 2;
    }
    if (!cli_devices_check(&devs, select, why, sizeof why)) {
        fprintf(stderr, "nuvec bench llm: %s\n", why);
        return 2;
    }
    if ((same_prompts || by_step) && !nb) {
        fprintf(stderr, "nuvec bench llm: --same-prompts and --by-step go with --batch (the batched measurement)\n");
        return 2;
    }
    char tmp_path[4096] = "";
    if (shape) {
        const make_gguf_shape *s = make_gguf_find_shape(shape);
        nu_dtype dt = !strcmp(dtype, "f16") ? NU_DTYPE_F16 : !strcmp(dtype, "q8_0") ? NU_DTYPE_Q8_0
                      : !strcmp(dtype, "q4_0") ? NU_DTYPE_Q4_0 : NU_DTYPE_COUNT;
        if (!s || dt == NU_DTYPE_COUNT) {
            fprintf(stderr, "nuvec bench llm: unknown shape '%s' or dtype '%s' (llama-7b, llama-8b, tiny, small; f16, q8_0, "
                            "q4_0)\n", shape, dtype);
            return 2;
        }
        const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(tmp_path, sizeof tmp_path, "%s/nuvec-bench-llm-%s-%s-%d.gguf", dir, shape, dtype, (int)getpid());
        make_gguf_options mo = {.shape = s, .dtype = dt, .path = tmp_path, .seed = 1};
        uint64_t data = 0;
        if (make_gguf(&mo, &data) != NU_OK) {
            fprintf(stderr, "nuvec bench llm: writing %s: %s\n", tmp_path, tool_error_message());
            return 1;
        }
        model_path = tmp_path;
        t_start = bench_now_ns(); /* the load time starts with the file written (in the page cache) */
    }
    int status = 1;
    nu_device *d = NULL;
    nu_llm_model *m = NULL;
    float *logits = NULL;
    int32_t *tokens = NULL, *gpu_ids = NULL, *cpu_ids = NULL;
    if (devs.count) { /* the first device stands for them in the copy bandwidth and the JSON (dev0) */
        bench_no_validation("llm");
        if (cli_devices_open(&devs, false, why, sizeof why) != NU_OK) {
            fprintf(stderr, "nuvec bench llm: %s\n", why);
            goto out;
        }
    } else if (!bench_open("llm", select, &d)) {
        goto out;
    }
    nu_device *dev0 = devs.count ? devs.device[0] : d;
    if (nb) {
        status = bench_batches(dev0, &devs, model_path, !strcmp(kv, "f16") ? NU_DTYPE_F16 : NU_DTYPE_F32, prompt, gen,
                               batches, nb, same_prompts, by_step, json);
        goto out;
    }
    nu_llm_model_options mo = {.kv_dtype = !strcmp(kv, "f16") ? NU_DTYPE_F16 : NU_DTYPE_F32,
                               .max_positions = (uint32_t)(prompt + gen + 1), .measure_peaks = true};
    uint64_t t_open = bench_now_ns();
    nu_status st = cli_model_open(&devs, d, model_path, &mo, &m);
    if (st != NU_OK) {
        fprintf(stderr, "nuvec bench llm: %s: %s (%s)\n", model_path, nu_status_string(st), nu_llm_error_message());
        goto out;
    }
    char split[512];
    cli_describe_split(m, split, sizeof split);
    if (*split && !json)
        printf("  split by layers: %s\n", split);
    const nu_llm_config *cfg = nu_llm_model_config(m);
    if ((uint64_t)prompt + (uint64_t)gen + 1 > cfg->max_positions) {
        fprintf(stderr, "nuvec bench llm: -p %ld + -n %ld is more than the model's %u positions\n", prompt, gen,
                cfg->max_positions);
        goto out;
    }
    logits = malloc(sizeof *logits * cfg->vocab);
    tokens = malloc(sizeof *tokens * (size_t)prompt);
    gpu_ids = malloc(sizeof *gpu_ids * (size_t)gen);
    cpu_ids = malloc(sizeof *cpu_ids * (size_t)gen);
    if (!logits || !tokens || !gpu_ids || !cpu_ids) {
        fprintf(stderr, "nuvec bench llm: out of memory\n");
        goto out;
    }
    /* The first token: open + a one-token prefill + its argmax. */
    int32_t first = cfg->bos >= 0 ? cfg->bos : 1;
    double open_ms = 0, ttft_ms = 0;
    if ((st = nu_llm_model_prefill(m, &first, 1, logits)) != NU_OK)
        goto model_failed;
    (void)argmax(logits, cfg->vocab);
    uint64_t t_first = bench_now_ns();
    open_ms = (double)(t_first - t_open) * 1e-6;
    ttft_ms = (double)(t_first - t_start) * 1e-6;
    /* The prompt: random ids, one prefill (after a warm-up of the same length). */
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (long i = 0; i < prompt; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        tokens[i] = (int32_t)((x >> 33) % cfg->vocab);
    }
    double prefill_s = 1e30;
    for (int r = 0; r < 2; r++) {
        nu_llm_model_reset(m);
        uint64_t t0 = bench_now_ns();
        if ((st = nu_llm_model_prefill(m, tokens, (size_t)prompt, logits)) != NU_OK)
            goto model_failed;
        double s = (double)(bench_now_ns() - t0) * 1e-9;
        prefill_s = s < prefill_s ? s : prefill_s;
    }
    /* Decode, greedy with the ids on the GPU, after a warm-up from position 0 (the greedy graphs
     * are built at the first greedy decode, and each of their first 3 launches records a copy). */
    int32_t start = argmax(logits, cfg->vocab), next = start;
    int32_t warm_ids[32];
    uint32_t produced = 0, warm = mo.max_positions < 32 ? mo.max_positions : 32;
    nu_llm_model_reset(m);
    if ((st = nu_llm_model_decode_greedy(m, start, warm, warm_ids, &produced, NU_LLM_NO_TOKEN, NULL, NULL)) != NU_OK)
        goto model_failed;
    nu_llm_model_reset(m);
    if ((st = nu_llm_model_prefill(m, tokens, (size_t)prompt, NULL)) != NU_OK)
        goto model_failed;
    uint64_t t0 = bench_now_ns();
    if ((st = nu_llm_model_decode_greedy(m, start, (uint32_t)gen, gpu_ids, &produced, NU_LLM_NO_TOKEN, NULL, NULL)) !=
        NU_OK)
        goto model_failed;
    double decode_s = (double)(bench_now_ns() - t0) * 1e-9;
    /* The same tokens with a graph launch and the logits back every token. */
    nu_llm_model_reset(m);
    if ((st = nu_llm_model_prefill(m, tokens, (size_t)prompt, NULL)) != NU_OK)
        goto model_failed;
    t0 = bench_now_ns();
    for (long i = 0; i < gen; i++) {
        if ((st = nu_llm_model_decode(m, next, logits)) != NU_OK)
            goto model_failed;
        next = cpu_ids[i] = argmax(logits, cfg->vocab);
    }
    double readback_s = (double)(bench_now_ns() - t0) * 1e-9;
    long same = 0; /* tokens the two ways agree on before the first difference */
    while (same < gen && gpu_ids[same] == cpu_ids[same])
        same++;
    if (same < gen)
        fprintf(stderr, "nuvec bench llm: warning: greedy decode's token %ld is %d, %d with the CPU's argmax\n", same,
                gpu_ids[same], cpu_ids[same]);
    uint64_t wbytes = decode_weight_bytes(dev0, model_path);
    double copy = copy_gbps(dev0, nu_device_get_info(dev0)->type == NU_DEVICE_CPU ? 32u << 20 : 1u << 30);
    double pps = (double)prompt / prefill_s, dps = (double)gen / decode_s, rps = (double)gen / readback_s;
    double wps = (double)wbytes * dps / 1e9;
    if (json) {
        cJSON *root = cJSON_CreateObject();
        bench_json_device(root, dev0);
        cJSON_AddStringToObject(root, "model", model_path);
        cJSON_AddStringToObject(root, "kv_dtype", kv);
        cJSON_AddNumberToObject(root, "prompt_tokens", (double)prompt);
        cJSON_AddNumberToObject(root, "decode_tokens", (double)gen);
        cJSON_AddNumberToObject(root, "open_to_first_token_ms", open_ms);
        cJSON_AddNumberToObject(root, "device_open_to_first_token_ms", ttft_ms);
        cJSON_AddNumberToObject(root, "prefill_tokens_per_s", pps);
        cJSON_AddNumberToObject(root, "decode_tokens_per_s", dps);
        cJSON_AddNumberToObject(root, "decode_readback_tokens_per_s", rps);
        cJSON_AddBoolToObject(root, "decode_ids_match", same == gen);
        cJSON_AddNumberToObject(root, "decode_weight_bytes", (double)wbytes);
        cJSON_AddNumberToObject(root, "decode_weights_gb_per_s", wps);
        cJSON_AddNumberToObject(root, "copy_gb_per_s", copy);
        cJSON_AddNumberToObject(root, "decode_fraction_of_copy", copy > 0 ? wps / copy : 0);
        cli_llm_memory_json(root, m);
        status = bench_json_print("llm", root);
    } else {
        printf("nuvec bench llm on %s: %s\n", nu_device_get_info(dev0)->name, model_path);
        printf("  %u layers, dim %u, %u heads (%u KV), FFN %u, vocab %u; KV cache %s\n", cfg->layers, cfg->dim,
               cfg->heads, cfg->kv_heads, cfg->ffn, cfg->vocab, kv);
        printf("  device open to first token  %10.1f ms (model open + 1-token prefill: %.1f ms)\n", ttft_ms, open_ms);
        printf("  prompt (%ld tokens)          %10.0f tokens/s\n", prompt, pps);
        const char *note = nu_llm_model_note(m);
        printf("  decode (%ld tokens, greedy)  %10.1f tokens/s (%.3f ms a token; %s)\n", gen, dps, 1e3 / dps,
               *note ? note : "ids on the GPU, launches queued ahead");
        printf("  decode, logits read back    %10.1f tokens/s (%.3f ms a token; the logits read back each token, the "
               "argmax on the CPU)%s\n", rps, 1e3 / rps, same == gen ? "" : " (ids differ: see the warning)");
        if (wbytes)
            printf("  decode weights read         %10.4g GB/s (%.4g MB a token), %.1f%% of the copy bandwidth (%.0f "
                   "GB/s)\n", wps, (double)wbytes / 1e6, copy > 0 ? 100.0 * wps / copy : 0.0, copy);
        printf("  ");
        cli_llm_memory_line(stdout, m);
        status = 0;
    }
    goto out;
model_failed:
    fprintf(stderr, "nuvec bench llm: %s (%s)\n", nu_status_string(st), nu_llm_error_message());
out:
    free(logits);
    free(tokens);
    free(gpu_ids);
    free(cpu_ids);
    nu_llm_model_free(m);
    if (d)
        nu_device_close(d);
    cli_devices_close(&devs);
    if (tmp_path[0] && !keep)
        unlink(tmp_path);
    return status;
}
