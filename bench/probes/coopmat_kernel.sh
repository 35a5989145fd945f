#!/usr/bin/env bash
# bench/probes/coopmat_kernel.sh OUTDIR: compiles bench/probes/coopmat_kernel.comp into one module per
# experiment (names: the switches, joined by +) for bench/probes/coopmat_kernel.c.
set -eu
out=$1
mkdir -p "$out"
g=build-deps/prefix/bin/glslang
while read -r name defs; do
    args=()
    for d in $defs; do args+=("-D$d"); done
    "$g" -V --target-env vulkan1.2 --quiet -Ikernels "${args[@]}" -o "$out/$name.spv" bench/probes/coopmat_kernel.comp
done <<'LIST'
base
fixed64 FIXED FIXED_BK=64u
fixed32 FIXED FIXED_BK=32u
direct DIRECT_OUT
fixed64+direct FIXED FIXED_BK=64u DIRECT_OUT
nostore NO_STORE
nobarrier NO_BARRIER
nostore+nobarrier NO_STORE NO_BARRIER
vecstore VEC_STORE
fixed64+direct+vecstore FIXED FIXED_BK=64u DIRECT_OUT VEC_STORE
LIST
ls "$out"
