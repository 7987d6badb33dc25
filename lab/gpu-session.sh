#!/bin/bash
# One GPU session's work, in stages that each fit a 10-minute device command.
# Run from the repository root on the GPU machine, with OUT naming a folder
# whose files come back; files later stages need are kept in $KEEP too
# (default /tmp/vrambench-keep, alive while the machine is held):
#   lab/gpu-session.sh check    build, make test-gpu, microbench (JSON)
#   lab/gpu-session.sh torch    PyTorch reference: claims measurements and
#                                 training-loop traces (lab/harnesses/record_torch_traces.py,
#                                 every workload, into $KEEP/traces: tune and stitch
#                                 use them)
#   lab/gpu-session.sh torch-ab         make plugin; the conformance suite on the plug-in
#                                         loaded as external:; lab/harnesses/torch_ab.py on the
#                                         documents' workloads (training_cleanup,
#                                         dataloader_batches, empty_cache_loop) x every allocator
#   lab/gpu-session.sh torch-ab-resnet  the same for resnet50
#   lab/gpu-session.sh torch-ab-gpt2    the same for gpt2_train and gpt2_generate
#                                         (all three append to $KEEP/torch-ab-<device>-<date>.json,
#                                         copied to $OUT after each)
#   lab/gpu-session.sh bench    make bench; vrambench claims with every allocator
#                                 and, when recorded, the PyTorch column; the
#                                 fixture traces replayed with every allocator
#   lab/gpu-session.sh memcheck make test-gpu's suite under compute-sanitizer memcheck
#                                 with leak checking, one allocator at a time (the
#                                 intentional OOMs' API errors not reported; cudaMemGetInfo
#                                 comparisons skipped): $OUT/memcheck-summary.txt (errors,
#                                 leaks, suite per allocator), $OUT/memcheck-NAME.txt
#   lab/gpu-session.sh fullgpu  every strategy on a GPU filled to its last MiB from
#                                 outside the allocator (build/fullgpu, lab/harnesses/fullgpu.c):
#                                 OOM status, usable after, used memory back to baseline
#                                 (+-2 MiB); the table in $OUT/fullgpu.txt
#   lab/gpu-session.sh tune     records resnet50, gpt2, resnet18_varres and bert_amp, runs
#                                 `vrambench tune` on each at this GPU's capacity,
#                                 and checks replay --snapshot pickles with
#                                 PyTorch's torch.cuda._memory_viz
#   lab/gpu-session.sh tune-check  (after tune) each workload for real under the
#                                 recommended setting and four others, fresh process
#                                 each: predicted against real peak reserved
#                                 (lab/harnesses/tune_check.py)
#   lab/gpu-session.sh fit-check  will it fit (issue 23): lab/harnesses/fit_check.py records five workloads
#                                 of its own under four settings, tunes each trace, and runs each again,
#                                 fresh process each, under set_per_process_memory_fraction at tune's
#                                 min_capacity_bytes P and P + 64 MiB, at the interval's low end L
#                                 (min_capacity_bytes_min) when L < P, L - 2 MiB and L - 64 MiB (and the
#                                 async backend at its limit, its pool's peak against tune's interval); what
#                                 a job holds besides PyTorch's memory (the GPU overhead). The build and the
#                                 check take under 9 minutes: $OUT/fit-check-DATE.json and .md, the traces
#                                 and PyTorch runs in $OUT/fit-check-traces.tar.gz
#   lab/gpu-session.sh stitch   times the driver's VM calls by handle size
#                                 (lab/probes/probe_driver.c: probe-driver-DATE.txt),
#                                 records the torch workloads (resnet50, gpt2,
#                                 bert_amp, generate, generate_short, two_stream),
#                                 replays them, the fixture traces (tests/fixtures/traces,
#                                 tests/fixtures/torch) and tests/fixtures/stitch
#                                 with caching, expandable and stitch (default;
#                                 with stitched ranges; with 2-4 MiB handles and
#                                 stitched ranges) on
#                                 cuda, runs random_mix and capped_training so;
#                                 JSON and the recorded traces (traces-stitch.tar.gz)
#   lab/gpu-session.sh pool-trace  where the driver's pool places each block of the
#                                 fixture traces and of .pooltraces*/*.trace.gz (generated
#                                 traces, when carried): build/pool-trace (lab/probes/pool_trace.c),
#                                 logs in $OUT/pool-trace.tar.gz
#   lab/gpu-session.sh pool-determinism  does the driver's pool place a trace's blocks the same
#                                 way twice, and with every free seen complete? Four fixture
#                                 traces, each logged 3 times plain and once with POOL_TRACE_SYNC=1
#                                 (lab/probes/pool_trace.c): logs in $OUT/pool-determinism.tar.gz, and
#                                 per trace how many placements differ from the first plain run
#   lab/gpu-session.sh peers    several GPUs (issue 25): build with the plug-in, make test-gpu (its
#                                 suite across devices, tests/test_peers.c, on every GPU pair),
#                                 pipeline_step and data_parallel_step with every allocator
#                                 ($OUT/peers-run-*.json), lab/harnesses/multi_gpu_plugin.py
#                                 (copies and matmuls across GPUs in one process) and
#                                 lab/harnesses/ddp_plugin.py (DDP over NCCL, 2 ranks), with
#                                 NCCL_NVLS_ENABLE=0 unless set; on one GPU each says it skipped
#   lab/gpu-session.sh scaling  issue 26 item 5 on this machine's host CPU: lscpu ($OUT/host.txt), then
#                                 make bench-scaling (random traces of 50,000..400,000 events; caching,
#                                 expandable, stitch; sim device; TUNE=1) and build/lab/drive-speed at
#                                 400,000 events, each pinned to 2 cores (taskset -c 0,1) and then on
#                                 all of them ($OUT/bench-scaling-*.txt, $OUT/drive-speed-*.txt)
#   lab/gpu-session.sh snapshot-forms  one snapshot in every form tune and explain read: records
#                                 resnet18_varres and bert_amp, writes each snapshot gzip-compressed
#                                 and pickled again with protocols 0 and 1, and checks that tune's
#                                 figures and recommendation and explain's report (under 60% of
#                                 PyTorch's peak reserved) are the same for every form, that replay
#                                 names a pickle, and prints tune's pytorch[] peak against PyTorch's
#                                 own peak reserved of the recording
#   lab/gpu-session.sh pool-big   the traces whose placements F14 (docs/sim-models.md) does not
#                                 yet explain (blocks of 48 MiB and more): random-64m and random-512m
#                                 logged plain and with POOL_TRACE_SYNC=1, in $OUT/pool-big.tar.gz
# Each stage logs to $OUT/<stage>.log.
set -u -o pipefail
: "${OUT:?OUT must name the output folder}"
KEEP=${KEEP:-/tmp/vrambench-keep}
mkdir -p "$KEEP"
day=$(date -u +%Y%m%d)

# lab/probes/pool_trace.c, built against the CUDA runtime (not part of vrambench's build).
build_pool_trace() {
    mkdir -p build
    gcc -O2 -I/usr/local/cuda/include lab/probes/pool_trace.c -o build/pool-trace -L/usr/local/cuda/lib64 -lcudart
}

# pool_runs DIR RUNS TRACE...: each trace logged RUNS times plain and once with a synchronize after
# every free (POOL_TRACE_SYNC=1) into $KEEP/DIR; per trace, how many placements differ from the
# first plain run, and each run's peak; the logs checked (F11, F12) and packed into $OUT/DIR.tar.gz.
pool_runs() {
    local dir=$1 runs=$2 trace name log run other differ
    shift 2
    mkdir -p "$KEEP/$dir"
    for trace in "$@"; do
        name=$(basename "$trace" .trace.gz)
        log="$KEEP/$dir/$name"
        for run in $(seq 1 "$runs"); do
            zcat "$trace" | ./build/pool-trace > "$log.plain$run.log" || echo "$name plain $run: FAILED"
        done
        zcat "$trace" | POOL_TRACE_SYNC=1 ./build/pool-trace > "$log.sync.log" || echo "$name sync: FAILED"
        for other in $(seq 2 "$runs" | sed 's/^/plain/') sync; do
            differ=$(paste -d' ' <(grep '^a ' "$log.plain1.log") <(grep '^a ' "$log.$other.log") \
                     | awk '$5 != $10' | wc -l)
            echo "$name $other: $differ of $(grep -c '^a ' "$log.plain1.log") placements differ from plain1;" \
                 "plain1 $(tail -1 "$log.plain1.log"), $other $(tail -1 "$log.$other.log")"
        done
    done
    python3 lab/probes/pool_log_check.py "$KEEP/$dir"/*.log || echo "pool_log_check: F11 or F12 FAILS on a log"
    (cd "$KEEP" && tar czf "$OUT/$dir.tar.gz" "$dir")
}

for stage in "$@"; do
    exec > >(tee "$OUT/$stage.log") 2>&1
    echo "== $stage on $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null), $(date -u)"
    case "$stage" in
    check)
        make -j16 all 2>&1 | grep -E "error|warning:|built" || exit 1
        make test-gpu > "$OUT/test-gpu-$day.txt" 2>&1 && echo "test-gpu: passed" || echo "test-gpu: FAILED"
        grep -E "conformance/|PASSED|FAILED|^\[  ERROR" "$OUT/test-gpu-$day.txt" | tail -40
        ./build/vrambench microbench --device cuda --out "$OUT/microbench-{device}-{date}.json" || echo "microbench: FAILED"
        # The handle lock under contention: one thread's latency while 3 others hammer the same allocator.
        ./build/vrambench microbench --device cuda --allocator caching,stitch --threads 4 \
            --out "$OUT/microbench-threads4-{device}-{date}.json" || echo "microbench --threads 4: FAILED"
        ;;
    torch-ab|torch-ab-resnet|torch-ab-gpt2)
        make -j16 all plugin build/tests/test_conformance 2>&1 | grep -E "error|warning:|built" || exit 1
        # Budgets keep each stage under 10 minutes: no run starts after it, a run lasts 120 s at most.
        workloads=training_cleanup,dataloader_batches,empty_cache_loop budget=300
        [ "$stage" = torch-ab-resnet ] && workloads=resnet50 budget=400
        [ "$stage" = torch-ab-gpt2 ] && workloads=gpt2_train,gpt2_generate budget=400
        if [ "$stage" = torch-ab ]; then
            # The plug-in itself as an external allocator, through the conformance suite.
            VRAMBENCH_ALLOCATOR=caching VRAMBENCH_TORCH_ON_OOM=null VB_TEST_DEVICE=cuda \
                VB_TEST_ALLOCATORS="external:$PWD/build/libvrambench_torch.so" timeout 120 ./build/tests/test_conformance \
                > "$OUT/conformance-plugin-$day.txt" 2>&1 && echo "conformance on the plug-in: passed" \
                || echo "conformance on the plug-in: FAILED (see conformance-plugin-$day.txt)"
        fi
        PYTHONUNBUFFERED=1 python3 lab/harnesses/torch_ab.py --workloads "$workloads" --budget-s "$budget" --append \
            --out "$KEEP/torch-ab-{device}-{date}.json" || echo "torch_ab: FAILED"
        cp "$KEEP"/torch-ab-*-"$day".json "$OUT/" 2>/dev/null || echo "no torch-ab results"
        ;;
    torch)
        PYTHONUNBUFFERED=1 python3 lab/harnesses/pytorch_claims.py "$KEEP/pytorch-claims.json" && cp "$KEEP/pytorch-claims.json" "$OUT/" \
            || echo "pytorch_claims: FAILED"
        PYTHONUNBUFFERED=1 python3 lab/harnesses/record_torch_traces.py "$KEEP/traces" || echo "record_torch_traces: FAILED"
        (cd "$KEEP" && tar czf "$OUT/traces.tar.gz" traces/*.json traces/*.trace.gz) || echo "no traces to pack"
        ;;
    bench)
        make bench BENCH_OUT="$OUT/{device}-{date}.json" || echo "bench: FAILED"
        # PyTorch's column: this session's measurements, else the newest committed ones.
        pytorch=()
        recorded=$(ls -t "$KEEP"/pytorch-claims.json results/pytorch-claims-*.json 2>/dev/null | head -1)
        [ -n "$recorded" ] && pytorch=(--pytorch "$recorded")
        ./build/vrambench claims --device cuda "${pytorch[@]}" --out "$OUT/claims-{device}-{date}.json" || echo "claims: FAILED"
        for trace in tests/fixtures/traces/*.trace.gz; do
            name=$(basename "$trace" .trace.gz)
            ./build/vrambench replay "$trace" --device cuda --allocator all --quiet \
                --out "$OUT/replay-$name-{device}-{date}.json" || echo "replay $name: FAILED"
        done
        ;;
    memcheck)
        make -j16 all build/tests/test_conformance 2>&1 | grep -E "error|warning:|built" || exit 1
        # One allocator at a time (VB_TEST_ALLOCATORS), so a slow one cannot
        # hide the others' results; MEMCHECK_ALLOCATORS picks (default all),
        # and what does not fit the stage's 7 minutes is named for a rerun.
        # --report-api-errors no: the suite's intentional OOMs (cudaMalloc past
        # the device, on purpose) are API errors, not memory errors.
        # VB_TEST_NO_MEMINFO: the sanitizer's own allocations move cudaMemGetInfo.
        names=${MEMCHECK_ALLOCATORS:-$(./build/vrambench list allocators | awk '/^[a-z]/ && $1 !~ /:/ {print $1}' | paste -sd, -)}
        started=$(date +%s) left_out="" bad=0
        printf '%-12s %8s %8s %-8s %s\n' allocator errors leaks suite seconds | tee "$OUT/memcheck-summary.txt"
        for name in ${names//,/ }; do
            if [ $(( $(date +%s) - started )) -gt 400 ]; then left_out="$left_out,$name"; continue; fi
            log="$OUT/memcheck-$name.txt" t0=$(date +%s)
            VB_TEST_DEVICE=cuda VB_TEST_NO_MEMINFO=1 VB_TEST_ALLOCATORS=$name timeout 300 \
                compute-sanitizer --tool memcheck --leak-check full --report-api-errors no \
                ./build/tests/test_conformance > "$log" 2>&1
            errors=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$log" | tail -1)
            leaks=$(grep -c "Leaked [0-9]* bytes" "$log")
            suite=$(grep -q "FAILED" "$log" && echo FAILED || { grep -q "PASSED" "$log" && echo passed || echo "?"; })
            [ "${errors:-x}" = 0 ] && [ "$leaks" = 0 ] && [ "$suite" = passed ] || bad=1
            printf '%-12s %8s %8s %-8s %s\n' "$name" "${errors:-none}" "$leaks" "$suite" $(( $(date +%s) - t0 )) \
                | tee -a "$OUT/memcheck-summary.txt"
        done
        [ -n "$left_out" ] && echo "memcheck: not run in this stage: ${left_out#,} (run again with MEMCHECK_ALLOCATORS=${left_out#,})"
        [ "$bad" = 0 ] && echo "memcheck: every allocator run: 0 errors, 0 leaks, suite passed" || echo "memcheck: FAILED (see memcheck-*.txt)"
        ;;
    pool-trace)
        build_pool_trace || exit 1
        mkdir -p "$KEEP/pool-trace"
        for trace in tests/fixtures/traces/*.trace.gz tests/fixtures/torch/*.trace.gz tests/fixtures/stitch/*.trace.gz \
                     .pooltraces/*.trace.gz .pooltraces-heldout/*.trace.gz; do
            [ -f "$trace" ] || continue
            name=$(basename "$trace" .trace.gz)
            zcat "$trace" | ./build/pool-trace > "$KEEP/pool-trace/$name.log" || echo "pool-trace $name: FAILED"
            echo "$name: $(tail -1 "$KEEP/pool-trace/$name.log")"
        done
        python3 lab/probes/pool_log_check.py "$KEEP"/pool-trace/*.log || echo "pool_log_check: F11 or F12 FAILS on a log"
        (cd "$KEEP" && tar czf "$OUT/pool-trace.tar.gz" pool-trace)
        ;;
    pool-determinism)
        build_pool_trace || exit 1
        pool_runs pool-determinism 3 tests/fixtures/stitch/random-4m.trace.gz tests/fixtures/torch/two_stream.trace.gz \
            tests/fixtures/traces/resnet50.trace.gz tests/fixtures/traces/gpt2.trace.gz
        ;;
    pool-big)
        build_pool_trace || exit 1
        pool_runs pool-big 1 tests/fixtures/stitch/random-64m.trace.gz tests/fixtures/stitch/random-512m.trace.gz
        ;;
    fullgpu)
        make -j16 all 2>&1 | grep -E "error|warning:|built" || exit 1
        timeout 460 ./build/fullgpu | tee "$OUT/fullgpu.txt"
        status=$?
        [ "$status" = 0 ] && echo "fullgpu: passed" || echo "fullgpu: FAILED (exit status $status)"
        ;;
    tune)
        make -j16 all 2>&1 | grep -E "error|warning:|built" || exit 1
        dir="$KEEP/tune"
        mkdir -p "$dir"
        # What a workload can have: the free memory next to a CUDA context.
        total=$(python3 -c "import torch; print(torch.cuda.mem_get_info()[0])")
        echo "device capacity for tune (free bytes with a CUDA context): $total bytes"
        # The traces the torch stage recorded, else recorded here.
        traces="$KEEP/traces"
        [ -f "$traces/resnet18_varres.trace.gz" ] || PYTHONUNBUFFERED=1 python3 lab/harnesses/record_torch_traces.py "$traces" \
            --workloads resnet50,gpt2,resnet18_varres,bert_amp || echo "record_torch_traces: FAILED"
        for name in resnet50 gpt2 resnet18_varres bert_amp; do
            [ -f "$traces/$name.trace.gz" ] || continue
            TIMEFORMAT="tune $name: %R s wall"
            time { ./build/vrambench tune "$traces/$name.trace.gz" --capacity "$total" \
                --out "$dir/tune-$name.json" 2>/dev/null | tee "$OUT/tune-$name.txt" || echo "tune $name: FAILED"; }
            cp "$dir/tune-$name.json" "$OUT/" 2>/dev/null
        done
        # The main replays on the GPU itself (times are GPU-side; memory figures must equal the sim's).
        TIMEFORMAT="tune resnet50 --device cuda: %R s wall"
        [ -f "$traces/resnet50.trace.gz" ] && time { ./build/vrambench tune "$traces/resnet50.trace.gz" --device cuda \
            --capacity "$total" --out "$OUT/tune-resnet50-cuda.json" 2>/dev/null | tail -3 || echo "tune --device cuda: FAILED"; }
        # replay --sim-capacity on the GPU is a cap: its first OOM against the simulated device's.
        for device in cuda sim; do
            ./build/vrambench replay tests/fixtures/traces/gpt2.trace.gz --device $device --allocator caching,expandable \
                --sim-capacity 10GiB --fail-on-oom --quiet --out "$OUT/replay-gpt2-cap10g-$device.json" > /dev/null
            echo "replay gpt2 capped at 10 GiB on $device: exit $? (3: out of memory)"
            python3 -c "import json,sys; [print(' ', e['name'], 'ooms', e['ooms'], 'first at line', e.get('first_oom_line'), e.get('first_oom_bytes'), 'bytes') for e in json.load(open(sys.argv[1]))['benchmarks']]" "$OUT/replay-gpt2-cap10g-$device.json"
        done
        # replay --snapshot opened by PyTorch's own snapshot tools.
        for allocator in caching expandable; do
            pickle="$dir/gpt2-$allocator.pickle"
            ./build/vrambench replay "$traces/gpt2.trace.gz" --device sim --allocator "$allocator" --quiet \
                --snapshot "$pickle" > /dev/null || { echo "snapshot $allocator: FAILED"; continue; }
            python3 -m torch.cuda._memory_viz stats "$pickle" | tail -5 || echo "_memory_viz stats $allocator: FAILED"
            python3 -m torch.cuda._memory_viz trace_plot "$pickle" -o "$OUT/gpt2-$allocator-trace.html" \
                && python3 -m torch.cuda._memory_viz segment_plot "$pickle" -o "$OUT/gpt2-$allocator-segments.html" \
                && echo "_memory_viz $allocator: plots written" || echo "_memory_viz plots $allocator: FAILED"
        done
        ;;
    tune-check)
        dir="$KEEP/tune"
        for name in resnet50 gpt2 resnet18_varres bert_amp; do
            [ -f "$dir/tune-$name.json" ] || { echo "no tune-$name.json: run the tune stage first"; continue; }
            python3 lab/harnesses/tune_check.py plan "$dir/tune-$name.json" --settings 5 | while IFS='|' read -r index conf fraction; do
                echo "-- $name under PYTORCH_ALLOC_CONF='$conf'${fraction:+ with memory fraction $fraction}"
                PYTHONUNBUFFERED=1 python3 lab/harnesses/record_torch_traces.py "$dir/real-$name-$index" --workloads "$name" \
                    --no-history --alloc-conf "$conf" ${fraction:+--memory-fraction "$fraction"} \
                    || echo "real run $name $index: FAILED"
                cp "$dir/real-$name-$index/$name.json" "$OUT/real-$name-$index.json" 2>/dev/null
            done
        done
        python3 lab/harnesses/tune_check.py table "$dir" --settings 5 --out "$OUT/tune-check-$day.json" | tee "$OUT/tune-check-$day.md"
        ;;
    fit-check)
        make -j16 all 2>&1 | grep -E "error|warning:|built" || exit 1
        # No run starts after 400 s, none lasts over 120 s; the outer timeout is a backstop.
        rm -rf "$KEEP/fit"
        PYTHONUNBUFFERED=1 timeout 480 python3 lab/harnesses/fit_check.py "$KEEP/fit" --vrambench build/vrambench \
            --budget-s 400 --jobs 6 || echo "fit_check: a check disagrees, or it FAILED (see fit-check-$day.md)"
        cp "$KEEP/fit/fit-check.json" "$OUT/fit-check-$day.json" 2>/dev/null || echo "no fit-check.json"
        cp "$KEEP/fit/fit-check.md" "$OUT/fit-check-$day.md" 2>/dev/null
        # The traces and what PyTorch did; tune's and the sim's files are made again from the traces.
        (cd "$KEEP/fit" && tar czf "$OUT/fit-check-traces.tar.gz" runs/*.trace.gz runs/record-*.json runs/run-*.json) \
            2>/dev/null || echo "no fit-check traces to pack"
        ;;
    stitch)
        make -j16 all 2>&1 | grep -E "error|warning:|built" || exit 1
        # stitch's default (handles of 8-64 MiB, whole ones moved out of holes), with stitched ranges of
        # up to 16 mappings, and with 2-4 MiB handles and stitched ranges of up to 64 (memory's end of the
        # trade-off).
        allocators='caching,expandable,stitch,stitch[stitch_max_maps=16],stitch[chunk_mb=2,handle_max_mb=4,stitch_max_maps=64]'
        # The driver's per-call costs by handle size (2 MiB to 1 GiB): lab/probes/stitch_tradeoff.py's cost model.
        cuda_home=${CUDA_HOME:-/usr/local/cuda}
        gcc -O2 -I"$cuda_home/include" lab/probes/probe_driver.c -o build/probe-driver -L"$cuda_home/lib64" -lcudart -lcuda \
            && timeout 120 ./build/probe-driver > "$OUT/probe-driver-$day.txt" || echo "probe-driver: FAILED"
        grep '^vm:' "$OUT/probe-driver-$day.txt" 2>/dev/null
        # Budgets keep the stage under 10 minutes: recording (when the torch stage did not) 270 s,
        # replays ~2 min, the run 150 s.
        # Recorded traces carried in .traces/ (each with its NAME.json) spare the recording.
        if [ ! -f "$KEEP/traces/two_stream.trace.gz" ] && [ -f .traces/two_stream.trace.gz ]; then
            mkdir -p "$KEEP/traces"
            for json in .traces/*.json; do cp "${json%.json}.trace.gz" "$json" "$KEEP/traces/" 2>/dev/null; done
        fi
        [ -f "$KEEP/traces/two_stream.trace.gz" ] || PYTHONUNBUFFERED=1 timeout 270 python3 lab/harnesses/record_torch_traces.py \
            "$KEEP/traces" || echo "record_torch_traces: FAILED (some workloads)"
        for trace in "$KEEP"/traces/*.trace.gz tests/fixtures/traces/*.trace.gz tests/fixtures/torch/*.trace.gz \
            tests/fixtures/stitch/*.trace.gz .traces/own-*.trace.gz; do
            [ -f "$trace" ] || continue
            name=$(basename "$trace" .trace.gz)
            case "$trace" in "$KEEP"/*) name="torch-$name" ;; esac
            # Three timed repetitions of at least 0.1 s each: one replay of a few ms varies up to 2x.
            timeout 120 ./build/vrambench replay "$trace" --device cuda --allocator "$allocators" --quiet \
                --repetitions 3 --min-time 0.1 --out "$OUT/stitch-replay-$name-{device}-{date}.json" \
                || echo "replay $name: FAILED"
        done
        timeout 150 ./build/vrambench run --scenario random_mix,capped_training --allocator "$allocators" \
            --device cuda --repetitions 3 --min-time 0.2 --quiet --out "$OUT/stitch-run-{device}-{date}.json" \
            || echo "run: FAILED"
        ;;
    peers)
        export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
        make -j16 all plugin build/tests/test_peers 2>&1 | grep -E "error|warning:|built" || exit 1
        echo "GPUs: $(nvidia-smi --query-gpu=index,name --format=csv,noheader 2>/dev/null | paste -sd';' -)"
        nvidia-smi topo -m > "$OUT/peers-topology.txt" 2>&1
        timeout 300 make test-gpu > "$OUT/test-gpu-peers-$day.txt" 2>&1 && echo "test-gpu: passed" || echo "test-gpu: FAILED"
        grep -E "^\[----------\] peers/|test_peers: skipped|^\[  (PASSED|FAILED)|^\[  ERROR|^ERROR" \
            "$OUT/test-gpu-peers-$day.txt" | tail -60
        timeout 120 ./build/vrambench run --scenario pipeline_step,data_parallel_step --allocator all --device cuda \
            --repetitions 3 --min-time 0.1 --quiet --out "$OUT/peers-run-{device}-{date}.json" || echo "run: FAILED"
        PYTHONUNBUFFERED=1 timeout 150 python3 lab/harnesses/multi_gpu_plugin.py \
            --out "$OUT/multi-gpu-plugin-{device}-{date}.json" || echo "multi_gpu_plugin: FAILED"
        PYTHONUNBUFFERED=1 timeout 300 python3 lab/harnesses/ddp_plugin.py \
            --out "$OUT/ddp-plugin-{device}-{date}.json" || echo "ddp_plugin: FAILED"
        ;;
    scaling)
        make -j16 all build/lab/drive-speed 2>&1 | grep -E "error|warning:|built" || exit 1
        lscpu | grep -E "Model name|^CPU\(s\)|Thread|Socket|L2|L3" | tee "$OUT/host.txt"
        cat /sys/kernel/mm/transparent_hugepage/enabled | sed 's/^/transparent huge pages: /' | tee -a "$OUT/host.txt"
        ./build/vrambench gen-trace random --seed 1 --events 400000 --max-size 256K --max-live 1000G \
            --quiet -o "$KEEP/random-400000.trace" >/dev/null
        for cores in 0,1 all; do
            pin=(taskset -c "$cores"); [ "$cores" = all ] && pin=()
            name=$([ "$cores" = all ] && echo all-cores || echo 2-cores)
            echo "-- cores: $cores"
            ALLOCATORS='caching expandable stitch' EVENTS='50000 100000 200000 400000' TUNE=1 "${pin[@]}" \
                lab/bench-scaling.sh 2>&1 | tee "$OUT/bench-scaling-$name.txt" || echo "bench-scaling: FAILED"
            for round in 1 2 3; do "${pin[@]}" ./build/lab/drive-speed "$KEEP/random-400000.trace" caching 5; done \
                | tee "$OUT/drive-speed-$name.txt"
        done
        ;;
    snapshot-forms)
        make -j16 all 2>&1 | grep -E "error|warning:|built" || exit 1
        total=$(python3 -c "import torch; print(torch.cuda.mem_get_info()[0])")
        dir="$KEEP/forms"
        mkdir -p "$dir"
        PYTHONUNBUFFERED=1 python3 lab/harnesses/record_torch_traces.py "$dir" --workloads resnet18_varres,bert_amp \
            || echo "record_torch_traces: FAILED"
        for name in resnet18_varres bert_amp; do
            [ -f "$dir/$name.pickle" ] || { echo "$name: no snapshot"; continue; }
            gzip -c "$dir/$name.pickle" > "$dir/$name.gz.pickle"
            for protocol in 0 1; do
                python3 -c "import pickle, sys; pickle.dump(pickle.load(open(sys.argv[1], 'rb')), open(sys.argv[2], 'wb'), protocol=$protocol)" \
                    "$dir/$name.pickle" "$dir/$name.p$protocol.pickle"
            done
            # explain under 60% of what PyTorch reserved: an out-of-memory to explain.
            short=$(python3 -c "import json, sys; print(int(json.load(open(sys.argv[1]))['peaks']['reserved_bytes.all.peak'] * 0.6))" \
                "$dir/$name.json")
            for form in pickle gz.pickle p0.pickle p1.pickle; do
                ./build/vrambench tune "$dir/$name.$form" --capacity "$total" --out "$dir/tune-$name-$form.json" \
                    >/dev/null 2>"$dir/tune-$name-$form.err" || echo "tune $name.$form: FAILED: $(cat "$dir/tune-$name-$form.err")"
                ./build/vrambench explain "$dir/$name.$form" --capacity "$short" 2>&1 \
                    | sed "s|$dir/$name.$form|SNAPSHOT|g" > "$dir/explain-$name-$form.txt"
            done
            for form in gz.pickle p0.pickle p1.pickle; do
                python3 - "$dir/tune-$name-pickle.json" "$dir/tune-$name-$form.json" "$name.$form" <<'PY'
import json, sys
# Memory figures and the recommendation only: times, latencies, the Pareto front (it weighs replay
# time), the context and the input's name differ by run, and the timeline is sampled at byte offsets
# of the converted trace, whose header names the input.
def strip(value, name):
    if isinstance(value, dict):
        return {k: strip(v, name) for k, v in value.items()
                if k not in ("context", "real_time", "cpu_time", "gpu_time_ns", "on_pareto_front", "timeline") and "_ns_" not in k}
    if isinstance(value, list):
        return [strip(v, name) for v in value]
    return value.replace(name, "SNAPSHOT") if isinstance(value, str) else value
plain, other = (strip(json.load(open(path)), path.split("tune-")[1][:-5].replace("-", ".", 1)) for path in sys.argv[1:3])
same = plain == other
print(f"tune {sys.argv[3]}: {'the same figures and recommendation as the plain pickle' if same else 'DIFFERS from the plain pickle'}"
      f" ({len(plain['benchmarks'])} settings)")
PY
                cmp -s "$dir/explain-$name-pickle.txt" "$dir/explain-$name-$form.txt" \
                    && echo "explain $name.$form: the same report as the plain pickle" \
                    || { echo "explain $name.$form: DIFFERS"; diff "$dir/explain-$name-pickle.txt" "$dir/explain-$name-$form.txt" | head -5; }
            done
            ./build/vrambench replay "$dir/$name.gz.pickle" --device sim --out /dev/null; echo "replay $name.gz.pickle: exit $?"
            python3 - "$dir/$name.json" "$dir/tune-$name-pickle.json" "$name" <<'PY'
import json, sys
torch_peak = json.load(open(sys.argv[1]))["peaks"]["reserved_bytes.all.peak"]
tuned = {b["allocator"]: b["peak_reserved_bytes"] for b in json.load(open(sys.argv[2]))["benchmarks"]}
print(f"{sys.argv[3]}: PyTorch's peak reserved {torch_peak}, tune's pytorch[] {tuned.get('pytorch[]')}"
      f" ({'equal' if tuned.get('pytorch[]') == torch_peak else 'DIFFERENT'})")
PY
            cp "$dir"/tune-$name-*.json "$dir"/explain-$name-*.txt "$dir/$name.json" "$OUT/" 2>/dev/null
        done
        ;;
    *)
        echo "unknown stage $stage"
        exit 2
        ;;
    esac
    echo "== $stage done $(date -u)"
done
