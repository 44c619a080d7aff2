"""Locating the Apache Kafka jars: a ``KAFKA_HOME`` installation or a Maven Central fetch into a cache."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

KAFKA_VERSION = "4.4.0"
SCALA_VERSION = "2.13"
SLF4J_VERSION = "1.7.36"
RELOAD4J_VERSION = "1.2.25"
COMPLETE_MARKER = ".complete"

_POM_TEMPLATE = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 http://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.muster</groupId>
  <artifactId>kafka-broker-runtime</artifactId>
  <version>{kafka}</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_{scala}</artifactId>
      <version>{kafka}</version>
      <exclusions>
        <exclusion><groupId>ch.qos.logback</groupId><artifactId>*</artifactId></exclusion>
      </exclusions>
    </dependency>
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-reload4j</artifactId>
      <version>{slf4j}</version>
    </dependency>
    <dependency>
      <groupId>ch.qos.reload4j</groupId>
      <artifactId>reload4j</artifactId>
      <version>{reload4j}</version>
    </dependency>
  </dependencies>
</project>
"""


class DistributionError(RuntimeError):
    """The Kafka jars could not be found or fetched."""


@dataclass(frozen=True)
class KafkaDistribution:
    """A directory of Kafka jars plus the Java executable that runs them."""

    libs_dir: Path
    java: str
    version: str

    @property
    def classpath(self) -> str:
        """The JVM class path covering every jar in ``libs_dir``."""
        return str(self.libs_dir / "*")


def cache_dir() -> Path:
    """The cache root: ``MUSTER_CACHE_DIR`` or ``~/.cache/muster``."""
    configured = os.environ.get("MUSTER_CACHE_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "muster"


def find_java() -> str:
    """The ``java`` executable from ``JAVA_HOME`` or ``PATH``."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise DistributionError("no java executable found (set JAVA_HOME or put java on PATH)")
    return found


def pom_text(version: str = KAFKA_VERSION) -> str:
    """The Maven project whose runtime dependencies are the broker's class path."""
    return _POM_TEMPLATE.format(
        kafka=version, scala=SCALA_VERSION, slf4j=SLF4J_VERSION, reload4j=RELOAD4J_VERSION
    )


def cached_libs_dir(version: str = KAFKA_VERSION, root: Path | None = None) -> Path:
    """Where the fetched jars of ``version`` live inside the cache."""
    return (root or cache_dir()) / f"kafka-{version}" / "libs"


def is_fetched(version: str = KAFKA_VERSION, root: Path | None = None) -> bool:
    """Whether a complete fetch of ``version`` is in the cache."""
    libs = cached_libs_dir(version, root)
    return (libs.parent / COMPLETE_MARKER).is_file() and libs.is_dir()


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def fetch_jars(version: str = KAFKA_VERSION, root: Path | None = None, *, mvn: str | None = None) -> Path:
    """Fetch the broker jars from Maven Central once; return the ``libs`` directory.

    A marker file is written only after every jar is in place, so an interrupted fetch is redone.
    Concurrent callers serialise on a lock file next to the cache entry.
    """
    libs = cached_libs_dir(version, root)
    home = libs.parent
    marker = home / COMPLETE_MARKER
    with _exclusive(home.parent / f"kafka-{version}.lock"):
        if marker.is_file() and libs.is_dir():
            return libs
        mvn_exe = mvn or shutil.which("mvn")
        if mvn_exe is None:
            raise DistributionError("mvn is not on PATH; install Maven or set KAFKA_HOME")
        home.mkdir(parents=True, exist_ok=True)
        marker.unlink(missing_ok=True)
        with tempfile.TemporaryDirectory(prefix="fetch-", dir=home) as work:
            work_dir = Path(work)
            (work_dir / "pom.xml").write_text(pom_text(version))
            staging = work_dir / "libs"
            command = [
                mvn_exe, "-q", "-B", "-f", str(work_dir / "pom.xml"),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={staging}", "-DincludeScope=runtime",
            ]  # fmt: skip
            result = subprocess.run(command, capture_output=True, text=True, check=False)
            if result.returncode != 0 or not any(staging.glob("kafka_*.jar")):
                raise DistributionError(
                    f"mvn failed to fetch Kafka {version} (exit {result.returncode}):\n"
                    f"{result.stdout[-4000:]}{result.stderr[-4000:]}"
                )
            if libs.exists():
                shutil.rmtree(libs)
            staging.rename(libs)
        marker.write_text(version + "\n")
    return libs


def from_kafka_home(kafka_home: str | os.PathLike[str]) -> KafkaDistribution:
    """The distribution of an Apache Kafka installation directory (its ``libs`` folder)."""
    libs = Path(kafka_home).expanduser() / "libs"
    jars = sorted(libs.glob("kafka_*.jar"))
    if not jars:
        raise DistributionError(f"{libs} holds no kafka_*.jar; KAFKA_HOME must be a Kafka installation")
    version = jars[0].name.split("-", 1)[1].removesuffix(".jar") if "-" in jars[0].name else "unknown"
    return KafkaDistribution(libs_dir=libs, java=find_java(), version=version)


def locate(version: str = KAFKA_VERSION) -> KafkaDistribution:
    """``KAFKA_HOME`` if set, otherwise the cached (fetched on first use) Maven Central jars."""
    kafka_home = os.environ.get("KAFKA_HOME")
    if kafka_home:
        return from_kafka_home(kafka_home)
    java = find_java()
    return KafkaDistribution(libs_dir=fetch_jars(version), java=java, version=version)
