"""Text-to-video: the prompt alone, on any model that runs without an input image (a request
without inputs on an image-to-video model runs as image-to-video, which asks for the image)."""

from __future__ import annotations

from wanjax.domain.modes.base import GenerationMode


class TextToVideo(GenerationMode):
    name = "text-to-video"


TEXT_TO_VIDEO = TextToVideo()
