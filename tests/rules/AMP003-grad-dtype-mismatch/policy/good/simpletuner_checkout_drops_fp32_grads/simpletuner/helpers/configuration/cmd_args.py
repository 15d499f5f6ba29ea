# Argument code of a SimpleTuner checkout from 26ee784 (Sep 2024) on: fp32 gradients only for optimizers that need them.
def finalise(args, optimizer_wants_fp32_grads):
    if optimizer_wants_fp32_grads(args.optimizer):
        args.gradient_precision = "fp32"
    else:
        if args.gradient_precision == "fp32":
            args.gradient_precision = "unmodified"
    return args
