"""Output read by a reader that stops early (`vault-ko … | head`): the command ends with
141, as a process SIGPIPE ends, and says nothing; 1 would read as "found a problem"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pipeline.cli._common import READER_GONE


def _with_closed_stdout(
    args: list[str], cwd: Path, stdin: bytes = b"", before: str = ""
) -> tuple[int, str]:
    """Run the entry point with a stdout nobody reads: the pipe's read end is closed before
    the process writes, so its first write that reaches the pipe fails (EPIPE)."""
    read, write = os.pipe()
    os.close(read)
    code = f"{before}import sys; sys.argv[0] = 'vault-ko'; from pipeline.cli import main; main()"
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, *args],
            stdout=write,
            stderr=subprocess.PIPE,
            input=stdin,
            cwd=cwd,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)
    return done.returncode, done.stderr.decode()


def test_a_rich_table_to_a_closed_pipe_ends_with_141_and_no_word(tmp_path: Path) -> None:
    # `config show` prints a rich table on the stdout console.
    code, stderr = _with_closed_stdout(["--vault", str(tmp_path), "config", "show"], tmp_path)
    assert (code, stderr) == (READER_GONE, "")


def test_click_output_to_a_closed_pipe_ends_with_141_and_no_word(tmp_path: Path) -> None:
    # --help is click's own echo, which click catches itself (its exit would be 1).
    code, stderr = _with_closed_stdout(["--help"], tmp_path)
    assert (code, stderr) == (READER_GONE, "")


def test_json_to_a_closed_pipe_ends_with_141_and_no_word(tmp_path: Path) -> None:
    code, stderr = _with_closed_stdout(
        ["--vault", str(tmp_path), "config", "show", "--json"], tmp_path
    )
    assert (code, stderr) == (READER_GONE, "")


def test_the_hook_still_exits_0_when_the_agent_closed_its_stdout(tmp_path: Path) -> None:
    (tmp_path / ".vault-ko").mkdir()
    answering = "import pipeline.hook as h; h.answer_context = lambda s, p, b: 'about ' + p; "
    event = json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": "redis"}).encode()
    code, stderr = _with_closed_stdout(
        ["--vault", str(tmp_path), "hook"], tmp_path, stdin=event, before=answering
    )
    assert (code, stderr) == (0, "")
    log = (tmp_path / ".vault-ko" / "hook.log").read_text()
    assert "BrokenPipeError" in log and "Traceback" not in log


def test_output_read_to_the_end_keeps_its_own_exit_code(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from pipeline.cli import main; main()", "--help"],
        capture_output=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and b"Usage" in done.stdout
