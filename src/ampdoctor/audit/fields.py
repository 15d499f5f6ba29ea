"""The layout of the audit's op records, without torch: runtime rules index records with these names.

Records are plain tuples for speed. LASTI is the user frame's instruction offset (`recorder.line_of` turns
it into a line when a report needs one); FUNC is the op's id (`Recorder.ops` maps it back).
"""

SEQ, FUNC, IN_DT, IN_PROD, OUT_DT, MOD, PHASE, CODE, LASTI, INNER, AUTOCAST, EXTRA = range(12)
FORWARD, BACKWARD, OPTIMIZER = "forward", "backward", "optimizer"
