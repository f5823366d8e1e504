"""The service against its own OpenAPI schema: a bounded Schemathesis run, every check, on
the real `vault-ko serve` of the served vault (issue 35, item 14: a run of 791 cases found an
undocumented 400 on bodies that were not UTF-8, and values coerced where the schema said
otherwise).

Every operation gets its schema's examples, the coverage phase's edge cases (bounds,
missing fields, wrong types, blank strings) and at most MAX_EXAMPLES generated cases, valid
and not; every answer must be declared (status, content type, body), no request may be a
500, a request the schema allows must be answered (2xx) and one it forbids refused (4xx).
The seed is fixed so a failure is reproduced by the same run; SCHEMATHESIS_SEED=<n> tries
another, SCHEMATHESIS_MAX_EXAMPLES=<n> a longer run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

#: Generated cases per operation in the fuzzing phase (the coverage phase adds its own);
#: SCHEMATHESIS_MAX_EXAMPLES=<n> for a longer run by hand.
MAX_EXAMPLES = int(os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "25"))
SEED = int(os.environ.get("SCHEMATHESIS_SEED", "35"))
#: The whole run's bound: five operations answered in milliseconds each, a few minutes at most.
RUN_TIMEOUT = 600

#: What an answer to data the schema allows, or forbids, may be. A body past the service's
#: service_max_body_bytes is refused (413) before its content is looked at, whatever it is.
#: Repeated session ids are refused (422) though no JSON Schema can say "unique by id", so
#: a generated list that repeats one is valid for the schema and refused all the same.
CONFIG = """\
[checks]
negative_data_rejection.expected-statuses = ["400", "401", "413", "422"]
positive_data_acceptance.expected-statuses = ["2XX", "413"]

[[operations]]
include-path = "/session-context"
checks.positive_data_acceptance.expected-statuses = ["2XX", "413", "422"]
"""


def test_the_service_conforms_to_its_openapi_schema(served: Any, tmp_path: Path) -> None:
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    exe = Path(sys.executable).with_name("schemathesis")
    result = subprocess.run(
        [
            str(exe),
            "--config-file",
            str(config),
            "--no-color",
            "run",
            f"{served.url}/openapi.json",
            "--checks",
            "all",
            "--max-examples",
            str(MAX_EXAMPLES),
            "--seed",
            str(SEED),
            "--workers",
            "1",
            "--generation-database",
            "none",
            "--request-timeout",
            "60",
            "--report-dir",
            str(tmp_path / "report"),
        ],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        cwd=tmp_path,
        env={**os.environ, "SCHEMATHESIS_HOOKS": ""},
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-20_000:]
    print(out[-3000:])  # the run's summary (cases per operation), kept with -s
