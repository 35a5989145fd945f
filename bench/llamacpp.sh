#!/usr/bin/env bash
# llama.cpp's Vulkan backend as the peer of `nuvec bench llm`, fetched and built at benchmark time.
# Nothing of llama.cpp (source or binaries, nor anything built from them) is committed: it all lives
# under .peer/ and .device/, both ignored by git.
#
# What comes from where (the npm registry, through `npm pack`; sha256 of both tarballs pinned below):
#   @node-llama-cpp/linux-x64-vulkan@3.22.1  llama.cpp built with its Vulkan backend (on Ubuntu 22.04,
#       GCC 11.4): libllama.vulkan.v0.5.0.so, libggml.vulkan.v0.5.0.so, libggml-base.so,
#       libggml-vulkan.so, libllama-common.so and libggml-cpu-<variant>.so. Their build info says
#       llama.cpp commit 0ad4a86 (checked).
#   node-llama-cpp@3.22.1  the source of that release as llama/gitRelease.bundle, a git bundle of ONE
#       squashed commit (de3ff81, "## SQUASHED ##", upstream subject "llama.cpp : bump version to
#       0.5.0 (#29333)"): the upstream id 0ad4a86 is not in it, so the check is the shipped
#       binaries' build commit plus the pinned bundle commit and release tag v0.5.0.
# Licences: llama.cpp and ggml are MIT (Copyright (c) 2023-2026 The ggml authors), node-llama-cpp is
# MIT (Copyright (c) 2024 Gilad S.); both LICENSE files go into the device tarball with the binaries.
#
# What is built: the real llama-bench (tools/llama-bench/llama-bench.cpp + main.cpp of the bundle,
# headers from include/, ggml/include/, common/, vendor/), compiled with Debian 12's g++ and linked
# against the SHIPPED libllama-common.so (same commit, same libstdc++ ABI) and libllama/libggml; and
# bench/peer/llamacpp_ttft.c (ours), which times process start to the first generated token, the
# load-time comparison that llama-bench does not make. Both get rpath $ORIGIN: ggml loads its
# Vulkan and CPU backends from the binary's folder.
#
# And llama-server (tools/server of the same bundle: its sources, tools/mtmd's, which it links, and
# the vendored cpp-httplib), for bench/serve: the `server` step builds it the same way into
# .peer/dist, against the same shipped libraries; its web UI is left out (the bundle's
# scripts/ui-assets.cmake with the UI build and the download off: no assets).
#
# Usage: bench/llamacpp.sh fetch | build | server | package | all | run MODEL.gguf [-p 512] [-n 128]
#        [-r 5] | ttft MODEL.gguf [-p 1] | batched MODEL.gguf [-npp 512] [-ntg 128] [-npl 1,4,16,64]
#        | quantize IN.gguf OUT.gguf TYPE
#   fetch    npm pack both packages into .peer/npm (NU_PEER_TGZ_DIR=DIR takes the .tgz files from
#            DIR instead), check their sha256, unpack, clone the bundle into .peer/llama.cpp
#   build    compile into .peer/dist/ (llama-bench, llama-batched-bench, llama-quantize,
#            llamacpp_ttft + the needed .so files + licences + MANIFEST)
#   server   compile llama-server into .peer/dist/ (after build; several minutes on a few cores)
#   package  .device/llamacpp-peer.tar.xz from .peer/dist (prints its size; the device tool
#            carries 64 MiB in all)
#   all      fetch, build, package
#   run      llama-bench pp/tg (all layers on the GPU, flash attention on, -o jsonl) and
#            llamacpp_ttft, then ONE JSON line on stdout:
#            {"peer":"llama.cpp","commit":"0ad4a86","model":...,"pp_tokens":512,"pp_tps":...,
#             "pp_tps_sd":...,"pp_tps_median":...,"pp_tps_max":...,"tg_tokens":128,"tg_tps":...,
#             "tg_tps_sd":...,"tg_tps_median":...,"tg_tps_max":...,"ttft_ms":...,"ttft":{...}}
#            (_tps is llama-bench's average over -r repetitions; _median and _max are of its
#            per-repetition samples, steadier where one slow repetition drags the average)
#            Uses .peer/dist, or unpacks .device/llamacpp-peer.tar.xz there first (the device
#            machine: carry .device). --no-ttft skips the load timing. llama.cpp's logs go to
#            .peer/run.log. ttft_ms is process start to the first generated token for a 1-token
#            prompt, taken AFTER llama-bench ran: the driver's shader cache (Mesa's, NVIDIA's) then
#            holds ggml's pipelines, so it is a warm start; a cold one is `ttft` alone on a fresh
#            machine (or with MESA_SHADER_CACHE_DISABLE=true / __GL_SHADER_DISK_CACHE=0).
#   quantize llama-quantize IN OUT TYPE (Q4_K_M, Q5_K_M, Q6_K, ...: llama.cpp's per-tensor mix, no
#            importance matrix), for the K-quant benchmarks
#   ttft     llamacpp_ttft alone: its JSON line (load phases in ms; -p N random prompt tokens).
#            The Vulkan loader (libvulkan.so.1) must be installed; on lavapipe set
#            GGML_VK_VISIBLE_DEVICES=0 (ggml skips CPU devices otherwise).
# A && B || die is meant (die exits); '$ORIGIN' is literal for the linker.
# shellcheck disable=SC2015,SC2016
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEER=${NU_PEER_DIR:-$ROOT/.peer} # NU_PEER_DIR: another folder for all of it
DIST=$PEER/dist
TARBALL=$ROOT/.device/llamacpp-peer.tar.xz

VERSION=3.22.1
COMMIT=0ad4a86
BUNDLE_COMMIT=de3ff815ea7d559ee917f063901b8986f038abc6
BIN_PKG=@node-llama-cpp/linux-x64-vulkan
BIN_TGZ=node-llama-cpp-linux-x64-vulkan-$VERSION.tgz
BIN_SHA256=e10577190fc4bd1649d3b655588e5c7a85fc6b6dbf7136fee596cbe9e25521e7
SRC_PKG=node-llama-cpp
SRC_TGZ=node-llama-cpp-$VERSION.tgz
SRC_SHA256=a0d9dd80eacd2ab1cfe71aee57ac8a806487fd70b3d2a38fbec637752d9e5c5f
BINS=$PEER/bin-pkg/package/bins/linux-x64-vulkan
SRC=$PEER/llama.cpp
# The libraries the two binaries need. Of the CPU variants (ggml scores each it finds and loads the
# best one this CPU runs), the generic x64, haswell (AVX2) and sapphirerapids (AVX-512, AMX) cover
# the Xeons of GPU hosts; the CPU backend only does what the GPU is not given.
LIBS=(libllama.vulkan.v0.5.0.so libggml.vulkan.v0.5.0.so libggml-base.so libggml-vulkan.so
      libllama-common.so libggml-cpu-x64.so libggml-cpu-haswell.so libggml-cpu-sapphirerapids.so)

die() { echo "llamacpp.sh: $*" >&2; exit 1; }
need() { command -v "$1" >/dev/null 2>&1 || die "needs '$1' ($2)"; }

fetch() {
    need tar "to unpack the npm tarballs"
    need git "to clone the source bundle"
    need sha256sum "to check the tarballs"
    mkdir -p "$PEER/npm"
    local spec tgz sum f
    for spec in "$BIN_PKG@$VERSION $BIN_TGZ $BIN_SHA256" "$SRC_PKG@$VERSION $SRC_TGZ $SRC_SHA256"; do
        read -r -a f <<<"$spec"
        set -- "${f[@]}"
        tgz=$PEER/npm/$2
        if [ ! -f "$tgz" ]; then
            if [ -n "${NU_PEER_TGZ_DIR:-}" ]; then
                [ -f "$NU_PEER_TGZ_DIR/$2" ] || die "NU_PEER_TGZ_DIR=$NU_PEER_TGZ_DIR has no $2"
                cp "$NU_PEER_TGZ_DIR/$2" "$tgz.part"
            else
                need npm "npm pack fetches the packages from the npm registry"
                echo "llamacpp.sh: npm pack $1" >&2
                (cd "$PEER/npm" && npm pack --silent "$1" >/dev/null) || die "npm pack $1 failed"
                [ -f "$PEER/npm/$2" ] || die "npm pack $1 did not write $2"
                mv "$PEER/npm/$2" "$tgz.part"
            fi
            sum=$(sha256sum "$tgz.part" | cut -d' ' -f1)
            [ "$sum" = "$3" ] || { rm -f "$tgz.part"; die "$2 has sha256 $sum, expected $3 (not the release this script pins)"; }
            mv "$tgz.part" "$tgz"
        fi
    done
    rm -rf "$PEER/bin-pkg" "$PEER/src-pkg"
    mkdir -p "$PEER/bin-pkg" "$PEER/src-pkg"
    tar -xzf "$PEER/npm/$BIN_TGZ" -C "$PEER/bin-pkg"
    # Only the bundle, the release info and the licence of the source package are needed.
    tar -xzf "$PEER/npm/$SRC_TGZ" -C "$PEER/src-pkg" package/llama/gitRelease.bundle \
        package/llama/llama.cpp.info.json package/LICENSE
    local lib
    for lib in "${LIBS[@]}"; do [ -f "$BINS/$lib" ] || die "$BIN_TGZ lacks bins/linux-x64-vulkan/$lib"; done
    # The binaries' build info (llama-bench prints it as build_commit) names the upstream commit.
    grep -aqx "$COMMIT" <(strings -n 7 "$BINS/libllama-common.so" 2>/dev/null || tr -c '[:print:]' '\n' <"$BINS/libllama-common.so") ||
        die "the shipped libllama-common.so does not carry build commit $COMMIT"
    grep -q '"tag": *"v0.5.0"' "$PEER/src-pkg/package/llama/llama.cpp.info.json" ||
        die "node-llama-cpp's llama.cpp.info.json does not name release v0.5.0"
    rm -rf "$SRC"
    git clone -q "$PEER/src-pkg/package/llama/gitRelease.bundle" "$SRC" 2>/dev/null ||
        die "git clone of the source bundle failed"
    local head
    head=$(git -C "$SRC" rev-parse HEAD)
    [ "$head" = "$BUNDLE_COMMIT" ] || die "the bundle's commit is $head, expected $BUNDLE_COMMIT (release v0.5.0 = upstream $COMMIT)"
    [ -f "$SRC/tools/llama-bench/llama-bench.cpp" ] && [ -f "$SRC/include/llama.h" ] ||
        die "the bundle lacks tools/llama-bench or include/llama.h"
    echo "llamacpp.sh: fetched llama.cpp $COMMIT (binaries: $BINS, source: $SRC)" >&2
}

build() {
    [ -f "$SRC/include/llama.h" ] && [ -d "$BINS" ] || die "nothing fetched: run '$0 fetch' first"
    need g++ "Debian 12's g++ builds llama-bench"
    need gcc "builds bench/peer/llamacpp_ttft.c"
    rm -rf "$DIST"
    mkdir -p "$DIST"
    local lib
    for lib in "${LIBS[@]}"; do cp "$BINS/$lib" "$DIST/"; done
    local inc=("-I$SRC/include" "-I$SRC/ggml/include")
    local link=("$DIST/libllama.vulkan.v0.5.0.so" "$DIST/libggml.vulkan.v0.5.0.so" "$DIST/libggml-base.so")
    echo "llamacpp.sh: compiling llama-bench (a minute or two)" >&2
    # NDEBUG as in llama.cpp's release builds (else llama-bench warns that asserts are enabled).
    g++ -std=c++17 -O2 -DNDEBUG "${inc[@]}" -I"$SRC/common" -I"$SRC/vendor" \
        "$SRC/tools/llama-bench/llama-bench.cpp" "$SRC/tools/llama-bench/main.cpp" \
        -o "$DIST/llama-bench" "$DIST/libllama-common.so" "${link[@]}" -pthread -Wl,-rpath,'$ORIGIN' ||
        die "llama-bench did not build against the shipped libraries"
    echo "llamacpp.sh: compiling llama-batched-bench" >&2
    g++ -std=c++17 -O2 -DNDEBUG "${inc[@]}" -I"$SRC/common" -I"$SRC/vendor" \
        "$SRC/tools/batched-bench/batched-bench.cpp" "$SRC/tools/batched-bench/main.cpp" \
        -o "$DIST/llama-batched-bench" "$DIST/libllama-common.so" "${link[@]}" -pthread -Wl,-rpath,'$ORIGIN' ||
        die "llama-batched-bench did not build against the shipped libraries"
    echo "llamacpp.sh: compiling llama-quantize" >&2
    g++ -std=c++17 -O2 -DNDEBUG "${inc[@]}" -I"$SRC/common" -I"$SRC/vendor" "$SRC/tools/quantize/quantize.cpp" \
        "$SRC/tools/quantize/main.cpp" \
        -o "$DIST/llama-quantize" "$DIST/libllama-common.so" "${link[@]}" -pthread -Wl,-rpath,'$ORIGIN' ||
        die "llama-quantize did not build against the shipped libraries"
    gcc -std=c11 -O2 -Wall -Wextra -D_POSIX_C_SOURCE=200809L "${inc[@]}" "$ROOT/bench/peer/llamacpp_ttft.c" \
        -o "$DIST/llamacpp_ttft" "${link[@]}" -Wl,-rpath,'$ORIGIN' || die "bench/peer/llamacpp_ttft.c did not build"
    cp "$SRC/LICENSE" "$DIST/LICENSE.llama.cpp"
    cp "$PEER/src-pkg/package/LICENSE" "$DIST/LICENSE.node-llama-cpp"
    {
        echo "llama.cpp $COMMIT (release v0.5.0) with its Vulkan backend, for nuvec's benchmarks."
        echo "Libraries: npm $BIN_PKG@$VERSION (unchanged). llama-bench: built from"
        echo "node-llama-cpp@$VERSION's llama/gitRelease.bundle (commit $BUNDLE_COMMIT) with $(g++ --version | head -1)."
        echo "llamacpp_ttft: nuvec's bench/peer/llamacpp_ttft.c. Licences: LICENSE.* (MIT)."
        echo
        (cd "$DIST" && sha256sum llama-bench llama-batched-bench llama-quantize llamacpp_ttft "${LIBS[@]}")
    } >"$DIST/MANIFEST"
    echo "llamacpp.sh: built $DIST" >&2
}

server() {
    [ -x "$DIST/llama-bench" ] || die "nothing built: run '$0 build' first"
    [ -f "$SRC/tools/server/server.cpp" ] && [ -f "$SRC/vendor/cpp-httplib/httplib.cpp" ] ||
        die "the bundle lacks tools/server or vendor/cpp-httplib"
    need cmake "runs the bundle's scripts/ui-assets.cmake"
    local work=$PEER/server-build
    rm -rf "$work"
    mkdir -p "$work/ui" "$work/obj"
    cmake -DUI_SOURCE_DIR="$SRC/tools/ui" -DUI_BINARY_DIR="$work/ui" -DLLAMA_SOURCE_DIR="$SRC" -DHF_ENABLED=OFF \
        -DBUILD_UI=OFF -DLLAMA_UI_GZIP=OFF -P "$SRC/scripts/ui-assets.cmake" >"$work/ui.log" 2>&1 ||
        { tail -n 20 "$work/ui.log" >&2; die "the bundle's ui-assets.cmake failed"; }
    [ -f "$work/ui/ui.cpp" ] || die "ui-assets.cmake wrote no ui.cpp"
    local srcs=("$SRC"/tools/server/server*.cpp "$SRC/tools/server/main.cpp" "$SRC/vendor/cpp-httplib/httplib.cpp"
                "$SRC"/tools/mtmd/mtmd*.cpp "$SRC/tools/mtmd/clip.cpp" "$SRC"/tools/mtmd/models/*.cpp "$work/ui/ui.cpp")
    # mtmd-helper hashes images with vendor/hash (where this bundle has it: hash.cpp over C sources, sha1.c C++)
    local csrcs=()
    if [ -f "$SRC/vendor/hash/hash.cpp" ]; then
        srcs+=("$SRC/vendor/hash/hash.cpp")
        csrcs=("$SRC"/vendor/hash/*/*.c)
    fi
    local flags=(-std=c++17 -O2 -DNDEBUG -fPIC "-I$SRC/include" "-I$SRC/ggml/include" "-I$SRC/common" "-I$SRC/vendor"
                 "-I$SRC/tools/mtmd" "-I$SRC/tools/server" "-I$work/ui" "-I$SRC")
    echo "llamacpp.sh: compiling llama-server (${#srcs[@]} files; several minutes)" >&2
    local f objs=() jobs=${JOBS:-$(nproc)}
    for f in "${srcs[@]}"; do
        case $f in *mtmd-cli.cpp|*mtmd-helper-gen.cpp) continue ;; esac
        local o=$work/obj/$(echo "${f#"$SRC"/}" | tr '/' '_').o
        objs+=("$o")
        while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 0.2; done
        g++ "${flags[@]}" -c "$f" -o "$o" 2>>"$work/compile.log" &
    done
    for f in "${csrcs[@]}"; do
        local o=$work/obj/$(echo "${f#"$SRC"/}" | tr '/' '_').o
        objs+=("$o")
        local cc=(gcc) # its CMakeLists compiles sha1.c as C++ (it holds a namespace), the others as C
        [ "$(basename "$f")" = sha1.c ] && cc=(g++ -x c++ -std=c++17)
        "${cc[@]}" -O2 -DNDEBUG -fPIC -w "-I$SRC/vendor/hash" -c "$f" -o "$o" 2>>"$work/compile.log" &
    done
    wait
    for f in "${objs[@]}"; do [ -f "$f" ] || { tail -n 30 "$work/compile.log" >&2; die "llama-server: $f did not compile"; }; done
    g++ -o "$DIST/llama-server" "${objs[@]}" "$DIST/libllama-common.so" "$DIST/libllama.vulkan.v0.5.0.so" \
        "$DIST/libggml.vulkan.v0.5.0.so" "$DIST/libggml-base.so" -pthread -Wl,-rpath,'$ORIGIN' 2>>"$work/compile.log" ||
        { tail -n 30 "$work/compile.log" >&2; die "llama-server did not link against the shipped libraries"; }
    (cd "$DIST" && sha256sum llama-server) >>"$DIST/MANIFEST"
    echo "llamacpp.sh: built $DIST/llama-server" >&2
}

package() {
    [ -x "$DIST/llama-bench" ] || die "nothing built: run '$0 build' first"
    need xz "compresses the device tarball"
    mkdir -p "$(dirname "$TARBALL")"
    tar -C "$PEER" -cf - dist | xz -6 -T2 >"$TARBALL.part"
    mv "$TARBALL.part" "$TARBALL"
    local bytes
    bytes=$(wc -c <"$TARBALL")
    echo "llamacpp.sh: $TARBALL: $bytes bytes ($((bytes / 1048576)) MiB)" >&2
}

# The value of "KEY": in one line of llama-bench's jsonl output: num for numbers, str for strings
# (kept JSON-escaped as llama-bench wrote them).
num() { sed -n "s/.*\"$1\": *\([-0-9.eE+]*\),.*/\1/p" <<<"$2"; }
# The median and the largest of a llama-bench line's per-repetition tokens/s ("samples_ts"), as
# "MEDIAN MAX": its average can be pulled far down by one slow repetition (standard deviations
# of half the average were seen on the H100/H200 machines' prompts).
samples() {
    sed -n 's/.*"samples_ts": *\[\([^]]*\)\].*/\1/p' <<<"$1" | tr ',' '\n' | sed 's/ //g' | grep . | sort -g |
        awk '{ v[NR] = $1 } END { if (!NR) { print "null null"; exit } m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.2f %.2f\n", m, v[NR] }'
}
str() { sed -n "s/.*\"$1\": *\"\(\([^\"\\\\]\|\\\\.\)*\)\".*/\1/p" <<<"$2"; }

# Makes sure .peer/dist holds a build: unpacks the device tarball there when it does not.
ensure_dist() {
    [ -x "$DIST/llama-bench" ] && [ -x "$DIST/llama-batched-bench" ] && [ -x "$DIST/llama-quantize" ] &&
        [ -x "$DIST/llamacpp_ttft" ] && return 0
    [ -f "$TARBALL" ] || die "no build in $DIST and no $TARBALL: run '$0 all' first"
    mkdir -p "$PEER"
    xz -dc "$TARBALL" | tar -C "$PEER" -xf - || die "could not unpack $TARBALL"
}

# llamacpp_ttft's JSON line for MODEL with a prompt of N tokens; its logs go to .peer/run.log.
ttft_line() {
    # The stamp is taken just before exec, so the time includes loading the binary's libraries.
    NU_PEER_T0_NS=$(date +%s%N) "$DIST/llamacpp_ttft" "$1" -p "$2" 2>>"$PEER/run.log" ||
        { tail -n 20 "$PEER/run.log" >&2; die "llamacpp_ttft failed (log: $PEER/run.log)"; }
}

ttft() {
    [ $# -ge 1 ] || die "usage: $0 ttft MODEL.gguf [-p 1]"
    local model=$1 p=1
    shift
    if [ $# -gt 0 ]; then
        [ "$1" = -p ] && [ $# -eq 2 ] && [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -ge 1 ] ||
            die "ttft: the only option is -p PROMPT_TOKENS"
        p=$2
    fi
    [ -f "$model" ] || die "no model file '$model'"
    ensure_dist
    : >"$PEER/run.log"
    ttft_line "$model" "$p"
}

run() {
    [ $# -ge 1 ] || die "usage: $0 run MODEL.gguf [-p 512] [-n 128] [-r 5] [-d 0] [--no-ttft]"
    local model=$1 p=512 n=128 r=5 d=0 ttft=1
    shift
    while [ $# -gt 0 ]; do
        case $1 in
        -p|-n|-r)
            [ $# -ge 2 ] && [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -ge 1 ] || die "$1 wants a positive count"
            case $1 in -p) p=$2 ;; -n) n=$2 ;; -r) r=$2 ;; esac
            shift 2 ;;
        -d) # llama-bench's depth: pp and tg measured after this many tokens already in the cache
            [ $# -ge 2 ] && [[ $2 =~ ^[0-9]+$ ]] || die "-d wants a count of tokens"
            d=$2
            shift 2 ;;
        --no-ttft) ttft=0; shift ;;
        *) die "run: unknown option '$1'" ;;
        esac
    done
    [ -f "$model" ] || die "no model file '$model'"
    ensure_dist
    local log=$PEER/run.log out pp tg
    : >"$log"
    out=$("$DIST/llama-bench" -m "$model" -p "$p" -n "$n" -d "$d" -r "$r" -ngl 99 -fa 1 -o jsonl 2>>"$log") ||
        { tail -n 20 "$log" >&2; die "llama-bench failed (log: $log)"; }
    pp=$(grep '"n_gen": 0,' <<<"$out" | head -1)
    tg=$(grep '"n_prompt": 0,' <<<"$out" | head -1)
    [ -n "$pp" ] && [ -n "$tg" ] || { echo "$out" >&2; die "llama-bench printed no pp and tg results"; }
    local got
    got=$(str build_commit "$pp")
    [ "$got" = "$COMMIT" ] || die "llama-bench reports build commit '$got', expected $COMMIT"
    local tt="null" ttj="null"
    if [ "$ttft" = 1 ]; then
        ttj=$(ttft_line "$model" 1)
        tt=$(sed -n 's/.*"ttft_ms":\([0-9.]*\).*/\1/p' <<<"$ttj")
        [ -n "$tt" ] || die "llamacpp_ttft printed no ttft_ms: $ttj"
    fi
    local ppm tgm
    read -r -a ppm <<<"$(samples "$pp")"
    read -r -a tgm <<<"$(samples "$tg")"
    local name=${model//\\/\\\\}
    name=${name//\"/\\\"}
    printf '{"peer":"llama.cpp","commit":"%s","model":"%s","gpu":"%s","depth":%s,"pp_tokens":%s,"pp_tps":%s,"pp_tps_sd":%s,"pp_tps_median":%s,"pp_tps_max":%s,"tg_tokens":%s,"tg_tps":%s,"tg_tps_sd":%s,"tg_tps_median":%s,"tg_tps_max":%s,"repetitions":%s,"ttft_ms":%s,"ttft":%s}\n' \
        "$COMMIT" "$name" "$(str gpu_info "$pp")" "$d" "$p" "$(num avg_ts "$pp")" "$(num stddev_ts "$pp")" "${ppm[0]}" "${ppm[1]}" \
        "$n" "$(num avg_ts "$tg")" "$(num stddev_ts "$tg")" "${tgm[0]}" "${tgm[1]}" "$r" "$tt" "$ttj"
}

# llama-batched-bench: B sequences decoding at once (-npl), each with its own prompt of -npp tokens
# (not shared), -ntg tokens each; one JSON line a B on stdout ({"pp", "tg", "pl", "speed_pp",
# "speed_tg", ...}: speed_tg is its S_TG, aggregate decode tokens/s), as llama.cpp prints them.
batched() {
    [ $# -ge 1 ] || die "usage: $0 batched MODEL.gguf [-npp 512] [-ntg 128] [-npl 1,4,16,64]"
    local model=$1 npp=512 ntg=128 npl=1,4,16,64
    shift
    while [ $# -gt 0 ]; do
        case $1 in
        -npp|-ntg) [ $# -ge 2 ] && [[ $2 =~ ^[0-9]+$ ]] || die "$1 wants a count"
            [ "$1" = -npp ] && npp=$2 || ntg=$2; shift 2 ;;
        -npl) [ $# -ge 2 ] && [[ $2 =~ ^[0-9,]+$ ]] || die "-npl wants counts like 1,4,16"; npl=$2; shift 2 ;;
        *) die "batched: unknown option '$1'" ;;
        esac
    done
    [ -f "$model" ] || die "no model file '$model'"
    ensure_dist
    local log=$PEER/run.log biggest ctx
    : >"$log"
    biggest=$(tr ',' '\n' <<<"$npl" | sort -n | tail -1)
    ctx=$(( (npp + ntg) * biggest + 16 ))
    "$DIST/llama-batched-bench" -m "$model" -c "$ctx" -b 2048 -ub 512 -npp "$npp" -ntg "$ntg" -npl "$npl" \
        -ngl 99 -fa on --output-format jsonl 2>>"$log" | grep '^{' ||
        { tail -n 20 "$log" >&2; die "llama-batched-bench failed (log: $log)"; }
}

# llama-quantize IN OUT TYPE (llama.cpp's per-tensor mix for TYPE: Q4_K_M, Q5_K_M, Q6_K, ...,
# no importance matrix), on every core; its log goes to .peer/quantize.log.
quantize() {
    [ $# -eq 3 ] || die "usage: $0 quantize IN.gguf OUT.gguf TYPE"
    [ -f "$1" ] || die "no model file '$1'"
    ensure_dist
    "$DIST/llama-quantize" "$1" "$2" "$3" "$(nproc)" >"$PEER/quantize.log" 2>&1 ||
        { tail -n 20 "$PEER/quantize.log" >&2; die "llama-quantize failed (log: $PEER/quantize.log)"; }
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
fetch) fetch ;;
build) build ;;
server) server ;;
package) package ;;
all) fetch; build; package ;;
run) run "$@" ;;
ttft) ttft "$@" ;;
batched) batched "$@" ;;
quantize) quantize "$@" ;;
*) die "usage: $0 fetch | build | server | package | all | run MODEL.gguf [-p 512] [-n 128] [-r 5] [-d 0] [--no-ttft] | ttft MODEL.gguf [-p 1] | batched MODEL.gguf [-npp 512] [-ntg 128] [-npl 1,4,16,64] | quantize IN OUT TYPE" ;;
esac
