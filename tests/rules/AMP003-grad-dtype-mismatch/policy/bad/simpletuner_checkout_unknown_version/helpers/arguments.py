# Argument code that handles the flag through a table: neither the old nor the 26ee784 wording.
GRADIENT_PRECISION_BY_OPTIMIZER = {"adamw_bf16": "unmodified"}


def parse_cmdline_args(parser, input_args=None):
    args = parser.parse_args(input_args)
    setattr(args, "gradient_precision", GRADIENT_PRECISION_BY_OPTIMIZER.get(args.optimizer, args.gradient_precision))
    return args
