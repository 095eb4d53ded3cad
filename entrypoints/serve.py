"""`wanjax serve`: one process owns the model and serves the HTTP API (docs/serving.md)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any


def add_serve_parser(commands: argparse._SubParsersAction) -> None:
    serve = commands.add_parser("serve", help="serve the video API (/v1/videos, as the openai SDK speaks it) and a browser page at /; "
                                   "one process owns the model")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--model", help="preset name, checkpoint folder or Hugging Face repo id (default: demo)")
    serve.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="any config key, the defaults of every request; repeatable")  # fmt: skip
    serve.add_argument("--output-dir", type=Path, default=Path("wanjax-server"),
                       help="where each job's folder (ID/: its video and media) and the job records (jobs.sqlite) go")  # fmt: skip
    serve.add_argument("--token", default=os.environ.get("WANJAX_TOKEN"),
                       help="require Authorization: Bearer TOKEN (default: $WANJAX_TOKEN; none: open)")  # fmt: skip
    serve.add_argument("--lora-dir", type=Path,
                       help="the LoRA files requests may name (fields loras, loras_low); sets request_loras=true")  # fmt: skip
    serve.add_argument("--queue-size", type=int, default=64, help="jobs waiting at most; more are refused with 429")
    serve.add_argument("--max-batch", type=int, default=4,
                       help="queued jobs of the same size, frames and steps run as one batch of at most this many")  # fmt: skip


def serve(args: argparse.Namespace, overrides: dict[str, Any]) -> int:
    """Runs until SIGINT/SIGTERM, which shut down gracefully: uvicorn stops accepting connections
    and answers the requests in flight, then the running batch stops at its next step and its
    jobs are recorded as queued. Jobs accepted and not finished when the process ended (however
    it ended) run again when it restarts on the same --output-dir. Exits with the model's error
    when the model cannot load."""
    import uvicorn

    from wanjax.adapters.sqlite_jobs import SqliteJobStore
    from wanjax.application.caches import configure_compilation_cache
    from wanjax.application.container import build_container
    from wanjax.application.job_runner import JobRunner
    from wanjax.application.lora_folder import LoraFolder
    from wanjax.application.presets import resolve_config
    from wanjax.domain.errors import ConfigError
    from wanjax.entrypoints.http_api import KEEP_ALIVE_SECONDS, build_app

    if args.queue_size < 1 or args.max_batch < 1:
        raise ConfigError("--queue-size and --max-batch must be at least 1")
    loras = None if args.lora_dir is None else LoraFolder(args.lora_dir)
    if loras is not None:
        overrides = {"request_loras": "true", **overrides}
    config = resolve_config(args.model, overrides)
    configure_compilation_cache(config.startup.compilation_cache_dir)  # process-global: this process is ours
    service = build_container(config).service()
    output_dir = args.output_dir.absolute()
    server: uvicorn.Server | None = None

    def stop_serving(_: BaseException) -> None:
        if server is not None:
            server.should_exit = True

    runner = JobRunner(
        service,
        config,
        SqliteJobStore(output_dir / "jobs.sqlite"),
        output_dir=output_dir,
        queue_capacity=args.queue_size,
        max_batch=args.max_batch,
        model=args.model or config.model.location,
        loras=loras,
        on_load_failure=stop_serving,
    )
    app = build_app(runner, token=args.token)
    server = uvicorn.Server(
        uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", timeout_keep_alive=KEEP_ALIVE_SECONDS)
    )
    runner.start()
    try:
        server.run()
    finally:
        runner.stop()
    if runner.load_error is not None:
        raise runner.load_error
    return 0
