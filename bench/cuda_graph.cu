// cuda_graph.cu: the CUDA side of `nuvec bench graph`: the same programs as CUDA graphs on the same
// GPU (run by bench/h200.sh's graph step; not built by CMake):
//   nvcc -O2 -arch=sm_90 -o /tmp/cuda_graph bench/cuda_graph.cu && /tmp/cuda_graph [--json]
//
// Kernels: nuvec's add_f32 and fma_f32 in CUDA over 64 floats, one block of 256 threads each.
//   layer   the dependency structure of one 7B Llama decode layer, 15 nodes with explicit edges
//           (node i depends on the nodes that wrote its inputs), exactly bench/graph.c's table:
//           GPU time per cudaGraphLaunch (events around `reps` launches, divided by reps)
//   chain   `count` dependent adds (x[(i+1)&1] = x[i&1] + 1, the first from a zero buffer), one
//           node after another: host time of one cudaGraphLaunch (the CPU cost of a launch)
//   one     one node: cudaGraphLaunch + cudaStreamSynchronize, `iterations` round trips
// Results are checked (the layer leaves 108 in x3, the chain `count`).
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
            fprintf(stderr, "cuda_graph: %s: %s (line %d)\n", #call, cudaGetErrorString(e_), __LINE__); \
            exit(1);                                                                                   \
        }                                                                                              \
    } while (0)

static const unsigned ELEMS = 64;
static const unsigned THREADS = 256;

__global__ void add_f32(float *z, const float *x, const float *y, unsigned n)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        z[i] = x[i] + y[i];
}

__global__ void fma_f32(float *d, const float *a, const float *b, const float *c, unsigned n)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        d[i] = a[i] * b[i] + c[i];
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

// The layer's buffers and ops (bench/graph.c's table: dst first).
enum { ONE, X, H, Q, K, V, QR, KR, ATT, O, X2, H2, G, U, S, D, X3, BUFFERS };
struct Op {
    int fma;
    int buf[4];
};
static const Op layer[] = {
    {0, {H, X, X}},     {0, {Q, H, ONE}},  {0, {K, H, ONE}},  {0, {V, H, ONE}},    {0, {QR, Q, ONE}},
    {0, {KR, K, ONE}},  {1, {ATT, QR, KR, V}}, {0, {O, ATT, ONE}}, {0, {X2, X, O}}, {0, {H2, X2, X2}},
    {0, {G, H2, ONE}},  {0, {U, H2, ONE}}, {0, {S, G, U}},    {0, {D, S, ONE}},    {0, {X3, X2, D}},
};
static const int LAYER_OPS = sizeof layer / sizeof layer[0];

static cudaGraphNode_t add_node(cudaGraph_t g, int fma, float *const *p, const cudaGraphNode_t *deps, size_t ndeps)
{
    unsigned n = ELEMS;
    float *a0 = p[0], *a1 = p[1], *a2 = p[2], *a3 = p[3];
    void *add_args[] = {&a0, &a1, &a2, &n};
    void *fma_args[] = {&a0, &a1, &a2, &a3, &n};
    cudaKernelNodeParams kp = {};
    kp.func = fma ? (void *)fma_f32 : (void *)add_f32;
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(THREADS);
    kp.kernelParams = fma ? fma_args : add_args;
    cudaGraphNode_t node;
    CHECK(cudaGraphAddKernelNode(&node, g, deps, ndeps, &kp));
    return node;
}

static bool expect(const float *dev, float want, const char *who)
{
    float v[ELEMS];
    CHECK(cudaMemcpy(v, dev, sizeof v, cudaMemcpyDeviceToHost));
    for (unsigned i = 0; i < ELEMS; i++)
        if (v[i] != want) {
            fprintf(stderr, "cuda_graph: %s: element %u is %g, expected %g\n", who, i, (double)v[i], (double)want);
            return false;
        }
    return true;
}

int main(int argc, char **argv)
{
    bool json = false;
    unsigned count = 1000;
    int reps = 1000, iterations = 2000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = true;
        else if (!strcmp(argv[i], "--count") && i + 1 < argc)
            count = (unsigned)atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: cuda_graph [--json] [--count N]\n");
            return 2;
        }
    }
    cudaStream_t s;
    cudaEvent_t e0, e1;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    float *buf[BUFFERS], *zero, *x[2];
    std::vector<float> ones(ELEMS, 1.0f);
    for (int i = 0; i < BUFFERS; i++) {
        CHECK(cudaMalloc(&buf[i], ELEMS * sizeof(float)));
        CHECK(cudaMemset(buf[i], 0, ELEMS * sizeof(float)));
    }
    CHECK(cudaMemcpy(buf[ONE], ones.data(), ELEMS * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(buf[X], ones.data(), ELEMS * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMalloc(&zero, ELEMS * sizeof(float)));
    CHECK(cudaMemset(zero, 0, ELEMS * sizeof(float)));
    for (int i = 0; i < 2; i++)
        CHECK(cudaMalloc(&x[i], ELEMS * sizeof(float)));

    // The layer: each node depends on the last writer of each of its inputs (every buffer is
    // written once, so these are all its dependencies).
    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    cudaGraphNode_t nodes[LAYER_OPS], writer[BUFFERS] = {};
    bool written[BUFFERS] = {};
    for (int i = 0; i < LAYER_OPS; i++) {
        const Op &op = layer[i];
        int n = op.fma ? 4 : 3;
        float *p[4] = {nullptr, nullptr, nullptr, nullptr};
        cudaGraphNode_t deps[3];
        size_t nd = 0;
        for (int j = 0; j < n; j++) {
            p[j] = buf[op.buf[j]];
            if (j && written[op.buf[j]]) {
                bool seen = false;
                for (size_t k = 0; k < nd; k++)
                    seen |= deps[k] == writer[op.buf[j]];
                if (!seen)
                    deps[nd++] = writer[op.buf[j]];
            }
        }
        nodes[i] = add_node(g, op.fma, p, deps, nd);
        writer[op.buf[0]] = nodes[i];
        written[op.buf[0]] = true;
    }
    cudaGraphExec_t layer_exec;
    CHECK(cudaGraphInstantiateWithFlags(&layer_exec, g, 0));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaGraphLaunch(layer_exec, s));
    CHECK(cudaStreamSynchronize(s));
    if (!expect(buf[X3], 108, "layer"))
        return 1;
    std::vector<double> layer_us;
    for (int r = 0; r < 9; r++) {
        CHECK(cudaEventRecord(e0, s));
        for (int i = 0; i < reps; i++)
            CHECK(cudaGraphLaunch(layer_exec, s));
        CHECK(cudaEventRecord(e1, s));
        CHECK(cudaEventSynchronize(e1));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        layer_us.push_back(ms * 1e3 / reps);
    }

    // The chain: host time of cudaGraphLaunch, the graph idle before each launch.
    CHECK(cudaGraphCreate(&g, 0));
    cudaGraphNode_t prev = nullptr;
    for (unsigned i = 0; i < count; i++) {
        float *p[4] = {x[(i + 1) & 1], i ? x[i & 1] : zero, buf[ONE], nullptr};
        prev = add_node(g, 0, p, i ? &prev : nullptr, i ? 1 : 0);
    }
    cudaGraphExec_t chain_exec;
    CHECK(cudaGraphInstantiateWithFlags(&chain_exec, g, 0));
    CHECK(cudaGraphDestroy(g));
    std::vector<double> launch_us;
    for (int r = 0; r < 101; r++) {
        double t0 = now_us();
        CHECK(cudaGraphLaunch(chain_exec, s));
        double t1 = now_us();
        CHECK(cudaStreamSynchronize(s));
        if (r)
            launch_us.push_back(t1 - t0);
    }
    if (!expect(x[count & 1], (float)count, "chain"))
        return 1;

    // One node: launch + synchronise.
    CHECK(cudaGraphCreate(&g, 0));
    float *p1[4] = {buf[H], buf[X], buf[X], nullptr};
    add_node(g, 0, p1, nullptr, 0);
    cudaGraphExec_t one_exec;
    CHECK(cudaGraphInstantiateWithFlags(&one_exec, g, 0));
    CHECK(cudaGraphDestroy(g));
    std::vector<double> trip_us;
    for (int i = 0; i < iterations + 50; i++) {
        double t0 = now_us();
        CHECK(cudaGraphLaunch(one_exec, s));
        CHECK(cudaStreamSynchronize(s));
        if (i >= 50)
            trip_us.push_back(now_us() - t0);
    }

    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    double lu = median(layer_us), cu = median(launch_us), tu = median(trip_us);
    if (json) {
        printf("{\n  \"benchmark\": \"cuda_graph\",\n  \"device\": {\"name\": \"%s\"},\n", prop.name);
        printf("  \"method\": {\"count\": %u, \"layer_ops\": %d, \"elements_per_launch\": %u},\n", count, LAYER_OPS,
               ELEMS);
        printf("  \"results\": {\"gpu_per_layer_us\": %.6g, \"launch_cpu_us\": %.6g, \"round_trip_us\": %.6g}\n}\n", lu,
               cu, tu);
    } else {
        printf("CUDA graphs on %s: add/fma over %u floats (1 block of %u threads) per node\n", prop.name, ELEMS,
               THREADS);
        printf("%-52s | %10.3f\n", "GPU per decode layer (15 nodes, us)", lu);
        char what[64];
        snprintf(what, sizeof what, "cudaGraphLaunch CPU, %u-node chain (us)", count);
        printf("%-52s | %10.3f\n", what, cu);
        printf("%-52s | %10.3f\n", "launch + synchronise, one-node graph (us)", tu);
        printf("results checked: layer 108, chain %u: ok\n", count);
    }
    CHECK(cudaGraphExecDestroy(layer_exec));
    CHECK(cudaGraphExecDestroy(chain_exec));
    CHECK(cudaGraphExecDestroy(one_exec));
    return 0;
}
