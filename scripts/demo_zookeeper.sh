#!/usr/bin/env bash
# The demo's second half: the same replacement run end to end against a real local ZooKeeper,
# with kit's simulated controller playing Kafka. Usage: demo_zookeeper.sh KIT DEMO_DIR
set -euo pipefail
KIT=$1
DEMO=$2
PORT=$(.venv/bin/python -c 'from kit.localzk import free_port; print(free_port())')
ZK="127.0.0.1:$PORT/kafka"
rm -rf "$DEMO/zk"  # a fresh ZooKeeper each run: the demo seeds an empty one
"$KIT" zk start --port "$PORT" --data "$DEMO/zk"
trap '"$KIT" sim stop --zk "$ZK" >/dev/null 2>&1; "$KIT" zk stop --data "$DEMO/zk" >/dev/null' EXIT
echo; echo "== seed the simulated cluster in $ZK"
"$KIT" sim seed --zk "$ZK" --snapshot "$DEMO/cluster.json"
"$KIT" status --zk "$ZK"
echo; echo "== plan from ZooKeeper, apply with a 50 MB/s throttle (rollback file kept)"
"$KIT" plan replace --zk "$ZK" --replace "$(cat "$DEMO/replace.txt")" --out "$DEMO/plan-zk.json" --throttle 50000000 \
    | sed -n '/^Duration estimate:/,/^$/p'
"$KIT" apply "$DEMO/plan-zk.json" --zk "$ZK" --throttle 50000000 --rollback-out "$DEMO/rollback.json"
"$KIT" status --zk "$ZK"
echo; echo "== the simulated controller copies the data (simulated time, 100,000x the wall clock)"
"$KIT" sim run --zk "$ZK" --speed 100000 --until-idle --max-seconds 120
echo; echo "== verify: every partition done, throttles cleared"
"$KIT" verify "$DEMO/plan-zk.json" --zk "$ZK"
"$KIT" status --zk "$ZK"
