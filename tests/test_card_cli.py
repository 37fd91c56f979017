"""``python -m anatomy_kit card``: a local model folder end to end, its exports, ``--save-pruned`` and ``--compare``."""

import json
import math
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
    (["--heal-k", "2"], "--heal-k need(s) --heal STEPS"),
    (["--lora-targets", "q_proj", "--heal-method", "lora"], "--lora-targets, --heal-method need(s) --heal STEPS"),
    (["--heal", "0"], "--heal 0: give a whole number of steps, at least 1"),
    (["--heal", "3", "--quick"], "--heal 3: give a whole number of steps, at least 1, on a full card (not --quick)"),
    (["--heal", "3", "--heal-k", "two"], "--heal-k 'two': give whole numbers of layers"),
    (["--heal", "3", "--heal-k", "0"], "--heal-k '0': give whole numbers of layers, at least 1"),
    (["--heal", "3", "--save-healed", "h"], "--save-healed DIR saves the healed model of --save-pruned K"),
    (["--heal", "3", "--lora-rank", "0"], "healing options: lora_rank=0 must be >= 1"),
    (["--heal", "3", "--heal-evals", "0"], "healing options: evals=0 must be >= 1"),
    (["--heal", "3", "--heal-lr", "-1"], "healing options: lr=-1.0"),
    (["--heal", "3", "--heal-lr", "0"], "healing options: lr=0.0 must be a finite number > 0"),
    (["--heal", "3", "--heal-lr", "nan"], "healing options: lr=nan must be a finite number > 0"),
    (["--heal", "3", "--lora-alpha", "0"], "healing options: lora_alpha=0.0 must be a finite number > 0"),
    (["--heal", "3", "--lora-targets", ","], "healing options: lora_targets=(): give module names"),
    (["--heal", "3", "--lora-targets", "layers.0.q_proj"], "lora_targets=('layers.0.q_proj',): give module names"),
    (["--lora-rank", "4"], "--lora-rank need(s) --heal STEPS"),
    (["--lora-alpha", "8"], "--lora-alpha need(s) --heal STEPS"),
    (["--heal-evals", "2"], "--heal-evals need(s) --heal STEPS"),
    (["--heal-lr", "1e-4"], "--heal-lr need(s) --heal STEPS"),
    (["--save-healed", "h"], "--save-healed need(s) --heal STEPS"),
    (["--heal-method", "full"], "--heal-method need(s) --heal STEPS"),
    (["--heal", "3", "--heal-method", "full", "--lora-rank", "4", "--lora-alpha", "8"],
     "--lora-rank, --lora-alpha set(s) LoRA, but --heal-method full trains every parameter"),
    (["--heal", "3", "--heal-method", "full", "--lora-targets", "q_proj"], "--lora-targets set(s) LoRA, but"),
    (["--save-pruned", "1", "p", "--heal", "3", "--save-healed", "p"],
     "--save-healed 'p' is --save-pruned 'p': give the healed model a folder of its own"),
    (["--save-pruned", "1", "p", "--heal", "3", "--save-healed", "./p/"], "--save-healed './p/' is --save-pruned 'p'"),
    (["--out", "c", "--save-pruned", "1", "p", "--heal", "3", "--save-healed", "c"], "--save-healed 'c' is --out 'c'"),
    (["--save-pruned", "1", "p", "--heal", "3", "--save-healed", "card-embedded"],
     "--save-healed 'card-embedded' is --out 'card-embedded'"),               # the default --out
    (["--save-pruned", "1", "p", "--heal", "3", "--save-healed", "h", "--save-method", "random"],
     "--save-healed heals the recommended (greedy) set; drop --save-method"),
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
    (["--heal", "3", "--heal-method", "qlora"], "argument --heal-method: invalid choice: 'qlora'"),
    (["--heal", "three"], "argument --heal: invalid int value: 'three'"),
    (["--heal", "3", "--heal-lr", "fast"], "argument --heal-lr: invalid float value: 'fast'"),
    (["--heal", "3", "--heal-evals", "2.5"], "argument --heal-evals: invalid int value: '2.5'"),
    (["--heal", "3", "--lora-rank", "8.0"], "argument --lora-rank: invalid int value: '8.0'"),
    (["--heal", "3", "--lora-alpha", "big"], "argument --lora-alpha: invalid float value: 'big'"),
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
    (["-K", "2", "--heal", "2", "--heal-k", "3"], "--heal-k 3: the card measures pruned sets of 1..2 layers"),
    (["-K", "2", "--heal", "2", "--heal-k", "2"], None),                       # the boundary: k = K is healed
    (["-K", "2", "--heal", "2", "--heal-method", "lora", "--lora-targets", "q_proj,qq"],
     "--lora-targets: lora_targets ['qq'] name no linear map of the decoder layers"),
    (["-K", "2", "--save-pruned", "2", "p", "--heal", "2", "--heal-k", "1", "--save-healed", "h"],
     "--save-healed saves k = 2 (from --save-pruned), but --heal-k 1 does not heal it; add 2"),
    (["-K", "2", "--save-pruned", "2", "p", "--heal", "2", "--save-healed", "MODEL"],
     "is the model's folder"),                              # MODEL: the model's own folder
    (["-K", "2", "--save-pruned", "2", "p", "--heal", "2", "--heal-k", "1,2", "--save-healed", "h"], None),
    (["-K", "2", "--heal", "2", "--lora-rank", "4", "--lora-alpha", "8", "--lora-targets", "q_proj"], None),  # auto
    (["-K", "2", "--heal", "2", "--heal-method", "lora", "--heal-evals", "1", "--heal-lr", "1e-3"], None),
])
def test_every_argument_is_checked_before_the_model_loads(options, words, saved_tiny_model, corpus, tmp_path,
                                                         capsys, monkeypatch, nothing_loads):
    monkeypatch.chdir(tmp_path)
    options = [str(saved_tiny_model) if o == "MODEL" else o for o in options]
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


def test_heal_writes_the_control_lora_recipe_and_a_merged_healed_folder(saved_tiny_model, corpus, tmp_path, capsys,
                                                                        one_torch_thread):
    """--heal with LoRA: heal.json holds the recipe (rank, alpha, targets, lr), the control and what it shares;
    the healed folder loads with from_pretrained and gives the healed perplexity; its README and the card's
    pages say how it was healed and measured; the cost is printed before the healing starts."""
    import shlex

    from transformers import AutoModelForCausalLM

    from anatomy_kit.card.heal import block_nll
    from anatomy_kit.card.text import card_text
    from anatomy_kit.hf.evaluation import make_batches

    out, pruned, healed = tmp_path / "card", tmp_path / "pruned", tmp_path / "healed"
    rc = main(["card", str(saved_tiny_model), "--corpus", corpus, *SIZES, "-K", "2", "--out", str(out),
               "--save-pruned", "2", str(pruned), "--heal", "2", "--heal-method", "lora", "--heal-k", "2",
               "--lora-rank", "2", "--heal-lr", "1e-3", "--save-healed", str(healed)])
    printed = capsys.readouterr().out
    assert rc == 0
    assert printed.index("healing: lora (--heal-method lora)") < printed.index("control (the intact model")
    assert re.search(r"2 fine-tunes, [0-9.e+]+ FLOPs, ", printed)
    heal = json.loads((out / "heal.json").read_text())
    r = heal["recipe"]
    assert (r["method"], r["lora_rank"], r["lora_alpha"], r["lora_targets"], r["lr"]) == ("lora", 2, 32.0, None, 1e-3)
    assert r["eval_steps"] == [0, 1, 2] and list(heal["by_k"]) == ["2"] and heal["control"]["curve"]["0"] > 0
    e = heal["by_k"]["2"]
    assert e["run"]["data_sha256"] == heal["control"]["data_sha256"] and "training blocks" in heal["shared"][0]
    assert {"vs_control", "gap_closed", "gap_before", "vs_pruned", "untuned", "differs"} <= set(e)
    card = load_card(out)
    assert e["layers"] == card.pruned_set(2) and e["ppl_pruned"] == pytest.approx(card.pruned_ppl(2), rel=1e-5)
    model = AutoModelForCausalLM.from_pretrained(healed)                  # merged: a plain model, no adapters
    assert model.config.num_hidden_layers == 4 and not any("lora" in k for k in model.state_dict())
    s = card.doc["settings"]
    from anatomy_kit.card.loading import load_tokenizer

    text = card_text(load_tokenizer(str(healed)), corpus, block_size=s["block_size"],
                     n_eval=s["tokens"] // s["block_size"], n_calibration=s["calibration_tokens"] // s["block_size"])
    batches = make_batches(text.eval_blocks, 2)
    ppl = math.exp(block_nll(model, batches).sum() / sum(b.n_targets for b in batches))
    assert ppl == pytest.approx(e["ppl_healed"], rel=1e-5) == heal["healed_folder"]["reloaded_ppl"]
    readme = (healed / "README.md").read_text()
    v = e["vs_control"]
    assert "rank 2, alpha 32" in readme and "lr 0.001" in readme and "merged into the weights" in readme
    assert f"ΔPPL {v['delta_pct']:+.1f} % [{v['low']:+.1f}, {v['high']:+.1f}]" in readme
    assert "--include_path $CARD/lm_eval" in readme
    line = re.search(r"```\n(python -m anatomy_kit card .*)\n```", readme).group(1)
    assert "--heal 2 --heal-method lora --heal-k 2 --heal-lr 0.001" in line and "--lora-rank 2" in line
    import argparse

    from anatomy_kit.card.cli import add_card_parser, heal_request

    again = add_card_parser(argparse.ArgumentParser().add_subparsers()).parse_args(shlex.split(line)[4:])
    recipe, ks = heal_request(again)
    assert ks == [2] and (recipe.steps, recipe.lr, recipe.lora_rank) == (2, 1e-3, 2)   # the line heals alike
    page = (out / "card.md").read_text()
    assert "## Healing, against its control" in page and f"| 2 | {', '.join(map(str, e['layers']))} |" in page
    assert "share the same" in page and "../healed" in page


@pytest.mark.parametrize("field, value", [("text_split", "held-out"), ("tokens", 64), ("calibration_tokens", 96),
                                          ("block_size", 16)])
def test_the_commands_text_is_the_cards_own(field, value, saved_tiny_model, corpus):
    """What --save-pruned, --heal, --save-healed and the lm-eval task score and train on is the card's text
    again: settings_text forwards the block size, the evaluation and calibration block counts and the text
    split recorded in card.json, and a change of any of them changes the blocks."""
    import torch

    from anatomy_kit.card.cli import settings_text
    from anatomy_kit.card.loading import load_tokenizer
    from anatomy_kit.card.text import card_text

    tok = load_tokenizer(str(saved_tiny_model))
    base = {"tokens": 128, "block_size": 32, "calibration_tokens": 64}           # no text_split: the standard one
    changed = {**base, field: value}
    for s in (base, changed):
        want = card_text(tok, corpus, block_size=s["block_size"], n_eval=s["tokens"] // s["block_size"],
                         n_calibration=s["calibration_tokens"] // s["block_size"],
                         split=s.get("text_split", "standard"))
        got = settings_text(tok, corpus, s)
        assert torch.equal(got.eval_blocks, want.eval_blocks) and got.split == want.split
        assert torch.equal(got.calibration_blocks, want.calibration_blocks)
    a, b = settings_text(tok, corpus, base), settings_text(tok, corpus, changed)
    assert (a.eval_blocks.shape, a.calibration_blocks.shape, a.token_sha256) != \
        (b.eval_blocks.shape, b.calibration_blocks.shape, b.token_sha256)
