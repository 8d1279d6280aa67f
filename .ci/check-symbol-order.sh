#!/usr/bin/env bash
# Check that the release binary's hot functions are where build.rs asked LLD
# to put them: at least 90% of the functions .cargo/symbol-order.txt names
# exist in the binary (the names are mangled, and a dependency update renames
# them: then run `sudo bash benches/symbol-order.sh` and commit the new list),
# and those that exist all lie in one stretch at the start of .text, no longer
# than twice their total size. Exit 0 when both hold, 1 saying which does not.
# Usage: .ci/check-symbol-order.sh BINARY  (.ci/run passes the release
# binary that .ci/check-hardening.sh has just built)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:?usage: .ci/check-symbol-order.sh BINARY}
[[ -x $bin ]] || { echo "check-symbol-order: no binary at $bin" >&2; exit 1; }
for tool in nm python3; do
    command -v "$tool" >/dev/null || { echo "check-symbol-order: $tool is missing" >&2; exit 1; }
done
list=.cargo/symbol-order.txt

nm --defined-only -S "$bin" | python3 -c '
import sys
listed = [l.strip() for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")]
wanted = set(listed)
text_start, end, found, total = None, 0, set(), 0
for line in sys.stdin:
    f = line.split()
    if len(f) != 4 or f[2] not in ("t", "T", "W"):
        continue
    addr, size, name = int(f[0], 16), int(f[1], 16), f[3]
    text_start = addr if text_start is None else min(text_start, addr)
    if name in wanted and name not in found:
        found.add(name)
        total += size
        end = max(end, addr + size)
if not listed:
    sys.exit(f"check-symbol-order: {sys.argv[1]} names no function")
if len(found) * 10 < len(listed) * 9:
    sys.exit(f"check-symbol-order: only {len(found)} of the {len(listed)} functions in {sys.argv[1]} "
             "are in the binary: the list is stale; run `sudo bash benches/symbol-order.sh`")
span = end - text_start
if span > 2 * total:
    sys.exit(f"check-symbol-order: the {len(found)} listed functions ({total} bytes) spread over the "
             f"first {span} bytes of .text: the linker did not order them (is it LLD?)")
print(f"check-symbol-order: {len(found)} of {len(listed)} listed functions, {total} bytes, "
      f"in the first {span} bytes of .text")
' "$list"
