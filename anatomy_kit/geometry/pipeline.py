"""One model's geometric work, end to end: text → clouds → nine profiles and diagnostics → file (chapter 4).

:func:`measure_work` is what chapter 4 runs for each model it studies; chapter 5 reads the file
it writes (:func:`anatomy_kit.geometry.profiles.load_profiles`). Everything a later chapter or a
rerun needs is in that file, so a finished model is never measured twice.
"""

from __future__ import annotations

import gc
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..data import TEXT_SPLITS, token_blocks
from ..hf.models import load_model
from ..validate import AnatomyKitError, check_choice, check_int, check_positive
from .clouds import SAMPLINGS, capture_ffn_clouds
from .diagnostics import ffn_sensitivity, intrinsic_dimensions, mean_norms, residual_norm_growth
from .profiles import save_profiles
from .work import work_profiles

__all__ = ["WorkSettings", "measure_work"]


@dataclass(frozen=True)
class WorkSettings:
    """How chapter 4 measures one model: text, cloud, geometry and sensitivity settings."""

    corpus: str
    n_blocks: int
    block_size: int
    n_tokens: int
    batch_size: int = 8
    sampling: str = "uniform"
    radius: float = 0.9
    noise_scale: float = 0.5
    sensitivity_blocks: int = 4
    n_draws: int = 1
    n_jobs: int = 1
    seed: int = 0
    text_split: str = "standard"     # which documents are evaluation text (anatomy_kit.data.TEXT_SPLITS)

    def validate(self) -> "WorkSettings":
        for name in ("n_blocks", "block_size", "n_tokens", "batch_size", "sensitivity_blocks", "n_draws", "n_jobs"):
            check_int(name, getattr(self, name), minimum=1)
        check_int("seed", self.seed, minimum=0)
        check_choice("sampling", self.sampling, SAMPLINGS)
        check_choice("text_split", self.text_split, TEXT_SPLITS)
        check_positive("noise_scale", self.noise_scale)
        if not 0 < self.radius < 1:
            raise AnatomyKitError(f"radius={self.radius} must lie in (0, 1): the Poincaré ball is the open unit ball")
        if self.sensitivity_blocks > self.n_blocks:
            raise AnatomyKitError(f"sensitivity_blocks={self.sensitivity_blocks} exceeds n_blocks={self.n_blocks}")
        return self


def measure_work(name: str, settings: WorkSettings, out: str | Path, *, device: str = "auto",
                 scale: str | None = None) -> dict:
    """Load model ``name``, measure its nine work profiles and diagnostics, save them to ``out``.

    Returns ``{"path": str, "seconds": {"capture", "geometry", "sensitivity", "total"}}``. The file holds the
    profiles, the TwoNN dimension of every FFN input cloud, the FFN-output noise sensitivity, the
    residual-norm growth (mean ‖y‖ − ‖x‖) and, in ``meta``, the settings, the mean residual norm
    and the growth as a ratio.
    """
    s = settings.validate()
    t0 = time.time()
    loaded = load_model(name, device=device)
    print(loaded.description)
    blocks = token_blocks(loaded.tokenizer, s.corpus, block_size=s.block_size, n_train=0, n_eval=s.n_blocks,
                          split=s.text_split)
    print(blocks.describe())
    clouds = capture_ffn_clouds(loaded.model, blocks.eval, n_tokens=s.n_tokens, sampling=s.sampling, seed=s.seed,
                                batch_size=s.batch_size)
    t_capture = time.time() - t0
    profiles = work_profiles(clouds, radius=s.radius, n_jobs=s.n_jobs, progress=False)
    t_geometry = time.time() - t0 - t_capture
    t_sens = time.time()
    sens = ffn_sensitivity(loaded.model, blocks.eval[: s.sensitivity_blocks], noise_scale=s.noise_scale, seed=s.seed,
                           n_draws=s.n_draws, batch_size=s.batch_size)
    t_sens = time.time() - t_sens
    meta = {"model": name, "description": loaded.description, "scale": scale, **asdict(s),
            "residual_norm_growth": "mean ||y|| - ||x|| (difference)",
            "residual_norm": mean_norms(clouds, "x").tolist(),
            "residual_norm_ratio": residual_norm_growth(clouds, "ratio").tolist()}
    path = save_profiles(out, profiles, meta, intrinsic_dimension=intrinsic_dimensions(clouds), sensitivity=sens,
                         residual_norm_growth=residual_norm_growth(clouds, "difference"))
    del loaded, clouds
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return {"path": str(path), "seconds": {"capture": round(t_capture, 1), "geometry": round(t_geometry, 1),
                                           "sensitivity": round(t_sens, 1), "total": round(time.time() - t0, 1)}}
