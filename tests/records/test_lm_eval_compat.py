"""lm-eval users feel at home: their command lines (from lm-eval's README and docs, with our task
names) give the same run as our own spelling, and the close misses get a suggestion."""

import json
import shlex
import shutil

import pytest
from conftest import require
from support.runs import panel_file

from finreflect_eval._util.errors import FinReflectError
from finreflect_eval.cli.commands import _hub_log_args, _run_config
from finreflect_eval.cli.parser import parse_args
from finreflect_eval.models import ModelSpec

HUB = "hub_results_org=EleutherAI,hub_repo_name=lm-eval-results,push_results_to_hub=True"
# (lm-eval's command line, ours): each pair must parse into the same run configuration.
SAME_RUN = [
    (
        "lm_eval --model hf --model_args pretrained=EleutherAI/gpt-j-6B --tasks finreflect "
        "--device cuda:0 --batch_size 8",
        "finreflect-eval run --model EleutherAI/gpt-j-6B --model-args device=cuda:0,batch_size=8",
    ),
    (
        "lm_eval --model hf --model_args pretrained=EleutherAI/pythia-160m,revision=step100000,"
        'dtype="float" --tasks finreflect_single_pass,finreflect_reflection --device cuda:0 '
        "--batch_size 8",
        "finreflect-eval run --model EleutherAI/pythia-160m@step100000 --backend hf --model-args "
        "dtype=float,device=cuda:0,batch_size=8 --tasks finreflect_single_pass "
        "finreflect_reflection",
    ),
    (
        "lm_eval --model hf --model_args pretrained=EleutherAI/pythia-160m --tasks "
        "finreflect_single_pass,finreflect_multi_pass --device cuda:0 --batch_size auto:4",
        "finreflect-eval run --model EleutherAI/pythia-160m --device cuda:0 --batch-size auto "
        "--tasks finreflect_single_pass finreflect_multi_pass",
    ),
    (
        "lm_eval --model hf --model_args pretrained=EleutherAI/pythia-12b,parallelize=True "
        "--tasks finreflect --batch_size 16",
        "finreflect-eval run --model EleutherAI/pythia-12b --model-args device_map=auto,"
        "batch_size=16",
    ),
    (
        "lm_eval --model vllm --model_args pretrained=meta-llama/Llama-3.1-8B,"
        "tensor_parallel_size=2,dtype=auto,gpu_memory_utilization=0.8,data_parallel_size=2 "
        "--tasks finreflect --batch_size auto",
        "finreflect-eval run --model meta-llama/Llama-3.1-8B --backend vllm --model-args "
        "tensor_parallel_size=2,dtype=auto,gpu_memory_utilization=0.8,data_parallel_size=2,"
        "batch_size=auto",
    ),
    (
        "lm_eval --model local-chat-completions --tasks finreflect --model_args "
        "model=facebook/opt-125m,base_url=http://10.0.0.1:8000/v1/chat/completions,"
        "num_concurrent=1,max_retries=3,tokenized_requests=False --apply_chat_template",
        "finreflect-eval run --model facebook/opt-125m --backend openai --model-args "
        "base_url=http://10.0.0.1:8000/v1/chat/completions,max_concurrency=1,http_retries=3",
    ),
    (
        "lm_eval --model openai-chat-completions --model_args model=gpt-4o-mini --tasks "
        "finreflect_smoke --apply_chat_template",
        "finreflect-eval run --model gpt-4o-mini --backend openai --tasks finreflect_smoke",
    ),
    (
        "lm_eval --model hf --model_args pretrained=/path/to/gguf_folder,"
        "gguf_file=model-name.gguf --tasks finreflect --device cuda:0 --batch_size 8",
        "finreflect-eval run --model /path/to/gguf_folder --model-args gguf_file=model-name.gguf,"
        "device=cuda:0,batch_size=8",
    ),
    (
        "lm_eval --model hf --model_args pretrained=EleutherAI/pythia-160m,dtype=float32 "
        "--tasks finreflect_smoke --limit 10 --output_path results --log_samples",
        "finreflect-eval run --model EleutherAI/pythia-160m --model-args dtype=float32 "
        "--tasks finreflect_smoke --limit 10 --output-path results",
    ),
    (
        "lm_eval --model hf --model_args pretrained=EleutherAI/pythia-160m --tasks finreflect "
        f"--log_samples --output_path results --hf_hub_log_args {HUB},push_samples_to_hub=True,"
        "public_repo=False",
        "finreflect-eval run --model EleutherAI/pythia-160m --hf-hub-log-args "
        "hub_results_org=EleutherAI hub_repo_name=lm-eval-results push_results_to_hub=true "
        "push_samples_to_hub=true public_repo=false",
    ),
    (
        "lm_eval --model hf --model_args pretrained=EleutherAI/pythia-160m --tasks "
        "finreflect_single_pass --num_fewshot 5 --gen_kwargs temperature=0,max_gen_toks=512",
        "finreflect-eval run --model EleutherAI/pythia-160m --tasks finreflect_single_pass "
        "--num-fewshot 5 --gen-kwargs max_gen_toks=512 temperature=0",
    ),
    (
        "lm_eval --model hf --model_args pretrained=Qwen/Qwen2.5-7B-Instruct --tasks finreflect "
        '--system_instruction "You are a financial analyst." --apply_chat_template '
        "--fewshot_as_multiturn",
        "finreflect-eval run --model Qwen/Qwen2.5-7B-Instruct --system-instruction "
        '"You are a financial analyst." --fewshot-as-multiturn true',
    ),
    (
        "lm_eval --model hf --model_args "
        """'{"pretrained": "EleutherAI/pythia-160m", "dtype": "float32"}' --tasks finreflect""",
        "finreflect-eval run --model EleutherAI/pythia-160m --model-args dtype=float32",
    ),
    (
        "lm-eval run --model hf --model_args pretrained=gpt2 dtype=float32 --tasks finreflect",
        "finreflect-eval run --model gpt2 --model-args dtype=float32",
    ),
    (
        "lm-eval run --model vllm --model_args pretrained=EleutherAI/gpt-j-6B --tasks "
        "finreflect_single_pass finreflect_reflection --num_fewshot 5",
        "finreflect-eval run --model EleutherAI/gpt-j-6B --backend vllm --tasks "
        "finreflect_single_pass,finreflect_reflection --num-fewshot 5",
    ),
    (
        "lm-eval run --model hf --model_args pretrained=gpt2 --tasks finreflect --gen_kwargs "
        "temperature=0.8 max_gen_toks=256",
        "finreflect-eval run --model gpt2 --gen-kwargs temperature=0.8,max_gen_toks=256",
    ),
    (
        "lm_eval --model hf --model_args pretrained=gpt2 --tasks finreflect --seed 0,1234,42,1234",
        "finreflect-eval run --model gpt2 --seed 0,1234,42",  # the few-shot seed's default
    ),
    (
        "lm_eval -M hf -a pretrained=gpt2 -t finreflect_smoke -b 4 -L 0.1 -o out -s",
        "finreflect-eval run --model gpt2 --model-args batch_size=4 --tasks finreflect_smoke "
        "--limit 0.1 --output-path out",
    ),
    (
        "lm_eval --model hf --model_args pretrained=gpt2 --tasks finreflect --use_cache "
        "/tmp/lm_cache.sqlite",
        "finreflect-eval run --model gpt2 --cache /tmp/lm_cache.sqlite",
    ),
    (
        "lm_eval --model hf --model_args pretrained=gpt2 --tasks my_finreflect --include_path "
        "./my_tasks",
        "finreflect-eval run --model gpt2 --tasks my_finreflect --include-path my_tasks",
    ),
    (
        "lm_eval --model hf --model_args pretrained=gpt2 --tasks finreflect --verbosity DEBUG",
        "finreflect-eval --verbosity DEBUG run --model gpt2",
    ),
    (
        "lm_eval --model hf --model_args pretrained=tiiuae/falcon-7b --tasks finreflect "
        "--trust_remote_code",
        "finreflect-eval run --model tiiuae/falcon-7b --model-args trust_remote_code=True",
    ),
    (
        "lm_eval --model hf --model_args pretrained=meta-llama/Llama-3.1-8B-Instruct --tasks "
        "finreflect --batch_size auto --max_batch_size 32",
        "finreflect-eval run --model meta-llama/Llama-3.1-8B-Instruct --model-args "
        "batch_size=auto,max_batch_size=32",
    ),
    (
        "lm_eval --model_args pretrained=meta-llama/Llama-3.1-8B,revision=main,dtype=float "
        "--tasks=finreflect --batch_size=auto --output_path=results/run.json",
        "finreflect-eval run --model meta-llama/Llama-3.1-8B --revision main --model-args "
        "dtype=float --batch-size auto --output-path results",
    ),
    (
        "lm_eval --model hf --model_args pretrained=EleutherAI/pythia-160m --tasks finreflect "
        "--device cpu --batch_size 1",
        "finreflect-eval run --model EleutherAI/pythia-160m --device cpu --batch-size 1",
    ),
    (
        "lm_eval --model hf --model_args pretrained=EleutherAI/pythia-160m,revision=step3000 "
        "--tasks finreflect",
        "finreflect-eval run --model EleutherAI/pythia-160m --revision step3000",
    ),
    (
        "lm_eval --model vllm --model_args pretrained=Qwen/Qwen3-8B,max_model_len=8192,"
        "enable_prefix_caching=True --tasks finreflect --limit 0.5 --seed 7",
        "finreflect-eval run --backend vllm --model Qwen/Qwen3-8B --model-args "
        """'{"max_model_len":8192,"enable_prefix_caching":true}' --limit 0.5 --seed 7""",
    ),
    (
        "lm_eval --model hf --model_args pretrained=gpt2 --tasks finreflect "
        "--output_path out --seed 3 --limit 2 --num_fewshot 0",
        "finreflect-eval run --output-path out --model gpt2 --limit 2 --seed 3 --num-fewshot 0",
    ),
    (
        "lm_eval --model hf --model_args pretrained=gpt2 --tasks finreflect_single_pass "
        "--tasks finreflect_reflection -t finreflect_smoke",
        "finreflect-eval run --model gpt2 --tasks finreflect_single_pass,finreflect_reflection "
        "finreflect_smoke",
    ),
    (
        "lm_eval --model hf --model_args pretrained=gpt2 --model_args dtype=float32 -a "
        "batch_size=2 --tasks finreflect --gen_kwargs temperature=0 --gen_kwargs max_gen_toks=64",
        "finreflect-eval run --model gpt2 --model-args dtype=float32,batch_size=2 --gen-kwargs "
        "temperature=0,max_gen_toks=64",
    ),
    (
        "lm_eval --model hf --model_args pretrained=gpt2 --tasks finreflect --seed 0,None,8,52",
        "finreflect-eval run --model gpt2 --seed 0,none,8,52",
    ),
    (
        "lm_eval --model hf --model_args pretrained=gpt2 --tasks finreflect --seed 42",
        "finreflect-eval run --model gpt2 --seed 42,42,42,42",
    ),
]


def configuration(command: str):
    args = parse_args(shlex.split(command)[1:])
    return args.command, args.verbosity, _run_config(args), _hub_log_args(args)


@pytest.mark.parametrize(("lm_eval", "ours"), SAME_RUN, ids=[str(i) for i in range(len(SAME_RUN))])
def test_an_lm_eval_command_line_is_the_same_run_as_ours(lm_eval, ours):
    theirs = configuration(lm_eval)
    assert theirs == configuration(ours)
    assert theirs[0] == "run"


@pytest.mark.parametrize(("lm_eval", "ours"), SAME_RUN, ids=[str(i) for i in range(len(SAME_RUN))])
def test_lm_evals_own_parser_takes_each_lm_eval_line(lm_eval, ours):
    """Each line of the table is a real lm-eval command line: lm-eval's own CLI parses it."""
    harness = require("lm_eval._cli.harness", "[dev] extra")
    cli = harness.HarnessCLI()
    argv = shlex.split(lm_eval)[1:]
    if argv[0] not in cli._subparsers.choices:  # lm-eval inserts `run`, as we do
        argv.insert(0, "run")
    args = cli._parser.parse_args(argv)
    assert args.command == "run" and args.tasks


def test_the_table_is_lm_eval_spelling_against_ours():
    assert len(SAME_RUN) >= 25
    for lm_eval, ours in SAME_RUN:
        assert lm_eval.split()[0] in ("lm_eval", "lm-eval") and ours.startswith("finreflect-eval")


def test_what_the_lm_eval_form_turns_into():
    _, _, config, hub = configuration(SAME_RUN[5][0])  # local-chat-completions
    assert config.model == ModelSpec(
        "facebook/opt-125m",
        "openai",
        {
            "base_url": "http://10.0.0.1:8000/v1/chat/completions",
            "max_concurrency": 1,
            "http_retries": 3,
        },
    )
    _, _, config, hub = configuration(SAME_RUN[17][0])  # short flags, a fraction
    assert config.model == ModelSpec("gpt2", "hf", {"batch_size": 4})
    assert config.limit == 0.1 and str(config.output_path) == "out"
    _, _, config, hub = configuration(SAME_RUN[9][0])
    assert hub.push_results_to_hub and hub.push_samples_to_hub and not hub.public_repo
    assert hub.repo("details", "EleutherAI") == "EleutherAI/lm-eval-results-private"
    _, _, config, _ = configuration(SAME_RUN[1][0])
    assert config.model.args["revision"] == "step100000"
    assert config.tasks == ["finreflect_single_pass", "finreflect_reflection"]


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("run --model gpt2 --model_argz a=1", "(did you mean --model_args?)"),
        ("run --model gpt2 --output-pth x", "(did you mean --output-path?)"),
        ("--model hf --model_args pretrained=gpt2 --num_fewshots 2", "did you mean --num_fewshot"),
        ("run --model gpt2 --predict_only", "run `finreflect-eval extract`"),
        ("run --model gpt2 --limit 2.5", "a fraction between 0 and 1"),
        ("score --samples x --tasks y", "unrecognized argument --tasks"),
    ],
)
def test_unknown_flags_get_a_close_name(capsys, command, message):
    with pytest.raises(SystemExit, match=r"^2$"):  # the usage error's exit code
        parse_args(shlex.split(command))
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("run --model hf", "--model hf names a backend"),
        ("--tasks list", "to list the tasks and groups: finreflect-eval tasks list"),
        ("run --model gpt2 --model_args pretrained=gpt2", "goes with lm-eval's form"),
        ("run --model gpt2@main --revision v2", "revision is given twice"),
        ("run --model gpt2 -a batch_size=4 --batch_size 8", "batch_size is given twice"),
        ("run --model gpt2 --apply_chat_template chatml", "a named chat template"),
        ("run --model gpt2 --model_args {bad", "not a JSON object"),
        ("run --model gpt2 --model_args bad", "is not key=value"),
        ("run --model local-chat-completions -a model=m,tokenized_requests=True", "not supported"),
    ],
)
def test_model_forms_that_cannot_be_read(command, message):
    with pytest.raises(FinReflectError, match=message):
        _run_config(parse_args(shlex.split(command)))


def test_option_values_that_start_with_dashes_are_left_alone():
    args = parse_args(["--model", "x", "--system_instruction", "--be_brief please", "-t", "a,b"])
    assert args.system_instruction == "--be_brief please"
    args = parse_args(["--model", "x", "--system_instruction=--be_brief"])
    assert args.system_instruction == "--be_brief"


def test_no_task_is_an_error():
    with pytest.raises(FinReflectError, match="--tasks names no task"):
        _run_config(parse_args(["--model", "x", "--tasks", ","]))


def test_at_revision_only_splits_hub_models():
    spec = ModelSpec.from_cli("claude-3-5-sonnet@20240620", "openai")
    assert spec.model == "claude-3-5-sonnet@20240620" and "revision" not in spec.args
    assert ModelSpec.from_cli("org/m@v2", "vllm").args == {"revision": "v2"}


def test_every_subcommand_takes_verbosity_and_underscores():
    args = parse_args(["leaderboard", "build", "--verbosity", "debug", "--check"])
    assert args.verbosity == "DEBUG" and args.check
    args = parse_args(["dataset", "build", "f.txt", "--output", "o", "--max_tokens", "64"])
    assert args.max_tokens == 64
    args = parse_args(["--model", "x", "--backend", "scripted", "-v", "WARNING"])
    assert args.command == "run" and args.verbosity == "WARNING"
    args = parse_args(["--verbosity=DEBUG", "tasks", "list"])
    assert args.command == "tasks" and args.verbosity == "DEBUG"


def test_a_pinned_revision_puts_the_resolved_commit_in_the_results(
    cli, env, tiny_model_dir, tmp_path
):
    """`--model ORG/NAME@REV` through the Hub's own cache layout (offline): the results name the
    revision asked for and the commit it resolved to."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--acme--tiny"
    shutil.copytree(tiny_model_dir, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "v1").write_text(commit)
    panel = panel_file(tmp_path, "accepts_all", "accepts_all")
    result = cli(
        *("--model", "hf", "--model_args", "pretrained=acme/tiny@v1,batch_size=2"),
        *("--tasks", "finreflect_smoke_single_pass", "--dataset", "sample", "--limit", "2"),
        *("--gen_kwargs", "max_gen_toks=48", "--max_invalid_share", "1", "--allow_failures"),
        *("--judges", str(panel), "--output_path", str(tmp_path / "out")),
        env={**env, "HF_HUB_CACHE": str(tmp_path / "hub")},
    )
    assert result.returncode == 0, result.stderr
    (results,) = (tmp_path / "out" / "acme__tiny").glob("results_*.json")
    config = json.loads(results.read_text())["config"]
    assert config["model_name"] == "acme/tiny"
    assert config["model_revision"] == "v1" and config["model_sha"] == commit
