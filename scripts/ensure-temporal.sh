#!/usr/bin/env bash
# Prints the path of a Temporal CLI binary (which carries the dev server), building it once if needed.
# Order: $TEMPORAL_CLI, a `temporal` on PATH, the per-user cache, else `go install` into that cache.
# The cache lives outside the clone so every clone (and CI's fresh one) on this machine reuses it.
set -euo pipefail

version="${TEMPORAL_CLI_VERSION:-v1.5.1}"
cache_dir="${XDG_CACHE_HOME:-$HOME/.cache}/temporal-fanout"
cached="$cache_dir/temporal-$version"

if [ -n "${TEMPORAL_CLI:-}" ]; then
  if [ -x "$TEMPORAL_CLI" ]; then echo "$TEMPORAL_CLI"; exit 0; fi
  echo "TEMPORAL_CLI is set to '$TEMPORAL_CLI', which is not an executable file" >&2
  exit 1
fi
if on_path="$(command -v temporal 2>/dev/null)"; then echo "$on_path"; exit 0; fi
if [ -x "$cached" ]; then echo "$cached"; exit 0; fi

if ! command -v go >/dev/null 2>&1; then
  cat >&2 <<MSG
No Temporal CLI found and Go is not installed to build one. Any of these works:
  - brew install temporal
  - download a release binary from Temporal's CLI releases and set TEMPORAL_CLI=/path/to/temporal
  - install Go 1.22+ and run this script again (it builds github.com/temporalio/cli@$version)
  - run the full stack with Docker instead: docker compose up
MSG
  exit 1
fi

mkdir -p "$cache_dir"
# One build at a time per machine: a second caller waits for the first, then finds the binary.
exec 9>"$cache_dir/.build.lock"
flock 9
if [ -x "$cached" ]; then echo "$cached"; exit 0; fi

echo "Building the Temporal CLI $version once into $cache_dir (a few minutes, ~1.8 GB of modules)..." >&2
scratch="$(mktemp -d "${TMPDIR:-/tmp}/temporal-build.XXXXXX")"
trap 'chmod -R u+w "$scratch" 2>/dev/null; rm -rf "$scratch"' EXIT
GOBIN="$scratch/bin" GOMODCACHE="$scratch/mod" GOCACHE="$scratch/cache" GOFLAGS=-modcacherw \
  go install "github.com/temporalio/cli/cmd/temporal@$version" >&2
# Rename into place so an interrupted build never leaves a half-written binary under the final name.
mv "$scratch/bin/temporal" "$cached.tmp.$$"
mv "$cached.tmp.$$" "$cached"
echo "$cached"
