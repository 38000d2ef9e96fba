# Sourced by the engine scripts: one caller at a time. `make test` runs them in the background while the container
# tests' fixture may run them too; a second caller waits here for the first, then finds its work done. A process
# that outlives its script (the daemon, a service apt starts) must not hold the lock: it is started with fd 9 closed.
exec 9>>"${ENGINE_LOCK:-/tmp/competition-runner-engine.lock}"
if command -v flock >/dev/null; then flock -w 900 9 || true; fi  # 15 min: past that, a holder is stuck, not busy
