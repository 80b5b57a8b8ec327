#!/usr/bin/env bash
# The whole suite N times in a row (default 5) while two busy loops keep both cores busy (issue 12):
# a fresh clone of this repository with its own virtual environment, installed as the README says.
#   scripts/loaded_suite.sh [runs] [clone-dir]
set -uo pipefail
runs=${1:-5}
dir=${2:-$(mktemp -d /tmp/loaded-XXXXXX)}
repo=$(cd "$(dirname "$0")/.." && pwd)
[ -d "$dir/.git" ] || git clone -q "$repo" "$dir"
cd "$dir" && python3 -m venv .venv && . .venv/bin/activate && pip install -q -e ".[dev,all]" || exit 1
yes > /dev/null & b1=$!
yes > /dev/null & b2=$!
trap 'kill $b1 $b2' EXIT
echo "clone $(git rev-parse --short HEAD), two busy loops: $b1 $b2"
for i in $(seq 1 "$runs"); do
  start=$(date +%s)
  timeout 2400 pytest -q -p no:cacheprovider > "$dir/run_$i.txt" 2>&1
  echo "run $i: exit $?, $(( $(date +%s) - start )) s, $(tail -1 "$dir/run_$i.txt")"
done
