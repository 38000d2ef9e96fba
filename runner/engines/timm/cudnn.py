"""How cuDNN picks a convolution's kernels in a process that trains or times a CNN on a card: the policy, by name.

cuDNN's benchmark mode times every algorithm it may use for each new convolution shape and direction (up to
`benchmark_limit` of them, torch's default 10) and keeps the fastest; since cuDNN 9.10 the depthwise convolutions
of the EfficientNets compile a plan at run time for each one tried (about 1.5 s a plan a process). A fold process
pays that search once, in its first steps; a process forked for each fold pays it each time. Which policy trains
a fold's images soonest is measured on the card (bench/gpu_cold_start.py's table, docs/how-a-run-works.md)."""
from __future__ import annotations

import os

POLICY_VARIABLE = "RUNNER_CUDNN"  # names the policy for a run's processes (the measuring one and its folds)
# name: (cudnn.benchmark, its benchmark_limit; None leaves torch's). A few algorithms still choose among the
# fastest while compiling fewer of the run-time plans depthwise convolutions need
POLICIES = {"benchmark": (True, None), "no_benchmark": (False, None), "benchmark_limit_3": (True, 3)}
# measured on an H200 (docs/performance.md): the search cost 3-25 s a process on every ladder rung timed and bought
# at most 1.1% of pace, repaid only by 27 minutes or more of one process's training
DEFAULT_POLICY = "no_benchmark"


def policy_name() -> str:
    """The policy this process's environment names (DEFAULT_POLICY where it names none); a name that is no policy
    is an error naming the variable and the choices."""
    name = os.environ.get(POLICY_VARIABLE, "").strip() or DEFAULT_POLICY
    if name not in POLICIES:
        raise ValueError(f"{POLICY_VARIABLE}={name!r} names no cuDNN policy; the choices: {', '.join(POLICIES)}")
    return name


def apply_policy(name: str | None = None) -> str:
    """Set cuDNN's kernel choice for this process to the named policy (the environment's where None); its name."""
    import torch

    name = name or policy_name()
    benchmark, limit = POLICIES[name]
    torch.backends.cudnn.benchmark = benchmark
    if limit is not None:
        torch.backends.cudnn.benchmark_limit = limit
    return name
