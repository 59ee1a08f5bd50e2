"""GPU utilisation of `full` runs, per chapter, while several share one GPU.

    python benchmarks/gpu_sampler.py sample FILE [--every 5]   append samples to FILE until killed
    python benchmarks/gpu_sampler.py summary FILE              mean and median per chapter and for the GPU

Each sample is one line of CSV per source: ``time,who,pid,util,memory_mib``.

- ``who = gpu``: the whole GPU (``nvidia-smi --query-gpu``): the fraction of the interval in which any
  kernel ran, and the memory in use.
- ``who = <chapter>``: one process (a stream of ``nvidia-smi pmon``): the fraction of the interval in which its kernels
  ran on the multiprocessors ("sm"). papermill runs a chapter's notebook in a kernel process of its own,
  so the process is matched to its chapter by ``FULL_RUN_PAPER`` in its environment, which
  ``full_on_gpu.sh`` sets for each chapter and which the kernel inherits. A process without it is
  ``other``.

Where pmon gives nothing (a runtime that hides other processes), the whole-GPU lines still come.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

TAG = "FULL_RUN_PAPER"


def pmon_line(line: str, columns: list | None) -> tuple[list | None, tuple[int, float] | None]:
    """One line of ``nvidia-smi pmon -s u``: (the columns, as the last header gave them; (pid, "sm" %)
    or None). The columns are read from the header, which differs between driver versions and repeats
    in a stream; "-" (no sample in the interval) counts as 0."""
    fields = line.split()
    if not fields:
        return columns, None
    if fields[0] == "#":
        return (fields[1:] if "pid" in fields else columns), None
    if columns is None or len(fields) < len(columns) or not fields[columns.index("pid")].isdigit():
        return columns, None
    value = fields[columns.index("sm")]
    return columns, (int(fields[columns.index("pid")]), float(value) if value.replace(".", "", 1).isdigit() else 0.0)


def chapter_of(pid: int, proc: Path = Path("/proc")) -> str:
    """The chapter a process runs, from ``FULL_RUN_PAPER`` in its environment; ``other`` without it."""
    try:
        environ = (proc / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:
        return "other"
    prefix = f"{TAG}=".encode()
    return next((entry[len(prefix):].decode() for entry in environ if entry.startswith(prefix)), "other")


def read_gpu(text: str) -> tuple[float, float]:
    """(utilisation %, memory in MiB) from ``--query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits``."""
    util, memory = (float(field) for field in text.strip().splitlines()[0].split(","))
    return util, memory


def query(*args: str) -> str:
    return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=30).stdout


def sample(path: Path, every: float) -> None:
    """Append samples to ``path`` until killed: the whole GPU every ``every`` seconds from this thread, the
    processes from one ``nvidia-smi pmon`` stream read in another (each line stamped as it arrives)."""
    lock, out = threading.Lock(), path.open("a")

    def write(line: str) -> None:
        with lock:
            out.write(line)
            out.flush()

    def processes() -> None:
        names, columns = {}, None
        try:
            stream = subprocess.Popen(["nvidia-smi", "pmon", "-s", "u", "-d", str(max(1, round(every)))],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        except OSError as error:
            write(f"{time.time():.1f},error,,,{type(error).__name__}\n")
            return
        for line in stream.stdout:
            columns, row = pmon_line(line, columns)
            if row:
                pid, sm = row
                names.setdefault(pid, chapter_of(pid))  # while the process lives, its environment can be read
                stamp = round(time.time() / every) * every  # the rows of one interval share their stamp
                write(f"{stamp:.1f},{names[pid]},{pid},{sm:g},\n")

    threading.Thread(target=processes, daemon=True).start()
    while True:
        now = time.time()
        try:
            util, memory = read_gpu(query("--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits"))
            write(f"{now:.1f},gpu,,{util:g},{memory:g}\n")
        except (OSError, ValueError, IndexError, subprocess.SubprocessError) as error:
            write(f"{now:.1f},error,,,{type(error).__name__}\n")
        time.sleep(max(0.0, every - (time.time() - now)))


def summarise(lines: list[str]) -> dict[str, dict]:
    """Per source: the number of samples, the first and last time, and the mean and median utilisation.
    A chapter's samples are those in which one of its processes held a GPU context; two processes of
    one chapter in one sample are added (a process seen twice in one sample counts once, its last row)."""
    per: dict[str, dict[float, dict[str, float]]] = {}
    for line in lines:
        fields = line.strip().split(",")
        if len(fields) != 5 or fields[1] == "error" or not fields[3]:
            continue
        stamp, who, pid, util = float(fields[0]), fields[1], fields[2], float(fields[3])
        per.setdefault(who, {}).setdefault(stamp, {})[pid] = util
    summary = {}
    for who, by_time in per.items():
        totals = [sum(by_pid.values()) for by_pid in by_time.values()]
        summary[who] = dict(samples=len(totals), first=min(by_time), last=max(by_time),
                            mean=statistics.fmean(totals), median=statistics.median(totals))
    return summary


def summary_table(summary: dict[str, dict]) -> str:
    rows = ["| source | samples | from | to | mean utilisation (%) | median (%) |", "|---|---|---|---|---|---|"]
    for who, s in sorted(summary.items(), key=lambda item: (item[0] != "gpu", item[0])):
        span = [time.strftime("%H:%M:%S", time.gmtime(s[key])) for key in ("first", "last")]
        rows.append(f"| {who} | {s['samples']} | {span[0]} | {span[1]} | {s['mean']:.1f} | {s['median']:.1f} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["sample", "summary"])
    parser.add_argument("file", type=Path)
    parser.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    args = parser.parse_args(argv)
    if args.command == "sample":
        sample(args.file, args.every)
    else:
        print(summary_table(summarise(args.file.read_text().splitlines())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
