"""The calibrated cost model: every unit (and every merged conv) is *measured* alone on
the device; a multi-group stage is then *composed* from those measurements with the
analytic model's concurrency rule (the longer of the longest group and the total
device-busy work, each unit's device share taken from the analytic model).

It needs one measurement per unit instead of one per candidate stage, so it plans
graphs whose candidate stages are too many to measure (RandWire: ~650k distinct stage
signatures), at the price of trusting the composition rule.
"""

from __future__ import annotations

from ..ir import Graph
from ..schedule.schedule import Stage
from .analytic import AnalyticCostModel, compose


class CalibratedCostModel:
    name = "calibrated"

    def __init__(self, measured, analytic: AnalyticCostModel):
        self.measured, self.analytic = measured, analytic
        self._unit: dict[tuple[int, str], tuple[float, float]] = {}

    def _op(self, graph: Graph, name: str) -> tuple[float, float]:
        k = (id(graph), name)
        if k not in self._unit:
            ms = self.measured.stage_latency(graph, Stage([[name]]))
            t, busy = self.analytic.op(graph, graph.node(name), graph.input_shape_of(graph.node(name)))
            self._unit[k] = (ms, busy / t if t > 0 else 1.0)
        return self._unit[k]

    @property
    def sync_ms(self) -> float:
        return self.analytic.spec.sync_us / 1e3

    def unit_numbers(self, graph: Graph, name: str) -> tuple[float, float]:
        """(measured ms, its device-busy part) of one unit: what the compiled DP core composes."""
        ms, share = self._op(graph, name)
        return ms, ms * share

    def stage_latency(self, graph: Graph, stage: Stage) -> float:
        if stage.merge or (len(stage.groups) == 1 and len(stage.groups[0]) == 1):
            return self.measured.stage_latency(graph, stage)
        return compose(graph, stage, self.unit_numbers, self.sync_ms)

    def stats(self) -> dict[str, float]:
        return self.measured.stats()

    def close(self) -> None:
        self.measured.close()
