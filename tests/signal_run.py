"""`wanjax generate` in a process that a test stops with a signal at a chosen moment.

Arguments: PHASE (`denoise`: after the first denoising step; `write`: the mp4 written under its
temporary name, not yet renamed; `demo`: writing the demo checkpoint into its staging folder),
then the CLI's own. On reaching PHASE the run prints
`reached PHASE` and waits there for the test's signal.
"""

import os
import sys
import time

import wanjax.entrypoints.cli as cli

phase, argv = sys.argv[1], sys.argv[2:]


def wait_for_the_signal() -> None:
    print(f"reached {phase}", flush=True)
    time.sleep(600)


if phase == "denoise":
    report_step = cli.StepProgress.__call__

    def on_step(self, done, total):
        report_step(self, done, total)
        if done == 1:
            wait_for_the_signal()

    cli.StepProgress.__call__ = on_step
elif phase == "write":
    rename = os.replace

    def rename_after_the_signal(source, target):
        if str(target).endswith(".mp4"):  # the output, written in full under its temporary name
            wait_for_the_signal()
        rename(source, target)

    os.replace = rename_after_the_signal
elif phase == "demo":
    import wanjax.adapters.demo.checkpoint as demo

    def write_then_wait(folder, seed=0):
        (folder / "model_index.json").write_text("{}")  # part of the demo written into its staging folder
        wait_for_the_signal()

    demo.write_demo_checkpoint = write_then_wait
else:
    sys.exit(f"unknown phase {phase!r}")
sys.exit(cli.main(argv))
