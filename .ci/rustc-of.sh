#!/usr/bin/env bash
# Print the rustc that built BINARY ("rustc 1.91.0 (f8297e351 2025-10-28)"), as
# its .comment section names it; nothing when it names none. Shared by
# .ci/check-symbol-order.sh and benches/symbol-order.sh, which record and
# compare it.
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: .ci/rustc-of.sh BINARY" >&2; exit 2; }
readelf -p .comment "$1" | grep -o 'rustc version [^)]*)' | head -n1 | sed 's/^rustc version /rustc /' || true
