"""LoRAs over HTTP (fakes only): `loras` / `loras_low` name files of the server's `--lora-dir`,
as JSON or as a multipart field holding JSON; anything else is a 422 naming the field, before
anything is queued; GET /v1/loras lists the folder."""

import json
import re

import pytest
from fakes import FakeDenoiser, fake_service
from starlette.testclient import TestClient

from wanjax.adapters.sqlite_jobs import SqliteJobStore
from wanjax.application.job_requests import request_from_record
from wanjax.application.job_runner import JobRunner
from wanjax.application.lora_folder import LoraFolder
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.lora import LoraSpec
from wanjax.entrypoints.http_api import build_app

CONFIG = GenerationConfig.from_mapping(dict(height=64, width=96, num_frames=9, num_inference_steps=4, max_sequence_length=5))


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "loras"
    (root / "styles").mkdir(parents=True)
    (root / "fox.safetensors").write_bytes(b"x" * 10)
    (root / "styles" / "ink.safetensors").write_bytes(b"x" * 3)
    (root / "misfit.safetensors").write_bytes(b"x")
    (root / "notes.txt").write_text("not a LoRA")
    (tmp_path / "outside.safetensors").write_bytes(b"x")
    (root / "link.safetensors").symlink_to(tmp_path / "outside.safetensors")
    return root


def _client(tmp_path, folder, checked):
    def check(loras):
        for spec in (spec for specs in loras for spec in specs if spec.path.endswith("misfit.safetensors")):
            raise InvalidRequestError(f"loras: LoRA {spec.path}: 3 key(s) target no tensor of this transformer")  # as the real check
        checked.append(loras)

    service = fake_service(FakeDenoiser, lora_check=check)
    store = SqliteJobStore(tmp_path / "jobs.sqlite")
    runner = JobRunner(service, CONFIG, store, output_dir=tmp_path / "out", queue_capacity=4, max_batch=1,
                       loras=None if folder is None else LoraFolder(folder))  # fmt: skip
    return TestClient(build_app(runner)), runner


def test_the_folder_is_listed_by_name_and_size_without_escaping_links(tmp_path, folder):
    client, _ = _client(tmp_path, folder, [])
    listed = client.get("/v1/loras").json()
    assert [(item["id"], item["bytes"]) for item in listed["data"]] == [
        ("fox.safetensors", 10), ("misfit.safetensors", 1), ("styles/ink.safetensors", 3)
    ]


def test_loras_by_name_as_json_or_as_a_multipart_field_holding_json(tmp_path, folder):
    checked = []
    client, runner = _client(tmp_path, folder, checked)
    loras = [{"name": "fox.safetensors", "scale": 0.8}, {"name": "styles/ink.safetensors"}]
    accepted = client.post("/v1/videos", json={"prompt": "a fox", "loras": loras})
    assert accepted.status_code == 202, accepted.text
    expected = (LoraSpec(str(folder / "fox.safetensors"), 0.8), LoraSpec(str(folder / "styles" / "ink.safetensors"), 1.0))
    assert checked[-1] == (expected,)
    record = runner.get(accepted.json()["id"]).request
    assert record["loras"] == [{"path": spec.path, "scale": spec.scale} for spec in expected]
    assert request_from_record(record, {}, CONFIG).loras == expected  # what a restart runs
    body = "".join(f'--b\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
                   for name, value in (("prompt", "a fox"), ("loras", json.dumps(loras)))) + "--b--\r\n"  # fmt: skip
    form = client.post("/v1/videos", content=body.encode(), headers={"content-type": "multipart/form-data; boundary=b"})
    assert form.status_code == 202, form.text
    assert checked[-1] == (expected,)
    sdk_list = body.replace('name="loras"', 'name="loras[][name]"')  # what the SDK makes of a list of objects
    refused = client.post("/v1/videos", content=sdk_list.encode(), headers={"content-type": "multipart/form-data; boundary=b"})
    assert refused.status_code == 422 and "give loras as one field holding its JSON list" in refused.text


@pytest.mark.parametrize(
    "loras, message",
    [
        ([{"name": "../outside.safetensors"}], r"loras\[0\].name='../outside.safetensors': a path out of"),
        ([{"name": "/etc/fox.safetensors"}], "a path out of the server's LoRA folder"),
        ([{"name": "link.safetensors"}], "a path out of the server's LoRA folder"),
        ([{"name": "gone.safetensors"}], "no such file in the server's LoRA folder"),
        ([{"name": "notes.txt"}], "give the name of a .safetensors file"),
        ([{"name": "fox.safetensors", "scale": "strong"}], r"loras\[0\].scale='strong': must be a finite number from -100 to 100"),
        ([{"name": "fox.safetensors", "weight": 1}], r"loras\[0\]=.*give an object"),
        ({"name": "fox.safetensors"}, "loras: give a list of"),
        ([{"name": "misfit.safetensors"}], "loras: LoRA misfit.safetensors: 3 key"),
        ([{"name": "fox.safetensors"}] * 5000, "loras: 5000 LoRAs; a request applies at most 8 per expert"),
        ([{"name": "fox.safetensors", "scale": 1e6}], r"loras\[0\].scale=1000000.0: must be a finite number from -100"),
        ([{"name": "fox\x00.safetensors"}], "not a file's name"),
        ([{"name": "f" * 300 + ".safetensors"}], "not a file's name"),
        ([{"name": "a/" * 2100 + "fox.safetensors"}], "not a file's name"),
    ],
)
def test_what_cannot_be_applied_is_a_422_naming_the_field_and_nothing_is_queued(tmp_path, folder, loras, message):
    client, runner = _client(tmp_path, folder, [])
    refused = client.post("/v1/videos", json={"prompt": "a fox", "loras": loras})
    assert refused.status_code == 422
    assert runner.page(after=None, limit=10, newest_first=True) == []
    assert re.search(message, refused.json()["error"]["message"]), refused.json()
    assert str(folder) not in refused.text and str(tmp_path) not in refused.text  # no server path told


def test_a_server_without_a_lora_folder_takes_no_loras(tmp_path):
    client, runner = _client(tmp_path, None, [])
    refused = client.post("/v1/videos", json={"prompt": "a fox", "loras_low": [{"name": "fox.safetensors"}]})
    assert refused.status_code == 422
    assert "loras_low: this server takes no LoRAs; start it with --lora-dir" in refused.json()["error"]["message"]
    assert client.get("/v1/loras").json()["data"] == []
