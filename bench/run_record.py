"""What a benchmark run records beside its figures: a file name no earlier run
has, and how busy the machine was while each round ran.

    from run_record import new_stamp, MachineLoad
    stamp = new_stamp(OUT, "model", ".json")   # OUT/model-20261206-041500.json is free
    meter = MachineLoad()                       # at the start of a round
    ...                                         # run the round's child processes
    busy = meter.stop()   # {"loadavg_start": .., "loadavg_end": .., "other_cpus": ..}

MachineLoad counts the CPU time of the whole machine (/proc/stat) and of this
process and its waited-for children (os.times()), so "other_cpus" is the CPU
that other processes used during the round, in cores (1.0 = one core busy
all the time); the round's own benchmark processes are not in it as long as
they have ended (been waited for) when stop() is called. Linux only; where
/proc cannot be read the fields are None.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone
from pathlib import Path


def new_stamp(out: Path, prefix: str, *suffixes: str) -> str:
    """A UTC timestamp (20261206-041500, -2, -3 ... on a clash) such that no
    out/prefix-STAMP+suffix exists for any of `suffixes` ('' for a folder)."""
    base = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    stamp, n = base, 1
    while any((out / f"{prefix}-{stamp}{s}").exists() for s in suffixes or ("",)):
        n += 1
        stamp = f"{base}-{n}"
    return stamp


def _loadavg() -> float | None:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _machine_busy_s() -> float | None:
    """CPU seconds all processes have used since boot (user, nice, system,
    irq, softirq, steal excluded: another VM's time is not ours to count)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
        user, nice, system, _idle, _iowait, irq, softirq = map(int, fields[1:8])
    except (OSError, ValueError, IndexError):
        return None
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class MachineLoad:
    """The load average and other processes' CPU use over one round."""

    def __init__(self) -> None:
        self.wall = time.monotonic()
        self.load = _loadavg()
        self.busy = _machine_busy_s()
        self.own = _own_cpu_s()

    def stop(self) -> dict:
        wall = time.monotonic() - self.wall
        busy = _machine_busy_s()
        other = None
        if busy is not None and self.busy is not None and wall > 0:
            other = max(0.0, (busy - self.busy) - (_own_cpu_s() - self.own)) / wall
        return {"seconds": round(wall, 2), "loadavg_start": self.load,
                "loadavg_end": _loadavg(),
                "other_cpus": None if other is None else round(other, 2)}


def describe(busy: dict) -> str:
    """'load 1.2 -> 1.5, others 0.3 CPUs' for a MachineLoad.stop() result."""
    other = busy.get("other_cpus")
    return (f"load {busy.get('loadavg_start')} -> {busy.get('loadavg_end')}, others "
            + ("?" if other is None else f"{other:.2f}") + " CPUs")
