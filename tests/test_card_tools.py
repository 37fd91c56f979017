"""The card's exports in the tools they are for, run as a user runs them, from a moved copy of the folders.

mergekit and lm-eval come from their own cached environment (``tests/tools_env.py``: created once from
``requirements/tools.txt``, reused after; nothing here is skipped). A full card of a tiny saved model is
built with ``--save-pruned``; then the card's folder, the pruned folder and the model's folder are
*moved* (copied elsewhere, the originals deleted), the mergekit configs are pointed at the model's new
folder with the command the card prints, and:

- ``mergekit-yaml`` builds the pruned model from the exported config, run in another directory: the
  same tensors as the ``--save-pruned`` folder, bit for bit;
- ``lm_eval`` scores the intact and the pruned model with the exported task (``--include_path`` the
  moved ``lm_eval/``), giving the card's perplexities; a task whose documents count one token too many
  or too few per block (an off-by-one in ``n_tokens`` or in the context/continuation split) misses them.
"""

import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from anatomy_kit.book.cli import main
from anatomy_kit.card import load_card

from test_card_architectures import small_corpus
from tools_env import ensure

pytestmark = pytest.mark.whole_run          # runs the real tools end to end: once in CI, not per kernel path

SIZES = ["--tokens", "128", "--block-size", "32", "--batch-size", "2", "--calibration-tokens", "64",
         "--random", "3", "--geometry-tokens", "24", "--device", "cpu", "-K", "2"]


@pytest.fixture(scope="module")
def tools():
    """The tools' bin folder (the cached environment; created here the first time)."""
    return ensure()


def _env(tools: Path) -> dict:
    """The tools' environment first on PATH, offline, one thread, no cache in the user's home."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return {**env, "PATH": f"{tools}{os.pathsep}{env.get('PATH', '')}", "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


@pytest.fixture(scope="module")
def moved(saved_tiny_model, tmp_path_factory):
    """A full card with --save-pruned 2, its folders moved to another place afterwards."""
    made = tmp_path_factory.mktemp("made")
    corpus = small_corpus(made)
    model = made / "model"
    shutil.copytree(saved_tiny_model, model)
    assert main(["card", str(model), "--corpus", corpus, *SIZES, "--out", str(made / "card"),
                 "--save-pruned", "2", str(made / "pruned")]) == 0
    there = tmp_path_factory.mktemp("elsewhere")
    for name in ("card", "pruned", "model"):
        shutil.copytree(made / name, there / name)
    shutil.rmtree(made)                                  # nothing of the old place is left to read
    return there


def test_the_card_page_names_every_export_and_the_rewrite_command_moves_the_configs(moved, tools):
    from anatomy_kit.card.exports import mergekit_rewrite_command

    card = load_card(moved / "card")
    page = (moved / "card" / "card.md").read_text()
    html = (moved / "card" / "card.html").read_text()
    for text in (page, html):
        for name in ("mergekit/passthrough_k*.yaml", "lm_eval/", "drop_list.json", "mergekit-yaml mergekit/",
                     "--include_path lm_eval --tasks card_ppl_", "pip install mergekit"):
            assert name in text, name
    assert 'pip install "lm-eval[hf]"' in page and "pip install &quot;lm-eval[hf]&quot;" in html
    readme = (moved / "pruned" / "README.md").read_text()
    assert "--include_path $CARD/lm_eval" in readme and "CARD=../card" in readme
    assert "mergekit-yaml $CARD/mergekit/passthrough_k2.yaml" in readme and 'pip install "lm-eval[hf]"' in readme
    command = mergekit_rewrite_command(card.doc)
    assert command in page
    new = str(moved / "model")
    subprocess.run(command.replace("NEW_FOLDER", new), shell=True, check=True, cwd=moved / "card")
    for k in ("1", "2"):
        text = (moved / "card" / "mergekit" / f"passthrough_k{k}.yaml").read_text()
        body = [line for line in text.splitlines() if not line.startswith("#")]     # the comment keeps the name
        assert f"model: {new}" in text and not any("made" in line for line in body)


def test_mergekit_builds_the_cards_pruned_model_from_the_moved_folder(moved, tools, tmp_path):
    from safetensors.torch import load_file

    test_the_card_page_names_every_export_and_the_rewrite_command_moves_the_configs(moved, tools)
    run = tmp_path / "run"                               # another working directory
    run.mkdir()
    proc = subprocess.run([str(tools / "mergekit-yaml"), str(moved / "card" / "mergekit" / "passthrough_k2.yaml"),
                           str(run / "merged"), "--copy-tokenizer"], cwd=run, env=_env(tools), capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    ours = {k: v for f in (moved / "pruned").glob("*.safetensors") for k, v in load_file(f).items()}
    theirs = {k: v for f in (run / "merged").glob("*.safetensors") for k, v in load_file(f).items()}
    assert {k for k in ours if "layers" in k} <= set(theirs) and len(ours) == len(theirs)
    for k in ours:                                       # the same weights, copied: bit-equal
        assert (ours[k] == theirs[k]).all(), k


def _token_perplexity(tools: Path, model: Path, task: str, include: Path, cwd: Path) -> float:
    out = cwd / "results"
    proc = subprocess.run([str(tools / "lm_eval"), "--model", "hf", "--model_args", f"pretrained={model}",
                           "--include_path", str(include), "--tasks", task, "--device", "cpu",
                           "--output_path", str(out)], cwd=cwd, env=_env(tools), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (results,) = sorted(out.rglob("results_*.json"))
    value = json.loads(results.read_text())["results"][task]["token_perplexity,none"]
    shutil.rmtree(out)
    return value


def test_lm_eval_reproduces_the_cards_perplexities_from_the_moved_folder(moved, tools, tmp_path):
    from anatomy_kit.card.lm_eval_task import task_name

    card = load_card(moved / "card")
    task = json.loads((moved / "card" / "lm_eval" / "task.json").read_text())
    assert task["round_trip_blocks"] == task["blocks"] == card.doc["text"]["n_eval_blocks"]
    docs = [json.loads(line) for line in (moved / "card" / "lm_eval" / "card_ppl_docs.jsonl").read_text().splitlines()]
    assert sum(d["n_tokens"] for d in docs) == card.doc["baseline"]["scored_tokens"]   # the card's scored tokens
    assert "/" not in (moved / "card" / "lm_eval" / "card_ppl.yaml").read_text().split("task:", 1)[1]  # no path
    name = task_name(card.doc)
    for folder, want in ((moved / "model", card.baseline_ppl), (moved / "pruned", card.pruned_ppl(2))):
        got = _token_perplexity(tools, folder, name, Path("lm_eval"), moved / "card")     # relative include path
        # the same float32 model on the same tokens, one block per forward either way: sums differ in order.
        # One token more or less per block moves log PPL by about 1/31 of itself (31 scored tokens a block)
        assert math.log(got) == pytest.approx(math.log(want), rel=1e-5), folder


def test_the_kits_lm_eval_option_runs_the_command_on_path(moved, tools, monkeypatch):
    """``run_lm_eval`` (what ``--lm-eval`` calls) forwards model, task, include path and device to ``lm_eval``."""
    from anatomy_kit.card.lm_eval_task import run_lm_eval, task_name

    card = load_card(moved / "card")
    for key, value in _env(tools).items():
        monkeypatch.setenv(key, value)
    name = task_name(card.doc)
    got = run_lm_eval(str(moved / "pruned"), [name], include_path=moved / "card" / "lm_eval", device="cpu")
    assert math.log(got[name]["token_perplexity,none"]) == pytest.approx(math.log(card.pruned_ppl(2)), rel=1e-5)
    limited = run_lm_eval(str(moved / "pruned"), [name], include_path=moved / "card" / "lm_eval", limit=1)
    first_block = limited[name]["token_perplexity,none"]
    assert math.log(first_block) != pytest.approx(math.log(card.pruned_ppl(2)), rel=1e-5)   # --limit 1: one block
    from anatomy_kit.validate import AnatomyKitError

    with pytest.raises(AnatomyKitError, match="lm-eval could not run tasks"):
        run_lm_eval(str(moved / "pruned"), ["no_such_task_anywhere"], include_path=moved / "card" / "lm_eval")


def test_ci_makes_the_tools_environment_and_lists_every_skip():
    """``make test`` depends on ``tools-env`` (so these tests never skip for a missing tool), and every pytest
    command of the Makefile prints the skipped tests with their reasons (``-rs``)."""
    from conftest import ROOT

    make = (ROOT / "Makefile").read_text()
    assert "\ntest: $(HTML) system-deps tools-env\n" in make and "tests/tools_env.py" in make
    commands = [line for line in make.splitlines() if "-m pytest" in line]
    assert len(commands) == 3 and all(" -rs " in c for c in commands), commands
