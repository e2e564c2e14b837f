#!/usr/bin/env bash
# Installs what the test suite needs beyond npm packages, once per machine:
#   - the Temporal CLI (its dev server is the real server the tests run against), cached per user;
#   - Debian's docker-compose, which validates docker-compose.yml without a Docker engine.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

bash "$here/ensure-temporal.sh" >/dev/null

if ! command -v docker-compose >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing docker-compose (Debian package) to validate docker-compose.yml ..." >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null
  else
    echo "docker-compose is missing: install it (e.g. apt-get install docker-compose) to run the compose test" >&2
    exit 1
  fi
fi
