#!/usr/bin/env bash
# Runs a Temporal server with PostgreSQL persistence on this machine, without Docker, in the foreground until Ctrl-C:
# Debian's PostgreSQL on a private data directory, temporal-server and temporal-sql-tool built once from Go
# (scripts/ensure-temporal-server.sh), namespace `default` and the FanoutName search attribute ready.
#
#   scripts/temporal-cluster.sh                      # plaintext, state in a temporary directory removed on exit
#   scripts/temporal-cluster.sh --tls                # frontend over TLS with a freshly generated private CA
#   scripts/temporal-cluster.sh --data-dir ~/fanout-cluster   # keep the state across runs
#
# It prints the address and the TEMPORAL_* variables that point `fanout worker` / `fanout run` at it.
# Uses dist/ when built (npm run build), else runs src/ through tsx.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

tls=false
data_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tls) tls=true ;;
    --data-dir) data_dir="${2:?--data-dir needs a directory}"; shift ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

program='
const { startTemporalCluster } = require(process.env.FANOUT_CLUSTER_MODULE);
(async () => {
  const options = { tls: process.env.FANOUT_CLUSTER_TLS === "true" };
  if (process.env.FANOUT_CLUSTER_DATA_DIR) options.dataDir = process.env.FANOUT_CLUSTER_DATA_DIR;
  const started = Date.now();
  const cluster = await startTemporalCluster(options);
  const lines = [
    `Temporal (PostgreSQL on port ${cluster.postgres.port}) ready in ${Date.now() - started} ms; Ctrl-C stops it`,
    `  TEMPORAL_ADDRESS=${cluster.address}`,
    `  TEMPORAL_NAMESPACE=${cluster.namespace}`,
  ];
  if (cluster.tls) {
    lines.push(`  TEMPORAL_TLS_SERVER_CA_CERT_PATH=${cluster.tls.caPath}`, `  TEMPORAL_TLS_SERVER_NAME=${cluster.tls.serverName}`);
  }
  lines.push(`  logs and data: ${cluster.directory}`);
  console.log(lines.join("\n"));
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    cluster.stop().then(() => process.exit(0), (error) => { console.error(error); process.exit(1); });
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
})().catch((error) => { console.error(error instanceof Error ? error.message : error); process.exit(1); });
'

export FANOUT_CLUSTER_TLS="$tls" FANOUT_CLUSTER_DATA_DIR="$data_dir"
if [ -f "$root/dist/local/cluster.js" ]; then
  FANOUT_CLUSTER_MODULE="$root/dist/local/cluster.js" exec node -e "$program"
fi
FANOUT_CLUSTER_MODULE="$root/src/local/cluster.ts" exec "$root/node_modules/.bin/tsx" -e "$program"
