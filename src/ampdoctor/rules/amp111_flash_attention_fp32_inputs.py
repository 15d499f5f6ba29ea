"""AMP111 flash-attention-fp32-inputs: FlashAttention is called with fp32 q/k/v.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP111`)."""

from __future__ import annotations



