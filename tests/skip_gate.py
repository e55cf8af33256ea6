"""Nothing skipped in CI unless its reason is allowed (issue 42).

A skipped test checks nothing, and a skip that fires in CI hides that.
Where ``MIXERS_SKIPS_ALLOWED`` is set (``.ci/run`` sets it), every skip
(``pytest.skip``, a ``skipif`` mark, a module skipped at collection, an
``xfail``) whose reason does not contain one of the variable's lines fails
the run: the exit status is 1 and the summary names each skip with its
reason. Empty means no skip is allowed. Unset (a contributor's ``pytest``),
skips are reported as pytest always reports them.

tests/conftest.py registers the plugin; tests/test_skip_gate.py holds it.
"""

import os

import pytest

ENV = "MIXERS_SKIPS_ALLOWED"


def allowed_reasons(value: str) -> list[str]:
    """The variable's lines, stripped; blank lines and ``#`` comments are
    not reasons."""
    lines = (line.strip() for line in value.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def skip_reason(report) -> str:
    """What pytest says a skipped (or xfailed) report was skipped for."""
    if hasattr(report, "wasxfail"):
        return f"xfail: {report.wasxfail}"
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def unallowed(skips: list[tuple[str, str]], allowed: list[str]):
    """The ``(test id, reason)`` pairs whose reason contains no allowed
    reason."""
    return [
        (nodeid, reason)
        for nodeid, reason in skips
        if not any(text in reason for text in allowed)
    ]


class SkipGate:
    """Collects every skip of the session; fails the session on those not
    allowed."""

    def __init__(self, allowed: list[str]):
        self.allowed = allowed
        self.skips: list[tuple[str, str]] = []

    def _record(self, report):
        if report.skipped:
            self.skips.append((report.nodeid, skip_reason(report)))

    def pytest_runtest_logreport(self, report):
        self._record(report)

    def pytest_collectreport(self, report):
        self._record(report)

    def refused(self):
        return unallowed(self.skips, self.allowed)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session):
        if self.refused() and session.exitstatus in (
            pytest.ExitCode.OK,
            pytest.ExitCode.NO_TESTS_COLLECTED,
        ):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter):
        refused = self.refused()
        if refused:
            terminalreporter.section(f"skipped, and not allowed by {ENV}")
            for nodeid, reason in refused:
                terminalreporter.line(f"SKIPPED {nodeid}: {reason}")
            terminalreporter.line(
                f"{len(refused)} skipped tests fail this run: make each run,"
                f" or add its reason to {ENV} (.ci/run) with why"
            )


def register(config) -> None:
    """Register the gate where ``MIXERS_SKIPS_ALLOWED`` is set."""
    if ENV in os.environ:
        gate = SkipGate(allowed_reasons(os.environ[ENV]))
        config.pluginmanager.register(gate, "mixers-skip-gate")
