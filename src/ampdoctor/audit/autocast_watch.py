"""Autocast watch for the audit: inside `__torch_dispatch__` autocast always reads as disabled, so its state is
followed at Python level, by wrapping `torch.autocast.__enter__`/`__exit__` while the audit records (restored on
exit unless other code patched over the wrapper)."""

from __future__ import annotations

from typing import Any

import torch


class AutocastWatch:
    """The autocast half of `Recorder`; the state it reads and writes is set up in `Recorder.__init__`."""

    def refresh_autocast(self) -> None:
        # Inside __torch_dispatch__ autocast always reads as disabled, so the state is tracked at
        # Python level: on entry and on every autocast context enter/exit.
        on = torch.is_autocast_enabled(self.device_type)
        self.autocast_on = on
        if on:
            self.autocast_dtypes.add(torch.get_autocast_dtype(self.device_type))

    def autocast_changed(self) -> None:
        """An autocast context was entered or exited. While paused between samples the state is only followed (a
        context entered there may exit after recording resumes, through the `__exit__` Python looked up on entry)."""
        if self.paused and self.here():
            self.autocast_on = torch.is_autocast_enabled(self.device_type)
        elif self._mode is not None and self.here():
            self.refresh_autocast()

    def _patch_autocast(self) -> None:
        cls = torch.amp.autocast_mode.autocast
        enter, exit_ = cls.__enter__, cls.__exit__
        self._autocast_methods = (cls, enter, exit_)
        recorder = self

        # Autocast state is per thread: another thread's contexts say nothing about this recording. Once the
        # recording has ended the wrappers only call through, so one left behind (re-installed by code that saved
        # it while the audit ran and restores it later) changes nothing.
        def __enter__(ac: Any) -> Any:
            out = enter(ac)
            recorder.autocast_changed()
            return out

        def __exit__(ac: Any, *exc: Any) -> Any:
            out = exit_(ac, *exc)
            recorder.autocast_changed()
            return out

        cls.__enter__, cls.__exit__ = __enter__, __exit__
        self._autocast_wrappers = (__enter__, __exit__)

    def _unpatch_autocast(self) -> None:
        if self._autocast_methods is None:
            return
        cls, enter, exit_ = self._autocast_methods
        ours_enter, ours_exit = self._autocast_wrappers
        # Restore what was there, unless code that ran inside the audit has patched autocast over the wrapper: its
        # patch stays (restoring would undo it), and the wrapper underneath only calls through from now on.
        if cls.__dict__.get("__enter__") is ours_enter:
            cls.__enter__ = enter
        if cls.__dict__.get("__exit__") is ours_exit:
            cls.__exit__ = exit_
        self._autocast_methods = None
        # The wrappers hold the recorder: kept here they would make a cycle, and a recorder (its ~10^5 records, a
        # tuple each) would wait for a garbage collection to be freed, which then walks every one of them, instead
        # of going when its audit goes.
        self._autocast_wrappers = (None, None)
