#!/usr/bin/env bash
# Resolve the GPU image's Python dependencies without installing them and list the CUDA
# libraries they pull; fails unless exactly one CUDA major version appears.
# Usage (from the repository root): bash docker/check-gpu-deps.sh
set -euo pipefail
cd "$(dirname "$0")/.."
report=$(mktemp)
trap 'rm -f "$report"' EXIT
env -u PIP_FIND_LINKS PIP_CONFIG_FILE=/dev/null python3 -m pip install --quiet --dry-run --ignore-installed \
  --report "$report" -c docker/gpu-constraints.txt torch \
  ".[bm25,bm25s,dense-gpu,models,chonky,markup,chunking,hub,irds,search,dask,ray,llm,arm,onnx]" 2>/dev/null
python3 - "$report" <<'PY'
import json, re, sys
packages = {i["metadata"]["name"]: i["metadata"]["version"] for i in json.load(open(sys.argv[1]))["install"]}
cuda = {}
for name, version in sorted(packages.items()):
    if name.startswith(("nvidia-", "faiss")) or name == "torch":
        m = re.search(r"-cu(\d+)$", name)
        # CUDA 12 libraries carry a -cu12 suffix; CUDA 13 ones (nvidia-cublas, ...) mostly none
        major = m.group(1) if m else ("13" if name.startswith("nvidia-") else None)
        print(f"  {name:32} {version:16} CUDA {major or '-'}")
        if major:
            cuda.setdefault(major, []).append(name)
if "faiss-cpu" in packages:
    sys.exit("faiss-cpu and faiss-gpu must never be installed together")
print(f"CUDA majors: {sorted(cuda)}")
sys.exit(0 if len(cuda) == 1 else "more than one CUDA version in the GPU image")
PY
