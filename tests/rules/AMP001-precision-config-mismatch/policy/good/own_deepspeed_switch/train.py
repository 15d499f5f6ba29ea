import argparse

import deepspeed


def main(model):
    parser = argparse.ArgumentParser()
    parser.add_argument("--config")
    parser = deepspeed.add_config_arguments(parser)
    args = parser.parse_args()
    engine, *_ = deepspeed.initialize(args=args, model=model, model_parameters=model.parameters())
    return engine
