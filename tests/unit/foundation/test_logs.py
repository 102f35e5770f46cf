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


def test_uvicorn_access_and_error_lines_are_json(capsys) -> None:  # type: ignore[no-untyped-def]
    """The HTTP server's own lines go through the same formatter (uvicorn is given our log config)."""
    import logging.config

    from almanac.logs import uvicorn_log_config

    logging.config.dictConfig(uvicorn_log_config("info"))
    try:
        logging.getLogger("uvicorn.access").info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5000", "GET", "/healthz",
                                                 "1.1", 200)
        logging.getLogger("uvicorn.error").info("Application startup complete.")
    finally:
        for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
            logging.getLogger(name).handlers.clear()
            logging.getLogger(name).propagate = True
    access, error = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert access["event"] == "http.request" and access["method"] == "GET" and access["status"] == 200
    assert access["path"] == "/healthz" and access["client"] == "127.0.0.1:5000"
    assert error["event"] == "Application startup complete." and error["logger"] == "uvicorn.error"


def test_configure_touches_no_private_logging_state() -> None:
    from pathlib import Path

    import almanac.logs

    assert "_srcfile" not in Path(almanac.logs.__file__).read_text()
