#!/bin/sh
# Checks for what vrambench needs and installs what is missing with apt-get
# (Debian), or says in one line what to install when it cannot.
#   build-aux/ensure-deps.sh build   a C compiler ($CC: gcc, or clang), make, jansson, cmocka and zlib headers
#   build-aux/ensure-deps.sh fuzz    clang with libFuzzer's runtime (make fuzz)
#   build-aux/ensure-deps.sh plots   python3 with matplotlib ($PLOT_PYTHON if set)
#   build-aux/ensure-deps.sh test    what make test's Python tests use besides: matplotlib,
#                                    and pip with setuptools (the package's install test)
#   build-aux/ensure-deps.sh browser headless Chromium (the report's test opens the page in it)
#   build-aux/ensure-deps.sh slurm   Slurm's controller, node daemon and client, and munge (the
#                                fleet test runs a one-node cluster: fleet/slurm-bench.sh)
set -u
what=${1:-build}
cc=${CC:-gcc}

missing=""
case "$what" in
build)
    case "$cc" in
    *clang*) cc_package=clang ;;
    *) cc_package=gcc ;;
    esac
    command -v "$cc" >/dev/null 2>&1 || missing="$missing $cc_package"
    command -v make >/dev/null 2>&1 || missing="$missing make"
    for pair in jansson.h:libjansson-dev cmocka.h:libcmocka-dev zlib.h:zlib1g-dev; do
        header=${pair%%:*} package=${pair#*:}
        printf '#include <stdarg.h>\n#include <stddef.h>\n#include <setjmp.h>\n#include <stdint.h>\n#include <%s>\n' "$header" |
            "$cc" -E -x c - >/dev/null 2>&1 || missing="$missing $package"
    done
    ;;
fuzz)
    # libFuzzer's runtime: Debian's clang only recommends it.
    printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return d && n; }\n' |
        clang -fsanitize=fuzzer -x c - -o /tmp/vrambench-fuzz-probe.$$ >/dev/null 2>&1 || missing="$missing clang libclang-rt-dev"
    rm -f /tmp/vrambench-fuzz-probe.$$
    ;;
plots|test)
    python=${PLOT_PYTHON:-python3}
    "$python" -c 'import matplotlib' >/dev/null 2>&1 || missing="$missing python3-matplotlib"
    if [ "$what" = test ]; then
        "$python" -c 'import setuptools' >/dev/null 2>&1 || missing="$missing python3-setuptools"
        "$python" -m pip --version >/dev/null 2>&1 || missing="$missing python3-pip"
    fi
    ;;
browser)
    command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
    ;;
slurm)
    for pair in slurmctld:slurmctld slurmd:slurmd sbatch:slurm-client munged:munge; do
        command -v "${pair%%:*}" >/dev/null 2>&1 || missing="$missing ${pair#*:}"
    done
    ;;
*)
    echo "ensure-deps: unknown set '$what'" >&2
    exit 2
    ;;
esac
[ -z "$missing" ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "vrambench: installing$missing with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -qq && apt-get install -y -qq $missing; } >/tmp/vrambench-apt.log 2>&1 || {
        echo "vrambench: error: apt-get could not install$missing (log: /tmp/vrambench-apt.log)" >&2
        exit 1
    }
    exit 0
fi
echo "vrambench: error: missing$missing; install with: sudo apt-get install$missing" >&2
exit 1
