#!/usr/bin/env bash
# The one command that installs the test dependencies and runs every test.
# Needs root: tests build real network namespaces, TAPs and VMs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/install-deps.sh
# The node binary (static, as the node image and the DaemonSet ship it):
# the image test and the benchmarks run it.
cargo build-node
# The benchmark harness in smoke mode: proves it works and cleans up (no timings asserted).
bash benches/run.sh --smoke
# The library's examples as programs: tests/embedding.rs runs attach_qemu
# (cargo test builds examples only as test harnesses).
cargo build --examples
# A hung test fails the run instead of eating the CI budget.
timeout 40m cargo test --all-targets -- --test-threads=2
