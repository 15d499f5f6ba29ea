# pytorch/pytorch#47906 (mmcv roi_align) and #38487: autocast does not reach inside a custom autograd Function, so
# the extension kernel receives bf16 features and fp32 boxes ("expected scalar type ... but found Float").
import torch

from . import _ext  # compiled CUDA extension


class RoIAlignFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, features, rois, output_size, spatial_scale):  # ampdoctor: expect[AMP110:warning]
        ctx.save_for_backward(rois)
        return _ext.roi_align_forward(features, rois, output_size, spatial_scale)

    @staticmethod
    def backward(ctx, grad_output):
        (rois,) = ctx.saved_tensors
        return _ext.roi_align_backward(grad_output, rois), None, None, None


def detector_step(backbone, images, proposals):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        feats = backbone(images)
        return RoIAlignFunction.apply(feats, proposals, (7, 7), 1 / 16)
