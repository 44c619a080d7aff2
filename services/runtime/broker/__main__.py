"""``python -m services.runtime.broker fetch | run [--log-dir D] [--brokers N] [--launcher auto|local|container]``."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from services.runtime.broker import distribution as dist
from services.runtime.broker.cluster import MAX_BROKERS, KafkaCluster
from services.runtime.broker.process import BrokerError, KafkaBroker
from services.runtime.broker.resolve import LAUNCHER_ENV, LAUNCHERS, chosen_launcher, resolve_broker


def _fetch(_: argparse.Namespace) -> int:
    if dist.is_fetched():
        print(f"Kafka {dist.KAFKA_VERSION} jars already in {dist.cached_libs_dir()}")
        return 0
    libs = dist.fetch_jars()
    print(f"Kafka {dist.KAFKA_VERSION} jars fetched into {libs}")
    return 0


def _run(args: argparse.Namespace) -> int:
    if args.brokers != 1 and args.port is not None:
        print("--port applies to a single broker; a cluster's nodes pick free ports", file=sys.stderr)
        return 2
    try:
        launcher = chosen_launcher(args.launcher)
    except BrokerError as exc:
        print(exc, file=sys.stderr)
        return 2
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    if launcher == "container":
        return _run_container(args, stop)
    broker: KafkaBroker | KafkaCluster = (
        KafkaBroker(log_dir=args.log_dir, port=args.port) if args.brokers == 1
        else KafkaCluster(args.brokers, log_dir=args.log_dir)
    )
    try:
        broker.start()
        print(broker.bootstrap, flush=True)
        print(f"log dir: {broker.log_dir}", file=sys.stderr, flush=True)
        while not stop.wait(0.5):
            if not broker.running:
                print("a broker exited; see its logs", file=sys.stderr)
                return 1
    finally:
        broker.close()
    return 0


def _run_container(args: argparse.Namespace, stop: threading.Event) -> int:
    """One broker in a Docker container (testcontainers) until Ctrl-C; it picks its own port and keeps no
    directory, so ``--port`` and ``--log-dir`` do not apply."""
    if args.port is not None or args.log_dir is not None:
        print("--port and --log-dir do not apply to the container launcher", file=sys.stderr)
        return 2
    try:
        broker = resolve_broker(None, brokers=args.brokers, launcher="container")
    except BrokerError as exc:
        print(exc, file=sys.stderr)
        return 1
    try:
        print(broker.bootstrap, flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        broker.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the broker command line."""
    parser = argparse.ArgumentParser(prog="python -m services.runtime.broker", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    fetch = commands.add_parser("fetch", help=f"download the Kafka {dist.KAFKA_VERSION} jars into the cache")
    fetch.set_defaults(handler=_fetch)
    run = commands.add_parser("run", help="run a broker (or a cluster of them) in the foreground until Ctrl-C")
    run.add_argument("--log-dir", default=None, help="broker directory (kept); a temporary one if omitted")
    run.add_argument("--port", type=int, default=None, help="listener port (a free one if omitted)")
    run.add_argument("--brokers", type=int, default=1, choices=range(1, MAX_BROKERS + 1), metavar="N",
                     help=f"run N brokers (1-{MAX_BROKERS}), each also a KRaft controller; default 1")
    run.add_argument("--launcher", default=None, choices=LAUNCHERS,
                     help=f"local (Java and the Kafka jars), container (testcontainers; needs a Docker engine) "
                          f"or auto; default {LAUNCHER_ENV} or local")
    run.set_defaults(handler=_run)
    args = parser.parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
