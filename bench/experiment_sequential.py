"""Early stopping by simulation: false verdicts under no difference, stopping time under one.

Each simulated experiment is a sequence of ``--cases`` paired per-case differences of a
pass/fail metric (-1, 0, +1), watched after every case by the mixture martingale of
``gramagent.experiments._sequential`` (the test ``--stop-when-decided`` uses). Under no
difference, -1 and +1 are equally likely (``--discordant`` of the cases in all); the share of
experiments that ever cross 1/alpha must stay at or below alpha. Under a planted difference
(``--difference`` of the cases more +1 than -1), the table shows the share decided and the
mean share of the cases run before the stop.

Usage::

    python bench/experiment_sequential.py                    # 1,000 experiments of 400 cases
    python bench/experiment_sequential.py --experiments 5000 --cases 1000
"""

from __future__ import annotations

import argparse

import numpy as np

from gramagent.experiments._sequential import log_wealth


def simulate(rng: np.random.Generator, experiments: int, cases: int, worse: float,
             better: float, alpha: float) -> tuple[float, float]:
    decided_all, used_all = [], []
    for start in range(0, experiments, 250):  # batches bound the memory
        count = min(250, experiments - start)
        d = rng.choice([-1.0, 0.0, 1.0], p=[worse, 1 - worse - better, better],
                       size=(count, cases))
        crossed = log_wealth(d) >= np.log(1 / alpha)
        decided = crossed.any(axis=1)
        decided_all.append(decided)
        used_all.append(np.where(decided, crossed.argmax(axis=1) + 1, cases) / cases)
    return float(np.concatenate(decided_all).mean()), float(np.concatenate(used_all).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", type=int, default=1000)
    parser.add_argument("--cases", type=int, default=400)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--discordant", type=float, default=0.3)
    parser.add_argument("--difference", type=float, default=0.15)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    half = args.discordant / 2
    null, used = simulate(rng, args.experiments, args.cases, half, half, args.alpha)
    print(f"no difference ({args.experiments:,} experiments of {args.cases} cases, "
          f"{args.discordant:.0%} discordant): false verdicts {null:.1%} "
          f"(alpha {args.alpha:.0%}); mean share of cases run {used:.0%}")
    shift = args.difference / 2
    power, used = simulate(rng, args.experiments, args.cases, half - shift, half + shift,
                           args.alpha)
    print(f"planted difference of {args.difference * 100:+.0f} points: decided {power:.1%}; "
          f"mean share of cases run {used:.0%}")


if __name__ == "__main__":
    main()
