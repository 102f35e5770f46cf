import json
import logging

from almanac.logs import JsonFormatter


def test_log_lines_are_json_with_event_and_extra_fields() -> None:
    record = logging.LogRecord("almanac.timer", logging.INFO, __file__, 1, "run.finished", None, None)
    record.event = "run.finished"
    record.run_id = 7
    record.status = "succeeded"
    line = json.loads(JsonFormatter().format(record))
    assert line["event"] == "run.finished" and line["run_id"] == 7 and line["status"] == "succeeded"
    assert line["level"] == "info" and line["logger"] == "almanac.timer" and "message" not in line
