# nuvec: the two set-up commands are `make demo` and `make test` (README). Each installs the
# Debian packages it needs (apt-get; sudo when not root), configures, builds, then runs.
#   make demo     nuvec info + the self-check, on the default device (lavapipe without a GPU)
#   make test     the whole suite twice: a normal build and an ASan+UBSan build
#   make tsan     the thread tests under ThreadSanitizer
#   make bench    the benchmarks (bench/, `nuvec bench ...`)
#   make install  cmake --install (PREFIX=/usr/local)

PACKAGES := cmake make gcc libc6-dev pkg-config libvulkan1 libvulkan-dev mesa-vulkan-drivers \
            vulkan-validationlayers glslc libcjson-dev libcmocka-dev librenderdoc-dev renderdoccmd
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
PREFIX ?= /usr/local
JOBS ?= $(shell nproc)
CTEST := ctest --output-on-failure --timeout 900 -j$(JOBS)

.PHONY: all deps build demo test test-normal test-asan tsan bench install clean

all: build

deps:
	@missing=$$(for p in $(PACKAGES); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	    echo "make: installing Debian packages:" $$missing; \
	    $(SUDO) apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

build/CMakeCache.txt:
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNUVEC_WERROR=ON -DCMAKE_INSTALL_PREFIX=$(PREFIX)

build: deps build/CMakeCache.txt
	cmake --build build -j$(JOBS)

demo: build
	./build/nuvec info
	./build/nuvec demo

test: test-normal test-asan

test-normal: build
	cd build && $(CTEST)

build-asan/CMakeCache.txt:
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DNUVEC_WERROR=ON -DNUVEC_SANITIZE=address,undefined

test-asan: deps build-asan/CMakeCache.txt
	cmake --build build-asan -j$(JOBS)
	cd build-asan && $(CTEST)

build-tsan/CMakeCache.txt:
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DNUVEC_WERROR=ON -DNUVEC_SANITIZE=thread

tsan: deps build-tsan/CMakeCache.txt
	cmake --build build-tsan -j$(JOBS)
	cd build-tsan && $(CTEST) -R 'test_(threads|allocator|guard|commands|hazard|trace)'

bench: build
	./build/nuvec bench alloc
	./build/nuvec bench dispatch
	./build/nuvec bench submit
	./build/nuvec bench pipeline

install: build
	$(SUDO) cmake --install build

clean:
	rm -rf build build-asan build-tsan
