"""The local MLflow store: made whole or not at all.

MLflow makes a new SQLite store's schema in place, one migration after another (a few
seconds); a process killed meanwhile leaves a file no MLflow opens again ("table ... already
exists"), and every later upload would fail on it. Here a new store is made in a temporary
file, under the store's lock, and renamed into place once complete; an existing store is
checked before its first use in a process, and one whose schema is incomplete raises
:class:`StoreError`: one line naming the file, what happened and the fix (records stay
pending; the CLIs exit 2)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from ..config import ConfigError
from . import faults

#: stores this process found (or made) complete: checked once per process
_complete: set[str] = set()


class StoreError(ConfigError):
    """The MLflow store cannot be used as it is; the message says why and what to do."""


def sqlite_path(uri: str) -> Path | None:
    """The file of a local ``sqlite:///`` store (None for a server or other kinds)."""
    return Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else None


@contextlib.contextmanager
def locked(uri: str) -> Iterator[None]:
    """The store's lock (for a local one): two first runs at once make one schema and one experiment."""
    db = sqlite_path(uri)
    if db is None:
        yield
        return
    from filelock import FileLock

    db.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(db) + ".lock", timeout=120):
        yield


def ensure(uri: str) -> None:
    """Make a local store that does not exist yet (atomically), or check the one there.
    Call it holding :func:`locked`. Nothing to do for a tracking server."""
    db = sqlite_path(uri)
    if db is None or str(db) in _complete:
        return
    for stale in db.parent.glob(f".{db.name}.*.creating*"):  # made by a process killed while creating, and
        stale.unlink(missing_ok=True)  # sqlite's journal of it (under the lock: no other process is making one now)
    if _unwritten(db):
        _create(db)
    else:
        problem = schema_problem(db)
        if problem:
            raise StoreError(problem)
    _complete.add(str(db))


def file_problem(uri: str) -> str | None:
    """What :func:`ensure` would refuse in a local store, as far as the file alone tells (a schema never finished,
    a file that is no store), without importing MLflow; a schema at another revision than this MLflow's is
    found by the upload that opens it. None for a server, a store not made yet, or a complete-looking file."""
    db = sqlite_path(uri)
    if db is None or _unwritten(db):
        return None
    return schema_problem(db, any_revision=True)


def _unwritten(db: Path) -> bool:
    """Nothing of a store written yet: no file, an empty one, or no tables (:func:`ensure` makes it)."""
    return not db.exists() or db.stat().st_size == 0 or _tables(db) == set()


def _create(db: Path) -> None:
    from mlflow.tracking import MlflowClient

    tmp = db.with_name(f".{db.name}.{os.getpid()}.creating")
    tmp.unlink(missing_ok=True)
    faults.point("store.creating")
    uri = f"sqlite:///{tmp}"
    client = MlflowClient(tracking_uri=uri)
    client.search_experiments(max_results=1)  # the store is made on first use: every migration runs
    _release(uri)
    faults.point("store.schema")
    os.replace(tmp, db)
    faults.point("store.created")


def _release(uri: str) -> None:
    """Close MLflow's cached connections to the temporary file before it is renamed."""
    try:
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

        engine = SqlAlchemyStore._engine_map.pop(uri, None)
        if engine is not None:
            engine.dispose()
    except Exception:  # another MLflow layout: an open connection follows the renamed file harmlessly
        pass


def head_revision() -> str | None:
    """The schema revision this MLflow writes (None if it cannot be read from MLflow)."""
    try:
        from mlflow.store.db.utils import _get_latest_schema_revision

        return str(_get_latest_schema_revision())
    except Exception:
        return None


def _tables(db: Path) -> set[str] | None:
    """The file's tables (None when it is no SQLite database at all)."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            return {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
        finally:
            con.close()
    except sqlite3.Error:
        return None


def schema_problem(db: Path, any_revision: bool = False) -> str | None:
    """What is wrong with an existing store file, with the fix; None if it is complete. ``any_revision``: a
    finished schema at any revision is complete (MLflow, which knows its own, is not imported)."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
            revision = (con.execute("select version_num from alembic_version").fetchone() or [None])[0] \
                if "alembic_version" in tables else None
            runs = con.execute("select count(*) from runs").fetchone()[0] if "runs" in tables else 0
        finally:
            con.close()
    except sqlite3.Error as exc:
        return (f"{db} is not an MLflow store ({exc}); move it aside (mv {db} {db}.broken) and run again: "
                f"a new store is made, and the records kept in pending/ are logged to it")
    latest = None if revision is None or any_revision else head_revision()
    if revision is not None and (latest is None or revision == latest):
        return None
    what = ("its schema was never finished (no schema revision)" if revision is None
            else f"its schema is at revision {revision}, this MLflow writes {latest}")
    backup = f"back it up first: it holds {runs} run(s); " if runs else ""
    fix = (f"{backup}`mlflow db upgrade sqlite:///{db}` finishes it; if that fails, move it aside "
           f"(mv {db} {db}.broken) and run again: a new store is made, and the records kept in pending/ go to it")
    return (f"the MLflow store {db} is incomplete: {what}, as when a process is killed while it is made or "
            f"upgraded, or an older MLflow made it; {fix}")
