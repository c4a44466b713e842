#!/usr/bin/env bash
# Interleaved A/B: runs each benchmark scenario for two revisions in turn, in one session on one
# machine, so that a change is measured against the code before it under the same noise.
#   bench/ab.sh BASE [HEAD] [-- bench options, e.g. --scenario latency --quick]
# BASE and HEAD are git revisions (HEAD defaults to the working tree's HEAD). Each gets a detached
# worktree under a temporary folder that shares this checkout's node_modules. Rounds alternate
# which side goes first. The results are copied to bench/results/ab/ and summarized at the end.
set -euo pipefail
top=$(git rev-parse --show-toplevel)
cd "$top"
[ $# -ge 1 ] || { sed -n '2,7p' "$0"; exit 2; }
base=$(git rev-parse --short "$1"); shift
head=$(git rev-parse --short HEAD)
if [ $# -ge 1 ] && [ "$1" != "--" ]; then head=$(git rev-parse --short "$1"); shift; fi
[ "${1:-}" = "--" ] && shift
rounds=${AB_ROUNDS:-1}
scenarios=${AB_SCENARIOS:-"throughput latency process backlog idle"}
suffix=""; case " $* " in *" --quick "*) suffix=".quick" ;; esac
work=$(mktemp -d)
out="$top/bench/results/ab"
mkdir -p "$out"
cleanup() { for rev in "$base" "$head"; do git worktree remove --force "$work/$rev" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
for rev in "$base" "$head"; do
  git worktree add --detach -q "$work/$rev" "$rev"
  ln -s "$top/node_modules" "$work/$rev/node_modules"
  # The peers: bench/node_modules (installed by npm run bench), or the root's for older revisions.
  [ -d "$top/bench/node_modules" ] && ln -s "$top/bench/node_modules" "$work/$rev/bench/node_modules"
done
for round in $(seq 1 "$rounds"); do
  for scenario in $scenarios; do
    order="$base $head"; [ $((round % 2)) -eq 0 ] && order="$head $base"
    for rev in $order; do
      echo "== round $round, $scenario, $rev" >&2
      (cd "$work/$rev" && node --import tsx bench/run.ts --scenario "$scenario" "$@" >&2)
      cp "$work/$rev/bench/results/$scenario$suffix.json" "$out/$rev-r$round-$scenario$suffix.json"
    done
  done
done
node -e '
const fs = require("fs"); const [dir, base, head] = process.argv.slice(1);
const rows = {};
for (const f of fs.readdirSync(dir)) {
  const m = f.match(/^(\w+)-r(\d+)-(\w+)(\.quick)?\.json$/); if (!m) continue;
  const r = JSON.parse(fs.readFileSync(dir + "/" + f));
  for (const [k, v] of Object.entries(r.ratios)) ((rows[m[3] + ": " + k] ??= {})[m[1]] ??= []).push(v);
}
console.log(`| scenario: ratio | ${base} (before) | ${head} (after) |\n|---|---|---|`);
for (const [k, v] of Object.entries(rows).sort()) console.log(`| ${k} | ${(v[base] ?? []).join(", ")} | ${(v[head] ?? []).join(", ")} |`);
' "$out" "$base" "$head"
