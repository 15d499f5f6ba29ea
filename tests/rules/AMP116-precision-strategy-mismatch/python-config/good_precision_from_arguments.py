# The precision comes from the command line: unknown, so no (precision, strategy) pair is judged.
import sys

import lightning as L

trainer = L.Trainer(devices=8, strategy="deepspeed_stage_2", precision=sys.argv[1])
