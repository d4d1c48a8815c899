#!/bin/sh
# Runs every fixture generator tests/ref/gen_*.py with the given Python into the given directory.
set -eu
py="$1"; out="$2"
here=$(cd "$(dirname "$0")" && pwd)
if ! "$py" -c "import torch" 2>/dev/null; then
  echo "fixtures: '$py' cannot import torch; install it with: apt-get install python3-torch" >&2
  exit 1
fi
mkdir -p "$out"
for g in "$here"/gen_*.py; do
  [ -e "$g" ] || continue
  "$py" "$g" "$out"
done
