# Predicts on a mesh: the nearest neighbours of each point come from a scikit-learn estimator fitted to the points,
# which trains no network.
import torch
from sklearn.neighbors import NearestNeighbors

from model import Head


def predict(checkpoint, points, features):
    model = Head(64, 3)
    model.load_state_dict(torch.load(checkpoint))
    neighbours = NearestNeighbors(n_neighbors=8, algorithm="ball_tree").fit(points).kneighbors(points, return_distance=False)
    with torch.inference_mode():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(features[neighbours].mean(1))
    return out.float()
