"""Run one translator training in a fresh process on one thread (shared by the sweep scripts).

A fresh process per run, so that ``ATEN_CPU_CAPABILITY`` takes effect and no run's threads,
caches or subnormal setting leak into the next. The child prints one JSON line last.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any


def run_child(code: str, payload: Any, kernel: str = "native") -> dict[str, Any]:
    """Execute ``code`` with ``sys.argv[1]`` = json(payload); return its last stdout line, read
    as JSON. ``kernel``: "native" (the CPU's own), or an ATEN_CPU_CAPABILITY value."""
    env = dict(os.environ, OMP_NUM_THREADS="1", TQDM_DISABLE="1")
    env.pop("ATEN_CPU_CAPABILITY", None)
    if kernel != "native":
        env["ATEN_CPU_CAPABILITY"] = kernel
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(payload)], env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"the run {payload} ({kernel} kernels) failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result
