#!/usr/bin/env bash
# The lowest versions pyproject.toml declares, tested: a new venv in which uv takes each direct
# dependency at its floor (--resolution lowest-direct; what those need comes at its newest), then
# the fast tests of the code the floors matter to: the hf backend with prompt-prefix reuse, data
# (datasets, pyarrow), the Hub paths against the loopback Hub of tests/support (data versions,
# preflight, the Hub log, `view --push`), records, tasks, scoring, Ray's replicas, the graph
# (networkx). torch is the one exception: the CPU build on this machine's disk (2.13.0) stands in
# for torch's floor (2.11), the only build at hand. The [review] and [docs] extras have a second
# venv, with the package's own floors: beside the rest they would lift floors they are tested at
# (label-studio-sdk needs numpy>=2.2, jsonschema>=4.23, pyyaml>=6.0.1; mkdocs-material
# jinja2>=3.1.6). There: the docs site (mkdocs build --strict) and the review's SDK calls.
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
uv=$uv_home/bin/uv

# New venvs every time, so the versions are those a new install resolves today.
work=$(mktemp -d "${TMPDIR:-/tmp}/finreflect-lowest.XXXXXX")
trap 'rm -rf "$work"' EXIT
venv=$work/venv
# pip takes torch 2.13.0 from this machine's disk (uv would fetch a CUDA build of several GB);
# the constraint keeps it, and makes a torch floor above 2.13 fail here instead of downloading.
# torch brings the newest networkx and jinja2; uv keeps an installed package that satisfies the
# range, so those two (direct dependencies) are resolved again, to their floors.
echo "torch==2.13.0" >"$work/constraints.txt"
python3 -m venv "$venv" \
  && "$venv/bin/pip" install -q torch==2.13.0 \
  && "$uv" pip install -q --python "$venv/bin/python" --resolution lowest-direct \
    --compile-bytecode -c "$work/constraints.txt" \
    --reinstall-package networkx --reinstall-package jinja2 \
    -e '.[hf,api,dev,ray]' \
  || { echo "lowest versions: cannot install them" >&2; exit 1; }
# The [review] and [docs] extras at their floors, beside the package's own floors that they leave
# where they are (datasets, huggingface-hub, pydantic...) and pytest's.
side=$work/side
"$uv" venv -q --python python3 "$side" \
  && "$uv" pip install -q --python "$side/bin/python" --resolution lowest-direct \
    -e '.[review,docs]' 'pytest>=8' \
  || { echo "lowest versions: cannot install the [review] and [docs] extras" >&2; exit 1; }

echo "lowest versions installed:"
"$venv/bin/python" - <<'EOF'
from importlib.metadata import version

for name in (
    "torch", "transformers", "huggingface-hub", "datasets", "pyarrow", "outlines",
    "outlines-core", "llguidance", "accelerate", "tokenizers", "pydantic", "numpy", "gguf",
    "evaluate", "krippendorff", "scipy", "jsonschema", "httpx", "lm-eval", "ray",
    "ppi-python", "scikit-learn", "networkx", "jinja2", "pyyaml", "tqdm", "pytest",
):
    print(f"  {name:16} {version(name)}")
EOF
echo "lowest versions installed for the [review] and [docs] extras (a venv of their own):"
"$side/bin/python" - <<'EOF'
from importlib.metadata import version

for name in (
    "label-studio-sdk", "mkdocs-material", "mkdocs", "numpy", "jsonschema", "pyyaml", "jinja2",
    "datasets", "huggingface-hub", "pydantic", "httpx", "pytest",
):
    print(f"  {name:16} {version(name)}")
EOF

# The docs site at mkdocs-material's floor.
NO_MKDOCS_2_WARNING=1 "$side/bin/mkdocs" build --quiet --strict --site-dir "$work/site" \
  && echo "lowest versions: mkdocs build --strict: the site builds" \
  || { echo "lowest versions: mkdocs build --strict failed" >&2; exit 1; }

# pytest with the venv $1's python on the rest of the arguments: fails if a test fails or skips.
run_tests() {
  local python=$1/bin/python log status
  shift
  log=$(mktemp "$work/pytest.XXXXXX")
  "$python" -m pytest -p no:cacheprovider "$@" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  if [ "$status" -eq 0 ] && tail -n 1 "$log" | grep -q "skipped"; then
    echo "lowest versions: a test was skipped; here every one must run" >&2
    status=1
  fi
  return "$status"
}

# xgrammar is an extra of its own (its triton is 1 GB): tested at its newest in the main run, as
# is vLLM's check of the replicas' placement (it needs the [vllm-check] extra). Also left to the
# main run: the pinned-revision run of test_lm_eval_compat (a whole run, about a minute).
echo "lowest versions: the [xgrammar] and [vllm-check] extras are not installed here; their tests are deselected"
run_tests "$venv" -m "not slow" -k "not xgrammar and not vllm" \
  --deselect tests/records/test_lm_eval_compat.py::test_a_pinned_revision_puts_the_resolved_commit_in_the_results \
  tests/models/test_prefix_reuse.py tests/models/test_models_hf.py tests/models/test_models_base.py \
  tests/models/test_thinking_hf.py \
  tests/chunking/test_chunking.py tests/data/test_data.py tests/data/test_sample.py tests/tasks/test_tasks.py \
  tests/protocol/test_schema.py tests/pipeline/test_extraction.py tests/records/test_records.py tests/stats/test_metrics.py \
  tests/runs/test_score_index.py tests/stats/test_uncertainty.py tests/models/test_replicas.py \
  tests/data/test_data_versions.py tests/preflight/test_preflight.py tests/pipeline/test_span_choice.py \
  tests/review/test_labels.py tests/stats/test_human.py tests/scoring/test_human_scores.py \
  tests/graph tests/scoring/test_graph_block.py tests/runs/test_hub_log.py tests/records/test_lm_eval_compat.py \
  tests/view/test_view.py::test_view_push_uploads_the_report_as_a_static_space \
  tests/view/test_view.py::test_a_push_keeps_the_users_files_on_the_space
status=$?

# label-studio-sdk where the package calls it (`review export --url`, `review import --url`) and
# as the tests drive it: against the real Label Studio of tests/support/label_studio.py (slow-
# marked), whose venv and migrated data are made once under ~/.cache (the main run uses the same;
# on a fresh machine they are made here instead); from there a server starts in seconds.
run_tests "$side" tests/review/test_label_studio_round_trip.py \
  tests/review/test_label_studio_server.py::test_a_reviewers_choice_comes_back_in_the_json_export \
  || status=1
exit "$status"
