#!/usr/bin/env python3
"""Summarises a GPU check folder (scripts/gpu-check.sh) into summary.json and
summary.md: the GPU and versions, GEMM TFLOP/s per precision against the
GPU's datasheet peak (and the type each GEMM really ran in: an fp8 GEMM that
cuBLASLt turned down ran in BF16), each worker run's FP8 GEMMs, fallbacks and
errors, the FP8 probe through PyTorch, the tracer's overhead, events per kind
in every store, the planner's predicted step time beside the measured one,
and the check's steps that were skipped, stopped or failed.

Both files are written whatever the folder holds: a part that cannot be read
is named under "notes" and the rest still summarised.

Usage: summarize.py OUT_DIR [CLUSTERSCOPE_BINARY]
"""

import glob
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EVENT_KINDS = ["kernel", "memcpy", "memset", "collective", "p2p", "annotation", "cpu_op",
               "api_call", "step", "sync", "overhead"]
WORKER_SHAPE = {"layers": 12, "hidden": 768, "heads": 12, "seq": 1024, "vocab": 256, "micro_batch": 8}
PRECISIONS = ["fp32", "tf32", "bf16", "fp16", "fp8"]
# The check's log lines (those it writes itself, "== Ns: ...") that say a step
# did not run as planned.
LOG_SIGNS = ["skipped", "stopped after", "exit status", "interrupted", "no NVIDIA", "no nvidia-smi",
             "failed", "not importable", "past GPU_CHECK_DEADLINE", "no FP8", "ended with status"]


def lines(path):
    out = []
    if not os.path.exists(path):
        return out
    with open(path, errors="replace") as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    value = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(value, dict):
                    out.append(value)
    return out


def number(value, default=0):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def median_step_seconds(entries, skip=3):
    steps = [l["step_seconds"] for l in entries
             if l.get("event") == "step" and number(l.get("step"), -1) >= skip and "step_seconds" in l]
    return statistics.median(steps) if steps else None


def gpu_preset(device_name):
    with open(os.path.join(ROOT, "resources", "presets", "gpus.json")) as f:
        gpus = json.load(f)
    best, best_len = None, 0
    for g in gpus:
        for pattern in g.get("device_names", []):
            if device_name and pattern in device_name and len(pattern) > best_len:
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
        out = subprocess.run(args, capture_output=True, text=True, timeout=15)
        # 4: estimated, but the plan does not fit in the GPU's memory.
        if out.returncode not in (0, 4):
            return None, (out.stderr or out.stdout).strip()[:300]
        return json.loads(out.stdout)["time"]["step_seconds"], None
    except Exception as e:  # the summary must be written whatever fails
        return None, str(e)[:300]


# --- FP8: what ran in FP8, what fell back ------------------------------------

def fp8_counts(entries):
    """The fp8 lines of a worker's output (one per rank), added up; None without any."""
    found = [l for l in entries if l.get("event") == "fp8"]
    if not found:
        return None
    return {"fp8_gemms": sum(number(l.get("fp8_gemms")) for l in found),
            "bf16_fallbacks": sum(number(l.get("bf16_fallbacks")) for l in found)}


def sweep_runs(path):
    """The worker runs of a file of sweep lines, in order. A run is a rank's
    lines from its sweep_start (or its first line) to its done line:
    {"precision", "samples": gemm lines, "fp8": its fp8 line, "errors"}."""
    runs, open_runs = [], {}

    def new_run(rank):
        run = {"rank": rank, "precision": None, "samples": [], "fp8": None, "errors": []}
        runs.append(run)
        open_runs[rank] = run
        return run

    for l in lines(path):
        rank, event = l.get("rank", 0), l.get("event")
        run = open_runs.get(rank)
        if event == "sweep_start":
            if run is None or run["samples"] or run["fp8"]:
                run = new_run(rank)
            run["precision"] = l.get("precision")
            continue
        if run is None:
            run = new_run(rank)
        if event == "gemm":
            run["samples"].append(l)
            run["precision"] = run["precision"] or l.get("precision")
        elif event == "fp8":
            run["fp8"] = l
        elif event == "error":
            run["errors"].append(str(l.get("message")))
        elif event == "done":
            open_runs.pop(rank, None)
    return [r for r in runs if r["samples"] or r["fp8"] or r["errors"]]


def ran_as(sample, run):
    """The type a gemm sample's GEMMs ran in: its own "ran_as" (the worker
    writes it now), else for an fp8 sample its run's fp8 line: no FP8 GEMM
    and fallbacks, BF16; some of each, unknown (None)."""
    if isinstance(sample.get("ran_as"), str):
        return sample["ran_as"]
    precision = sample.get("precision")
    fp8 = run.get("fp8")
    if precision == "fp8" and fp8 and number(fp8.get("bf16_fallbacks")) > 0:
        return "bf16" if number(fp8.get("fp8_gemms")) == 0 else None
    return precision


def shape_of(sample):
    return f"{sample.get('m')}x{sample.get('n')}x{sample.get('k')}"


def fell_back_text(precision, samples_ran_as, what="shapes"):
    """'fp8: fell back to bf16 (N of M shapes)' and the like, or None where
    every sample ran as asked."""
    total = len(samples_ran_as)
    other = [r for r in samples_ran_as if r != precision]
    if not other:
        return None
    unknown = sum(1 for r in other if r is None)
    parts = []
    for t in sorted({r for r in other if r is not None}):
        n = sum(1 for r in other if r == t)
        verb = "fell back to" if precision == "fp8" and t == "bf16" else "ran as"
        parts.append(f"{verb} {t} ({n} of {total} {what})")
    if unknown:
        parts.append(f"some GEMMs of {unknown} of {total} {what} fell back to BF16, which ones unknown "
                     "(no \"ran_as\": an older worker)")
    return f"{precision}: " + "; ".join(parts)


def summarise_sweep(path, layer=False):
    """Per precision: the samples with what they ran in, the runs' FP8 counts
    and errors, and the fallback sentence."""
    out = {}
    for run in sweep_runs(path):
        samples = run["samples"]
        precision = run["precision"] or (samples[0].get("precision") if samples else None) or "?"
        entry = out.setdefault(precision, {"samples": [], "fp8_gemms": None, "bf16_fallbacks": None,
                                           "errors": []})
        for s in samples:
            entry["samples"].append({"n": s.get("n"), "m": s.get("m"), "k": s.get("k"),
                                     "layout": s.get("layout"), "tflops": number(s.get("tflops")),
                                     "ran_as": ran_as(s, run)})
        if run["fp8"]:
            for key in ("fp8_gemms", "bf16_fallbacks"):
                entry[key] = (entry[key] or 0) + number(run["fp8"].get(key))
        entry["errors"] += run["errors"]
    for precision, entry in out.items():
        # The layer sweep's fallbacks are its forward GEMMs' (an fp8 run's
        # backward runs in BF16 by design).
        judged = [s for s in entry["samples"] if not layer or s["layout"] in (None, "forward", "nt")]
        what = "forward shapes" if layer else "shapes"
        entry["fell_back"] = fell_back_text(precision, [s["ran_as"] for s in judged], what)
        entry["shapes"] = len(judged)
        entry["shapes_fell_back"] = sum(1 for s in judged if s["ran_as"] != precision)
    return out


def refusal_lines(log_path):
    """The engine's lines saying cuBLASLt turned an FP8 GEMM down."""
    found = []
    if os.path.exists(log_path):
        with open(log_path, errors="replace") as f:
            for line in f:
                if "not supported by cuBLASLt" in line and line.strip() not in found:
                    found.append(line.strip())
    return found


def log_notes(log_path):
    notes = []
    if os.path.exists(log_path):
        with open(log_path, errors="replace") as f:
            for line in f:
                if line.startswith("== ") and any(sign in line for sign in LOG_SIGNS):
                    notes.append(line[3:].strip())
    return notes


# --- The summary ----------------------------------------------------------------

def read_gpus(summary, out_dir, binary):
    path = os.path.join(out_dir, "gpus.csv")
    if os.path.exists(path):
        for row in open(path):
            if not row.strip():
                continue
            name, driver, memory, cc = ([x.strip() for x in row.split(",")] + ["", "", "", ""])[:4]
            summary["gpus"].append({"name": name, "driver": driver, "memory": memory, "compute_capability": cc})
    device = summary["gpus"][0]["name"] if summary["gpus"] else ""
    preset = gpu_preset(device)
    summary["preset"] = preset["name"] if preset else None
    summary["_peaks"] = preset.get("peak_tflops", {}) if preset else {}


def read_gemm(summary, out_dir, binary):
    sweep = summarise_sweep(os.path.join(out_dir, "gemm.jsonl"))
    for p in PRECISIONS + sorted(set(sweep) - set(PRECISIONS)):
        entry = sweep.get(p)
        if not entry or not entry["samples"]:
            continue
        samples = entry["samples"]
        best = max(samples, key=lambda s: s["tflops"])
        peak = summary["_peaks"].get(p)
        as_asked = [s for s in samples if s["ran_as"] == p]
        best_as_asked = max(as_asked, key=lambda s: s["tflops"]) if as_asked else None
        summary["gemm"][p] = {
            "best_tflops": best["tflops"], "at_n": best["n"], "peak_tflops": peak,
            # Against the peak of the type asked for only where the GEMMs ran in it.
            "fraction_of_peak": best_as_asked["tflops"] / peak if peak and best_as_asked else None,
            "ran_as": sorted({str(s["ran_as"]) for s in samples}),
            "shapes": entry["shapes"], "shapes_fell_back": entry["shapes_fell_back"],
            "fell_back": entry["fell_back"],
            "fp8_gemms": entry["fp8_gemms"], "bf16_fallbacks": entry["bf16_fallbacks"],
            "errors": entry["errors"],
            "samples": [{"n": s["n"], "tflops": s["tflops"], "ran_as": s["ran_as"]} for s in samples]}


def read_calibration_sweeps(summary, out_dir, binary):
    sweep = summarise_sweep(os.path.join(out_dir, "calibration-sweeps.jsonl"), layer=True)
    for p, entry in sweep.items():
        summary["calibration_sweeps"][p] = {
            "samples": len(entry["samples"]), "forward_shapes": entry["shapes"],
            "forward_shapes_fell_back": entry["shapes_fell_back"], "fell_back": entry["fell_back"],
            "fp8_gemms": entry["fp8_gemms"], "bf16_fallbacks": entry["bf16_fallbacks"],
            "errors": entry["errors"]}


def read_workers(summary, out_dir, binary):
    for path in sorted(glob.glob(os.path.join(out_dir, "worker-*.jsonl"))):
        name = os.path.basename(path)[len("worker-"):-len(".jsonl")]
        entries = lines(path)
        start = next((l for l in entries if l.get("event") == "start"), {})
        tracer = next((l for l in entries if l.get("event") == "tracer"), {})
        steps = [l for l in entries if l.get("event") == "step"]
        errors = [str(l.get("message")) for l in entries if l.get("event") == "error"]
        fp8 = fp8_counts(entries)
        summary["workers"][name] = {
            "device": start.get("device"), "parameters": start.get("parameters"),
            "precision": start.get("precision"),
            "median_step_seconds": median_step_seconds(entries),
            "first_loss": steps[0].get("loss") if steps else None,
            "last_loss": steps[-1].get("loss") if steps else None,
            "tokens_per_second": steps[-1].get("tokens_per_second") if steps else None,
            "steps": len(steps),
            "finished": any(l.get("event") == "done" for l in entries),
            "tracer": tracer.get("summary"), "dropped_records": tracer.get("dropped_records"),
            "fp8_gemms": fp8["fp8_gemms"] if fp8 else None,
            "bf16_fallbacks": fp8["bf16_fallbacks"] if fp8 else None,
            "errors": errors}
    traced = summary["workers"].get("bf16", {}).get("median_step_seconds")
    untraced = summary["workers"].get("bf16-untraced", {}).get("median_step_seconds")
    if traced and untraced:
        summary["tracer_overhead"] = {"traced_step_seconds": traced, "untraced_step_seconds": untraced,
                                      "overhead_fraction": traced / untraced - 1}


def read_stores(summary, out_dir, binary):
    for path in sorted(glob.glob(os.path.join(out_dir, "*.db"))):
        counts, meta = store_counts(path)
        summary["stores"][os.path.basename(path)] = {"events_per_kind": counts,
                                                     "status": meta.get("status"),
                                                     "tool_versions": meta.get("tool_versions_json")}
        if meta.get("tool_versions_json") and not summary["versions"]:
            summary["versions"] = json.loads(meta["tool_versions_json"])


def read_predictions(summary, out_dir, binary):
    # The planner's calls share a minute, so that the summary is written
    # well within the check's own limit on this script.
    budget_end = time.time() + 60
    for p, worker in summary["workers"].items():
        if p.endswith("untraced") or not worker.get("median_step_seconds"):
            continue
        if time.time() > budget_end:
            summary["notes"].append(f"no datasheet prediction for {p}: the planner's minute was spent")
            continue
        if not binary or not os.path.exists(binary):
            summary["predicted_vs_measured"][p] = {"measured_step_seconds": worker["median_step_seconds"],
                                                   "predicted_step_seconds": None,
                                                   "planner_error": f"no clusterscope binary at {binary}"}
            continue
        predicted, error = predicted_step(binary, worker.get("precision") or p)
        entry = {"measured_step_seconds": worker["median_step_seconds"], "predicted_step_seconds": predicted}
        if predicted:
            entry["error"] = predicted / worker["median_step_seconds"] - 1
        if error:
            entry["planner_error"] = error
        summary["predicted_vs_measured"][p] = entry


def read_calibrated_predictions(summary, out_dir, binary):
    # Each worker run against the planner calibrated on this GPU (prediction-*.json:
    # clusterscope trace stats --predict-again --json with the check's presets).
    for path in sorted(glob.glob(os.path.join(out_dir, "prediction-*.json"))):
        name = os.path.basename(path)[len("prediction-"):-len(".json")]
        try:
            with open(path) as f:
                p = json.load(f).get("prediction") or {}
        except (OSError, ValueError, AttributeError) as e:
            summary["notes"].append(f"{path}: {e}")
            continue
        if not p.get("breakdown"):
            continue
        predicted, measured = p.get("predicted_step_s"), p.get("measured_step_median_s")
        summary["calibrated_prediction"][name] = {
            "cluster": (p.get("predicted_now") or {}).get("cluster"),
            "calibrated": (p.get("predicted_now") or {}).get("calibrated"),
            "predicted_step_seconds": predicted, "measured_step_seconds": measured,
            "error": predicted / measured - 1 if predicted and measured else None,
            "largest_disagreement": p.get("largest_disagreement"),
            # The probe each rank ran before its first step against the calibrated model.
            "machine_probe": p.get("machine_probe"),
            "parts": [{"name": r.get("name"), "predicted_s": r.get("predicted_s"),
                       "measured_s": r.get("measured_s"), "error": r.get("error")} for r in p["breakdown"]]}


def read_sweeps_other(summary, out_dir, binary):
    summary["bandwidth"] = [l for l in lines(os.path.join(out_dir, "bandwidth.jsonl")) if l.get("event") == "bandwidth"]
    summary["all_reduce"] = [l for l in lines(os.path.join(out_dir, "allreduce.jsonl")) if l.get("event") == "collective"]


def read_fp8(summary, out_dir, binary):
    summary["fp8"]["refusals"] = refusal_lines(os.path.join(out_dir, "log.txt"))
    probe_path = os.path.join(out_dir, "fp8-probe.json")
    if os.path.exists(probe_path):
        probe = lines(probe_path)
        summary["fp8"]["probe"] = probe[-1] if probe else {
            "ok": False, "error": "no result: stopped or failed before it printed one (see log.txt)"}
    diagnosis = summarise_sweep(os.path.join(out_dir, "gemm-fp8-diagnosis.jsonl")).get("fp8")
    if diagnosis:
        summary["fp8"]["diagnosis_run"] = {"fp8_gemms": diagnosis["fp8_gemms"],
                                           "bf16_fallbacks": diagnosis["bf16_fallbacks"],
                                           "fell_back": diagnosis["fell_back"], "errors": diagnosis["errors"]}
    if os.path.exists(os.path.join(out_dir, "cublaslt-fp8.log")):
        summary["fp8"]["cublaslt_log"] = "cublaslt-fp8.log"


def read_log(summary, out_dir, binary):
    summary["log_notes"] = log_notes(os.path.join(out_dir, "log.txt"))


def fmt(value, spec, none="-"):
    return none if value is None else format(value, spec)


def counts_text(fp8, fallbacks):
    if fp8 is None and fallbacks is None:
        return "-", "-"
    return str(fp8 or 0), str(fallbacks or 0)


def errors_text(errors):
    if not errors:
        return "-"
    first = errors[0].replace("|", "/").replace("\n", " ")
    return f"{len(errors)}: {first[:160]}"


def render(summary):
    md = ["# GPU check", ""]
    for g in summary["gpus"]:
        md.append(f"- GPU: {g['name']}, driver {g['driver']}, {g['memory']}, compute capability {g['compute_capability']}")
    if not summary["gpus"]:
        md.append("- No GPU answered nvidia-smi: nothing was checked.")
    if summary["versions"]:
        md.append(f"- Versions: {json.dumps(summary['versions'])}")
    if summary.get("log_notes"):
        md += ["", "Steps that did not run as planned (log.txt):", ""]
        md += [f"- {n}" for n in summary["log_notes"]]
    if summary["gemm"]:
        md += ["", "| precision | ran as | best GEMM TFLOP/s | at n | peak | fraction |", "|---|---|---|---|---|---|"]
        for p, g in summary["gemm"].items():
            ran = ", ".join(r if r != "None" else "unknown" for r in g["ran_as"])
            md.append(f"| {p} | {ran} | {g['best_tflops']:.1f} | {g['at_n']} | {g['peak_tflops']} | "
                      f"{fmt(g['fraction_of_peak'], '.2f')} |")
        for p, g in summary["gemm"].items():
            if g["fell_back"]:
                md.append(f"\nGEMM sweep, {g['fell_back']}: its figures are not {p}'s "
                          f"(the run's fp8 line: {g['fp8_gemms']} FP8 GEMMs, {g['bf16_fallbacks']} BF16 fallbacks).")
    fp8 = summary["fp8"]
    cal = summary["calibration_sweeps"]
    worker_fp8 = {n: w for n, w in summary["workers"].items() if w.get("fp8_gemms") is not None}
    if fp8.get("refusals") or fp8.get("probe") or worker_fp8 or "fp8" in summary["gemm"] or "fp8" in cal:
        md += ["", "## FP8", ""]
        for name, w in worker_fp8.items():
            md.append(f"- Worker run {name}: {w['fp8_gemms']} FP8 GEMMs, {w['bf16_fallbacks']} fell back to BF16")
        if "fp8" in summary["gemm"]:
            g = summary["gemm"]["fp8"]
            md.append(f"- GEMM sweep: {g['fell_back'] or 'fp8: every shape ran in fp8'}")
        if "fp8" in cal:
            c = cal["fp8"]
            md.append(f"- Calibration's layer GEMM sweep: {c['fell_back'] or 'fp8: every forward shape ran in fp8'} "
                      "(its backward GEMMs run in BF16 by design; calibration files each sample under what it ran in)")
        if fp8.get("diagnosis_run"):
            d = fp8["diagnosis_run"]
            log = f", cuBLASLt's log in {fp8['cublaslt_log']}" if fp8.get("cublaslt_log") else ""
            md.append(f"- Diagnosis run (one short FP8 GEMM{log}): {d['fp8_gemms']} FP8 GEMMs, "
                      f"{d['bf16_fallbacks']} BF16 fallbacks")
        for line in fp8.get("refusals", []):
            md.append(f"- {line}")
        probe = fp8.get("probe")
        if probe:
            if probe.get("shapes"):
                md.append(f"- PyTorch probe (torch._scaled_mm, E4M3, per-tensor scales, BF16 out; PyTorch "
                          f"{probe.get('torch')}, CUDA {probe.get('torch_cuda')}, "
                          f"{probe.get('cublaslt') or 'no libcublasLt mapped'}):")
                for s in probe["shapes"]:
                    shape = f"{s['m']}x{s['n']}x{s['k']}"
                    if s.get("ok"):
                        md.append(f"  - {shape}: {s['tflops']:.1f} TFLOP/s in FP8 against {fmt(s.get('bf16_tflops'), '.1f')} "
                                  f"in BF16, relative error {fmt(s.get('relative_error'), '.2g')}")
                    else:
                        md.append(f"  - {shape}: failed: {s.get('error')}")
            if probe.get("error"):
                md.append(f"- PyTorch probe failed: {probe['error']}")
    if summary["workers"]:
        md += ["", "| worker run | median step (s) | first loss | last loss | predicted step (s) | FP8 GEMMs | "
               "BF16 fallbacks | errors | tracer |", "|---|---|---|---|---|---|---|---|---|"]
    for name, w in summary["workers"].items():
        pred = summary["predicted_vs_measured"].get(name, {}).get("predicted_step_seconds")
        fp8_n, fallbacks = counts_text(w["fp8_gemms"], w["bf16_fallbacks"])
        md.append(f"| {name} | {fmt(w['median_step_seconds'], '.4f')} | {fmt(w['first_loss'], '.3f')} | "
                  f"{fmt(w['last_loss'], '.3f')} | {fmt(pred, '.4f')} | {fp8_n} | {fallbacks} | "
                  f"{errors_text(w['errors'])} | {w['tracer'] or '-'} |")
    sweep_errors = [(f"GEMM sweep {p}", g["errors"]) for p, g in summary["gemm"].items() if g["errors"]]
    sweep_errors += [(f"layer sweep {p}", c["errors"]) for p, c in cal.items() if c["errors"]]
    for what, errors in sweep_errors:
        md.append(f"\n{what}: errors {errors_text(errors)}")
    if summary["calibrated_prediction"]:
        md += ["", "Predicted (trace stats --predict-again, on the presets this check calibrated) against "
               "measured, the median step:", "",
               "| worker run | predicted on | predicted step (s) | measured step (s) | error | largest disagreement |",
               "|---|---|---|---|---|---|"]
        for name, c in summary["calibrated_prediction"].items():
            err = f"{c['error'] * 100:+.1f} %" if c["error"] is not None else "-"
            on = f"{c['cluster']}{' (calibrated)' if c['calibrated'] else ' (datasheet)'}"
            md.append(f"| {name} | {on} | {fmt(c['predicted_step_seconds'], '.4f')} | "
                      f"{fmt(c['measured_step_seconds'], '.4f')} | {err} | {c['largest_disagreement']} |")
        for name, c in summary["calibrated_prediction"].items():
            probe = c.get("machine_probe") or {}
            if isinstance(probe, dict) and probe.get("text"):
                md.append(f"- {name}, machine probe: {probe['text']}")
        md += ["", "| worker run | part | predicted (ms) | measured (ms) | error |", "|---|---|---|---|---|"]
        for name, c in summary["calibrated_prediction"].items():
            for r in c["parts"]:
                if not r["predicted_s"] and not r["measured_s"]:
                    continue
                err = f"{r['error'] * 100:+.1f} %" if r["error"] is not None else "-"
                measured = f"{r['measured_s'] * 1e3:.2f}" if r["measured_s"] is not None else "-"
                predicted = f"{r['predicted_s'] * 1e3:.2f}" if r["predicted_s"] is not None else "-"
                md.append(f"| {name} | {r['name']} | {predicted} | {measured} | {err} |")
    if "tracer_overhead" in summary:
        md.append(f"\nTracer overhead (bf16 step, traced vs untraced): {summary['tracer_overhead']['overhead_fraction'] * 100:.1f} %")
    if summary["stores"]:
        md += ["", "| store | events per kind |", "|---|---|"]
        for name, s in summary["stores"].items():
            md.append(f"| {name} | {json.dumps(s['events_per_kind'])} |")
    if summary["notes"]:
        md += ["", "Notes:", ""] + [f"- {n}" for n in summary["notes"]]
    return md


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = sys.argv[1]
    binary = sys.argv[2] if len(sys.argv) > 2 else ""
    summary = {"gpus": [], "versions": {}, "gemm": {}, "calibration_sweeps": {}, "workers": {}, "fp8": {},
               "stores": {}, "predicted_vs_measured": {}, "calibrated_prediction": {}, "log_notes": [],
               "notes": [], "_peaks": {}}
    for part in (read_gpus, read_gemm, read_calibration_sweeps, read_workers, read_stores, read_predictions,
                 read_calibrated_predictions, read_sweeps_other, read_fp8, read_log):
        try:
            part(summary, out_dir, binary)
        except Exception as e:  # the summary must be written whatever fails
            summary["notes"].append(f"{part.__name__}: {type(e).__name__}: {e}")
    summary.pop("_peaks", None)
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2, default=str)
    try:
        md = render(summary)
    except Exception as e:
        md = ["# GPU check", "", f"The summary's text failed ({type(e).__name__}: {e}); summary.json has it all."]
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
