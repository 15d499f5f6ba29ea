from .mixed_precision import fp32_policy
