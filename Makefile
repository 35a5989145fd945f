# nuvec: the two set-up commands are `make demo` and `make test` (README). Each installs the
# Debian packages it needs (apt-get; sudo when not root), configures, builds, then runs.
#   make demo     nuvec info + the self-check, on the default device (lavapipe without a GPU)
#   make test     the whole suite twice (a normal build and an ASan+UBSan build), then fuzz-smoke
#   make tsan     the thread tests under ThreadSanitizer
#   make fuzz-smoke  each libFuzzer target for 60 s from its seed corpus (part of `make test`)
#   make fuzz     the long run: FUZZ_RUNS executions in all, over JOBS processes
#   make bench    the benchmarks (bench/, `nuvec bench ...`)
#   make install  cmake --install (PREFIX=/usr/local)

PACKAGES := cmake make gcc libc6-dev pkg-config libvulkan1 libvulkan-dev mesa-vulkan-drivers \
            vulkan-validationlayers glslc libcjson-dev libcmocka-dev librenderdoc-dev renderdoccmd \
            clang libclang-rt-14-dev g++ python3 patch xz-utils debian-archive-keyring
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
PREFIX ?= /usr/local
JOBS ?= $(shell nproc)
CTEST_ARGS := --output-on-failure --timeout 900 -j$(JOBS)
# Each build's suite ends with one line, "<build>: N passed, M failed", after the reasons for
# each failure (tests/run_suite.sh).
SUITE = tests/run_suite.sh

.PHONY: all deps deps-fuzz build demo test test-normal test-asan tsan fuzz-build fuzz-smoke fuzz bench install clean

all: build

deps:
	@missing=$$(for p in $(PACKAGES); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	    echo "make: installing Debian packages:" $$missing; \
	    $(SUDO) apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@JOBS=$(JOBS) deps/deps.sh normal

build/CMakeCache.txt:
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNUVEC_WERROR=ON -DCMAKE_INSTALL_PREFIX=$(PREFIX)

build: deps build/CMakeCache.txt
	cmake --build build -j$(JOBS)

demo: build
	./build/nuvec info
	./build/nuvec demo

test: test-normal test-asan fuzz-smoke

test-normal: build
	$(SUITE) build normal $(CTEST_ARGS)

build-asan/CMakeCache.txt:
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DNUVEC_WERROR=ON -DNUVEC_SANITIZE=address,undefined

test-asan: deps build-asan/CMakeCache.txt
	cmake --build build-asan -j$(JOBS)
	$(SUITE) build-asan asan $(CTEST_ARGS)

build-tsan/CMakeCache.txt:
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DNUVEC_WERROR=ON -DNUVEC_SANITIZE=thread

tsan: deps build-tsan/CMakeCache.txt
	cmake --build build-tsan -j$(JOBS)
	$(SUITE) build-tsan tsan $(CTEST_ARGS) -R 'test_(threads|allocator|guard|commands|hazard|trace|mapped)'

# Fuzzing: corpora and crash reproducers stay under build-fuzz/ (the seeds are copied there).
FUZZ_RUNS ?= 10000000
FUZZ := ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ./fuzz_safetensors \
        -dict=../fuzz/safetensors.dict -artifact_prefix=crash- -print_final_stats=1

# The fuzz targets' SPIRV-Tools (ASan, coverage) must be there before CMake looks for it.
deps-fuzz: deps
	@JOBS=$(JOBS) deps/deps.sh fuzz

build-fuzz/CMakeCache.txt: | deps-fuzz
	cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNUVEC_FUZZ=ON \
	      -DNUVEC_TESTS=OFF -DNUVEC_WERROR=ON

fuzz-build: deps-fuzz build-fuzz/CMakeCache.txt
	cmake --build build-fuzz -j$(JOBS) --target fuzz_safetensors

fuzz-smoke: fuzz-build
	rm -rf build-fuzz/smoke && mkdir -p build-fuzz/smoke && cp fuzz/corpus/safetensors/* build-fuzz/smoke/
	cd build-fuzz && $(FUZZ) -max_total_time=60 smoke

fuzz: fuzz-build
	mkdir -p build-fuzz/corpus && cp fuzz/corpus/safetensors/* build-fuzz/corpus/
	cd build-fuzz && rm -f fuzz-*.log && $(FUZZ) -runs=$$(( $(FUZZ_RUNS) / $(JOBS) )) -jobs=$(JOBS) -workers=$(JOBS) corpus; \
	    rc=$$?; grep -H -E 'DONE|^Done|crash|ERROR' fuzz-*.log; exit $$rc

bench: build
	./build/nuvec bench alloc
	./build/nuvec bench dispatch
	./build/nuvec bench submit
	./build/nuvec bench pipeline

install: build
	$(SUDO) cmake --install build

clean:
	rm -rf build build-asan build-tsan build-fuzz
