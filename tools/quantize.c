/* quantize.c: `nuvec quantize IN OUT --type TYPE`: the command's arguments and summary around
 * qz_quantize (tools/quantize_run.c, quantize.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "quantize.h"
#include "tool_error.h"

/* ---- the command ---- */

static void usage(FILE *f)
{
    fprintf(f, "usage: nuvec quantize IN OUT --type TYPE [--threads N] [--allow-requantize] [--pure]\n"
               "                      [--output-tensor-type T] [--token-embedding-type T]\n"
               "  Writes OUT, a GGUF file of the Llama model IN (a GGUF file of F32, F16 or BF16 tensors, or a\n"
               "  Hugging Face folder: config.json + *.safetensors of a LlamaForCausalLM) with each tensor's type\n"
               "  chosen as llama-quantize chooses it for TYPE (its names, in any case):\n");
    for (size_t i = 0; quant_preset_at(i); i++)
        fprintf(f, "    %-8s %s\n", quant_preset_at(i)->name, quant_preset_at(i)->about);
    fprintf(f, "  (q4_k and q5_k mean q4_k_m and q5_k_m.) 1-D tensors stay F32. --pure gives every matrix TYPE's\n"
               "  base type (rows that do not fit still fall back). --output-tensor-type and --token-embedding-type\n"
               "  set output.weight's and token_embd's type (q8_0, q6_k, f16, ...). Quantized inputs are refused\n"
               "  unless --allow-requantize. --threads N quantizes on N threads (default: one a CPU). A failure\n"
               "  leaves no OUT.\n");
}

static int parse_args(int argc, char **argv, qz_request *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--allow-requantize")) {
            o->allow_requantize = true;
        } else if (!strcmp(a, "--pure")) {
            o->mix.pure = true;
        } else if (!strcmp(a, "--type") && v) {
            if (!(o->mix.preset = quant_find_preset(v))) {
                fprintf(stderr, "nuvec quantize: unknown --type '%s' (nuvec quantize --help lists them)\n", v);
                return 2;
            }
            i++;
        } else if ((!strcmp(a, "--output-tensor-type") || !strcmp(a, "--token-embedding-type")) && v) {
            nu_dtype t = quant_find_type(v);
            if (t == NU_DTYPE_COUNT) {
                fprintf(stderr, "nuvec quantize: unknown tensor type '%s' for %s (q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, "
                                "q5_k, q6_k, iq4_nl, iq4_xs, f16, bf16, f32)\n", v, a);
                return 2;
            }
            *(a[2] == 'o' ? &o->mix.output_type : &o->mix.embedding_type) = t;
            i++;
        } else if (!strcmp(a, "--threads") && v) {
            if (!cli_arg_u32(v, 1, QZ_MAX_THREADS, &o->threads)) {
                fprintf(stderr, "nuvec quantize: --threads wants 1 to %d, not '%s'\n", QZ_MAX_THREADS, v);
                return 2;
            }
            i++;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "nuvec quantize: unexpected or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (!o->in) {
            o->in = a;
        } else if (!o->out) {
            o->out = a;
        } else {
            fprintf(stderr, "nuvec quantize: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!o->in || !o->out || !o->mix.preset) {
        fprintf(stderr, "nuvec quantize: IN, OUT and --type are required\n");
        usage(stderr);
        return 2;
    }
    return -1;
}

int cli_quantize(int argc, char **argv)
{
    qz_request r = {.mix = {.output_type = NU_DTYPE_COUNT, .embedding_type = NU_DTYPE_COUNT}};
    int rc = parse_args(argc, argv, &r);
    if (rc >= 0)
        return rc;
    r.plan = stdout;
    r.notes = stderr;
    const double start = cli_now_s();
    qz_result res;
    nu_status st = qz_quantize(&r, &res);
    if (st != NU_OK) {
        fflush(stdout);
        fprintf(stderr, "nuvec quantize: %s: %s\n", nu_status_string(st), tool_error_message());
        return 1;
    }
    printf("%s: %s, %zu tensors, %.2f MiB -> %.2f MiB (%.2f bits a weight) in %.1f s\n", r.out, r.mix.preset->name,
           res.tensors, res.in_bytes / 1048576.0, res.out_bytes / 1048576.0,
           res.elements ? 8.0 * (double)res.out_bytes / (double)res.elements : 0, cli_now_s() - start);
    return 0;
}
