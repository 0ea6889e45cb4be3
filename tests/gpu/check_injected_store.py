#!/usr/bin/env python3
"""Checks the per-process stores that the TEST build of the injection library
(with tests/gpu/jsonl_trace_writer.cpp: JSON lines instead of SQLite) wrote in
a directory, as scripts/gpu/cupti_device_check.sh runs it.

    check_injected_store.py DIR torch|cancelled [SUMMARY.json]

Prints one "check NAME: ok|FAIL ..." line per check; exit status 1 if any failed.
"""

import glob
import json
import os
import sys

KIND = {0: "kernel", 1: "memcpy", 2: "memset", 3: "collective", 4: "p2p", 5: "annotation",
        6: "cpu_op", 7: "api_call", 8: "step", 9: "sync", 10: "overhead"}
GPU_STREAM = 0

failures = 0
results = {}


def check(name, ok, detail=""):
    global failures
    print(f"check {name}: {'ok' if ok else 'FAIL'}{' -- ' + detail if detail else ''}")
    results[name] = {"ok": bool(ok), "detail": detail}
    if not ok:
        failures += 1


def load(path):
    store = {"lanes": {}, "strings": {0: ""}, "events": [], "counters": [], "meta": {}, "ranks": [],
             "closed": None}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            t = r["t"]
            if t == "lane":
                store["lanes"][r["id"]] = r
            elif t == "string":
                store["strings"][r["id"]] = r["text"]
            elif t == "event":
                store["events"].append(r)
            elif t == "counter":
                store["counters"].append(r)
            elif t == "meta":
                store["meta"][r["key"]] = r["value"]
            elif t == "rank":
                store["ranks"].append(r)
            elif t == "close":
                store["closed"] = r["status"]
    return store


def main():
    directory, mode = sys.argv[1], sys.argv[2]
    paths = sorted(glob.glob(os.path.join(directory, "*.db")))
    check("one store per process", len(paths) == 1, ", ".join(os.path.basename(p) for p in paths))
    if not paths:
        return 1
    s = load(paths[0])
    name = lambda e: s["strings"].get(e["name"], "?")
    lane = lambda e: s["lanes"][e["lane"]]
    kinds = {}
    for e in s["events"]:
        kinds[KIND.get(e["kind"], str(e["kind"]))] = kinds.get(KIND.get(e["kind"], str(e["kind"])), 0) + 1
    print("events by kind:", json.dumps(kinds, sort_keys=True))
    expected_close = "complete" if mode == "torch" else "cancelled"
    check("store closed", s["closed"] == expected_close, f"closed as {s['closed']!r}")
    check("no records dropped", s["meta"].get("tracer.dropped_records") == "0",
          f"tracer.dropped_records={s['meta'].get('tracer.dropped_records')}, "
          f"warnings={s['meta'].get('tracer.warnings')}")
    check("rank row", len(s["ranks"]) == 1 and "(GPU " in s["ranks"][0]["device"],
          json.dumps(s["ranks"]))
    kernels = [e for e in s["events"] if e["kind"] in (0, 3, 4)]
    check("kernels", len(kernels) >= (20 if mode == "torch" else 1), f"{len(kernels)} GPU kernels")
    if mode == "torch":
        check("launcher", s["meta"].get("process.launcher") == "torchrun" and
              s["meta"].get("process.rank") == "0",
              f"{s['meta'].get('process.launcher')} rank {s['meta'].get('process.rank')}")
        calls = {e["corr"] for e in s["events"] if e["kind"] == 7}
        linked = sum(1 for e in kernels if e["corr"] in calls)
        check("kernels linked to launches", linked == len(kernels), f"{linked} of {len(kernels)}")
        steps = [e for e in s["events"] if e["kind"] == 5 and name(e).startswith("step ")]
        check("NVTX step ranges", len(steps) >= 10, f"{len(steps)} ranges named 'step N'")
        nccl = [e for e in s["events"] if e["kind"] == 5 and name(e).startswith("ncclAllReduce")]
        sized = [e for e in nccl if e["bytes"] == 2 * 1024 * 1024 and e["collective"] == 1]
        check("NCCL ranges from PyTorch, sized", len(sized) >= 1,
              f"{len(nccl)} ncclAllReduce ranges, {len(sized)} of 2 MiB; e.g. "
              f"{[name(e) + ' ' + str(e['bytes']) for e in nccl[:3]]}")
        check("GPU memory counter", len(s["counters"]) >= 1, f"{len(s['counters'])} samples")
        overlaps = 0
        by_lane = {}
        for e in s["events"]:
            if lane(e)["kind"] == GPU_STREAM:
                by_lane.setdefault(e["lane"], []).append(e)
        for events in by_lane.values():
            events.sort(key=lambda e: e["start"])
            overlaps += sum(1 for a, b in zip(events, events[1:]) if b["start"] < a["end"])
        check("stream work does not overlap", overlaps == 0, f"{overlaps} overlaps on {len(by_lane)} streams")
    summary = {"mode": mode, "store": os.path.basename(paths[0]), "events_by_kind": kinds,
               "checks": results, "failures": failures, "meta": s["meta"]}
    if len(sys.argv) > 3:
        with open(sys.argv[3], "w") as f:
            json.dump(summary, f, indent=2)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
