"""Test-only plugin that takes ``WSIKIT_TEST_IMPORT_SLEEP`` seconds to import (a worker's slow
start: torch, a large plugin) and registers nothing."""

from __future__ import annotations

import os
import time

time.sleep(float(os.environ.get("WSIKIT_TEST_IMPORT_SLEEP", "0")))
