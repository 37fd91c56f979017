"""A chapter's ``full`` or ``hour`` defaults read from its source (the dict literal inside its resolve cell), for tests
that compare them with the kit's tables (the hour presets, the power table's full units)."""

from __future__ import annotations

import ast

from conftest import ROOT


def _block(text: str, start: str) -> str:
    """The balanced ``dict(...)`` (or ``[...]``) that follows ``start`` in ``text``."""
    i = text.index(start) + len(start)
    first = min(k for k in (text.find("(", i), text.find("[", i)) if k >= 0)
    opening = text[first]
    closing = {"(": ")", "[": "]"}[opening]
    depth = 0
    for j in range(first, len(text)):
        depth += {opening: 1, closing: -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j + 1].strip()
    raise AssertionError(start)


def full_defaults(chapter: str) -> dict:
    """``defaults["full"]`` of ``chapter``, its names (presets, recipes, model lists) evaluated as the chapter does."""
    return scale_defaults(chapter, "full")


def paper_fraction() -> float:
    """Chapter 3's ``PAPER_FRACTION``, computed as its cell does: growth's steps over uniform's in the paper."""
    from anatomy_kit.manifest import reference

    half = reference("p1.growth_half_budget_steps")["value"]
    return half["growth"] / half["uniform"]


def scale_defaults(chapter: str, scale: str) -> dict:
    """``defaults[scale]`` of ``chapter`` (``"full"`` or ``"hour"``), evaluated as the chapter does."""
    from anatomy_kit.width_growth import recipe
    from anatomy_kit.hour import hour_preset
    from anatomy_kit.lm import PRESETS
    from anatomy_kit.lm.estimates import width_solver_rules
    from anatomy_kit.manifest import reference

    text = (ROOT / "notebooks" / f"{chapter}.md").read_text()
    multi = reference("p3.multistage")["value"]
    gate = reference("p3.warmup_gate_tokens")["value"]
    names = {"PRESETS": PRESETS, "RULES": width_solver_rules(), "ALL": list(recipe.CONDITIONS),
             "FULL": recipe.paper_d256_d384(multi["tokens_per_param"], gate),
             "FULL_MS": recipe.paper_multistage(multi["tokens_per_param"], gate_tokens=gate), "list": list,
             "dict": dict, "range": range, "hour_preset": hour_preset,
             "PAPER_FRACTION": paper_fraction()}
    if "PAPER_MODELS = " in text:
        names["PAPER_MODELS"] = ast.literal_eval(_block(text, "PAPER_MODELS = "))
    return eval(compile(_block(text, f'"{scale}": '), chapter, "eval"), names)
