import os
import sys
from pathlib import Path

import pytest

LAB = str(Path(__file__).resolve().parents[1] / "lab")
sys.path.insert(0, LAB)
# subprocesses (`python -m ilnp_lab.cli`, the probes) import this checkout's lab too, not
# whatever an editable install elsewhere points at
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (LAB, os.environ.get("PYTHONPATH")) if p)

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
    # every ilnpd the test started ended cleanly (exit 0 on SIGTERM, the bed's close
    # included) or was killed on purpose (Ilnpd.kill), and none panicked
    bad = [p for d in b.ilnpds for p in d.exit_problems()]
    if bad:
        pytest.fail("\n\n".join(bad), pytrace=False)
