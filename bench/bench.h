/* bench.h: the benchmarks behind `nuvec bench NAME`. Each takes the arguments after its own
 * name (argv[0] is the benchmark's name) and returns the process exit status. Benchmarks run
 * on the default device (NUVEC_DEVICE or --device NAME chooses), never under validation, and
 * print a table, or one JSON document with --json (no date: the caller records it). */
#ifndef BENCH_H
#define BENCH_H

int bench_alloc(int argc, char **argv); /* bench/alloc.c: allocate+free, cached vs Vulkan vs malloc */
int bench_dispatch(int argc, char **argv); /* bench/dispatch.c: recording and GPU time of dispatches vs Vulkan */
int bench_submit(int argc, char **argv);   /* bench/submit.c: commit + wait of one dispatch vs Vulkan */
int bench_pipeline(int argc, char **argv); /* bench/pipeline.c: the demo loop with and without in-flight reuse */
int bench_upload(int argc, char **argv);
int bench_graph(int argc, char **argv);    /* bench/graph.c: graph launches vs hand-written resubmission */   /* bench/upload.c: a weights file into device memory vs pinned copy */

int bench_ops(int argc, char **argv);      /* bench/ops.c: the kernel library's ops, GB/s vs the copy bandwidth */
int bench_llm(int argc, char **argv);      /* bench/llm.c: a Llama model end to end: load, prompt and decode tokens/s */

#endif
