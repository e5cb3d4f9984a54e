"""``make bench`` (the store's part): what a store costs as it is used, each next to its baseline in the
same run on this machine.

- ``--rebuild`` of a 300-file directory against its first ingest (goal: at most 3x);
- 1,000 one-file ingests into one store (an hourly cron job's 6 weeks): every command exits 0, and a query
  takes at most 1.5x its time on the same rows ingested at once;
- on Lambda's archive (../shared/corpus, when present): ``bench report``'s time and HTML size beside the
  ingest of the same tarball (goals: at most 3x the ingest, at most 2 MB), and beside the same report with
  its figures drawn in the report's process (``--workers 0``, the plain path).

Commands run as the user runs them (``python -m bench.runner``), so start-up is included on both sides.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from synth_logs import tf_cnn_lines

QUERY = ("SELECT model, num_gpus, count(*) AS n, avg(images_per_sec) AS ips FROM runs GROUP BY ALL "
         "UNION ALL SELECT 'steps', NULL, count(*), avg(images_per_sec) FROM steps")
LAMBDA = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "tf_cnn_benchmarks" / "lambda-logs.tar.gz"
LAMBDA_PATTERNS = [
    "{system}.logs/{data_mode}-{variable_update}-{precision}-{num_gpus}gpus-{variant}/{model}-{batch_size_per_device}/throughput/{repeat}",
    "{system}.logs/{data_mode}-{variable_update}-{precision}-{num_gpus}gpus/{model}-{batch_size_per_device}/throughput/{repeat}",
]


def bench(*args: str) -> float:
    """Seconds one ``bench`` command takes (it must succeed)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "bench.runner", *args], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def best(n: int, *args: str) -> float:
    return min(bench(*args) for _ in range(n))


def write_logs(folder: Path, n: int) -> list[Path]:
    folder.mkdir(parents=True)
    paths = []
    for i in range(n):
        path = folder / f"run{i:04d}.log"
        path.write_text("\n".join(tf_cnn_lines(20, seed=i)) + "\n")
        paths.append(path)
    return paths


def rebuild_case(tmp: Path) -> None:
    logs = tmp / "rebuild-logs"
    write_logs(logs, 300)
    first = bench("ingest", str(logs), "--store", str(tmp / "rb"))
    again = bench("ingest", "--rebuild", "--store", str(tmp / "rb"))
    print(f"  300 files: first ingest {first:.2f} s, --rebuild {again:.2f} s = {again / first:.2f}x "
          f"(goal <= 3x: {'met' if again <= 3 * first else 'NOT met'})")


def cron_case(tmp: Path, n: int = 1000) -> None:
    """What an hourly cron job leaves after ``n`` hours: ``n`` one-file ingests into one store, in this
    process (each as its own ingest, commit and automatic compaction past compact.AUTO_FILES; without
    the command's start-up). Then each command must exit 0, and a query takes at most 1.5x its time on
    the same rows ingested at once."""
    from bench.ingest.pipeline import ingest
    from bench.sql import delta

    paths = [str(p) for p in write_logs(tmp / "many-logs", n)]
    one, many = tmp / "one", tmp / "many"
    ingest(paths, one, workers=0)
    times = []
    for path in paths:
        t0 = time.perf_counter()
        ingest([path], many, workers=0)
        times.append(time.perf_counter() - t0)
    files = len(delta.files(many, "runs", delta.snapshot(many)))
    print(f"  {n} one-file ingests: {sum(times):.1f} s, the first ten {sum(times[:10]) / 10 * 1000:.0f} ms each, the "
          f"last ten {sum(times[-10:]) / 10 * 1000:.0f} ms each; the runs table then has {files} files")
    for args in (["ingest", "--check"], ["report", "--out", str(tmp / "cron-report")]):
        bench(*args, "--store", str(many))  # check=True: it must exit 0
    q_one = best(3, "sql", "--store", str(one), QUERY)
    q_many = best(3, "sql", "--store", str(many), QUERY)
    print(f"  `bench sql` on it {q_many:.2f} s; on the same rows ingested at once {q_one:.2f} s = "
          f"{q_many / q_one:.2f}x (goal <= 1.5x: {'met' if q_many <= 1.5 * q_one else 'NOT met'})")
    merge = bench("ingest", "--compact", "--store", str(many))
    q_after = best(3, "sql", "--store", str(many), QUERY)
    print(f"  after `bench ingest --compact` ({merge:.2f} s): {q_after:.2f} s = {q_after / q_one:.2f}x")


def lambda_report_case(tmp: Path) -> None:
    if not LAMBDA.is_file():
        print(f"  Lambda archive not present at {LAMBDA}: skipped")
        return
    patterns = [a for p in LAMBDA_PATTERNS for a in ("--path-pattern", p)]
    ingest_s = bench("ingest", str(LAMBDA), "--store", str(tmp / "lambda"), *patterns)
    plain_s = bench("report", "--store", str(tmp / "lambda"), "--out", str(tmp / "lambda-plain"), "--workers", "0")
    report_s = bench("report", "--store", str(tmp / "lambda"), "--out", str(tmp / "lambda-report"))
    size = (tmp / "lambda-report" / "report.html").stat().st_size / 1e6
    print(f"  Lambda archive: ingest {ingest_s:.2f} s; `bench report` {report_s:.2f} s = {report_s / ingest_s:.1f}x "
          f"the ingest (goal <= 3x: {'met' if report_s <= 3 * ingest_s else 'NOT met'}), report.html {size:.1f} MB "
          f"(goal <= 2 MB: {'met' if size <= 2 else 'NOT met'})")
    print(f"  its figures drawn in this process (--workers 0): {plain_s:.2f} s; by the default workers while the "
          f"tables compute: {report_s:.2f} s ({1 - report_s / plain_s:.0%} less)")


def main() -> None:
    print("\n== the store as it is used (commands timed end to end, start-up included)")
    with tempfile.TemporaryDirectory() as tmp:
        rebuild_case(Path(tmp))
        cron_case(Path(tmp))
        lambda_report_case(Path(tmp))


if __name__ == "__main__":
    main()
