"""What every card page states about how it was made: versions, device, dtype, time per stage, memory.

The model's identity (:func:`.loading.model_identity`) and the text's token sha256
(:class:`.text.CardText`) complete it. Used by the book page *Your model's report card*.
"""

from __future__ import annotations

import datetime as _dt
import platform

__all__ = ["versions", "provenance", "describe_provenance"]


def versions() -> dict[str, str]:
    """Versions of Python, torch, transformers, numpy and anatomy_kit."""
    import numpy
    import torch
    import transformers

    from .. import __version__

    return {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "numpy": numpy.__version__, "anatomy_kit": __version__}


def provenance(device: str, dtype: str, timings: dict, peak_rss_mb: float) -> dict:
    """The provenance block of a card (``created`` in UTC, ISO 8601)."""
    return {"versions": versions(), "device": device, "dtype": dtype, "platform": platform.platform(terse=True),
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "timings": timings, "peak_rss_mb": round(float(peak_rss_mb), 1)}


def describe_provenance(doc: dict) -> list[str]:
    """Lines for a page: model and revision or checksum, dtype, device, versions, corpus and token hash, time per stage."""
    m, t, p = doc["model"], doc["text"], doc["provenance"]
    ident = (f"revision {m['revision']}" if m.get("revision") else
             f"sha256 {m['checksum'][:16]}… of the {m.get('checksum_of') or 'weights'}" if m.get("checksum") else
             "no revision or checksum known")
    v = p["versions"]
    stages = ", ".join(f"{k} {s['wall_s']:.1f} s (CPU {s['cpu_s']:.1f} s)" for k, s in p["timings"].items())
    return [f"Model: {m['name']} ({m['class']}, {m['n_layers']} layers, {m['n_parameters']:,} parameters), {ident}.",
            f"Run: dtype {p['dtype']} on {p['device']}; Python {v['python']}, torch {v['torch']}, "
            f"transformers {v['transformers']}, anatomy_kit {v['anatomy_kit']}; created {p['created']}.",
            f"Text: corpus {t['corpus']} ({t['kind']}), {t['eval_tokens']:,} evaluation tokens in {t['n_eval_blocks']} "
            f"blocks of {t['block_size']}, {t['calibration_tokens']:,} calibration tokens; token ids sha256 "
            f"{t['token_sha256'][:16]}….",
            f"Time per stage: {stages}; peak resident memory {p['peak_rss_mb']:,.0f} MiB."]
