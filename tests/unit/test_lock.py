"""One writer per vault: real `vault-ko` processes racing on a temporary vault (SQLite)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.errors import EXIT_UNAVAILABLE
from pipeline.lock import LOCK_FILE, VaultBusy, read_holder, vault_lock

VAULT_KO = str(Path(sys.executable).with_name("vault-ko"))
#: How long a child may take to reach a point the test waits for (a loaded CI machine).
PATIENCE = 60.0


def cli(vault: Path, *args: str) -> list[str]:
    return [VAULT_KO, "--vault", str(vault), *args]


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("VAULT_KO_")}


def wait_until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_three_concurrent_ingests_each_report_what_they_did(vault_copy: Path) -> None:
    notes = len(list(vault_copy.rglob("*.md")))
    runs = [
        subprocess.Popen(
            cli(vault_copy, "ingest", "--json"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env(),
        )
        for _ in range(3)
    ]
    reports = []
    for run in runs:
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, err
        reports.append(json.loads(out)["changes"])
    added = sorted(r["added"] for r in reports)
    assert added == [0, 0, notes]  # one run ingested the vault, the others found it done
    assert sorted(r["unchanged"] for r in reports) == [0, notes, notes]


def test_a_second_writer_waits_with_a_message_and_then_runs(vault_copy: Path) -> None:
    state_dir = vault_copy / ".vault-ko"
    stderr = vault_copy.parent / "stderr.txt"
    with vault_lock(state_dir, "vault-ko test-holder"), stderr.open("w") as err_file:
        waiting = subprocess.Popen(
            cli(vault_copy, "ingest", "--json"),
            stdout=subprocess.PIPE,
            stderr=err_file,
            text=True,
            env=env(),
        )
        message = (
            f"waiting for another vault-ko run (pid {os.getpid()}, "
            "command vault-ko test-holder) to finish"
        )
        wait_until(lambda: message in stderr.read_text(encoding="utf-8"), "the message")
        time.sleep(0.5)
        assert waiting.poll() is None  # still waiting while the lock is held
    out, _ = waiting.communicate(timeout=300)
    assert waiting.returncode == 0
    assert json.loads(out)["changes"]["added"] > 0


@pytest.mark.parametrize(
    "args",
    [
        ["ingest"],
        ["embed"],
        ["sync"],
        ["calibrate"],
        ["facts", "import", "facts.jsonl"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_no_wait_exits_2_naming_the_run_that_holds_the_lock(
    vault_copy: Path, args: list[str]
) -> None:
    facts = vault_copy / "facts.jsonl"
    facts.write_text(
        json.dumps(
            {
                "subject": "Redis",
                "predicate": "owner",
                "object": "ops",
                "confidence": 0.9,
                "source_type": "wiki",
                "source_file": "wiki/redis.md",
            }
        )
        + "\n",
        encoding="utf-8",
    )
    args = [str(facts) if a == "facts.jsonl" else a for a in args]
    with vault_lock(vault_copy / ".vault-ko", "vault-ko sync"):
        done = subprocess.run(
            cli(vault_copy, *args, "--no-wait"),
            capture_output=True,
            text=True,
            env=env(),
            timeout=120,
        )
    assert done.returncode == EXIT_UNAVAILABLE
    assert "another vault-ko run holds the lock" in done.stderr
    assert f"pid {os.getpid()}, command vault-ko sync" in done.stderr
    assert "Traceback" not in done.stderr


HOLD_AND_SLEEP = """
import sys, time
from pathlib import Path
from pipeline.lock import vault_lock
with vault_lock(Path(sys.argv[1]), "vault-ko ingest"):
    print("locked", flush=True)
    time.sleep(600)
"""


def test_the_lock_is_released_when_its_holder_is_killed(vault_copy: Path) -> None:
    state_dir = vault_copy / ".vault-ko"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_AND_SLEEP, str(state_dir)],
        stdout=subprocess.PIPE,
        text=True,
        env=env(),
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        assert read_holder(state_dir / LOCK_FILE).pid == holder.pid
        busy = pytest.raises(VaultBusy, match=f"pid {holder.pid}, command vault-ko ingest")
        with busy, vault_lock(state_dir, "vault-ko embed", wait=False):
            pass
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    done = subprocess.run(
        cli(vault_copy, "ingest", "--no-wait", "--json"),
        capture_output=True,
        text=True,
        env=env(),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["changes"]["added"] > 0


def test_the_lock_file_names_the_holder_only_while_it_runs(tmp_path: Path) -> None:
    with vault_lock(tmp_path, "vault-ko calibrate"):
        holder = read_holder(tmp_path / LOCK_FILE)
        assert (holder.pid, holder.command) == (os.getpid(), "vault-ko calibrate")
    assert read_holder(tmp_path / LOCK_FILE).pid is None


@pytest.mark.parametrize("command", ["embed", "calibrate"])
def test_a_writer_into_synced_stores_makes_no_state_in_a_plain_folder(
    tmp_path: Path, command: str
) -> None:
    # Its writer.lock made the folder count as a vault for the folder search.
    main = [sys.executable, "-c", "from pipeline.cli import main; main()"]
    done = subprocess.run(
        [*main, "--vault", str(tmp_path), command],
        capture_output=True,
        text=True,
        env=env(),
        timeout=120,
    )
    assert done.returncode == EXIT_UNAVAILABLE
    assert "has no vault-ko state" in done.stderr and "`vault-ko sync` makes it" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_service_without_its_kodb_makes_no_state_in_a_plain_folder(tmp_path: Path) -> None:
    main = [sys.executable, "-c", "from pipeline.cli import main; main()"]
    done = subprocess.run(
        [*main, "--vault", str(tmp_path), "serve"],
        capture_output=True,
        text=True,
        env=env(),
        timeout=120,
    )
    assert done.returncode == EXIT_UNAVAILABLE
    assert "no KO-DB at" in done.stderr and list(tmp_path.iterdir()) == []
