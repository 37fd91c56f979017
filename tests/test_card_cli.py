"""``python -m anatomy_kit card``: a local model folder end to end, its exports, ``--save-pruned`` and ``--compare``."""

import json
import re

import pytest
import yaml

from anatomy_kit.book.cli import main
from anatomy_kit.card import load_card

from test_card_architectures import small_corpus

SIZES = ["--tokens", "128", "--block-size", "32", "--batch-size", "2", "--calibration-tokens", "64",
         "--random", "3", "--geometry-tokens", "24", "--device", "cpu"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return small_corpus(tmp_path_factory.mktemp("corpus"))


def test_card_command_writes_the_card_and_a_pruned_model(saved_tiny_model, corpus, tmp_path, capsys,
                                                          one_torch_thread, monkeypatch):
    """Under the CPU device guard, as on a GPU: ``--device cpu`` places the model on the stand-in accelerator and
    any device mix-up of the card, ``--save-pruned`` or ``--heal`` raises as CUDA would (tests/device_guard.py)."""
    import device_guard
    from test_card_parts import mergekit_resolves

    out, pruned = tmp_path / "card", tmp_path / "pruned"
    monkeypatch.chdir(saved_tiny_model.parent)                     # the model typed as a relative folder
    with device_guard.guarded() as guard:
        rc = main(["card", f"./{saved_tiny_model.name}", "--corpus", corpus, *SIZES, "-K", "2", "--ffn-budget",
                   "60%", "--out", str(out), "--save-pruned", "2", str(pruned), "--heal", "1"])
    monkeypatch.chdir(tmp_path)
    printed = capsys.readouterr().out
    assert rc == 0 and guard.n_ops > 10_000                        # the guard saw the card's work
    heal = json.loads((out / "heal.json").read_text())
    assert heal["steps"] == 1 and set(heal["by_k"]) == set(json.loads((out / "drop_list.json").read_text())["recommended"])
    for name in ("card.html", "card.md", "card.json", "card.schema.json", "widths.json", "drop_list.json",
                 "mergekit/passthrough_k2.yaml", "figures/pruning.png"):
        assert (out / name).is_file(), name
    card = load_card(out)
    drop = card.pruned_set(2)
    assert card.doc["widths"]["budget_fraction"] == 0.6 and (out / "cache" / card.doc["key"] / "card.json").exists()
    config = yaml.safe_load((out / "mergekit" / "passthrough_k2.yaml").read_text())
    kept = [l for s in config["slices"] for l in range(*s["sources"][0]["layer_range"])]
    assert config["merge_method"] == "passthrough" and kept == [l for l in range(6) if l not in drop]
    model = config["slices"][0]["sources"][0]["model"]
    assert model == str(saved_tiny_model.resolve()) and mergekit_resolves(model)
    assert json.loads((out / "drop_list.json").read_text())["recommended"]["2"] == drop
    gap = float(re.search(r"relative gap ([0-9.e+-]+)\)", printed).group(1))
    assert gap <= 1e-5 and (pruned / "config.json").exists()
    assert json.loads((pruned / "config.json").read_text())["num_hidden_layers"] == 4
    readme = (pruned / "README.md").read_text()
    entry = next(e for e in card.doc["pruning"]["sets"] if e["k"] == 2 and e["method"] == "greedy")
    assert f"without layers {drop}" in readme and "0-based" in readme
    assert f"Perplexity {entry['ppl']:.6g}" in readme and f"[{entry['low']:+.1f}, {entry['high']:+.1f}]" in readme
    assert f"context length {card.doc['text']['block_size']}" in readme
    line = re.search(r"```\n(python -m anatomy_kit card .*)\n```", readme).group(1)
    assert f"--save-pruned 2 {pruned}" in line and "-K 2" in line and "--ffn-budget 0.6" in line
    import argparse
    import shlex

    from anatomy_kit.card.cli import _settings, add_card_parser

    again = add_card_parser(argparse.ArgumentParser().add_subparsers()).parse_args(shlex.split(line)[4:])
    assert _settings(again).resolved(6).to_dict() == card.doc["settings"]      # the line rebuilds this card


def test_quick_card_and_compare(saved_tiny_model, corpus, tmp_path, capsys, one_torch_thread):
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["card", str(saved_tiny_model), "--corpus", corpus, *SIZES, "--quick", "--out", str(a)]) == 0
    assert main(["card", str(saved_tiny_model), "--corpus", corpus, *SIZES, "--quick", "--seed", "1",
                 "--out", str(b)]) == 0
    assert load_card(a).quick and not (a / "drop_list.json").exists()
    assert main(["card", "--compare", str(a / "card.json"), str(b / "card.json"), "--out", str(tmp_path / "c")]) == 0
    page = (tmp_path / "c" / "compare.html").read_text()
    assert "data:image/png;base64," in page and "relative depth" in (tmp_path / "c" / "compare.md").read_text()
    capsys.readouterr()
    assert main(["card", "--compare", str(a / "card.json")]) == 1
    assert "error: --compare needs two or more cards" in capsys.readouterr().err
    assert main(["card", str(saved_tiny_model), "--quick", "--save-pruned", "1", str(tmp_path / "x")]) == 1


@pytest.mark.parametrize("options, words", [
    (["--tokens", "10"], "tokens=10 must be >= 256"),
    (["-K", "0"], "max_prune=0 must be >= 1"),
    (["--random", "0"], "n_random=0 must be >= 1"),
    (["--save-pruned", "two", "pruned"], "--save-pruned 'two' 'pruned': K must be a whole number"),
    (["-K", "2", "--save-pruned", "3", "pruned"], "pruned sets of 1..2 layers"),
    (["--quick", "--save-pruned", "1", "pruned"], "--save-pruned needs the measured pruning"),
])
def test_bad_options_stop_with_a_named_error_before_any_work(options, words, tmp_path, capsys, monkeypatch):
    from anatomy_kit.card import build

    def refuse(*a, **k):
        raise AssertionError("build_card was called: a bad option must stop the command first")

    monkeypatch.setattr(build, "build_card", refuse)
    monkeypatch.chdir(tmp_path)
    assert main(["card", "embedded", *options]) == 1
    assert words in capsys.readouterr().err


@pytest.mark.parametrize("options, words", [
    (["--ffn-budget", "most"], "--ffn-budget 'most': give a fraction like 0.75 or a percentage like 75%"),
    (["--dtype", "int8"], "invalid choice: 'int8'"),
    (["--device", "tpu"], "invalid choice: 'tpu'"),
])
def test_malformed_options_are_refused_by_the_parser(options, words, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["card", "embedded", *options])
    assert stop.value.code == 2 and words in capsys.readouterr().err


@pytest.fixture
def nothing_loads(monkeypatch):
    """Loading weights or building the card fails the test: every check must come first."""
    from anatomy_kit.card import build
    from anatomy_kit.hf import models

    def refuse(*a, **k):
        raise AssertionError("weights were loaded or the card started: the check must come before")

    monkeypatch.setattr(build, "build_card", refuse)
    monkeypatch.setattr(models, "load_model", refuse)


@pytest.mark.parametrize("options, words", [
    (["--save-pruned", "2", "pruned"], "--save-pruned 2: the card measures pruned sets of 1..1 layers (the default K"),
    (["-K", "2", "--save-pruned", "2", "p", "--save-method", "best"], "--save-method='best' is not accepted; "
                                                                      "choose one of 'block_influence'"),
    (["-K", "6"], "max_prune (K) = 6 is not below the model's 6 layers"),
    (["-K", "5"], None),                                   # the boundary: K = L − 1 is accepted
    (["--corpus", "no_such.txt"], "corpus file 'no_such.txt' does not exist"),
    (["--ffn-budget", "5%"], "ffn_budget=0.05 asks for"),
])
def test_every_argument_is_checked_before_the_model_loads(options, words, saved_tiny_model, corpus, tmp_path,
                                                         capsys, monkeypatch, nothing_loads):
    monkeypatch.chdir(tmp_path)
    command = ["card", str(saved_tiny_model), "--corpus", corpus, *SIZES, *options]
    if words is None:                                      # passed every check, stopped at the refused build
        with pytest.raises(AssertionError, match="weights were loaded or the card started"):
            main(command)
        return
    assert main(command) == 1
    err = capsys.readouterr().err
    assert words in err, err


def test_a_short_corpus_is_refused_before_the_weights_load(saved_tiny_model, tmp_path, capsys, monkeypatch):
    from anatomy_kit.hf import models

    def refuse(*a, **k):
        raise AssertionError("weights were loaded: the text must be checked before")

    monkeypatch.setattr(models, "load_model", refuse)
    monkeypatch.chdir(tmp_path)
    short = tmp_path / "short.txt"
    short.write_text("\n\n".join(f"document {i} has a few words" for i in range(20)))
    assert main(["card", str(saved_tiny_model), "--corpus", str(short), *SIZES]) == 1
    err = capsys.readouterr().err
    assert "is too short: its" in err and "half" in err and "train split" not in err, err


@pytest.mark.parametrize("name, made", [("models/no_such_model", "models"), ("./no_such_model", None),
                                        ("a/b/c", None)])
def test_a_missing_folder_is_named_at_once(name, made, tmp_path, capsys, monkeypatch, nothing_loads):
    monkeypatch.chdir(tmp_path)
    if made:
        (tmp_path / made).mkdir()
    assert main(["card", name]) == 1
    err = capsys.readouterr().err
    assert f"model={name!r} names a folder, but" in err and "does not exist" in err, err


def test_an_existing_folder_without_config_and_an_unknown_architecture_are_named(tmp_path, capsys, nothing_loads):
    from anatomy_kit.card.loading import causal_lm_types

    (tmp_path / "empty").mkdir()
    assert main(["card", str(tmp_path / "empty")]) == 1
    assert "has no config.json" in capsys.readouterr().err
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    assert main(["card", str(tmp_path / "odd")]) == 1
    err = capsys.readouterr().err
    assert "model_type='no-such-architecture'" in err and "llama" in causal_lm_types()
    assert f"the {len(causal_lm_types())} model types accepted are: " in err and ", llama, " in err, err
