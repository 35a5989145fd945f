// cuda_dispatch.cu: the CUDA side of `nuvec bench dispatch` and `nuvec bench submit`, for the
// same work on the same GPU (run by bench/h200.sh; not built by CMake):
//   nvcc -O2 -arch=sm_90 -o /tmp/cuda_dispatch bench/cuda_dispatch.cu && /tmp/cuda_dispatch [--json]
//
// The kernel is nuvec's fma_f32 written in CUDA (d = a*b + c over 64 floats, one block of 256
// threads), on the same two patterns as nuvec's benchmark, `count` launches each:
//   dependent    x[(i+1)&1] = x[i&1]*1 + 1: a chain (each launch reads the previous one's output)
//   independent  out[i*64 ..] = 1*1 + 1: each launch writes its own 256 bytes
// measured as
//   stream       `count` launches on one stream, GPU time between events around them (a stream
//                serialises launches, so independent ones are ordered too); also the host time
//                of the launch loop per launch (what cudaLaunchKernel costs the CPU)
//   graph        the same launches as one CUDA graph (dependent: captured from the stream, a
//                chain of nodes; independent: kernel nodes added with no edges), GPU time of one
//                cudaGraphLaunch per node
// and the round trip of one small kernel (fill over 1 KiB: one block), launch +
// cudaStreamSynchronize, over `iterations` (median, p10, p90), as nuvec's submit benchmark.
// Results are checked once (the chain leaves `count`, each independent slice 2).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(call)                                                                                    \
    do {                                                                                               \
        cudaError_t e_ = (call);                                                                       \
        if (e_ != cudaSuccess) {                                                                       \
            fprintf(stderr, "cuda_dispatch: %s: %s (line %d)\n", #call, cudaGetErrorString(e_), __LINE__); \
            exit(1);                                                                                   \
        }                                                                                              \
    } while (0)

static const unsigned ELEMS = 64;
static const unsigned THREADS = 256;

__global__ void fma_f32(float *d, const float *a, const float *b, const float *c, unsigned n)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        d[i] = a[i] * b[i] + c[i];
}

__global__ void fill_u32(unsigned *d, unsigned v, unsigned n)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        d[i] = v;
}

static double now_us()
{
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double percentile(std::vector<double> v, double p)
{
    std::sort(v.begin(), v.end());
    long i = (long)(p / 100.0 * (double)v.size() + 0.999999) - 1;
    return v.empty() ? 0 : v[std::min<long>(std::max<long>(i, 0), (long)v.size() - 1)];
}

struct Bench {
    unsigned count = 10000;
    int reps = 9;
    int iterations = 2000;
    cudaStream_t s;
    cudaEvent_t e0, e1;
    float *x[2], *in[3], *out;
    unsigned *fill;
};

static void launch(Bench &b, bool dependent, unsigned i)
{
    if (dependent)
        fma_f32<<<1, THREADS, 0, b.s>>>(b.x[(i + 1) & 1], b.x[i & 1], b.in[0], b.in[1], ELEMS);
    else
        fma_f32<<<1, THREADS, 0, b.s>>>(b.out + (size_t)i * ELEMS, b.in[0], b.in[1], b.in[2], ELEMS);
}

static void reset(Bench &b)
{
    CHECK(cudaMemsetAsync(b.x[0], 0, ELEMS * sizeof(float), b.s));
    CHECK(cudaMemsetAsync(b.x[1], 0, ELEMS * sizeof(float), b.s));
    CHECK(cudaMemsetAsync(b.out, 0, (size_t)b.count * ELEMS * sizeof(float), b.s));
    CHECK(cudaStreamSynchronize(b.s));
}

static bool check(Bench &b, bool dependent, const char *who)
{
    std::vector<float> v(dependent ? ELEMS : (size_t)b.count * ELEMS);
    CHECK(cudaMemcpy(v.data(), dependent ? b.x[b.count & 1] : b.out, v.size() * sizeof(float),
                     cudaMemcpyDeviceToHost));
    float want = dependent ? (float)b.count : 2.0f;
    for (size_t i = 0; i < v.size(); i++) {
        if (v[i] != want) {
            fprintf(stderr, "cuda_dispatch: %s %s: element %zu is %g, expected %g\n", who,
                    dependent ? "dependent" : "independent", i, (double)v[i], (double)want);
            return false;
        }
    }
    return true;
}

// Stream launches: GPU us for all of them (events), host us per launch.
static void run_stream(Bench &b, bool dependent, double *gpu_us, double *cpu_us)
{
    CHECK(cudaEventRecord(b.e0, b.s));
    double t0 = now_us();
    for (unsigned i = 0; i < b.count; i++)
        launch(b, dependent, i);
    double t1 = now_us();
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(b.e1, b.s));
    CHECK(cudaEventSynchronize(b.e1));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, b.e0, b.e1));
    *gpu_us = ms * 1e3;
    *cpu_us = (t1 - t0) / b.count;
}

static cudaGraphExec_t make_graph(Bench &b, bool dependent)
{
    cudaGraph_t g;
    if (dependent) {
        CHECK(cudaStreamBeginCapture(b.s, cudaStreamCaptureModeGlobal));
        for (unsigned i = 0; i < b.count; i++)
            launch(b, true, i);
        CHECK(cudaStreamEndCapture(b.s, &g));
    } else {
        CHECK(cudaGraphCreate(&g, 0));
        for (unsigned i = 0; i < b.count; i++) {
            float *d = b.out + (size_t)i * ELEMS;
            unsigned n = ELEMS;
            void *args[] = {&d, &b.in[0], &b.in[1], &b.in[2], &n};
            cudaKernelNodeParams p = {};
            p.func = (void *)fma_f32;
            p.gridDim = dim3(1);
            p.blockDim = dim3(THREADS);
            p.kernelParams = args;
            cudaGraphNode_t node;
            CHECK(cudaGraphAddKernelNode(&node, g, nullptr, 0, &p));
        }
    }
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiateWithFlags(&exec, g, 0));
    CHECK(cudaGraphDestroy(g));
    return exec;
}

static double run_graph(Bench &b, cudaGraphExec_t exec)
{
    CHECK(cudaEventRecord(b.e0, b.s));
    CHECK(cudaGraphLaunch(exec, b.s));
    CHECK(cudaEventRecord(b.e1, b.s));
    CHECK(cudaEventSynchronize(b.e1));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, b.e0, b.e1));
    return ms * 1e3;
}

struct Pattern {
    double stream_us, stream_cpu_us, graph_us; // stream and graph: all `count` launches
    bool checked;
};

static bool measure_pattern(Bench &b, bool dependent, Pattern *r)
{
    double gpu, cpu;
    reset(b);
    run_stream(b, dependent, &gpu, &cpu); // warm-up, checked
    if (!check(b, dependent, "stream"))
        return false;
    cudaGraphExec_t exec = make_graph(b, dependent);
    reset(b);
    run_graph(b, exec);
    if (!check(b, dependent, "graph"))
        return false;
    std::vector<double> sg, sc, gg;
    for (int rep = 0; rep < b.reps; rep++) {
        run_stream(b, dependent, &gpu, &cpu);
        sg.push_back(gpu);
        sc.push_back(cpu);
        gg.push_back(run_graph(b, exec));
    }
    CHECK(cudaGraphExecDestroy(exec));
    r->stream_us = median(sg);
    r->stream_cpu_us = median(sc);
    r->graph_us = median(gg);
    r->checked = true;
    return true;
}

int main(int argc, char **argv)
{
    Bench b;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = true;
        else if (!strcmp(argv[i], "--count") && i + 1 < argc)
            b.count = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            b.reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iterations") && i + 1 < argc)
            b.iterations = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: cuda_dispatch [--json] [--count N] [--reps R] [--iterations N]\n");
            return 2;
        }
    }
    if (b.count < 2 || b.reps < 1 || b.iterations < 1) {
        fprintf(stderr, "cuda_dispatch: --count >= 2, --reps >= 1, --iterations >= 1\n");
        return 2;
    }
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    int runtime = 0, driver = 0;
    CHECK(cudaRuntimeGetVersion(&runtime));
    CHECK(cudaDriverGetVersion(&driver));
    CHECK(cudaStreamCreateWithFlags(&b.s, cudaStreamNonBlocking));
    CHECK(cudaEventCreate(&b.e0));
    CHECK(cudaEventCreate(&b.e1));
    for (int i = 0; i < 2; i++)
        CHECK(cudaMalloc(&b.x[i], ELEMS * sizeof(float)));
    std::vector<float> ones(ELEMS, 1.0f);
    for (int i = 0; i < 3; i++) {
        CHECK(cudaMalloc(&b.in[i], ELEMS * sizeof(float)));
        CHECK(cudaMemcpy(b.in[i], ones.data(), ELEMS * sizeof(float), cudaMemcpyHostToDevice));
    }
    CHECK(cudaMalloc(&b.out, (size_t)b.count * ELEMS * sizeof(float)));
    CHECK(cudaMalloc(&b.fill, 256 * sizeof(unsigned)));

    Pattern pat[2];
    if (!measure_pattern(b, true, &pat[0]) || !measure_pattern(b, false, &pat[1]))
        return 1;

    // Round trip of one small kernel.
    for (int i = 0; i < 20; i++) {
        fill_u32<<<1, THREADS, 0, b.s>>>(b.fill, (unsigned)i, 256);
        CHECK(cudaStreamSynchronize(b.s));
    }
    std::vector<double> rt;
    for (int i = 0; i < b.iterations; i++) {
        double t0 = now_us();
        fill_u32<<<1, THREADS, 0, b.s>>>(b.fill, (unsigned)i, 256);
        CHECK(cudaStreamSynchronize(b.s));
        rt.push_back(now_us() - t0);
    }
    CHECK(cudaGetLastError());
    unsigned last;
    CHECK(cudaMemcpy(&last, b.fill + 255, sizeof last, cudaMemcpyDeviceToHost));
    if (last != (unsigned)(b.iterations - 1)) {
        fprintf(stderr, "cuda_dispatch: fill left %u, expected %d\n", last, b.iterations - 1);
        return 1;
    }
    double rt_med = median(rt), rt_p10 = percentile(rt, 10), rt_p90 = percentile(rt, 90);

    const char *names[2] = {"dependent", "independent"};
    if (json) {
        printf("{\n  \"benchmark\": \"cuda\",\n  \"device\": {\"name\": \"%s\", \"cuda_runtime\": %d, \"cuda_driver\": %d},\n",
               prop.name, runtime, driver);
        printf("  \"method\": {\"count\": %u, \"repetitions\": %d, \"iterations\": %d, \"elements_per_launch\": %u, "
               "\"threads_per_block\": %u, \"statistic\": \"median\"},\n",
               b.count, b.reps, b.iterations, ELEMS, THREADS);
        printf("  \"results\": {\n");
        for (int p = 0; p < 2; p++)
            printf("    \"%s\": {\"stream_gpu_us_per_launch\": %.6g, \"stream_cpu_us_per_launch\": %.6g, "
                   "\"graph_gpu_us_per_node\": %.6g, \"stream_gpu_us_total\": %.6g, \"graph_gpu_us_total\": %.6g, "
                   "\"checked\": %s},\n",
                   names[p], pat[p].stream_us / b.count, pat[p].stream_cpu_us, pat[p].graph_us / b.count,
                   pat[p].stream_us, pat[p].graph_us, pat[p].checked ? "true" : "false");
        printf("    \"launch_sync\": {\"median_us\": %.6g, \"p10_us\": %.6g, \"p90_us\": %.6g}\n  }\n}\n", rt_med,
               rt_p10, rt_p90);
    } else {
        printf("CUDA on %s (runtime %d, driver %d): fma over %u floats (1 block of %u threads) per launch;\n"
               "%u launches, median of %d repetitions after a checked warm-up\n\n",
               prop.name, runtime, driver, ELEMS, THREADS, b.count, b.reps);
        printf("%-44s | %12s | %12s\n", "", "dependent", "independent");
        printf("%-44s | %12.3f | %12.3f\n", "stream: GPU time per launch (us)", pat[0].stream_us / b.count,
               pat[1].stream_us / b.count);
        printf("%-44s | %12.3f | %12.3f\n", "stream: CPU time per launch (us)", pat[0].stream_cpu_us,
               pat[1].stream_cpu_us);
        printf("%-44s | %12.3f | %12.3f\n", "graph: GPU time per node (us)", pat[0].graph_us / b.count,
               pat[1].graph_us / b.count);
        printf("\nlaunch + cudaStreamSynchronize of one small kernel (fill over 1 KiB), %d round trips:\n"
               "median %.2f us, p10 %.2f us, p90 %.2f us\n",
               b.iterations, rt_med, rt_p10, rt_p90);
        printf("results checked (warm-up): chain = %u and every independent slice = 2: ok\n", b.count);
    }
    return 0;
}
