"""Cost of the prefix-cached ablation sweep against the naive sweep on the embedded model.

    python benchmarks/bench_ablation_sweep.py [--n-eval 6] [--block-size 128] [--repeats 1]

Three sweeps ablate every layer (neighbour-mean) and score the same tokens:

- ``hf-naive``: for each ablation, the model's own forward with labels (``model(ids, labels=...)``:
  logits for every position, Hugging Face's loss) — what one writes first;
- ``naive``: our full forward with the chunked LM head (same head code as the cached sweep);
- ``cached``: the prefix-cached sweep (layers ℓ … L−1 only).

Target: cached ≤ 0.55× the naive sweep. The layer-count bound is (L+1)/2L ≈ 0.52; the LM head
(576 × 49,152), paid by every sweep, lifts the same-head ratio above it.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from anatomy_kit import anatomy, data
from anatomy_kit.hf import evaluation, models


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-eval", type=int, default=6)
    ap.add_argument("--block-size", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    loaded = models.load_model("embedded", device="cpu")
    blocks = data.token_blocks(loaded.tokenizer, "python-docs", block_size=args.block_size, n_train=0, n_eval=args.n_eval)
    batches = evaluation.make_batches(blocks.eval, args.n_eval)
    L = loaded.n_layers
    times = {"hf-naive": [], "naive": [], "cached": []}

    def hf_sweep():
        out = []
        with torch.no_grad():
            for layer in range(L):
                with anatomy.ablated(loaded.model, layer):
                    nll = sum(float(loaded.model(input_ids=b.input_ids, labels=b.labels).loss) * b.n_targets
                              for b in batches)
                out.append(np.exp(nll / sum(b.n_targets for b in batches)))
        return np.array(out)

    for _ in range(args.repeats):
        t = time.perf_counter()
        hf = hf_sweep()
        times["hf-naive"].append(time.perf_counter() - t)
        t = time.perf_counter()
        naive = anatomy.ablation_map(loaded.model, batches, prefix_cache=False, progress=False)
        times["naive"].append(time.perf_counter() - t)
        t = time.perf_counter()
        cached = anatomy.ablation_map(loaded.model, batches, prefix_cache=True, progress=False)
        times["cached"].append(time.perf_counter() - t)
    assert np.allclose(naive.ppl, cached.ppl, rtol=1e-5) and np.allclose(hf, cached.ppl, rtol=1e-4)
    # one layer vs the head, to explain the gap to the bound
    cache = evaluation.capture_prefix(loaded.model, batches)
    t = time.perf_counter()
    full = evaluation.nll_from_layer(loaded.model, cache, 0)
    t_full = time.perf_counter() - t
    t = time.perf_counter()
    evaluation.nll_from_layer(loaded.model, cache, L - 1)
    t_last = time.perf_counter() - t
    h, n, c = min(times["hf-naive"]), min(times["naive"]), min(times["cached"])
    print(f"embedded SmolLM2 ({L} layers), {blocks.eval.numel():,} tokens, torch threads {torch.get_num_threads()}")
    print(f"hf-naive sweep {h:7.1f} s   cached/hf-naive = {c / h:.3f}")
    print(f"naive sweep   {n:8.1f} s")
    print(f"cached sweep  {c:8.1f} s   (includes the one capture pass)")
    print(f"ratio         {c / n:8.3f}   target <= 0.55, layer-count bound (L+1)/2L = {(L + 1) / (2 * L):.3f}")
    print(f"one full pass {t_full:8.2f} s; last layer + head {t_last:.2f} s (head ≈ {t_last / t_full:.0%} of a pass); "
          f"{full:.1f} nats")


if __name__ == "__main__":
    main()
