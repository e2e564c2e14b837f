#!/usr/bin/env bash
# Prints the path of Arize Phoenix's `phoenix` command (the LLM trace viewer whose UI test/trace-viewer.test.ts opens in
# Chromium), installing it once per machine into a Python virtual environment in the per-user cache.
# Order: $PHOENIX_BIN, a `phoenix` on PATH, the cache, else `pip install arize-phoenix==$version` into the cache.
set -euo pipefail

version="${PHOENIX_VERSION:-20.26.1}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/temporal-fanout"
venv="$cache/phoenix-$version"

if [ -n "${PHOENIX_BIN:-}" ]; then
  if [ -x "$PHOENIX_BIN" ]; then echo "$PHOENIX_BIN"; exit 0; fi
  echo "PHOENIX_BIN is set to '$PHOENIX_BIN', which is not an executable file" >&2
  exit 1
fi
if on_path="$(command -v phoenix 2>/dev/null)"; then echo "$on_path"; exit 0; fi
if [ -f "$venv/.complete" ]; then echo "$venv/bin/phoenix"; exit 0; fi

if ! command -v python3 >/dev/null 2>&1; then
  cat >&2 <<MSG
No Phoenix found and no python3 to install it. Either works:
  - install Python 3.10+ and run this script again (it installs arize-phoenix==$version into $venv)
  - pip install arize-phoenix and set PHOENIX_BIN=/path/to/phoenix
MSG
  exit 1
fi

mkdir -p "$cache"
exec 9>"$cache/.install-phoenix.lock"
flock 9
if [ -f "$venv/.complete" ]; then echo "$venv/bin/phoenix"; exit 0; fi
echo "Installing Arize Phoenix $version once into $venv (a few minutes)..." >&2
# A virtual environment's scripts name its path, so it is made in place; `.complete` marks a whole one, and a failed
# install is removed so that the next run starts over.
rm -rf "$venv"
trap '[ -f "$venv/.complete" ] || rm -rf "$venv"' EXIT
python3 -m venv "$venv" >&2
"$venv/bin/pip" install --quiet --disable-pip-version-check "arize-phoenix==$version" >&2
touch "$venv/.complete"
echo "$venv/bin/phoenix"
