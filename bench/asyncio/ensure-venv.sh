#!/usr/bin/env bash
# Prints the python of a venv with the openai client, for bench/asyncio (the seed guide's semaphore pattern).
# The venv lives in the per-user cache so every clone on this machine shares it; it is made once, under a lock, and
# marked ready only after pip has finished, so an interrupted install is redone instead of half-used.
# Exits 3 with a note when no python3 with venv is installed.
set -euo pipefail

openai_version="${BENCH_OPENAI_PY_VERSION:-3.57.0}"
cache_dir="${XDG_CACHE_HOME:-$HOME/.cache}/temporal-fanout"
venv="$cache_dir/bench-venv"
marker="$venv/.ready-openai-$openai_version"

if [ -f "$marker" ]; then echo "$venv/bin/python"; exit 0; fi
python="$(command -v python3 || true)"
if [ -z "$python" ] || ! "$python" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  echo "python3 with the venv module is not installed; the asyncio baseline is skipped" >&2
  exit 3
fi

mkdir -p "$cache_dir"
exec 9>"$cache_dir/.bench-venv.lock"
flock 9
if [ -f "$marker" ]; then echo "$venv/bin/python"; exit 0; fi
rm -rf "$venv"
echo "Creating $venv with openai==$openai_version (once per machine)..." >&2
"$python" -m venv "$venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "openai==$openai_version" >&2
touch "$marker"
echo "$venv/bin/python"
