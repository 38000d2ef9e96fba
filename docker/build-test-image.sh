#!/usr/bin/env bash
# Builds the local test image `competition-runner-local` with no registry: a Debian base made with debootstrap and
# `docker import`, carrying only the shared libraries a host Python needs. The runner's Python, virtual
# environment and source are bind-mounted read-only at their host paths by the docker backend (host_python mode).
# The imported base is cached as a gzip tarball so later runs load it in seconds.
set -euo pipefail
. "$(dirname "$0")/one-at-a-time.sh"  # waits while another caller runs an engine script
IMAGE=${IMAGE:-competition-runner-local}
CACHE=${RUNNER_IMAGE_CACHE:-$HOME/.cache/competition-runner}
MIRROR=${DEBIAN_MIRROR:-$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
LIBS=libssl3,libsqlite3-0,libffi8,zlib1g,libbz2-1.0,liblzma5,libreadline8,libncursesw6,libgomp1,ca-certificates

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "$IMAGE: present"
    exit 0
fi
mkdir -p "$CACHE"
if [ -f "$CACHE/$IMAGE.tar.gz" ]; then
    gunzip -c "$CACHE/$IMAGE.tar.gz" | docker load
    exit 0
fi
rootfs=$(mktemp -d)
trap 'rm -rf "$rootfs"' EXIT
debootstrap --variant=minbase --include="$LIBS" bookworm "$rootfs" "$MIRROR" >/dev/null
chroot "$rootfs" useradd --uid 1000 --create-home runner
chmod 0755 "$rootfs/root"  # the host Python is mounted under /root on machines where it lives there
tar -C "$rootfs" -c . | docker import --change 'USER 1000' --change 'WORKDIR /home/runner' - "$IMAGE" >/dev/null
docker save "$IMAGE" | gzip -1 > "$CACHE/$IMAGE.tar.gz"
echo "$IMAGE: built"
