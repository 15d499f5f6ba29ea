# Argument code of a SimpleTuner checkout from before 26ee784 (Sep 2024): `--gradient_precision` is taken as given.
def parse_cmdline_args(parser, input_args=None):
    args = parser.parse_args(input_args)
    if args.optimizer == "adamw_bf16" and args.mixed_precision != "bf16":
        raise ValueError("adamw_bf16 needs bf16 weights")
    return args
