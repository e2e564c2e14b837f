#!/usr/bin/env bash
# Prints a directory holding a full Temporal server install: `temporal-server`, `temporal-sql-tool` and
# `schema/postgresql/` (the versioned SQL the schema tool applies), building it once if needed.
# Order: $TEMPORAL_SERVER_HOME, a `temporal-server` on PATH with `temporal-sql-tool` and `schema/` beside it,
# the per-user cache, else `go install` of go.temporal.io/server into that cache.
# The cache lives outside the clone (like ensure-temporal.sh) so every clone on this machine reuses one build.
# The schema comes from the same module version as the binaries: a server only accepts the schema it was built for.
set -euo pipefail

version="${TEMPORAL_SERVER_VERSION:-v1.29.1}"
cache_dir="${XDG_CACHE_HOME:-$HOME/.cache}/temporal-fanout"
cached="$cache_dir/temporal-server-$version"

complete() {
  [ -x "$1/temporal-server" ] && [ -x "$1/temporal-sql-tool" ] && [ -d "$1/schema/postgresql/v12/temporal/versioned" ]
}

if [ -n "${TEMPORAL_SERVER_HOME:-}" ]; then
  if complete "$TEMPORAL_SERVER_HOME"; then echo "$TEMPORAL_SERVER_HOME"; exit 0; fi
  echo "TEMPORAL_SERVER_HOME is '$TEMPORAL_SERVER_HOME', which lacks temporal-server, temporal-sql-tool or schema/postgresql" >&2
  exit 1
fi
if on_path="$(command -v temporal-server 2>/dev/null)" && complete "$(dirname "$on_path")"; then
  dirname "$on_path"
  exit 0
fi
if complete "$cached"; then echo "$cached"; exit 0; fi

if ! command -v go >/dev/null 2>&1; then
  cat >&2 <<MSG
No Temporal server found and Go is not installed to build one. Either:
  - unpack a Temporal server release ($version) with the schema directory from its source tree into one
    directory and set TEMPORAL_SERVER_HOME to it
  - install Go 1.24+ and run this script again (it builds go.temporal.io/server@$version)
MSG
  exit 1
fi

mkdir -p "$cache_dir"
# One build at a time per machine; its own lock so a CLI build (ensure-temporal.sh) is not held up by this one.
exec 9>"$cache_dir/.build-server.lock"
flock 9
if complete "$cached"; then echo "$cached"; exit 0; fi

echo "Building temporal-server and temporal-sql-tool $version once into $cached (several minutes)..." >&2
scratch="$(mktemp -d "${TMPDIR:-/tmp}/temporal-server-build.XXXXXX")"
trap 'chmod -R u+w "$scratch" 2>/dev/null; rm -rf "$scratch"' EXIT
GOBIN="$scratch/bin" GOMODCACHE="$scratch/mod" GOCACHE="$scratch/cache" GOFLAGS=-modcacherw \
  go install "go.temporal.io/server/cmd/server@$version" "go.temporal.io/server/cmd/tools/sql@$version" >&2

staged="$scratch/stage"
mkdir -p "$staged/schema"
mv "$scratch/bin/server" "$staged/temporal-server"
mv "$scratch/bin/sql" "$staged/temporal-sql-tool"
cp -R "$scratch/mod/go.temporal.io/server@$version/schema/postgresql" "$staged/schema/postgresql"
chmod -R u+w,go+rX "$staged"
# Rename into place so an interrupted build never leaves a half-filled directory under the final name.
# An incomplete directory left by an older, interrupted layout would swallow the rename; it is ours to replace.
rm -rf "$cached.tmp.$$" "$cached"
mv "$staged" "$cached.tmp.$$"
mv "$cached.tmp.$$" "$cached"
echo "$cached"
