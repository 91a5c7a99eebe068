"""The compiled progressive filling (kit/fill_kernel.py) makes the very floats of the
array version (`physics.filled_rates`), which the duration estimates' figures rest on; and
`physics.filling_stands` says a filling stands under changed caps only when filling again gives
its very floats."""
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


@settings(max_examples=400, deadline=None)
@given(fillings(), st.data())
def test_a_filling_said_to_stand_is_the_filling_made_again(case, data):
    src, dst, weight, out_cap, in_cap = case
    rounds = []
    before = physics.filled_rates(*case, rounds=rounds)
    caps = np.concatenate([out_cap, in_cap])
    changed = sorted(set(data.draw(st.lists(st.integers(0, len(caps) - 1), min_size=1, max_size=3))))
    for j in changed:
        caps[j] = data.draw(st.one_of(CAPS, st.floats(0, 2e8)))
    n = len(out_cap)
    after = physics.filled_rates(src, dst, weight, caps[:n], caps[n:])
    if physics.filling_stands(rounds, src, dst, weight, caps[:n], caps[n:], changed):
        assert np.array_equal(after, before, equal_nan=True)


def test_a_cap_that_never_bound_may_change_and_one_that_bound_may_not():
    # Broker 0 sends to 1 and 2; 1 receives at most 10, so 0's out cap of 100 never binds.
    src, dst, weight = np.array([0, 0]), np.array([1, 2]), np.array([1.0, 1.0])
    out_cap, in_cap = np.array([100.0, 50.0, 50.0]), np.array([50.0, 10.0, 50.0])
    rounds = []
    before = physics.filled_rates(src, dst, weight, out_cap, in_cap, rounds)
    assert before.tolist() == [10.0, 50.0]
    lower = np.array([70.0, 50.0, 50.0])  # still above 10 + 50 (a tie would fill it): stands
    assert physics.filling_stands(rounds, src, dst, weight, lower, in_cap, [0])
    assert np.array_equal(physics.filled_rates(src, dst, weight, lower, in_cap), before)
    binding = np.array([40.0, 50.0, 50.0])  # 0 now fills first: 20 each
    assert not physics.filling_stands(rounds, src, dst, weight, binding, in_cap, [0])
    assert physics.filled_rates(src, dst, weight, binding, in_cap).tolist() == [10.0, 30.0]
    wider = np.array([50.0, 20.0, 50.0])  # 1's in cap bound the first round
    assert not physics.filling_stands(rounds, src, dst, weight, out_cap, wider, [4])
