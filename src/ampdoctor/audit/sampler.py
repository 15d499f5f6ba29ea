"""Sampling for the audit (`every=K`): between two recorded optimizer steps the recording is paused, with no
dispatch mode, module hook or autocast wrapper in the script's way; it resumes at the end of the step before a
sample, where the mode stack is as it was when the audit was entered."""

from __future__ import annotations

from ampdoctor.audit.dispatch import RecordingMode, _current_autograd_node, mode_stack


class Sampler:
    """Pause and resume of `Recorder`; the step counting that decides when lives in `OptimizerTracking._opt_post`."""

    def _pause(self) -> None:
        """Between two sampled steps: recording is off and out of the way until `_resume`."""
        self.active = False
        self.paused = True
        self._paused_depth = 0
        if self.values is not None:
            self.values.flush()
            self.values.new_window()
        # What unrecorded steps do to a tensor (in-place updates, a cache refilled) is not seen: its producer and
        # value record from this sample would be stale in the next one, so the next sample starts without them.
        self.producers.clear()
        self.produced.clear()
        self._detach(keep_autocast=True)  # the wrappers follow autocast through the pause (one call per context)

    def _resume(self) -> None:
        """Record the next step (called at the end of the step before it, in torch's loop over the optimizer
        post-hooks: module hooks, not optimizer hooks, may be added here). The dispatch mode goes back on the stack
        only where the stack is as it was when the audit was entered; otherwise this sample is skipped."""
        if self._mode is None:  # (else it stayed under a mode the script entered above it, passing ops through)
            if mode_stack() != self._base_stack or _current_autograd_node() is not None:
                self.samples_skipped += 1
                return  # (inside a backward node, autograd restores the mode stack when the node ends)
            mode = RecordingMode(self)
            mode.enter()
            self._mode = mode
        self._enter_calls()
        self._hook_modules()
        if self._autocast_methods is None:
            self._patch_autocast()
        self.refresh_autocast()
        self.paused = False
        self.active = True
