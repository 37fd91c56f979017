"""Every per-layer signal the book measured on one model, in one table (chapter 7, *Synthesis*).

A :class:`Signal` is one number per layer, oriented so that **higher = more important** (a layer that
changes the residual stream more, costs more perplexity when removed, does more geometric work, or
is harder to predict from its neighbours), with where it came from and what it cost. Nothing here
measures: the signals are *read* from what the report card and chapters 1, 2 and 4 saved.

- :func:`card_signals`: the report card's causal ΔPPL (skip, neighbour-mean, attention only, MLP only),
  its cheap signals (Block Influence, angular distance, relative update norm); costs from the card's
  stage timings and its exactly counted passes (:func:`anatomy_kit.card.cost.card_passes`);
- :func:`chapter_signals`: chapter 1's ablation maps (another text sample: a test–retest of the card's),
  chapter 2's weight unpredictability (1 − R² of the ridge prediction from the neighbouring layers,
  mean over modules; edge layers have no two neighbours and stay NaN), chapter 4's nine work profiles
  and its noise sensitivity λ.

A **forward-pass equivalent** is the work of one forward pass of the whole model over the tokens the
signal was measured on; for a sweep over layers with the prefix cache, editing layer ℓ replays layers
ℓ … L−1, so the sweep costs (L + 1)/2 equivalents per edit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..jsonio import read_json
from ..validate import AnatomyKitError

__all__ = ["KINDS", "CHOSEN_ON", "Signal", "SignalTable", "card_signals", "chapter_signals", "collect"]

#: The declared kind of each signal (what it looks at); the clustering asks whether kinds are families.
KINDS = ("causal", "cheap", "geometric", "weights")
#: What a signal saw of the report card's evaluation blocks. A set chosen by the *loss on those very
#: blocks* and then measured on them is chosen in-sample: its measured perplexity is flattered by the
#: blocks' own noise, so chapter 7 ranks such signals apart.
CHOSEN_ON = ("evaluation blocks, loss", "evaluation blocks, states only", "other text", "weights only")


@dataclass(frozen=True)
class Signal:
    """One per-layer signal: ``values`` (L,) float64, higher = more important, NaN where not defined."""

    name: str
    kind: str
    values: np.ndarray = field(repr=False)
    source: str
    seconds: float | None = None           # measured wall seconds of the signal alone (None: not recorded)
    forward_passes: float | None = None    # forward-pass equivalents over the tokens it used
    tokens: int | None = None              # tokens it was measured on (None: weights only)
    note: str = ""
    chosen_on: str = "other text"          # what the signal saw: CHOSEN_ON

    def __post_init__(self) -> None:
        if self.chosen_on not in CHOSEN_ON:
            raise AnatomyKitError(f"signal {self.name!r}: chosen_on={self.chosen_on!r}; accepted: {', '.join(CHOSEN_ON)}")
        self._check()

    def _check(self) -> None:
        if self.kind not in KINDS:
            raise AnatomyKitError(f"signal {self.name!r}: kind={self.kind!r}; accepted: {', '.join(KINDS)}")
        v = np.asarray(self.values, dtype=np.float64)
        if v.ndim != 1 or v.size < 2:
            raise AnatomyKitError(f"signal {self.name!r}: values must be one number per layer (L ≥ 2), got shape {v.shape}")
        object.__setattr__(self, "values", v)

    @property
    def defined(self) -> np.ndarray:
        """(L,) bool: layers where the signal has a value."""
        return np.isfinite(self.values)

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "source": self.source, "seconds": self.seconds,
                "forward_passes": self.forward_passes, "tokens": self.tokens, "note": self.note, "chosen_on": self.chosen_on,
                "values": [None if not np.isfinite(x) else float(x) for x in self.values]}


@dataclass(frozen=True)
class SignalTable:
    """The signals of one model, all of the same length L, in a fixed order."""

    model: str
    signals: tuple[Signal, ...]
    missing: tuple[str, ...] = ()          # sources that were not in the build folder

    def __post_init__(self) -> None:
        if not self.signals:
            raise AnatomyKitError("a signal table needs at least one signal")
        lengths = {s.values.size for s in self.signals}
        if len(lengths) != 1:
            raise AnatomyKitError(f"signals of one model must have one length, got {sorted(lengths)} layers "
                                  f"({', '.join(f'{s.name}: {s.values.size}' for s in self.signals)})")
        names = [s.name for s in self.signals]
        if len(set(names)) != len(names):
            raise AnatomyKitError(f"signal names must be distinct, got {names}")

    @property
    def n_layers(self) -> int:
        return self.signals[0].values.size

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.signals]

    def __getitem__(self, name: str) -> Signal:
        for s in self.signals:
            if s.name == name:
                return s
        raise AnatomyKitError(f"no signal {name!r}; this table has {', '.join(self.names)}")

    def values(self) -> dict[str, np.ndarray]:
        """``{name: (L,) values}`` in table order."""
        return {s.name: s.values for s in self.signals}

    def of_kind(self, kind: str) -> list[Signal]:
        return [s for s in self.signals if s.kind == kind]

    def to_dict(self) -> dict:
        return {"model": self.model, "n_layers": self.n_layers, "missing": list(self.missing),
                "signals": [s.to_dict() for s in self.signals]}


# ---- the report card --------------------------------------------------------------------------------

CARD_CAUSAL = {"skip": "skip", "neighbour-mean": "neighbour-mean", "attention": "attention only",
               "mlp": "MLP only"}
CARD_CHEAP = {"block_influence": "Block Influence", "angular_distance": "angular distance",
              "update_norm": "update norm"}


def card_signals(doc: dict) -> list[Signal]:
    """The card's causal and cheap signals (module docstring); ``doc`` is a finished card's JSON."""
    from ..card.cost import card_passes

    layers = doc.get("layers")
    if not isinstance(layers, list) or not layers:
        raise AnatomyKitError("the card has no per-layer section; pass a finished card (card.json)")
    n = len(layers)
    timings = doc.get("provenance", {}).get("timings", {})
    passes = card_passes(doc)
    tokens = int(doc["text"]["eval_tokens"])
    per_forward = tokens * n

    def wall(stage: str) -> float | None:
        return None if stage not in timings else float(timings[stage]["wall_s"])

    out = []
    if all(l.get("causal") for l in layers):
        sweep_s = wall("causal sweep")
        per_edit = passes["causal sweep"][0] / len(CARD_CAUSAL) / per_forward
        for key, name in CARD_CAUSAL.items():
            out.append(Signal(name, "causal", np.array([l["causal"][key]["delta_pct"] for l in layers]),
                              "report card", None if sweep_s is None else sweep_s / len(CARD_CAUSAL), per_edit,
                              tokens, note="ΔPPL % when the layer (or its sub-block) is edited; the sweep's "
                                           "time split evenly over its four edits",
                              chosen_on="evaluation blocks, loss"))
    capture_s = wall("capture + cheap signals")
    for key, name in CARD_CHEAP.items():
        out.append(Signal(name, "cheap", np.array([l["cheap"][key] for l in layers]), "report card", capture_s,
                          passes["capture + cheap signals"][0] / per_forward, tokens,
                          note="the three cheap signals share one forward pass (its time counted for each)",
                          chosen_on="evaluation blocks, states only"))
    steps = (doc.get("pruning") or {}).get("greedy_steps") or []
    if steps and len(steps[0]["scores"]) == n:
        greedy_s = wall("greedy removal")
        calib = int(doc["text"]["calibration_tokens"])
        scores = np.array([steps[0]["scores"][str(j)] for j in range(n)], dtype=float)
        out.append(Signal("skip, calibration text", "causal", scores, "report card",
                          None if greedy_s is None else greedy_s / len(steps), (n + 1) / 2, calib,
                          note="summed NLL of the calibration blocks with the layer skipped (greedy removal's "
                               "first step; the time of one greedy step)", chosen_on="other text"))
    return out


# ---- chapters 1, 2 and 4 ----------------------------------------------------------------------------

def _chapter(metrics_dir: Path, chapter: str, model: str) -> dict | None:
    path = metrics_dir / f"{chapter}.json"
    if not path.exists():
        return None
    doc = read_json(path, what=f"{chapter} metrics")
    ran_on = doc.get("run", {}).get("model")
    return doc if ran_on == model else None      # another model's numbers: not this model's signals


def _ch01(doc: dict, n: int) -> list[Signal]:
    maps = doc["metrics"]["maps"]
    seconds = doc.get("seconds")
    out = []
    for strategy in ("neighbour-mean", "skip"):
        if strategy in maps:
            m = maps[strategy]
            out.append(Signal(f"{strategy}, ch. 1 text", "causal", np.array(m["delta_pct"], dtype=float), "chapter 1",
                              None, (n + 1) / 2, int(m["n_tokens"]),
                              note=f"the same edit on chapter 1's {m['n_tokens']:,} tokens (a test–retest of the "
                                   f"card's); chapter 1 records only its whole run ({seconds:.0f} s)"))
    return out


def _ch02(doc: dict, n: int) -> list[Signal]:
    r2 = doc["metrics"]["r2"]
    by_layer = []
    for module, entry in r2.items():
        v = entry["elements_by_layer"]
        row = np.full(n, np.nan)
        if isinstance(v, dict):
            for layer, x in v.items():
                row[int(layer)] = np.nan if x is None else float(x)
        else:
            arr = np.array([np.nan if x is None else x for x in v], dtype=float)
            offset = (n - arr.size) // 2            # interior layers only: 1 … L−2
            row[offset:offset + arr.size] = arr
        by_layer.append(row)
    stacked = np.vstack(by_layer) if by_layer else np.full((1, n), np.nan)
    counts = np.isfinite(stacked).sum(axis=0)
    mean_r2 = np.where(counts > 0, np.where(np.isfinite(stacked), stacked, 0.0).sum(axis=0) / np.maximum(counts, 1),
                       np.nan)
    unpredictability = 1.0 - mean_r2
    seconds = doc["metrics"].get("predictability_seconds")
    return [Signal("weight unpredictability", "weights", unpredictability, "chapter 2", seconds, 0.0, None,
                   note="1 − R² of the ridge prediction of a layer's weights from its two neighbours, mean over "
                        f"{len(by_layer)} modules; weights only, no forward pass; edge layers undefined; "
                        "the time of the whole fit (elements and layer scale, every module)",
                   chosen_on="weights only")]


def _ch04(build_dir: Path, doc: dict, n: int) -> list[Signal]:
    from ..geometry.profiles import load_profiles

    path = Path(doc["metrics"]["primary_profiles_json"])
    path = path if path.is_absolute() and path.exists() else build_dir / "ch04" / "work_profiles.json"
    bundle = load_profiles(path)
    p = bundle.profiles
    model_seconds = next(iter(doc["metrics"].get("seconds", {}).values()), None)
    geo_s = _seconds(model_seconds, ("geometry", "work", "profiles"))
    sens_s = _seconds(model_seconds, ("sensitivity",))
    per = None if geo_s is None else geo_s / (len(p.statistics) * len(p.geometries))
    out = []
    for i, stat in enumerate(p.statistics):
        for j, geom in enumerate(p.geometries):
            out.append(Signal(f"{stat}/{geom}", "geometric", p.values[:, i, j], "chapter 4", per, 1.0, p.n_tokens,
                              note="geometric work of the FFN on a cloud of tokens; the states come from one "
                                   "forward pass, the rest is geometry on the CPU (time split over nine profiles)"))
    if bundle.sensitivity is not None:
        meta = bundle.meta
        blocks = meta.get("sensitivity_blocks")
        tokens = None if blocks is None or meta.get("block_size") is None else int(blocks) * int(meta["block_size"])
        draws = meta.get("n_draws")
        out.append(Signal("noise sensitivity λ", "causal", bundle.sensitivity, "chapter 4", sens_s,
                          None if draws is None else (n + 1) / 2 * int(draws), tokens,
                          note="loss increase under noise on the FFN output (chapter 4): a sweep over layers "
                               "with the prefix cache, once per noise draw"))
    if len(out) and out[0].values.size != n:
        raise AnatomyKitError(f"{path} has {out[0].values.size} layers; the card has {n}")
    return out


def _seconds(seconds, words: tuple[str, ...]) -> float | None:
    """The summed seconds of the stages whose name contains one of ``words`` (None if none recorded)."""
    if isinstance(seconds, dict):
        hits = [float(v) for k, v in seconds.items() if isinstance(v, (int, float)) and any(w in k for w in words)]
        return sum(hits) if hits else None
    return None


def chapter_signals(build_dir: str | Path, model: str, n_layers: int) -> tuple[list[Signal], list[str]]:
    """Signals from chapters 1, 2 and 4's saved numbers for ``model``, and the chapters that were missing
    (not run, or run on another model)."""
    build_dir = Path(build_dir)
    metrics_dir = build_dir / "metrics"
    out, missing = [], []
    for chapter, read in (("ch01_ablation_map", lambda d: _ch01(d, n_layers)),
                          ("ch02_anatomy_weights", lambda d: _ch02(d, n_layers)),
                          ("ch04_geometric_work", lambda d: _ch04(build_dir, d, n_layers))):
        doc = _chapter(metrics_dir, chapter, model)
        if doc is None:
            missing.append(chapter)
        else:
            out += read(doc)
    return out, missing


def collect(card_doc: dict, build_dir: str | Path, model: str) -> SignalTable:
    """The card's signals and the chapters' for ``model``, in one :class:`SignalTable`."""
    own = card_signals(card_doc)
    more, missing = chapter_signals(build_dir, model, len(card_doc["layers"]))
    return SignalTable(model, tuple(own + more), tuple(missing))
