"""The HTTP request's media fields: base64 png/jpg images and an mp4 video, decoded before queueing."""

import base64
import io

import numpy as np
import pytest
from PIL import Image

from wanjax.adapters.media.video_files import Mp4Sink
from wanjax.application.job_requests import request_from_json
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import InvalidRequestError

CONFIG = GenerationConfig.from_mapping(dict(height=32, width=48, num_frames=5, num_inference_steps=4))


class _Checks:
    def check(self, requests):
        self.checked = requests


def _png(value: int) -> str:
    buffer = io.BytesIO()
    Image.fromarray(np.full((8, 8, 3), value, np.uint8)).save(buffer, format="png")
    return base64.b64encode(buffer.getvalue()).decode()


def test_first_and_last_frames_and_a_video_are_decoded(tmp_path):
    request = request_from_json({"prompt": "a fox", "image": _png(10), "last_image": _png(200)}, CONFIG, _Checks())
    assert request.image[0, 0, 0] == 10 and request.last_image[0, 0, 0] == 200

    Mp4Sink().write(np.full((7, 32, 48, 3), 128, np.uint8), tmp_path / "source.mp4", fps=16)
    body = {"prompt": "a fox", "video": base64.b64encode((tmp_path / "source.mp4").read_bytes()).decode(),
            "strength": 0.5}  # fmt: skip
    request = request_from_json(body, CONFIG, _Checks())
    assert request.video.shape == (5, 32, 48, 3) and request.strength == 0.5


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"last_image": "%%%"}, "last_image: not valid base64"),
        ({"video": base64.b64encode(b"not a video").decode()}, "video .* is not a readable video file"),
        ({"video": 3}, "video: give it as a base64 string of an mp4 file"),
    ],
)
def test_bad_media_fields_name_the_field(fields, message):
    with pytest.raises(InvalidRequestError, match=message):
        request_from_json({"prompt": "a fox", **fields}, CONFIG, _Checks())
