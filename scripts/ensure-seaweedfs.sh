#!/usr/bin/env bash
# Prints the path of a SeaweedFS `weed` binary (the S3-compatible server the payload-store tests run against),
# building it once if needed.
# Order: $SEAWEEDFS_WEED, a `weed` on PATH, the per-user cache, else a Go build into that cache (lib/find-or-build.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/find-or-build.sh"

version="${SEAWEEDFS_VERSION:-v0.0.0-20261109003541-7506e5f91cd6}"
module="github.com/seaweedfs/seaweedfs"

usable() { [ -x "$1" ]; }
unusable_override() { echo 'which is not an executable file'; }
no_go_help() {
  cat <<MSG
No SeaweedFS 'weed' binary found and Go is not installed to build one. Any of these works:
  - download a SeaweedFS release binary and set SEAWEEDFS_WEED=/path/to/weed (or put 'weed' on PATH)
  - install Go 1.26+ and run this script again (it builds $module/weed@$version)
MSG
}
build() {
  export GOMODCACHE="$1/mod" GOCACHE="$1/cache" GOFLAGS="-modcacherw -buildvcs=false" CGO_ENABLED=0
  # `go install module/weed@version` refuses modules whose go.mod has replace directives, and SeaweedFS's does.
  # So fetch the module source and build inside it: there it is the main module and its replace lines apply.
  local source_dir
  source_dir="$(go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  if [ -z "$source_dir" ] || [ ! -d "$source_dir/weed" ]; then
    echo "could not download $module@$version from the Go module proxy" >&2
    return 1
  fi
  (cd "$source_dir" && go build -trimpath -ldflags "-s -w" -o "$1/bin/weed" ./weed) >&2
  echo "$1/bin/weed"
}

# Its own lock, so a Temporal CLI build and this one do not queue behind each other.
find_or_build SEAWEEDFS_WEED weed "$FANOUT_CACHE_DIR/weed-$version" .build-weed.lock \
  "SeaweedFS $version once into $FANOUT_CACHE_DIR (several minutes, ~2 GB of modules)"
