"""Real services for the cluster tests, started under a temporary folder and stopped after:

- :class:`SlurmCluster`: a one-node SLURM cluster on localhost (munge, MariaDB, slurmdbd, slurmctld,
  slurmd) with a CPU partition and two fake GPUs as gres. The accounting daemon is needed: Submitit
  asks ``sacct`` for the state of every job, and a job that ended without a result (cancelled,
  killed, its node lost) is known only from there.
- :class:`TrackingServer`: ``mlflow server`` on a PostgreSQL database, artifacts on the shared
  filesystem (the clients write them there directly, as nodes on a shared filesystem would).

Both come from Debian's packages (install.sh installs them where it can: slurm-wlm, slurmdbd, munge,
mariadb-server, postgresql) and need root; :func:`missing` says in one line what is not there.
Every daemon gets its own ports, sockets and files, so nothing touches the machine's own services.

    python tests/services.py      # start both, print the two settings to use, stop on Enter
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SLURM_BINARIES = ("munged", "mariadb-install-db", "mariadbd", "slurmdbd", "slurmctld", "slurmd", "sbatch", "sacct",
                  "sacctmgr", "scancel")
PG_BIN = Path("/usr/lib/postgresql")
CLUSTER = "harness"
NODE = "localhost"
GPUS = 2


def missing(kind: str) -> str | None:
    """Why the service ``kind`` ("slurm" or "postgres") cannot be started here, or None."""
    if os.geteuid() != 0:
        return f"{kind}: the test cluster's daemons run as root (this user is not)"
    if kind == "slurm":
        absent = [b for b in SLURM_BINARIES if shutil.which(b) is None]
        if absent:
            return (f"SLURM is not installed ({', '.join(absent)} missing): apt-get install slurm-wlm slurmdbd munge "
                    f"mariadb-server, or ./install.sh as root")
        return None
    if _pg_bin() is None:
        return "PostgreSQL is not installed: apt-get install postgresql, or ./install.sh as root"
    return None


def _pg_bin() -> Path | None:
    found = sorted(PG_BIN.glob("*/bin/initdb"))
    return found[-1].parent if found else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what: str, ready, timeout_s: float, log: Path | None = None) -> None:
    """Poll ``ready()`` until it is true; else fail naming the service and the end of its log."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.3)
    tail = log.read_text(errors="replace")[-2000:] if log is not None and log.exists() else ""
    raise RuntimeError(f"{what} did not come up in {timeout_s:.0f} s" + (f"; its log ends:\n{tail}" if tail else ""))


def _run(args: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=120, **kw)


class SlurmCluster:
    """A one-node SLURM cluster with accounting, all under ``root``. ``env`` holds ``SLURM_CONF``:
    pass it to every SLURM command and to the sweep that submits."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.log = self.root / "log"
        self.ports = {k: free_port() for k in ("slurmctld", "slurmd", "slurmdbd", "mariadb")}
        self.munge = self.root / "munge.sock"
        self.conf = self.root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self._db: subprocess.Popen | None = None

    def start(self) -> SlurmCluster:
        for d in ("state", "spool", "log", "dev", "db"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        try:
            self._munge()
            self._mariadb()
            self._write_conf()
            self._daemon(["slurmdbd"], "slurmdbd")
            _wait("slurmdbd", lambda: self._sacctmgr(["-i", "add", "cluster", CLUSTER]), 60,
                  self.log / "slurmdbd.log")
            self._daemon(["slurmctld", "-i"], "slurmctld")
            self._daemon(["slurmd", "-N", NODE], "slurmd")
            _wait("slurmd", lambda: self.slurm(["sinfo", "-h", "-o", "%t"]).stdout.strip() == "idle", 60,
                  self.log / "slurmd.log")
        except BaseException:
            self.stop()
            raise
        return self

    def _munge(self) -> None:
        key = self.root / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        _run(["munged", "--force", f"--socket={self.munge}", f"--key-file={key}",
              f"--log-file={self.log / 'munged.log'}", f"--pid-file={self.root / 'munged.pid'}",
              f"--seed-file={self.root / 'munged.seed'}"], check=True)

    def _mariadb(self) -> None:
        db = self.root / "db"
        _run(["mariadb-install-db", f"--datadir={db}", "--user=root", "--auth-root-authentication-method=normal",
              "--skip-test-db"], check=True)
        self._db = subprocess.Popen(
            ["mariadbd", f"--datadir={db}", "--user=root", f"--socket={self.root / 'mysql.sock'}",
             f"--port={self.ports['mariadb']}", "--bind-address=127.0.0.1", f"--pid-file={self.root / 'mariadb.pid'}",
             f"--log-error={self.log / 'mariadb.log'}", "--innodb-buffer-pool-size=64M"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        _wait("MariaDB", lambda: _port_open(self.ports["mariadb"]), 60, self.log / "mariadb.log")

    def _write_conf(self) -> None:
        r, p = self.root, self.ports
        gpus = []
        for i in range(GPUS):  # character devices, as real GPUs are (slurmd checks); /dev/null's numbers
            dev = r / "dev" / f"gpu{i}"
            if not dev.exists():
                os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 3))
            gpus.append(dev)
        (r / "slurmdbd.conf").write_text("\n".join([
            "AuthType=auth/munge", f"AuthInfo=socket={self.munge}", "DbdHost=localhost", f"DbdPort={p['slurmdbd']}",
            "SlurmUser=root", f"PidFile={r / 'slurmdbd.pid'}", f"LogFile={self.log / 'slurmdbd.log'}",
            "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1", f"StoragePort={p['mariadb']}",
            "StorageUser=root", "StorageLoc=slurm_acct_db", ""]))
        (r / "slurmdbd.conf").chmod(0o600)  # slurmdbd refuses a readable one
        (r / "gres.conf").write_text(f"AutoDetect=off\nNodeName={NODE} Name=gpu File={r / 'dev'}/gpu[0-{GPUS - 1}]\n")
        self.conf.write_text("\n".join([
            f"ClusterName={CLUSTER}", "SlurmctldHost=localhost", "SlurmUser=root", "SlurmdUser=root",
            f"SlurmctldPort={p['slurmctld']}", f"SlurmdPort={p['slurmd']}",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={self.munge}",
            f"StateSaveLocation={r / 'state'}", f"SlurmdSpoolDir={r / 'spool'}",
            f"SlurmctldPidFile={r / 'slurmctld.pid'}", f"SlurmdPidFile={r / 'slurmd.pid'}",
            f"SlurmctldLogFile={self.log / 'slurmctld.log'}", f"SlurmdLogFile={self.log / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "MpiDefault=none",
            "SchedulerType=sched/backfill", "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
            "GresTypes=gpu", "ReturnToService=2", "KillWait=30", "InactiveLimit=0",
            "AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=localhost",
            f"AccountingStoragePort={p['slurmdbd']}", f"AccountingStoragePass={self.munge}",
            "JobAcctGatherType=jobacct_gather/none",
            f"NodeName={NODE} CPUs={os.cpu_count()} RealMemory=4000 Gres=gpu:{GPUS} State=UNKNOWN",
            f"PartitionName=cpu Nodes={NODE} Default=YES MaxTime=INFINITE State=UP", ""]))

    def _daemon(self, args: list[str], name: str) -> None:
        res = _run(args, env=self.env)
        if res.returncode != 0:
            raise RuntimeError(f"{name} did not start: {(res.stderr or res.stdout).strip()[-1000:]}")

    def _sacctmgr(self, args: list[str]) -> bool:
        res = self.slurm(["sacctmgr", *args])
        return res.returncode == 0 or "already exists" in res.stdout + res.stderr

    def slurm(self, args: list[str]) -> subprocess.CompletedProcess:
        """A SLURM command against this cluster."""
        return _run(args, env=self.env)

    def stop(self) -> None:
        for name in ("slurmd", "slurmctld", "slurmdbd", "munged"):
            _kill_pidfile(self.root / f"{name}.pid")
        if self._db is not None:
            _end_session(self._db)
            self._db = None


def _end_session(proc: subprocess.Popen) -> None:
    """End a daemon started in a session of its own (it and what it started): SIGTERM, then SIGKILL after 30 s."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _kill_pidfile(path: Path) -> None:
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class TrackingServer:
    """``mlflow server`` on PostgreSQL. PostgreSQL runs as its own Debian user from a folder of its
    own under /tmp (a root-only temporary folder is not readable to it); artifacts go to
    ``root/artifacts``. :meth:`stop_server` and :meth:`start_server` take the MLflow server away
    and bring it back on the same port and database."""

    def __init__(self, root: Path, mlflow: str):
        self.root = Path(root)
        self.mlflow = mlflow
        self.pg_port, self.port = free_port(), free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.database = f"postgresql://postgres@127.0.0.1:{self.pg_port}/mlflow"
        self.artifacts = self.root / "artifacts"
        self._pg_dir: Path | None = None
        self._server: subprocess.Popen | None = None

    def start(self) -> TrackingServer:
        try:
            self._postgres()
            self.start_server()
        except BaseException:
            self.stop()
            raise
        return self

    def _postgres(self) -> None:
        bin_ = _pg_bin()
        assert bin_ is not None
        self._pg_dir = Path(tempfile.mkdtemp(prefix="harness-pg-"))
        shutil.chown(self._pg_dir, "postgres", "postgres")
        as_pg = ["runuser", "-u", "postgres", "--"]
        data, log = self._pg_dir / "data", self._pg_dir / "postgres.log"
        _run([*as_pg, str(bin_ / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"], check=True)
        res = _run([*as_pg, str(bin_ / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-o",
                    f"-p {self.pg_port} -k {self._pg_dir} -c listen_addresses=127.0.0.1", "start"])
        if res.returncode != 0:
            raise RuntimeError(f"PostgreSQL did not start: {res.stdout[-500:]}{res.stderr[-500:]}")
        _run([*as_pg, str(bin_ / "createdb"), "-h", "127.0.0.1", "-p", str(self.pg_port), "mlflow"], check=True)

    def start_server(self) -> None:
        self.artifacts.mkdir(parents=True, exist_ok=True)
        log = self.root / "mlflow-server.log"
        self._server = subprocess.Popen(
            [self.mlflow, "server", "--backend-store-uri", self.database, "--default-artifact-root",
             str(self.artifacts), "--no-serve-artifacts", "--host", "127.0.0.1", "--port", str(self.port),
             "--workers", "2"], stdout=open(log, "ab"), stderr=subprocess.STDOUT, start_new_session=True)
        _wait("the MLflow server", self.healthy, 180, log)

    def healthy(self) -> bool:
        import urllib.request

        try:
            with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def stop_server(self) -> None:
        if self._server is None:
            return
        _end_session(self._server)
        self._server = None

    def stop(self) -> None:
        self.stop_server()
        if self._pg_dir is not None:
            bin_ = _pg_bin()
            _run(["runuser", "-u", "postgres", "--", str(bin_ / "pg_ctl"), "-D", str(self._pg_dir / "data"),
                  "-m", "fast", "-w", "stop"])
            shutil.rmtree(self._pg_dir, ignore_errors=True)
            self._pg_dir = None


def main() -> int:
    for kind in ("slurm", "postgres"):
        if why := missing(kind):
            print(f"error: {why}", file=sys.stderr)
            return 2
    root = Path(tempfile.mkdtemp(prefix="harness-cluster-"))
    mlflow = str(Path(sys.executable).with_name("mlflow"))
    cluster = SlurmCluster(root / "slurm").start()
    server = TrackingServer(root / "tracking", mlflow).start()
    try:
        print(f"export SLURM_CONF={cluster.conf}\n# then: python -m harness -m hydra/launcher=submitit_slurm "
              f"hydra.launcher.partition=cpu tracking.uri={server.uri} ...\n(Enter stops both)")
        input()
    finally:
        server.stop()
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
