#!/usr/bin/env python3
"""What running a kernel compiled by numba costs a process that has not loaded numba yet.

  numba_cost.py [--repeat 5]

Each run is a fresh child process that imports numpy and kit's copy physics, then measures
its own CPU time (user + system) for `import numba` and for the first call of the duration
estimate's filling kernel (kit/fill_kernel.py) from numba's disk cache (scripts/warm_kernels.py
writes it): that first call loads numba's type registries, which import more (scipy.linalg
among them). A second call shows what the kernel itself costs. Prints the medians, in CPU
seconds; kit/jit.py's rule (run compiled only once numba is loaded) rests on these figures.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import json, time
import numpy as np
from kit import fill_kernel, physics
args = (np.array([0, 1]), np.array([1, 0]), np.array([2.0, 1.0]), np.array([5.0, 7.0]), np.array([6.0, 4.0]))
t0 = time.process_time()
import numba
t1 = time.process_time()
kernel = fill_kernel.compiled()
kernel(*args)
t2 = time.process_time()
kernel(*args)
t3 = time.process_time()
print(json.dumps({"import": t1 - t0, "first_call": t2 - t1, "second_call": t3 - t2}))
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    runs = []
    for _ in range(max(1, a.repeat)):
        out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True,
                             stdin=subprocess.DEVNULL)
        runs.append(json.loads(out.stdout))
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(f"CPU s, median of {len(runs)} fresh processes: import numba {med['import']:.3f}, first call of the "
          f"cached filling kernel {med['first_call']:.3f}, together {med['import'] + med['first_call']:.3f}; "
          f"a second call {med['second_call'] * 1e6:.0f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
