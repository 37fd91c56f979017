"""An interrupted card resumes from its cache and gives the same card; a finished one is not recomputed."""

import pytest

from anatomy_kit.card import CardSettings, build_card, cached_cards, load_card
from anatomy_kit.card import build, measure

from conftest import tiny_llama
from test_card_architectures import TINY, corpus, tok  # noqa: F401 (module fixtures, shared)

SETTINGS = CardSettings(**{**TINY.to_dict(), "max_prune": 2})       # 4 evaluation blocks in 2 batches


def _without_run_facts(doc):
    """The card without what differs between runs by design (wall times, memory, creation time)."""
    prov = {k: v for k, v in doc["provenance"].items() if k not in ("timings", "peak_rss_mb", "created")}
    return {**doc, "provenance": prov}


def _interrupting(monkeypatch, name, at, module=measure):
    """Replace ``module.<name>`` by a version that raises KeyboardInterrupt on call number ``at``; count calls."""
    real, calls = getattr(module, name), []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == at:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, flaky)
    return calls


def test_an_interrupted_card_resumes_to_the_same_card(tok, corpus, tmp_path, monkeypatch, one_torch_thread):
    model = tiny_llama()
    kw = dict(tokenizer=tok, corpus=corpus, settings=SETTINGS, progress=False)
    whole = build_card(model, cache_dir=tmp_path / "whole", **kw)
    with monkeypatch.context() as m:                       # stopped in the causal sweep of the second batch
        _interrupting(m, "causal_rows", at=2)
        with pytest.raises(KeyboardInterrupt):
            build_card(model, cache_dir=tmp_path / "cut", **kw)
    with monkeypatch.context() as m:                       # then in the pruned models of the second batch
        causal_calls = _interrupting(m, "causal_rows", at=0)
        _interrupting(m, "measure_sets", at=2)
        with pytest.raises(KeyboardInterrupt):
            build_card(model, cache_dir=tmp_path / "cut", **kw)
    assert len(causal_calls) == 1                          # the first batch's sweep was not recomputed
    with monkeypatch.context() as m:
        causal_calls = _interrupting(m, "causal_rows", at=0)
        prune_calls = _interrupting(m, "measure_sets", at=0)
        resumed = build_card(model, cache_dir=tmp_path / "cut", **kw)
    assert (len(causal_calls), len(prune_calls)) == (0, 1)
    assert _without_run_facts(resumed.doc) == _without_run_facts(whole.doc)
    assert set(resumed.doc["provenance"]["timings"]) >= {"causal sweep", "pruned models", "greedy removal"}


def test_a_finished_card_is_read_back_not_recomputed(tok, corpus, tmp_path, monkeypatch, one_torch_thread):
    model = tiny_llama()
    kw = dict(tokenizer=tok, corpus=corpus, settings=CardSettings(**{**SETTINGS.to_dict(), "quick": True}),
              progress=False, cache_dir=tmp_path)
    first = build_card(model, **kw)
    with monkeypatch.context() as m:
        calls = _interrupting(m, "stream_batches", at=1, module=build)
        again = build_card(model, **kw)
    assert calls == [] and again.doc == first.doc
    listed = cached_cards(tmp_path, corpus=corpus)
    assert [c.doc["key"] for c in listed] == [first.doc["key"]]
    assert load_card(first.folder).doc == first.doc
    other = build_card(model, **{**kw, "settings": CardSettings(**{**kw["settings"].to_dict(), "seed": 1})})
    assert other.doc["key"] != first.doc["key"]            # other settings: another cache entry


def test_the_key_changes_with_the_text_the_settings_and_the_model_each(tok, corpus, tmp_path, one_torch_thread):
    """One input changed at a time, everything else fixed: each gives another key (and another cache entry)."""
    import torch

    quick = CardSettings(**{**SETTINGS.to_dict(), "quick": True})
    kw = dict(tokenizer=tok, progress=False)
    base = build_card(tiny_llama(), corpus=corpus, settings=quick, **kw).doc["key"]
    assert build_card(tiny_llama(), corpus=corpus, settings=quick, **kw).doc["key"] == base    # same inputs
    other_text = tmp_path / "other.txt"
    docs = open(corpus, encoding="utf-8").read().split("\n\n")
    other_text.write_text("\n\n".join(["a different first document about lists"] + docs[1:]), encoding="utf-8")
    changed_model = tiny_llama()
    with torch.no_grad():
        changed_model.model.layers[3].mlp.down_proj.weight[0, 0] += 1e-3           # one weight
    keys = {"text": build_card(tiny_llama(), corpus=str(other_text), settings=quick, **kw).doc["key"],
            "settings": build_card(tiny_llama(), corpus=corpus, **kw,
                                   settings=CardSettings(**{**quick.to_dict(), "harm_pct": 30.0})).doc["key"],
            "model": build_card(changed_model, corpus=corpus, settings=quick, **kw).doc["key"]}
    assert all(k != base for k in keys.values()), keys
    assert len(set(keys.values())) == 3
