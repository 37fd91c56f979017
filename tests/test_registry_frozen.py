"""The committed registry is frozen: an edit of any committed entry is refused, even by an editor who also
rewrites the entry's own fingerprint; only an amendment (the registered form kept, the change beside it) loads."""

from __future__ import annotations

import copy

import pytest

from anatomy_kit.manifest import rule_registry_docs
from anatomy_kit.validate import AnatomyKitError
from anatomy_kit.verdicts import registry as REG


def _docs():
    rule_registry_docs.cache_clear()
    chapters, freeze = rule_registry_docs()
    return copy.deepcopy(chapters), copy.deepcopy(freeze)


def _entry(chapters, claim):
    return next(doc["claims"][claim] for doc in chapters if claim in doc["claims"])


def _refit(entry):
    """What a hand edit would also do: make the entry's own fingerprint match its edited forms."""
    entry["fingerprint"] = REG.claim_fingerprint(entry["role"], REG._forms("x", entry["forms"]))


def test_the_committed_registry_is_frozen_over_every_claim_with_a_plan():
    chapters, freeze = _docs()
    reg = REG.RuleRegistry.from_docs(chapters, freeze)
    assert reg.freeze is not None, "data_manifest/registry/freeze.yaml must hold the freeze"
    assert set(reg.freeze.fingerprints) == set(reg.entries)
    assert {"seed_offset", "text"} <= set(reg.freeze.plan)


def _smoke(entry):
    return entry["forms"]["smoke"]


EDITS = {
    # the growth claim's decision: its test, its seed count, its arms
    "a rule parameter": ("p1.growth_val_losses", lambda e: _smoke(e)["spec"]["params"].update(confidence=0.9)),
    "a seed count": ("p1.growth_val_losses", lambda e: _smoke(e)["design"].update(n_seeds=6, units=6)),
    "a control arm": ("p1.growth_val_losses", lambda e: _smoke(e)["design"].update(arms=["growth (a)", "edge-inward"])),
    "a null's draws": ("p1.critical_core", lambda e: _smoke(e)["spec"]["params"].update(draws=999)),
    "a bare NotComparable": ("p1.l11_rank", lambda e: _smoke(e).update(spec={"rule": "NotComparable",
                                                                          "params": {"why": "another scale"}})),
    "the role": ("p1.l11_rank", lambda e: e.update(role="secondary")),
}


@pytest.mark.parametrize("what", list(EDITS))
def test_an_edit_of_a_frozen_entry_is_refused_even_with_its_fingerprint_rewritten(what):
    claim, edit = EDITS[what]
    chapters, freeze = _docs()
    entry = _entry(chapters, claim)
    before = copy.deepcopy(entry)
    edit(entry)
    assert entry != before, f"the edit {what!r} changed nothing: the test would prove nothing"
    _refit(entry)
    with pytest.raises(AnatomyKitError, match=f"{claim}.*differ from the frozen registry"):
        REG.RuleRegistry.from_docs(chapters, freeze)


def test_an_edit_without_its_fingerprint_rewritten_is_refused_too():
    chapters, freeze = _docs()
    _smoke(_entry(chapters, "p1.l11_rank"))["design"]["units"] = 1
    with pytest.raises(AnatomyKitError, match="never edited"):
        REG.RuleRegistry.from_docs(chapters, freeze)
