#!/usr/bin/env python3
"""Summarises a GPU check folder (scripts/gpu-check.sh) into summary.json and
summary.md: the GPU and versions, GEMM TFLOP/s per precision against the
GPU's datasheet peak, the tracer's overhead, events per kind in every store,
and the planner's predicted step time beside the measured one.

Usage: summarize.py OUT_DIR CLUSTERSCOPE_BINARY
"""

import glob
import json
import os
import sqlite3
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EVENT_KINDS = ["kernel", "memcpy", "memset", "collective", "p2p", "annotation", "cpu_op",
               "api_call", "step", "sync", "overhead"]
WORKER_SHAPE = {"layers": 12, "hidden": 768, "heads": 12, "seq": 1024, "vocab": 256, "micro_batch": 8}


def lines(path):
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return out


def median_step_seconds(path, skip=3):
    steps = [l["step_seconds"] for l in lines(path) if l.get("event") == "step" and l["step"] >= skip]
    return statistics.median(steps) if steps else None


def gpu_preset(device_name):
    with open(os.path.join(ROOT, "resources", "presets", "gpus.json")) as f:
        gpus = json.load(f)
    best, best_len = None, 0
    for g in gpus:
        for pattern in g.get("device_names", []):
            if pattern in device_name and len(pattern) > best_len:
                best, best_len = g, len(pattern)
    return best


def store_counts(path):
    counts = {}
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        for kind, n in db.execute("SELECT kind, COUNT(*) FROM events GROUP BY kind"):
            counts[EVENT_KINDS[kind] if kind < len(EVENT_KINDS) else str(kind)] = n
        meta = dict(db.execute("SELECT key, value FROM meta"))
        db.close()
        return counts, meta
    except sqlite3.Error as e:
        return {"error": str(e)}, {}


def predicted_step(binary, precision):
    s = WORKER_SHAPE
    args = [binary, "plan", "--cluster", "this-machine", "--layers", str(s["layers"]),
            "--hidden", str(s["hidden"]), "--heads", str(s["heads"]), "--seq", str(s["seq"]),
            "--vocab", str(s["vocab"]), "--micro-batch", str(s["micro_batch"]),
            "--global-batch", str(s["micro_batch"]), "--precision", precision, "--json"]
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=60)
        # 4: estimated, but the plan does not fit in the GPU's memory.
        if out.returncode not in (0, 4):
            return None, (out.stderr or out.stdout).strip()[:300]
        return json.loads(out.stdout)["time"]["step_seconds"], None
    except Exception as e:  # the summary must be written whatever fails
        return None, str(e)


def main():
    out_dir, binary = sys.argv[1], sys.argv[2]
    summary = {"gpus": [], "versions": {}, "gemm": {}, "workers": {}, "stores": {}, "notes": []}
    if os.path.exists(os.path.join(out_dir, "gpus.csv")):
        for row in open(os.path.join(out_dir, "gpus.csv")):
            name, driver, memory, cc = [x.strip() for x in row.split(",")]
            summary["gpus"].append({"name": name, "driver": driver, "memory": memory, "compute_capability": cc})
    device = summary["gpus"][0]["name"] if summary["gpus"] else ""
    preset = gpu_preset(device)
    summary["preset"] = preset["name"] if preset else None

    for p in ["fp32", "tf32", "bf16", "fp16", "fp8"]:
        samples = [l for l in lines(os.path.join(out_dir, "gemm.jsonl")) if l.get("precision") == p]
        if not samples:
            continue
        best = max(samples, key=lambda l: l["tflops"])
        peak_key = "fp32" if p == "fp32" else p
        peak = preset["peak_tflops"].get(peak_key) if preset else None
        summary["gemm"][p] = {
            "best_tflops": best["tflops"], "at_n": best["n"],
            "peak_tflops": peak, "fraction_of_peak": best["tflops"] / peak if peak else None,
            "samples": [{"n": l["n"], "tflops": l["tflops"]} for l in samples]}

    for path in sorted(glob.glob(os.path.join(out_dir, "worker-*.jsonl"))):
        name = os.path.basename(path)[len("worker-"):-len(".jsonl")]
        entries = lines(path)
        start = next((l for l in entries if l.get("event") == "start"), {})
        tracer = next((l for l in entries if l.get("event") == "tracer"), {})
        steps = [l for l in entries if l.get("event") == "step"]
        errors = [l["message"] for l in entries if l.get("event") == "error"]
        summary["workers"][name] = {
            "device": start.get("device"), "parameters": start.get("parameters"),
            "median_step_seconds": median_step_seconds(path),
            "first_loss": steps[0]["loss"] if steps else None,
            "last_loss": steps[-1]["loss"] if steps else None,
            "tokens_per_second": steps[-1]["tokens_per_second"] if steps else None,
            "tracer": tracer.get("summary"), "dropped_records": tracer.get("dropped_records"),
            "errors": errors}

    traced = summary["workers"].get("bf16", {}).get("median_step_seconds")
    untraced = summary["workers"].get("bf16-untraced", {}).get("median_step_seconds")
    if traced and untraced:
        summary["tracer_overhead"] = {"traced_step_seconds": traced, "untraced_step_seconds": untraced,
                                      "overhead_fraction": traced / untraced - 1}

    for path in sorted(glob.glob(os.path.join(out_dir, "*.db"))):
        counts, meta = store_counts(path)
        summary["stores"][os.path.basename(path)] = {"events_per_kind": counts,
                                                     "status": meta.get("status"),
                                                     "tool_versions": meta.get("tool_versions_json")}
        if meta.get("tool_versions_json") and not summary["versions"]:
            summary["versions"] = json.loads(meta["tool_versions_json"])

    summary["predicted_vs_measured"] = {}
    for p, worker in summary["workers"].items():
        if p.endswith("untraced") or not worker.get("median_step_seconds"):
            continue
        predicted, error = predicted_step(binary, p)
        entry = {"measured_step_seconds": worker["median_step_seconds"], "predicted_step_seconds": predicted}
        if predicted:
            entry["error"] = predicted / worker["median_step_seconds"] - 1
        if error:
            entry["planner_error"] = error
        summary["predicted_vs_measured"][p] = entry

    # Each worker run against the planner calibrated on this GPU (prediction-*.json:
    # clusterscope trace stats --predict-again --json with the check's presets).
    summary["calibrated_prediction"] = {}
    for path in sorted(glob.glob(os.path.join(out_dir, "prediction-*.json"))):
        name = os.path.basename(path)[len("prediction-"):-len(".json")]
        try:
            p = json.load(open(path)).get("prediction") or {}
        except (OSError, ValueError) as e:
            summary["notes"].append(f"{path}: {e}")
            continue
        if not p.get("breakdown"):
            continue
        predicted, measured = p["predicted_step_s"], p["measured_step_median_s"]
        summary["calibrated_prediction"][name] = {
            "cluster": p.get("predicted_now", {}).get("cluster"),
            "calibrated": p.get("predicted_now", {}).get("calibrated"),
            "predicted_step_seconds": predicted, "measured_step_seconds": measured,
            "error": predicted / measured - 1 if measured else None,
            "largest_disagreement": p.get("largest_disagreement"),
            # The probe each rank ran before its first step against the calibrated model.
            "machine_probe": p.get("machine_probe"),
            "parts": [{"name": r["name"], "predicted_s": r["predicted_s"], "measured_s": r["measured_s"],
                       "error": r["error"]} for r in p["breakdown"]]}

    summary["bandwidth"] = [l for l in lines(os.path.join(out_dir, "bandwidth.jsonl")) if l.get("event") == "bandwidth"]
    summary["all_reduce"] = [l for l in lines(os.path.join(out_dir, "allreduce.jsonl")) if l.get("event") == "collective"]

    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)

    md = ["# GPU check", ""]
    for g in summary["gpus"]:
        md.append(f"- GPU: {g['name']}, driver {g['driver']}, {g['memory']}, compute capability {g['compute_capability']}")
    if summary["versions"]:
        md.append(f"- Versions: {json.dumps(summary['versions'])}")
    md += ["", "| precision | best GEMM TFLOP/s | at n | peak | fraction |", "|---|---|---|---|---|"]
    for p, g in summary["gemm"].items():
        frac = f"{g['fraction_of_peak']:.2f}" if g["fraction_of_peak"] else "-"
        md.append(f"| {p} | {g['best_tflops']:.1f} | {g['at_n']} | {g['peak_tflops']} | {frac} |")
    md += ["", "| worker run | median step (s) | first loss | last loss | predicted step (s) | tracer |",
           "|---|---|---|---|---|---|"]
    for name, w in summary["workers"].items():
        pred = summary["predicted_vs_measured"].get(name, {}).get("predicted_step_seconds")
        step = f"{w['median_step_seconds']:.4f}" if w["median_step_seconds"] else "-"
        first = f"{w['first_loss']:.3f}" if w["first_loss"] is not None else "-"
        last = f"{w['last_loss']:.3f}" if w["last_loss"] is not None else "-"
        md.append(f"| {name} | {step} | {first} | {last} | "
                  f"{pred if pred is None else f'{pred:.4f}'} | {w['tracer'] or '-'} |")
    if summary["calibrated_prediction"]:
        md += ["", "Predicted (trace stats --predict-again, on the presets this check calibrated) against "
               "measured, the median step:", "",
               "| worker run | predicted on | predicted step (s) | measured step (s) | error | largest disagreement |",
               "|---|---|---|---|---|---|"]
        for name, c in summary["calibrated_prediction"].items():
            err = f"{c['error'] * 100:+.1f} %" if c["error"] is not None else "-"
            on = f"{c['cluster']}{' (calibrated)' if c['calibrated'] else ' (datasheet)'}"
            md.append(f"| {name} | {on} | {c['predicted_step_seconds']:.4f} | {c['measured_step_seconds']:.4f} | "
                      f"{err} | {c['largest_disagreement']} |")
        for name, c in summary["calibrated_prediction"].items():
            probe = c.get("machine_probe") or {}
            if probe.get("text"):
                md.append(f"- {name}, machine probe: {probe['text']}")
        md += ["", "| worker run | part | predicted (ms) | measured (ms) | error |", "|---|---|---|---|---|"]
        for name, c in summary["calibrated_prediction"].items():
            for r in c["parts"]:
                if not r["predicted_s"] and not r["measured_s"]:
                    continue
                err = f"{r['error'] * 100:+.1f} %" if r["error"] is not None else "-"
                measured = f"{r['measured_s'] * 1e3:.2f}" if r["measured_s"] is not None else "-"
                md.append(f"| {name} | {r['name']} | {r['predicted_s'] * 1e3:.2f} | {measured} | {err} |")
    if "tracer_overhead" in summary:
        md.append(f"\nTracer overhead (bf16 step, traced vs untraced): {summary['tracer_overhead']['overhead_fraction'] * 100:.1f} %")
    md += ["", "| store | events per kind |", "|---|---|"]
    for name, s in summary["stores"].items():
        md.append(f"| {name} | {json.dumps(s['events_per_kind'])} |")
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
