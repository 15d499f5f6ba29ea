# Argument code of a SimpleTuner checkout from before 26ee784 (Sep 2024): `--gradient_precision` is defined and only
# ever set to fp32, so a config's `--gradient_precision=fp32` is taken as given.
def add_arguments(parser):
    parser.add_argument("--gradient_precision", choices=["unmodified", "fp32"], default=None)


def parse_cmdline_args(parser, input_args=None):
    args = parser.parse_args(input_args)
    if args.gradient_accumulation_steps > 1 and args.gradient_precision == "fp32":
        args.gradient_precision = "fp32"
    return args
