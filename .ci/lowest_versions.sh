#!/usr/bin/env bash
# The lowest versions pyproject.toml declares, tested: a new venv in which uv takes each direct
# dependency at its floor (--resolution lowest-direct; what those need comes at its newest), then
# the fast tests of the code the floors matter to: the hf backend with prompt-prefix reuse, data
# (datasets, pyarrow, the Hub), records, tasks, scoring, Ray's replicas. torch is the one exception: the CPU build
# on this machine's disk (2.13.0) stands in for torch's floor (2.11), the only build at hand.
# Prints the versions it tested; nothing may skip. Called by .ci/run; runs alone too.
set -uo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 FINREFLECT_FIXTURES=required

# uv itself, once per version, under ~/.cache; what it downloads goes to uv's own cache there.
uv_version=0.13.9
uv_home=${XDG_CACHE_HOME:-$HOME/.cache}/finreflect-eval/uv-$uv_version
if [ ! -x "$uv_home/bin/uv" ]; then
  rm -rf "$uv_home"
  { python3 -m venv "$uv_home" && "$uv_home/bin/pip" install -q "uv==$uv_version"; } \
    || { echo "lowest versions: cannot install uv $uv_version" >&2; exit 1; }
fi

# A new venv every time, so the versions are those a new install resolves today.
work=$(mktemp -d "${TMPDIR:-/tmp}/finreflect-lowest.XXXXXX")
trap 'rm -rf "$work"' EXIT
venv=$work/venv
# pip takes torch 2.13.0 from this machine's disk (uv would fetch a CUDA build of several GB);
# the constraint keeps it, and makes a torch floor above 2.13 fail here instead of downloading.
# torch brings the newest networkx; uv keeps an installed package that satisfies the range, so
# networkx (a direct dependency) is resolved again, to its floor.
echo "torch==2.13.0" >"$work/constraints.txt"
python3 -m venv "$venv" \
  && "$venv/bin/pip" install -q torch==2.13.0 \
  && "$uv_home/bin/uv" pip install -q --python "$venv/bin/python" --resolution lowest-direct \
    --compile-bytecode -c "$work/constraints.txt" --reinstall-package networkx \
    -e '.[hf,api,dev,ray]' \
  || { echo "lowest versions: cannot install them" >&2; exit 1; }

echo "lowest versions installed:"
"$venv/bin/python" - <<'EOF'
from importlib.metadata import version

for name in (
    "torch", "transformers", "huggingface-hub", "datasets", "pyarrow", "outlines",
    "outlines-core", "llguidance", "accelerate", "tokenizers", "pydantic", "numpy", "gguf",
    "evaluate", "krippendorff", "scipy", "jsonschema", "httpx", "lm-eval", "ray",
    "ppi-python", "networkx",
):
    print(f"  {name:16} {version(name)}")
EOF

# xgrammar is an extra of its own (its triton is 1 GB): tested at its newest in the main run, as
# is vLLM's check of the replicas' placement (it needs the [vllm-check] extra).
echo "lowest versions: the [xgrammar] and [vllm-check] extras are not installed here; their tests are deselected"
log=$work/pytest.log
"$venv/bin/python" -m pytest -p no:cacheprovider -m "not slow" -k "not xgrammar and not vllm" \
  tests/models/test_prefix_reuse.py tests/models/test_models_hf.py tests/models/test_models_base.py \
  tests/chunking/test_chunking.py tests/data/test_data.py tests/data/test_sample.py tests/tasks/test_tasks.py \
  tests/protocol/test_schema.py tests/pipeline/test_extraction.py tests/records/test_records.py tests/stats/test_metrics.py \
  tests/runs/test_score_index.py tests/stats/test_uncertainty.py tests/models/test_replicas.py \
  tests/data/test_data_versions.py tests/preflight/test_preflight.py tests/pipeline/test_span_choice.py \
  tests/review/test_labels.py tests/stats/test_human.py tests/scoring/test_human_scores.py \
  tests/graph tests/scoring/test_graph_block.py 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -eq 0 ] && tail -n 1 "$log" | grep -q "skipped"; then
  echo "lowest versions: a test was skipped; here every one must run" >&2
  status=1
fi
exit "$status"
