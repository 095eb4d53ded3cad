"""Each server job's files, in its own folder under the output folder: the media its client sent
(kept so that a restart can run the job again), its video and the video's thumbnail."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager, ExitStack, nullcontext, suppress
from pathlib import Path

import numpy as np

from wanjax.adapters.media.atomic import atomic_path, atomic_paths
from wanjax.adapters.media.images import encode_image
from wanjax.adapters.media.video_files import Mp4Sink, whole_fragments
from wanjax.domain.errors import StoreError

VIDEO = "video.mp4"
THUMBNAIL = "thumbnail.webp"


class JobFiles:
    """`root/ID/`: `input-image`, `input-last_image`, `input-video` (the client's files as sent),
    `video.mp4` and `thumbnail.webp` (its first frame). Every file is written atomically."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._writing: dict[str, JobVideo] = {}

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

    def video_writer(self, job_id: str, fps: int) -> JobVideo:
        """The job's video written as its frames come (`JobVideo`); until it is committed or discarded,
        `partial(job_id)` is what of it is readable."""
        writer = JobVideo(self.video(job_id), self.thumbnail(job_id), fps, done=lambda: self._writing.pop(job_id, None))
        self._writing[job_id] = writer
        return writer

    def partial(self, job_id: str) -> bytes | None:
        """The whole fragments of the video this server is writing for the job (a playable mp4 of the
        frames so far), None when it writes none (not started, finished, or run by another replica)."""
        writer = self._writing.get(job_id)
        return None if writer is None else writer.readable()

    def remove(self, job_id: str) -> None:
        shutil.rmtree(self.folder(job_id), ignore_errors=True)

    def remove_if_empty(self, job_id: str) -> None:
        """Removes the job's folder if nothing is left in it (a write into a deleted job's folder made it anew)."""
        with suppress(OSError):
            self.folder(job_id).rmdir()

    def _media(self, job_id: str, name: str) -> Path:
        return self.folder(job_id) / f"input-{name}"


class JobVideo:
    """A job's video written as its frames come: `append(frames [f, H, W, 3] uint8)` encodes them at
    once into its (fragmented) mp4 under a temporary name of this write's own (the thumbnail, from the
    first frame, beside it), so its whole fragments are a playable video while the job runs
    (`readable`). `commit(committing)` finishes both files and renames them into place inside
    `committing()`; when it refuses (the job was lost or cancelled), or on `discard()`, neither is,
    and no temporary is left: a partial file belongs to the write that made it, as the video does."""

    def __init__(self, video: Path, thumbnail: Path, fps: int, *, done: Callable[[], object]) -> None:
        self._files = ExitStack()
        self._temporaries = self._files.enter_context(atomic_paths([video, thumbnail], committing=self._committing))
        self._committing_to: Callable[[], AbstractContextManager[object]] = nullcontext
        self._writer = Mp4Sink().writer(self._temporaries[0], fps)
        self._thumbnail_suffix = thumbnail.suffix
        self._done = done
        self._started = self._gone = False

    def append(self, frames: np.ndarray) -> None:
        """Writes the frames; once the job's folder is gone (the job was deleted while it ran) it
        writes nothing more, and `commit` will find the job cancelled."""
        if self._gone:
            return
        try:
            if not self._started:
                encode_image(frames[0], self._temporaries[1], self._thumbnail_suffix)
                self._started = True
            self._writer.append(frames)
        except OSError:
            if self._temporaries[0].parent.is_dir():
                raise
            self._gone = True
            self._writer.abandon()

    def readable(self) -> bytes | None:
        """The video's bytes up to its last whole fragment; None before the first."""
        with suppress(OSError):
            return whole_fragments(self._temporaries[0].read_bytes())
        return None

    def commit(self, committing: Callable[[], AbstractContextManager[object]] = nullcontext) -> None:
        self._committing_to = committing
        try:
            self._writer.close()
        except BaseException:
            self.discard()
            raise
        try:
            self._files.close()
        finally:
            self._done()

    def discard(self) -> None:
        self._writer.abandon()
        try:
            self._files.__exit__(_Discarded, _Discarded(), None)
        finally:
            self._done()

    def _committing(self) -> AbstractContextManager[object]:
        return self._committing_to()


class _Discarded(Exception):
    """The write was given up (the files are removed)."""
