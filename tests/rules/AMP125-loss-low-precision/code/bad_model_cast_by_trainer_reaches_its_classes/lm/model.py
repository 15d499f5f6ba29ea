import torch.nn.functional as F
from torch import nn


class LMHead(nn.Module):
    """Built by TinyLM: the cast reaches it through the class that names it."""

    def __init__(self, dim: int, vocab: int):
        super().__init__()
        self.proj = nn.Linear(dim, vocab)

    def forward(self, x, labels=None):
        logits = self.proj(x)
        if labels is None:
            return logits
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten())  # ampdoctor: expect[AMP125]


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 128, dim: int = 64):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.head = LMHead(dim, vocab)
        self.tokens = make_head("token", dim, vocab)

    def forward(self, ids, labels=None):
        return self.head(self.embed(ids), labels)


class Classifier(nn.Module):
    def __init__(self, dim: int = 64, classes: int = 4):
        super().__init__()
        self.score = nn.Linear(dim, classes)

    @classmethod
    def from_pretrained(cls, path):
        return cls()

    def forward(self, features, labels=None):
        logits = self.score(features)
        if labels is None:
            return logits
        return F.cross_entropy(logits, labels)  # ampdoctor: expect[AMP125]


class Pretrainer(nn.Module):
    """A pretraining head over TinyLM that the trainer never builds: the cast does not run it."""

    def __init__(self, vocab: int = 128, dim: int = 64):
        super().__init__()
        self.lm = TinyLM(vocab, dim)
        self.next_sentence = nn.Linear(vocab, 2)

    def forward(self, ids, labels):
        logits = self.next_sentence(self.lm(ids)[:, 0])
        return F.cross_entropy(logits, labels)


class TokenHead(nn.Module):
    """Built by TinyLM through a table of heads: the cast reaches it."""

    def __init__(self, dim: int, vocab: int):
        super().__init__()
        self.proj = nn.Linear(dim, vocab)

    def forward(self, x, labels):
        logits = self.proj(x)
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten())  # ampdoctor: expect[AMP125]


HEADS = {"lm": LMHead, "token": TokenHead}


def make_head(kind: str, dim: int, vocab: int) -> nn.Module:
    return HEADS[kind](dim, vocab)
