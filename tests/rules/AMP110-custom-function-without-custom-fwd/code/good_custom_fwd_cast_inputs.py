# mcarilli's answer in pytorch/pytorch#38487: `custom_fwd(cast_inputs=torch.float32)` runs the extension with
# autocast off on fp32 inputs; a Function that disables autocast itself and casts is covered too.
import torch

from . import _ext  # compiled CUDA extension


class RoIAlignFunction(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(ctx, features, rois, output_size, spatial_scale):
        ctx.save_for_backward(rois)
        return _ext.roi_align_forward(features, rois, output_size, spatial_scale)

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, grad_output):
        (rois,) = ctx.saved_tensors
        return _ext.roi_align_backward(grad_output, rois), None, None, None


class DeformConvFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, offset, weight):
        with torch.autocast("cuda", enabled=False):
            return _ext.deform_conv_forward(x.float(), offset.float(), weight.float())


def detector_step(backbone, images, proposals):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        feats = backbone(images)
        return RoIAlignFunction.apply(feats, proposals, (7, 7), 1 / 16)
