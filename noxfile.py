"""nox sessions: `nox -s tests` and `nox -s lint` (ruff and mypy; both reuse the CPU torch build)."""

import nox

nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    session.install("torch==2.13.0")
    session.install("-e", ".[all,dev]")
    session.run("pytest", "-q", *session.posargs, success_codes=[0, 5])


@nox.session
def lint(session: nox.Session) -> None:
    session.install("torch==2.13.0")
    session.install("-e", ".[all,dev]")  # mypy reads the libraries' own types
    session.run("ruff", "check", ".")
    session.run("mypy")
