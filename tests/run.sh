#!/usr/bin/env bash
# The one command that installs the test dependencies and runs every test.
# Needs root: tests build real network namespaces, TAPs and VMs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/install-deps.sh
cargo test --all-targets -- --test-threads=2
bash benches/run.sh --smoke
