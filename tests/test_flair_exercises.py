"""The checkers of the FLAIR exercises: a right answer passes, and each classic mistake is named."""

import numpy as np

import companion.flair as fl
from companion.exercises import flair as ex


def test_gmq_checker_accepts_the_package_and_names_mistakes():
    assert ex.check_gmq(lambda p, t: fl.gmq(fl.q_error(p, t))).score == 2
    arithmetic = lambda p, t: float(fl.q_error(p, t).mean())  # noqa: E731
    assert "arithmetically" in str(ex.check_gmq(arithmetic))

    def signed(p, t):
        return float(np.exp(np.log(np.maximum(p, 1) / np.maximum(t, 1)).mean()))

    assert "cancel" in str(ex.check_gmq(signed))

    def unclipped(p, t):
        with np.errstate(all="ignore"):
            q = np.maximum(p / t, t / p)
            return float(np.exp(np.log(q).mean()))

    report = ex.check_gmq(unclipped)
    assert report.score == 0 and "clips both at 1" in str(report)
    assert "take its exp" in str(ex.check_gmq(lambda p, t: float(np.log(fl.q_error(p, t)).mean())))


def _stream(order="fifo", leak=False, cap_shift=0):
    def run(predict, cold, xs, ys, capacity):
        out = []
        for t, x in enumerate(xs):
            hi = t + 1 if leak else t
            lo = hi - capacity - cap_shift
            if t < capacity:
                out.append(cold(x))
                continue
            cx, cy = xs[max(lo, 0):hi], ys[max(lo, 0):hi]
            if order == "lifo":
                cx, cy = cx[::-1], cy[::-1]
            out.append(predict(cx, cy, x))
        return out
    return run


def test_stream_checker_accepts_a_right_loop_and_names_mistakes():
    assert ex.check_stream(_stream()).score == 2
    assert "own label" in str(ex.check_stream(_stream(leak=True)))
    assert "newest first" in str(ex.check_stream(_stream(order="lifo")))
    assert "sizes" in str(ex.check_stream(_stream(cap_shift=1)))

    def never_cold(predict, cold, xs, ys, capacity):
        return [predict(xs[max(0, t - capacity):t], ys[max(0, t - capacity):t], x) if t else cold(x)
                for t, x in enumerate(xs)]

    assert "sizes" in str(ex.check_stream(never_cold))


def test_normalize_checker_accepts_the_engines_statistics_and_names_mistakes():
    def right(cx, qx):
        m, s = cx.mean(0), cx.std(0) + 1e-6
        return (cx - m) / s, (qx - m) / s

    assert ex.check_normalize(right).score == 2

    def pooled(cx, qx):
        both = np.vstack([cx, qx])
        m, s = both.mean(0), both.std(0) + 1e-6
        return (cx - m) / s, (qx - m) / s

    assert "include the queries" in str(ex.check_normalize(pooled))

    def own(cx, qx):
        return right(cx, qx)[0], (qx - qx.mean(0)) / (qx.std(0) + 1e-6)

    assert "their own statistics" in str(ex.check_normalize(own))

    def sample_std(cx, qx):
        m, s = cx.mean(0), cx.std(0, ddof=1) + 1e-6
        return (cx - m) / s, (qx - m) / s

    assert "ddof" in str(ex.check_normalize(sample_std))
