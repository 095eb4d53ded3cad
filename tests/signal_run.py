"""`wanjax generate` in a process that a test stops with a signal at a chosen moment.

Arguments: PHASE (`denoise`: after the first denoising step; `write`: frames written into the mp4
under its temporary name, as each segment is decoded, not yet renamed; `demo`: writing the demo checkpoint into its staging folder;
`swallowed-denoise`, `swallowed-write`: the same two points of the run, where something swallows
the signal's exception as JAX's garbage-collector callback can, and the run goes on; `rename`:
renaming the output into place, where it waits 2 s and goes on), then the CLI's own. On reaching
PHASE the run prints `reached PHASE` and waits there for the test's signal.
"""

import os
import sys
import time

import wanjax.entrypoints.cli as cli

phase, argv = sys.argv[1], sys.argv[2:]


def wait_for_the_signal() -> None:
    print(f"reached {phase}", flush=True)
    if phase == "rename":
        time.sleep(2)
        return
    if not phase.startswith("swallowed"):
        time.sleep(600)
        return
    try:
        time.sleep(600)
    except BaseException:  # noqa: S110 - what an "Exception ignored in ..." amounts to
        pass


if phase in ("denoise", "swallowed-denoise"):
    report_step = cli.StepProgress.__call__

    def on_step(self, done, total):
        report_step(self, done, total)
        if done == 1:
            wait_for_the_signal()

    cli.StepProgress.__call__ = on_step
elif phase in ("write", "swallowed-write"):  # not in the rename itself: that holds the signals off
    from wanjax.adapters.media.video_files import Mp4Writer

    append = Mp4Writer.append

    def append_then_wait(self, frames):
        append(self, frames)
        wait_for_the_signal()

    Mp4Writer.append = append_then_wait
elif phase == "rename":
    rename = os.replace

    def rename_after_a_wait(source, target):
        if str(target).endswith(".mp4"):
            wait_for_the_signal()
        rename(source, target)

    os.replace = rename_after_a_wait
elif phase == "demo":
    import wanjax.adapters.demo.checkpoint as demo

    def write_then_wait(folder, seed=0):
        (folder / "model_index.json").write_text("{}")  # part of the demo written into its staging folder
        wait_for_the_signal()

    demo.write_demo_checkpoint = write_then_wait
else:
    sys.exit(f"unknown phase {phase!r}")
sys.exit(cli.main(argv))
