#!/usr/bin/env bash
# One Prefect worker per GPU on this node, each pinned to its GPU and with its own health port.
#   bash deployments/workers.sh [GPUS] [POOL]      (GPUS default: nvidia-smi's count, else 1)
# Worker i sees only GPU i (CUDA_VISIBLE_DEVICES=i, inherited by the flow runs it starts) and
# serves /health on port RBENCH_HEALTH_PORT_BASE + i (default 8080 + i). The store, mirror and
# tracking settings (RBENCH_STORE, RBENCH_MIRROR, MLFLOW_TRACKING_URI, PREFECT_API_URL) come
# from this shell's environment. SIGTERM or Ctrl-C stops every worker.
set -euo pipefail
gpus=${1:-$( (nvidia-smi --list-gpus 2>/dev/null || true) | grep -c '^GPU' || true)}
[[ "$gpus" =~ ^[0-9]+$ && "$gpus" -gt 0 ]] || gpus=1
pool=${2:-gpu-pool}
base=${RBENCH_HEALTH_PORT_BASE:-8080}
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait' INT TERM
for ((i = 0; i < gpus; i++)); do
  CUDA_VISIBLE_DEVICES=$i PREFECT_WORKER_WEBSERVER_PORT=$((base + i)) \
    rbench worker --pool "$pool" --name "$(hostname)-gpu$i" --with-healthcheck &
  pids+=($!)
  echo "worker $(hostname)-gpu$i: CUDA_VISIBLE_DEVICES=$i, health on port $((base + i))"
done
wait
