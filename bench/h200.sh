#!/usr/bin/env bash
# Runs nuvec on the device machine (an H200): the tests under validation, the demo, and the
# benchmarks, with a table at the end. The build comes along (carry: build .gl); .gl holds
# Debian's libvulkan1, libcjson1, libcmocka0 and vulkan-validationlayers packages (that
# machine has the NVIDIA driver but no Vulkan loader). Usage: bench/h200.sh [STEP...]
# Steps: info tests demo alloc dispatch submit pipeline cuda torch summary random (default: all;
# random takes RANDOM_PROGRAMS, default 100000, from RANDOM_SEED, default 0); gputests runs only
# the tests that do GPU work. Text results go to $OUT (or ./h200-out), at most 8
# files (what the device tool brings back); JSON goes to $OUT_JSON (default /tmp/h200-json). cuda builds bench/cuda_dispatch.cu with nvcc into a temporary folder;
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
steps=${*:-info tests demo alloc dispatch submit pipeline cuda torch summary random}
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
    random)
        start=$(date +%s)
        NUVEC_VALIDATION=1 ./build/tests/test_random --programs "${RANDOM_PROGRAMS:-100000}" --seed "${RANDOM_SEED:-0}" >"$J/random.log" 2>&1
        rc=$?
        { tail -5 "$J/random.log"; echo "rc=$rc, $(( $(date +%s) - start )) s"; } | tee "$OUT/random.txt"
        [ $rc = 0 ] || status=1 ;;
    esac
done
exit $status
