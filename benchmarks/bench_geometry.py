"""Benchmark of chapter 4's geometric work: all nine statistics for every layer.

    python benchmarks/bench_geometry.py [--sizes 128 256 512] [--layers 30] [--jobs 2] [--synthetic]

Clouds come from the embedded SmolLM2-135M (30 layers, d = 576) on the python-docs corpus
when ``anatomy_kit.hf.models.load_model("embedded")`` works, else from synthetic clouds of
dimension 576 (with a warning: ripser's cost depends on the cloud, so synthetic timings are
only indicative). Prints, per cloud size n: the time of each statistic alone (shift, GW with
the identity coupling, H1 topology — each over all three geometries, including its distance
matrices), the nine together serially and with ``--jobs`` worker processes, wall and CPU
seconds; then the optional optimal-coupling GW, ripser per call, and our exact diagram
distance against ``persim.wasserstein``. Acceptance: nine statistics × 30 layers at
n = 512 in ≤ 60 s on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from anatomy_kit import geometry as G  # noqa: E402
from anatomy_kit.geometry import FFNCloud  # noqa: E402

BUDGET_S = 60.0


def timed(fn, *args, **kwargs):
    w, c = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - w, time.process_time() - c


def model_clouds(n_max: int, n_layers: int):
    from anatomy_kit.geometry import capture_ffn_clouds
    from anatomy_kit.data import token_blocks
    from anatomy_kit.hf.models import load_model

    lm = load_model("embedded", device="cpu")
    block = 256
    blocks = token_blocks(lm.tokenizer, "python-docs", block_size=block, n_train=-(-2 * n_max // block), n_eval=1)
    layers = list(range(min(n_layers, lm.n_layers)))
    (clouds, wall, _) = timed(capture_ffn_clouds, lm.model, blocks.train, n_tokens=n_max, layers=layers, seed=0)
    return clouds, f"{lm.description}; {len(blocks.train)}×{block} python-docs tokens (capture {wall:.1f} s)"


def synthetic_clouds(n_max: int, n_layers: int, d: int = 576, seed: int = 0):
    """A residual-stream-like walk: low-rank states, each 'FFN' adds a smooth low-rank update."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n_max, 16)) @ rng.standard_normal((16, d)) + 0.3 * rng.standard_normal((n_max, d))
    out = []
    for l in range(n_layers):
        a, b = rng.standard_normal((d, 8)) / np.sqrt(d), rng.standard_normal((8, d))
        y = x + np.tanh(x @ a) @ b
        out.append(FFNCloud(l, x, y, np.arange(n_max)))
        x = y + 0.1 * rng.standard_normal(y.shape)
    return out, f"SYNTHETIC clouds, d={d} (timings only indicative)"


def subsample(clouds, n):
    return [FFNCloud(c.layer, c.x[:n], c.y[:n], c.token_index[:n], c.point) for c in clouds]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[128, 256, 512])
    ap.add_argument("--layers", type=int, default=30)
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--synthetic", action="store_true", help="skip the model; use synthetic clouds")
    args = ap.parse_args()
    n_max = max(args.sizes)

    if args.synthetic:
        clouds, source = synthetic_clouds(n_max, args.layers)
    else:
        try:
            clouds, source = model_clouds(n_max, args.layers)
        except Exception as err:  # noqa: BLE001 - any failure falls back to synthetic clouds
            warnings.warn(f"embedded model unavailable ({type(err).__name__}: {err}); using synthetic clouds")
            clouds, source = synthetic_clouds(n_max, args.layers)
    L = len(clouds)
    print(f"clouds: {source}; {L} layers; cpu cores: {os.cpu_count()}")
    print()
    head = f"{'n':>5} {'shift':>8} {'gw':>8} {'topology':>9} | {'9 stats serial':>15} {'(cpu)':>7} | {f'9 stats jobs={args.jobs}':>16}"
    print("seconds for all", L, "layers; each statistic over raw, spherical, hyperbolic")
    print(head)
    print("-" * len(head))
    result = {}
    for n in sorted(args.sizes):
        cs = subsample(clouds, n)
        row = {}
        for s in ("shift", "gw", "topology"):
            row[s] = timed(G.work_profiles, cs, statistics=[s], progress=False)[1]
        wp, row["all"], row["cpu"] = timed(G.work_profiles, cs, progress=False)
        wp2, row["par"], _ = timed(G.work_profiles, cs, n_jobs=args.jobs, progress=False)
        assert np.array_equal(wp.values, wp2.values)      # exact: the same float64 code per layer, in workers
        result[n] = row
        print(f"{n:>5} {row['shift']:>8.2f} {row['gw']:>8.2f} {row['topology']:>9.2f} | "
              f"{row['all']:>15.2f} {row['cpu']:>7.2f} | {row['par']:>16.2f}")
    print()

    cs = subsample(clouds, n_max)
    few = cs[:: max(1, L // 5)][:5]
    _, w, _ = timed(G.work_profiles, few, statistics=["gw_optimal"], progress=False)
    print(f"optional gw_optimal (POT, warm start I/n), n={n_max}: {w / (3 * len(few)):.2f} s per layer×geometry "
          f"→ ≈ {w / len(few) * L:.0f} s for {L} layers × 3 geometries")
    c = cs[L // 2]
    dx, dy = G.pairwise_distances(c.x), G.pairwise_distances(c.y)
    (dgx, tr, _) = timed(G.h1_diagram, dx)
    dgy = G.h1_diagram(dy)
    import persim
    ours, t_ours, _ = timed(G.diagram_distance, dgx, dgy, order=1)
    ref, t_ref, _ = timed(persim.wasserstein, dgx, dgy)
    print(f"ripser H1 (exact, no n_perm), n={n_max}, layer {c.layer}: {tr:.2f} s per cloud; "
          f"diagrams of {len(dgx)} and {len(dgy)} points")
    print(f"diagram W1: ours {t_ours * 1e3:.1f} ms vs persim.wasserstein {t_ref * 1e3:.1f} ms; "
          f"|difference| = {abs(ours - ref):.1e}")
    best = min(result[n_max]["all"], result[n_max]["par"])
    verdict = "PASS" if best <= BUDGET_S * L / 30 else "FAIL"
    print(f"\nacceptance (9 statistics × {L} layers, n={n_max}, ≤ {BUDGET_S * L / 30:.0f} s): "
          f"{verdict} ({best:.1f} s best of serial/jobs={args.jobs})")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
