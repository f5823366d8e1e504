"""docker-compose.yml: Memgraph starts without credentials, and its healthcheck follows."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]


def memgraph_service() -> dict[str, Any]:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text(encoding="utf-8"))
    return compose["services"]["memgraph"]


def test_credentials_are_never_declared_as_variables_that_may_be_empty() -> None:
    # Memgraph creates a user whenever MEMGRAPH_USER and MEMGRAPH_PASSWORD are *set*; an
    # empty name aborts the server at start (see the comment in docker-compose.yml).
    service = memgraph_service()
    environment = service.get("environment") or {}
    names = environment if isinstance(environment, list) else list(environment)
    assert not [n for n in names if str(n).split("=")[0].startswith("MEMGRAPH_")]
    assert service["env_file"] == [{"path": "./memgraph.env", "required": False}]


def run_healthcheck(tmp_path: Path, env: dict[str, str]) -> tuple[int, list[str]]:
    """The healthcheck's shell command, as the container runs it, against a fake mgconsole."""
    test = memgraph_service()["healthcheck"]["test"]
    assert test[0] == "CMD-SHELL"
    command = test[1].replace("$$", "$")  # Compose's escape for a literal $
    args_file = tmp_path / "args"
    fake = tmp_path / "mgconsole"
    fake.write_text(
        f'#!/bin/sh\n: > {args_file}\nfor a in "$@"; do echo "$a" >> {args_file}; done\n'
        "cat > /dev/null\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    done = subprocess.run(
        ["/bin/sh", "-c", command],
        env={"PATH": f"{tmp_path}:{os.environ['PATH']}", **env},
        check=False,
    )
    return done.returncode, args_file.read_text().splitlines()


def test_healthcheck_connects_without_credentials_when_none_are_set(tmp_path: Path) -> None:
    assert run_healthcheck(tmp_path, {}) == (0, [])


def test_healthcheck_uses_the_credentials_of_memgraph_env(tmp_path: Path) -> None:
    code, args = run_healthcheck(tmp_path, {"MEMGRAPH_USER": "vk", "MEMGRAPH_PASSWORD": "p w"})
    assert (code, args) == (0, ["--username", "vk", "--password", "p w"])


def test_the_credentials_file_is_never_committed() -> None:
    assert "/memgraph.env" in (REPO / ".gitignore").read_text(encoding="utf-8").split()
