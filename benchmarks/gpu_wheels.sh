#!/usr/bin/env bash
# The wheels the GPU check carries (benchmarks/gpu_wheels.txt) into wheels/ (gitignored), for one Python and
# platform, with their total size; fails (exit 1) when they are over 64 MiB, what travels beside the checkout.
# Run where there is network; compiled wheels (pyarrow, pandas, xxhash) and multiprocess are per Python version,
# so give the GPU machine's:
#
#   bash benchmarks/gpu_wheels.sh                          # Python 3.11, manylinux x86_64
#   PYTHON_VERSION=3.12 bash benchmarks/gpu_wheels.sh
#   PYTHON=.venv/bin/python WHEELS=/tmp/w bash benchmarks/gpu_wheels.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
PYTHON_VERSION="${PYTHON_VERSION:-3.11}"
PLATFORM="${PLATFORM:-manylinux_2_28_x86_64}"
WHEELS="${WHEELS:-wheels}"
LIMIT_MIB="${LIMIT_MIB:-64}"

rm -rf "$WHEELS"
mkdir -p "$WHEELS"
# --no-deps: gpu_wheels.txt lists every dependency the GPU machine lacks; the rest it brings itself.
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --python-version "$PYTHON_VERSION" \
    --platform "$PLATFORM" --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    -r benchmarks/gpu_wheels.txt -d "$WHEELS"
ls -l "$WHEELS" | awk 'NR > 1 { printf "%10.1f MiB  %s\n", $5 / 1048576, $9 }'
bytes=$(du -cb "$WHEELS"/*.whl | tail -1 | cut -f1)
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
if [ "$bytes" -gt $((LIMIT_MIB * 1048576)) ]; then
    echo "gpu_wheels: $mib MiB in $WHEELS/, over the $LIMIT_MIB MiB that can travel with the checkout" >&2
    exit 1
fi
echo "gpu_wheels: $mib MiB in $WHEELS/ (limit $LIMIT_MIB MiB), for Python $PYTHON_VERSION on $PLATFORM"
