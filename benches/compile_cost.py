#!/usr/bin/env python3
"""Compile cost of long expressions: builds one expression of N operations per N given
(default 50 100 200) in a scratch crate that uses this checkout's `axes`, and prints the
build time and peak memory of that crate alone (its dependencies are built first, untimed).

Run by hand from the repository root: `python3 benches/compile_cost.py 50 100 200`.
Add `--limit K` to build with `#![recursion_limit = "K"]` instead of the default (128).
"""
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRATCH = os.path.join(ROOT, "target", "compile-cost")
# The operations cycled through, `{}` being the expression so far.
STEPS = ["({} + &y)", "({} * 0.5)", "{}.tanh()", "({} - &x)", "{}.abs()"]


def expression(n):
    expr = "&x"
    for i in range(n):
        expr = STEPS[i % len(STEPS)].format(expr)
    return expr


def write_crate(n, limit):
    src = os.path.join(SCRATCH, "src")
    os.makedirs(src, exist_ok=True)
    with open(os.path.join(SCRATCH, "Cargo.toml"), "w") as f:
        f.write(
            '[package]\nname = "compile-cost"\nversion = "0.0.0"\nedition = "2024"\n\n'
            "[dependencies]\n"
            f'axes = {{ path = "{ROOT}", default-features = false }}\n\n[workspace]\n'
        )
    shutil.copy(os.path.join(ROOT, "Cargo.lock"), os.path.join(SCRATCH, "Cargo.lock"))
    header = f'#![recursion_limit = "{limit}"]\n' if limit else ""
    with open(os.path.join(src, "main.rs"), "w") as f:
        f.write(
            header
            + "use axes::prelude::*;\n"
            "#[derive(Axis)] struct Batch;\n#[derive(Axis)] struct Hidden;\n"
            "fn main() -> axes::Result<()> {\n"
            "    let x = Tensor::<f32, (Batch, Hidden)>::ones((Batch.len(2), Hidden.len(3)))?;\n"
            "    let y = Tensor::<f32, (Hidden,)>::ones(Hidden.len(3))?;\n"
            f"    let z = {expression(n)}.eval()?;\n"
            '    println!("{:?}", z.to_vec());\n'
            "    Ok(())\n}\n"
        )


def build(env):
    cmd = ["/usr/bin/time", "-f", "%e %M", "cargo", "build", "--quiet", "--bin", "compile-cost"]
    run = subprocess.run(cmd, cwd=SCRATCH, env=env, capture_output=True, text=True)
    *messages, usage = run.stderr.strip().splitlines() or [""]
    return run.returncode, usage, messages


def main():
    args = sys.argv[1:]
    limit = None
    if "--limit" in args:
        i = args.index("--limit")
        limit = args[i + 1]
        del args[i : i + 2]
    sizes = [int(a) for a in args] or [50, 100, 200]
    env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(SCRATCH, "target"))
    write_crate(1, limit)
    code, _, messages = build(env)  # dependencies, untimed
    if code != 0:
        sys.exit("\n".join(messages))
    print(f"| operations | build (s) | peak memory (MB) | result |")
    print(f"|---|---|---|---|")
    for n in sizes:
        write_crate(n, limit)
        start = time.time()
        code, usage, messages = build(env)
        seconds, kb = usage.split() if code == 0 else (f"{time.time() - start:.1f}", "0")
        errors = [m for m in messages if m.startswith("error")]
        result = "built" if code == 0 else (errors[0] if errors else "failed")
        print(f"| {n} | {float(seconds):.1f} | {int(kb) // 1024} | {result[:90]} |")


if __name__ == "__main__":
    main()
