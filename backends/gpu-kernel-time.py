"""The summed kernel time of one training step, by Nsight Compute (part of the GPU check that
`backends/carry-to-gpu.sh` builds, where it is `kernel_time.py`).

Runs COMMAND twice under `ncu`, with `--steps 2` and with `--steps 4` appended, each kernel
timed alone (`gpu__time_duration.sum`, at the clocks the GPU runs at), and prints the sum of
each run's kernel times and their difference over two: the kernels of one later step (a
replay, where COMMAND records). The first step, the validation and the uploads are the same
in both runs, so they cancel.

    python3 kernel_time.py [--out DIR] [--ncu PATH] -- COMMAND...
"""

import argparse
import csv
import os
import shutil
import subprocess
import sys

# Nanoseconds in each unit ncu may print a duration in.
NANOSECONDS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9}


def kernel_times(ncu, command, steps, report):
    """Each kernel's name and nanoseconds in one run of `command --steps STEPS`."""
    subprocess.run(
        [ncu, "--csv", "--print-units", "base", "--clock-control", "none",
         "--metrics", "gpu__time_duration.sum", "--log-file", report,
         *command, "--steps", str(steps)],
        check=True,
    )
    with open(report, newline="") as f:
        # ncu's own lines (==PROF== …) come before the table.
        lines = [line for line in f if line.startswith('"')]
    rows = csv.DictReader(lines)
    return [
        (row["Kernel Name"], float(row["Metric Value"].replace(",", "")) * NANOSECONDS[row["Metric Unit"]])
        for row in rows
        if row.get("Metric Name") == "gpu__time_duration.sum"
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=".", help="where the two reports are written")
    parser.add_argument("--ncu", default=shutil.which("ncu") or "/usr/local/cuda/bin/ncu")
    parser.add_argument("command", nargs="+")
    args = parser.parse_args()
    if not os.path.exists(args.ncu):
        sys.exit(f"Nsight Compute not found ({args.ncu}): no kernel times")
    os.makedirs(args.out, exist_ok=True)
    runs = {}
    for steps in (2, 4):
        report = os.path.join(args.out, f"ncu-{steps}-steps.csv")
        runs[steps] = kernel_times(args.ncu, args.command, steps, report)
        total = sum(ns for _, ns in runs[steps])
        print(f"{steps} steps: {len(runs[steps])} kernels, {total / 1e6:.3f} ms of kernel time")
    kernels = (len(runs[4]) - len(runs[2])) / 2
    step_ms = (sum(ns for _, ns in runs[4]) - sum(ns for _, ns in runs[2])) / 2 / 1e6
    print(f"one later step: {kernels:.1f} kernels, {step_ms:.3f} ms of kernel time summed")
    # The longest kernels of the two later steps, by name.
    extra = {}
    for name, ns in runs[4]:
        extra[name] = extra.get(name, 0.0) + ns
    for name, ns in runs[2]:
        extra[name] = extra.get(name, 0.0) - ns
    print("the kernels that take most of a step (ms a step):")
    for name, ns in sorted(extra.items(), key=lambda kv: -kv[1])[:12]:
        print(f"  {ns / 2 / 1e6:8.3f}  {name[:100]}")


if __name__ == "__main__":
    main()
