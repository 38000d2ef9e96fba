#!/usr/bin/env bash
# `flows/stack.sh up|down|status|workers`: a local Prefect stack for the runner (server, process workers, deployments),
# with all state under .prefect-stack/ in the project. `make up` / `make down` call this.
set -euo pipefail
cd "$(dirname "$0")/.."
STATE=${RUNNER_STACK_DIR:-$PWD/.prefect-stack}
PORT=${PREFECT_PORT:-4200}
POOL=${RUNNER_POOL:-runner-process}  # the work pool `workers` serve (the deployments name runner-process)
WORKERS=${RUNNER_WORKERS:-2}  # process workers in the one pool: flow runs spread over them as over GPU boxes
BIN=${VENV_BIN:-$PWD/.venv/bin}
export PREFECT_HOME=$STATE/home PREFECT_API_URL=http://127.0.0.1:$PORT/api
export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1 PREFECT_WORKER_QUERY_SECONDS=${PREFECT_WORKER_QUERY_SECONDS:-2}
# the API asks for a password (Prefect's basic auth): made once, readable by this user only, in $STATE/auth
mkdir -p "$STATE" && chmod 700 "$STATE"
[ -s "$STATE/auth" ] || (umask 077 && "${VENV_BIN:-$PWD/.venv/bin}/python" -c \
    "import secrets; print('runner:' + secrets.token_urlsafe(24))" >"$STATE/auth")
export PREFECT_SERVER_API_AUTH_STRING=$(cat "$STATE/auth") PREFECT_API_AUTH_STRING=$(cat "$STATE/auth")

healthy() { "$BIN/python" - "$PREFECT_API_URL/health" <<'PY'
import sys, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=2)
except Exception:
    sys.exit(1)
PY
}

start() {  # name, command...: run in the background, pid and log in $STATE
    local name=$1; shift
    setsid nohup "$@" >"$STATE/$name.log" 2>&1 &
    echo $! >"$STATE/$name.pid"
}

up() {
    mkdir -p "$STATE/home"
    if ! healthy; then
        start server "$BIN/prefect" server start --host 127.0.0.1 --port "$PORT"
        for _ in $(seq 1 120); do healthy && break; sleep 0.5; done
        healthy || { echo "Prefect server did not start; see $STATE/server.log" >&2; exit 1; }
    fi
    "$BIN/prefect" work-pool create runner-process --type process >/dev/null 2>&1 || true
    LEASES=${RUNNER_LEASES-$("$BIN/runner" leases --shell --cpu-leases "${RUNNER_CPU_LEASES:-1}")}
    # launches at once: one per lease on a GPU node (the leases keep them apart), else one (each plans for all)
    SLOTS=$([ -n "$LEASES" ] && echo "$LEASES" | wc -l || echo 1)
    "$BIN/prefect" gcl create runner-slot --limit "$SLOTS" >/dev/null 2>&1 \
        || "$BIN/prefect" gcl update runner-slot --limit "$SLOTS" >/dev/null 2>&1 || true
    # what the deployments' default data_root points at: the two demos and a replica of every Lite competition
    "$BIN/runner" demo-data spaceship $(cat competitions/splits/mle-bench-lite.txt) \
        --out "${RUNNER_DEMO_DATA:-runs/demo/data}" >/dev/null
    RUNNER_REPO=$PWD "$BIN/prefect" --no-prompt deploy --all >"$STATE/deploy.log" 2>&1 \
        || { echo "prefect deploy failed; see $STATE/deploy.log" >&2; exit 1; }
    workers

    echo "Prefect stack up on $PREFECT_API_URL (state in $STATE). In a shell:"
    echo "  export PREFECT_API_URL=$PREFECT_API_URL PREFECT_API_AUTH_STRING=\$(cat $STATE/auth)"
    echo "  prefect deployment run 'compete/dog-breed' --watch"
}

running() { [ -f "$STATE/$1.pid" ] && kill -0 "$(cat "$STATE/$1.pid")" 2>/dev/null; }

# `workers`: this machine's workers for the pool (a second GPU host joins a stack with just this, its
# PREFECT_API_URL and PREFECT_API_AUTH_STRING pointing at the first). On a GPU node one worker per lease
# (`runner leases`): its cards, cores and memory in its environment and `--limit 1`, so the work pool's own
# concurrency is the lease; plus one that holds nothing for the sweep flows, which only wait. Elsewhere
# $RUNNER_WORKERS workers, each serving every queue, as on a laptop.
workers() {
    mkdir -p "$STATE"
    local pool="--pool $POOL --type process" name queue vars
    # $RUNNER_LEASES (lines as `runner leases --shell` prints them) replaces this machine's own cut
    LEASES=${RUNNER_LEASES-${LEASES-$("$BIN/runner" leases --shell --cpu-leases "${RUNNER_CPU_LEASES:-1}")}}
    if [ -z "$LEASES" ]; then
        for n in $(seq 1 "$WORKERS"); do
            running "worker-$n" || start "worker-$n" "$BIN/prefect" worker start $pool --name "worker-$n"
        done
        return
    fi
    while read -r name queue vars; do
        running "worker-$name" || start "worker-$name" env $vars "$BIN/prefect" worker start $pool \
            --work-queue "$queue" --limit 1 --name "$(hostname)-$name"
    done <<<"$LEASES"
    running worker-sweep || start worker-sweep "$BIN/prefect" worker start $pool --work-queue sweep \
        --name "$(hostname)-sweep"
}

down() {
    for pidfile in "$STATE"/worker*.pid "$STATE/server.pid"; do
        name=$(basename "$pidfile" .pid)
        if [ -f "$STATE/$name.pid" ]; then
            kill -- -"$(cat "$STATE/$name.pid")" 2>/dev/null || kill "$(cat "$STATE/$name.pid")" 2>/dev/null || true
            rm -f "$STATE/$name.pid"
        fi
    done
    echo "Prefect stack down (state kept in $STATE)"
}

status() { healthy && echo "server up on $PREFECT_API_URL" || echo "server down"; }

"${1:-status}"
