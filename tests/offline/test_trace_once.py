"""One `kernelgen new` traces the spec's reference once, routes it once and renders its file once
(it routed three times and rendered twice); the route, and a refusal, are kept per spec content, and
a refusal carries its reason as data (kernelgen.offline.registry, kernelgen.backends)."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kernelgen.offline as offline
from kernelgen.backends import offline_verdict
from kernelgen.cli import app
from kernelgen.offline import NotServed, registry
from tests.support.offline_check import SPECS, example, unary


@pytest.fixture
def counted(monkeypatch):
    """Calls of route, traces of a reference and renders of a file, from an empty route cache."""
    counts = {"route": 0, "trace": 0, "render": 0}
    route, trace, kernel = registry.route, registry.trace_reference, registry.Routed.kernel

    def counting_route(spec):
        counts["route"] += 1
        return route(spec)

    def counting_trace(spec):
        counts["trace"] += 1
        return trace(spec)

    def counting_kernel(self, *args, **kwargs):
        counts["render"] += 1
        return kernel(self, *args, **kwargs)

    monkeypatch.setattr(registry, "_ROUTES", OrderedDict())
    monkeypatch.setattr(registry, "route", counting_route)
    monkeypatch.setattr(offline, "route", counting_route)  # the name the library and backends call it by
    monkeypatch.setattr(registry, "trace_reference", counting_trace)
    monkeypatch.setattr(registry.Routed, "kernel", counting_kernel)
    return counts


@pytest.mark.slow
def test_one_kernelgen_new_routes_traces_and_renders_once(counted, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["new", str(SPECS / "broadcast.yaml"), "--out", str(tmp_path), "--backend", "offline",
                                      "--no-bench"])
    assert result.exit_code == 0, result.output
    assert counted == {"route": 1, "trace": 1, "render": 1}
    assert (tmp_path / "broadcast" / "broadcast_triton.py").read_text().startswith('"""broadcast:')


def test_every_ask_of_one_spec_finds_the_route_made_once(counted) -> None:
    spec = example("softmax")
    kern = offline.first_kernel(spec, 132)
    assert offline.family_of(spec) == kern.family == "softmax"
    assert offline.knob_space(spec) and offline.generate_kernel(spec, {"num_warps": 8}).knobs.num_warps == 8
    assert offline.prune(spec, "num_warps", [4, 8], {}, {"x": [4096, 4096]}, "float32", 132)
    assert counted["route"] == 5 and counted["trace"] == 1


def test_a_refusal_is_kept_and_carries_its_reason_as_data(counted) -> None:
    spec = unary("sorted_rows", "torch.sort(x, -1).values", [{"x": [4, 9]}])
    for _ in range(2):
        with pytest.raises(NotServed) as err:
            offline.generate_kernel(spec)
        assert err.value.what == "the op aten.sort.default" and "needs an LLM" in err.value.message
    assert counted["trace"] == 1
    verdict = offline_verdict(spec, run=False)
    assert not verdict.ok and verdict.detail == "does not support the op aten.sort.default"
