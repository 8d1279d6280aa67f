#!/usr/bin/env bash
# Commit messages by convention (CONTRIBUTING.md), for every commit made
# since the convention began; the history before it stays as it is.
#
#   component: imperative summary        <- at most 72 characters
#                                         <- blank, if a body follows
#   Why, and what was measured.
#
# The component is lower case (a path or area: docs, readme, ci, scan,
# watch/qmp); several are joined by ", ". Merge commits are not checked.
#
# Usage: .ci/check-commits.sh [REVISION-RANGE]   (default: BASE..HEAD)
set -euo pipefail
cd "$(dirname "$0")/.."

# The last commit before the convention.
BASE=ed1219bf69c7727a78a11633c132c89727ac9df0
SUBJECT_RE='^[a-z0-9][a-z0-9_./-]*(, [a-z0-9][a-z0-9_./-]*)*: [^ ].*$'
MAX=72

if ! git rev-parse --git-dir >/dev/null 2>&1; then
    echo "check-commits: not a git checkout; nothing to check"
    exit 0
fi

if [ $# -gt 0 ]; then
    range=$1
elif git cat-file -e "$BASE^{commit}" 2>/dev/null; then
    range="$BASE..HEAD"
else
    # A shallow clone that stops after BASE: every commit it holds is newer.
    echo "check-commits: $BASE is not in this clone (shallow?); checking only the commits present"
    range=HEAD
fi

bad=0
n=0
while read -r commit; do
    n=$((n + 1))
    short=$(git rev-parse --short "$commit")
    subject=$(git log -1 --format=%s "$commit")
    second=$(git log -1 --format=%B "$commit" | sed -n 2p)
    lines=$(git log -1 --format=%B "$commit" | sed '/^$/d' | wc -l)
    if ! [[ $subject =~ $SUBJECT_RE ]]; then
        echo "$short: subject is not 'component: summary' (lower-case component; fix-ups are squashed before they land): $subject"
        bad=1
    fi
    if [ "${#subject}" -gt "$MAX" ]; then
        echo "$short: subject has ${#subject} characters, more than $MAX: $subject"
        bad=1
    fi
    if [ "$lines" -gt 1 ] && [ -n "$second" ]; then
        echo "$short: the second line must be blank before the body: $subject"
        bad=1
    fi
done < <(git rev-list --no-merges "$range")

if [ "$bad" -ne 0 ]; then
    echo "check-commits: see CONTRIBUTING.md, \"Commits\""
    exit 1
fi
echo "check-commits: $n commit(s) in $range follow the convention"
