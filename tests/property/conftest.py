"""Hypothesis runs without its example database and keeps its caches in a temp dir: tests
never write into the tree; a failure is replayed from the seed hypothesis prints
(``--hypothesis-seed``)."""

import tempfile

from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir

set_hypothesis_home_dir(tempfile.mkdtemp(prefix="vault-ko-hypothesis-"))
settings.register_profile("vault-ko", database=None, deadline=None, derandomize=True)
settings.load_profile("vault-ko")
