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
                                                          one_torch_thread):
    out, pruned = tmp_path / "card", tmp_path / "pruned"
    rc = main(["card", str(saved_tiny_model), "--corpus", corpus, *SIZES, "-K", "2", "--ffn-budget", "60%",
               "--out", str(out), "--save-pruned", "2", str(pruned)])
    printed = capsys.readouterr().out
    assert rc == 0
    for name in ("card.html", "card.md", "card.json", "card.schema.json", "widths.json", "drop_list.json",
                 "mergekit/passthrough_k2.yaml", "figures/pruning.png"):
        assert (out / name).is_file(), name
    card = load_card(out)
    drop = card.pruned_set(2)
    assert card.doc["widths"]["budget_fraction"] == 0.6 and (out / "cache" / card.doc["key"] / "card.json").exists()
    config = yaml.safe_load((out / "mergekit" / "passthrough_k2.yaml").read_text())
    kept = [l for s in config["slices"] for l in range(*s["sources"][0]["layer_range"])]
    assert config["merge_method"] == "passthrough" and kept == [l for l in range(6) if l not in drop]
    assert json.loads((out / "drop_list.json").read_text())["recommended"]["2"] == drop
    gap = float(re.search(r"relative gap ([0-9.e+-]+)\)", printed).group(1))
    assert gap <= 1e-5 and (pruned / "config.json").exists()
    assert json.loads((pruned / "config.json").read_text())["num_hidden_layers"] == 4


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
