"""Parts of the book's own pages that the kit computes while the book is built (intro, glossary, running).

A Sphinx extension (``book/_config.yml`` lists it): when the builder starts, :func:`write_generated`
writes into ``book/_generated/`` (not in git, excluded as pages, included by the pages):

- ``verdict_words.md`` — each verdict's badge and meaning (the intro's "How to read a verdict"),
- ``verdict_glossary.md`` — a glossary entry per verdict word, from
  :data:`~anatomy_kit.verdicts.decision.VERDICT_MEANINGS`,
- ``estimates_table.md`` — the running page's full-scale estimates (:mod:`anatomy_kit.lm.chapter_costs`),
- ``hour_table.md``, ``scales_table.md``, ``power_tables.md`` — the running page's hour presets
  (estimated), the three scales, and every chapter's power table from the build's smoke metrics
  (``build/metrics`` beside ``book/``; :mod:`.scales`),
- ``persistence_diagram.png`` — a persistence diagram of a noisy circle, computed with ripser
  (the glossary's picture of Vietoris–Rips, H1 and persistence).

So a number or a meaning shown on two pages has one source, and every picture comes from code that ran.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..verdicts.decision import VERDICT_MEANINGS, VERDICTS
from ..verdicts.tables import badge_html

__all__ = ["GENERATED", "write_generated", "verdict_words_markdown", "verdict_glossary_markdown",
           "persistence_figure", "setup"]

#: The folder under ``book/`` the generated parts go to.
GENERATED = "_generated"


def verdict_words_markdown() -> str:
    """A list: each verdict's badge, then its meaning (the intro)."""
    return "\n".join(f"- {badge_html(v)} {VERDICT_MEANINGS[v]}" for v in VERDICTS) + "\n"


def verdict_glossary_markdown() -> str:
    """A ``{glossary}`` block with one entry per verdict word (the glossary page)."""
    entries = "\n\n".join(f"{v}\n  A verdict. {VERDICT_MEANINGS[v]}" for v in VERDICTS)
    return f":::{{glossary}}\n{entries}\n:::\n"


def _noisy_circle(n: int = 60, noise: float = 0.12, seed: int = 0) -> np.ndarray:
    """``(n, 2)`` points on the unit circle with Gaussian noise of standard deviation ``noise``."""
    rng = np.random.default_rng(seed)
    angle = rng.uniform(0, 2 * np.pi, n)
    return np.stack([np.cos(angle), np.sin(angle)], axis=1) + rng.normal(0, noise, (n, 2))


def persistence_figure(path: Path) -> Path:
    """Draw a noisy circle and its H1 persistence diagram (Vietoris–Rips, ripser) to ``path`` (the glossary)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from scipy.spatial.distance import pdist, squareform

    from ..geometry.topology import h1_diagram

    points = _noisy_circle()
    diagram = h1_diagram(squareform(pdist(points)))          # (k, 2): birth, death of each loop
    life = diagram[:, 1] - diagram[:, 0]
    fig = Figure(figsize=(7.2, 3.1), dpi=100)
    FigureCanvasAgg(fig)
    ax_points, ax_diagram = fig.subplots(1, 2)
    ax_points.scatter(points[:, 0], points[:, 1], s=10, color="tab:blue")
    ax_points.set_aspect("equal")
    ax_points.set_xlabel("x")
    ax_points.set_ylabel("y")
    ax_points.set_title("60 points near a circle", fontsize=10)
    top = float(diagram.max()) * 1.1 if diagram.size else 1.0
    ax_diagram.plot([0, top], [0, top], color="grey", lw=0.8, label="birth = death")
    loop = int(np.argmax(life)) if life.size else None
    others = [i for i in range(len(diagram)) if i != loop]
    ax_diagram.scatter(diagram[others, 0], diagram[others, 1], s=14, color="tab:orange",
                       label="short-lived loops (noise)")
    if loop is not None:
        ax_diagram.scatter(diagram[loop, 0], diagram[loop, 1], s=40, color="tab:red", marker="D",
                           label=f"the circle: lives {life[loop]:.2f}")
    ax_diagram.set_xlim(0, top)
    ax_diagram.set_ylim(0, top)
    ax_diagram.set_xlabel("birth: threshold where a loop closes", fontsize=9)
    ax_diagram.set_ylabel("death: threshold where it fills in", fontsize=9)
    ax_diagram.set_title("its H1 persistence diagram (Vietoris–Rips)", fontsize=10)
    ax_diagram.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Software": None})
    return path


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def write_generated(book_dir: Path) -> list[Path]:
    """Write every generated part into ``book_dir/_generated`` and return their paths (the book build)."""
    from ..lm.chapter_costs import hour_markdown_table, markdown_table
    from .scales import running_power_markdown, scales_markdown

    out = Path(book_dir) / GENERATED
    out.mkdir(parents=True, exist_ok=True)
    build = Path(book_dir).resolve().parent / "build"
    texts = {"verdict_words.md": verdict_words_markdown(), "verdict_glossary.md": verdict_glossary_markdown(),
             "estimates_table.md": markdown_table() + "\n", "hour_table.md": hour_markdown_table() + "\n",
             "scales_table.md": scales_markdown(build),
             "power_tables.md": running_power_markdown(build)}
    for name, text in texts.items():
        _write_if_changed(out / name, text)
    figure = persistence_figure(out / "persistence_diagram.png")
    return [out / name for name in texts] + [figure]


def _on_builder_inited(app: Any) -> None:
    write_generated(Path(app.srcdir))


def setup(app: Any) -> dict:
    """Sphinx entry point: generate the parts before any page is read."""
    app.connect("builder-inited", _on_builder_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
