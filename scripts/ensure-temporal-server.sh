#!/usr/bin/env bash
# Prints a directory holding a full Temporal server install: `temporal-server`, `temporal-sql-tool` and
# `schema/postgresql/` (the versioned SQL the schema tool applies), building it once if needed.
# Order: $TEMPORAL_SERVER_HOME, a `temporal-server` on PATH with `temporal-sql-tool` and `schema/` beside it,
# the per-user cache, else `go install` of go.temporal.io/server into that cache (lib/find-or-build.sh).
# The schema comes from the same module version as the binaries: a server only accepts the schema it was built for.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/find-or-build.sh"

version="${TEMPORAL_SERVER_VERSION:-v1.29.1}"

usable() {
  [ -x "$1/temporal-server" ] && [ -x "$1/temporal-sql-tool" ] && [ -d "$1/schema/postgresql/v12/temporal/versioned" ]
}
install_of() { dirname "$1"; }
unusable_override() { echo 'which lacks temporal-server, temporal-sql-tool or schema/postgresql'; }
no_go_help() {
  cat <<MSG
No Temporal server found and Go is not installed to build one. Either:
  - unpack a Temporal server release ($version) with the schema directory from its source tree into one
    directory and set TEMPORAL_SERVER_HOME to it
  - install Go 1.24+ and run this script again (it builds go.temporal.io/server@$version)
MSG
}
build() {
  GOBIN="$1/bin" GOMODCACHE="$1/mod" GOCACHE="$1/cache" GOFLAGS=-modcacherw \
    go install "go.temporal.io/server/cmd/server@$version" "go.temporal.io/server/cmd/tools/sql@$version" >&2
  local staged="$1/stage"
  mkdir -p "$staged/schema"
  mv "$1/bin/server" "$staged/temporal-server"
  mv "$1/bin/sql" "$staged/temporal-sql-tool"
  cp -R "$1/mod/go.temporal.io/server@$version/schema/postgresql" "$staged/schema/postgresql"
  chmod -R u+w,go+rX "$staged"
  echo "$staged"
}

# Its own lock, so a CLI build (ensure-temporal.sh) is not held up by this one.
find_or_build TEMPORAL_SERVER_HOME temporal-server "$FANOUT_CACHE_DIR/temporal-server-$version" .build-server.lock \
  "temporal-server and temporal-sql-tool $version once into $FANOUT_CACHE_DIR/temporal-server-$version (several minutes)"
