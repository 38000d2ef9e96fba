#!/usr/bin/env bash
# Installs what the container tests need when it is missing: Debian's Docker engine and debootstrap. Needs root
# and apt; otherwise says why, and the container tests skip with that reason.
set -uo pipefail
. "$(dirname "$0")/one-at-a-time.sh"  # waits while another caller runs an engine script
if command -v dockerd >/dev/null && command -v debootstrap >/dev/null; then exit 0; fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "docker/install-engine.sh: not root or no apt-get: dockerd/debootstrap not installed" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null 9>&- && apt-get install -y -qq docker.io debootstrap >/dev/null 9>&- \
    || echo "docker/install-engine.sh: apt-get could not install docker.io debootstrap" >&2
exit 0
