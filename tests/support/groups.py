"""Which tests share an xdist worker. README's command runs `-n 2 --dist loadgroup` (pyproject's addopts):
tests with one `xdist_group` name run on one worker, one after another; every other test is a unit of its
own, handed to whichever worker is free. A module-scoped fixture is built once per worker that runs a test
needing it, so the tests that share one are grouped (tests/conftest.py does it for every fixture a test names;
a test that asks for one by `request.getfixturevalue` names the group itself)."""

from __future__ import annotations

from collections.abc import Iterable

import pytest


def shared_fixture_group(module: str, fixtures: Iterable[str]) -> str:
    """The group of the tests of `module` that need these module-scoped fixtures."""
    return f"{module}::{'+'.join(sorted(fixtures))}"


def on_shared_fixture(module: str, fixture: str, *values) -> pytest.ParameterSet:  # noqa: ANN002
    """A parameter set whose test asks for `fixture` by name at run time, in the group of its other users."""
    return pytest.param(*values, marks=pytest.mark.xdist_group(shared_fixture_group(module, [fixture])))
