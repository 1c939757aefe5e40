"""kanx: experiment runner for gated, multi-exit, densely connected B-spline KANs.

Implements Bagrow & Bongard, "Optimized Architectures for Kolmogorov-Arnold Networks".
``kanx.load_run(run_dir)`` returns a finished run's record, config and trained model;
``kanx.load_runs(root)`` a DataFrame with a row per record below a results root (the analysis' own
loader, kanx.analyze.collect.load_runs).
"""



from kanx.threads import short_spins

# OpenMP reads its spin count once, when torch loads it: set it before any kanx module imports
# torch, so that a pack's threads soon sleep rather than spin where another process holds a core
# (kanx.threads; a user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept).
short_spins()


def _version() -> str:
    """The version setuptools-scm derived from git when this kanx was built or installed
    (pyproject.toml, tool.setuptools_scm): 0.1.devN+g<commit>, so a wheel names its commit."""
    try:
        from kanx._version import version  # written at build time, git-ignored

        return version
    except ImportError:  # a checkout on the path without an install
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as installed_version

        try:
            return installed_version("kanx")
        except PackageNotFoundError:
            return "0+unknown"


__version__ = _version()


_LAZY = ("load_run", "TrainedRun", "load_runs")


def __getattr__(name: str):
    # Lazy, so `import kanx.analyze` does not pull in torch (and `import kanx` pandas).
    if name == "load_runs":
        from kanx.analyze import collect

        return collect.load_runs
    if name in _LAZY:
        from kanx import load

        return getattr(load, name)
    raise AttributeError(f"module 'kanx' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
