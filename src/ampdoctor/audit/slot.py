"""The process's one recording slot: the module and optimizer hooks and the autocast patch an audit installs are
process-wide, so one recorder records at a time; a second one is refused with the name of the first."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ampdoctor.audit.recorder import Recorder

# The recorder holding the process-wide hooks (None: none), and the lock that makes taking it atomic.
_ACTIVE_LOCK = threading.Lock()
_active: "Recorder | None" = None


def active_recorder() -> "Recorder | None":
    """The recorder recording in this process now, if any."""
    return _active


def claim(recorder: "Recorder") -> None:
    """Take the slot for `recorder`, or refuse with the recording that holds it."""
    global _active
    with _ACTIVE_LOCK:
        holder = _active
        if holder is not None:
            where = "this thread" if holder._thread == threading.get_ident() else "another thread"
            raise RuntimeError(
                f"ampdoctor: cannot start {recorder.label}: {holder.label} is already recording in this process "
                f"(entered in {where}). One audit records at a time (the module, optimizer and autocast hooks it "
                f"installs are process-wide): exit that audit first.")
        _active = recorder
        recorder._thread = threading.get_ident()


def unclaim(recorder: "Recorder") -> None:
    global _active
    with _ACTIVE_LOCK:
        if _active is recorder:
            _active = None
