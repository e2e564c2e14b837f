#!/usr/bin/env bash
# Prints the path of a Jaeger all-in-one binary (the trace store test/tracing.test.ts exports spans to and reads them
# back from), building it once if needed.
# Order: $JAEGER_BIN, a `jaeger` on PATH, the per-user cache, else `go install` into that cache (lib/find-or-build.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/find-or-build.sh"

version="${JAEGER_VERSION:-v1.75.0}"
module="github.com/jaegertracing/jaeger"

usable() { [ -x "$1" ]; }
unusable_override() { echo 'which is not an executable file'; }
no_go_help() {
  cat <<MSG
No Jaeger binary found and Go is not installed to build one. Any of these works:
  - download a Jaeger release (jaeger-$version or later, the all-in-one 'jaeger' binary) and set JAEGER_BIN=/path/to/jaeger
  - install Go 1.24+ and run this script again (it builds $module/cmd/jaeger@$version)
MSG
}
build() {
  export GOMODCACHE="$1/mod" GOCACHE="$1/cache" GOFLAGS="-modcacherw -buildvcs=false" CGO_ENABLED=0
  # `go install module/cmd/jaeger@version` refuses modules whose go.mod has replace directives, and Jaeger's does.
  # So fetch the module source and build inside it: there it is the main module and its replace lines apply.
  local source_dir
  source_dir="$(go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  if [ -z "$source_dir" ] || [ ! -d "$source_dir/cmd/jaeger" ]; then
    echo "could not download $module@$version from the Go module proxy" >&2
    return 1
  fi
  (cd "$source_dir" && go build -trimpath -ldflags "-s -w" -o "$1/bin/jaeger" ./cmd/jaeger) >&2
  echo "$1/bin/jaeger"
}

# Its own lock, so the other builds do not queue behind this one.
find_or_build JAEGER_BIN jaeger "$FANOUT_CACHE_DIR/jaeger-$version" .build-jaeger.lock \
  "Jaeger $version once into $FANOUT_CACHE_DIR (several minutes)"
