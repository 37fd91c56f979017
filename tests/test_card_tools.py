"""The card's exports in the tools they are for: mergekit builds the pruned model from the passthrough
YAML, and lm-eval reproduces the card's perplexities from the exported task, with no edit.

Each test is skipped where its tool is not installed (neither is in the project's lock; install them
beside it with ``pip install mergekit lm-eval`` to run these). The exported YAML's ``model:`` is checked
without mergekit in ``test_card_parts`` and ``test_card_cli``.
"""

import json
import math
import shutil
import subprocess

import pytest

from anatomy_kit.book.cli import main
from anatomy_kit.card import load_card

from test_card_architectures import small_corpus

SIZES = ["--tokens", "128", "--block-size", "32", "--batch-size", "2", "--calibration-tokens", "64",
         "--random", "3", "--geometry-tokens", "24", "--device", "cpu", "-K", "2"]


@pytest.fixture(scope="module")
def built(saved_tiny_model, tmp_path_factory):
    """A full card of the tiny saved model and its greedy 2-set saved as a folder."""
    root = tmp_path_factory.mktemp("tools")
    corpus = small_corpus(root)
    out, pruned = root / "card", root / "pruned"
    assert main(["card", str(saved_tiny_model), "--corpus", corpus, *SIZES, "--out", str(out),
                 "--save-pruned", "2", str(pruned)]) == 0
    return load_card(out), out, pruned


def test_lm_eval_reproduces_the_cards_perplexities(built, one_torch_thread):
    pytest.importorskip("lm_eval")
    from anatomy_kit.card.lm_eval_task import run_lm_eval, task_name

    card, out, pruned = built
    task = json.loads((out / "lm_eval" / "task.json").read_text())
    assert task["round_trip_blocks"] == task["blocks"] == card.doc["text"]["n_eval_blocks"]
    assert task["scored_tokens"] == card.doc["baseline"]["scored_tokens"]
    name = task_name(card.doc)
    for folder, want in ((card.doc["model"]["location"], card.baseline_ppl), (pruned, card.pruned_ppl(2))):
        got = run_lm_eval(str(folder), [name], include_path=str(out / "lm_eval"))[name]["token_perplexity,none"]
        # the same float32 model on the same tokens, one block per forward either way: sums differ in order
        assert math.log(got) == pytest.approx(math.log(want), rel=1e-5), folder


def test_mergekit_builds_the_cards_pruned_model(built, tmp_path, one_torch_thread):
    pytest.importorskip("mergekit")
    exe = shutil.which("mergekit-yaml")
    if exe is None:
        pytest.skip("mergekit-yaml is not on PATH")
    from safetensors.torch import load_file

    card, out, pruned = built
    merged = tmp_path / "merged"
    subprocess.run([exe, str(out / "mergekit" / "passthrough_k2.yaml"), str(merged), "--copy-tokenizer"],
                   check=True, cwd=tmp_path, capture_output=True)
    ours = {k: v for f in pruned.glob("*.safetensors") for k, v in load_file(f).items()}
    theirs = {k: v for f in merged.glob("*.safetensors") for k, v in load_file(f).items()}
    shared = set(ours) & set(theirs)
    assert {k for k in ours if "layers" in k} <= shared
    for k in shared:                                     # the same weights, copied: bit-equal
        assert (ours[k] == theirs[k]).all(), k
