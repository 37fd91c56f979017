"""Parts of the book's own pages that the kit computes while the book is built (intro, glossary, running).

A Sphinx extension (``book/_config.yml`` lists it): when the builder starts, :func:`write_generated`
writes into ``book/_generated/`` (not in git, excluded as pages, included by the pages):

- ``verdict_words.md`` — each verdict's badge and meaning (the intro's "How to read a verdict"),
- ``verdict_glossary.md`` — a glossary entry per verdict word, from
  :data:`~anatomy_kit.verdicts.decision.VERDICT_MEANINGS`,
- ``estimates_table.md`` — the running page's full-scale estimates (:mod:`anatomy_kit.book.chapter_costs`),
- ``hour_table.md``, ``scales_table.md``, ``power_tables.md`` — the running page's hour presets
  (estimated), the three scales, and every chapter's power table from the build's smoke metrics
  (``build/metrics`` beside ``book/``; :mod:`.scales`),
- ``build_verdicts.md`` — what this build decided (the intro): the papers' claims counted apart from the
  book's own questions, their primaries that hold and survive Holm, the data they rest on
  (``build/report.json``),
- ``statistics_rule.md`` — the book's one statistics rule (:mod:`anatomy_kit.verdicts.statistics_rule`), which
  the intro, the glossary and every chapter state in the same words,
- ``held_up/<chapter>.md`` — every chapter's "What held up" box (:mod:`.held_up`), from the report,
- ``card_guidance.md`` — the card page's time and memory for 1B–8B hub models, from the card's
  planned passes (:mod:`anatomy_kit.card.cost`) and the FLOP model (:mod:`anatomy_kit.lm.estimates`),
  and healing's memory from the same model (:func:`heal_memory_markdown`),
- ``hour_scope.md``, ``scale_rule.md``, ``near_threshold.md``, ``estimate_assumptions.md`` — the
  running page's paragraphs that state the kit's constants (:mod:`.running_text`),
- ``persistence_diagram.png`` — a persistence diagram of a noisy circle, computed with ripser
  (the glossary's picture of Vietoris–Rips, H1 and persistence).

So a number or a meaning shown on two pages has one source, and every picture comes from code that ran.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ..verdicts.decision import VERDICT_MEANINGS, VERDICTS
from ..verdicts.statistics_rule import statistics_rule_markdown
from ..verdicts.tables import badge_html

#: The environment variable through which the book command names its build folder to the Sphinx extension.
BUILD_DIR_ENV = "ANATOMY_KIT_BUILD_DIR"

__all__ = ["GENERATED", "BUILD_DIR_ENV", "write_generated", "verdict_words_markdown", "verdict_glossary_markdown",
           "build_verdicts_markdown", "card_guidance_markdown", "heal_memory_markdown", "persistence_figure", "setup"]

#: The folder under ``book/`` the generated parts go to.
GENERATED = "_generated"


def verdict_words_markdown() -> str:
    """A list: each verdict's badge, then its meaning (the intro)."""
    return "\n".join(f"- {badge_html(v)} {VERDICT_MEANINGS[v]}" for v in VERDICTS) + "\n"


def verdict_glossary_markdown() -> str:
    """A ``{glossary}`` block with one entry per verdict word (the glossary page)."""
    entries = "\n\n".join(f"{v}\n  A verdict. {VERDICT_MEANINGS[v]}" for v in VERDICTS)
    return f":::{{glossary}}\n{entries}\n:::\n"


def build_verdicts_markdown(report: dict | None) -> str:
    """The intro's paragraph on what this build decided: the papers' claims counted apart from the book's own
    questions, the primaries that hold and survive Holm's correction, and the data the verdicts rest on, all
    read from ``report`` (``report.json``)."""
    claims = [c for doc in (report or {}).get("chapters", []) for c in doc["claims"]]
    if not claims:
        return ("**What this build decided.** No chapter had run when this page was built; the "
                "{doc}`report <chapters/report>` lists the verdicts of the chapters that did.\n")
    scales = sorted({doc["run"]["scale"] for doc in report["chapters"]})
    papers = [c for c in claims if not c["id"].startswith("book.")]
    own = [c for c in claims if c["id"].startswith("book.")]

    def counts(cs: list[dict]) -> str:
        n = {v: sum(c["verdict"] == v for c in cs) for v in VERDICTS}
        return ", ".join(f"{k} *{v}*" for v, k in n.items() if k)

    def primaries(cs: list[dict]) -> str:
        prim = [c for c in cs if c.get("role") == "primary"]
        held = [c for c in prim if c["verdict"] in ("reproduced", "partly reproduced")]
        survive = [c for c in held if (c.get("holm") or {}).get("survives")]
        return (f"of their {len(prim)} primary claims, {len(held)} held and {len(survive)} of those survive Holm's "
                "correction")

    phases = {c.get("phase") for c in claims}
    data = ("confirmatory data: seeds and held-out text collected after the rules were frozen" if phases ==
            {"confirmatory"} else "exploratory data: the rules were written after these data had been seen"
            if phases == {"exploratory"} else "confirmatory and exploratory data")
    text = (f"**What this build decided.** It ran at *{'*, *'.join(scales)}* scale, on {data}. The papers' "
            f"{len(papers)} claims: {counts(papers)}; {primaries(papers)}.")
    if own:
        text += f" The book's own {len(own)} questions: {counts(own)}; {primaries(own)}."
    return text + ("\n\nA *not established* or *not comparable* is an honest \"cannot decide at this scale\", "
                   "neither a refutation of the paper nor a failure of the code; each chapter opens with what held "
                   "up and what its scale could not decide.\n")


#: The hub models the card page sizes a run for: from about one to about eight billion parameters.
CARD_GUIDANCE_PARAMS = (0.9e9, 8.5e9)


def card_guidance_markdown() -> str:
    """A table of the whole card's cost on the 1B–8B models of ``HUB_SHAPES`` at the command's
    default settings: FLOPs (the planned passes of :func:`anatomy_kit.card.cost.planned_passes`
    through :func:`~anatomy_kit.card.cost.card_flops`), the time at the assumed float32 throughput of
    the reference GPU, and the weights' memory in float32 and bfloat16 (2 bytes a parameter)."""
    from ..card.cost import card_flops, planned_passes
    from ..card.settings import CardSettings
    from ..lm.estimates import ASSUMED_FLOPS, HUB_SHAPES, duration

    resolved = None
    settings = CardSettings().validate()
    low, high = CARD_GUIDANCE_PARAMS
    rate = ASSUMED_FLOPS["eval-fp32"]
    rows = ["| model | layers | K | parameters | FLOPs | time (estimate) | weights fp32 / bf16 |",
            "|---|---|---|---|---|---|---|"]
    for name, shape in sorted(HUB_SHAPES.items(), key=lambda item: item[1].params):
        if not low <= shape.params <= high:
            continue
        resolved = settings.resolved(shape.n_layers)
        flops = sum(card_flops(planned_passes(shape.n_layers, resolved), shape, resolved.block_size).values())
        seconds = flops / rate
        rows.append(f"| `{name}` | {shape.n_layers} | {resolved.max_prune} | {shape.params / 1e9:.1f} B "
                    f"| {flops:.1e} | {f'{seconds:.0f} s' if seconds < 120 else duration(seconds / 3600)} "
                    f"| {shape.params * 4 / 1e9:.0f} GB / "
                    f"{shape.params * 2 / 1e9:.0f} GB |")
    return ("\n".join(rows) + "\n\nFLOPs and time are the whole card's; the weights' memory is in float32 (fp32) and "
            f"bfloat16 (bf16). At the command's defaults ({settings.tokens:,} evaluation tokens in blocks of "
            f"{settings.block_size}, {settings.calibration_tokens:,} calibration tokens, the default K, "
            f"{settings.n_random} random sets per k), on one GPU at an *assumed* "
            f"{rate / 1e12:.1f} TFLOP/s in float32 (the running page's reference GPU). The geometric-work stage's "
            "topology runs on the CPU and is not counted, nor is loading the weights; one batch's activations come "
            "on top of the weights' memory.\n\n" + heal_memory_markdown())


#: the GPU the healing table asks ``--heal-method auto`` about, in bytes
HEAL_GPU_BYTES = 80e9


def heal_memory_markdown() -> str:
    """``--heal``'s memory on the 1B–8B models of ``HUB_SHAPES``, from the kit's one memory model
    (:func:`anatomy_kit.lm.estimates.fine_tune_memory`) at the card's default block and batch: a full
    fine-tune of a float32 and of a bfloat16 model, LoRA on a bfloat16 model at the default rank, and
    what ``--heal-method auto`` (:func:`anatomy_kit.card.heal.choose_method`) picks on an 80 GB GPU
    with the model loaded in float32 (the card's default dtype) and in bfloat16."""
    from ..card.heal import HealRecipe, choose_method
    from ..card.settings import CardSettings
    from ..lm.estimates import HUB_SHAPES, fine_tune_memory

    s, r = CardSettings(), HealRecipe()
    low, high = CARD_GUIDANCE_PARAMS
    rows = ["| model | full, fp32 | full, bf16 | LoRA, bf16 | auto on 80 GB: fp32 / bf16 |", "|---|---|---|---|---|"]
    for name, shape in sorted(HUB_SHAPES.items(), key=lambda item: item[1].params):
        if not low <= shape.params <= high:
            continue
        gb = [fine_tune_memory(shape, s.block_size, s.batch_size, method=m, weight_bytes=w, lora_rank=r.lora_rank) / 1e9
              for m, w in (("full", 4), ("full", 2), ("lora", 2))]
        auto = [choose_method("auto", shape, block_size=s.block_size, batch_size=s.batch_size, weight_bytes=w,
                              free_bytes=HEAL_GPU_BYTES - w * shape.params, on_host=False,
                              lora_rank=r.lora_rank)["method"] for w in (4, 2)]
        rows.append(f"| `{name}` | {gb[0]:.0f} GB | {gb[1]:.0f} GB | {gb[2]:.0f} GB | {auto[0]} / {auto[1]} |")
    return ("**Healing** (`--heal`) needs more: a full fine-tune keeps gradients and AdamW's two moments beside "
            "every weight, LoRA only its adapters' (rank "
            f"{r.lora_rank} on every linear map of each layer). Peak memory of one step of {s.batch_size} blocks of "
            f"{s.block_size} tokens, estimated with the kit's memory model, and the method `--heal-method auto` "
            f"picks on a GPU with {HEAL_GPU_BYTES / 1e9:.0f} GB with the model loaded in float32 (the card's "
            "default) or in bfloat16 (a bfloat16 model's full fine-tune keeps AdamW's moments in bfloat16 too; "
            "`--heal-method lora` trains float32 adapters):\n\n" + "\n".join(rows) + "\n")


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


def write_generated(book_dir: Path, build_dir: Path | None = None) -> list[Path]:
    """Write every generated part into ``book_dir/_generated`` and return their paths (the book build);
    ``build_dir`` holds the ``report.json`` and ``metrics/`` the pages read (None: ``build/`` beside
    ``book_dir``; parts whose inputs are missing say so)."""
    from ..jsonio import read_json
    from .chapter_costs import hour_markdown_table, markdown_table
    from .running_text import RUNNING_PARTS
    from .scales import running_power_markdown, scales_markdown

    out = Path(book_dir) / GENERATED
    out.mkdir(parents=True, exist_ok=True)
    build = Path(build_dir) if build_dir is not None else Path(book_dir).resolve().parent / "build"
    report_path = build / "report.json"
    report = read_json(report_path, what="report") if report_path.is_file() else None
    texts = {"verdict_words.md": verdict_words_markdown(), "verdict_glossary.md": verdict_glossary_markdown(),
             "estimates_table.md": markdown_table() + "\n", "hour_table.md": hour_markdown_table() + "\n",
             "scales_table.md": scales_markdown(build), "power_tables.md": running_power_markdown(build),
             "build_verdicts.md": build_verdicts_markdown(report), "card_guidance.md": card_guidance_markdown(),
             **{name: part() for name, part in RUNNING_PARTS.items()}}
    texts["statistics_rule.md"] = statistics_rule_markdown()
    docs = {doc["chapter"]: doc for doc in (report or {}).get("chapters", [])}
    from .chapters import chapter_manifest
    from .held_up import held_up_markdown

    (out / "held_up").mkdir(exist_ok=True)
    for entry in chapter_manifest():
        texts[f"held_up/{entry['id']}.md"] = held_up_markdown(docs.get(entry["id"]), entry["title"])
    for name, text in texts.items():
        _write_if_changed(out / name, text)
    figure = persistence_figure(out / "persistence_diagram.png")
    return [out / name for name in texts] + [figure]


def _on_builder_inited(app: Any) -> None:
    # the build folder the book command names (BUILD_DIR_ENV), else build/ beside the book
    named = os.environ.get(BUILD_DIR_ENV)
    write_generated(Path(app.srcdir), Path(named) if named else Path(app.srcdir).parent / "build")


def setup(app: Any) -> dict:
    """Sphinx entry point: generate the parts before any page is read."""
    app.connect("builder-inited", _on_builder_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
