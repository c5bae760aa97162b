"""zkcompat/cli/logfmt.py and `serve --log-format/--log-level`: text stays key=value, json is
one object per line with the message's key=value pairs as fields."""

from __future__ import annotations

import json
import logging
import re
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime

import pytest

from conformance_tests.servers import free_port
from tests.conftest import REPO_ROOT, zkcompat_env
from zkcompat.cli import logfmt

pytestmark = pytest.mark.timeout(60)


def test_pairs_parse_bare_and_quoted_values():
    message = ("event=connection_close remote=127.0.0.1:5000 reason='peer said \\'bye\\''"
               ' detail="a b" empty= session=0x1f')
    assert logfmt.pairs(message) == {"event": "connection_close", "remote": "127.0.0.1:5000",
                                     "reason": "peer said 'bye'", "detail": "a b",
                                     "empty": "", "session": "0x1f"}


def _record(msg: str, *args, exc_info=None) -> logging.LogRecord:
    return logging.LogRecord("zkcompat.test", logging.WARNING, __file__, 1, msg, args, exc_info)


def test_json_line_has_the_pairs_and_the_message():
    line = logfmt.JsonFormatter().format(_record("event=x level=odd key=%r", "v w"))
    obj = json.loads(line)
    assert (obj["level"], obj["logger"], obj["event"], obj["key"]) == (
        "WARNING", "zkcompat.test", "x", "v w")
    assert obj["field_level"] == "odd"  # a pair never overwrites the record's own fields
    assert obj["msg"] == "event=x level=odd key='v w'"
    assert "\n" not in line


def test_json_numbers_and_booleans_are_json_numbers_and_booleans():
    line = logfmt.JsonFormatter().format(_record(
        "event=x port=%d ok=%s off=false ratio=1.5 neg=-3 zero=0 zxid=0x1f lead=007 "
        "quoted='123' text=abc big=18446744073709551616 exp=1e3 inf=inf", 23228, True))
    obj = json.loads(line)
    assert {k: obj[k] for k in ("port", "ok", "off", "ratio", "neg", "zero", "big")} == {
        "port": 23228, "ok": True, "off": False, "ratio": 1.5, "neg": -3, "zero": 0,
        "big": 2**64}
    assert type(obj["port"]) is int and type(obj["ok"]) is bool and type(obj["zero"]) is int
    # Hex ids, leading zeros, a quoted value and anything not a JSON number stay strings.
    assert {k: obj[k] for k in ("zxid", "lead", "quoted", "text", "exp", "inf")} == {
        "zxid": "0x1f", "lead": "007", "quoted": "123", "text": "abc", "exp": "1e3",
        "inf": "inf"}


def test_json_timestamp_is_iso_8601_in_utc():
    record = _record("event=x")
    record.created = 1_700_000_000.25
    obj = json.loads(logfmt.JsonFormatter().format(record))
    assert obj["ts"] == "2023-11-14T22:13:20.250Z"
    assert datetime.fromisoformat(obj["ts"]).timestamp() == 1_700_000_000.25


def test_json_line_keeps_the_traceback_on_one_line():
    try:
        raise ValueError("boom")
    except ValueError:
        line = logfmt.JsonFormatter().format(_record("event=crash", exc_info=sys.exc_info()))
    assert "\n" not in line and "ValueError: boom" in json.loads(line)["exc"]


def _serve(tmp_path, *args: str):
    port = free_port()
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(f"clientPort={port}\nclientPortAddress=127.0.0.1\n"
                   f"dataDir={tmp_path / 'data'}\nadmin.enableServer=false\n"
                   "noSuchSetting=1\npreAllocSize=65536\n")
    popen = subprocess.Popen([sys.executable, "-m", "zkcompat", "serve", "--config", str(cfg),
                              *args], cwd=REPO_ROOT, env=zkcompat_env(),
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert popen.poll() is None and time.monotonic() < deadline, "serve did not start"
            time.sleep(0.1)
    popen.terminate()
    _, err = popen.communicate(timeout=20)
    # SIGTERM still ends the server as the signal does, after the line saying so.
    assert popen.returncode == -signal.SIGTERM, err
    return err.splitlines()


def test_serve_json_logs_one_object_per_line(tmp_path):
    lines = _serve(tmp_path, "--log-format", "json")
    logs = [json.loads(line) for line in lines]  # every line, the start-up banner too
    assert [o for o in logs if o.get("event") == "config_unknown_key"
            and o.get("key") == "noSuchSetting" and o["level"] == "WARNING"]
    assert [o for o in logs if o.get("event") == "config_not_implemented"
            and o.get("keys") == "preAllocSize"]
    assert [o for o in logs if o["level"] == "INFO"]  # info is the default level
    listening = [o for o in logs if o.get("event") == "listening"]
    assert len(listening) == 1 and type(listening[0]["port"]) is int
    assert [o["event"] for o in logs if o.get("event") in ("starting", "listening")] == [
        "starting", "listening"]
    assert all(datetime.fromisoformat(o["ts"]).utcoffset().total_seconds() == 0 for o in logs)
    assert logs[-1]["event"] == "shutdown" and logs[-1]["signal"] == "SIGTERM"


def test_serve_text_logs_sigterm(tmp_path):
    lines = _serve(tmp_path)
    assert re.search(r" level=INFO logger=\S+ event=shutdown signal=SIGTERM$", lines[-1]), lines


def test_serve_text_logs_at_warning_level_drop_info(tmp_path):
    lines = _serve(tmp_path, "--log-level", "WARNING")
    logged = [line for line in lines if " level=" in line]
    assert logged and all(" level=WARNING " in line or " level=ERROR " in line
                          for line in logged)
    assert any("event=config_unknown_key key=noSuchSetting" in line for line in logged)


def test_serve_refuses_an_unknown_format(tmp_path):
    done = subprocess.run([sys.executable, "-m", "zkcompat", "serve", "--log-format", "xml"],
                          cwd=tmp_path, env=zkcompat_env(), capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 2 and "xml" in done.stderr


def test_sim_progress_line_carries_no_server_events():
    """`zkcompat sim` rewrites one progress line on stderr ("\\r[i/n] seed ..."): no server
    event may land on it (faults make servers log; cluster.run mutes them only in a run)."""
    done = subprocess.run([sys.executable, "-m", "zkcompat", "sim", "--seeds", "3",
                           "--duration", "5"], cwd=REPO_ROOT, env=zkcompat_env(),
                          capture_output=True, timeout=120)  # bytes: text would eat \r
    stderr = done.stderr.decode()
    assert done.returncode == 0, done.stdout.decode() + stderr
    progress, wall = stderr.rstrip("\n").split("\n")
    assert re.fullmatch(r"(\r\[\d/3\] seed \d ok failed=0 [0-9.]+ seeds/s){3}", progress), progress
    assert wall.startswith("wall ")
