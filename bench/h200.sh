#!/usr/bin/env bash
# Runs nuvec on the device machine (an H200): the tests under validation, the demo, and the
# benchmarks, with a table at the end. The build comes along: build/ is too large to carry (the
# device tool's 64 MiB), so carry a stripped copy (strip build/nuvec into .devbuild/, carry .devbuild
# .gl, and copy it to build/nuvec there before running this; tests likewise); .gl holds
# Debian's libvulkan1, libcjson1, libcmocka0 and vulkan-validationlayers packages (that
# machine has the NVIDIA driver but no Vulkan loader). Usage: bench/h200.sh [STEP...]
# Steps: info tests demo alloc dispatch submit pipeline graph cuda torch summary upload trace capture llm batch serve
# memory kquant (memory: issue 29's peak device memory at 4,096 positions beside llama.cpp; kquant:
# K-quant files by llama-quantize beside llama.cpp; neither in the default list: large model files)
# (llm, batch and serve are not in the default list: they write 4-17 GB of model files; see their comments below)
# ops (nuvec bench ops beside bench/torch_ops.py) matvec (a sweep of the matrix-vector knobs)
# soa (a sweep of NUVEC_MATVEC_SOA, Q4_0_SOA's matrix-vector knobs; not in the default list)
# ahead (one-sequence decode with weights read ahead or not, launch parameters in device or host
# memory: NUVEC_LLM_PREFETCH plans, NUVEC_GRAPH_PARAMS_DEVICE; not in the default list)
# random (default: all; random takes RANDOM_PROGRAMS, default 100000, from RANDOM_SEED, default 0);
# gputests runs only the tests that do GPU work. upload writes a weights file of UPLOAD_SIZE
# (default 16G) and runs `nuvec bench upload`, `nuvec load --to-gpu` and bench/torch_upload.py on
# it; trace measures NUVEC_TRACE's overhead on `nuvec bench dispatch` and checks a demo trace;
# capture unpacks RenderDoc from .gl/rd (into /tmp/rd, not /) and takes a capture of the demo. Text results go to $OUT (or ./h200-out), at most 8
# files (what the device tool brings back); JSON goes to $OUT_JSON (default /tmp/h200-json). cuda builds bench/cuda_dispatch.cu with nvcc into a temporary folder; graph runs `nuvec bench graph` and bench/cuda_graph.cu (CUDA graphs of the same programs);
# torch runs bench/torch_dispatch.py; summary prints dispatch/submit/cuda/torch side by side.
set -u
OUT=${OUT:-$PWD/h200-out}
J=${OUT_JSON:-/tmp/h200-json}
mkdir -p "$OUT" "$J"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
if ! ./build/nuvec info >/dev/null 2>&1; then
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
# gpu_peak LABEL CMD...: runs CMD with nvidia-smi sampling the GPU's memory.used every 20 ms;
# appends "PEAK LABEL: N MiB above idle" to memory.txt (stdout stays CMD's).
gpu_peak() {
    local label=$1 base max smi rc samples=/tmp/gpu-peak.$$
    shift
    base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 20 >"$samples" &
    smi=$!
    "$@"
    rc=$?
    kill "$smi"
    wait "$smi" 2>/dev/null
    max=$(sort -n "$samples" | tail -1)
    echo "PEAK $label: $((max - base)) MiB above idle (idle $base MiB, peak $max MiB, $(wc -l <"$samples") samples)" >>"$OUT/memory.txt"
    rm -f "$samples"
    return $rc
}
steps=${*:-info tests demo alloc dispatch submit pipeline graph cuda torch summary upload trace capture random}
status=0
for step in $steps; do
    echo "=== $step"
    case $step in
    info)
        ./build/nuvec info | tee "$OUT/info.txt"
        ./build/nuvec info --json >"$J/info.json"
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee -a "$OUT/info.txt"
        lscpu | grep -E 'Model name|^CPU\(s\)' | tee -a "$OUT/info.txt" ;;
    tests|gputests)
        for t in build/tests/test_*; do
            # gputests: only those that run GPU work (not the CPU-only ones; random has its step)
            # test_capture needs RenderDoc, unpacked by the capture step, which runs it
            [ "$(basename "$t")" = test_capture ] && continue
            if [ "$step" = gputests ]; then
                case $(basename "$t") in test_allocator|test_guard|test_hazard|test_host_oom|test_random) continue ;; esac
            fi
            log=$J/$(basename "$t").log
            if NUVEC_VALIDATION=1 CMOCKA_MESSAGE_OUTPUT=stdout "$t" >"$log" 2>&1; then
                echo "PASS $(basename "$t")" | tee -a "$OUT/tests.log"
            else
                echo "FAIL $(basename "$t")" | tee -a "$OUT/tests.log"; tail -20 "$log" | tee -a "$OUT/tests.log"; status=1
            fi
        done ;;
    demo)
        ./build/nuvec demo 2>&1 | tee "$OUT/demo.txt"; [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    alloc)
        ./build/nuvec bench alloc --json >"$J/alloc.json" || status=1
        ./build/nuvec bench alloc | tee "$OUT/alloc.txt" ;;
    dispatch|submit|pipeline)
        ./build/nuvec bench "$step" --json >"$J/$step.json" || status=1
        ./build/nuvec bench "$step" | tee -a "$OUT/bench.txt" || status=1 ;;
    graph)
        # nuvec's graphs beside the hand-written resubmission, then the same programs as CUDA graphs
        ./build/nuvec bench graph --json >"$J/graph.json" || status=1
        ./build/nuvec bench graph | tee -a "$OUT/bench.txt" || status=1
        nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
        tmp=$(mktemp -d)
        if [ ! -x "$nvcc" ]; then
            echo "SKIP cuda graph: no nvcc"
        elif "$nvcc" -O2 -arch=sm_90 -o "$tmp/cuda_graph" bench/cuda_graph.cu; then
            "$tmp/cuda_graph" --json >"$J/cuda_graph.json" || status=1
            "$tmp/cuda_graph" | tee -a "$OUT/bench.txt" || status=1
        else
            echo "FAIL cuda graph: nvcc"; status=1
        fi
        rm -rf "$tmp" ;;
    cuda)
        nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
        tmp=$(mktemp -d)
        if [ ! -x "$nvcc" ]; then
            echo "SKIP cuda: no nvcc"
        elif "$nvcc" -O2 -arch=sm_90 -o "$tmp/cuda_dispatch" bench/cuda_dispatch.cu; then
            "$tmp/cuda_dispatch" --json >"$J/cuda.json" || status=1
            "$tmp/cuda_dispatch" | tee -a "$OUT/bench.txt" || status=1
        else
            echo "FAIL cuda: nvcc"; status=1
        fi
        rm -rf "$tmp" ;;
    torch)
        if python3 -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
            python3 bench/torch_dispatch.py --json >"$J/torch.json" || status=1
            python3 bench/torch_dispatch.py | tee -a "$OUT/bench.txt" || status=1
        else
            echo "SKIP torch: no python3 with torch and CUDA"
        fi ;;
    summary)
        python3 bench/h200_summary.py "$J" | tee "$OUT/summary.txt" || status=1 ;;
    llm)
        # Issue 16's side by side: random-weight 7B files written by nuvec make-gguf (LLM_DIR,
        # default /tmp), `nuvec bench llm` on each beside llama.cpp's Vulkan backend
        # (bench/llamacpp.sh: carry .device/llamacpp-peer.tar.xz, made by `bench/llamacpp.sh all`
        # on the development machine) and bench/torch_llm.py (the fair PyTorch loop, HF generate);
        # then the tiny real model's per-token overhead (.device/aidreams260K.gguf).
        d=${LLM_DIR:-/tmp}
        for dt in ${LLM_DTYPES:-q4_0 f16}; do
            f=$d/llama-7b-$dt.gguf
            [ -f "$f" ] || ./build/nuvec make-gguf --shape llama-7b --dtype "$dt" --out "$f" || status=1
            ./build/nuvec bench llm --model "$f" | tee -a "$OUT/llm.txt" || status=1
            bash bench/llamacpp.sh run "$f" -r 3 | tee "$J/llamacpp-$dt.json" | tee -a "$OUT/llm.txt" || status=1
        done
        if [ -f .device/aidreams260K.gguf ]; then
            # its context is 128 positions: 16 + 100 (+1)
            ./build/nuvec bench llm --model .device/aidreams260K.gguf -p 16 -n 100 | tee -a "$OUT/llm.txt" || status=1
            bash bench/llamacpp.sh run .device/aidreams260K.gguf -p 16 -n 100 -r 3 | tee -a "$OUT/llm.txt" || status=1
        fi
        if [ "${LLM_TORCH:-1}" = 0 ]; then
            echo "SKIP torch llm: LLM_TORCH=0" | tee -a "$OUT/llm.txt"
        elif python3 -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
            python3 bench/torch_llm.py --shape llama-7b --hf | tee -a "$OUT/llm.txt" || status=1
        else
            echo "SKIP torch llm: no python3 with torch and CUDA" | tee -a "$OUT/llm.txt"
        fi ;;
    batch)
        # Issue 22's batched decode: B sequences at once, nuvec bench llm --batch beside llama.cpp's
        # batched-bench (its S_TG: speed_tg), 7B and 8B Q4_0 (LLM_DIR as llm's); --same-prompts: every
        # prompt 512 tokens, as batched-bench's -npp 512 (attention reads as many keys a step).
        d=${LLM_DIR:-/tmp}
        for shape in llama-7b llama-8b; do
            f=$d/$shape-q4_0.gguf
            [ -f "$f" ] || ./build/nuvec make-gguf --shape "$shape" --dtype q4_0 --out "$f" || status=1
            ./build/nuvec bench llm --model "$f" -p 512 -n 128 --batch 1,4,16,64 --same-prompts | tee -a "$OUT/batch.txt" ||
                status=1
            ./build/nuvec bench llm --model "$f" -p 512 -n 128 --batch 1,4,16,64 --same-prompts --json \
                >"$J/batch-$shape.json" || status=1
            bash bench/llamacpp.sh batched "$f" -npp 512 -ntg 128 -npl 1,4,16,64 | tee "$J/batched-bench-$shape.jsonl" |
                tee -a "$OUT/batch.txt" || status=1
        done ;;
    serve)
        # Issue 24's benchmark: nuvec serve beside llama.cpp's llama-server (bench/llamacpp.sh server,
        # packed into .device/llamacpp-peer.tar.xz by `bench/llamacpp.sh package`), the same prompts
        # at SERVE_CLIENTS (default 1,8,32) concurrent streaming clients, then the 2,000-token
        # prefix test (bench/serve/bench_serve.py); on SERVE_MODEL, default SERVE_SHAPE's (default
        # llama-7b) Q4_0 file, made where missing (LLM_DIR as llm's).
        d=${LLM_DIR:-/tmp}
        f=${SERVE_MODEL:-$d/${SERVE_SHAPE:-llama-7b}-q4_0.gguf}
        [ -f "$f" ] || [ -n "${SERVE_MODEL:-}" ] || ./build/nuvec make-gguf --shape "${SERVE_SHAPE:-llama-7b}" --dtype q4_0 --out "$f" ||
            status=1
        if [ ! -x .peer/dist/llama-server ] && [ -f .device/llamacpp-peer.tar.xz ]; then
            mkdir -p .peer && xz -dc .device/llamacpp-peer.tar.xz | tar -C .peer -xf - || status=1
        fi
        servers=nuvec
        if [ -x .peer/dist/llama-server ]; then
            servers=nuvec,llama
        else
            echo "SKIP llama-server: none in .peer/dist or .device/llamacpp-peer.tar.xz (bench/llamacpp.sh server)" |
                tee -a "$OUT/serve.txt"
        fi
        python3 bench/serve/bench_serve.py --model "$f" --servers "$servers" --clients "${SERVE_CLIENTS:-1,8,32}" \
            --json "$J/serve.json" | tee -a "$OUT/serve.txt" || status=1
        for s in nuvec llama; do
            [ -f /tmp/bench_serve_$s.log ] && tail -n 5 /tmp/bench_serve_$s.log | sed "s/^/$s log: /" >>"$OUT/serve.txt"
        done ;;
    ahead)
        # One-sequence decode's options measured side by side (7B Q4_0 by default; AHEAD_MODEL names
        # another file, a Q4_K_M one from llama-quantize say): weights read ahead
        # (NUVEC_LLM_PREFETCH, each plan of AHEAD_PLANS) or not, and the decode graph's launch
        # parameters copied into device memory (the default on a discrete GPU) or read where the CPU
        # wrote them (NUVEC_GRAPH_PARAMS_DEVICE=0); AHEAD_REPS rounds (default 2). LLM_DIR as llm's.
        d=${LLM_DIR:-/tmp}
        f=${AHEAD_MODEL:-$d/llama-7b-q4_0.gguf}
        [ -f "$f" ] || [ -n "${AHEAD_MODEL:-}" ] || ./build/nuvec make-gguf --shape llama-7b --dtype q4_0 --out "$f" ||
            status=1
        ahead_run() {
            echo "$1 | $(shift; env "$@" ./build/nuvec bench llm --model "$f" -p 512 -n 128 2>&1 |
                grep -E 'decode \(|prompt \(' | sed 's/^ *//;s/  */ /g' | tr '\n' ' ')" | tee -a "$OUT/ahead.txt"
        }
        for rep in $(seq "${AHEAD_REPS:-2}"); do
            ahead_run "defaults" NUVEC_LLM_PREFETCH=
            ahead_run "parameters in host memory" NUVEC_GRAPH_PARAMS_DEVICE=0 NUVEC_LLM_PREFETCH=
            for plan in ${AHEAD_PLANS:-"o=rope,gu=attn:16" "o=rope,gu=attn:32,qkv=down:8" "o=attn,gu=rope:16"}; do
                ahead_run "read ahead: $plan" NUVEC_LLM_PREFETCH="$plan"
            done
        done ;;
    batchsweep)
        # Batched decode's kernels: nuvec bench llm --batch with NUVEC_LLM_MATVEC_ROWS (the rows up to
        # which a decode step runs the matrix-vector kernels; more take the matrix products) set to
        # each of MATVEC_ROWS (default 8 4 2), 7B Q4_0; then the GPU time of a prefill and of a
        # 4-row batched decode by kernel (NUVEC_TRACE, bench/trace_table.py).
        d=${LLM_DIR:-/tmp}
        f=$d/llama-7b-q4_0.gguf
        [ -f "$f" ] || ./build/nuvec make-gguf --shape llama-7b --dtype q4_0 --out "$f" || status=1
        for rows in ${MATVEC_ROWS:-8 4 2}; do
            echo "NUVEC_LLM_MATVEC_ROWS=$rows" | tee -a "$OUT/batchsweep.txt"
            NUVEC_LLM_MATVEC_ROWS=$rows ./build/nuvec bench llm --model "$f" -p 512 -n 128 --batch ${SWEEP_BATCH:-1,2,4,8,16,64} |
                tee -a "$OUT/batchsweep.txt" || status=1
        done
        for tc in ${TC_SWEEP:-default "wm=1 wn=4 fm=4 fn=1" "wm=1 wn=2 fm=4 fn=1" "wm=1 wn=4 fm=1 fn=1"}; do
            echo "NUVEC_LLM_MATMUL_ROWS=64 NUVEC_MATMUL_TC=$tc" | tee -a "$OUT/batchsweep.txt"
            if [ "$tc" = default ]; then tcv=; else tcv=$tc; fi
            NUVEC_LLM_MATMUL_ROWS=64 NUVEC_MATMUL_TC=$tcv ./build/nuvec bench llm --model "$f" -p 512 -n 128 --batch 64 |
                grep -E '^ +64 ' | tee -a "$OUT/batchsweep.txt" || status=1
        done
        [ "${SWEEP_TRACE:-1}" = 0 ] && continue
        NUVEC_TRACE=/tmp/trace-prefill.json ./build/nuvec bench llm --model "$f" -p 512 -n 16 >/dev/null || status=1
        python3 bench/trace_table.py /tmp/trace-prefill.json --rows 40 >"$OUT/trace-prefill.txt" || status=1
        NUVEC_TRACE=/tmp/trace-batch.json ./build/nuvec bench llm --model "$f" -p 128 -n 16 --batch 4 >/dev/null || status=1
        python3 bench/trace_table.py /tmp/trace-batch.json --rows 40 >"$OUT/trace-batch4.txt" || status=1 ;;
    memory)
        # Issue 29: peak device memory at 4,096 positions, each sampled by nvidia-smi every 20 ms
        # (memory.used above the idle level before the run): nuvec generate (F16 KV cache of 4,096
        # positions, a 3,967-token prompt, 128 tokens) beside llama-bench -p 3967 -n 128 (n_ctx
        # p + n, F16 cache, flash attention); nuvec's own accounting (device_memory of --json) and
        # llama.cpp's buffer sizes from its log beside them. Then 7B F16's weights against the file's
        # size, and bench llm's load to first token. LLM_DIR as llm's.
        d=${LLM_DIR:-/tmp}
        ids=$(python3 -c 'import random; r = random.Random(0); print(",".join(str(r.randrange(3, 32000)) for _ in range(3967)))')
        for shape in llama-7b llama-8b; do
            f=$d/$shape-q4_0.gguf
            [ -f "$f" ] || ./build/nuvec make-gguf --shape "$shape" --dtype q4_0 --out "$f" || status=1
            gpu_peak "nuvec generate $shape q4_0, 4096 positions" ./build/nuvec generate "$f" --tokens "$ids" -n 128 \
                --kv-f16 --max-positions 4096 --json >"$J/memory-nuvec-$shape.json" || status=1
            python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); m=d["device_memory"]; print("nuvec accounting MiB:", {k: round(v / 2**20, 1) for k, v in m.items()}, "tokens", d["tokens"])' \
                "$J/memory-nuvec-$shape.json" >>"$OUT/memory.txt"
            gpu_peak "llama.cpp $shape q4_0, 4095 positions" bash bench/llamacpp.sh run "$f" -p 3967 -n 128 -r 1 --no-ttft \
                >"$J/memory-llamacpp-$shape.json" || status=1
            grep -E "buffer size|KV.*size|llama_kv_cache" .peer/run.log | sed 's/^/llama.cpp log: /' | sort -u >>"$OUT/memory.txt"
        done
        f=$d/llama-7b-f16.gguf
        [ -f "$f" ] || ./build/nuvec make-gguf --shape llama-7b --dtype f16 --out "$f" || status=1
        gpu_peak "nuvec bench llm llama-7b f16, 641 positions" ./build/nuvec bench llm --model "$f" --json \
            >"$J/memory-nuvec-f16.json" || status=1
        python3 -c 'import json,os,sys; d=json.load(open(sys.argv[1])); m=d["device_memory"]; s=os.path.getsize(sys.argv[2]); print("7B F16: weights %d B, file %d B, weights / file %.4f; device open to first token %.0f ms, model open to first token %.0f ms" % (m["weights"], s, m["weights"] / s, d["device_open_to_first_token_ms"], d["open_to_first_token_ms"]))' \
            "$J/memory-nuvec-f16.json" "$f" >>"$OUT/memory.txt"
        cat "$OUT/memory.txt" ;;
    kquant)
        # Issues 23 and 25's benchmark: make-gguf F16 files (KQ_SHAPES, default llama-7b; any
        # make-gguf shape: qwen2.5-7b qwen3-8b gemma2-9b) quantized by llama-quantize
        # (bench/llamacpp.sh quantize; KQ_TYPES, default Q4_K_M Q5_K_M Q6_K), then nuvec bench
        # llm (and its decode after 1 token, tg128's depth) beside llama-bench on each (pp512,
        # tg128; KQ_REPS repetitions, default 3), and for
        # each of KQ_DEPTHS decode after that many tokens (nuvec -p DEPTH, llama-bench -d DEPTH);
        # each quantized file removed after its runs, and each F16 one unless KQ_KEEP_F16 (disk).
        d=${LLM_DIR:-/tmp}
        for shape in ${KQ_SHAPES:-llama-7b}; do
            f=$d/$shape-f16.gguf
            [ -f "$f" ] || ./build/nuvec make-gguf --shape "$shape" --dtype f16 --out "$f" || status=1
            for t in ${KQ_TYPES:-Q4_K_M Q5_K_M Q6_K}; do
                q=$d/$shape-$t.gguf
                start=$(date +%s)
                bash bench/llamacpp.sh quantize "$f" "$q" "$t" || { status=1; continue; }
                echo "=== $shape $t (llama-quantize $(( $(date +%s) - start )) s, $(stat -c %s "$q") bytes)" | tee -a "$OUT/kquant.txt"
                ./build/nuvec bench llm --model "$q" | tee -a "$OUT/kquant.txt" || status=1
                # llama-bench's tg128 decodes from an empty cache; the line above after 512 tokens
                echo "nuvec at tg128's depth (-p 1):" | tee -a "$OUT/kquant.txt"
                ./build/nuvec bench llm --model "$q" -p 1 -n 128 | grep -E "decode \(" | tee -a "$OUT/kquant.txt" || status=1
                bash bench/llamacpp.sh run "$q" -r "${KQ_REPS:-3}" --no-ttft | tee "$J/kquant-llamacpp-$shape-$t.json" | tee -a "$OUT/kquant.txt" || status=1
                for depth in ${KQ_DEPTHS:-}; do # decode after DEPTH tokens: nuvec's prompt of DEPTH, llama-bench -d
                    echo "=== $shape $t at depth $depth" | tee -a "$OUT/kquant.txt"
                    ./build/nuvec bench llm --model "$q" -p "$depth" -n 128 | tee -a "$OUT/kquant.txt" || status=1
                    bash bench/llamacpp.sh run "$q" -p 512 -n 128 -d "$depth" -r "${KQ_REPS:-3}" --no-ttft |
                        tee "$J/kquant-llamacpp-$shape-$t-d$depth.json" | tee -a "$OUT/kquant.txt" || status=1
                done
                rm -f "$q"
            done
            [ -n "${KQ_KEEP_F16:-}" ] || rm -f "$f" # (disk: a 9B F16 file is 18 GB)
        done ;;
    upload)
        f=${UPLOAD_FILE:-/tmp/nuvec-upload.safetensors}
        rm -f "$f"
        ./build/nuvec bench upload --size "${UPLOAD_SIZE:-16G}" --file "$f" --keep | tee -a "$OUT/upload.txt" || status=1
        # the move's tuning: import threads x chunk size
        for t in 4 8 12; do for c in 2 4 8 16; do
            ./build/nuvec load "$f" --to-gpu --quiet --threads $t --chunk $c | grep moved | tee -a "$OUT/upload.txt"
        done; done
        if python3 -c 'import torch, safetensors, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
            python3 bench/torch_upload.py "$f" --json >"$J/torch_upload.json" || status=1
            python3 bench/torch_upload.py "$f" | tee -a "$OUT/upload.txt" || status=1
        else
            echo "SKIP torch upload: no python3 with torch, safetensors and CUDA" | tee -a "$OUT/upload.txt"
        fi
        rm -f "$f" ;;
    trace)
        ./build/nuvec bench dispatch --json >"$J/dispatch-off.json" || status=1
        NUVEC_TRACE="$J/dispatch-trace.json" ./build/nuvec bench dispatch --json >"$J/dispatch-on.json" || status=1
        ./build/nuvec demo --steps 8 --size 256000000 --trace "$J/demo-trace.json" >"$J/demo-trace.log" 2>&1 || status=1
        python3 - "$J" <<'PY' | tee "$OUT/trace.txt"
import json, sys, collections
J = sys.argv[1]
off, on = (json.load(open(f"{J}/dispatch-{k}.json"))["results"] for k in ("off", "on"))
print("NUVEC_TRACE overhead on `nuvec bench dispatch` (nuvec's numbers, trace off -> on):")
for pat in ("dependent", "independent"):
    for m, unit in (("record_ns_per_dispatch", "ns"), ("gpu_us_per_dispatch", "us")):
        a, b = off[pat][m]["nuvec"], on[pat][m]["nuvec"]
        print(f"  {pat:12s} {m:24s} {a:10.3f} -> {b:10.3f} {unit}  ({b / a:.2f}x)")
for name in ("demo-trace", "dispatch-trace"):
    doc = json.load(open(f"{J}/{name}.json"))
    ev = doc["traceEvents"] if isinstance(doc, dict) else doc
    names = collections.Counter(e.get("name") for e in ev if e.get("ph") == "X")
    tids = collections.Counter((e.get("pid"), e.get("tid")) for e in ev if e.get("ph") == "X")
    print(f"{name}.json: {len(ev)} events, {len(tids)} tracks; most common: {names.most_common(6)}")
PY
        gzip -c "$J/demo-trace.json" >"$OUT/demo-trace.json.gz" ;;
    capture)
        rm -rf /tmp/rd && mkdir -p /tmp/rd
        for f in .gl/rd/*.deb; do dpkg -x "$f" /tmp/rd; done
        mkdir -p /usr/share/vulkan/implicit_layer.d
        sed 's|"/usr/lib/librenderdoc.so"|"/tmp/rd/usr/lib/librenderdoc.so"|' \
            /tmp/rd/usr/share/vulkan/implicit_layer.d/renderdoc_capture.json \
            >/usr/share/vulkan/implicit_layer.d/renderdoc_capture.json
        # RenderDoc's libraries that the machine lacks are added beside the system's (none
        # replaced): renderdoccmd also runs from programs whose environment RenderDoc rewrites.
        cp -n /tmp/rd/usr/lib/x86_64-linux-gnu/*.so* /usr/lib/x86_64-linux-gnu/ 2>/dev/null; ldconfig
        export PATH=/tmp/rd/usr/bin:$PATH
        export LD_LIBRARY_PATH=/tmp/rd/usr/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
        rm -f "$J/demo.rdc"
        { ./build/nuvec demo --steps 4 --size 64000000 --capture "$J/demo.rdc" 2>&1 | tail -4
          ls -l "$J/demo.rdc" && renderdoccmd convert -f "$J/demo.rdc" -o "$J/demo.xml" -c xml >/dev/null 2>&1 &&
              echo "renderdoccmd opened the capture: $(grep -c 'vkCmdDispatch' "$J/demo.xml") vkCmdDispatch, labels: $(grep -o 'mul_f32[^<]*' "$J/demo.xml" | head -2 | tr '\n' ' ')"
          NUVEC_VALIDATION=1 CMOCKA_MESSAGE_OUTPUT=stdout ./build/tests/test_capture 2>&1 | tail -12; } | tee "$OUT/capture.txt"
        grep -q "PASSED" "$OUT/capture.txt" || status=1 ;;
    ops)
        ./build/nuvec bench ops --json >"$J/ops.json" || status=1
        ./build/nuvec bench ops | tee "$OUT/ops.txt" || status=1
        if python3 -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
            python3 bench/torch_ops.py --json >"$J/torch_ops.json" || status=1
            python3 bench/torch_ops.py | tee -a "$OUT/ops.txt" || status=1
        else
            echo "SKIP torch ops: no python3 with torch and CUDA" | tee -a "$OUT/ops.txt"
        fi ;;
    matvec)
        # The matrix-vector products' knobs (kernels/matvec/matvec.comp), a setting a run.
        for k in ${MATVEC_SWEEP:-"local=128 rows=2 unroll=4" "local=256 rows=2 unroll=2" "local=128 rows=4 unroll=2" \
                  "local=256 rows=4 unroll=2" "local=128 rows=1 unroll=8" "local=256 rows=1 unroll=4" \
                  "local=512 rows=2 unroll=2" "local=64 rows=4 unroll=4" "local=128 rows=8 unroll=1"}; do
            echo "NUVEC_MATVEC=$k" | tee -a "$OUT/matvec.txt"
            NUVEC_MATVEC="$k" ./build/nuvec bench ops --filter matvec | grep -E '^matvec' | tee -a "$OUT/matvec.txt" || status=1
        done ;;
    soa)
        # Q4_0_SOA's matrix-vector kernel (kernels/matvec/matvec_soa.glsl, NUVEC_MATVEC_SOA), a
        # setting a run, beside Q4_0's dot path once; SOA_SWEEP replaces the list.
        ./build/nuvec bench ops --filter "matvec Q4_0 " | grep -E '^matvec' | tee -a "$OUT/soa.txt" || status=1
        for k in ${SOA_SWEEP:-"local=512 groups=264" "local=1024 groups=264" "local=256 groups=528" \
                  "local=512 groups=0" "local=1024 groups=132" "local=512 groups=264 unroll=2" \
                  "local=512 groups=264 unroll=8" "local=512 groups=264 rows=2 unroll=2" \
                  "local=512 groups=264 split=1" "local=512 groups=264 split=2" "local=512 groups=264 split=4" \
                  "local=256 groups=0 unroll=2"}; do
            echo "NUVEC_MATVEC_SOA=$k" | tee -a "$OUT/soa.txt"
            NUVEC_MATVEC_SOA="$k" ./build/nuvec bench ops --filter Q4_0_SOA | grep -E '^matvec' | tee -a "$OUT/soa.txt" || status=1
        done ;;
    random)
        start=$(date +%s)
        NUVEC_VALIDATION=1 ./build/tests/test_random --programs "${RANDOM_PROGRAMS:-100000}" --seed "${RANDOM_SEED:-0}" >"$J/random.log" 2>&1
        rc=$?
        { tail -5 "$J/random.log"; echo "rc=$rc, $(( $(date +%s) - start )) s"; } | tee "$OUT/random.txt"
        [ $rc = 0 ] || status=1 ;;
    esac
done
exit $status
