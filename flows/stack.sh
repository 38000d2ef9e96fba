#!/usr/bin/env bash
# `flows/stack.sh up|down|status|workers`: a local Prefect stack for the runner (server, process workers, deployments),
# with all state under .prefect-stack/ in the project. `make up` / `make down` call this.
set -euo pipefail
# run by a process of a stack (it carries MARK, below), this script must not find itself among the stack's processes
[ -z "${RUNNER_STACK_MEMBER-}" ] || exec env -u RUNNER_STACK_MEMBER "$0" "$@"
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

# Every process the stack starts carries $MARK=$STATE in its environment, and so does everything those start:
# Prefect hands its environment on to the flow runs, the runner hands RUNNER_* on to the runs it launches and their
# units. That is how `down` finds the ones that left their process group (a worker's flow run, a `runner run`: each
# in a session of its own) and whose parent may be gone. Only this script sets it, so a user's shell never has it.
MARK=RUNNER_STACK_MEMBER

start() {  # name, command...: run in the background in a session of its own, pid and log in $STATE
    local name=$1; shift
    # `trap - INT`: a command a script runs in the background (`cmd &`, no job control) starts with SIGINT ignored,
    # and a Prefect worker stops on SIGTERM by sending itself SIGINT: ignored, it ran on until killed
    (trap - INT && exec env "$MARK=$STATE" setsid nohup "$@" >"$STATE/$name.log" 2>&1) &
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
    # ($RUNNER_DEMO_COMPETITIONS: only those, e.g. a stack that runs one competition)
    "$BIN/runner" demo-data ${RUNNER_DEMO_COMPETITIONS:-spaceship $(cat competitions/splits/mle-bench-lite.txt)} \
        --out "${RUNNER_DEMO_DATA:-runs/demo/data}" >/dev/null
    # every deployment of prefect.yaml ($RUNNER_DEPLOYMENTS: only those, e.g. "compete/spaceship sweep/demo")
    local deployments=(--all)
    [ -z "${RUNNER_DEPLOYMENTS-}" ] || deployments=($(printf -- '--name %s ' $RUNNER_DEPLOYMENTS))
    RUNNER_REPO=$PWD "$BIN/prefect" --no-prompt deploy "${deployments[@]}" >"$STATE/deploy.log" 2>&1 \
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

# `down`: the workers and what they started first (so no worker polls a dead server, and a flow run still has the
# server to report its end to), then the server. What outlives SIGTERM by $GRACE s gets SIGKILL; a pidfile goes only
# once its group has ended. Targets are what `kill` takes: a pid, or -PGID for every process of a group.
GRACE=10

procs() {  # every live process as "pid pgid"; a zombie has ended (it waits only for a parent, or a reaper, to read it)
    local stat fields state pgid
    for stat in /proc/[0-9]*/stat; do
        read -r fields 2>/dev/null <"$stat" || continue
        read -r state _ pgid _ <<<"${fields##*) }"  # after "pid (command) ": state, ppid, pgid, ...
        [ "$state" = Z ] || [ "$state" = X ] || echo "${fields%% *} $pgid"
    done
}

pids() {  # targets...: the pids of their live processes
    local pid pgid
    procs | while read -r pid pgid; do
        if [[ " $* " == *" $pid "* || " $* " == *" -$pgid "* ]]; then echo "$pid"; fi
    done
}

marked() { grep -qzxF -- "$MARK=$STATE" /proc/"$1"/environ 2>/dev/null; }  # pid: one of this stack's (see start)

escaped() {  # pgids...: the live processes of this stack outside those groups
    local ours=" $(grep -lzxF -- "$MARK=$STATE" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 | tr '\n' ' ') "
    local pid pgid
    procs | while read -r pid pgid; do
        if [[ $ours == *" $pid "* && " $* " != *" $pgid "* ]]; then echo "$pid"; fi
    done
}

label() {  # pid: its pidfile's name, else its command line, and the pid
    local name=${NAMES[$1]-}
    [ -n "$name" ] || name=$(tr '\0' ' ' 2>/dev/null </proc/"$1"/cmdline | cut -c1-80 | sed 's/ *$//')
    echo "${name:-?} (pid $1)"
}

gone_within() {  # seconds, targets...: whether all of them end within that time
    local deadline=$((SECONDS + $1)); shift
    while [ -n "$(pids "$@")" ]; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.2
    done
}

end() {  # targets...: SIGTERM, up to $GRACE s to end, then SIGKILL and up to 5 s more
    local pid
    [ $# -gt 0 ] || return 0
    kill -TERM -- "$@" 2>/dev/null || true
    gone_within "$GRACE" "$@" && return
    for pid in $(pids "$@"); do echo "$(label "$pid") still running $GRACE s after SIGTERM: sent SIGKILL" >&2; done
    kill -KILL -- "$@" 2>/dev/null || true
    gone_within 5 "$@" || true
}

record() {  # array, pidfiles...: each live group of this stack into the array; the other pidfiles go
    local -n into=$1; shift
    local pidfile pgid target pid
    for pidfile in "$@"; do
        [ -f "$pidfile" ] || continue
        pgid=$(cat "$pidfile")
        [[ $pgid =~ ^[0-9]+$ ]] || { rm -f "$pidfile"; continue; }
        # one target per process, as each must get one SIGTERM (a Prefect worker kills itself on a second one):
        # the group, or the pid while a process just started has not made its group yet
        target=-$pgid
        [ -n "$(pids "$target")" ] || target=$pgid
        for pid in $(pids "$target"); do
            # this stack's (or one started before the mark: its leader runs our prefect), not a new program that
            # got the pid back
            if marked "$pid" || grep -qF -- "$BIN/prefect" /proc/"$pgid"/cmdline 2>/dev/null; then
                into+=("$target") NAMES[$pgid]=$(basename "$pidfile" .pid) PIDFILES[$pgid]=$pidfile
                continue 2
            fi
        done
        rm -f "$pidfile"  # its group has ended (or is not ours)
    done
}

down() {
    declare -gA NAMES=() PIDFILES=()
    local workers=() server=() stayed=() left=() pgid pid
    record workers "$STATE"/worker*.pid
    record server "$STATE/server.pid"
    end "${workers[@]}" $(escaped "${!PIDFILES[@]}")  # with the flow runs and training runs they started
    end "${server[@]}" $(escaped "${!PIDFILES[@]}")  # and anything of the stack that started meanwhile
    for pgid in "${!PIDFILES[@]}"; do
        if [ -n "$(pids "-$pgid" "$pgid")" ]; then
            stayed+=("-$pgid" "$pgid")
        else
            rm -f "${PIDFILES[$pgid]}" && unset "PIDFILES[$pgid]"
        fi
    done
    for pid in $(pids "${stayed[@]}") $(escaped "${!PIDFILES[@]}"); do
        left+=("$(label "$pid")")
    done
    if [ ${#left[@]} -gt 0 ]; then
        echo "Prefect stack NOT down: could not end $(printf '%s, ' "${left[@]}" | sed 's/, $//') (still running" \
            "after SIGKILL: in uninterruptible I/O, state D, until it ends; or another user's);" \
            "state in $STATE" >&2
        exit 1
    fi
    echo "Prefect stack down (state kept in $STATE)"
}

status() { healthy && echo "server up on $PREFECT_API_URL" || echo "server down"; }

"${1:-status}"
