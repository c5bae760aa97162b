"""The TLS tests' fixtures: key material made once per run (tests/certs.py) and the Java TLS
client compiled against Debian's zookeeper.jar."""

from __future__ import annotations

from pathlib import Path

import pytest
from java_client import compile_client
from kdc import start_kdc

from tests.certs import (  # noqa: F401 - the test modules import these names from here
    CLIENT_ID,
    CLIENT_SUBJECT,
    ODD_SUBJECT,
    OTHER_SUBJECT,
    PASSWORD,
    PEER_ID,
    PEER_SUBJECT,
    Material,
    Party,
    make_material,
)


@pytest.fixture(scope="session")
def material(tmp_path_factory: pytest.TempPathFactory) -> Material:
    return make_material(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="session")
def java_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """java/TlsClient.java compiled against Debian's zookeeper.jar."""
    return compile_client(tmp_path_factory.mktemp("java-client"))


@pytest.fixture(scope="module")
def kdc(tmp_path_factory):
    """A real MIT KDC (tests/security/kdc.py) for one test module, stopped by its PID."""
    started = start_kdc(tmp_path_factory.mktemp("kdc"))
    try:
        yield started
    finally:
        started.stop()
