#!/usr/bin/env bash
# Prints the path of a SeaweedFS `weed` binary (the S3-compatible server the payload-store tests run against),
# building it once if needed.
# Order: $SEAWEEDFS_WEED, a `weed` on PATH, the per-user cache, else a Go build into that cache.
# The cache lives outside the clone so every clone (and CI's fresh one) on this machine reuses it.
set -euo pipefail

version="${SEAWEEDFS_VERSION:-v0.0.0-20261109003541-7506e5f91cd6}"
module="github.com/seaweedfs/seaweedfs"
cache_dir="${XDG_CACHE_HOME:-$HOME/.cache}/temporal-fanout"
cached="$cache_dir/weed-$version"

if [ -n "${SEAWEEDFS_WEED:-}" ]; then
  if [ -x "$SEAWEEDFS_WEED" ]; then echo "$SEAWEEDFS_WEED"; exit 0; fi
  echo "SEAWEEDFS_WEED is set to '$SEAWEEDFS_WEED', which is not an executable file" >&2
  exit 1
fi
if on_path="$(command -v weed 2>/dev/null)"; then echo "$on_path"; exit 0; fi
if [ -x "$cached" ]; then echo "$cached"; exit 0; fi

if ! command -v go >/dev/null 2>&1; then
  cat >&2 <<MSG
No SeaweedFS 'weed' binary found and Go is not installed to build one. Any of these works:
  - download a SeaweedFS release binary and set SEAWEEDFS_WEED=/path/to/weed (or put 'weed' on PATH)
  - install Go 1.26+ and run this script again (it builds $module/weed@$version)
MSG
  exit 1
fi

mkdir -p "$cache_dir"
# One build at a time per machine: a second caller waits for the first, then finds the binary.
# A lock of its own, so a Temporal CLI build and this one do not queue behind each other.
exec 9>"$cache_dir/.build-weed.lock"
flock 9
if [ -x "$cached" ]; then echo "$cached"; exit 0; fi

echo "Building SeaweedFS $version once into $cache_dir (several minutes, ~2 GB of modules)..." >&2
scratch="$(mktemp -d "${TMPDIR:-/tmp}/weed-build.XXXXXX")"
trap 'chmod -R u+w "$scratch" 2>/dev/null; rm -rf "$scratch"' EXIT
export GOMODCACHE="$scratch/mod" GOCACHE="$scratch/cache" GOFLAGS="-modcacherw -buildvcs=false" CGO_ENABLED=0
# `go install module/weed@version` refuses modules whose go.mod has replace directives, and SeaweedFS's does.
# So fetch the module source and build inside it: there it is the main module and its replace lines apply.
source_dir="$(go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
if [ -z "$source_dir" ] || [ ! -d "$source_dir/weed" ]; then
  echo "could not download $module@$version from the Go module proxy" >&2
  exit 1
fi
(cd "$source_dir" && go build -trimpath -ldflags "-s -w" -o "$scratch/bin/weed" ./weed) >&2
# Rename into place so an interrupted build never leaves a half-written binary under the final name.
mv "$scratch/bin/weed" "$cached.tmp.$$"
mv "$cached.tmp.$$" "$cached"
echo "$cached"
