#!/usr/bin/env bash
# Starts a Docker engine when none answers (a CI machine or a fresh box without systemd); prints where it logs.
set -euo pipefail
. "$(dirname "$0")/one-at-a-time.sh"  # waits while another caller runs an engine script
if docker info >/dev/null 2>&1; then exit 0; fi
command -v dockerd >/dev/null || { echo "dockerd not installed (apt-get install docker.io)" >&2; exit 1; }
log=${DOCKERD_LOG:-/tmp/competition-runner-dockerd.log}
# A daemon serves the whole machine: it must not inherit the caller's CPU affinity (a test worker pinned to one core
# started an engine that refused every container asking for two CPUs).
cores=$(cat /sys/devices/system/cpu/online 2>/dev/null || true)
pin=()
if [ -n "$cores" ] && command -v taskset >/dev/null; then pin=(taskset -c "$cores"); fi
nohup "${pin[@]}" dockerd --storage-driver=overlay2 >"$log" 2>&1 9>&- &
for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && exit 0; sleep 0.5; done
echo "dockerd did not answer within 30 s; see $log" >&2
exit 1
