"""A finished card: its JSON document, tables for a notebook, and reading cards back (the book page *Your model's report card*).

:class:`Card` wraps the validated document (``card.doc``) and offers the per-layer table, the pruning
table and the agreement pairs as ``pandas`` frames. :func:`load_card` reads a ``card.json`` (or a folder
holding one); :func:`cached_cards` lists the finished cards of a cache folder, e.g. the book's
``<build>/card``, filtered by model name and corpus.
"""

from __future__ import annotations

from pathlib import Path

from ..jsonio import read_json, write_json
from ..validate import AnatomyKitError
from .schema import validate_card

__all__ = ["Card", "load_card", "cached_cards"]


class Card:
    """A layer report card (see :mod:`anatomy_kit.card` for what it holds)."""

    def __init__(self, doc: dict, folder: Path | None = None):
        self.doc = doc
        self.folder = folder

    def __repr__(self) -> str:
        m = self.doc["model"]
        return (f"Card({m['name']!r}, {m['n_layers']} layers, corpus {self.doc['text']['corpus']!r}, "
                f"baseline PPL {self.baseline_ppl:.4g}{', quick' if self.quick else ''})")

    @property
    def n_layers(self) -> int:
        return int(self.doc["model"]["n_layers"])

    @property
    def baseline_ppl(self) -> float:
        return float(self.doc["baseline"]["ppl"])

    @property
    def quick(self) -> bool:
        return self.doc["pruning"] is None

    def layer_table(self):
        """One row per layer (0-based): causal ΔPPL % with interval ends, cheap signals, widths, flags."""
        import pandas as pd

        rows = []
        for e in self.doc["layers"]:
            row = {"layer": e["layer"]}
            for kind, c in (e["causal"] or {}).items():
                row.update({f"{kind} ΔPPL %": c["delta_pct"], f"{kind} low": c["low"], f"{kind} high": c["high"]})
            row.update(e["cheap"])
            row.update({"FFN width": e["ffn_width"], "suggested width": e["suggested_width"],
                        "anti-layer": ", ".join(k for k, c in (e["causal"] or {}).items() if c["anti_layer"]),
                        "flags": ", ".join(e["flags"])})
            rows.append(row)
        return pd.DataFrame(rows).set_index("layer")

    def pruning_table(self):
        """One row per measured set (random sets summarised in ``random``), or ``None`` for a quick card."""
        import pandas as pd

        if self.quick:
            return None
        return pd.DataFrame(self.doc["pruning"]["sets"])

    def agreement_table(self):
        """Every pair of signals: Spearman ρ and p, shared prunable layers and their chance p."""
        import pandas as pd

        rho = pd.DataFrame(self.doc["agreement"]["spearman"])
        overlap = pd.DataFrame(self.doc["agreement"]["top_k"])[["a", "b", "n_shared", "chance_p"]]
        return rho.merge(overlap, on=["a", "b"])

    def pruned_set(self, k: int, method: str = "greedy") -> list[int]:
        """The layers of ``method``'s measured k-set (default: greedy, the recommended one)."""
        if self.quick:
            raise AnatomyKitError("a quick card measures no pruning; build it without quick")
        for e in self.doc["pruning"]["sets"]:
            if e["k"] == k and e["method"] == method:
                return list(e["layers"])
        methods = sorted({e["method"] for e in self.doc["pruning"]["sets"]})
        raise AnatomyKitError(f"no {method!r} set of k={k} in this card; k runs 1..{self.doc['pruning']['max_k']}, "
                              f"methods are {methods}")

    def pruned_ppl(self, k: int, method: str = "greedy") -> float:
        """The measured perplexity of :meth:`pruned_set`."""
        layers = self.pruned_set(k, method)
        return next(float(e["ppl"]) for e in self.doc["pruning"]["sets"] if e["method"] == method and e["layers"] == layers)

    def save_json(self, path: str | Path) -> Path:
        """Write the document (validated first) as JSON."""
        return write_json(path, validate_card(self.doc))

    def write(self, out: str | Path, extras: dict | None = None) -> dict[str, Path]:
        """Write ``card.json``, ``card.schema.json``, ``card.html``, ``card.md`` and the exports into ``out``;
        ``extras`` (the command's): the lm-eval task, the pruned folder and healing the pages name
        (:func:`.exports.export_guide`)."""
        from .render import write_card

        return write_card(self, Path(out), extras)


def load_card(path: str | Path) -> Card:
    """Read a finished card: a ``card.json`` or a folder holding one (validated against the schema)."""
    path = Path(path)
    file = path / "card.json" if path.is_dir() else path
    doc = read_json(file, what="layer card", hint="build it with python -m anatomy_kit card MODEL")
    return Card(validate_card(doc), folder=file.parent)


def cached_cards(cache_dir: str | Path, *, model: str | None = None, corpus: str | None = None) -> list[Card]:
    """The finished cards under ``cache_dir`` (``<cache_dir>/<key>/card.json``), newest first, filtered."""
    cards = []
    for file in sorted(Path(cache_dir).glob("*/card.json"), key=lambda p: p.stat().st_mtime, reverse=True):
        card = load_card(file)
        if (model is None or card.doc["model"]["name"] == model) and \
                (corpus is None or card.doc["text"]["corpus"] == corpus):
            cards.append(card)
    return cards
