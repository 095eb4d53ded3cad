"""The video API served in-process for tests: a real JobRunner over a service, reached through
Starlette's test client (no port, no subprocess; tests/serving.py runs a real `wanjax serve`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from wanjax.adapters.sqlite_jobs import SqliteJobStore
from wanjax.application.job_runner import JobRunner
from wanjax.entrypoints.http_api import build_app

TOKEN = "s3cret"


@contextmanager
def in_process_server(
    service: Any, config: Any, folder: Path, **options: Any
) -> Iterator[tuple[JobRunner, TestClient]]:
    """(runner, client) of a started server over `service`, its jobs and videos in `folder`, one job at a
    time; `options`: more of JobRunner's. Stopped on exit."""
    store = SqliteJobStore(folder / "jobs.sqlite")
    runner = JobRunner(service, config, store, output_dir=folder, queue_capacity=2, max_batch=1, **options)
    runner.start()
    try:
        yield runner, TestClient(build_app(runner, token=TOKEN), headers={"Authorization": f"Bearer {TOKEN}"})
    finally:
        runner.stop(timeout=60)


def finished(client: TestClient, video_id: str, seconds: float = 240) -> dict[str, Any]:
    """The video's record once it has completed or failed (a TimeoutError after `seconds`)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        video = client.get(f"/v1/videos/{video_id}").json()
        if video["status"] in ("completed", "failed"):
            return video
        time.sleep(0.1)
    raise TimeoutError(f"video {video_id} did not finish")
