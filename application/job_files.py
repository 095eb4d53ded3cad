"""Each server job's files, in its own folder under the output folder: the media its client sent
(kept so that a restart can run the job again), its video and the video's thumbnail."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext, suppress
from pathlib import Path

import numpy as np

from wanjax.adapters.media.atomic import atomic_path, atomic_paths
from wanjax.adapters.media.images import encode_image
from wanjax.adapters.media.video_files import Mp4Sink
from wanjax.domain.errors import StoreError

VIDEO = "video.mp4"
THUMBNAIL = "thumbnail.webp"


class JobFiles:
    """`root/ID/`: `input-image`, `input-last_image`, `input-video` (the client's files as sent),
    `video.mp4` and `thumbnail.webp` (its first frame). Every file is written atomically."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def folder(self, job_id: str) -> Path:
        return self.root / job_id

    def video(self, job_id: str) -> Path:
        return self.folder(job_id) / VIDEO

    def thumbnail(self, job_id: str) -> Path:
        return self.folder(job_id) / THUMBNAIL

    def write_media(self, job_id: str, media: Mapping[str, bytes]) -> None:
        """The client's media, by request field (`image`, `last_image`, `video`); StoreError when
        they cannot be written (a full disk)."""
        try:
            for name, data in media.items():
                with atomic_path(self._media(job_id, name)) as temporary:
                    temporary.write_bytes(data)
        except OSError as err:
            raise StoreError(f"the output folder {self.root} cannot be written ({err}); free disk space "
                             "or make it writable") from None  # fmt: skip

    def read_media(self, job_id: str, names: Iterable[str]) -> dict[str, bytes]:
        return {name: self._media(job_id, name).read_bytes() for name in names}

    def check_media(self, job_id: str, names: Iterable[str]) -> None:
        """FileNotFoundError naming the first of the job's media files that is missing."""
        for name in names:
            if not self._media(job_id, name).is_file():
                raise FileNotFoundError(f"its file {self._media(job_id, name).relative_to(self.root)} is missing")

    def write_video(
        self, job_id: str, frames: np.ndarray, fps: int, *,
        committing: Callable[[], AbstractContextManager[object]] = nullcontext,
    ) -> None:  # fmt: skip
        """The video (uint8 frames [F, H, W, 3]) and its thumbnail (the first frame), each written
        under a temporary name of this write's own, both renamed into place inside `committing()`;
        when it refuses (or anything fails) neither is, and no temporary is left."""
        video, thumbnail = self.video(job_id), self.thumbnail(job_id)
        with atomic_paths([video, thumbnail], committing=committing) as (video_temporary, thumbnail_temporary):
            Mp4Sink().encode(frames, video_temporary, fps)
            encode_image(frames[0], thumbnail_temporary, thumbnail.suffix)

    def remove(self, job_id: str) -> None:
        shutil.rmtree(self.folder(job_id), ignore_errors=True)

    def remove_if_empty(self, job_id: str) -> None:
        """Removes the job's folder if nothing is left in it (a write into a deleted job's folder made it anew)."""
        with suppress(OSError):
            self.folder(job_id).rmdir()

    def _media(self, job_id: str, name: str) -> Path:
        return self.folder(job_id) / f"input-{name}"
