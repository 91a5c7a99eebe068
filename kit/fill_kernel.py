"""`physics.pair_rates`' progressive filling as one loop numba compiles (`compiled`).

A duration estimate replays thousands of fillings (3,754 for a 200,000-partition `remove`),
each a few dozen array operations on 2 x brokers resources: as numpy calls they cost some
0.16 ms a filling in call overhead alone, compiled a few microseconds. The loop makes the very
floats of the array version (`physics.filled_rates`): every step is the same elementwise
operation on the same numbers, and the sums it changes the order of are sums of whole numbers
(exact in any order). tests/sim/test_fill_kernel.py compares the two.

Plain Python in the subset numba compiles; as plain Python it is slow, and
`physics.pair_rates` calls it only compiled, once numba is loaded.
"""
from __future__ import annotations

import math

import numpy as np

_COMPILED = None


def compiled():
    """`filled_rates_loop` compiled by numba (cached on disk; scripts/warm_kernels.py warms it)."""
    global _COMPILED
    if _COMPILED is None:
        import numba  # loaded only where the caller found it loaded already (see physics.pair_rates)
        # error_model="numpy": x / 0 is inf (or nan) as in numpy, not ZeroDivisionError.
        _COMPILED = numba.njit(cache=True, error_model="numpy")(filled_rates_loop)
    return _COMPILED


def filled_rates_loop(src, dst, weight, out_cap, in_cap):
    """`physics.filled_rates` as loops: `src`, `dst` int64, the rest float64, every weight > 0."""
    n = out_cap.size
    # The flows as a source x destination matrix of weights, and each resource's weight:
    # broker out capacities first (0..n-1), then in capacities (n..2n-1).
    m = np.zeros((n, n))
    w = np.zeros(2 * n)
    for k in range(src.size):
        m[src[k], dst[k]] += weight[k]
        w[src[k]] += weight[k]
        w[n + dst[k]] += weight[k]
    room = np.empty(2 * n)
    for j in range(n):
        room[j] = out_cap[j]
        room[n + j] = in_cap[j]
    for j in range(2 * n):
        if w[j] == 0:
            room[j] = math.inf
    limit = np.empty(2 * n)
    when = np.full(2 * n, -1)
    levels = np.empty(2 * n + 1)  # a round fills at least one resource
    rounds = 0
    filled = 0.0
    while True:
        level = math.inf
        for j in range(2 * n):
            limit[j] = room[j] / w[j]
            if limit[j] < level:
                level = limit[j]
        if level == math.inf:
            break
        if level < 0.0:
            level = 0.0
        for j in range(2 * n):
            room[j] -= w[j] * level
        filled += level
        levels[rounds] = filled
        margin = level + (level * 1e-12 + 1e-12)
        for j in range(2 * n):
            if limit[j] <= margin:
                # Full: its flows freeze, and the resources at their other end lose their weight.
                when[j] = rounds
                room[j] = math.inf
                if j < n:
                    for d in range(n):
                        w[n + d] -= m[j, d]
                else:
                    for s in range(n):
                        w[s] -= m[s, j - n]
        rounds += 1
    levels[rounds] = filled
    rate = np.empty(src.size)
    for k in range(src.size):
        a, b = when[src[k]], when[n + dst[k]]
        a = rounds if a < 0 else a
        b = rounds if b < 0 else b
        rate[k] = levels[min(a, b)]
    return rate
