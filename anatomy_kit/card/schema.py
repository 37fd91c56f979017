"""The card's JSON: its versioned schema (JSON Schema, draft 2020-12) and the validation every card passes.

``card.json`` holds ``"schema": "anatomy_kit/layer-card/v1"``. A change that removes or renames a
field, or changes its meaning, is a new version; added optional fields are not. Layer indices are
0-based everywhere (``"layer_index_base": 0``). Numbers that could not be computed are ``null``,
never a string. :func:`validate_card` checks a document with ``jsonschema`` (a dependency of
``nbformat``) and raises :class:`~.errors.CardSchemaError` naming the first failing field; the
schema itself is :data:`CARD_SCHEMA` (written beside every card as ``card.schema.json``). Used by
the book page *Your model's report card*.
"""

from __future__ import annotations

from .errors import CardSchemaError

__all__ = ["SCHEMA", "CARD_SCHEMA", "validate_card"]

SCHEMA = "anatomy_kit/layer-card/v1"

_NUM = {"type": "number"}
_NUM_OR_NULL = {"type": ["number", "null"]}
_INT = {"type": "integer", "minimum": 0}
_STR = {"type": "string"}
_STR_OR_NULL = {"type": ["string", "null"]}
_LAYERS = {"type": "array", "items": _INT}


def _obj(props: dict, required: list | None = None, extra: bool = True) -> dict:
    return {"type": "object", "properties": props, "required": list(props) if required is None else required,
            "additionalProperties": extra}


_CAUSAL_ENTRY = _obj({"ppl": _NUM, "delta_pct": _NUM, "low": _NUM, "high": _NUM, "anti_layer": {"type": "boolean"}})
_CHEAP = _obj({k: _NUM for k in ("block_influence", "angular_distance", "update_norm", "work_shift", "work_gw")})
_LAYER = _obj({
    "layer": _INT, "depth": {"type": "number", "minimum": 0, "maximum": 1}, "cheap": _CHEAP,
    "causal": {"oneOf": [{"type": "null"}, _obj({k: _CAUSAL_ENTRY for k in ("neighbour-mean", "skip", "attention",
                                                                              "mlp")})]},
    "flags": {"type": "array", "items": _STR}, "ffn_width": _INT, "suggested_width": _INT})
_SET = _obj({"method": _STR, "k": {"type": "integer", "minimum": 1}, "layers": _LAYERS, "ppl": _NUM,
             "delta_pct": _NUM, "low": _NUM, "high": _NUM, "p_random": _NUM_OR_NULL, "chosen_on": _STR})
_PRUNING = _obj({
    "max_k": {"type": "integer", "minimum": 1}, "methods": {"type": "array", "items": _STR}, "rescored": _STR,
    "greedy_steps": {"type": "array", "items": _obj({"removed": _INT, "scores": {"type": "object"}})},
    "sets": {"type": "array", "items": _SET},
    "random": {"type": "object", "additionalProperties": {"type": "array", "items": _obj({"layers": _LAYERS,
                                                                                          "ppl": _NUM})}},
    "recommended": {"type": "object", "additionalProperties": _SET}})

#: Top-level fields every card holds ("literature" was added later: optional, so older cards still validate).
_REQUIRED = ["schema", "key", "layer_index_base", "model", "settings", "text", "verification", "memory", "baseline",
             "layers", "angular", "agreement", "pruning", "widths", "provenance", "notes"]

CARD_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "anatomy_kit/layer-card/v1",
    "title": "Layer report card (anatomy_kit)",
    **_obj({
        "schema": {"const": SCHEMA},
        "key": _STR,
        "layer_index_base": {"const": 0},
        "model": _obj({"name": _STR, "source": {"enum": ["embedded", "local", "hub", "object"]}, "class": _STR,
                       "model_type": _STR_OR_NULL, "revision": _STR_OR_NULL, "checksum": _STR_OR_NULL,
                       "n_layers": {"type": "integer", "minimum": 1}, "hidden_size": _INT, "n_parameters": _INT,
                       "location": _STR_OR_NULL},
                      ["name", "source", "class", "n_layers", "hidden_size", "n_parameters", "revision", "checksum"]),
        "settings": _obj({k: {} for k in ("tokens", "block_size", "batch_size", "calibration_tokens", "max_prune",
                                          "n_random", "geometry_tokens", "ffn_budget", "dtype", "quick", "seed")}),
        "text": _obj({"corpus": _STR, "kind": _STR, "block_size": _INT, "n_eval_blocks": _INT,
                      "n_calibration_blocks": _INT, "eval_tokens": _INT, "calibration_tokens": _INT,
                      "token_sha256": _STR, "text_sha256": _STR_OR_NULL}),
        "verification": _obj({"layers_path": _STR, "n_layers": _INT, "n_hidden_states": _INT, "relative_gap": _NUM,
                              "tolerance": _NUM}, ["layers_path", "n_layers", "n_hidden_states", "relative_gap"]),
        "memory": {"type": ["object", "null"]},
        "baseline": _obj({"ppl": _NUM, "nll_per_token": _NUM, "scored_tokens": _INT, "n_blocks": _INT}),
        "layers": {"type": "array", "items": _LAYER, "minItems": 1},
        "angular": _obj({"token_scope": _STR, "offsets": {"type": "integer", "minimum": 1},
                         "matrix": {"type": "array", "items": {"type": "array", "items": _NUM_OR_NULL}},
                         "best_blocks": {"type": "array", "items": _obj({"n": _INT, "start": _INT, "layers": _LAYERS,
                                                                         "distance": _NUM})}}),
        "agreement": _obj({"signals": {"type": "array", "items": _STR},
                           "spearman": {"type": "array", "items": _obj({"a": _STR, "b": _STR, "rho": _NUM_OR_NULL,
                                                                        "p": _NUM_OR_NULL, "method": _STR, "n": _INT})},
                           "top_k": {"type": "array", "items": _obj({"a": _STR, "b": _STR, "k": _INT,
                                                                     "shared": _LAYERS, "n_shared": _INT,
                                                                     "chance_p": _NUM})},
                           "flag_rule": _STR, "harm_pct": _NUM}, ["signals", "spearman", "top_k", "flag_rule"]),
        "pruning": {"oneOf": [{"type": "null"}, _PRUNING]},
        "literature": _obj({"definitions": {"type": "object"}, "signals": {"type": "object"},
                            "prune_me_blocks": {"type": "array"}, "shortgpt_sets": {"type": "object"}}),
        "widths": _obj({"profile": _STR, "budget_fraction": _NUM, "multiple": _INT, "today": _LAYERS,
                        "suggested": _LAYERS, "continuous": {"type": "array", "items": _NUM},
                        "params_today": _INT, "params_suggested": _INT, "lower": _INT, "upper": _LAYERS,
                        "exponent": _NUM}),
        "provenance": _obj({"versions": _obj({k: _STR for k in ("python", "torch", "transformers", "anatomy_kit")}),
                            "device": _STR, "dtype": _STR, "created": _STR,
                            "timings": {"type": "object", "additionalProperties": _obj({"wall_s": _NUM,
                                                                                        "cpu_s": _NUM})},
                            "peak_rss_mb": _NUM}),
        "notes": {"type": "array", "items": _STR},
    }, required=_REQUIRED),
}


def validate_card(doc: dict) -> dict:
    """Return ``doc`` if it validates against :data:`CARD_SCHEMA`; otherwise :class:`CardSchemaError` naming the field."""
    import json

    import jsonschema

    try:
        json.dumps(doc, allow_nan=False)
    except ValueError:
        raise CardSchemaError("the card holds NaN or infinity, which JSON cannot carry; such numbers must be null") from None
    except TypeError as err:
        raise CardSchemaError(f"the card holds a value JSON cannot carry: {err}") from None
    validator = jsonschema.Draft202012Validator(CARD_SCHEMA)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "(top level)"
        raise CardSchemaError(f"the card does not validate against {SCHEMA}: at {where}: {first.message} "
                              f"({len(errors)} error(s) in all)")
    return doc
