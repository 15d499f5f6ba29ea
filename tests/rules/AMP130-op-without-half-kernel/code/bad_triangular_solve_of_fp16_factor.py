# A triangular solve with an fp16 factor: LAPACK/cuBLAS trsm have no half kernel ("triangular_solve_cpu" not
# implemented for 'Half').
import torch


def apply_inverse_sqrt(chol, grad):
    chol = chol.half()
    return torch.linalg.solve_triangular(chol, grad, upper=False)  # ampdoctor: expect[AMP130:error]
