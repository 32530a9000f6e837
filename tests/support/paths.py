"""The folders tests read: named once, so that a test file can move between folders of tests/ without
its paths changing meaning."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
SPECS = REPO / "operator_specs"  # the example specs a user starts from
DATA = TESTS / "support" / "data"  # kernels more than one folder of tests/ reads
