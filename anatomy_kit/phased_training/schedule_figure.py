"""Chapter 3's schedule figure: a growth schedule drawn as layers × phases, one colour per layer state
(frozen, entering, training, anti-layer), with the legend the chapter shares between panels."""

from __future__ import annotations

import numpy as np

from .phases import GrowthSchedule

__all__ = ["CELL_STATES", "CELL_COLOURS", "schedule_matrix", "legend_handles", "draw_schedule"]


#: Codes of :func:`schedule_matrix`, with their legend text and colour.
CELL_STATES = {0: "frozen at its initial weights", 1: "frozen (trained before)", 2: "enters (cloned + noise), trains",
               3: "trains", 4: "anti-layer: re-initialised × α, frozen"}
CELL_COLOURS = {0: "#f0f0f0", 1: "#bdbdbd", 2: "#fdae61", 3: "#2c7bb6", 4: "#d7191c"}


def schedule_matrix(schedule: GrowthSchedule) -> np.ndarray:
    """Layers × phases, shape ``(n_layers, n_phases)``, each cell a code of :data:`CELL_STATES`."""
    m = np.zeros((schedule.n_layers, schedule.n_phases), dtype=int)
    trained: set[int] = set()
    for p, ph in enumerate(schedule.phases):
        entering = {l for l, _ in ph.enter}
        for l in range(schedule.n_layers):
            m[l, p] = (4 if l in schedule.anti_layers else 2 if l in entering else 3 if l in ph.layers
                       else 1 if l in trained else 0)
        trained |= set(ph.layers)
    return m


def legend_handles() -> list:
    """One coloured patch per cell state of :func:`draw_schedule`, for a legend of one's own (chapter 3)."""
    from matplotlib.patches import Patch

    return [Patch(color=CELL_COLOURS[c], label=CELL_STATES[c]) for c in sorted(CELL_STATES)]


def draw_schedule(schedule: GrowthSchedule, ax=None, *, title: str | None = None, legend: bool = True,
                  name_rotation: float | None = None):
    """Draw the schedule: steps on x (phases as columns), layers on y, cells coloured by state (chapter 3).

    Phase names sit above their columns, turned by ``name_rotation`` degrees (default: 30 with more
    than three phases, else 0); ``legend=False`` leaves the legend to the caller (:func:`legend_handles`).
    """
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    ax = ax or plt.subplots(figsize=(7.5, 4))[1]
    edges = [ph.start for ph in schedule.phases] + [schedule.budget_steps]
    ax.pcolormesh(edges, np.arange(schedule.n_layers + 1) - 0.5, schedule_matrix(schedule),
                  cmap=ListedColormap([CELL_COLOURS[c] for c in sorted(CELL_COLOURS)]), vmin=-0.5, vmax=4.5,
                  edgecolors="white", linewidth=0.5)
    rotation = (30 if schedule.n_phases > 3 else 0) if name_rotation is None else name_rotation
    for ph in schedule.phases:
        ax.text((ph.start + ph.stop) / 2, schedule.n_layers - 0.3, ph.name, ha="center", va="bottom", fontsize=9,
                rotation=rotation)
    ax.set_xticks(edges)
    ax.set_yticks(range(schedule.n_layers))
    ax.set_xlabel("optimiser step (phase boundaries)")
    ax.set_ylabel("decoder layer")
    ax.set_ylim(-0.5, schedule.n_layers + (1.2 if rotation else 0.7))
    if legend:
        ax.legend(handles=legend_handles(), fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    if title:
        ax.set_title(title, fontsize=9)
    return ax
