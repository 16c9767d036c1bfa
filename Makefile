# minigrad: `make demo` runs the main job, `make test` builds and runs the tests.
# Each target installs what it needs on a fresh Debian/Ubuntu machine (fmt, doctest,
# nlohmann-json).
BUILD ?= build
SAN_BUILD ?= build-sanitize
TSAN_BUILD ?= build-tsan
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build test consumer demo sanitize tsan bench bench-cpu gpu-check clean

all: build

# fmt and doctest from the distribution, installed only where missing.
deps:
	@missing=""; \
	for p in libfmt-dev doctest-dev nlohmann-json3-dev; do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# A project of its own (tests/consumer) built against minigrad as a user would: through
# the installed package (find_package) and through add_subdirectory; then run.
consumer: build
	BUILD="$(BUILD)" JOBS="$(JOBS)" scripts/check-consumer

# The main job: train the MLP sample (on the GPU where one is present, else the CPU).
demo: build
	$(BUILD)/train_mlp

# The tests under AddressSanitizer + UndefinedBehaviorSanitizer, leaks included.
sanitize: deps
	cmake -S . -B $(SAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DMINIGRAD_SANITIZE=ON -DMINIGRAD_CUDA=OFF \
	  -DMINIGRAD_BUILD_SAMPLES=OFF
	cmake --build $(SAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(SAN_BUILD) --output-on-failure -j $(JOBS)

# The tests under ThreadSanitizer: two threads backpropagating into one leaf, random numbers
# drawn from two threads, and everything else run as usual.
tsan: deps
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMINIGRAD_TSAN=ON -DMINIGRAD_CUDA=OFF \
	  -DMINIGRAD_BUILD_SAMPLES=OFF
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 ctest --test-dir $(TSAN_BUILD) --output-on-failure -j $(JOBS)

bench: build
	$(BUILD)/bench_overhead

# The CPU kernels against LibTorch's (where libtorch-dev is installed; never needed by the
# build or the tests), on 1 thread and on every core: a table, and the JSON rows in OUT
# (default bench/results/cpu-<date>.jsonl). OUT below is gpu-check's default, so it is
# passed on only when given (make bench-cpu OUT=rows.jsonl).
bench-cpu: deps
	$(if $(filter-out file,$(origin OUT)),OUT="$(OUT)") BUILD="$(BUILD)" CMAKE_FLAGS="$(CMAKE_FLAGS)" \
	  JOBS="$(JOBS)" bench/run-cpu-compare

# The GPU round, on the GPU machine (no network, no apt: it never calls `deps`). fmt and
# doctest come from .deps/, filled beforehand by scripts/fetch-deps where there is network.
# Builds with CUDA (sm_90a), runs all tests, compute-sanitizer, the benchmarks and the
# PyTorch comparison; logs and the results JSON go to $(OUT), a summary is printed last.
OUT ?= gpu-out
gpu-check:
	OUT="$(OUT)" scripts/gpu-check

clean:
	rm -rf $(BUILD) $(SAN_BUILD) $(TSAN_BUILD) build-consumer
