"""scripts/demo.sh (`make demo`): its step headers carry no escape codes when its output is
not a terminal (a file, a pipe) or NO_COLOR is set (issue 36, item 6)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

DEMO = Path(__file__).resolve().parents[2] / "scripts" / "demo.sh"


def _step_output(env: dict[str, str]) -> str:
    lines = DEMO.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# Bold"))
    end = next(i for i, line in enumerate(lines) if line.startswith("step()"))
    script = "\n".join([*lines[start : end + 1], 'step "start the graph"'])
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout


def test_step_headers_written_to_a_pipe_have_no_escape_codes() -> None:
    out = _step_output({**os.environ})
    assert "== start the graph" in out
    assert "\x1b" not in out


def test_no_color_is_honoured_too() -> None:
    assert "\x1b" not in _step_output({**os.environ, "NO_COLOR": "1"})
