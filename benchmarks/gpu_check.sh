#!/usr/bin/env bash
# Device check for igniter-agent, for a lent GPU machine. It has NOT been run on a GPU yet.
#
# Starts `igniter-agent run` (which starts its own MPS control daemon), serves one model as two
# servers at 30 % and 70 % MPS shares, measures each server alone and both together, and prints
# the measurements beside the performance model's prediction (`igniter predict`). Then checks
# the lifecycle: the servers really are MPS clients with those shares, and SIGTERM to the agent
# leaves no server and no MPS daemon behind.
#
# Usage: benchmarks/gpu_check.sh [MODEL] [BATCH]
#   MODEL  profile model to predict for (default resnet50). torchvision's model of that name is
#          served when torchvision is installed; otherwise a plain-torch ResNet-18-like stand-in.
#   BATCH  items per request = the servers' max batch (default 8)
# Env: PROFILE (default policies/profiles/v100.yaml), PHASE_S seconds per phase (default 10),
#      CLIENTS per server (default 2), PY (default .venv/bin/python), KEEP=1 keeps the work dir,
#      CPU_DRY_RUN=1 runs the same flow with --no-gpu to test this script on a CPU machine
#      (its numbers are not GPU measurements, and the MPS checks are skipped).
# Exit: 0 measured and lifecycle checks passed; 1 a check failed; 2 no usable GPU/MPS here.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL=${1:-resnet50}
BATCH=${2:-8}
PROFILE=${PROFILE:-policies/profiles/v100.yaml}
PHASE_S=${PHASE_S:-10}
CLIENTS=${CLIENTS:-2}
PY=${PY:-.venv/bin/python}
DRY=${CPU_DRY_RUN:-0}
AGENT=("$PY" -m agents.cli)
if [ -x .venv/bin/igniter ]; then IGNITER=(.venv/bin/igniter); else IGNITER=("$PY" -m autoscaler); fi

die2() { echo "gpu_check: $*" >&2; exit 2; }
if [ "$DRY" != 1 ]; then
  command -v nvidia-smi >/dev/null || die2 "nvidia-smi not found: this is not a GPU machine"
  command -v nvidia-cuda-mps-control >/dev/null || die2 "nvidia-cuda-mps-control not found (NVIDIA driver utilities)"
  "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' \
    || die2 "torch sees no CUDA device (a CPU-only torch build?): $("$PY" -c 'import torch; print(torch.__version__)')"
fi

WORK=$(mktemp -d -t igniter-gpu-check.XXXXXX)
STATE="$WORK/state"
AGENT_PID=""
cleanup() {
  if [ -n "$AGENT_PID" ] && kill -0 "$AGENT_PID" 2>/dev/null; then
    kill -TERM "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null || true
  fi
  if [ "${KEEP:-0}" = 1 ]; then echo "work directory kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

echo "== machine"
if [ "$DRY" = 1 ]; then
  echo "CPU DRY RUN: --no-gpu, numbers below are NOT GPU measurements"
else
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,power.limit,clocks.max.sm --format=csv
fi
"$PY" -c 'import torch, platform; print("torch", torch.__version__, "python", platform.python_version())'

echo "== model"
mkdir -p "$WORK/model"
"$PY" - "$MODEL" "$WORK/model" <<'PYEOF'
import sys, warnings
import torch
from torch import nn

name, out = sys.argv[1], sys.argv[2]


class Block(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                                  nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
        self.skip = nn.Identity() if stride == 1 and cin == cout else nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.skip(x))


def stand_in() -> nn.Module:
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    widths = [64, 64, 128, 256, 512]
    for cin, cout in zip(widths, widths[1:]):
        layers += [Block(cin, cout, 1 if cin == cout else 2), Block(cout, cout, 1)]
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000))


try:
    import torchvision
    model, source = getattr(torchvision.models, name)(weights=None), f"torchvision.models.{name} (random weights)"
except (ImportError, AttributeError):
    model, source = stand_in(), f"plain-torch ResNet-18-like stand-in (torchvision or its {name} unavailable)"
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    traced = torch.jit.trace(model.eval(), torch.randn(1, 3, 224, 224))
traced.save(f"{out}/model.pt")
with open(f"{out}/model.yaml", "w") as f:
    f.write("inputs:\n- {name: input, shape: [3, 224, 224], datatype: FP32}\noutputs:\n- {name: output, shape: [1000], datatype: FP32}\n")
print("served model:", source)
PYEOF

cat > "$WORK/load.py" <<'PYEOF'
"""Closed-loop clients (binary tensor requests of one full batch) against one server; prints JSON."""
import json, statistics, sys, threading, time
import httpx, torch

url, workload, batch, seconds, clients = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
x = torch.randn(batch, 3, 224, 224)
header = json.dumps({"inputs": [{"name": "input", "shape": list(x.shape), "datatype": "FP32",
                                 "parameters": {"binary_data_size": x.numel() * 4}}]}).encode()
body, headers = header + x.numpy().tobytes(), {"Inference-Header-Content-Length": str(len(header))}


def compute() -> tuple[float, float]:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    pick = lambda name: sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith(name))
    return pick("igniter_batch_compute_seconds_sum"), pick("igniter_batch_compute_seconds_count")


def loop(out: list, stop_at: float) -> None:
    with httpx.Client(timeout=60) as client:
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            client.post(f"{url}/v2/models/{workload}/infer", content=body, headers=headers).raise_for_status()
            out.append((time.perf_counter() - t0) * 1000)


loop([], time.perf_counter() + 1.0)  # warm-up
s0, c0 = compute()
results = [[] for _ in range(clients)]
stop_at = time.perf_counter() + seconds
threads = [threading.Thread(target=loop, args=(r, stop_at)) for r in results]
[t.start() for t in threads]
[t.join() for t in threads]
s1, c1 = compute()
lat = sorted(v for r in results for v in r)
print(json.dumps({"requests": len(lat), "client_p50_ms": statistics.median(lat),
                  "client_p99_ms": lat[min(len(lat) - 1, int(0.99 * len(lat)))],
                  "compute_ms_mean": (s1 - s0) / max(1.0, c1 - c0) * 1000, "throughput_rps": len(lat) * batch / seconds}))
PYEOF

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT_A=$(free_port); PORT_B=$(free_port)
server() {  # name share port
  printf '{"name": "%s", "workload": "%s", "model_dir": "%s", "batch": %s, "mps_percent": %s, "port": %s, "max_queue_delay_ms": 2.0}' \
    "$1" "$1" "$WORK/model" "$BATCH" "$2" "$3"
}
A=$(server a 30 "$PORT_A"); B=$(server b 70 "$PORT_B")
apply() {  # generation servers-json
  echo "{\"generation\": $1, \"servers\": [$2]}" | "${AGENT[@]}" apply --state-dir "$STATE" - --wait 600
}
load() {  # name port out
  "$PY" "$WORK/load.py" "http://127.0.0.1:$2" "$1" "$BATCH" "$PHASE_S" "$CLIENTS" > "$3"
}

echo "== agent"
RUN_FLAGS=()
[ "$DRY" = 1 ] && RUN_FLAGS=(--no-gpu)
"${AGENT[@]}" run --state-dir "$STATE" "${RUN_FLAGS[@]}" 2> "$WORK/agent.log" &
AGENT_PID=$!

echo "== phase 1: a alone (30 %)"; apply 1 "$A"; load a "$PORT_A" "$WORK/a_alone.json"
echo "== phase 2: b alone (70 %)"; apply 2 "$B"; load b "$PORT_B" "$WORK/b_alone.json"
echo "== phase 3: a (30 %) and b (70 %) together"; apply 3 "$A, $B"
load a "$PORT_A" "$WORK/a_together.json" & LOAD_A=$!
load b "$PORT_B" "$WORK/b_together.json"
wait "$LOAD_A"

echo "== MPS and environment checks"
FAILED=0
"${AGENT[@]}" status --state-dir "$STATE" --json > "$WORK/status.json"
SERVER_PIDS=$("$PY" -c 'import json, sys; print(" ".join(str(s["pid"]) for s in json.load(open(sys.argv[1]))["servers"]))' "$WORK/status.json")
for pid in $SERVER_PIDS; do
  echo "server pid $pid: $(tr '\0' '\n' < "/proc/$pid/environ" | grep -E '^CUDA_(VISIBLE_DEVICES|MPS_ACTIVE_THREAD_PERCENTAGE)=' | tr '\n' ' ')"
done
if [ "$DRY" != 1 ]; then
  export CUDA_MPS_PIPE_DIRECTORY="$STATE/mps/pipe"
  MPS_SERVER=$(echo get_server_list | nvidia-cuda-mps-control | head -1 || true)
  CLIENT_PIDS=$( [ -n "$MPS_SERVER" ] && echo "get_client_list $MPS_SERVER" | nvidia-cuda-mps-control || true)
  echo "MPS server: ${MPS_SERVER:-none}; its clients: $(echo $CLIENT_PIDS)"
  for pid in $SERVER_PIDS; do
    if echo " $(echo $CLIENT_PIDS) " | grep -q " $pid "; then echo "PASS server $pid is an MPS client"
    else echo "FAIL server $pid is not an MPS client"; FAILED=1; fi
  done
  "$PY" -c 'import json, sys; [print("GPU", g["index"], g["name"], g["power_w"], "W", g["sm_clock_mhz"], "MHz", g["health"]) for g in json.load(open(sys.argv[1]))["gpus"]]' "$WORK/status.json"
fi

echo "== prediction ($PROFILE) beside measurement"
predict() { "${IGNITER[@]}" predict --profile "$PROFILE" "$@" --json 2>"$WORK/predict.err" || echo '{"predictions": []}'; }
predict --place "$MODEL:$BATCH:30" > "$WORK/p_a.json"
predict --place "$MODEL:$BATCH:70" > "$WORK/p_b.json"
predict --place "$MODEL:$BATCH:30" --place "$MODEL:$BATCH:70" > "$WORK/p_ab.json"
[ -s "$WORK/predict.err" ] && echo "igniter predict said: $(head -c 300 "$WORK/predict.err")"
"$PY" - "$WORK" "$MODEL" "$BATCH" "$PROFILE" <<'PYEOF'
import json, sys
work, model, batch, profile = sys.argv[1:]
load = lambda name: json.load(open(f"{work}/{name}.json"))
def pred(name, i):
    try:
        return load(name)["predictions"][i]["latency_ms"]
    except (KeyError, IndexError, ValueError):
        return None
rows = [("a 30 %", "a_alone", pred("p_a", 0), "a_together", pred("p_ab", 0)),
        ("b 70 %", "b_alone", pred("p_b", 0), "b_together", pred("p_ab", 1))]
fmt = lambda v: "n/a" if v is None else f"{v:.2f}"
print(f"model {model}, batch {batch}; predictions from {profile} (a V100 profile predicts V100 times: on another GPU")
print("compare the together/alone ratios, not the milliseconds). measured compute = server-side model time per batch")
print(f"{'server':<8} {'phase':<9} {'compute ms':>10} {'client p50':>10} {'client p99':>10} {'items/s':>9} {'predicted ms':>12}")
for label, alone, p_alone, together, p_together in rows:
    for phase, key, p in (("alone", alone, p_alone), ("together", together, p_together)):
        m = load(key)
        print(f"{label:<8} {phase:<9} {m['compute_ms_mean']:>10.2f} {m['client_p50_ms']:>10.2f} {m['client_p99_ms']:>10.2f} {m['throughput_rps']:>9.1f} {fmt(p):>12}")
    ratio = load(together)["compute_ms_mean"] / load(alone)["compute_ms_mean"]
    p_ratio = p_together / p_alone if p_alone and p_together else None
    print(f"{label:<8} together/alone: measured {ratio:.3f}, predicted {fmt(p_ratio)}")
PYEOF

echo "== SIGTERM to the agent"
kill -TERM "$AGENT_PID"; wait "$AGENT_PID" || true; AGENT_PID=""
for pid in $SERVER_PIDS; do
  if kill -0 "$pid" 2>/dev/null; then echo "FAIL server $pid outlived the agent"; FAILED=1; else echo "PASS server $pid stopped"; fi
done
if [ "$DRY" != 1 ]; then
  if echo get_server_list | nvidia-cuda-mps-control >/dev/null 2>&1; then echo "FAIL MPS control daemon still running"; FAILED=1
  else echo "PASS MPS control daemon stopped"; fi
fi
[ "$FAILED" = 0 ] && echo "gpu_check: done" || echo "gpu_check: FAILED (agent log: $WORK/agent.log; rerun with KEEP=1)"
exit "$FAILED"
