# shellcheck shell=bash
# Sourced by scripts/ensure-*.sh: the one way they find a tool, or build it once into a per-user cache.
#
#   find_or_build OVERRIDE PROGRAM CACHED LOCK WHAT
#
# prints the path of a usable install, taken from the first of:
#   1. the environment variable named OVERRIDE, when set (an unusable one is an error, not a reason to look further);
#   2. PROGRAM on PATH;
#   3. CACHED, the install in the cache ($FANOUT_CACHE_DIR);
#   4. a Go build into CACHED, holding the lock file LOCK of the cache so that one build of a tool runs per machine (a
#      second caller waits, then finds the install). WHAT says in the build's message what is built and how long it takes.
# The cache lives outside the clone, so every clone on this machine (and CI's fresh one) reuses one build.
#
# The sourcing script defines:
#   usable PATH       true when PATH is a complete install
#   unusable_override the message's end when OVERRIDE names something unusable ("is not an executable file")
#   no_go_help        prints, to stdout, what to do when Go is missing
#   build SCRATCH     builds into the empty directory SCRATCH (module and build caches go there too) and prints the
#                     path of the built install inside it
# and may redefine:
#   install_of PATH   the install that PROGRAM found on PATH belongs to (default: PATH itself)

FANOUT_CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/temporal-fanout"

# A build step that fails inside build's command substitution must stop the script too.
shopt -s inherit_errexit

# The default; a script redefines it after sourcing this file.
install_of() { echo "$1"; }

find_or_build() {
  local override="$1" program="$2" cached="$3" lock="$4" what="$5"
  local value="${!override:-}" on_path

  if [ -n "$value" ]; then
    if usable "$value"; then echo "$value"; return 0; fi
    echo "$override is set to '$value', $(unusable_override)" >&2
    return 1
  fi
  if on_path="$(command -v "$program" 2>/dev/null)" && usable "$(install_of "$on_path")"; then
    install_of "$on_path"
    return 0
  fi
  if usable "$cached"; then echo "$cached"; return 0; fi

  if ! command -v go >/dev/null 2>&1; then
    no_go_help >&2
    return 1
  fi

  mkdir -p "$FANOUT_CACHE_DIR"
  exec 9>"$FANOUT_CACHE_DIR/$lock"
  flock 9
  if usable "$cached"; then echo "$cached"; return 0; fi

  echo "Building $what..." >&2
  # Global, not local: the EXIT trap runs after this function has returned.
  fanout_scratch="$(mktemp -d "${TMPDIR:-/tmp}/$program-build.XXXXXX")"
  trap 'chmod -R u+w "$fanout_scratch" 2>/dev/null; rm -rf "$fanout_scratch"' EXIT
  local built
  built="$(build "$fanout_scratch")"
  # Rename into place so an interrupted build never leaves a half-written install under the final name. Whatever
  # stands there is not usable (checked under the lock), so it is ours to replace.
  rm -rf "$cached.tmp.$$" "$cached"
  mv "$built" "$cached.tmp.$$"
  mv "$cached.tmp.$$" "$cached"
  echo "$cached"
}
