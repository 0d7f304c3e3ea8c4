#!/usr/bin/env bash
# Starts a local relay cluster of separate processes on loopback, with the
# configurations in this directory (`make cluster` runs it):
#
#   nats-1..3      nats-server, one JetStream cluster     clients :4222 :4223 :4224
#                  (monitoring :8222-8224)
#   mock-upstream  the fake provider (10 s answers)       :8081
#   coordinator    creates the R3 streams, health         :8082
#   worker-1..3    the workers
#   edge-1, edge-2 the HTTP/SSE/WebSocket API             :8080 :8090
#
# Then kill things and watch the streams go on. Ctrl-C stops everything
# (SIGTERM, then SIGKILL after 15 s). Logs go to data/cluster/logs/, the
# JetStream stores to data/cluster/nats-N/ (`make clean` removes both).
set -euo pipefail
# Job control puts every process started here in a process group of its
# own, so that Ctrl-C reaches only this script, which then stops them in
# order: the roles first (a worker drains, an edge tells its clients to
# reconnect), then NATS. Without it, the roles would take Ctrl-C as their
# first signal and the script's SIGTERM as the second, which ends them at
# once.
set -m
cd "$(dirname "$0")/../.."

GO=${GO:-go}
dir=configs/cluster
data=data/cluster
logs=$data/logs
mkdir -p bin "$logs"

echo "building bin/relay and bin/nats-server ..."
"$GO" build -o bin/relay ./relay/cmd/relay
"$GO" build -o bin/nats-server github.com/nats-io/nats-server/v2

names=()
pids=()
commands=()

# stop ends every process this script started: the relay roles first, then
# the NATS servers, each with SIGTERM (and SIGCONT, in case it was paused),
# then SIGKILL for whatever is left after 15 s.
stopping=
stop() {
	[ -n "$stopping" ] && return
	stopping=1
	echo
	echo "stopping ..."
	local i group
	for group in roles nats; do
		for i in "${!pids[@]}"; do
			case "${names[$i]}" in nats-*) [ "$group" = nats ] || continue ;; *) [ "$group" = roles ] || continue ;; esac
			kill -CONT "${pids[$i]}" 2>/dev/null || true
			kill -TERM "${pids[$i]}" 2>/dev/null || true
		done
		for _ in $(seq 150); do
			local alive=
			for i in "${!pids[@]}"; do
				case "${names[$i]}" in nats-*) [ "$group" = nats ] || continue ;; *) [ "$group" = roles ] || continue ;; esac
				kill -0 "${pids[$i]}" 2>/dev/null && alive=1
			done
			[ -z "$alive" ] && break
			sleep 0.1
		done
	done
	for i in "${!pids[@]}"; do
		if kill -0 "${pids[$i]}" 2>/dev/null; then
			echo "${names[$i]} did not stop; killing it"
			kill -KILL "${pids[$i]}" 2>/dev/null || true
		fi
	done
	wait 2>/dev/null || true
	echo "stopped; logs in $logs/"
}
trap stop EXIT
trap 'exit 130' INT TERM

# start NAME COMMAND... runs a process in the background, its output
# appended to $logs/NAME.log.
start() {
	local name=$1
	shift
	echo "--- $(date -Is) $*" >>"$logs/$name.log"
	"$@" >>"$logs/$name.log" 2>&1 &
	names+=("$name")
	pids+=("$!")
	commands+=("$* >>$logs/$name.log 2>&1 &")
}

# await NAME PATTERN waits (up to 60 s) until NAME's log shows PATTERN.
await() {
	local name=$1 pattern=$2 j
	for _ in $(seq 600); do
		grep -q "$pattern" "$logs/$name.log" && return 0
		for j in "${!pids[@]}"; do
			if [ "${names[$j]}" = "$name" ] && ! kill -0 "${pids[$j]}" 2>/dev/null; then
				echo "$name exited; the end of $logs/$name.log:" >&2
				tail -n 20 "$logs/$name.log" >&2
				exit 1
			fi
		done
		sleep 0.1
	done
	echo "$name not ready after 60 s; see $logs/$name.log" >&2
	exit 1
}

for n in 1 2 3; do
	start "nats-$n" bin/nats-server -c "$dir/nats-$n.conf"
done
start mock-upstream bin/relay mock-upstream --config "$dir/mock-upstream.yaml"
# The coordinator creates the replicated streams once the cluster has
# elected its JetStream leader (a few seconds on a fresh cluster).
start coordinator bin/relay coordinator --config "$dir/coordinator.yaml"
await mock-upstream "relay mock-upstream ready"
await coordinator "relay coordinator ready"
for n in 1 2 3; do
	start "worker-$n" bin/relay worker --config "$dir/worker.yaml" --set "worker.id=worker-$n"
done
start edge-1 bin/relay edge --config "$dir/edge-1.yaml"
start edge-2 bin/relay edge --config "$dir/edge-2.yaml"
for name in worker-1 worker-2 worker-3; do await "$name" "relay worker ready"; done
await edge-1 "relay edge ready"
await edge-2 "relay edge ready"

pid() {
	local i
	for i in "${!names[@]}"; do [ "${names[$i]}" = "$1" ] && echo "${pids[$i]}"; done
}

cat <<EOF

relay cluster ready (logs: $logs/)

  process        pid
$(for i in "${!names[@]}"; do printf '  %-14s %s\n' "${names[$i]}" "${pids[$i]}"; done)

Stream an answer (10 s long) through edge-1 and note X-Relay-Stream-Id:

  curl -sN -D- http://127.0.0.1:8080/v1/chat/completions -H 'Content-Type: application/json' \\
    -d '{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"Hello"}]}'

Meanwhile, in another terminal, break something:

  kill -9 $(pid worker-1)      # a worker dies: another continues its answers ~1.5 s later
  kill -STOP $(pid worker-2); sleep 3; kill -CONT $(pid worker-2)
                               # a paused worker loses its streams and is fenced off when it wakes
  kill -TERM $(pid edge-1)     # edge-1 drains; the client resumes on edge-2 with its last cursor:
  curl -sN http://127.0.0.1:8090/v1/streams/<id> -H 'Last-Event-ID: <last id>'
  kill -9 $(pid nats-1)      # a NATS node dies: streams go on after a raft election (4-9 s)
  curl -X DELETE http://127.0.0.1:8090/v1/streams/<id>   # cancel a generation

Start a killed process again (same configuration, from the repository root):
$(for i in "${!names[@]}"; do printf '  %s\n' "${commands[$i]}"; done)

Ctrl-C stops everything.
EOF

while :; do
	sleep 1
done
