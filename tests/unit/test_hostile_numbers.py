"""Numbers no one means, in every numeric CLI flag and every numeric HTTP field: digits of other
scripts ("²", "١٢"), thousands of digits, inf and nan. Each is a refusal naming the flag or field
(exit status 2 in one line; a 4xx), never a traceback or a 500. The flags are read from the
parser and the fields from the request's schema, so a new one is covered as it lands; nothing
here generates (every value is refused while the flags or fields are read)."""

from __future__ import annotations

import argparse
import json
import re

import attrs
import pytest
from fakes import FakeDenoiser, fake_service
from starlette.testclient import TestClient

from wanjax.adapters.sqlite_jobs import SqliteJobStore
from wanjax.application.job_runner import JobRunner
from wanjax.application.lora_folder import LoraFolder
from wanjax.domain.config import ROUTES, GenerationConfig
from wanjax.domain.errors import ConfigError
from wanjax.domain.modes.options import ModeOptionDefaults
from wanjax.domain.requests import GenerationRequest
from wanjax.entrypoints.cli import build_parser, main
from wanjax.entrypoints.http_api import build_app

TEXTS = ["²", "١٢", "１２", "1" * 5000, "9" * 400, "-" + "9" * 400, "1e400", "inf", "-inf", "nan", "1_000", ""]
"""Flag values: other scripts' digits (superscript, Arabic-Indic, fullwidth), thousands of digits, past
a float's range, non-finite, Python's digit separator, nothing."""
JSON_NUMBERS = ["1" * 5000, "-" + "1" * 5000, "1e400", "-1e400", "NaN", "Infinity", '"²"', '"١٢"', '"' + "1" * 5000 + '"']
"""HTTP field values as raw JSON: numbers past any field and past Python's 4300-digit reading, the
non-finite ones Python's JSON reader takes, and texts of other scripts' digits or thousands of them."""
CONFIG = GenerationConfig.from_mapping(dict(height=64, width=96, num_frames=9, num_inference_steps=4, max_sequence_length=5))
HTTP_FIELDS = ["size", "seconds"] + [
    field.name for kind in (GenerationRequest, ModeOptionDefaults) for field in attrs.fields(kind)
    if re.search(r"\b(int|float)\b", str(field.type))
]
"""The video API's own numeric fields and every numeric field of the request it makes (its modes' options too)."""


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command path, parser) of every (sub)command."""
    yield path, parser
    for action in parser._actions:  # argparse's own structure: the only way to walk a parser
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


def _typed_flags():
    """(command, flag) of every flag read by a `type` that is not text or a path."""
    for path, parser in _commands(build_parser()):
        for action in parser._actions:
            if action.option_strings and action.type not in (None, str) and getattr(action.type, "__name__", "") != "Path":
                yield path, action


NUMERIC_FLAGS = [(path, action.option_strings[0]) for path, action in _typed_flags()]


def test_every_typed_flag_reads_numbers_the_one_checked_way():
    """A new flag with `type=int` or `type=float` would take '١٢' and 5000 digits: none may."""
    assert len(NUMERIC_FLAGS) > 20 and (("plan",), "--device-memory") in NUMERIC_FLAGS
    for path, action in _typed_flags():
        assert action.type.__qualname__.startswith(("whole_number.", "decimal_number.", "memory_size")), (path, action.option_strings)


REQUIRED = {("generate",): ["--prompt", "x"], ("plan",): ["--prompt", "x"]}


@pytest.mark.parametrize(("command", "flag"), NUMERIC_FLAGS, ids=lambda v: " ".join(v) if isinstance(v, tuple) else v)
def test_a_numeric_flag_refuses_such_numbers_in_one_line(command, flag, capsys):
    for text in TEXTS:
        assert main([*command, *REQUIRED.get(command, []), f"{flag}={text}"]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and flag in err and "Traceback" not in err, (text[:20], err)


@pytest.fixture
def client(tmp_path):
    (tmp_path / "loras").mkdir()
    (tmp_path / "loras" / "fox.safetensors").write_bytes(b"x")
    store = SqliteJobStore(tmp_path / "jobs.sqlite")
    runner = JobRunner(fake_service(FakeDenoiser), CONFIG, store, output_dir=tmp_path / "out", queue_capacity=4,
                       max_batch=1, loras=LoraFolder(tmp_path / "loras"))  # fmt: skip
    return TestClient(build_app(runner), raise_server_exceptions=False)


def _refused(response, named: str) -> None:
    assert response.status_code == 422, (named, response.status_code, response.text[:300])
    message = response.json()["error"]["message"]
    assert named in message and len(message) < 500 and "\n" not in message, message


@pytest.mark.parametrize("field", HTTP_FIELDS)
def test_a_numeric_field_refuses_such_numbers_as_json_and_as_a_form_field(client, field):
    assert {"height", "num_inference_steps", "seed", "segment_frame_length"} <= set(HTTP_FIELDS)
    for raw in JSON_NUMBERS:
        body = f'{{"prompt": "x", "{field}": {raw}}}'
        _refused(client.post("/v1/videos", content=body, headers={"content-type": "application/json"}), field)
        text = json.loads(raw) if raw.startswith('"') else raw
        form = f'--b\r\nContent-Disposition: form-data; name="prompt"\r\n\r\nx\r\n' \
               f'--b\r\nContent-Disposition: form-data; name="{field}"\r\n\r\n{text}\r\n--b--\r\n'  # fmt: skip
        _refused(client.post("/v1/videos", content=form.encode(), headers={"content-type": "multipart/form-data; boundary=b"}), field)


def test_a_loras_scale_and_the_lists_limit_refuse_such_numbers(client):
    for raw in JSON_NUMBERS:
        body = f'{{"prompt": "x", "loras": [{{"name": "fox.safetensors", "scale": {raw}}}]}}'
        _refused(client.post("/v1/videos", content=body, headers={"content-type": "application/json"}), "loras[0].scale")
    for text in TEXTS:
        _refused(client.get("/v1/videos", params={"limit": text}), "limit")


NUMERIC_KEYS = [key for key, (_, field) in ROUTES.items()
                if field.metadata.get("item", field.metadata.get("parse", type(field.default))) in (int, float)]  # fmt: skip


@pytest.mark.parametrize("size", ["0.5", "0.5B", "9" * 60, "2000000TiB"])
def test_a_memory_size_below_a_byte_or_past_an_exbibyte_is_refused(size, capsys):
    assert main(["plan", "--prompt", "x", "--device-memory", size]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--device-memory" in err and "from 1 byte to 1 EiB" in err


@pytest.mark.parametrize("key", NUMERIC_KEYS)
def test_a_numeric_config_key_refuses_such_numbers_naming_itself(key):
    """`--set KEY=VALUE` and a preset's text values: read as the flags are (nothing, for an optional
    key, means none)."""
    for text in filter(None, TEXTS):
        with pytest.raises(ConfigError, match=f"--set: {re.escape(key)}="):
            GenerationConfig().with_overrides({key: text})


def test_a_content_length_of_thousands_of_digits_is_a_413(client):
    response = client.post("/v1/videos", content=b"{}", headers={"content-type": "application/json", "content-length": "9" * 5000})
    assert response.status_code == 413
