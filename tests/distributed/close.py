#!/usr/bin/env python3
"""close.py — compares the results of two training runs within a relative tolerance (the same run split over
several processes sums in another order).

Usage: close.py TOL --lines A B          two files of one number per line (json_field output): same count, each pair
                                         within TOL relative
       close.py TOL --tensors A.st B.st  two checkpoints: the same tensor names, ‖a − b‖ ≤ TOL·‖b‖ for each parameter
                                         and buffer (optimizer state is left out: the momentum of a bias that a
                                         batch norm cancels holds only rounding noise)"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))


def main():
    tol, mode, a, b = float(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    if mode == "--lines":
        x = [float(v) for v in open(a).read().split()]
        y = [float(v) for v in open(b).read().split()]
        worst = max((abs(p - q) / max(abs(q), 1e-30) for p, q in zip(x, y)), default=0.0)
        ok = len(x) == len(y) and len(x) > 0 and worst <= tol
        print(f"{len(x)} vs {len(y)} values, worst relative difference {worst:.3g}")
    else:
        from st_check import read

        ta, _ = read(a)
        tb, _ = read(b)
        worst = 0.0
        for k in tb:
            if k.endswith((".momentum", ".adam_m", ".adam_v", ".grad")):
                continue
            da, db = ta[k].double(), tb[k].double()
            worst = max(worst, float((da - db).norm() / max(float(db.norm()), 1e-30)))
        ok = ta.keys() == tb.keys() and math.isfinite(worst) and worst <= tol
        print(f"{len(ta)} vs {len(tb)} tensors, worst relative difference {worst:.3g}")
    sys.exit(0 if ok else 1)


main()
