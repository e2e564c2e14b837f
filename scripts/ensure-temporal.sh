#!/usr/bin/env bash
# Prints the path of a Temporal CLI binary (which carries the dev server), building it once if needed.
# Order: $TEMPORAL_CLI, a `temporal` on PATH, the per-user cache, else `go install` into that cache (lib/find-or-build.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/find-or-build.sh"

version="${TEMPORAL_CLI_VERSION:-v1.5.1}"

usable() { [ -x "$1" ]; }
unusable_override() { echo 'which is not an executable file'; }
no_go_help() {
  cat <<MSG
No Temporal CLI found and Go is not installed to build one. Any of these works:
  - brew install temporal
  - download a release binary from Temporal's CLI releases and set TEMPORAL_CLI=/path/to/temporal
  - install Go 1.22+ and run this script again (it builds github.com/temporalio/cli@$version)
  - run the full stack with Docker instead: docker compose up
MSG
}
build() {
  GOBIN="$1/bin" GOMODCACHE="$1/mod" GOCACHE="$1/cache" GOFLAGS=-modcacherw \
    go install "github.com/temporalio/cli/cmd/temporal@$version" >&2
  echo "$1/bin/temporal"
}

find_or_build TEMPORAL_CLI temporal "$FANOUT_CACHE_DIR/temporal-$version" .build.lock \
  "the Temporal CLI $version once into $FANOUT_CACHE_DIR (a few minutes, ~1.8 GB of modules)"
