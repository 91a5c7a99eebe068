"""The compiled progressive filling (kit/fill_kernel.py) makes the very floats of the
array version (`physics.filled_rates`), which the duration estimates' figures rest on."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from kit import fill_kernel
from kit import physics

# Caps drawn from a few values, so that resources fill in the same round (ties) as often as
# not; 0 (a throttle of nothing) and inf (no cap) included.
CAPS = st.sampled_from([0.0, 1.0, 2.5, 10.0, 10.0 + 1e-9, 40e6, 125e6, np.inf])


@st.composite
def fillings(draw):
    n = draw(st.integers(2, 9))
    k = draw(st.integers(1, 30))
    src = np.array(draw(st.lists(st.integers(0, n - 1), min_size=k, max_size=k)), dtype=np.int64)
    dst = np.array(draw(st.lists(st.integers(0, n - 1), min_size=k, max_size=k)), dtype=np.int64)
    weight = np.array(draw(st.lists(st.integers(1, 40), min_size=k, max_size=k)), dtype=float)
    out_cap = np.array(draw(st.lists(CAPS, min_size=n, max_size=n)))
    in_cap = np.array(draw(st.lists(CAPS, min_size=n, max_size=n)))
    return src, dst, weight, out_cap, in_cap


@settings(max_examples=300, deadline=None)
@given(fillings())
def test_the_compiled_filling_gives_the_array_versions_floats(case):
    want = physics.filled_rates(*case)
    assert np.array_equal(fill_kernel.compiled()(*case), want, equal_nan=True)
    # pair_rates takes the compiled one once numba is loaded (it is, by now).
    assert np.array_equal(physics.pair_rates(*case), want, equal_nan=True)


@settings(max_examples=60, deadline=None)
@given(fillings())
def test_the_loop_as_plain_python_is_the_same_loop(case):
    with np.errstate(divide="ignore", invalid="ignore"):  # compiled: numba's numpy error model
        loop = fill_kernel.filled_rates_loop(*case)
    assert np.array_equal(loop, physics.filled_rates(*case), equal_nan=True)


def test_a_filling_of_many_pairs_over_150_brokers():
    """The size a 200,000-partition estimate fills at: 150 brokers, thousands of pairs, caps
    that tie by the dozen."""
    rng = np.random.default_rng(7)
    n, k = 150, 4000
    src, dst = rng.integers(0, n, k), rng.integers(0, n, k)
    weight = rng.integers(1, 6, k).astype(float)
    caps = rng.choice([40e6, 90e6, 125e6], size=(2, n))
    want = physics.filled_rates(src, dst, weight, caps[0], caps[1])
    assert np.array_equal(fill_kernel.compiled()(src, dst, weight, caps[0], caps[1]), want)
    assert (want > 0).all()
