#!/usr/bin/env python3
"""Reference numbers for tst_trace_import: the Holistic Trace Analysis
breakdown of the real Kineto traces in tests/data/validation/kineto/,
computed straight from the JSON, independently of ClusterScope's code.

    python3 tests/core/kineto_reference.py tests/data/validation/kineto/*.json.gz

Definitions (HTA): GPU events are X events of cat kernel, gpu_memcpy and
gpu_memset. A kernel whose name starts with "nccl" is communication,
copies and sets are memory, other kernels are compute. span = last end -
first start; busy = union of all; idle = span - busy; overlap = time where
a communication and a compute event both run. An idle gap is "host wait"
when the next GPU event's launch (the cuda_runtime / cuda_driver event with
the same args.correlation) started after the gap began, "kernel wait" when
it is shorter than 30 ns, else "other". Times are converted from their
decimal text to integer nanoseconds exactly.

Idle time per stream (HTA's get_idle_time_breakdown): each stream's GPU
events by start; the gap before each (its start less the latest end before
it on the stream) is host wait, kernel wait or other as above, with the
stream's previous end for the gap's beginning. Its queue length (HTA's
get_queue_length_time_series): +1 at each launching call's start, -1 at its
GPU event's start; the maximum, and the time average over the stream's span.

Launch statistics (HTA's get_cuda_kernel_launch_stats): each kernel, and
each copy or set whose call is asynchronous (its name has "Async", as
cudaMemcpyAsync), paired with the runtime or driver call of its correlation
id (the earliest starting); the call's duration, the launch delay (the GPU event's start less
the call's end), short kernels (GPU duration under the call's), calls over
50 us and delays over 100 us; medians, and 95th percentiles by nearest rank.
"""

import math

import decimal
import gzip
import json
import sys


def ns(value):
    return int((decimal.Decimal(value) * 1000).to_integral_value(decimal.ROUND_HALF_UP))


def union(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def length(intervals):
    return sum(e - s for s, e in intervals)


def intersect(a, b):
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append([s, e])
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def analyse(path):
    with gzip.open(path, "rt") as f:
        trace = json.load(f, parse_float=decimal.Decimal)
    gpu, launches, calls = [], {}, {}
    for ev in trace["traceEvents"]:
        if ev.get("ph") != "X":
            continue
        cat = ev.get("cat")
        start = ns(ev["ts"])
        end = start + max(0, ns(ev.get("dur", 0)))
        args = ev.get("args", {})
        if cat in ("cuda_runtime", "cuda_driver") and "correlation" in args:
            c = args["correlation"]
            launches[c] = min(launches.get(c, start), start)
            if c not in calls or start < calls[c][0]:
                calls[c] = (start, end, "Async" in ev["name"])
        if cat == "kernel":
            cls = "comm" if ev["name"].startswith("nccl") else "compute"
        elif cat in ("gpu_memcpy", "gpu_memset"):
            cls = "memory"
        else:
            continue
        gpu.append((start, end, cls, args.get("correlation", 0), args.get("stream", -1)))

    busy = union([(g[0], g[1]) for g in gpu])
    compute = union([(g[0], g[1]) for g in gpu if g[2] == "compute"])
    comm = union([(g[0], g[1]) for g in gpu if g[2] == "comm"])
    memory = union([(g[0], g[1]) for g in gpu if g[2] == "memory"])
    overlap = intersect(compute, comm)
    span = busy[-1][1] - busy[0][0]

    # Idle gaps, each decided by the first GPU event that ends it (the one
    # starting there that ends last, as the store orders them).
    by_start = sorted(gpu, key=lambda g: (g[0], -g[1]))
    host = kernel = other = 0
    k = 0
    ties = 0
    for (s0, e0), (s1, e1) in zip(busy, busy[1:]):
        while by_start[k][0] < s1:
            k += 1
        gap = s1 - e0
        same_start = [g for g in by_start[k:k + 8] if g[0] == s1]
        ties += len(same_start) > 1
        corr = by_start[k][3]
        if corr and corr in launches and launches[corr] > e0:
            host += gap
        elif gap < 30:
            kernel += gap
        else:
            other += gap

    streams = {}
    for stream in sorted({g[4] for g in gpu}):
        events = sorted((g for g in gpu if g[4] == stream), key=lambda g: (g[0], -g[1]))
        idle = {"host_wait": 0, "kernel_wait": 0, "other": 0}
        last_end = events[0][1]
        for s, e, _, corr, _ in events[1:]:
            gap = s - last_end
            if gap > 0:
                if corr and corr in launches and launches[corr] > last_end:
                    idle["host_wait"] += gap
                elif gap < 30:
                    idle["kernel_wait"] += gap
                else:
                    idle["other"] += gap
            last_end = max(last_end, e)
        # HTA's queue length: +1 at each launching call's start, -1 at its
        # operation's start (a start before a call at the same time).
        changes = sorted(
            [(launches[g[3]], 1) for g in events if g[3] and g[3] in launches]
            + [(g[0], -1) for g in events if g[3] and g[3] in launches]
        )
        queue = queue_max = 0
        area = 0
        first, prev = events[0][0], None
        for t, d in changes:
            if prev is not None and t > first:
                area += queue * (t - max(prev, first))
            queue += d
            queue_max = max(queue_max, queue)
            prev = t
        streams[stream] = dict(
            events=len(events),
            span=last_end - events[0][0],
            busy=length(union([(g[0], g[1]) for g in events])),
            launched=sum(1 for g in events if g[3] and g[3] in launches),
            queue_max=queue_max,
            queue_mean=area / (last_end - first) if last_end > first else 0,
            **idle,
        )

    call_ns, delays, short = [], [], 0
    for s, e, cls, corr, _ in gpu:
        if corr and corr in calls and (cls != "memory" or calls[corr][2]):
            cs, ce, _ = calls[corr]
            call_ns.append(ce - cs)
            delays.append(s - ce)
            short += (e - s) < (ce - cs)

    def median(v):
        v = sorted(v)
        n = len(v)
        return 0 if n == 0 else (v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2)

    def p95(v):
        v = sorted(v)
        return 0 if not v else v[min(max(math.ceil(0.95 * len(v)), 1), len(v)) - 1]

    return {
        "launches": len(call_ns),
        "short_kernels": short,
        "runtime_outliers": sum(c > 50000 for c in call_ns),
        "delay_outliers": sum(d > 100000 for d in delays),
        "call_median": median(call_ns),
        "call_p95": p95(call_ns),
        "delay_median": median(delays),
        "delay_p95": p95(delays),
        "delay_max": max(delays) if delays else 0,
        "events": len(gpu),
        "span": span,
        "busy": length(busy),
        "compute": length(compute),
        "communication": length(comm),
        "overlap": length(overlap),
        "memory": length(memory),
        "exposed_memory": length(memory) - length(intersect(memory, union(compute + comm))),
        "idle": span - length(busy),
        "host_wait": host,
        "kernel_wait": kernel,
        "idle_other": other,
        "gaps_with_tied_starts": ties,
        "streams": streams,
    }


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(path, json.dumps(analyse(path)))
