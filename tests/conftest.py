"""Shared test settings."""

import os

from hypothesis import settings

# In CI every property test draws the same examples on every run, so a result can be
# reproduced; locally hypothesis explores new examples each time.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")
