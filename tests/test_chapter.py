import json

import pytest

from anatomy_kit.book import run as chapter
from anatomy_kit.verdicts.claims import Claim, NotComparable
from anatomy_kit.book.report import build_report
from anatomy_kit.validate import AnatomyKitError

DEFAULTS = {"smoke": dict(model="embedded", corpus="python-docs", n_eval=4, lr=0.5, layers=[1, 2]),
            "full": dict(model="HuggingFaceTB/SmolLM2-135M", corpus="fineweb-edu", n_eval=64, lr=0.5, layers=[1])}


def resolve(**kw):
    args = dict(scale="smoke", device="cpu", defaults=DEFAULTS, build_dir="unused-build")
    args.update(kw)
    return chapter.resolve_run("chX", **args)


def test_defaults_of_each_scale(capsys):
    run = resolve()
    assert (run.model, run.corpus, run.sizes["n_eval"]) == ("embedded", "python-docs", 4)
    assert "scale='smoke'" in capsys.readouterr().out
    full = resolve(scale="full")
    assert (full.model, full.sizes["n_eval"]) == ("HuggingFaceTB/SmolLM2-135M", 64)
    assert resolve(n_eval=9).sizes["n_eval"] == 9


@pytest.mark.parametrize("kw, message", [
    (dict(scale="large"), "scale='large' is not accepted; choose one of 'smoke', 'hour', 'full'"),
    (dict(device="tpu"), "device='tpu' is not accepted"),
    (dict(n_eval=0), "n_eval=0 must be >= 1"),
    (dict(n_eval=2.5), "n_eval=2.5 must be an integer"),
    (dict(lr=-1), "lr=-1 must be a number > 0"),
    (dict(layers=[]), "layers=\\[\\] must be a non-empty list"),
    (dict(n_evall=3), "unknown parameter\\(s\\) \\['n_evall'\\] for chapter chX"),
    (dict(model="gpt-5"), "model='gpt-5' is not accepted"),
    (dict(corpus="c4"), "corpus='c4' is not accepted"),
    (dict(seed=-1), "seed=-1 must be >= 0"),
])
def test_bad_parameters_are_named(kw, message):
    with pytest.raises(AnatomyKitError, match=message):
        resolve(**kw)


def test_store_is_keyed_by_the_run_and_survives_reopening(tmp_path):
    run = resolve(build_dir=tmp_path)
    s = run.store("sweep")
    s["a"] = 1.5
    assert run.store("sweep")["a"] == 1.5
    assert "a" not in resolve(build_dir=tmp_path, n_eval=5).store("sweep")   # other sizes, other store
    assert not list(tmp_path.rglob("*.tmp"))


def test_claims_must_name_a_reference_and_be_rule_decided(tmp_path):
    with pytest.raises(AnatomyKitError, match="claim id 'p9.nothing' is not in data_manifest/references.yaml"):
        Claim("p9.nothing", 1, NotComparable("x"))
    with pytest.raises(AnatomyKitError, match="is not a Claim"):
        resolve(build_dir=tmp_path).save_metrics({}, [{"id": "p1.baseline_ppl", "verdict": "reproduced"}])


def test_metrics_and_report(tmp_path):
    run = resolve(build_dir=tmp_path)
    run.save_metrics({"baseline_ppl": 24.3}, [Claim("p1.baseline_ppl", 24.3, NotComparable("other text"),
                                                    note="ten sentences against the docs")])
    report = build_report(tmp_path, {"chX": 12.0})
    doc = report["chapters"][0]
    assert doc["metrics"]["baseline_ppl"] == 24.3 and doc["wall_seconds"] == 12.0
    claim = doc["claims"][0]
    assert claim["paper"]["value"] == 22.60 and claim["ours"] == 24.3
    md = (tmp_path / "report.md").read_text()   # the page's layout is tested in tests/test_report.py
    assert "Baseline perplexity 22.6" in md and ">not comparable</span>" in md
    assert md.count("other text") == 2          # the row's line of why and the reason in its details
    assert "<dt>note</dt><dd>ten sentences against the docs</dd>" in md
    assert json.loads((tmp_path / "report.json").read_text()) == report
