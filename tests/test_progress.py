"""Search progress reaches a non-terminal stream as periodic status lines."""

import io

from ios_core.cost import AnalyticCostModel
from ios_core.models import build_model
from ios_core.progress import Progress
from ios_core.schedule import SearchOptions, optimize
from ios_core.workload import Workload

from .helpers import SMALL


def test_status_lines_when_not_a_terminal():
    out = io.StringIO()
    p = Progress("ios search x", 10, "units", interval=0.0, stream=out)
    p.update(4, states=12, timed=3)
    p.close()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[ios search x] 4/10 units (40%), 12 states, 3 timed, ")
    assert "s elapsed" in lines[0] and "left" in lines[0]
    assert len(lines) == 1  # nothing new to say at close


def test_disabled_progress_prints_nothing(capsys):
    g = build_model("squeezenet", **SMALL["squeezenet"])
    optimize(Workload(g), AnalyticCostModel(1, "gpu"), SearchOptions("ios-both", progress=False))
    assert capsys.readouterr().err == ""


def test_heartbeat_speaks_during_a_long_silent_phase():
    import io
    import time

    from ios_core.progress import Heartbeat

    out = io.StringIO()
    with Heartbeat("prepare TF sample", interval=0.05, stream=out):
        time.sleep(0.18)
    lines = out.getvalue().splitlines()
    assert 2 <= len(lines) <= 4 and lines[0].startswith("[prepare TF sample] ") and lines[0].endswith(" s elapsed")
    quiet = io.StringIO()
    with Heartbeat("x", interval=0.05, stream=quiet, enabled=False):
        time.sleep(0.12)
    assert quiet.getvalue() == ""


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_a_timed_phase_moves_the_terminal_bar():
    """On a TTY the measurement bar is tqdm's: setting the seconds done must move it (it stayed
    at 0% when the protocol assigned ``done``), and it never passes its total."""
    out = _Tty()
    p = Progress("measure", 10.0, "s", stream=out)
    p.to(2.5, samples=16)
    assert p.bar is not None and p.bar.n == 2.5
    p.to(7.0, samples=48)
    p.to(12.0)  # past max_time_s: capped
    assert p.bar.n == 10.0 and p.done == 10.0
    p.bar.refresh()
    assert "100%" in out.getvalue().split("\r")[-1]
    p.close()
