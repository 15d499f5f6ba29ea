"""ampdoctor inside the trainers people already use: one callback or one call each.

- `ampdoctor.integrations.transformers.AmpDoctorCallback`: HF `Trainer(callbacks=[AmpDoctorCallback()])`
- `ampdoctor.integrations.lightning.AmpDoctor`: Lightning `Trainer(callbacks=[AmpDoctor()])`
- `ampdoctor.integrations.accelerate.check(accelerator)` and `audit_step(accelerator)`

Each module imports its framework only when it is imported itself; the frameworks are optional extras
(`pip install 'ampdoctor[transformers]'`, `[lightning]`, `[accelerate]`). What they share (when to stop, what to
write, what to log) lives in `ampdoctor.integrations.outcome`.
"""
