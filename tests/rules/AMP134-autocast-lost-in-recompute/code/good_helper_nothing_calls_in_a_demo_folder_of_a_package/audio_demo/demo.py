# A demo run from its own folder (`python demo.py`): it imports `models` as a sibling package. The folder is no part
# of what the installable package ships, so nothing but this script calls into it.
import torch
from models.util import count_params

net = torch.nn.Linear(16, 16)
print(count_params(net))
