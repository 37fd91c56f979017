"""Execute the chapters with papermill and build the book.

``notebooks/chapters.yaml`` lists the chapters in book order. For each, :func:`execute_chapter`
converts the jupytext MyST source to a notebook, refuses parameters the chapter does not
declare (papermill would inject them silently), executes it with papermill (a per-cell timeout),
writes the executed notebook to ``<build>/notebooks/`` and to the book's ``chapters/`` folder,
and returns its wall time. A failure names the chapter and the cell. :func:`reproduce` runs
them all and writes the report; :func:`build_book` runs Jupyter Book with warnings as errors
(:func:`render_book` first rebuilds the report from the metrics, executing nothing);
:func:`run_shard` runs one shard of a chapter's training grid (up to its cell tagged ``shard-end``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..validate import AnatomyKitError, check_choice
from .chapters import chapter_manifest, project_root
from .pages import BUILD_DIR_ENV
from .run import SCALES


def kernel_manager(environ: dict[str, str]):
    """A ``jupyter_client`` kernel manager class whose kernels get ``environ`` on top of this process's.

    The variables go to the kernel process only: ``os.environ`` is never edited, so threads that
    run chapters side by side (``benchmarks/gpu_check.py``) cannot see each other's.
    """
    from jupyter_client.manager import AsyncKernelManager

    extra = {str(k): str(v) for k, v in environ.items()}

    class ChapterKernelManager(AsyncKernelManager):
        async def _async_launch_kernel(self, kernel_cmd, **kw):
            kw["env"] = {**kw.get("env", os.environ), **extra}
            return await super()._async_launch_kernel(kernel_cmd, **kw)

    return ChapterKernelManager


class ChapterFailed(RuntimeError):
    """A chapter raised, timed out or exceeded its hard limit; the message names it and the cell."""


def to_notebook(md_path: Path):
    """Read a jupytext MyST chapter as an nbformat notebook ready for papermill."""
    import jupytext

    nb = jupytext.read(md_path)
    nb.metadata.pop("jupytext", None)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def declared_parameters(nb) -> dict[str, Any]:
    """Names and default source values of the cell tagged ``parameters``."""
    import ast

    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    if len(cells) != 1:
        raise AnatomyKitError(f"a chapter needs exactly one cell tagged 'parameters', found {len(cells)}")
    names = {}
    for node in ast.parse(cells[0].source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            names[node.targets[0].id] = ast.literal_eval(node.value)
    return names


def truncated_at(nb, tag: str, chapter: str):
    """The notebook up to and including its first cell tagged ``tag`` (a named error if none is)."""
    for i, cell in enumerate(nb.cells):
        if tag in cell.metadata.get("tags", []):
            nb.cells = nb.cells[:i + 1]
            return nb
    raise AnatomyKitError(f"chapter {chapter} has no cell tagged {tag!r}, so it cannot be run in shards; tag the cell "
                          f"that trains the grid with :tags: [{tag}]")


def _prepared(entry: dict[str, Any], root: Path, scale: str, device: str, build_dir: Path,
              params: dict[str, Any] | None, stop_at_tag: str | None):
    """(notebook, parameters) of a chapter, its parameters checked against the ones it declares."""
    nb = to_notebook(root / "notebooks" / entry["file"])
    declared = declared_parameters(nb)
    params = {"scale": scale, "device": device, "build_dir": str(build_dir), **(params or {})}
    unknown = sorted(set(params) - set(declared))
    if unknown:
        raise AnatomyKitError(f"chapter {entry['id']} does not declare parameter(s) {unknown}; "
                              f"it accepts {sorted(declared)}")
    if stop_at_tag is not None:
        nb = truncated_at(nb, stop_at_tag, entry["id"])
    return nb, params


def execute_chapter(entry: dict[str, Any], *, scale: str, device: str, build_dir: Path,
                    book_dir: Path | None = None, params: dict[str, Any] | None = None,
                    root: Path | None = None, stop_at_tag: str | None = None,
                    environ: dict[str, str] | None = None, name: str | None = None) -> float:
    """Execute one chapter; return its wall time in seconds or raise :class:`ChapterFailed`.

    ``stop_at_tag`` executes only the cells up to and including the first one with that tag (a
    shard of the chapter's grid, :func:`run_shard`); ``environ`` is exported to the kernel;
    ``name`` names the executed notebook (default: the chapter id).
    """
    import nbformat
    import papermill as pm

    root = root or project_root()
    nb, params = _prepared(entry, root, scale, device, build_dir, params, stop_at_tag)
    (build_dir / "notebooks").mkdir(parents=True, exist_ok=True)
    name = name or entry["id"]
    source_nb = build_dir / "notebooks" / f"{name}.source.ipynb"
    out_nb = build_dir / "notebooks" / f"{name}.ipynb"
    nbformat.write(nb, source_nb)
    timeout = int(entry["timeout_s"] if scale == "smoke" else entry.get("timeout_full_s", 24 * 3600))
    print(f"[{name}] {entry['title']}: executing at scale={scale!r} (budget {entry['budget_s']} s)", flush=True)
    start = time.time()
    try:
        # progress bars are for interactive use; the kernel gets these variables
        manager = kernel_manager({"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", **(environ or {})})
        pm.execute_notebook(str(source_nb), str(out_nb), parameters=params, kernel_name="python3",
                            cwd=str(root / "notebooks"), execution_timeout=timeout, progress_bar=False,
                            log_output=False, kernel_manager_class=manager)
    except pm.PapermillExecutionError as err:
        raise ChapterFailed(f"chapter {entry['id']} ({entry['file']}) failed in cell {err.cell_index} "
                            f"(execution count {err.exec_count}): {err.ename}: {err.evalue}; "
                            f"executed notebook kept at {out_nb}") from None
    except Exception as err:  # timeouts and kernel deaths
        raise ChapterFailed(f"chapter {entry['id']} ({entry['file']}) did not finish: "
                            f"{err.__class__.__name__}: {str(err).splitlines()[0] if str(err) else ''}") from None
    finally:
        source_nb.unlink(missing_ok=True)
    seconds = time.time() - start
    _hide_injected_cell(out_nb)
    status = "within" if seconds <= entry["budget_s"] else "OVER"
    print(f"[{name}] done in {seconds:.0f} s ({status} its {entry['budget_s']} s budget)", flush=True)
    if book_dir is not None:
        (book_dir / "chapters").mkdir(parents=True, exist_ok=True)
        shutil.copy(out_nb, book_dir / "chapters" / f"{entry['id']}.ipynb")
    return seconds


def _hide_injected_cell(out_nb: Path) -> None:
    """papermill's injected cell holds machine paths: keep it out of the book."""
    import nbformat

    executed = nbformat.read(out_nb, as_version=4)
    for cell in executed.cells:
        tags = cell.metadata.get("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            cell.metadata["tags"] = [*tags, "remove-cell"]
    nbformat.write(executed, out_nb)


#: The tag of the cell after which a chapter's shard stops (the cell that trains its grid).
SHARD_END_TAG = "shard-end"


def run_shard(chapter: str, shard: str, *, scale: str = "full", device: str = "auto", build_dir: Path | None = None,
              params: dict[str, Any] | None = None, root: Path | None = None) -> float:
    """Execute ``chapter`` up to its cell tagged ``shard-end`` as shard ``i/n`` of its training grid.

    ``ANATOMY_KIT_SHARD=i/n`` is exported to the kernel, so :func:`anatomy_kit.lm.train_many` (and
    chapter 5's ``RuleGrid.train``) trains only this shard's runs, each into its checkpoint folder
    under ``build_dir`` (shared by all shards). The executed notebook is
    ``<build>/notebooks/<chapter>.shard-<i>-of-<n>.ipynb``; nothing is copied into the book and no
    metrics are written. When every shard has finished, ``reproduce`` of the chapter with the same
    parameters and build folder finds every checkpoint finished and only collects.
    """
    from ..lm.shards import SHARD_ENV, parse_shard

    part = parse_shard(shard)
    if part is None:
        raise AnatomyKitError("shard='' names no shard; give 'i/n' with 0 <= i < n")
    check_choice("scale", scale, SCALES)
    root = root or project_root()
    manifest = {c["id"]: c for c in chapter_manifest(root)}
    check_choice("chapter", chapter, manifest)
    build_dir = (Path(build_dir) if build_dir is not None else root / "build").resolve()
    return execute_chapter(manifest[chapter], scale=scale, device=device, build_dir=build_dir, book_dir=None,
                           params=params, root=root, stop_at_tag=SHARD_END_TAG, environ={SHARD_ENV: str(part)},
                           name=f"{chapter}.shard-{part.index}-of-{part.count}")


def reproduce(*, scale: str = "smoke", device: str = "auto", build_dir: Path | None = None,
              book_dir: Path | None | bool = True, chapters: list[str] | None = None,
              params: dict[str, Any] | None = None, root: Path | None = None) -> dict:
    """Execute chapters (all, or those named) in order and write the report.

    ``build_dir`` defaults to ``<root>/build``; ``book_dir=True`` means ``<root>/book`` (executed
    chapters and the report are copied there), ``None`` copies nothing.
    """
    from .report import build_report

    check_choice("scale", scale, SCALES)
    root = root or project_root()
    build_dir = Path(build_dir) if build_dir is not None else root / "build"
    book_dir = root / "book" if book_dir is True else book_dir
    manifest = chapter_manifest(root)
    ids = [c["id"] for c in manifest]
    for c in chapters or []:
        check_choice("chapter", c, ids)
    build_dir = Path(build_dir).resolve()
    timings = {}
    for entry in manifest:
        if chapters and entry["id"] not in chapters:
            continue
        timings[entry["id"]] = round(execute_chapter(entry, scale=scale, device=device, build_dir=build_dir,
                                                     book_dir=book_dir, params=params, root=root), 1)
    report = build_report(build_dir, timings)
    if book_dir is not None:
        shutil.copy(build_dir / "report.md", Path(book_dir) / "chapters" / "report.md")
    total = sum(timings.values())
    print("chapter times: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()) + f"; total {total:.0f} s")
    print(f"report: {build_dir / 'report.json'}")
    return report


def render_book(*, build_dir: Path | None = None, book_dir: Path | None = None, root: Path | None = None) -> Path:
    """Rebuild the report from the metrics already in ``build_dir`` and the HTML from the chapters
    already executed into ``book_dir/chapters`` (nothing is executed); return ``index.html``.
    Chapter wall times are kept from the previous ``report.json`` where it has them."""
    from ..jsonio import read_json
    from .report import build_report

    root = root or project_root()
    build_dir = Path(build_dir) if build_dir is not None else root / "build"
    book_dir = Path(book_dir) if book_dir is not None else root / "book"
    missing = [c["id"] for c in chapter_manifest(root) if not (book_dir / "chapters" / f"{c['id']}.ipynb").is_file()]
    if missing:
        raise AnatomyKitError(f"chapters {missing} were never executed into {book_dir / 'chapters'}; run "
                              "`python -m anatomy_kit reproduce` first")
    previous = build_dir / "report.json"
    timings = ({c["chapter"]: c["wall_seconds"] for c in read_json(previous, what="report")["chapters"]
                if "wall_seconds" in c} if previous.is_file() else None)
    build_report(build_dir, timings)
    shutil.copy(build_dir / "report.md", book_dir / "chapters" / "report.md")
    return build_book(book_dir, build_dir)


def build_book(book_dir: Path | None = None, build_dir: Path | None = None) -> Path:
    """Build the HTML book (Jupyter Book 1.x, warnings as errors); return ``index.html``. ``build_dir``: the build
    folder the generated pages read (``report.json``, ``metrics/``; None: ``build/`` beside the book)."""
    book_dir = book_dir or project_root() / "book"
    cmd = [str(Path(sys.executable).with_name("jupyter-book")), "build", str(book_dir), "--all", "-W", "-n", "--keep-going"]
    env = dict(os.environ)
    if build_dir is not None:
        env[BUILD_DIR_ENV] = str(Path(build_dir).resolve())
    proc = subprocess.run(cmd, text=True, env=env)
    if proc.returncode:
        raise ChapterFailed(f"the book build failed (exit {proc.returncode}): {' '.join(cmd)}")
    index = Path(book_dir) / "_build" / "html" / "index.html"
    print(f"book: {index}")
    return index
