#!/bin/bash
# Static against dynamic data sharding with a straggler (docs/ELASTIC.md):
# 2 PS + 3 async workers, the default MLP on Fashion-MNIST, 8,000 steps of
# batch 32 per worker; worker 1 is stopped (SIGSTOP) for 10 s twice, from its
# 100th step. Prints each run's wall time and the workers' rates.
#   tools/straggler_bench.sh [build/bin]
set -euo pipefail
bin=${1:-build/bin}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for sharding in static dynamic; do
  cat > "$dir/$sharding.yaml" <<YAML
cluster: {ps_hosts: ["localhost:1", "localhost:2"], worker_hosts: ["localhost:3", "localhost:4", "localhost:5"]}
model: {name: mlp, hidden_units: [128, 32]}
data: {source: fashion_mnist, sharding: $sharding, chunk_batches: 4}
optimizer: {name: momentum, learning_rate: 0.05, momentum: 0.9}
train: {batch_size_per_device: 32, steps: 8000, display_every: 100, evaluate: false}
variable_update: parameter_server
consistency: async
timeouts: {heartbeat_seconds: 0.5, worker_lost_seconds: 30}
YAML
  start=$(date +%s.%N)
  "$bin/pstrain-launch" "$dir/$sharding.yaml" --run_dir "$dir/run_$sharding" > "$dir/$sharding.out" 2>&1 &
  launch=$!
  until grep -q "\[worker1\] 100	" "$dir/$sharding.out" 2>/dev/null; do sleep 0.1; done
  for round in 1 2; do
    pid=$(pgrep -f "pstrain-worker.*--index=1.*run_$sharding")
    kill -STOP "$pid"; sleep 10; kill -CONT "$pid"; sleep 1
  done
  wait "$launch"
  end=$(date +%s.%N)
  echo "$sharding: wall $(echo "$end - $start" | bc) s; $(grep -o 'worker . images/sec: [0-9.]*' "$dir/$sharding.out" | sort | tr '\n' ';')"
done
