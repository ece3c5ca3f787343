import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab"))

from ilnp_lab.daemon import binary  # noqa: E402
from ilnp_lab.testbed import Testbed  # noqa: E402


def pytest_configure(config):
    if os.geteuid() != 0:
        raise pytest.UsageError("the system tests need root (network namespaces, BPF): run scripts/test.sh as root")
    for b in ("ilnpd", "ilnpctl"):
        binary(b)  # raises with a clear message if the build is missing


@pytest.fixture
def bed(tmp_path):
    with Testbed(workdir=tmp_path) as b:
        yield b
