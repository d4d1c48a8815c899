# cli_signals.sh — one SIGTERM stops `spikefuse train` promptly while it loads its data (the phase that used to go on
# for minutes, until a second signal): DVS128 Gesture files written here whose training list names one 16 MB
# recording 2000 times, which takes tens of seconds to read. The first signal must end the process within seconds
# with exit 130, leaving the run directory as a clean interrupt does: a new run leaves none, a resumed run's files
# stay as they were and --resume still continues it.
. "$(dirname "$0")/lib.sh"

# gesture DIR EVENTS REPEATS: a recording of EVENTS events (the labelled gestures in its first 100, the rest one
# repeated event after them), its labels, and a training list naming it REPEATS times
gesture() {
    "$PY" - "$@" <<'PY'
import os, struct, sys
root, n, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(root, exist_ok=True)
pol = lambda x, y, p, t: struct.pack("<II", (x << 17) | (y << 2) | (p << 1) | 1, t)
first = b"".join(pol(i * 9 % 128, i * 13 % 128, i & 1, 1000 + i) for i in range(100))
head = b"#!AER-DAT3.1\r\n#!END-HEADER\r\n" + struct.pack("<hhiiiiii", 1, 0, 8, 4, 0, n, n, n)
open(f"{root}/user01_led.aedat", "wb").write(head + first + pol(5, 5, 0, 2000000) * (n - 100))
with open(f"{root}/user01_led_labels.csv", "w") as f:
    f.write("class,startTime_usec,endTime_usec\r\n")
    for c in range(11):
        f.write(f"{c + 1},{1000 + 9 * c},{1009 + 9 * c}\r\n")
open(f"{root}/trials_to_train.txt", "w").write("user01_led.aedat\n" * repeats)
open(f"{root}/trials_to_test.txt", "w").write("user01_led.aedat\n")
PY
}
gesture "$WORK/slow" 2000000 2000
gesture "$WORK/fast" 200 2
cat >g.ini <<INI
[train]
dataset = dvsgesture
data_dir = $WORK/fast
epochs = 1
batch = 8
timesteps = 2
downsample = 8
[flatten]
[linear]
out = 11
INI

# term NAME ARGS...: starts spikefuse ARGS, sends one SIGTERM after 1.5 s (it is loading then), and records in
# $rc the exit code and in $took the seconds from the signal to the exit (it is killed after 60 s)
term() {
    local name=$1
    shift
    "$SF" "$@" >"$name.out" 2>"$name.err" &
    local pid=$!
    sleep 1.5
    local t0
    t0=$(date +%s.%N)
    kill -TERM "$pid"
    for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid"
    rc=$?
    took=$("$PY" -c "import sys; print(round($(date +%s.%N) - $t0, 2))")
}

term fresh train g.ini --set train.data_dir="$WORK/slow" --out run_fresh
check "one SIGTERM while loading ends a new run with exit 130 (got $rc; stderr: $(head -c 300 fresh.err))" test "$rc" -eq 130
check "... within 5 s of the signal (took $took s)" "$PY" -c "import sys; sys.exit(0 if $took < 5 else 1)"
has "it says nothing was written" fresh.err "interrupted before the run's first checkpoint"
check "a new run interrupted while loading leaves no run directory" test ! -e run_fresh

sf 0 first train g.ini --out run
sums() { (cd run && sha256sum -- *) }
before=$(sums)
term resumed train --resume run --set train.data_dir="$WORK/slow" --set train.epochs=2
check "one SIGTERM while a resumed run loads ends it with exit 130 (got $rc; stderr: $(head -c 300 resumed.err))" \
    test "$rc" -eq 130
check "... within 5 s of the signal (took $took s)" "$PY" -c "import sys; sys.exit(0 if $took < 5 else 1)"
has "it says how to continue" resumed.err "continue with: spikefuse train --resume run"
check "the resumed run's files are as they were" test "$(sums)" = "$before"
sf 0 again train --resume run --set train.epochs=2
has "the run continues afterwards" again.out "after 2 epochs"
finish
