#!/bin/bash
# The CPU of starting `fanout worker` and of one client command, for builds side by side (docs/BENCHMARKS.md, "A
# worker's and a CLI command's start").
#
#   bash bench/start-cpu.sh ADDRESS ROUNDS CHECKOUT...
#
# ADDRESS is a running Temporal server (`temporal server start-dev --headless --port 7655` gives 127.0.0.1:7655); each
# CHECKOUT is a directory with a built dist/ (and node_modules). Every round starts, from each checkout in turn (so all
# see the same load):
#   - `fanout worker` on a task queue of its own, stopped (SIGTERM) once it prints `worker polling`: the launcher's and
#     its re-launched child's utime + stime at that moment, from /proc/PID/stat (clock ticks, 10 ms);
#   - `fanout status <a run that does not exist>` and `fanout list`: the process's user + system CPU at its exit, from
#     process.cpuUsage() in a preloaded module (so to the tenth of a ms).
# It prints each one's figures and their median.
set -euo pipefail
address=$1 rounds=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/cpu-at-exit.js" <<'EOF'
process.on('exit', () => {
  const { user, system } = process.cpuUsage();
  require('node:fs').appendFileSync(process.env.START_CPU_OUT, `${((user + system) / 1000).toFixed(1)}\n`);
});
EOF
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
for round in $(seq 1 "$rounds"); do
  for checkout in "$@"; do
    key=$(basename "$checkout")
    output=$work/worker.out
    : > "$output"
    (cd "$checkout" && OPENAI_API_KEY=unused exec node dist/cli/main.js worker --address "$address" \
      --task-queue "start-cpu-$round-$RANDOM" > "$output" 2>&1) &
    launcher=$!
    until grep -q 'worker polling' "$output"; do
      kill -0 "$launcher" 2> /dev/null || { cat "$output"; exit 1; }
      sleep 0.05
    done
    child=$(pgrep -P "$launcher" | head -1)
    echo "scale=0; ($(ticks "$launcher") + $(ticks "$child")) * 10 / 1" | bc >> "$work/$key worker"
    kill -TERM "$launcher"
    wait "$launcher" || true
    for command in 'status no-such-run' 'list'; do
      # shellcheck disable=SC2086 # the command's words
      (cd "$checkout" && START_CPU_OUT="$work/$key ${command%% *}" node -r "$work/cpu-at-exit.js" dist/cli/main.js \
        $command --address "$address" > /dev/null 2>&1) || true
    done
  done
done
for file in "$work"/*' '*; do
  echo "$(basename "$file") (ms): $(tr '\n' ' ' < "$file")| median $(sort -n "$file" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')"
done
uptime
