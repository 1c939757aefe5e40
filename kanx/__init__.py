"""kanx: experiment runner for gated, multi-exit, densely connected B-spline KANs.

Implements Bagrow & Bongard, "Optimized Architectures for Kolmogorov-Arnold Networks".
``kanx.load_run(run_dir)`` returns a finished run's record, config and trained model.
"""

__version__ = "0.1.0"


_LAZY = ("load_run", "TrainedRun")


def __getattr__(name: str):
    # Lazy, so `import kanx.analyze` does not pull in torch.
    if name in _LAZY:
        from kanx import load

        return getattr(load, name)
    raise AttributeError(f"module 'kanx' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
