"""`wanjax serve` whose denoising steps each last at least STEP_SECONDS longer, so that a test's
long job is still running when the test signals or cancels it, however fast the machine; a job
whose prompt begins with "stuck" spends STUCK_SECONDS before its first step, as a long compile,
conditioning or VAE decode would (no step callback meanwhile). With $WANJAX_TEST_RUNS, each run
appends to that file `started PID PROMPT` when it starts and `finished PID PROMPT` when it returns,
a line per request (so a test sees which server runs what, and counts the runs finished); the VAE
decode of a run whose prompt begins with "held decode" appends `decoding PID PROMPT` and lasts
until the file $WANJAX_TEST_RELEASE exists (a decode as long as a test needs, with no sleep that races).

Arguments: the CLI's own (`serve ...`).
"""

import os
import sys
import time

import wanjax.entrypoints.cli as cli
from wanjax.adapters.jax.vae.autoencoder import JaxVideoAutoencoder
from wanjax.application.service import GenerationService

STEP_SECONDS = 0.02
STUCK_SECONDS = 300

generate_batch = GenerationService.generate_batch
decode_to_uint8 = JaxVideoAutoencoder.decode_to_uint8
held = []  # the requests of the run whose decode is held, while it runs (one worker thread runs one)


def generate_batch_with_slow_steps(self, requests, *, on_step=None, **kwargs):
    def slow_step(done: int, total: int) -> None:
        time.sleep(STEP_SECONDS)
        if on_step is not None:
            on_step(done, total)

    if any(request.prompt.startswith("stuck") for request in requests):
        time.sleep(STUCK_SECONDS)
    record_runs("started", requests)
    if any(request.prompt.startswith("held decode") for request in requests):
        held[:] = requests
    try:
        result = generate_batch(self, requests, on_step=slow_step, **kwargs)
    finally:
        held.clear()
    record_runs("finished", requests)
    return result


def decode_held(self, latents):
    if held:
        record_runs("decoding", held)
        deadline = time.monotonic() + STUCK_SECONDS
        while not os.path.exists(os.environ["WANJAX_TEST_RELEASE"]) and time.monotonic() < deadline:
            time.sleep(0.02)
    return decode_to_uint8(self, latents)


def record_runs(event, requests):
    if "WANJAX_TEST_RUNS" in os.environ:
        with open(os.environ["WANJAX_TEST_RUNS"], "a") as runs:  # a line per write: appends do not interleave
            for request in requests:
                runs.write(f"{event} {os.getpid()} {request.prompt}\n")
                runs.flush()


GenerationService.generate_batch = generate_batch_with_slow_steps
JaxVideoAutoencoder.decode_to_uint8 = decode_held
sys.exit(cli.main(sys.argv[1:]))
