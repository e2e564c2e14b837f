#!/usr/bin/env bash
# Installs what the test suite needs beyond npm packages, once per machine:
#   - the Temporal CLI (its dev server is the real server the tests run against), cached per user;
#   - temporal-server and temporal-sql-tool with their schema (the PostgreSQL cluster tests), cached per user;
#   - SeaweedFS's weed (the real S3-compatible server the payload-store tests run against), cached per user;
#   - Jaeger (the real trace store test/tracing.test.ts exports to and reads back from), cached per user;
#   - Arize Phoenix (the LLM trace viewer whose UI test/trace-viewer.test.ts opens), a pip install cached per user;
#   - Debian's docker-compose, which validates docker-compose.yml without a Docker engine;
#   - Debian's chromium, which the Temporal UI test drives through playwright-core;
#   - Debian's postgresql, the database of that cluster (run from a private data directory, not the system service);
#   - Debian's prometheus, which scrapes a worker and answers the Grafana dashboard's queries (test/metrics.test.ts).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

# The four Go builds and the pip install are independent; on a fresh machine they run side by side (each holds its own lock), which cuts
# the first run from about 25 minutes to the longest one. Each prints why it failed; any failure stops the suite.
pids=()
for script in ensure-temporal.sh ensure-temporal-server.sh ensure-seaweedfs.sh ensure-jaeger.sh ensure-phoenix.sh; do
  bash "$here/$script" >/dev/null &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done

missing=()
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
[ -x "${CHROMIUM_PATH:-/usr/bin/chromium}" ] || missing+=(chromium)
[ -n "${POSTGRES_BIN_DIR:-}" ] || compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null || missing+=(postgresql)
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing ${missing[*]} (Debian packages) for the test suite ..." >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "missing: ${missing[*]}; install them (e.g. apt-get install ${missing[*]}) to run the whole suite" >&2
    exit 1
  fi
fi
