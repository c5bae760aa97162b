"""Root of the test suite: the repository on sys.path (the checkout need not be
installed) and the real-server fixtures, registered once for tests/ and conformance_tests/."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

pytest_plugins = ["conformance_tests.fixtures"]
