"""The image the podman tests run, built once per session by scripts/build-image."""

from __future__ import annotations

import pytest

from tests.deploy.podman import build_image


@pytest.fixture(scope="session")
def podman_image(tmp_path_factory) -> str:
    """The image's ID. Where podman cannot build or run it, every test that needs it fails
    with scripts/build-image's reason: these tests never skip."""
    return build_image(tmp_path_factory.mktemp("image"))
