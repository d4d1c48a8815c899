# cli_report_browser.sh — the report page in a real browser: headless chromium (Debian `chromium`) loads
# run/report.html of a tiny run, its DOM holds every figure as an SVG element, and its screenshot shows them (the
# colours of the test-accuracy curve and of the spikes are on screen). Skipped (77) where chromium is not installed.
. "$(dirname "$0")/lib.sh"
command -v chromium >/dev/null || { echo "$TEST_NAME: skipped: chromium is not installed"; exit 77; }
# chromium as root needs --no-sandbox; no GPU, no first-run or crash dialogs, a fixed window
browser() {
    timeout 120 chromium --headless --no-sandbox --disable-gpu --no-first-run --disable-crash-reporter \
        --hide-scrollbars --user-data-dir="$WORK/profile" "$@" 2>>browser.err
}

data data --gzip
sf 0 train train "$HERE/tiny_mlp.ini" --set train.data_dir="$WORK/data" --out run --report
browser --dump-dom "file://$WORK/run/report.html" >dom.html
check "the browser's DOM holds the 8 figures as SVG elements" test "$(grep -o '<svg' dom.html | wc -l)" -eq 8
has "the DOM has the numbers" dom.html "best test accuracy"
browser --window-size=1000,5200 --screenshot="$WORK/shot.png" "file://$WORK/run/report.html" >/dev/null
check "a screenshot was written" test -s shot.png
# the test-accuracy curve (palette 1, #e87812) and the spike cells (#1a294d) as the page shows them
orange=$("$SF_PNG_STATS" shot.png e87812) || bad "shot.png is not a PNG"
navy=$("$SF_PNG_STATS" shot.png 1a294d)
check "the screenshot is 1000x5200 with many colours ($orange)" \
    "$PY" -c "w, h, ink, n, m = '$orange'.split(); import sys; sys.exit(0 if (w, h) == ('1000', '5200') and int(n) > 200 else 1)"
check "the test-accuracy curve is on screen ($orange)" "$PY" -c "import sys; sys.exit(0 if int('$orange'.split()[4]) > 100 else 1)"
check "spikes are on screen ($navy)" "$PY" -c "import sys; sys.exit(0 if int('$navy'.split()[4]) > 100 else 1)"
finish
