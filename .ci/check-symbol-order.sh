#!/usr/bin/env bash
# Check that the release binary's hot functions are where build.rs asked LLD
# to put them:
# - at least 90% of the functions .cargo/symbol-order.txt names exist in the
#   binary. The names are mangled: a dependency update renames them (then
#   run `sudo bash benches/symbol-order.sh` and commit the new list), and so
#   does another rustc. A binary built by a rustc other than the one the list
#   names gets a warning instead of a failure: the list cannot match it, and
#   the build is no worse than one without a list;
# - those that exist lie in one stretch at the start of .text, no longer than
#   twice their total size (LLD honoured the list).
# Exit 0 when both hold (or on that warning), 1 saying which does not.
# Usage: .ci/check-symbol-order.sh BINARY  (.ci/run passes the release
# binary that .ci/check-hardening.sh has just built)
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: .ci/check-symbol-order.sh BINARY" >&2; exit 2; }
bin=$(realpath -e -- "$1") || { echo "check-symbol-order: no binary at $1" >&2; exit 1; }
cd "$(dirname "$0")/.."
list=.cargo/symbol-order.txt
[[ -f $list ]] || { echo "check-symbol-order: $list is missing" >&2; exit 1; }
for tool in nm readelf python3; do
    command -v "$tool" >/dev/null || { echo "check-symbol-order: $tool is missing" >&2; exit 1; }
done
# The rustc that built the binary, as its .comment section names it.
built_by=$(bash .ci/rustc-of.sh "$bin")
text=$(readelf -SW "$bin" | awk '$2 == ".text" { print $4, $6 }')

nm --defined-only -S "$bin" | python3 -c '
import sys
path, built_by, text = sys.argv[1], sys.argv[2], sys.argv[3].split()
lines = open(path).read().splitlines()
listed = [l.strip() for l in lines if l.strip() and not l.startswith("#")]
made_by = next((l[len("# made by "):] for l in lines if l.startswith("# made by ")), "")
wanted = set(listed)
text_start, text_end = int(text[0], 16), int(text[0], 16) + int(text[1], 16)
end, found, total = text_start, set(), 0
for line in sys.stdin:
    f = line.split()
    # t/T/W: functions; i: glibc IFUNC resolvers (memcpy, ...), listed as callgrind names them.
    if len(f) != 4 or f[2] not in ("t", "T", "W", "i"):
        continue
    addr, size, name = int(f[0], 16), int(f[1], 16), f[3]
    if name in wanted and name not in found:
        found.add(name)
        if text_start <= addr < text_end:
            total += size
            end = max(end, addr + size)
if not listed:
    sys.exit(f"check-symbol-order: {path} names no function")
if len(found) * 10 < len(listed) * 9:
    if made_by != built_by:
        unnamed = "an unnamed rustc"
        print(f"check-symbol-order: warning: {len(found)} of the {len(listed)} functions in {path} "
              f"are in the binary: the list was made with {made_by or unnamed}, the binary "
              f"by {built_by or unnamed}; run `sudo bash benches/symbol-order.sh` to keep "
              "the order")
        sys.exit(0)
    sys.exit(f"check-symbol-order: only {len(found)} of the {len(listed)} functions in {path} "
             "are in the binary: the list is stale; run `sudo bash benches/symbol-order.sh`")
span = end - text_start
if span > 2 * total:
    sys.exit(f"check-symbol-order: the {len(found)} listed functions ({total} bytes) spread over the "
             f"first {span} bytes of .text: the linker did not order them (is it LLD?)")
print(f"check-symbol-order: {len(found)} of {len(listed)} listed functions, {total} bytes, "
      f"in the first {span} bytes of .text")
' "$list" "$built_by" "$text"
