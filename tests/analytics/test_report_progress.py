"""bench report on a terminal says what it is doing (on Lambda's logs it computes for many seconds); piped,
it prints only its findings and the report's path."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

from bench.ingest.pipeline import ingest

REPO = Path(__file__).resolve().parents[2]
BENCH = [sys.executable, "-c", "import sys; from bench.runner.cli import main; sys.argv[0] = 'bench'; main()"]


def test_the_report_shows_its_stages_on_a_terminal_only(tmp_path: Path) -> None:
    ingest([str(REPO / "fixtures" / "logs" / "tf_cnn")], tmp_path / "st", workers=0, skip_globs=("*.json",))
    args = [*BENCH, "report", "--store", str(tmp_path / "st"), "--out", str(tmp_path / "rep"), "--workers", "0"]
    leader, follower = pty.openpty()
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    out, _ = proc.communicate(timeout=120)
    os.close(leader)
    assert proc.returncode == 0, seen.decode(errors="replace")
    assert out.decode().strip().endswith("report.html")  # stdout: the findings and the path, as when piped
    text = seen.decode(errors="replace")
    assert "bench report: the findings and the leaderboards" in text and "writing the report" in text
    piped = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0 and "bench report:" not in piped.stderr and piped.stdout.strip().endswith("report.html")
