"""`wanjax serve`: one process owns the model and serves the HTTP API (docs/serving.md)."""

from __future__ import annotations

import argparse
import errno
import ipaddress
import os
import socket
import time
from pathlib import Path
from typing import Any

from wanjax.domain.jobs import LEASE_SECONDS, MAX_LEASE_SECONDS
from wanjax.entrypoints.arguments import decimal_number, whole_number
from wanjax.entrypoints.cache_help import cache_epilog
from wanjax.entrypoints.interrupts import Interrupted, Stops

STOP_SECONDS = 30.0
"""How long a stopped server waits for its running batch to reach its next step (--stop-timeout)."""
MAX_STOP_SECONDS = 86400.0
"""--stop-timeout at most: a day, past any step."""
MAX_BODY_MB = 16384
"""--max-body-mb at most (16 GiB): a body is read into memory whole."""
MAX_QUEUE_SIZE = 100_000
"""--queue-size at most: each queued job keeps its record and media files."""
MAX_BATCH = 1024
"""--max-batch at most: far past what a device holds at once."""
STOP_POLL_SECONDS = 0.1  # how often that wait looks for a second signal


def add_serve_parser(commands: argparse._SubParsersAction) -> None:
    serve = commands.add_parser("serve", help="serve the video API (/v1/videos, as the openai SDK speaks it) and a browser page at /; "
                                   "one process owns the model", epilog=cache_epilog(),
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=whole_number(1, 65535), default=8000, help="port to listen on, 1 to 65535 (default: 8000)")
    serve.add_argument("--model", help="preset name, checkpoint folder or Hugging Face repo id (default: demo)")
    serve.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="any config key, the defaults of every request (a request may give the step cache's "
                       "keys below as fields of its own); repeatable")  # fmt: skip
    serve.add_argument("--output-dir", type=Path, default=Path("wanjax-server"),
                       help="where each job's folder (ID/: its video and media) and the job records (jobs.sqlite) go; "
                            "with --jobs, a folder every replica shares")  # fmt: skip
    serve.add_argument("--jobs", metavar="postgresql://USER@HOST:PORT/DATABASE",
                       help="keep the jobs in this PostgreSQL database, shared by every replica serving the same "
                            "model (default: jobs.sqlite in --output-dir, one server per folder)")  # fmt: skip
    serve.add_argument("--lease-seconds", type=decimal_number(), default=LEASE_SECONDS,
                       help="with --jobs: how long after a replica's last renewal (every third of it) its running "
                            f"jobs go to another replica, from 1 to {MAX_LEASE_SECONDS:g} (default: {LEASE_SECONDS:g})")  # fmt: skip
    serve.add_argument("--token", default=os.environ.get("WANJAX_TOKEN"),
                       help="require Authorization: Bearer TOKEN (default: $WANJAX_TOKEN; none: open to this machine only)")  # fmt: skip
    serve.add_argument("--lora-dir", type=Path,
                       help="the LoRA files requests may name (fields loras, loras_low); sets request_loras=true")  # fmt: skip
    serve.add_argument("--allow-no-token", action="store_true",
                       help="serve a --host other than loopback without a token (anyone who reaches it may use it)")  # fmt: skip
    serve.add_argument("--max-body-mb", type=decimal_number(0, MAX_BODY_MB, above=True), default=64.0,
                       help=f"largest request body, media included, in MiB, at most {MAX_BODY_MB} (a body is held in "
                            "memory); larger ones get 413 (default: 64)")  # fmt: skip
    serve.add_argument("--stop-timeout", type=decimal_number(0, MAX_STOP_SECONDS), default=STOP_SECONDS,
                       help="on SIGTERM/SIGINT, seconds to wait for the running batch's next step before exiting "
                            f"anyway, at most {MAX_STOP_SECONDS:g} (default: {STOP_SECONDS:g})")  # fmt: skip
    serve.add_argument("--queue-size", type=whole_number(1, MAX_QUEUE_SIZE), default=64,
                       help=f"jobs waiting at most (up to {MAX_QUEUE_SIZE}); more are refused with 429")  # fmt: skip
    serve.add_argument("--max-batch", type=whole_number(1, MAX_BATCH), default=4,
                       help="queued jobs of the same size, frames and steps run as one batch of at most this many "
                            f"(up to {MAX_BATCH})")  # fmt: skip


def serve(args: argparse.Namespace, overrides: dict[str, Any], stops: Stops) -> int:
    """Runs until SIGINT/SIGTERM, which shut down gracefully: uvicorn stops accepting connections
    and answers the requests in flight, then the running batch stops at its next step and its
    jobs are recorded as queued. Jobs accepted and not finished when the process ended (however
    it ended) run again when it restarts on the same --output-dir. Exits with the model's error
    when the model cannot load."""
    import uvicorn

    from wanjax.application.caches import configure_compilation_cache
    from wanjax.application.container import build_container
    from wanjax.application.job_runner import JobRunner
    from wanjax.application.lora_folder import LoraFolder
    from wanjax.application.presets import resolve_config
    from wanjax.domain.jobs import JobStoreSettings
    from wanjax.entrypoints.http_api import KEEP_ALIVE_SECONDS, LOOPBACK_NAMES, build_app

    loras = None if args.lora_dir is None else LoraFolder(args.lora_dir)
    if loras is not None:
        overrides = {"request_loras": "true", **overrides}
    check_access(args.host, args.token, allow_no_token=args.allow_no_token)
    output_dir = args.output_dir.absolute()
    jobs = JobStoreSettings(output_dir=output_dir, location=args.jobs, lease_seconds=args.lease_seconds)
    listening = bound_socket(args.host, args.port)
    config = resolve_config(args.model, overrides)
    container = build_container(config, jobs)
    store = container.job_store()  # SQLite: the output folder's lock held while the process runs
    configure_compilation_cache(config.startup.compilation_cache_dir)  # process-global: this process is ours
    service = container.service()
    server: uvicorn.Server | None = None

    def stop_serving(_: BaseException) -> None:
        if server is not None:
            server.should_exit = True

    runner = JobRunner(
        service,
        config,
        store,
        output_dir=output_dir,
        queue_capacity=args.queue_size,
        queue=container.job_queue(capacity=args.queue_size),
        max_batch=args.max_batch,
        model=args.model or config.model.location,
        loras=loras,
        on_load_failure=stop_serving,
        check_memory=container.memory_planner().checker(),  # measured now, before the model loads
    )
    names = {*LOOPBACK_NAMES, args.host, socket.gethostname(), socket.getfqdn()}
    app = build_app(runner, token=args.token, max_body_mb=args.max_body_mb, host_names=names)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_keep_alive=KEEP_ALIVE_SECONDS))
    runner.start()
    try:
        server.run(sockets=[listening])
    finally:
        stop_worker(runner, args.stop_timeout, stops)
    if runner.load_error is not None:
        raise runner.load_error
    return 0


def stop_worker(runner: Any, timeout: float, stops: Stops) -> None:
    """`runner.stop(timeout)`; when the worker is still inside a step, a compile, the conditioning or
    a VAE decode after `timeout`, or a second signal comes meanwhile (`stops.repeated`, polled: the
    signal handler does not raise inside the standard library's thread join), the process ends at
    once with the first signal's exit status (its running jobs are recorded as running: the next
    start runs them again). It ends with os._exit: the interpreter's own exit would tear its runtime
    down under a worker still inside a compiled computation, which aborts (exit status 134)."""
    import sys

    pending = sys.exc_info()[1]
    deadline = time.monotonic() + timeout
    try:
        runner.stop(0)
        while runner.ready and runner.working and not stops.repeated and (left := deadline - time.monotonic()) > 0:
            runner.stop(min(STOP_POLL_SECONDS, left))
    except Interrupted as again:
        pending = again
    if runner.working:
        stopped = f"stopped by {pending}" if isinstance(pending, Interrupted) else "stopped"
        print(f"wanjax: {stopped} before the running jobs reached their next step; they run again at the next start",
              file=sys.stderr, flush=True)  # fmt: skip
        sys.stdout.flush()
        os._exit(pending.exit_status if isinstance(pending, Interrupted) else 1)
    if isinstance(pending, Interrupted) and pending is not sys.exc_info()[1]:
        raise pending


def check_access(host: str, token: str | None, *, allow_no_token: bool) -> None:
    """ConfigError for an empty token, and for a server reachable from other machines without one
    (unless `allow_no_token`)."""
    from wanjax.domain.errors import ConfigError

    if token is not None and not token.strip():
        raise ConfigError("--token (or $WANJAX_TOKEN) is empty: give a token, or unset it to serve this machine only")
    if token is None and not allow_no_token and not _is_loopback(host):
        raise ConfigError(
            f"--host {host} serves other machines, and there is no --token: give one (or $WANJAX_TOKEN), "
            "or add --allow-no-token to let anyone who reaches it in"
        )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bound_socket(host: str, port: int) -> socket.socket:
    """A socket listening on `host`:`port`, bound before anything loads; ConfigError when the port is
    taken or the address is not this machine's."""
    from wanjax.domain.errors import ConfigError

    listening = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind((host, port))
    except OSError as err:
        listening.close()
        taken = "is in use (another server?); stop it or give another --port" if err.errno == errno.EADDRINUSE else f"cannot be listened on ({err.strerror})"
        raise ConfigError(f"port {port} on {host} {taken}") from None
    listening.listen(2048)
    return listening
