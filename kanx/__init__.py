"""kanx: experiment runner for gated, multi-exit, densely connected B-spline KANs.

Implements Bagrow & Bongard, "Optimized Architectures for Kolmogorov-Arnold Networks".
"""

__version__ = "0.1.0"
