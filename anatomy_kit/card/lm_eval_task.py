"""The card's perplexity as an lm-evaluation-harness task, and lm-eval runs on the intact and pruned models.

:func:`write_lm_eval_task` writes ``lm_eval/`` beside the drop list: ``card_ppl.yaml`` (a task),
``card_ppl_docs.jsonl`` (the card's evaluation blocks as text) and ``card_ppl_utils.py`` (the metric),
so that ::

    lm_eval --model hf --model_args pretrained=DIR --include_path OUT/lm_eval --tasks card_ppl_<key>

gives the card's perplexity of the model in ``DIR`` (the intact model, or a ``--save-pruned``
folder) with no edit. Each block of ``T`` token ids becomes one document: ``context`` the text of its
first token, ``continuation`` the text of the other ``T − 1``. The task is a ``loglikelihood`` task
(lm-eval scores the continuation given the context, in one window of ``T`` tokens, the card's block
size and so its context length), which scores exactly the card's ``T − 1`` predictions per block; a
``loglikelihood_rolling`` task would also score the first token after an end-of-text token, which the
card does not. The metric ``token_perplexity`` is ``exp(−Σ loglikelihood / Σ scored tokens)`` over
the blocks. lm-eval re-tokenizes the text: :func:`write_lm_eval_task` checks that every block's text
encodes back to its ids (with a space before the continuation where the tokenizer's decoder drops it)
and records how many do (``round_trip_blocks``); where one does not, lm-eval scores slightly other
tokens there.

:func:`run_lm_eval` runs lm-eval's Python API (``lm_eval.simple_evaluate``) on given tasks for a model
folder or hub id, when ``lm-eval`` is installed. Used by the book page *Your model's report card*.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import torch

from ..jsonio import write_json
from ..validate import AnatomyKitError

__all__ = ["task_name", "write_lm_eval_task", "check_lm_eval", "run_lm_eval"]

_UTILS = '''"""Metric of the anatomy_kit card's perplexity task (written by anatomy_kit; see card_ppl.yaml)."""
import math


def process_results(doc, results):
    loglikelihood, _ = results[0]
    return {"token_perplexity": (loglikelihood, doc["n_tokens"])}


def token_perplexity(items):
    """exp(- sum of log-likelihoods / sum of scored tokens) over the blocks."""
    return math.exp(-sum(ll for ll, _ in items) / sum(n for _, n in items))
'''


def task_name(doc: dict) -> str:
    """The task's name: ``card_ppl_<card key>`` (one task per card's text and settings)."""
    return f"card_ppl_{doc['key']}"


def _encode(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def write_lm_eval_task(out: str | Path, doc: dict, tokenizer, eval_blocks: torch.Tensor) -> dict:
    """Write the task into ``out/lm_eval`` (module docstring); return what was written and checked.

    ``eval_blocks`` (N, T): the card's evaluation blocks (their sha256 must be the card's).
    """
    folder = Path(out) / "lm_eval"
    folder.mkdir(parents=True, exist_ok=True)
    docs, round_trip = [], 0
    for i, ids in enumerate(eval_blocks.tolist()):
        context, rest = tokenizer.decode(ids[:1]), tokenizer.decode(ids[1:])
        # a word-level decoder drops the space between the two parts: take whichever text encodes back
        exact = [c for c in (rest, " " + rest) if _encode(tokenizer, context + c) == ids]
        continuation = exact[0] if exact else rest
        round_trip += bool(exact) and _encode(tokenizer, context) == ids[:1]
        docs.append({"block": i, "context": context, "continuation": continuation, "n_tokens": len(ids) - 1})
    data = folder / "card_ppl_docs.jsonl"
    data.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    (folder / "card_ppl_utils.py").write_text(_UTILS, encoding="utf-8")
    name, block = task_name(doc), int(eval_blocks.shape[1])
    (folder / "card_ppl.yaml").write_text(
        f"# anatomy_kit layer card {doc['key']}: the card's perplexity on its {len(docs)} evaluation blocks of "
        f"{block} tokens\n# (context length {block}; {len(docs) * (block - 1):,} scored tokens).\n"
        f"task: {name}\n"
        "dataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {json.dumps(str(data.resolve()))}\n"
        "test_split: test\n"
        "output_type: loglikelihood\n"
        'doc_to_text: "{{context}}"\n'
        'doc_to_target: "{{continuation}}"\n'
        'target_delimiter: ""\n'
        "process_results: !function card_ppl_utils.process_results\n"
        "metric_list:\n"
        "  - metric: token_perplexity\n"
        "    aggregation: !function card_ppl_utils.token_perplexity\n"
        "    higher_is_better: false\n"
        "metadata:\n  version: 1.0\n", encoding="utf-8")
    info = {"task": name, "include_path": str(folder.resolve()), "blocks": len(docs), "block_size": block,
            "scored_tokens": len(docs) * (block - 1), "round_trip_blocks": int(round_trip),
            "command": f"lm_eval --model hf --model_args pretrained=DIR --include_path {folder.resolve()} "
                       f"--tasks {name}"}
    write_json(folder / "task.json", info)
    return info


def check_lm_eval() -> None:
    """Refuse ``--lm-eval`` at once when the ``lm-eval`` package is not installed."""
    if importlib.util.find_spec("lm_eval") is None:
        raise AnatomyKitError("--lm-eval needs the lm-eval package (pip install lm-eval); it is not installed")


def run_lm_eval(model: str, tasks: list[str], *, include_path: str | None = None, device: str = "cpu",
                limit: int | None = None) -> dict:
    """``{task: {metric: value}}`` of lm-eval's ``simple_evaluate`` on ``model`` (a folder or hub id)."""
    check_lm_eval()
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    try:
        out = simple_evaluate(model="hf", model_args=f"pretrained={model}", tasks=tasks, device=device,
                              task_manager=TaskManager(include_path=include_path), limit=limit)
    except Exception as err:    # data not reachable offline, unknown task, ...
        first = str(err).splitlines()[0] if str(err) else ""
        raise AnatomyKitError(f"lm-eval could not run tasks {tasks} on {model!r} ({err.__class__.__name__}: "
                              f"{first})") from None
    return {task: {k: v for k, v in metrics.items() if isinstance(v, (int, float))}
            for task, metrics in out["results"].items()}
