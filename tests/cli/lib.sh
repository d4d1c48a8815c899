# lib.sh — shared by the CLI tests (sourced): arguments, a fresh work directory, running `spikefuse` with its exit
# code and output captured, checks that count, and the closing "<name>: N passed, N failed" line.
# Every test script is run by ctest as: bash tests/cli/cli_X.sh SPIKEFUSE PYTHON WORKDIR
set -u
SF=$1
PY=$2
WORK=$3
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TEST_NAME=$(basename "$0" .sh)
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK" || exit 2
passed=0
failed=0

ok() { passed=$((passed + 1)); }
bad() {
    failed=$((failed + 1))
    echo "FAIL: $*" >&2
}

# check DESCRIPTION COMMAND...: passes when the command succeeds.
check() {
    local desc=$1
    shift
    if "$@"; then ok; else bad "$desc"; fi
}

# sf EXPECTED NAME ARGS...: runs spikefuse ARGS with stdout in NAME.out and stderr in NAME.err; checks the exit code.
sf() {
    local expected=$1 name=$2
    shift 2
    "$SF" "$@" >"$name.out" 2>"$name.err"
    local rc=$?
    if [ "$rc" -eq "$expected" ]; then
        ok
    else
        bad "$name: spikefuse $* exited $rc, expected $expected; stderr: $(head -c 600 "$name.err")"
    fi
}

# has NAME FILE TEXT: FILE contains TEXT (fixed string).
has() {
    if grep -qF -- "$3" "$2"; then ok; else bad "$1: '$3' not in $2: $(head -c 600 "$2")"; fi
}

# data DIR [make_idx.py options]: writes the tiny synthetic data set.
data() {
    "$PY" "$HERE/make_idx.py" "$@" || bad "make_idx.py $*"
}

# json_field FILE TYPE FIELD: the FIELD of every metrics.jsonl line of that "type", one per line, as written.
json_field() {
    "$PY" - "$1" "$2" "$3" <<'PYEOF'
import json, sys
path, kind, field = sys.argv[1:4]
with open(path) as f:
    for line in f:
        o = json.loads(line)
        if o.get("type") == kind:
            print(repr(o[field]))
PYEOF
}

# wait_for PATH: waits (up to 10 s) until PATH exists and is not empty, e.g. for a run started in the background.
wait_for() {
    for _ in $(seq 1 1000); do
        [ -s "$1" ] && return 0
        sleep 0.01
    done
    return 1
}

# stop_after NAME RUN LINES ARGS...: starts spikefuse ARGS (a train writing into RUN) in the background with stdout in
# NAME.out and stderr in NAME.err, sends it SIGINT once RUN/metrics.jsonl has LINES lines (or after 5 s), and leaves
# its exit code in $rc.
stop_after() {
    local name=$1 dir=$2 lines=$3
    shift 3
    "$SF" "$@" >"$name.out" 2>"$name.err" &
    local pid=$!
    for _ in $(seq 1 500); do
        [ -s "$dir/metrics.jsonl" ] && [ "$(wc -l <"$dir/metrics.jsonl")" -ge "$lines" ] && break
        sleep 0.01
    done
    kill -INT "$pid"
    wait "$pid"
    rc=$?
}

finish() {
    echo "$TEST_NAME: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
