"""The card's perplexity as an lm-evaluation-harness task, and lm-eval runs on the intact and pruned models.

:func:`write_lm_eval_task` writes ``lm_eval/`` beside the drop list: ``card_ppl.yaml`` (a task),
``card_ppl_docs.jsonl`` (the card's evaluation blocks as text) and ``card_ppl_utils.py`` (the data
loader and the metric), so that, from the card's folder, ::

    lm_eval --model hf --model_args pretrained=DIR --include_path lm_eval --tasks card_ppl_<key>

gives the card's perplexity of the model in ``DIR`` (the intact model, or a ``--save-pruned``
folder) with no edit (``pip install "lm-eval[hf]"``: ``--model hf`` needs the ``hf`` extra). The
folder names no absolute path: the task reads its documents with ``custom_dataset``, a function of
``card_ppl_utils.py`` that opens ``card_ppl_docs.jsonl`` beside itself, and lm-eval imports that file
from the task's own folder, so the card's folder can move or go to another machine
(``--include_path`` is then wherever ``lm_eval/`` lies). Checked with lm-eval 0.4.13.

Each block of ``T`` token ids becomes one document: ``context`` the text of its first token,
``continuation`` the text of the other ``T − 1``. The task is a ``loglikelihood`` task (lm-eval scores
the continuation given the context, in one window of ``T`` tokens, the card's block size and so its
context length), which scores exactly the card's ``T − 1`` predictions per block; a
``loglikelihood_rolling`` task would also score the first token after an end-of-text token, which the
card does not. The metric ``token_perplexity`` is ``exp(−Σ loglikelihood / Σ scored tokens)`` over
the blocks. lm-eval re-tokenizes the text: :func:`write_lm_eval_task` checks that every block's text
encodes back to its ids (with a space before the continuation where the tokenizer's decoder drops it)
and records how many do (``round_trip_blocks``); where one does not, lm-eval scores slightly other
tokens there.

:func:`run_lm_eval` runs the ``lm_eval`` command (found on ``PATH``; lm-eval may live in an
environment of its own) on given tasks for a model folder or hub id and reads its results file.
Used by the book page *Your model's report card*.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch

from ..jsonio import write_json
from ..validate import AnatomyKitError

__all__ = ["LM_EVAL_INSTALL", "LM_EVAL_CHECKED", "task_name", "lm_eval_command", "write_lm_eval_task", "check_lm_eval",
           "run_lm_eval"]

#: the install line ``--model hf`` needs (lm-eval's plain install has no Hugging Face backend)
LM_EVAL_INSTALL = 'pip install "lm-eval[hf]"'
#: the lm-eval release the task was checked with
LM_EVAL_CHECKED = "0.4.13"

_UTILS = '''"""Data and metric of the anatomy_kit card's perplexity task (written by anatomy_kit; see card_ppl.yaml)."""
import json
import math
from pathlib import Path


def load_docs(**kwargs):
    """The card's evaluation blocks: card_ppl_docs.jsonl beside this file (no path is written anywhere)."""
    import datasets

    path = Path(__file__).with_name("card_ppl_docs.jsonl")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})


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


def lm_eval_command(doc: dict, model: str = "DIR", include_path: str = "lm_eval") -> str:
    """The command that scores ``model`` on the card's task, run from the card's folder."""
    return f"lm_eval --model hf --model_args pretrained={model} --include_path {include_path} --tasks {task_name(doc)}"


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
        f"{block} tokens\n# (context length {block}; {len(docs) * (block - 1):,} scored tokens). The documents are "
        "card_ppl_docs.jsonl beside this file,\n# read by card_ppl_utils.load_docs: move this folder freely.\n"
        f"task: {name}\n"
        "custom_dataset: !function card_ppl_utils.load_docs\n"
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
        "metadata:\n  version: 2.0\n", encoding="utf-8")
    info = {"task": name, "include_path": folder.name, "blocks": len(docs), "block_size": block,
            "scored_tokens": sum(d["n_tokens"] for d in docs), "round_trip_blocks": int(round_trip),
            "install": LM_EVAL_INSTALL, "checked_with": f"lm-eval {LM_EVAL_CHECKED}",
            "command": lm_eval_command(doc), "run_from": "the card's folder (the one holding lm_eval/)"}
    write_json(folder / "task.json", info)
    return info


def check_lm_eval() -> str:
    """The ``lm_eval`` command on ``PATH``; refuse ``--lm-eval`` at once when there is none."""
    exe = shutil.which("lm_eval")
    if exe is None:
        raise AnatomyKitError(f"--lm-eval needs the lm_eval command on PATH ({LM_EVAL_INSTALL}, in this environment "
                              "or one of its own); it was not found")
    return exe


def run_lm_eval(model: str, tasks: list[str], *, include_path: str | Path | None = None, device: str = "cpu",
                limit: int | None = None) -> dict:
    """``{task: {metric: value}}`` from the ``lm_eval`` command on ``model`` (a folder or hub id): it runs
    ``lm_eval --model hf --model_args pretrained=MODEL --tasks … --device … --output_path TMP`` and reads
    the results file it writes."""
    exe = check_lm_eval()
    if not tasks:
        raise AnatomyKitError("give at least one lm-eval task")
    with tempfile.TemporaryDirectory() as scratch:
        args = [exe, "--model", "hf", "--model_args", f"pretrained={model}", "--tasks", ",".join(tasks),
                "--device", device, "--output_path", scratch]
        if include_path is not None:
            args += ["--include_path", str(include_path)]
        if limit is not None:
            args += ["--limit", str(limit)]
        proc = subprocess.run(args, capture_output=True, text=True)
        found = sorted(Path(scratch).rglob("results_*.json"))
        if proc.returncode or not found:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise AnatomyKitError(f"lm-eval could not run tasks {tasks} on {model!r} (exit {proc.returncode}: "
                                  f"{last})")
        out = json.loads(found[-1].read_text())
    return {task: {k: v for k, v in metrics.items() if isinstance(v, (int, float))}
            for task, metrics in out["results"].items()}
