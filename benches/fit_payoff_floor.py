#!/usr/bin/env python3
"""The noise floor of benches/fit_payoff.sh, by simulation (no sluice involved).

fit_payoff compares the p99 response time of load from a fitted model with that
of one replayed recording. Even a perfect fit cannot land closer to the replay
than the p99 of one bursty sample lets it. This simulates the bench's queue
(the generator's two-Weibull mixture into 4 slots of about 60 ms, FIFO) for
many seeds and prints, per run length, the spread of the p99 and how often the
median of three runs of the TRUE process lands within 10% of one replay.

usage: benches/fit_payoff_floor.py [--seeds N] [--long-scale S ...] [--durations D ...]
Seeded: the same arguments print the same figures.
"""
import argparse
import heapq
import random
import statistics


def p99_of_run(seed, duration, long_scale, service=0.060, slots=4):
    """The p99 response time (s) of one run of the generator into the queue."""
    rng = random.Random(seed)
    t, arrivals = 0.0, []
    while t < duration:
        if rng.random() < 0.8:
            t += rng.weibullvariate(0.004, 0.9)
        else:
            t += rng.weibullvariate(long_scale, 1.2)
        arrivals.append(t)
    free = [0.0] * slots
    times = []
    for a in arrivals:
        start = max(a, heapq.heappop(free))
        # The mock's 20 ms + 8 x 5 ms, with timer slack of a few ms.
        end = start + service * rng.uniform(0.95, 1.10)
        heapq.heappush(free, end)
        times.append(end - a)
    times.sort()
    return times[int(0.99 * len(times)) - 1], len(arrivals) / duration


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--long-scale", type=float, nargs="+", default=[0.13])
    parser.add_argument("--durations", type=int, nargs="+", default=[90, 120, 240, 960])
    args = parser.parse_args()
    print("| long gap scale | run length | mean rate | median p99 | sd of p99 | P(median of 3 within 10% of one replay) | median error |")
    print("|---|---|---|---|---|---|---|")
    for scale in args.long_scale:
        for duration in args.durations:
            runs = [p99_of_run(s, duration, scale) for s in range(args.seeds)]
            p99s = [p * 1000 for p, _ in runs]
            rate = statistics.mean(r for _, r in runs)
            middle = statistics.median(p99s)
            draw = random.Random(5)
            errors = []
            for _ in range(400):
                replay = draw.choice(p99s)
                three = sorted(draw.sample(p99s, 3))[1]
                errors.append(abs(three - replay) / replay)
            within = sum(e < 0.10 for e in errors) / len(errors)
            sd = statistics.pstdev(p99s) / middle * 100
            print(f"| {scale} s | {duration} s | {rate:.1f} req/s | {middle:.0f} ms | {sd:.0f}% | {within:.2f} | {statistics.median(errors) * 100:.0f}% |")


if __name__ == "__main__":
    main()
