# learning_setup.sh — the start the GPU learning scripts beside it share. Sourced after `set -u -o pipefail` as
# `. "$(dirname "$0")/learning_setup.sh" OUT_NAME "$@"`: with fewer than two script arguments it prints the calling
# script's header (its usage) and exits 2; else sf is the spikefuse CLI in BIN_DIR (the first argument) and data
# DATA_DIR (the second) as absolute paths, the working directory is the repository root, OUT (default ./OUT_NAME)
# exists, SJ_SITE defaults to /tmp/sj14, and a line with the date and the GPU is printed. SF_CLI_NEEDED=0: BIN_DIR
# may lack the CLI (a script that runs only SpikingJelly's side).
setup_out_name=$1
shift
if [ $# -lt 2 ]; then
    sed -n '2,/^set -u/p' "$0" | sed '$d'
    exit 2
fi
sf=$(realpath "$1")/spikefuse
data=$(realpath "$2")
SJ_SITE=${SJ_SITE:-/tmp/sj14}
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/$setup_out_name}
mkdir -p "$OUT"
[ -x "$sf" ] || [ "${SF_CLI_NEEDED:-1}" = 0 ] || { echo "no spikefuse CLI in $1"; exit 2; }
echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
