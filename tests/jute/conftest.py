from __future__ import annotations

from collections.abc import Iterator

import pytest
from java_oracle import JavaOracle


@pytest.fixture(scope="session")
def java(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaOracle]:
    oracle = JavaOracle(tmp_path_factory.mktemp("jute-oracle"))
    yield oracle
    oracle.close()
