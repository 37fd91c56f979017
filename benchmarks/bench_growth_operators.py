"""Cost of the chapter 6 growth operators on the paper's d256 → d384 GPT and on a SmolLM2-shaped Llama.

    python benchmarks/bench_growth_operators.py [--repeats 3] [--lrio-steps 2] [--threads 1]

Both models are randomly initialised here (nothing is downloaded): the paper's GPT (8 layers,
d256, 4 → 6 heads, GPT-2 vocabulary 50,257, context 256) and a LlamaForCausalLM with SmolLM2-135M's
shape (30 layers, hidden 576 → 768, 9 → 12 heads, 3 → 4 kv heads, SwiGLU 1536 → 2048, vocab
49,152, tied). Reported: the median wall time of each closed-form operator (target: well under a
second), and of one LRIO / SRIO-LO step on a (2, 64) batch (a step is a forward and backward of
the grown model through weights rebuilt from the learned operator). Wall and process-CPU seconds
are both shown: on a shared machine the wall time is inflated by other jobs; with one thread
(``--threads 1``) CPU ≈ wall on an idle machine.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from anatomy_kit.width_growth import lrio, srio
from anatomy_kit.width_growth.gpt import GPT, GPTConfig
from anatomy_kit.width_growth.hf_grow import grow_llama


def timed(fn, repeats: int, warm_up: bool = True) -> tuple[float, float]:
    """Median (wall seconds, CPU seconds of this process) over ``repeats`` calls."""
    if warm_up:
        fn()  # the first call pays for allocator growth and lazy imports
    wall, cpu = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return statistics.median(wall), statistics.median(cpu)


def smollm2_shaped():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                      num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=2048,
                      rms_norm_eps=1e-5, tie_word_embeddings=True, rope_theta=100000.0)
    return LlamaForCausalLM(cfg).eval()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--lrio-steps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(vocab_size=50257, n_layers=8, d_model=256, n_heads=4, max_seq_len=256)).eval()
    rows = []
    for name, fn in [("nrio (block)", lambda: srio.grow_nrio(gpt, 384)),
                     ("srio-so eps* (block)", lambda: srio.grow_srio(gpt, 384)),
                     ("srio-so eps=0.1 (tiled)", lambda: srio.grow_srio(gpt, 384, 0.1, expansion="tiled")),
                     ("mrio 2 stages (block)", lambda: srio.grow_mrio(gpt, 384))]:
        rows.append(("GPT d256→d384", name, timed(fn, args.repeats)))
    batch = [torch.randint(0, 50257, (2, 65))]
    steps = args.lrio_steps
    for name, grower in [("lrio", lrio.grow_lrio), ("srio-lo", lrio.grow_srio_lo)]:
        total = timed(lambda: grower(gpt, 384, batch, steps=steps), 1, warm_up=False)
        one = timed(lambda: grower(gpt, 384, batch, steps=1), 1, warm_up=False)
        rows.append(("GPT d256→d384", f"{name}: {steps} steps, total", total))
        rows.append(("GPT d256→d384", f"{name}: per step (B=2, T=64)",
                     tuple((a - b) / max(steps - 1, 1) for a, b in zip(total, one))))
    llama = smollm2_shaped()
    for name, fn in [("nrio eps=0 (block)", lambda: grow_llama(llama, 768, 0.0)),
                     ("srio eps=0.3 (block)", lambda: grow_llama(llama, 768, 0.3)),
                     ("srio eps=0.3 (tiled)", lambda: grow_llama(llama, 768, 0.3, "tiled"))]:
        rows.append(("SmolLM2-shaped 576→768", name, timed(fn, args.repeats)))
    print(f"GPT params {gpt.param_count():,}; Llama params {sum(p.numel() for p in llama.parameters()):,}; "
          f"threads {args.threads}")
    print(f"{'model':<24} {'operator':<34} {'wall s':>8} {'CPU s':>8}")
    for model, name, (wall, cpu) in rows:
        print(f"{model:<24} {name:<34} {wall:8.3f} {cpu:8.3f}")


if __name__ == "__main__":
    main()
