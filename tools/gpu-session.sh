#!/bin/bash
# One GPU session's work, in stages that each fit a 10-minute device command.
# Run from the repository root on the GPU machine, with OUT set to a folder
# whose files come back:
#   tools/gpu-session.sh check    build, make test-gpu, microbench
#   tools/gpu-session.sh torch    PyTorch reference: claims measurements, training-loop traces
#   tools/gpu-session.sh bench    make bench, vrambench claims (with the PyTorch column if present)
# Each stage logs to $OUT/<stage>.log and copies what it produced into $OUT.
set -u -o pipefail
stage=${1:?usage: tools/gpu-session.sh check|torch|bench}
: "${OUT:?OUT must name the output folder}"
log="$OUT/$stage.log"
exec > >(tee "$log") 2>&1
echo "== $stage on $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null)"
date -u
case "$stage" in
check)
    make -j8 all || exit 1
    make test-gpu || echo "test-gpu FAILED"
    ./build/vrambench microbench --device cuda --out "$OUT/microbench.json" || echo "microbench FAILED"
    ;;
torch)
    PYTHONUNBUFFERED=1 python3 tools/pytorch_claims.py "$OUT/pytorch-claims.json" || echo "pytorch_claims FAILED"
    if [ -f tools/record_torch_traces.py ]; then
        PYTHONUNBUFFERED=1 python3 tools/record_torch_traces.py "$OUT/traces" || echo "record_torch_traces FAILED"
        (cd "$OUT" && tar czf traces.tar.gz traces && rm -rf traces)
    fi
    ;;
bench)
    make bench || echo "bench FAILED"
    cp results/*.json "$OUT/" 2>/dev/null
    ;;
*)
    echo "unknown stage $stage"
    exit 2
    ;;
esac
date -u
