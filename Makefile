# vrambench — build, test, bench, plots.
#
#   make                    build build/vrambench (with the cuda backend when nvcc is found)
#   make test               conformance and unit tests on the simulated device (installs
#                           chromium and Slurm when root: the report's and the fleet's tests)
#   make test-gpu           the conformance suite on the real GPU (and on tests' external allocator),
#                           and the one across devices on every pair of GPUs (tests/test_peers.c)
#   make plugin             build/libvrambench_torch.so: every strategy as a PyTorch pluggable allocator
#   make bench              every scenario x every allocator (GPU when present, else simulated)
#   make bench-scaling      replay (and with TUNE=1 tune) time against trace length on random
#                           traces whose live blocks keep growing (lab/bench-scaling.sh)
#   make check-sim          the newest committed GPU results re-run on the simulated device:
#                           lists cases whose memory figures differ (RESULTS=FILE... to name files)
#   make SANITIZER=address|undefined|thread test   (sim backend only unless CUDA=yes; see below)
#   make test PYTHON_TESTS=no  the C suites only (CI's ThreadSanitizer and clang runs)
#   make test CC=clang SANITIZER=undefined  the same with clang's UBSan (float-cast-overflow,
#                           nonnull-attribute, ... that gcc's misses); clang builds go to build-clang/
#   make fuzz               libFuzzer targets (tests/fuzz/, clang, ASan+UBSan), each run
#                           FUZZ_SECONDS (default 20) from the seed corpus tests/fuzz/corpus/
#   make CUDA=no            build without the cuda backend even when nvcc is there
#   make plots              PNGs in out/plots/ from your newest run under out/results/
#                           (or RESULTS=FILE [FILE2: compared], MICROBENCH=FILE,
#                           SEGMENTS=SCENARIO/ALLOCATOR, PLOTS_DIR=DIR; TUNE=FILE: the
#                           plot of a `vrambench tune` result as tune.png)
#   make docs               the docs' images and result pages from the committed results/
#   make lab                the investigation programs of lab/ (probes, fullgpu)
#
# A user's run writes under out/ (ignored by git): running the product never
# changes a tracked file. results/ holds the committed GPU results the docs cite.

CC ?= gcc
ifeq ($(origin CC),default)
CC := gcc
endif
PYTHON ?= python3
# The plots need matplotlib: Debian's python3-matplotlib belongs to
# /usr/bin/python3, which a pyenv or venv python3 earlier on PATH hides.
PLOT_PYTHON ?= $(if $(wildcard /usr/bin/python3),/usr/bin/python3,python3)
OUTPUT_DIR ?= out
PLOTS_DIR ?= $(OUTPUT_DIR)/plots
SANITIZER ?=
CUDA ?= auto
CUDA_HOME ?= /usr/local/cuda

# clang builds (make test CC=clang SANITIZER=undefined) get their own tree.
BUILD ?= build$(if $(filter clang%,$(notdir $(CC))),-clang)$(if $(SANITIZER),/$(SANITIZER))

CPPFLAGS += -D_GNU_SOURCE -MMD -MP -I.
# -O3 for the product: its replays and tune ran up to 8% faster than at -O2
# (docs/bench.md, "Replay speed"); the sanitizer builds stay at -O2.
CFLAGS ?= $(if $(SANITIZER),-O2,-O3) -g
CFLAGS += -std=c11 -Wall -Wextra -Werror
LDLIBS += -ljansson -lz -lm -lpthread -ldl

ifeq ($(SANITIZER),address)
CFLAGS += -fsanitize=address -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address
else ifeq ($(SANITIZER),undefined)
CFLAGS += -fsanitize=undefined -fno-sanitize-recover=all
LDFLAGS += -fsanitize=undefined
else ifeq ($(SANITIZER),thread)
CFLAGS += -fsanitize=thread -fno-omit-frame-pointer
LDFLAGS += -fsanitize=thread
else ifeq ($(SANITIZER),fuzzer)
# libFuzzer builds (make fuzz, clang only): the library instrumented for
# coverage, under ASan and UBSan; the fuzz targets link libFuzzer's main.
CFLAGS += -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
LDFLAGS += -fsanitize=fuzzer,address,undefined
else ifneq ($(SANITIZER),)
$(error SANITIZER must be address, undefined, thread or fuzzer, not '$(SANITIZER)')
endif

# ---- CUDA detection: nvcc on PATH or under CUDA_HOME, and the runtime header ----
NVCC := $(or $(shell command -v nvcc 2>/dev/null),$(wildcard $(CUDA_HOME)/bin/nvcc))
# Sanitizer builds leave the cuda backend out unless CUDA=yes forces it in:
# with a driver present, ASan's protected shadow gap collides with the CUDA
# driver's address reservations (cuInit / cudaGetDeviceCount then fail with
# out of memory) and libcuda's allocations at init read as leaks to
# LeakSanitizer (google/sanitizers issue 629). Those builds are for the sim
# tests in CI anyway. Forced in, run with ASAN_OPTIONS=protect_shadow_gap=0
# and a LeakSanitizer suppression for libcuda.
ifeq ($(filter auto yes no,$(CUDA)),)
$(error CUDA='$(CUDA)': auto (the default: the cuda backend when nvcc is found), yes or no)
endif
ifeq ($(CUDA),auto)
ifneq ($(SANITIZER),)
HAVE_CUDA := no
else
HAVE_CUDA := $(if $(and $(NVCC),$(wildcard $(CUDA_HOME)/include/cuda_runtime.h),$(wildcard base/device_cuda.c)),yes,no)
endif
else
HAVE_CUDA := $(CUDA)
endif
ifeq ($(HAVE_CUDA),yes)
CUDA_LIBDIR := $(firstword $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/lib))
CPPFLAGS += -DVB_HAVE_CUDA -I$(CUDA_HOME)/include
LDLIBS += -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcublas -lcudart -lstdc++
NVCCFLAGS ?= -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_90,code=compute_90
BUILD_KIND := cuda + sim backends
else
NO_CUDA_REASON := $(if $(SANITIZER),sanitizer builds leave CUDA out,no CUDA toolkit found)
BUILD_KIND := sim backend only ($(if $(filter auto,$(CUDA)),$(NO_CUDA_REASON),CUDA=$(CUDA)))
endif

# ---- sources ----
# The rooms, ground floor first (docs/design.md, "Layers"); a file includes
# only from its own room or one listed before it (build-aux/check-layers.sh).
ROOMS := base allocators plugin runtime scenarios app
LIB_SRC := $(filter-out app/main.c plugin/% $(if $(filter yes,$(HAVE_CUDA)),,base/device_cuda.c), \
             $(foreach room,$(ROOMS),$(wildcard $(room)/*.c)))
CU_SRC := $(if $(filter yes,$(HAVE_CUDA)),$(wildcard base/*.cu))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(CU_SRC:%.cu=$(BUILD)/obj/%.cu.o)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
# tests/external_test_alloc.c is a shared library of its own (below), not support code.
TEST_SUPPORT := $(filter-out $(TEST_SRC) tests/external_test_alloc.c,$(wildcard tests/*.c))
EXTERNAL_TEST_SO := $(BUILD)/tests/libvb_external_test.so
TEST_SUPPORT_OBJ := $(TEST_SUPPORT:%.c=$(BUILD)/obj/%.o)

.PHONY: all deps install test test-build test-gpu bench bench-scaling plots docs lab check-sim clean plugin fuzz fuzz-build
# Objects of test binaries are intermediate to make; keep them (no rebuild, no "rm" line).
.SECONDARY:
all: $(BUILD)/vrambench
	@echo "vrambench: built $(BUILD)/vrambench ($(BUILD_KIND))"

deps:
	@CC='$(CC)' build-aux/ensure-deps.sh build

# Objects depend on the flags they were built with: switching CUDA= or
# CFLAGS= rebuilds them instead of linking stale ones.
FLAGS_STAMP := $(BUILD)/flags
FLAGS_NOW := $(CC) $(CPPFLAGS) $(CFLAGS) $(NVCCFLAGS) $(HAVE_CUDA)
$(shell mkdir -p $(BUILD); [ "$$(cat $(FLAGS_STAMP) 2>/dev/null)" = '$(FLAGS_NOW)' ] || echo '$(FLAGS_NOW)' > $(FLAGS_STAMP))

# The commit `vrambench --version` and results' context.git_commit name,
# taken at build time ("-dirty" when the tree has changes; $VB_GIT_COMMIT for
# a copy without .git); main.o and context.o are rebuilt when it changes.
BUILD_COMMIT := $(if $(VB_GIT_COMMIT),$(VB_GIT_COMMIT),$(or $(shell git rev-parse --short=12 HEAD 2>/dev/null),unknown)$(if $(shell git status --porcelain --untracked-files=no 2>/dev/null | head -1),-dirty))
COMMIT_STAMP := $(BUILD)/commit
$(shell [ "$$(cat $(COMMIT_STAMP) 2>/dev/null)" = '$(BUILD_COMMIT)' ] || echo '$(BUILD_COMMIT)' > $(COMMIT_STAMP))
$(BUILD)/obj/app/main.o $(BUILD)/obj/app/context.o: $(COMMIT_STAMP)
$(BUILD)/obj/app/main.o $(BUILD)/obj/app/context.o: CPPFLAGS += -DVB_BUILD_COMMIT='"$(BUILD_COMMIT)"'

$(BUILD)/obj/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/%.cu.o: %.cu $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@echo "  NVCC    $<"
	@$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(BUILD)/libvrambench.a: $(LIB_OBJ)
	@rm -f $@
	@ar rcs $@ $^

$(BUILD)/vrambench: $(BUILD)/obj/app/main.o $(BUILD)/libvrambench.a
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# ---- lab/: investigation programs, apart from the product ----
# lab/probes/vm_calls.c: VM driver calls by kind on sim (the stitch trade-off data);
# lab/probes/drive_speed.c: one allocator's events per second on sim, without the replay around it;
# lab/probes/cache_footprint.c: what a random read costs as memory grows (docs/bench.md, Long traces);
# lab/harnesses/fullgpu.c: OOM on a truly full GPU (lab/gpu-session.sh fullgpu).
lab: $(BUILD)/lab/vm-calls $(BUILD)/lab/drive-speed $(BUILD)/lab/cache-footprint \
     $(if $(filter yes,$(HAVE_CUDA)),$(BUILD)/lab/fullgpu)

$(BUILD)/lab/vm-calls: $(BUILD)/obj/lab/probes/vm_calls.o $(BUILD)/libvrambench.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/lab/drive-speed: $(BUILD)/obj/lab/probes/drive_speed.o $(BUILD)/libvrambench.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/lab/cache-footprint: $(BUILD)/obj/lab/probes/cache_footprint.o
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS) -o $@ $^

# ---- the PyTorch plug-in: position-independent objects of the rooms it uses ----
PLUGIN_SRC := $(filter base/% allocators/%,$(LIB_SRC)) plugin/torch_plugin.c
PLUGIN_OBJ := $(PLUGIN_SRC:%.c=$(BUILD)/pic/%.o) $(CU_SRC:%.cu=$(BUILD)/pic/%.cu.o)
PLUGIN_SO := $(BUILD)/libvrambench_torch.so

$(BUILD)/pic/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@echo "  CC -fPIC $<"
	@$(CC) $(CPPFLAGS) $(CFLAGS) -fPIC -c $< -o $@

$(BUILD)/pic/%.cu.o: %.cu $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@echo "  NVCC -fPIC $<"
	@$(NVCC) $(NVCCFLAGS) -Xcompiler -fPIC -c $< -o $@

# Only vb_torch_* leave the library (plugin/exports.map), so its copies of
# vb_malloc & co. never bind to a host program's (vrambench loading it as
# external:) and the other way round. The CUDA runtime is linked statically
# (and kept local): PyTorch brings its own libcudart, maybe of another
# version, and loads it globally; CUDA runtimes share the driver's primary
# context, so streams and pointers pass between them.
PLUGIN_LDLIBS := $(patsubst -lcudart,-lcudart_static -lrt,$(LDLIBS))
$(PLUGIN_SO): $(PLUGIN_OBJ) plugin/exports.map
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS) -shared -Wl,--version-script=plugin/exports.map -Wl,-Bsymbolic -o $@ $(PLUGIN_OBJ) $(PLUGIN_LDLIBS)

ifeq ($(HAVE_CUDA),yes)
# A copy next to the Python module (ignored by git): `pip install .` and
# `make install` carry it, and vrambench.plugin finds it there.
plugin: $(PLUGIN_SO)
	@cp $(PLUGIN_SO) python/vrambench/libvrambench_torch.so
	@echo "vrambench: built $(PLUGIN_SO) (from Python: from vrambench import plugin; plugin.use(SPEC); python3 -m pip install --no-build-isolation . installs the module with it)"
else
plugin:
	@echo "vrambench: make plugin needs the cuda backend ($(BUILD_KIND))" >&2; exit 2
endif

# The external test allocator: cudaMalloc/cudaFree behind the pluggable ABI,
# found at run time, so it builds without CUDA (make test checks the sim refuses it).
$(EXTERNAL_TEST_SO): tests/external_test_alloc.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -fPIC -shared -o $@ $< -ldl

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(TEST_SUPPORT_OBJ) $(BUILD)/libvrambench.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcmocka

# Every test binary runs on the simulated device; VB_TEST_DEVICE=cuda moves
# the conformance suite onto the GPU (make test-gpu).
test: deps
	@PLOT_PYTHON='$(PLOT_PYTHON)' build-aux/ensure-deps.sh test
	@build-aux/ensure-deps.sh browser || echo "make test: no chromium: tests/test_report.py skips its browser checks" >&2
	@build-aux/ensure-deps.sh slurm || echo "make test: no Slurm: tests/test_fleet_slurm.py skips" >&2
	@build-aux/check-layers.sh $(ROOMS)
	@$(MAKE) --no-print-directory test-build
	@VRAMBENCH=$(BUILD)/vrambench VB_EXTERNAL_TEST_SO=$(EXTERNAL_TEST_SO) PYTHONPATH='$(CURDIR)/python' \
	    VB_MAKE_ARGS='CC=$(CC) SANITIZER=$(SANITIZER) CUDA=$(CUDA)' TEST_LOG_DIR=$(BUILD)/test-logs build-aux/run-tests.sh $(if $(filter no,$(PYTHON_TESTS)),,--python $(PLOT_PYTHON)) $(TEST_BIN)

# Everything make test runs, built (a recipe of its own keeps make quiet about
# targets that are up to date).
test-build: all $(TEST_BIN) $(EXTERNAL_TEST_SO)
	@:

test-gpu: deps
	@$(MAKE) --no-print-directory all $(BUILD)/tests/test_conformance $(BUILD)/tests/test_peers $(EXTERNAL_TEST_SO)
	VB_TEST_DEVICE=cuda $(BUILD)/tests/test_conformance
	VB_TEST_DEVICE=cuda VB_TEST_ALLOCATORS=external:$(abspath $(EXTERNAL_TEST_SO)) $(BUILD)/tests/test_conformance
	VB_TEST_DEVICE=cuda $(BUILD)/tests/test_peers

$(BUILD)/lab/fullgpu: $(BUILD)/obj/lab/harnesses/fullgpu.o $(BUILD)/libvrambench.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# ---- fuzz: libFuzzer targets tests/fuzz/fuzz_NAME.c, each run from its
# seed corpus tests/fuzz/corpus/NAME (copied: new inputs go under the build
# tree) for FUZZ_SECONDS; a crash, leak or UB report fails the target and
# leaves the input under $(FUZZ_BUILD)/crashes/.
FUZZ_SECONDS ?= 20
FUZZ_CC ?= clang
FUZZ_BUILD := build-clang/fuzzer
FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c))

fuzz:
	@CC='$(FUZZ_CC)' build-aux/ensure-deps.sh build && build-aux/ensure-deps.sh fuzz
	@$(MAKE) --no-print-directory CC='$(FUZZ_CC)' SANITIZER=fuzzer fuzz-build
	@build-aux/run-fuzz.sh $(FUZZ_BUILD) '$(FUZZ_SECONDS)' $(FUZZ_TARGETS)

fuzz-build: $(FUZZ_TARGETS:%=$(BUILD)/fuzz/%)

$(BUILD)/fuzz/%: $(BUILD)/obj/tests/fuzz/%.o $(BUILD)/libvrambench.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# ---- bench: every scenario x every allocator, plus the variants below ----
# Variants run besides every registered allocator; one whose allocator is not
# built in is skipped with a note. Edit here or override on the command line:
#   make bench BENCH_VARIANTS='caching[max_split_size_mb=512]' BENCH_REPETITIONS=5
BENCH_VARIANTS ?= caching[max_split_size_mb=256] caching[roundup_power2_divisions=4]
BENCH_REPETITIONS ?= 3
BENCH_MIN_TIME ?= 0.05
BENCH_DEVICE ?= auto
BENCH_OUT ?= $(OUTPUT_DIR)/results/{device}-{date}.json

# A value the recipe's shell would read as code (a quote, a dollar sign) or
# an empty one is refused with its name, as make install refuses such a
# PREFIX; the folder of BENCH_OUT is made only when it is under OUTPUT_DIR
# (the default out/results/), never an arbitrary one (/nonexistent/).
bench: deps
	@$(foreach v,BENCH_REPETITIONS BENCH_MIN_TIME BENCH_DEVICE BENCH_OUT,$(if $(strip $($(v))),,echo "make bench: error: $(v) is empty" >&2; exit 2;))
	@$(if $(findstring ',$(BENCH_OUT)$(BENCH_VARIANTS)$(BENCH_DEVICE))$(findstring ",$(BENCH_OUT)$(BENCH_VARIANTS)$(BENCH_DEVICE))$(findstring $$,$(BENCH_OUT)$(BENCH_VARIANTS)$(BENCH_DEVICE)),echo "make bench: error: BENCH_OUT and BENCH_VARIANTS and BENCH_DEVICE cannot hold a quote or a dollar sign (' \" \$$)" >&2; exit 2,:)
	@$(MAKE) --no-print-directory all
	@$(if $(filter $(OUTPUT_DIR)/%,$(BENCH_OUT)),mkdir -p '$(dir $(BENCH_OUT))',:)
	@set -f; allocators=all; \
	for variant in $(BENCH_VARIANTS); do \
	    base=$${variant%%\[*}; \
	    if $(BUILD)/vrambench list allocators | grep -q "^$$base "; then allocators="$$allocators,$$variant"; \
	    else echo "bench: skipping $$variant ($$base is not built in)" >&2; fi; \
	done; \
	$(BUILD)/vrambench run --scenario all --allocator "$$allocators" --device $(BENCH_DEVICE) \
	    --repetitions $(BENCH_REPETITIONS) --min-time $(BENCH_MIN_TIME) --out '$(BENCH_OUT)'

# Events x live blocks: replay (TUNE=1: and tune) seconds and events/s as a
# random trace grows (EVENTS=, ALLOCATORS=, MAX_SIZE=, SEED=; see the script).
bench-scaling: all
	@PYTHON='$(PYTHON)' lab/bench-scaling.sh $(BUILD)/vrambench

# Every case of GPU result files (run, replay, claims) re-run on the simulated
# device; each case whose memory figures differ is listed, and an
# undocumented difference fails (docs/sim-differences.md). By default the newest
# file of each kind and device under results/; files made before the memory
# pass, sim and microbench files, and replays whose trace is not here (some
# stitch replays' traces are not committed) are skipped with a note. A replay's
# trace path is found from any directory (the results file's folder up to the
# repository root); with every case skipped it fails (exit 2: nothing checked).
check-sim: all
	$(BUILD)/vrambench check-sim $(if $(RESULTS),$(RESULTS),--newest $(wildcard results/*.json results/*/*.json results/*.json.gz results/*/*.json.gz))

# The product's Python package (python/vrambench), run from the checkout.
PY_RUN = PYTHONPATH='$(CURDIR)/python' $(PLOT_PYTHON)

# Your newest run under $(OUTPUT_DIR)/results/ (by its context date; claims
# and microbench files are not run results) unless RESULTS= names files.
# TUNE=FILE alone (no run yet) draws only the tune plot.
plots:
	@PLOT_PYTHON='$(PLOT_PYTHON)' build-aux/ensure-deps.sh plots
	@if [ -z '$(RESULTS)' ] && ! ls $(OUTPUT_DIR)/results/*.json >/dev/null 2>&1; then \
	    if [ -n '$(TUNE)' ]; then exit 0; fi; \
	    echo "make plots: error: no run under $(OUTPUT_DIR)/results/ yet: run 'make bench' first, or name files with RESULTS=FILE" >&2; exit 2; \
	else \
	    echo "$(PY_RUN) -m vrambench.plots $(or $(RESULTS),--latest $(OUTPUT_DIR)/results) --out-dir $(PLOTS_DIR) ..."; \
	    $(PY_RUN) -m vrambench.plots $(or $(RESULTS),--latest $(OUTPUT_DIR)/results) --out-dir $(PLOTS_DIR) \
	        $(if $(MICROBENCH),--microbench $(MICROBENCH)) $(if $(SEGMENTS),--segments '$(SEGMENTS)'); \
	fi
	$(if $(TUNE),@mkdir -p $(PLOTS_DIR) && $(PY_RUN) -m vrambench.plots.tune $(TUNE) --out $(PLOTS_DIR)/tune.png)

# The docs' images and generated pages, from the committed results/ only:
# docs/img/, docs/results/<device>.md and the README's headline block
# (python/vrambench/docs_pages.py; tests/test_docs_pages.py fails when they
# are out of step with results/).
docs:
	$(PY_RUN) -m vrambench.docs_pages
	@PLOT_PYTHON='$(PLOT_PYTHON)' build-aux/ensure-deps.sh plots
	$(PY_RUN) -m vrambench.plots --latest results --out-dir docs/img
	@torch_ab=$$(ls -t results/torch-ab-*.json 2>/dev/null | head -1); \
	if [ -n "$$torch_ab" ]; then $(PY_RUN) -m vrambench.plots.torch_ab "$$torch_ab" --out docs/img/torch-ab.png; fi

# ---- install: the CLI, the plug-in and its Python module under PREFIX ----
#   make install PREFIX=/opt/vrambench [DESTDIR=staging]
# bin/vrambench; lib/libvrambench_torch.so (cuda builds); the package
# vrambench (plots, torch2trace, the plug-in's module, with the library beside
# it) in PREFIX's site-packages (PYTHON's posix_prefix scheme) and in
# share/vrambench/python, where `vrambench tune` finds torch2trace.
PREFIX ?= /usr/local
INSTALL_ROOT = $(DESTDIR)$(PREFIX)
PY_SITE = $(shell $(PYTHON) -c "import sysconfig; print(sysconfig.get_path('purelib', 'posix_prefix', {'base': '$(PREFIX)', 'platbase': '$(PREFIX)'}))" 2>/dev/null)

install: all $(if $(filter yes,$(HAVE_CUDA)),plugin)
	@$(if $(findstring ',$(PREFIX)$(DESTDIR))$(findstring ",$(PREFIX)$(DESTDIR))$(findstring $$,$(PREFIX)$(DESTDIR)),echo "make install: error: PREFIX and DESTDIR cannot hold a quote or a dollar sign (' \" \$$)" >&2; exit 2,:)
	@test -n '$(PY_SITE)' || { echo "make install: error: $(PYTHON) cannot tell where Python packages go under $(PREFIX)" >&2; exit 2; }
	install -d '$(INSTALL_ROOT)/bin' '$(INSTALL_ROOT)/share/vrambench/python' '$(INSTALL_ROOT)/share/vrambench/docs/data' '$(DESTDIR)$(PY_SITE)'
	install -m 755 $(BUILD)/vrambench '$(INSTALL_ROOT)/bin/vrambench'
	install -m 644 docs/data/sim-differences.json '$(INSTALL_ROOT)/share/vrambench/docs/data/sim-differences.json'
	$(if $(filter yes,$(HAVE_CUDA)),install -d '$(INSTALL_ROOT)/lib' && install -m 755 $(PLUGIN_SO) '$(INSTALL_ROOT)/lib/libvrambench_torch.so')
	@for dest in '$(INSTALL_ROOT)/share/vrambench/python' '$(DESTDIR)$(PY_SITE)'; do \
	    rm -rf "$$dest/vrambench" && mkdir -p "$$dest/vrambench/plots" && \
	    install -m 644 python/vrambench/*.py "$$dest/vrambench/" && \
	    install -m 644 python/vrambench/plots/*.py "$$dest/vrambench/plots/" && \
	    { [ ! -f python/vrambench/libvrambench_torch.so ] || install -m 755 python/vrambench/libvrambench_torch.so "$$dest/vrambench/"; } || exit 1; \
	done
	@echo "vrambench: installed under $(INSTALL_ROOT): bin/vrambench$(if $(filter yes,$(HAVE_CUDA)),$(comma) lib/libvrambench_torch.so); the Python package in $(PY_SITE) (on your path if $(PREFIX) is your Python's prefix; else PYTHONPATH=$(PY_SITE))"

comma := ,

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
