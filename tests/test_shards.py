"""Sharded training grids: train_many runs its shard's share; `python -m anatomy_kit shard` runs a chapter up to
its `shard-end` cell; a later full run finds every checkpoint finished and only collects."""

from __future__ import annotations

import textwrap

import pytest
import torch

from anatomy_kit.book import cli
from anatomy_kit.book.chapters import chapter_manifest
from anatomy_kit.book.runner import execute_chapter
from anatomy_kit.lm import LMConfig, TrainConfig, train_many
from anatomy_kit.lm.shards import SHARD_ENV, Shard, current_shard, parse_shard
from anatomy_kit.validate import AnatomyKitError

HEADER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# A fake chapter with a training grid
"""

CELLS = '''
```{code-cell} ipython3
:tags: [parameters]

scale = "smoke"
device = "auto"
build_dir = "../build"
n_jobs = 4
```

```{code-cell} ipython3
from pathlib import Path

import torch

from anatomy_kit.lm import LMConfig, TrainConfig, train_many

g = torch.Generator().manual_seed(0)
seq = (torch.randint(0, 31, (24, 1), generator=g) + torch.arange(9)) % 31
cfg = LMConfig(vocab_size=31, n_layers=1, d_model=16, n_heads=2, ffn_widths=[32], max_seq_len=8)
grid = Path(build_dir) / "grid"
jobs = [(cfg, TrainConfig(steps=3, batch_size=4, seed=s, progress=False, checkpoint_dir=str(grid / f"job{s}")))
        for s in range(n_jobs)]
```

```{code-cell} ipython3
{tag}
results = train_many(jobs, seq[:20], seq[20:], processes=1)
```

```{code-cell} ipython3
assert all(r is not None for r in results), results
(grid / "collected.txt").write_text(" ".join(str(r.resumed_from) for r in results))
```
'''


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A temporary project root with two fake chapters: one with a `shard-end` cell, one without."""
    nb = tmp_path / "notebooks"
    nb.mkdir()
    (nb / "fake.md").write_text(HEADER + CELLS.replace("{tag}", ":tags: [shard-end]\n"))
    (nb / "untagged.md").write_text(HEADER + CELLS.replace("{tag}", ""))
    (nb / "chapters.yaml").write_text(textwrap.dedent("""\
        chapters:
          - {id: fake, file: fake.md, title: Fake, budget_s: 60, timeout_s: 300}
          - {id: untagged, file: untagged.md, title: Untagged, budget_s: 60, timeout_s: 300}
        """))
    monkeypatch.setenv("ANATOMY_KIT_ROOT", str(tmp_path))
    return tmp_path


def _done(grid) -> list[bool]:
    return [(grid / f"job{s}" / "checkpoint.json").exists() for s in range(4)]


def test_two_shards_train_their_share_and_the_full_run_collects(project, capsys):
    build = project / "build"
    args = ["shard", "--chapter", "fake", "--scale", "smoke", "--device", "cpu", "--build-dir", str(build)]
    assert cli.main(args + ["--shard", "0/2"]) == 0
    grid = build / "grid"
    assert _done(grid) == [True, False, True, False]
    assert not (grid / "collected.txt").exists()                 # the cells after shard-end did not run
    assert (build / "notebooks" / "fake.shard-0-of-2.ipynb").exists()
    assert cli.main(args + ["--shard", "1/2"]) == 0
    assert _done(grid) == [True, True, True, True]
    entry = next(c for c in chapter_manifest(project) if c["id"] == "fake")
    execute_chapter(entry, scale="smoke", device="cpu", build_dir=build, root=project)
    assert (grid / "collected.txt").read_text() == "3 3 3 3"     # every run found finished in its checkpoint


def test_a_chapter_without_a_shard_end_cell_is_a_named_error(project, capsys):
    code = cli.main(["shard", "--chapter", "untagged", "--shard", "0/2", "--scale", "smoke",
                     "--build-dir", str(project / "build")])
    assert code == 1
    assert "chapter untagged has no cell tagged 'shard-end'" in capsys.readouterr().err


def _jobs(tmp_path):
    cfg = LMConfig(vocab_size=31, n_layers=1, d_model=16, n_heads=2, ffn_widths=[32], max_seq_len=8)
    return [(cfg, TrainConfig(steps=2, batch_size=4, seed=s, progress=False, checkpoint_dir=str(tmp_path / f"j{s}")))
            for s in range(5)]


def _seq():
    g = torch.Generator().manual_seed(1)
    return (torch.randint(0, 31, (24, 1), generator=g) + torch.arange(9)) % 31


def test_train_many_runs_only_its_shard_and_returns_none_elsewhere(tmp_path, monkeypatch, one_torch_thread):
    seq = _seq()
    full = train_many(_jobs(tmp_path / "ref"), seq[:20], seq[20:], processes=1, verbose=False)
    first = train_many(_jobs(tmp_path), seq[:20], seq[20:], processes=1, verbose=False, shard="1/3")
    assert [r is not None for r in first] == [False, True, False, False, True]
    monkeypatch.setenv(SHARD_ENV, "0/3")                          # the environment variable works the same way
    second = train_many(_jobs(tmp_path), seq[:20], seq[20:], processes=1, verbose=False)
    assert [r is not None for r in second] == [True, False, False, True, False]
    monkeypatch.setenv(SHARD_ENV, "2/3")
    third = train_many(_jobs(tmp_path), seq[:20], seq[20:], processes=1, verbose=False)
    monkeypatch.delenv(SHARD_ENV)
    collected = train_many(_jobs(tmp_path), seq[:20], seq[20:], processes=1, verbose=False)
    assert [r.resumed_from for r in collected] == [2] * 5
    assert [r.final_eval_loss for r in collected] == [r.final_eval_loss for r in full]   # exact: the same runs
    assert [r is not None for r in third] == [False, False, True, False, False]


def test_shard_settings_are_validated():
    assert parse_shard("2/4") == Shard(2, 4) and str(Shard(2, 4)) == "2/4" and parse_shard(None) is None
    assert Shard(1, 3).positions(7) == [1, 4]
    assert current_shard("0/1") == Shard(0, 1)
    for bad, message in [("4/4", "must lie in 0..n-1"), ("1/0", "must lie in 0..n-1"), ("a/b", "is not of the form"),
                         ("1-4", "is not of the form"), (3, "must be a string")]:
        with pytest.raises(AnatomyKitError, match=message):
            parse_shard(bad)
