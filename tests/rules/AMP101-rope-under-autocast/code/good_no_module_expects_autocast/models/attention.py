# Nothing in this library turns autocast off or on: nothing says its models run under autocast.
import torch


def scores(q, k):
    return (q @ k.transpose(-1, -2)).softmax(-1)
