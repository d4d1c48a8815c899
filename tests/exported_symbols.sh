#!/usr/bin/env bash
# exported_symbols.sh LIBRARY HEADER... — the shared library exports exactly the functions the public headers declare
# with SF_API: nothing internal leaks out (the build hides everything else), and nothing public is missing.
set -euo pipefail
lib=$1
shift
exported=$(nm -D --defined-only "$lib" | awk '$2 == "T" { print $3 }' | sort -u)
declared=$(cat "$@" | grep -oE '^SF_API [^(]*\bsf_[a-z0-9_]+\(' | grep -oE 'sf_[a-z0-9_]+\($' | tr -d '(' | sort -u)
extra=$(comm -23 <(echo "$exported") <(echo "$declared"))
missing=$(comm -13 <(echo "$exported") <(echo "$declared"))
[ -z "$extra" ] || echo "exported but not declared with SF_API in $*:" $extra
[ -z "$missing" ] || echo "declared with SF_API in $* but not exported:" $missing
[ -z "$extra$missing" ] || exit 1
echo "ok: $(echo "$exported" | wc -l) exported functions, all declared in $*"
