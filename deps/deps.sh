#!/bin/sh
# deps/deps.sh: libraries nuvec needs newer than Debian 12 ships, built from Debian 13
# (trixie)'s source packages into prefixes under build-deps/ (ignored by git).
#
#   deps/deps.sh [normal|fuzz]   (`make deps` runs `normal`, `make fuzz-build` runs `fuzz`)
#
# Why: nuvec validates every kernel with SPIRV-Tools' validator before a driver sees it, and
# Debian 12's SPIRV-Tools rejects the cooperative-matrix capability (CooperativeMatrixKHR,
# 6022) that tensor-core kernels use; trixie's (2025.1) accepts it.
#
# How: a private apt configuration under build-deps/apt/ (its own deb-src list for trixie,
# lists, cache) leaves the machine's apt configuration for binary packages alone. `apt-get
# update` checks trixie's InRelease against Debian's archive keyring (debian-archive-keyring;
# the index is signed by the bookworm and trixie archive keys, so Debian 12's keyring verifies
# it), and `apt-get source --download-only` checks every file it downloads against the
# SHA-256 sums of that signed index. The files are unpacked as dpkg-source does for format
# 3.0 (quilt): the .orig tarball, Debian's debian/ tarball over it, debian/patches/series
# applied in order (not through dpkg-source, which needs the .dsc: some mirrors lack them).
# Then only what nuvec needs is built with cmake into
#   build-deps/prefix/       (gcc, PIC, Release: the libraries nuvec links)
#   build-deps/prefix-fuzz/  (clang with ASan and libFuzzer coverage: the fuzz targets')
# Each prefix has a stamp naming what it was built from; a prefix whose stamp matches this
# script is left alone (no network), so running it again costs nothing.
#
# glslang 15 (Debian 13's `glslang`, normal variant only: build-deps/prefix/bin/glslang): the
# GLSL compiler for kernels that use GLSL extensions Debian 12's glslc (glslang 11.13) lacks:
# GL_EXT_integer_dot_product (4x8-bit integer dot products, core SPIR-V 1.6 / Vulkan 1.3) and
# GL_KHR_cooperative_matrix. The other kernels stay on glslc (CMakeLists.txt chooses per kernel).
# It is built without its optimizer (ENABLE_OPT=OFF: drivers optimize the SPIR-V they get).
#
# Vulkan headers 1.4.309 (Debian 13's, from the vulkan-loader source package, which carries them;
# both variants: build-deps/prefix*/include/vulkan): Debian 12's 1.3.239 lack
# VK_KHR_cooperative_matrix and VK_KHR_shader_bfloat16. Headers only; the loader stays Debian 12's.
#
# Adding a library: `fetch_source PACKAGE` (optionally with an upstream-version prefix to insist
# on), a build_ function like build_spirv_tools, and a line in the main part below. The stamp
# covers this script, so the prefixes are rebuilt.
set -eu

variant=${1:-normal}
case $variant in
normal | fuzz) ;;
*) echo "deps.sh: unknown variant '$variant' (normal or fuzz)" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
top=$root/build-deps
jobs=${JOBS:-$(nproc)}
if [ "$variant" = normal ]; then prefix=$top/prefix; else prefix=$top/prefix-fuzz; fi
suite=trixie
keyring=/usr/share/keyrings/debian-archive-keyring.gpg

# What the stamp records: this script (how) and the variant.
self_hash=$(sha256sum "$0" | cut -d' ' -f1)
want_stamp="$variant $self_hash"
if [ -f "$prefix/stamp" ] && [ "$(head -n 1 "$prefix/stamp")" = "$want_stamp" ]; then
    exit 0
fi

mkdir -p "$top"
# One run at a time (make may start the normal and fuzz builds together).
exec 9>"$top/.lock"
flock 9
if [ -f "$prefix/stamp" ] && [ "$(head -n 1 "$prefix/stamp")" = "$want_stamp" ]; then
    exit 0
fi
start=$(date +%s)

say() { echo "deps: $*"; }

# ---- Debian source packages ------------------------------------------------------------

apt_dir=$top/apt
apt_opts() {
    echo "-o Dir::Etc::SourceList=$apt_dir/sources.list -o Dir::Etc::SourceParts=$apt_dir/sources.list.d" \
         "-o Dir::State::Lists=$apt_dir/lists -o Dir::Cache=$apt_dir/cache" \
         "-o Dir::Etc::Preferences=$apt_dir/preferences -o Dir::Etc::PreferencesParts=$apt_dir/preferences.d" \
         "-o APT::Sandbox::User=root -o Acquire::Languages=none -o Debug::NoLocking=1"
}

# The private index of trixie's sources, fetched once per run of this script.
apt_ready=
apt_update() {
    [ -n "$apt_ready" ] && return 0
    if [ ! -r "$keyring" ]; then
        echo "deps: $keyring is missing: install debian-archive-keyring" >&2
        exit 1
    fi
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/sources.list.d" \
             "$apt_dir/preferences.d"
    : >"$apt_dir/preferences"
    echo "deb-src [signed-by=$keyring] http://deb.debian.org/debian $suite main" >"$apt_dir/sources.list"
    say "apt-get update (private deb-src list for $suite under build-deps/apt)"
    # shellcheck disable=SC2046
    apt-get $(apt_opts) -qq update
    apt_ready=1
}

# fetch_source PACKAGE [UPSTREAM_VERSION_PREFIX] [orig-only]: unpacks trixie's source of
# PACKAGE into build-deps/src/PACKAGE-VERSION and sets $source_dir. With orig-only, only the
# upstream tarball is taken (for packages whose Debian changes are packaging only).
fetch_source() {
    pkg=$1
    want=${2:-}
    only=${3:-}
    apt_update
    # shellcheck disable=SC2046
    version=$(apt-cache $(apt_opts) showsrc "$pkg" | sed -n 's/^Version: //p' | head -n 1)
    if [ -z "$version" ]; then
        echo "deps: $suite has no source package $pkg" >&2
        exit 1
    fi
    upstream=${version#*:}
    upstream=${upstream%-*}
    case $upstream in
    "$want"*) ;;
    *) echo "deps: $suite's $pkg is $version, not the $want this script was written for" >&2; exit 1 ;;
    esac
    source_dir=$top/src/$pkg-$version
    [ -f "$source_dir/.unpacked" ] && return 0
    dl=$top/downloads/$pkg-$version
    rm -rf "$dl" "$source_dir"
    mkdir -p "$dl" "$source_dir"
    say "apt-get source --download-only $pkg=$version"
    # shellcheck disable=SC2046
    (cd "$dl" && apt-get $(apt_opts) -qq source --download-only --tar-only "$pkg=$version" >/dev/null)
    if [ "$only" != orig-only ]; then
        # shellcheck disable=SC2046
        (cd "$dl" && apt-get $(apt_opts) -qq source --download-only --diff-only "$pkg=$version" >/dev/null)
    fi
    orig=$(ls "$dl"/*.orig.tar.* | head -n 1)
    tar -xf "$orig" -C "$source_dir" --strip-components=1
    if [ "$only" != orig-only ]; then
        rm -rf "$source_dir/debian"
        tar -xf "$(ls "$dl"/*.debian.tar.* | head -n 1)" -C "$source_dir"
        if [ -f "$source_dir/debian/patches/series" ]; then
            # Lines are patch names, optionally followed by patch options (-pN); # starts a comment.
            sed -e 's/#.*//' "$source_dir/debian/patches/series" | while read -r p opts; do
                [ -n "$p" ] || continue
                say "  applying debian/patches/$p"
                patch -s -d "$source_dir" ${opts:--p1} -i "$source_dir/debian/patches/$p"
            done
        fi
    fi
    echo "$pkg $version" >"$source_dir/.unpacked"
}

# ---- SPIRV-Tools: the static library with the validator ----------------------------------

build_spirv_tools() {
    fetch_source spirv-headers 1.6.1+1.4.309 orig-only
    headers=$source_dir
    headers_version=$version
    fetch_source spirv-tools 2025.1
    tools=$source_dir
    tools_version=$version
    if [ "$variant" = normal ]; then
        set -- -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++
    else
        flags="-fsanitize=address,fuzzer-no-link -fno-omit-frame-pointer -gline-tables-only"
        set -- -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ "-DCMAKE_C_FLAGS=$flags" \
               "-DCMAKE_CXX_FLAGS=$flags"
    fi
    b=$top/spirv-tools-$variant
    rm -rf "$b"
    say "building SPIRV-Tools $tools_version ($variant) with SPIRV-Headers $headers_version"
    cmake -S "$tools" -B "$b" -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
          -DSPIRV-Headers_SOURCE_DIR="$headers" -DBUILD_SHARED_LIBS=OFF -DSPIRV_TOOLS_BUILD_STATIC=ON \
          -DSPIRV_SKIP_TESTS=ON -DSPIRV_SKIP_EXECUTABLES=ON -DSPIRV_WERROR=OFF -DSPIRV_BUILD_FUZZER=OFF \
          "$@" >"$top/spirv-tools-$variant.log" 2>&1 ||
        { tail -n 30 "$top/spirv-tools-$variant.log" >&2; exit 1; }
    cmake --build "$b" -j"$jobs" --target SPIRV-Tools-static >>"$top/spirv-tools-$variant.log" 2>&1 ||
        { tail -n 30 "$top/spirv-tools-$variant.log" >&2; exit 1; }
    mkdir -p "$prefix/lib" "$prefix/include/spirv-tools"
    cp "$b/source/libSPIRV-Tools.a" "$prefix/lib/"
    cp "$tools/include/spirv-tools/libspirv.h" "$prefix/include/spirv-tools/"
    echo "spirv-tools $tools_version, spirv-headers $headers_version" >>"$prefix/stamp.new"
    rm -rf "$b" # the build tree is not needed again (a rebuild starts clean)
}

# ---- glslang 15: the compiler of the kernels that need newer GLSL --------------------------

build_glslang() {
    fetch_source glslang 15. orig-only # Debian's patches link the system SPIRV-Tools (2022.4)
    src=$source_dir
    b=$top/glslang-build
    rm -rf "$b"
    say "building glslang $version (the glslang compiler only)"
    cmake -S "$src" -B "$b" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ \
          -DENABLE_OPT=OFF -DGLSLANG_TESTS=OFF -DENABLE_HLSL=OFF -DBUILD_EXTERNAL=OFF \
          -DENABLE_SPVREMAPPER=OFF -DGLSLANG_ENABLE_INSTALL=OFF -DBUILD_SHARED_LIBS=OFF \
          >"$top/glslang.log" 2>&1 || { tail -n 30 "$top/glslang.log" >&2; exit 1; }
    cmake --build "$b" -j"$jobs" --target glslang-standalone >>"$top/glslang.log" 2>&1 ||
        { tail -n 30 "$top/glslang.log" >&2; exit 1; }
    mkdir -p "$prefix/bin"
    cp "$b/StandAlone/glslang" "$prefix/bin/glslang"
    echo "glslang $version" >>"$prefix/stamp.new"
    rm -rf "$b"
}

# ---- Vulkan headers ------------------------------------------------------------------------

install_vulkan_headers() {
    fetch_source vulkan-loader 1.4.309 orig-only
    mkdir -p "$prefix/include"
    cp -r "$source_dir/vulkan-headers/include/vulkan" "$source_dir/vulkan-headers/include/vk_video" "$prefix/include/"
    echo "vulkan headers $version" >>"$prefix/stamp.new"
}

rm -rf "$prefix"
mkdir -p "$prefix"
echo "$want_stamp" >"$prefix/stamp.new"
install_vulkan_headers
build_spirv_tools
[ "$variant" = normal ] && build_glslang
mv "$prefix/stamp.new" "$prefix/stamp"
say "build-deps/$(basename "$prefix") ready in $(($(date +%s) - start)) s: $(tail -n +2 "$prefix/stamp" | tr '\n' ' ')"
