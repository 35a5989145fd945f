# nuvec: the two set-up commands are `make demo` and `make test` (README). Each installs the
# Debian packages it needs (apt-get; sudo when not root), configures, builds, then runs.
#   make demo     nuvec info + the self-check, on the default device (lavapipe without a GPU)
#   make test     the whole suite twice (a normal build and an ASan+UBSan build), then fuzz-smoke
#   make tsan     the thread tests under ThreadSanitizer
#   make fuzz-smoke  each libFuzzer target for 30 s from its seeds (part of `make test`)
#   make fuzz     the long run: FUZZ_RUNS executions of each target, over JOBS processes
#   make bench    the benchmarks (bench/, `nuvec bench ...`)
#   make install  cmake --install (PREFIX=/usr/local)

# npm: Debian's package only where no npm is on PATH (NodeSource's nodejs carries its own).
PACKAGES := cmake make gcc libc6-dev pkg-config python3 libvulkan1 libvulkan-dev mesa-vulkan-drivers \
            vulkan-validationlayers glslc libcjson-dev libcmocka-dev librenderdoc-dev renderdoccmd libpcre2-dev \
            clang libclang-rt-14-dev g++ python3 patch xz-utils debian-archive-keyring \
            libmicrohttpd-dev chromium nodejs python3-jinja2
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
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done; \
	    command -v npm >/dev/null || echo npm); \
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
	$(SUITE) build-tsan tsan $(CTEST_ARGS) -R 'test_(threads|allocator|buffer|guard|commands|hazard|trace|mapped|graph)'

# Fuzzing: one libFuzzer target per parser of untrusted input (fuzz/fuzz_<target>.c, seeds in
# fuzz/corpus/<target>/, an optional fuzz/<target>.dict). Corpora and crash reproducers stay
# under build-fuzz/ (the seeds are copied there). `make fuzz FUZZ_TARGETS=kernel` runs one.
FUZZ_TARGETS ?= safetensors gguf kernel llm_tokenizer llm_template serve_request
FUZZ_RUNS ?= 10000000
FUZZ_SMOKE_SECONDS ?= 30
FUZZ_ENV := ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
fuzz_args = $$([ -f $(CURDIR)/fuzz/$(1).dict ] && echo -dict=$(CURDIR)/fuzz/$(1).dict) \
            -artifact_prefix=$(CURDIR)/build-fuzz/crash-$(1)- -print_final_stats=1

# The fuzz targets' SPIRV-Tools (ASan, coverage) must be there before CMake looks for it.
deps-fuzz: deps
	@JOBS=$(JOBS) deps/deps.sh fuzz

build-fuzz/CMakeCache.txt: | deps-fuzz
	cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNUVEC_FUZZ=ON \
	      -DNUVEC_TESTS=OFF -DNUVEC_WERROR=ON

fuzz-build: deps-fuzz build-fuzz/CMakeCache.txt
	cmake --build build-fuzz -j$(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))

# Each target for FUZZ_SMOKE_SECONDS from its seeds: fuzz/corpus/<target>/ and what the build
# writes to build-fuzz/seeds-<target>/ (the kernel target's: SPIR-V compiled by glslc).
fuzz-smoke: fuzz-build
	@set -e; for t in $(FUZZ_TARGETS); do \
	    rm -rf build-fuzz/smoke-$$t && mkdir -p build-fuzz/smoke-$$t; \
	    for s in fuzz/corpus/$$t build-fuzz/seeds-$$t; do [ ! -d $$s ] || cp $$s/* build-fuzz/smoke-$$t/; done; \
	    echo "fuzz-smoke: fuzz_$$t for $(FUZZ_SMOKE_SECONDS) s"; \
	    (cd build-fuzz && $(FUZZ_ENV) ./fuzz_$$t $(call fuzz_args,$$t) -max_total_time=$(FUZZ_SMOKE_SECONDS) smoke-$$t); \
	done

# The long run: FUZZ_RUNS executions of each target over JOBS processes (logs in
# build-fuzz/logs-<target>/, crash reproducers build-fuzz/crash-<target>-*).
fuzz: fuzz-build
	@set -e; for t in $(FUZZ_TARGETS); do \
	    mkdir -p build-fuzz/corpus-$$t; \
	    for s in fuzz/corpus/$$t build-fuzz/seeds-$$t; do [ ! -d $$s ] || cp $$s/* build-fuzz/corpus-$$t/; done; \
	    mkdir -p build-fuzz/logs-$$t && rm -f build-fuzz/logs-$$t/fuzz-*.log; \
	    (cd build-fuzz/logs-$$t && $(FUZZ_ENV) ../fuzz_$$t $(call fuzz_args,$$t) \
	        -runs=$$(( $(FUZZ_RUNS) / $(JOBS) )) -jobs=$(JOBS) -workers=$(JOBS) ../corpus-$$t) || rc=$$?; \
	    grep -H -E 'DONE|^Done|stat::number_of_executed_units|crash|ERROR' build-fuzz/logs-$$t/fuzz-*.log || true; \
	    [ -z "$$rc" ] || exit $$rc; \
	done

bench: build
	./build/nuvec bench alloc
	./build/nuvec bench dispatch
	./build/nuvec bench submit
	./build/nuvec bench pipeline
	./build/nuvec bench ops

install: build
	$(SUDO) cmake --install build

clean:
	rm -rf build build-asan build-tsan build-fuzz
