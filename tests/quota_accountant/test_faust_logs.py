"""The accountant's log holds no false ERROR: Faust's check for partitions whose records no stream processed
fires on the changelogs (read only while the tables recover) every few seconds on a working service; those
are DEBUG, and the same check on an input topic stays an ERROR."""

from __future__ import annotations

import logging

import pytest
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

from schemas.topics import RUNS_TOPIC
from services.quota_accountant.stream import CHANGELOG_TOPICS, FAUST_CONSUMER_LOGGER, quiet_changelog_idle_checks


@pytest.mark.parametrize("message", [faust_aiokafka.SLOW_PROCESSING_STREAM_IDLE_SINCE_START,
                                     faust_aiokafka.SLOW_PROCESSING_STREAM_IDLE])
def test_an_idle_changelog_is_debug_and_an_idle_input_topic_an_error(
        message: str, caplog: pytest.LogCaptureFixture) -> None:
    quiet_changelog_idle_checks()
    quiet_changelog_idle_checks()  # installed once however many times the app starts
    consumer_log = logging.getLogger(FAUST_CONSUMER_LOGGER)
    assert len(consumer_log.filters) == 1
    # as Faust's consumer thread logs it: its label, the message and its page of explanations, (tp, when)
    explained = faust_aiokafka.SLOW_PROCESSING_EXPLAINED % {"setting": "stream_processing_timeout",
                                                             "current_value": 300.0}
    text = "[^---AIOKafkaConsumerThread]: " + message + explained
    with caplog.at_level(logging.DEBUG, logger=FAUST_CONSUMER_LOGGER):
        consumer_log.error(text, TP(CHANGELOG_TOPICS[0], 0), "5 minutes ago")
        consumer_log.error(text, TP(RUNS_TOPIC, 3), "5 minutes ago")
    levels = [(r.args[0].topic, r.levelname) for r in caplog.records]  # type: ignore[index]
    assert levels == [(CHANGELOG_TOPICS[0], "DEBUG"), (RUNS_TOPIC, "ERROR")]


def test_an_idle_changelog_is_not_written_at_all_where_debug_is_off(capsys: pytest.CaptureFixture[str]) -> None:
    """Demoted but still handed to the handlers, the check's page of text filled the log at every level: 11,708
    lines in 23 minutes of ``muster up``."""
    quiet_changelog_idle_checks()
    consumer_log = logging.getLogger(FAUST_CONSUMER_LOGGER)
    handler = logging.StreamHandler()  # as a service's: no level of its own, the loggers' levels decide
    root = logging.getLogger()
    saved_level, saved_consumer_level = root.level, consumer_log.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    consumer_log.setLevel(logging.NOTSET)
    try:
        message = faust_aiokafka.SLOW_PROCESSING_STREAM_IDLE_SINCE_START
        consumer_log.error("[^--AIOKafkaConsumerThread]: " + message, TP(CHANGELOG_TOPICS[0], 0), "5 minutes ago")
        consumer_log.error("[^--AIOKafkaConsumerThread]: " + message, TP(RUNS_TOPIC, 0), "5 minutes ago")
    finally:
        root.removeHandler(handler)
        root.setLevel(saved_level)
        consumer_log.setLevel(saved_consumer_level)
    written = capsys.readouterr().err
    assert CHANGELOG_TOPICS[0] not in written and RUNS_TOPIC in written


def test_other_errors_of_faust_are_left_as_they_are(caplog: pytest.LogCaptureFixture) -> None:
    quiet_changelog_idle_checks()
    with caplog.at_level(logging.DEBUG, logger=FAUST_CONSUMER_LOGGER):
        logging.getLogger(FAUST_CONSUMER_LOGGER).error(faust_aiokafka.SLOW_PROCESSING_NO_RECENT_FETCH,
                                                       TP(CHANGELOG_TOPICS[0], 0), "1 minute ago")
    assert [r.levelname for r in caplog.records] == ["ERROR"]
