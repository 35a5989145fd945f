/* bench.c: `nuvec bench NAME [options]`: dispatches to the benchmark of that name. A new
 * benchmark is one entry in `benchmarks` and its declaration in bench.h. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage; /* options after the name */
    const char *what;
} benchmarks[] = {
    {"alloc", bench_alloc, "[--json] [--device NAME] [--iterations N]",
     "median ns per allocate+free, 256 B to 64 MiB: nuvec's cache vs vkAllocateMemory vs malloc"},
    {"dispatch", bench_dispatch, "[--json] [--device NAME] [--count N] [--reps R] [--hand-pool transient|resettable]",
     "ns to record one 4-binding dispatch and GPU time of N dependent / independent tiny\n"
     "      dispatches: nuvec vs the same work in hand-written Vulkan"},
    {"submit", bench_submit, "[--json] [--device NAME] [--iterations N]",
     "us per round trip of one small dispatch: nuvec new+dispatch+commit+wait+free vs\n"
     "      hand-written Vulkan (resubmitted: fence wait, timeline spin, timeline wait; recorded\n"
     "      each time: timeline spin)"},
    {"pipeline", bench_pipeline, "[--json] [--device NAME] [--elements N] [--steps N] [--in-flight N]",
     "the pipelined demo loop with and without reuse of in-flight memory: GB/s and peak memory"},
    {"upload", bench_upload, "[--json] [--device NAME] [--size BYTES] [--file PATH] [--reps N]",
     "GB/s moving a safetensors file in the page cache into device memory: nuvec's move\n"
     "      (zero-copy DMA, or staged where the driver cannot import the file's pages) vs a\n"
     "      hand-written copy from pinned memory (the bus limit) vs read() + write"},
    {"graph", bench_graph, "[--json] [--device NAME] [--count N] [--reps R] [--iterations N]",
     "graphs: CPU cost of a launch, GPU time per dependent / independent tiny dispatch and per\n"
     "      decode layer (15 ops), launch + wait of one dispatch: nuvec vs hand-written Vulkan\n"
     "      recorded once and resubmitted"},
    {"ops", bench_ops, "[--json] [--device NAME] [--size BYTES] [--filter TEXT]",
     "the kernel library's ops at a 7B Llama decode's shapes and elementwise ops at --size\n"
     "      bytes: GB/s and the fraction of the copy bandwidth measured in the same run"},
    {"llm", bench_llm, "(--model PATH | --shape NAME --dtype T [--keep]) [-p N] [-n N] [--kv f16|f32] [--json] [--device NAME]",
     "a Llama model (libnuvec_llm) end to end: device open to the first token, prompt and decode\n"
     "      tokens/s, decode's weight bytes a second against the copy bandwidth"},
};
#define BENCHMARK_COUNT (sizeof benchmarks / sizeof benchmarks[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: nuvec bench NAME [options]\n");
    for (size_t i = 0; i < BENCHMARK_COUNT; i++)
        fprintf(f, "  %s %s\n      %s\n", benchmarks[i].name, benchmarks[i].usage, benchmarks[i].what);
    fprintf(f, "Runs on the default device (NUVEC_DEVICE=index|name or --device NAME chooses), without\n"
               "validation. `nuvec bench NAME --help` describes a benchmark's options.\n");
}

int cli_bench(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < BENCHMARK_COUNT; i++)
        if (!strcmp(argv[1], benchmarks[i].name))
            return benchmarks[i].run(argc - 1, argv + 1);
    fprintf(stderr, "nuvec bench: unknown benchmark '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
