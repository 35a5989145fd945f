#!/bin/sh
# Installs nuvec into a temporary prefix and builds the README example against it twice: with
# CMake's find_package(nuvec) and with pkg-config. Then runs both.
set -eu
src=$1
build=$2
prefix=$build/install-test
rm -rf "$prefix" "$build/consumer"
cmake --install "$build" --prefix "$prefix" >/dev/null
mkdir -p "$build/consumer/cmake"
cp "$build/readme_example.c" "$build/consumer/example.c"
cat >"$build/consumer/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.20)
project(consumer C)
find_package(nuvec REQUIRED)
add_executable(example example.c)
target_link_libraries(example PRIVATE nuvec::nuvec)
CMAKE
cmake -S "$build/consumer" -B "$build/consumer/cmake" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$build/consumer/cmake" >/dev/null
LD_LIBRARY_PATH="$prefix/lib:$prefix/lib/x86_64-linux-gnu" "$build/consumer/cmake/example"
libdir=$(ls -d "$prefix"/lib*/pkgconfig "$prefix"/lib/*/pkgconfig 2>/dev/null | head -n 1)
PKG_CONFIG_PATH=$libdir cc -std=c11 -o "$build/consumer/example-pc" "$build/consumer/example.c" \
    $(PKG_CONFIG_PATH=$libdir pkg-config --cflags --libs nuvec)
LD_LIBRARY_PATH="$prefix/lib:$prefix/lib/x86_64-linux-gnu" "$build/consumer/example-pc"
echo "install_consumer: find_package and pkg-config builds ran"
