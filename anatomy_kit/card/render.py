"""A card as pages: one self-contained HTML file and a Markdown file, plus the exports (the book page *Your model's report card*).

``card.html`` carries its figures inline (base64 PNG) and its style in the page: it makes no network
request and opens offline. ``card.md`` holds the same tables; its figures are PNG files in
``figures/`` beside it. :func:`write_card` writes both, the JSON and its schema, and the exports of
:mod:`.exports`, after checking that the folder does not hold another model's card. Both pages end
with the exports, each with the command that uses it (:func:`.exports.export_guide`), and, after
``--heal``, the healing measured against its control (:func:`healing_lines`).
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

from ..stats import format_p, signed
from .cache import check_out_folder
from .exports import export_guide, write_exports
from .heal import share_text
from .figures import FIGURES, png_bytes
from .provenance import describe_provenance
from .schema import CARD_SCHEMA

__all__ = ["tables", "card_html", "card_markdown", "write_card", "healing_lines"]

_STYLE = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;font-size:12px;margin:0.5em 0 1.5em}th,td{border:1px solid #ccc;padding:2px 6px;
text-align:right}th{background:#f3f3f3}td.l,th.l{text-align:left}img{max-width:100%}.prov{font-size:13px;
background:#f8f8f8;padding:0.5em 1em;border-left:3px solid #888}.flag{color:#b00}"""


def _p(p: float) -> str:
    """``0.031`` or ``< 0.001`` (no leading "p")."""
    return format_p(p).removeprefix("p = ").removeprefix("p ")


def _g(x, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}g}" if isinstance(x, float) else str(x)


def _delta(c: dict) -> str:
    return f"{signed(c['delta_pct'], 1)} [{signed(c['low'], 1)}, {signed(c['high'], 1)}]"


def _layer_rows(doc: dict) -> tuple[list[str], list[list[str]]]:
    causal = doc["layers"][0]["causal"] is not None
    cheap = list(doc["layers"][0]["cheap"])
    head = ["layer"] + ([f"{k} ΔPPL % [95 % CI]" for k in doc["layers"][0]["causal"]] if causal else []) + \
        [c.replace("_", " ") for c in cheap] + ["FFN width", "suggested", "marks"]
    rows = []
    for e in doc["layers"]:
        marks = [f"anti-layer ({k})" for k, c in (e["causal"] or {}).items() if c["anti_layer"]]
        marks += [f"⚑ {s.replace('_', ' ')}" for s in e["flags"]]
        rows.append([str(e["layer"])] + ([_delta(c) for c in e["causal"].values()] if causal else [])
                    + [f"{e['cheap'][c]:.4g}" for c in cheap] + [str(e["ffn_width"]), str(e["suggested_width"]),
                                                                 "; ".join(marks)])
    return head, rows


def _pruning_rows(doc: dict) -> tuple[list[str], list[list[str]]]:
    head = ["k", "method", "layers removed", "PPL", "ΔPPL % [95 % CI]", "p vs random k-sets", "chosen on"]
    rows = []
    for e in sorted(doc["pruning"]["sets"], key=lambda e: (e["k"], e["ppl"])):
        p = "—" if e["p_random"] is None else _p(e["p_random"])
        rows.append([str(e["k"]), e["method"].replace("_", " "), ", ".join(map(str, e["layers"])), f"{e['ppl']:.4g}",
                     _delta(e), p, e["chosen_on"]])
    return head, rows


def _agreement_rows(doc: dict) -> tuple[list[str], list[list[str]]]:
    overlap = {(o["a"], o["b"]): o for o in doc["agreement"]["top_k"]}
    head = ["signal A", "signal B", "Spearman ρ", "p", f"shared of the {doc['agreement']['top_k'][0]['k']} most "
            "prunable", "chance p"]
    rows = []
    for s in doc["agreement"]["spearman"]:
        o = overlap[(s["a"], s["b"])]
        rows.append([s["a"].replace("_", " "), s["b"].replace("_", " "), _g(s["rho"], 2),
                     "—" if s["p"] is None else f"{_p(s['p'])} ({s['method']})",
                     f"{o['n_shared']} {o['shared']}", _p(o["chance_p"])])
    return head, rows


def tables(doc: dict) -> dict[str, tuple[list[str], list[list[str]]]]:
    """``{name: (header, rows)}`` of every table of the card, as text cells."""
    out = {"layers": _layer_rows(doc), "agreement": _agreement_rows(doc)}
    if doc["pruning"] is not None:
        out["pruning"] = _pruning_rows(doc)
    w = doc["widths"]
    out["widths"] = (["layer", "today", "suggested", "continuous optimum"],
                     [[str(i), str(t), str(s), f"{c:.1f}"] for i, (t, s, c) in
                      enumerate(zip(w["today"], w["suggested"], w["continuous"]))])
    return out


def _summary(doc: dict) -> list[str]:
    b, lines = doc["baseline"], []
    lines.append(f"Intact model: perplexity {b['ppl']:.4g} on {b['scored_tokens']:,} scored tokens "
                 f"({b['n_blocks']} blocks). Layer indices are 0-based.")
    if doc["layers"][0]["causal"] is not None:
        anti = sorted({e["layer"] for e in doc["layers"] for c in e["causal"].values() if c["anti_layer"]})
        lines.append(f"Anti-layers (taking them out lowers perplexity, whole interval below 0): {anti or 'none'}.")
        flagged = [e["layer"] for e in doc["layers"] if e["flags"]]
        lines.append(f"Flagged layers ({doc['agreement']['flag_rule']}): {flagged or 'none'}.")
    if doc["pruning"] is not None:
        for k, e in sorted(doc["pruning"]["recommended"].items(), key=lambda kv: int(kv[0])):
            lines.append(f"Remove {k}: greedy chooses {e['layers']} → perplexity {e['ppl']:.4g} "
                         f"(ΔPPL {_delta(e)} %).")
    else:
        lines.append("Quick card: cheap signals only; no causal sweep, no measured pruning.")
    w = doc["widths"]
    lines.append(f"Widths: {100 * w['budget_fraction']:.0f} % of today's FFN parameters "
                 f"({w['params_suggested']:,} of {w['params_today']:,}), allocated by the {w['profile']} profile.")
    return lines


def healing_lines(heal: dict) -> tuple[list[str], tuple[list[str], list[list[str]]]]:
    """The healing section: sentences (the recipe, the method's choice, what the healed models and the control
    share and do not) and a table, one row per healed k."""
    c, choice = heal["control"], heal["method_choice"]
    lines = [f"Healing: {heal['terms']}. Method {choice['method']}: {choice['why']}.",
             f"Trained on {heal['trained_on']}, never an evaluation document.",
             f"The control is the intact model fine-tuned the same way: perplexity {c['ppl_before']:.4g} → "
             f"{c['ppl_after']:.4g} ({_delta(c['vs_untuned'])} %: what the fine-tune alone does to this text).",
             "The healed models and the control share " + "; ".join(heal["shared"]) + ".",
             "They differ only where pruning made them differ: " + "; ".join(
                 next(iter(heal["by_k"].values()))["differs"][:1]) + " (per k below).",
             "Share of the gap closed: 1 − (healed pruned − healed intact) / (pruned − intact) in mean NLL per token, "
             "paired over the evaluation blocks, with Fieller's interval. The comparison with the untuned intact "
             "model is secondary: it mixes repairing the pruning with adapting to the text."]
    head = ["k", "layers removed", "PPL pruned → healed", "vs intact healed alike, ΔPPL % [95 % CI]",
            "gap closed [95 % CI]", "vs untuned intact (secondary)"]
    rows = [[k, ", ".join(map(str, e["layers"])), f"{e['ppl_pruned']:.4g} → {e['ppl_healed']:.4g}",
             _delta(e["vs_control"]), share_text(e["gap_closed"]), _delta(e["untuned"]["vs_intact"])]
            for k, e in sorted(heal["by_k"].items(), key=lambda kv: int(kv[0]))]
    return lines, (head, rows)


def _html_table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th{' class=l' if i == 0 else ''}>{html.escape(h)}</th>" for i, h in enumerate(head))
    body = "".join("<tr>" + "".join(f"<td{' class=l' if i in (0, len(r) - 1) else ''}>{html.escape(c)}</td>"
                                    for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _figures(doc: dict) -> list[tuple[str, str, bytes]]:
    out = []
    for anchor, caption, draw in FIGURES:
        fig = draw(doc)
        if fig is not None:
            out.append((anchor, caption, png_bytes(fig)))
    return out


_TITLES = {"layers": "Per-layer table", "agreement": "Agreement between signals", "pruning": "Pruning, measured",
           "widths": "FFN widths"}


def card_html(doc: dict, figures: list[tuple[str, str, bytes]] | None = None, extras: dict | None = None,
              out: Path | None = None) -> str:
    """The card as one self-contained HTML page (no external request); ``extras`` and ``out`` as in
    :func:`.exports.export_guide`."""
    figures = _figures(doc) if figures is None else figures
    m = doc["model"]
    parts = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>Layer report card: "
             f"{html.escape(m['name'])}</title><style>{_STYLE}</style></head><body>",
             f"<h1>Layer report card: {html.escape(m['name'])}</h1>",
             "<div class=prov>" + "".join(f"<p>{html.escape(x)}</p>" for x in describe_provenance(doc)) + "</div>",
             "<h2>Summary</h2><ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in _summary(doc)) + "</ul>"]
    for anchor, caption, png in figures:
        data = base64.b64encode(png).decode()
        parts.append(f"<h2 id={anchor}>{html.escape(caption)}</h2><img alt=\"{html.escape(caption)}\" "
                     f"src=\"data:image/png;base64,{data}\">")
    for name, (head, rows) in tables(doc).items():
        parts.append(f"<h2>{_TITLES[name]}</h2>" + _html_table(head, rows))
    if doc["pruning"] is not None:
        parts.append(f"<p>{html.escape(doc['pruning']['rescored'])}</p>")
    extras = extras or {}
    if extras.get("heal"):
        lines, (head, rows) = healing_lines(extras["heal"])
        parts.append("<h2 id=healing>Healing, against its control</h2>"
                     + "".join(f"<p>{html.escape(x)}</p>" for x in lines) + _html_table(head, rows))
    parts.append("<h2 id=exports>Exports, and the commands that use them</h2><p>Run from this card's folder.</p><ul>")
    for e in export_guide(doc, extras, out):
        cmds = "".join(f"<pre>{html.escape(c)}</pre>" for c in e["commands"])
        parts.append(f"<li><code>{html.escape(e['file'])}</code>: {html.escape(e['what'])}{cmds}</li>")
    parts.append("</ul>")
    parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in doc["notes"]) + "</ul>")
    return "".join(parts) + "</body></html>"


def _md_table(head: list[str], rows: list[list[str]]) -> str:
    cell = lambda x: x.replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(map(cell, head)) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(map(cell, r)) + " |" for r in rows])


def card_markdown(doc: dict, figure_files: list[tuple[str, str]] = (), extras: dict | None = None,
                  folder: Path | None = None) -> str:
    """The card as Markdown; ``figure_files`` are ``(caption, relative path)`` of its PNG figures; ``extras``
    and ``folder`` (the card's) as in :func:`.exports.export_guide`."""
    out = [f"# Layer report card: {doc['model']['name']}", ""] + [f"> {x}" for x in describe_provenance(doc)]
    out += ["", "## Summary", ""] + [f"- {x}" for x in _summary(doc)] + [""]
    for caption, rel in figure_files:
        out += [f"![{caption}]({rel})", ""]
    for name, (head, rows) in tables(doc).items():
        out += [f"## {_TITLES[name]}", "", _md_table(head, rows), ""]
    extras = extras or {}
    if extras.get("heal"):
        lines, (head, rows) = healing_lines(extras["heal"])
        out += ["## Healing, against its control", ""] + lines[:1] + [""] + [f"- {x}" for x in lines[1:]]
        out += ["", _md_table(head, rows), ""]
    out += ["## Exports, and the commands that use them", "", "Run from this card's folder.", ""]
    for e in export_guide(doc, extras, folder):
        out.append(f"- `{e['file']}`: {e['what']}")
        if e["commands"]:
            out += ["", "  ```bash"] + [f"  {c}" for c in e["commands"]] + ["  ```", ""]
    out += ["", "## Notes", ""] + [f"- {n}" for n in doc["notes"]]
    return "\n".join(out) + "\n"


def write_card(card, out: Path, extras: dict | None = None) -> dict[str, Path]:
    """Write card.json, card.schema.json, the exports, figures/, card.html and card.md into ``out``
    (``extras``: what the command wrote beside the card, :func:`.exports.export_guide`)."""
    doc = card.doc
    check_out_folder(out, doc["model"])
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": card.save_json(out / "card.json")}
    (out / "card.schema.json").write_text(json.dumps(CARD_SCHEMA, indent=1), encoding="utf-8")
    paths.update(write_exports(doc, out))
    figures = _figures(doc)
    (out / "figures").mkdir(exist_ok=True)
    files = []
    for anchor, caption, png in figures:
        (out / "figures" / f"{anchor}.png").write_bytes(png)
        files.append((caption, f"figures/{anchor}.png"))
    (out / "card.html").write_text(card_html(doc, figures, extras, out), encoding="utf-8")
    (out / "card.md").write_text(card_markdown(doc, files, extras, out), encoding="utf-8")
    paths.update(schema=out / "card.schema.json", html=out / "card.html", markdown=out / "card.md")
    return paths
