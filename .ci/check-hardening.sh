#!/usr/bin/env bash
# Build the node binary (`cargo build-node`) and check that it is hardened as
# .cargo/config.toml says: position-independent (ELF type DYN, static-pie: no interpreter), full
# RELRO (a GNU_RELRO segment and BIND_NOW) and a non-executable stack
# (GNU_STACK without E). Exit 0 when all hold, 1 naming each one that does not.
# Usage: .ci/check-hardening.sh [BINARY]  (given a binary, checks it without building)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v readelf >/dev/null || { echo "check-hardening: readelf (binutils) is missing" >&2; exit 1; }
if [[ $# -ge 1 ]]; then
    bin=$1
else
    cargo build-node
    bin="target/x86_64-unknown-linux-gnu/release/podtap"
fi
[[ -x $bin ]] || { echo "check-hardening: no binary at $bin" >&2; exit 1; }

header=$(readelf --file-header "$bin")
segments=$(readelf --wide --program-headers "$bin")
dynamic=$(readelf --dynamic "$bin")
fail=0
bad() { echo "check-hardening: $bin: $*" >&2; fail=1; }

grep -Eq '^ +Type: +DYN ' <<<"$header" || bad "ELF type is not DYN (not position-independent): $(grep -E '^ +Type:' <<<"$header")"
grep -q ' INTERP ' <<<"$segments" && bad "has an INTERP segment (dynamically linked, not static-pie)"
grep -q ' GNU_RELRO ' <<<"$segments" || bad "no GNU_RELRO segment (no RELRO)"
grep -Eq '\(FLAGS\).*BIND_NOW|\(FLAGS_1\).*NOW' <<<"$dynamic" || bad "no BIND_NOW / FLAGS_1 NOW (partial RELRO only)"
# Wide format: Type Offset VirtAddr PhysAddr FileSiz MemSiz Flg Align.
stack=$(awk '$1 == "GNU_STACK" { print $7 }' <<<"$segments")
if [[ -z $stack ]]; then
    bad "no GNU_STACK segment (the stack would be executable)"
elif [[ $stack == *E* ]]; then
    bad "executable stack (GNU_STACK flags $stack)"
fi

if [[ $fail -ne 0 ]]; then
    exit 1
fi
echo "check-hardening: $bin is static-pie (ELF DYN, no interpreter), full RELRO, NX stack"
