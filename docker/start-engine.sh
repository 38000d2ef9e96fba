#!/usr/bin/env bash
# Starts a Docker engine when none answers (a CI machine or a fresh box without systemd); prints where it logs.
set -euo pipefail
if docker info >/dev/null 2>&1; then exit 0; fi
command -v dockerd >/dev/null || { echo "dockerd not installed (apt-get install docker.io)" >&2; exit 1; }
log=${DOCKERD_LOG:-/tmp/competition-runner-dockerd.log}
nohup dockerd --storage-driver=overlay2 >"$log" 2>&1 &
for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && exit 0; sleep 0.5; done
echo "dockerd did not answer within 30 s; see $log" >&2
exit 1
