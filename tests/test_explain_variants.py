"""explain on the ways an error reaches a tracker other than as printed: a title that lost its closing quote, the
docs' wording of a warning, a message whose cause is only named by what came with it, a reporter's words."""

import pytest

from ampdoctor.explain import explain


def first(text):
    cands = explain(text)
    assert cands, f"no candidate for {text!r}"
    return cands[0]


def test_a_kernel_message_copied_into_a_title_without_its_closing_quote_keeps_its_rule():
    cand = first("\"_amp_foreach_non_finite_check_and_unscale_cuda\" not implemented for 'BFloat16\nwhile training")
    assert cand.rule.id == "AMP004" and not cand.guess


def test_the_docs_notice_that_cuda_amp_will_be_deprecated_is_the_deprecation_rule():
    cand = first("torch.cuda.amp.autocast(args...) and torch.cpu.amp.autocast(args...) will be deprecated. "
                 'Please use torch.autocast("cuda", args...) or torch.autocast("cpu", args...) instead.')
    assert cand.rule.id == "AMP108" and not cand.guess


def test_accelerate_refusing_a_launch_precision_the_deepspeed_config_contradicts_is_a_config_mismatch():
    cand = first("ValueError: `--mixed_precision` arg cannot be set to `bf16` when `fp16` is set in the DeepSpeed config file.")
    assert cand.rule.id == "AMP001" and not cand.guess


def test_a_half_overflow_is_the_mask_fill_rule_with_confidence_only_where_the_fill_is_in_view():
    bare = "RuntimeError: value cannot be converted to type at::Half without overflow"
    assert first(bare).rule.id == "AMP133" and first(bare).guess  # any scalar written into a half tensor says so
    filled = "    scores = scores.masked_fill(mask == 0, -1e9)\n" + bare
    assert first(filled).rule.id == "AMP133" and not first(filled).guess


def test_a_checkpoint_call_whose_dtype_error_surfaces_in_backward_is_the_recompute_rule():
    text = ("with torch.autocast('cuda', dtype=torch.bfloat16):\n    out = ckpt.checkpoint(block, x)\nout.sum().backward()\n"
            "RuntimeError: expected mat1 and mat2 to have the same dtype, but got: c10::BFloat16 != float")
    cand = first(text)
    # the checkpoint call and the backward are read by the signature itself: no context beside it confirms the
    # shared matmul message, so it is first and a guess
    assert cand.rule.id == "AMP134" and cand.guess


def test_a_nan_loss_is_the_overflow_rule_only_in_a_run_said_to_be_fp16_and_below_a_rule_whose_cue_is_in_view():
    # A NaN loss has many causes: it is never named with confidence, whatever comes with it (TELLING_WEIGHT); the
    # ranking still follows the context.
    in_fp16 = first("Fine-tuning t5-base with --fp16, the training loss becomes nan after 200 steps.")
    assert in_fp16.rule.id == "AMP212" and in_fp16.guess
    unsaid = explain("Fine-tuning t5-base, the training loss becomes nan after 200 steps.")
    assert not unsaid or unsaid[0].guess
    # autocast() without a dtype runs fp16 on CUDA whatever the config says: that rule's own cue is in the text
    cued = first("with torch.cuda.amp.autocast():\n    loss = model(x)\nstep 100 | loss: nan  (fp16 overflow?)")
    assert cued.rule.id == "AMP107" and cued.guess
    # a softmax in view is AMP124's cue, and still only a guess (the overflow may be anywhere)
    softmax = first("after a big matmul and the softmax that follows I get NaN loss")
    assert softmax.rule.id == "AMP124" and softmax.guess


def test_a_shared_message_whose_context_points_at_two_rules_is_a_guess():
    # A LoRA layer under DeepSpeed: the deepspeed frame is AMP001's context and `lora` AMP127's; both rules read
    # the same message, so the text does not decide between them.
    both = ("deepspeed zero2, bf16, lora adapters on an 8-bit base\n    result = lora_layer(x)\n"
            "RuntimeError: expected scalar type Float but found BFloat16")
    cands = explain(both)
    assert cands[0].guess and {"AMP001", "AMP127"} <= {c.rule.id for c in cands[:3]}
    # With only one rule's context in view, that rule is named first; AMP001's bare reading of the same message
    # scores nearly as well, so it stays a guess.
    one = "lora adapters\n    result = lora_layer(x)\nRuntimeError: expected scalar type Float but found BFloat16"
    assert first(one).rule.id == "AMP127" and first(one).guess


def test_an_index_put_mismatch_is_the_loss_rule_with_confidence_only_where_a_loss_is_in_view():
    message = ("RuntimeError: Index put requires the source and destination dtypes match, "
               "got BFloat16 for the destination and Float for the source.")
    cache = "    self.k_cache[:, :, input_pos] = k_val\n" + message  # a kv cache written during generation
    assert first(cache).rule.id == "AMP125" and first(cache).guess
    in_loss = "    loss = criterion(logits, targets)\n" + message
    assert first(in_loss).rule.id == "AMP125" and not first(in_loss).guess


def test_the_shared_scalar_type_message_is_the_bnb_rule_only_beside_a_quantized_layer():
    message = "RuntimeError: expected scalar type Half but found Float"
    beside = "  File \"bitsandbytes/nn/modules.py\", line 468, in forward\n    out = bnb.matmul_4bit(x, self.weight.t())\n" + message
    assert first(beside).rule.id == "AMP135" and not first(beside).guess
    assert first(message).rule.id != "AMP135" and first(message).guess


def test_older_pytorchs_half_overflow_message_without_at_is_the_mask_fill_rule():
    text = ("    alignment.data.masked_fill_(mask, self.score_mask_value)\n"
            "RuntimeError: value cannot be converted to type Half without overflow: -inf")
    cand = first(text)
    assert cand.rule.id == "AMP133" and cand.basis == "signature" and not cand.guess


def test_fp16_named_before_the_overflow_is_the_overflow_rule():
    cand = first("When training in half precision (FP16) I keep getting numerical overflow errors; FP32 trains fine.")
    assert cand.rule.id == "AMP212" and cand.basis == "signature"


def test_torch_cpu_amp_deprecation_warning_alone_is_the_deprecation_rule_by_its_signature():
    cand = first("torch/utils/checkpoint.py:1399: FutureWarning: `torch.cpu.amp.autocast(args...)` is deprecated. "
                 "Please use `torch.amp.autocast('cpu', args...)` instead.")
    assert cand.rule.id == "AMP108" and cand.basis == "signature" and not cand.guess


def test_an_overflow_told_to_end_in_inf_and_nan_is_the_overflow_rule_above_a_softmax_in_the_story():
    text = ("Mixed precision causes NaN loss: the attention matmul gives huge numbers and overflows,\n"
            "so after the softmax I get inf and nan values.")
    cand = first(text)
    assert cand.rule.id == "AMP212" and cand.basis == "signature"


def test_loss_nans_in_a_run_set_to_fp16_is_the_overflow_rule():
    cand = first("with precision set to fp16\nthe loss nans immediately")
    assert cand.rule.id == "AMP212" and cand.basis == "signature"


def test_a_reporter_saying_the_unscale_fails_because_the_gradients_are_half_is_the_fp16_params_rule():
    told = "Calling clip_grad_norm_ starts the unscale, and that fails since the gradients are in fp16."
    cand = first(told)
    assert cand.rule.id == "AMP105" and cand.guess  # first (the scaler's clipping call is in view), told in words
    bare = first("the unscale step fails: grads are half")
    assert bare.rule.id == "AMP105" and bare.guess


def test_fsdp2_refusing_a_unit_of_two_float_dtypes_reads_as_fsdp1_does_an_adapter_guess_until_lora_is_in_view():
    msg = "AssertionError: FSDP expects uniform original parameter dtype but got {torch.bfloat16, torch.float32}"
    cand = first(msg)
    assert cand.rule.id == "AMP127" and cand.guess and cand.basis == "signature"
    assert not first("peft_config = LoraConfig(r=8)\n" + msg).guess


def test_a_gradient_refused_for_its_dtype_with_the_c10_namespace_printed_is_the_grad_dtype_rule():
    cand = first("RuntimeError: attempting to assign a gradient with dtype 'c10::BFloat16' to a tensor with grad_dtype 'Float'.")
    assert cand.rule.id == "AMP003" and not cand.guess


def test_autocast_refusing_a_device_type_it_supports_was_given_a_torch_device():
    cand = first("RuntimeError: User specified an unsupported autocast device_type 'cuda'")
    assert cand.rule.id == "AMP140" and not cand.guess
    # a device string with an index is another slip: no signature reads it
    indexed = explain("RuntimeError: User specified an unsupported autocast device_type 'cuda:0'")
    assert all(c.basis == "wording" for c in indexed)


def test_autocast_refusing_a_backend_an_older_torch_has_no_autocast_for_only_ranks_the_device_type_rule():
    # 'mps' refused as the plain string by a torch without MPS autocast (a platform limit, no rule's cause) reads the
    # same as a torch.device refused: the device-type rule is offered, never decided
    for device in ("mps", "xpu", "hpu", "xla"):
        cand = first(f"RuntimeError: User specified an unsupported autocast device_type '{device}'")
        assert cand.rule.id == "AMP140" and cand.guess and cand.basis == "signature", device


def test_bf16_and_fp16_refused_together_outside_deepspeeds_file_is_the_both_enabled_rule_as_a_guess():
    cand = first("AssertionError: In config, bf16 and fp16 cannot both be true")
    assert cand.rule.id == "AMP115" and cand.guess and cand.basis == "signature"
    assert not first("AssertionError: bfloat16 and fp16 modes cannot be simultaneously enabled").guess
    # transformers' TrainingArguments, in its own words
    cand = first("ValueError: At most one of fp16 and bf16 can be True, but not both")
    assert cand.rule.id == "AMP115" and cand.guess and cand.basis == "signature"


def test_an_ops_dtype_check_naming_both_half_types_ranks_the_mixed_half_rule_and_leaves_room_for_the_causes():
    msg = "RuntimeError: expected scalar type Half but found BFloat16"
    frame = '  File "/app/diffusion/sampling.py", line 155, in sample_euler\n    denoised = model(x, sigma)\n'
    cands = explain(frame + msg)
    assert cands[0].rule.id == "AMP121" and all(c.guess for c in cands)
    # an fp32 adapter or a bnb compute dtype ends in the same message: both stay among the first three
    assert {"AMP127", "AMP135"} <= {c.rule.id for c in cands[:3]}
    # and with the 4-bit layer in view, that cause is named
    bnb = '    out = bnb.matmul_4bit(x, self.weight.t(), quant_state=self.weight.quant_state)\n'
    cand = first(bnb + msg)
    assert cand.rule.id == "AMP135" and not cand.guess


def test_the_mixed_matmul_message_beside_sdpa_is_the_attention_mask_rule_as_a_guess():
    frame = "    out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)\n"
    msg = "RuntimeError: expected mat1 and mat2 to have the same dtype, but got: float != c10::BFloat16"
    cands = explain(frame + msg)
    assert cands[0].rule.id == "AMP122" and all(c.guess for c in cands)
    assert "AMP201" in [c.rule.id for c in cands[:3]]  # any promotion ahead of a matmul prints the same message
    assert first(msg).rule.id != "AMP122"  # without SDPA in view nothing points at a mask


def test_a_reporter_saying_a_half_dtype_cannot_hold_the_ids_or_positions_is_the_positions_rule_as_a_guess():
    for told in ("bfloat16 is not accurate enough to represent the position ids past 256",
                 "in fp16 we cannot exactly represent timesteps above 2048"):
        cand = first(told)
        assert cand.rule.id == "AMP103" and cand.guess and cand.basis == "signature", told


def test_a_nan_told_as_the_mixed_precision_runs_is_the_overflow_rule_as_a_guess():
    cand = first("In mixed-precision training the forward pass starts to give NaN after a few hundred steps; fp32 is fine.")
    assert cand.rule.id == "AMP212" and cand.basis == "signature" and cand.guess
    cand = first("Training with automatic mixed precision, I get nan in the encoder outputs")
    assert cand.rule.id == "AMP212" and cand.basis == "signature" and cand.guess
    # a NaN with no sign of a half-precision run is no reading of this rule's signature
    assert all(c.basis == "wording" for c in explain("the forward pass starts to give NaN after a few hundred steps"))


def test_fp16s_largest_value_named_alone_is_a_guess_and_a_value_gone_past_it_is_an_overflow():
    # 65504 by itself only names fp16's range, which a text explaining any fp16 problem quotes.
    told = first("fp16 can only hold values up to 65504, which is why we moved this model to bf16.")
    assert told.rule.id == "AMP212" and told.guess
    # a value said to go past it is an overflow seen, named first; told in words, it stays a guess
    seen = first("one activation reached 71234.5, which exceeds the fp16 maximum of 65504, and became inf")
    assert seen.rule.id == "AMP212" and seen.guess and seen.basis == "signature"


def test_a_bare_autocast_said_to_run_fp16_is_named_before_the_fp16_range_it_quotes():
    # What made the run fp16 is in view (autocast() with no dtype); 65504 only names fp16's range.
    text = ("autocast() without a dtype argument always runs torch.float16 (FP16), whatever --dtype bfloat16 says.\n"
            "FP16 only reaches 65504.")
    cands = explain(text, limit=3)
    assert cands[0].rule.id == "AMP107" and cands[0].guess  # first, but told in words: a guess
    assert any(c.rule.id == "AMP212" and c.guess for c in explain(text, limit=None, weak=True))
    # with the autocast rule taken out, what is left is a guess
    from ampdoctor.core import catalog
    rest = explain(text, limit=3, rules=tuple(r for r in catalog() if r.id != "AMP107"))
    assert all(c.guess for c in rest)


def test_an_accumulation_in_bf16_is_the_accumulator_rule_with_confidence_only_where_a_loss_or_metric_is_summed():
    # the same words tell a norm's sum of squares or gradients gathered in bf16: generic
    kernel = first("the kernel does the accumulation of partial products in bfloat16 before writing the output")
    assert kernel.rule.id == "AMP137" and kernel.guess
    metric = first("on_epoch reduction of the logged metrics is an accumulation kept in bfloat16, so it stops growing")
    assert metric.rule.id == "AMP137" and metric.guess  # first where a metric is summed; told in words, a guess


def test_a_variance_taken_in_half_precision_is_the_norm_rule_ahead_of_the_accumulator_rule():
    text = "RMSNorm output is wrong for bf16 inputs: the internal sum-of-squares accumulation happens in bfloat16."
    cands = explain(text, limit=3)
    assert cands[0].rule.id == "AMP123" and cands[0].guess  # first, but told in words: a guess
    assert all(c.guess for c in cands if c.rule.id == "AMP137")
    # without a norm in view, a variance in bf16 is only a guess (an optimizer's second moment is one too)
    assert first("the variance estimate is kept in bf16 and drifts").guess


def test_a_cpu_norm_refusing_half_parameters_beside_another_dtype_ranks_the_input_rule_and_keeps_the_half_mix_rule():
    cands = explain("RuntimeError: mixed dtype (CPU): expect parameter to have scalar type of Float", limit=3)
    assert cands[0].rule.id == "AMP131" and cands[0].guess and cands[0].basis == "signature"
    assert "AMP121" in [c.rule.id for c in cands if c.basis == "signature"]


def test_an_invalid_gradient_is_read_by_whose_backward_returned_it():
    half_float = "expected type torch.cuda.HalfTensor but got torch.cuda.FloatTensor"
    builtin = first(f"RuntimeError: Function MulBackward0 returned an invalid gradient at index 0 - {half_float}")
    assert builtin.rule.id == "AMP201" and builtin.guess  # a built-in op's node: its forward mixed the dtypes
    custom = first(f"RuntimeError: Function _ResampleBackward returned an invalid gradient at index 0 - {half_float}")
    assert custom.rule.id == "AMP110" and custom.basis == "signature"  # a custom Function's own backward
    device = "RuntimeError: Function _ResampleBackward returned an invalid gradient at index 0 - expected type torch.FloatTensor but got torch.cuda.FloatTensor"
    assert all(c.basis == "wording" for c in explain(device))  # a device, not a dtype


def test_the_qkv_dtype_triple_without_its_expected_prefix_is_still_read_as_the_sdpa_dtype_message():
    # a title or a truncated paste keeps only the dtypes: still the q/k/v dtype refusal, read by the same rules
    promoted = first("help 1080ti --> got query.dtype: struct c10::Half key.dtype: float and value.dtype: float")
    assert promoted.rule.id == "AMP201" and promoted.basis == "signature" and promoted.guess
    halves = first("RuntimeError: query.dtype: c10::Half key.dtype: c10::BFloat16 and value.dtype: c10::BFloat16")
    assert halves.rule.id == "AMP121" and halves.basis == "signature"
    # the attention mask's message names query.dtype too, but no key.dtype after it
    mask = first("Expected attn_mask dtype to be bool or to match query dtype, but got attn_mask.dtype: float and "
                 "query.dtype: c10::BFloat16 instead.")
    assert mask.rule.id == "AMP122"


def test_deepspeeds_middle_wording_of_its_parameter_dtype_check_is_read_like_its_older_and_newer_wordings():
    for msg, rules in (("AssertionError: fp16 is enabled but one or several model parameters have dtype that is not fp16",
                        {"AMP001", "AMP116", "AMP139"}),
                       ("AssertionError: fp16 is not enabled but one or several model parameters have dtype of fp16",
                        {"AMP001", "AMP116"})):
        cands = explain(msg, limit=None, weak=True)
        assert {c.rule.id for c in cands if c.basis == "signature"} == rules and cands[0].guess, msg


def test_message_families_of_bf16_on_hardware_without_it_beyond_cuda_capability():
    # torch's MPS refusal since bf16 came to macOS 14, and inductor skipping a bf16 frame on a pre-Ampere GPU
    assert first("TypeError: MPS BFloat16 is only supported on MacOS 14 or newer").rule.id == "AMP113"
    warned = first("compile_fx.py:2509: UserWarning: Tesla T4 does not support bfloat16 compilation natively, skipping")
    assert warned.rule.id == "AMP113"
    # SDPA's memory-efficient kernel before sm_80 takes fp16 and fp32 only, and says so when given bf16
    sdpa = first("UserWarning: Expected query, key and value to all be of dtype: {Half, Float}. Got Query dtype: "
                 "c10::BFloat16, Key dtype: c10::BFloat16, and Value dtype: c10::BFloat16 instead.")
    assert sdpa.rule.id == "AMP113" and sdpa.basis == "signature"


def test_sdpa_and_xformers_saying_their_flash_kernels_refuse_fp32_inputs_rank_the_fp32_qkv_rule():
    sdpa = first("UserWarning: Expected query, key and value to all be of dtype: {Half, BFloat16}. Got Query dtype: "
                 "float, Key dtype: float, and Value dtype: float instead.")
    assert sdpa.rule.id == "AMP111" and not sdpa.guess
    xformers = first("NotImplementedError: No operator found for `memory_efficient_attention_forward` with inputs:\n"
                     "     query       : shape=(1, 4096, 8, 40) (torch.float32)\n"
                     "`flshattF@v2.3.6` is not supported because:\n"
                     "    dtype=torch.float32 (supported: {torch.float16, torch.bfloat16})")
    assert xformers.rule.id == "AMP111" and xformers.guess  # one reason of several the operator list gives


def test_lightning_turning_fp16_amp_on_cpu_into_bf16_is_the_precision_strategy_rule():
    for text in ("You passed `Trainer(accelerator='cpu', precision='16-mixed')` but AMP with fp16 is not supported on "
                 "CPU. Using `precision='bf16-mixed'` instead.",
                 "You passed `Trainer(accelerator='cpu', precision=16)` but native AMP is not supported on CPU. Using "
                 "`precision='bf16'` instead."):
        assert first(text).rule.id == "AMP116", text


def test_addmm_checking_the_tensor_it_adds_into_reads_as_the_matmul_dtype_family():
    # "self and mat2": addmm's check on its self operand (a bias, or a LoRA kernel's `out.addmm_(x @ A, B)`)
    bare = explain("RuntimeError: self and mat2 must have the same dtype, but got BFloat16 and Float", limit=3)
    read = {c.rule.id for c in bare if c.basis == "signature"}
    assert read >= {"AMP201", "AMP131"} and all(c.guess for c in bare)
    lora = first('  File "unsloth/kernels/utils.py", line 1167, in matmul_lora\n    out.addmm_(XA, B.to(dtype), alpha = s)\n'
                 "RuntimeError: self and mat2 must have the same dtype, but got Half and BFloat16")
    assert lora.rule.id == "AMP127" and lora.basis == "signature"


def test_older_cudnn_and_multimodal_merge_wordings_of_an_input_in_another_dtype():
    cudnn = ("RuntimeError: Expected tensor for argument #1 'input' to have the same type as tensor for argument #2 "
             "'weight'; but type torch.cuda.HalfTensor does not equal torch.cuda.FloatTensor (while checking arguments "
             "for cudnn_convolution)")
    assert first(cudnn).rule.id == "AMP131" and first(cudnn).guess  # generic alone
    framed = first('  File "torch/nn/modules/conv.py", line 3, in _conv_forward\n' + cudnn)
    assert framed.rule.id == "AMP131" and not framed.guess
    merge = first("RuntimeError: masked_scatter_: expected self and source to have same dtypes but got Half and Float")
    assert merge.rule.id == "AMP131" and merge.guess


def test_a_deformable_convolution_named_by_its_short_names_is_the_custom_op_rule_context():
    # DCN / dconv: extension ops autocast does not cover (the long name "deform" was context already)
    for where in ('  File "models/backbone.py", line 88, in forward\n    x = self.dcn(x, offset)\n',
                  'cfg = get_config("cascade_mask_rcnn_X_152_FPN_gn_dconv.yaml")\n'):
        cand = first(where + "RuntimeError: expected scalar type Half but found Float")
        assert cand.rule.id == "AMP110", where


def test_transformers_warning_of_flash_attention_2_without_a_dtype_ranks_the_fp32_model_rule():
    cand = first("You are attempting to use Flash Attention 2 without specifying a torch dtype. This might lead to "
                 "unexpected behaviour")
    assert cand.rule.id == "AMP112" and cand.basis == "signature" and cand.guess  # a warning: the model may be cast later


# Library wordings harvested from the libraries' own checks (each text our own reproduction of the message).
LIBRARY_WORDINGS = [
    # torch before grad_dtype: python_variable.cpp's check of a .grad assignment
    ("RuntimeError: attempting to assign a gradient with dtype 'c10::BFloat16' to a tensor with dtype 'float'. "
     "Please ensure that the gradient and the tensor have the same dtype", "AMP003", False),
    # Lightning's precision plugins refusing a scaler for bf16 (old and new precision names)
    ("MisconfigurationException: `precision='bf16'` does not use a scaler, found <GradScaler object at 0x7f00>.",
     "AMP004", False),
    ("ValueError: `precision='bf16-mixed'` does not use a scaler, found <ShardedGradScaler object at 0x7f00>.",
     "AMP004", False),
    # flash-attention's device check for bf16
    ("RuntimeError: bfloat16 is only supported on Ampere GPUs or newer", "AMP113", False),
    # the memory-efficient SDPA kernel's check of an additive mask
    ("RuntimeError: invalid dtype for bias - should match query's dtype", "AMP122", False),
    # NumPy's refusal of bf16, wrapped over two lines as a report quotes it
    ("raises `TypeError: Got unsupported\nScalarType BFloat16` when passed a tensor", "AMP129", False),
    # CPU norm kernels and cuDNN's RNN check: an input in another dtype than the parameters
    ("RuntimeError: mixed dtype (CPU): all inputs must share same datatype.", "AMP131", True),
    ("RuntimeError: Input and parameter tensors are not the same dtype, found input tensor with Float and parameter "
     "tensor with Half", "AMP131", False),
    # flash-attention's q/k/v check and index/reduction ops refusing two float dtypes: generic, guesses
    ("RuntimeError: query and key must have the same dtype", "AMP201", True),
    ("RuntimeError: index_add_(): self (Float) and source (BFloat16) must have the same scalar type", "AMP201", True),
    ("RuntimeError: dot : expected both vectors to have same dtype, but found Half and Float", "AMP201", True),
    ("RuntimeError: scatter(): Expected self.dtype to be equal to src.dtype", "AMP201", True),
    ("RuntimeError: Input dtypes must be the same, got: input float, batch1: c10::BFloat16, batch2: c10::BFloat16",
     "AMP201", True),
    ("RuntimeError: grid_sampler(): expected input and grid to have same dtype, but input has c10::Half and grid has "
     "float", "AMP201", True),
    # Triton's tl.dot with an fp32 operand beside a half one
    ("AssertionError: Both operands must be same dtype. Got fp32 and fp16", "AMP201", True),
    # bitsandbytes' optimizer kernels given bf16 gradients
    ("ValueError: Gradient+optimizer bit data type combination not supported: grad torch.bfloat16, optimizer "
     "torch.uint8", "AMP120", False),
    # an fp64 input (NumPy's default) into a half layer, and an out=/in-place result in another float dtype
    ("RuntimeError: Input type (double) and bias type (c10::Half) should be the same", "AMP131", False),
    ("RuntimeError: Expected out tensor to have dtype c10::BFloat16, but got float instead", "AMP201", True),
    # torch.multinomial given inf/NaN probabilities by an fp16 model's sampling: never more than a guess
    ("model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.float16)\n"
     "out = model.generate(**inputs, do_sample=True)\n"
     "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0", "AMP212", True),
    # DeepSpeed ZeRO-3 all-gathering LoRA parameters beside a half base: generic alone, the rule's with peft in view
    ("TypeError: output tensor must have the same type as input tensor", "AMP127", True),
    ("model = get_peft_model(model, lora_config)\n  File \"deepspeed/runtime/zero/partition_parameters.py\", line 1200\n"
     "TypeError: output tensor must have the same type as input tensor", "AMP127", False),
    # torch.quantile's refusal of anything but fp32/fp64 (names no dtype): an op without a half kernel, a guess
    ("RuntimeError: quantile() input tensor must be either float or double dtype", "AMP130", True),
    # DeepSpeed: an apex amp block with ZeRO
    ("AssertionError: Amp and ZeRO are not currently compatible, please use (legacy) fp16 mode", "AMP116", False),
    # DeepSpeed's overflow at the minimum loss scale; apex and fairseq lowering the scale below 1
    ("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, reducing to 1", "AMP212", False),
    ("Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 0.0078125", "AMP212", False),
    ("| WARNING: overflow detected, setting loss scale to: 6.103515625e-05", "AMP212", False),
]


@pytest.mark.parametrize(("text", "rule", "guess"), LIBRARY_WORDINGS)
def test_a_library_wording_of_a_dtype_check_is_read_by_its_rule_signature(text, rule, guess):
    cand = first(text)
    assert (cand.rule.id, cand.basis, cand.guess) == (rule, "signature", guess)


@pytest.mark.parametrize("text", [
    "RuntimeError: Input and parameter tensors are not the same dtype, found input tensor with Double and parameter "
    "tensor with Float",  # a data loader's fp64, no half dtype in it
    "RuntimeError: index_add_(): self (Long) and source (Float) must have the same scalar type",  # an integer buffer
])
def test_the_same_checks_without_a_half_dtype_match_no_signature(text):
    assert all(c.basis != "signature" for c in explain(text))


@pytest.mark.parametrize("text", [
    "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 16384, reducing to 8192",  # a scaler settling
    "Training with --fp16 (apex amp, opt_level O1)\n"
    "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0",
    "[deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: 65536.0, reducing to 32768.0",
])
def test_a_step_skipped_on_an_overflow_at_a_healthy_loss_scale_is_the_overflow_rule_only_as_a_guess(text):
    # a dynamic scaler skips a step now and then by design: the overflow rule is offered, never diagnosed
    cands = explain(text)
    assert cands and all(c.guess for c in cands)
    assert (cands[0].rule.id, cands[0].basis) == ("AMP212", "signature")
    # the bare apex line, with no sign of fp16 or of a loss scaler library, is too weak for a signature's score:
    # its rule comes first only by wording
    bare = explain("Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0")
    assert bare[0].rule.id == "AMP212" and bare[0].guess


# Library warnings and refusals whose words name a rule's mechanism (each text our own reproduction of the message).
LIBRARY_WARNINGS = [
    # apex's fused optimizers (and DeepSpeed's older copies) handed a bf16 parameter
    ("RuntimeError: FusedAdam only support fp16 and fp32.", "AMP120", False),
    ("  File \"apex/optimizers/fused_lamb.py\", line 140, in step\nRuntimeError: FusedLAMB only support fp16 and fp32.",
     "AMP120", False),
    # DeepSpeed keeping a bf16 model's gradient accumulation in bf16 under pipeline parallelism
    ("[WARNING] [engine.py:1100:_configure_bf16] **** BF16 gradient accumulation is not safe numerically with large "
     "number of accumulation steps, proceed with caution *****", "AMP117", False),
    # accelerate upcasting bf16 parameters for FSDP mixed precision: every such run prints it, so a guess
    ("UserWarning: FSDP upcast of low precision parameters to fp32 (since mixed_precision != 'no') may affect the "
     "precision of model checkpoints.", "AMP132", True),
]


@pytest.mark.parametrize(("text", "rule", "guess"), LIBRARY_WARNINGS)
def test_a_library_warning_or_refusal_is_read_by_its_rule_signature(text, rule, guess):
    cand = first(text)
    assert (cand.rule.id, cand.basis, cand.guess) == (rule, "signature", guess)


def _fingerprint(op, dtype):
    return (f"CollectiveFingerPrint(SequenceNumber=7, OpType={op}, TensorShape=[4], TensorDtypes={dtype}, "
            "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda))")


def test_collective_fingerprints_of_one_op_in_two_dtypes_are_the_cross_rank_dtype_rule():
    head = "RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: "
    same_op = head + _fingerprint("ALLREDUCE", "BFloat16") + ", but Rank 0 is running collective: " + \
        _fingerprint("ALLREDUCE", "Float")
    assert (first(same_op).rule.id, first(same_op).guess) == ("AMP209", False)
    # ranks running different collectives: another failure, whatever the dtypes; one fingerprint only: a guess
    other_op = head + _fingerprint("ALLREDUCE", "Float") + ", but Rank 0 is running collective: " + \
        _fingerprint("BROADCAST", "BFloat16")
    assert first(other_op).guess
    assert first(head + _fingerprint("_ALLGATHER_BASE", "BFloat16")).guess
    assert first(head + _fingerprint("_ALLGATHER_BASE", "BFloat16")).basis == "signature"
    # torch's summary of what differs names shapes only: no signature of the rule reads it
    shapes = (head + _fingerprint("ALLREDUCE", "BFloat16") + ", but Rank 0 is running collective: "
              + _fingerprint("ALLREDUCE", "BFloat16") + ".Collectives differ in the following aspects:   Tensor Tensor "
              "shapes: 8vs 4")
    assert all(c.basis != "signature" for c in explain(shapes))


def test_numpys_warning_on_a_nan_image_cast_to_uint8_ranks_the_overflow_rule_but_only_as_a_guess():
    # a half VAE that overflowed leaves a black image and this warning, but so does any NaN in the pipeline
    text = ('pipeline.py:147: RuntimeWarning: invalid value encountered in cast\n'
            '  images = (images * 255).round().astype("uint8")')
    cand = first(text)
    assert cand.rule.id == "AMP212" and cand.guess and cand.basis == "signature"


def test_a_mask_constant_told_to_be_out_of_fp16_range_is_the_fill_rule_not_the_overflow_rule():
    cand = first("the matcher masks with INF=1e9, which is out of the range of fp16, and then the loss is NaN")
    assert cand.rule.id == "AMP133" and cand.guess


def test_older_tritons_tl_dot_assertion_naming_fp16_and_bf16_is_the_mixed_half_rule():
    cand = first("AssertionError: First input (bf16) and second input (fp16) must have the same dtype!")
    assert cand.rule.id == "AMP121" and not cand.guess


def test_adam_moments_told_to_be_stored_in_bf16_are_the_optimizer_state_rule_as_a_guess():
    cand = first("with torch_dtype bfloat16 the AdamW buffers (exp_avg and exp_avg_sq) are stored in bf16 as well")
    assert cand.rule.id == "AMP206" and cand.guess


def test_black_images_told_of_a_run_in_fp16_rank_the_overflow_rule_as_a_guess():
    cand = first("with torch_dtype=torch.float16 the sampler is faster but the output is completely black")
    assert cand.rule.id == "AMP212" and cand.guess and cand.basis == "signature"
    assert not [c for c in explain("the output is completely black when the prompt is empty") if c.basis == "signature"]


def test_values_counted_past_the_last_integer_bf16_holds_rank_the_positions_rule_as_a_guess():
    # bf16 holds every integer only up to 256, fp16 up to 2048: a count past that, told beside the dtype
    for text in ("Sequence ids come out wrong on more than 256 workers.\nWe keep them in bfloat16.",
                 "The gathered ranks are wrong with 256+ processes, everything is in bf16.",
                 "With fp16 the step counter stops moving once it is past 2048."):
        cand = first(text)
        assert cand.rule.id == "AMP103" and cand.guess and cand.basis == "signature", text
    # an accumulator's swamping (256 + 1 == 256), not a count past 256
    assert all(c.basis != "signature" or c.rule.id != "AMP103" for c in explain("`256 + 1 == 256` in bfloat16 sums"))


def test_a_model_that_comes_out_fp32_where_it_is_wanted_saved_in_bf16_ranks_the_checkpoint_rule():
    cand = first("After training the weights are float32. How can I save the model in bfloat16 instead?")
    assert cand.rule.id == "AMP132" and cand.guess and cand.basis == "signature"


def test_an_epsilon_below_fp16s_smallest_value_inside_a_log_ranks_the_sensitive_op_rule_as_a_guess():
    text = "entropy = -(p * torch.log(p + 1e-12)).sum(-1)\nThe entropy plot stays empty when the model runs in fp16."
    cand = first(text)
    assert cand.rule.id == "AMP204" and cand.guess and cand.basis == "signature"
    # an epsilon fp16 holds is no such case
    held = explain(text.replace("1e-12", "1e-4"))
    assert all(c.rule.id != "AMP204" or c.basis != "signature" for c in held)


def test_a_norms_eps_told_to_underflow_in_half_precision_ranks_the_norm_rule_as_a_guess():
    cand = first("Our RMS norm layer gives NaN in fp16: its eps underflows to zero and an all-zero row divides 0 by 0.")
    assert cand.rule.id == "AMP123" and cand.guess and cand.basis == "signature"


def test_a_shared_message_ranks_the_rule_whose_context_is_in_view_above_one_whose_context_is_not():
    # AMP001 weighs the scalar-type message higher, but none of its cues (bmm, rotary, deepspeed) is in the text;
    # AMP110's (a custom CUDA kernel) is
    cands = explain("RuntimeError: expected scalar type BFloat16 but found Float\n"
                    "The custom CUDA kernel wants its decay tensor in bf16 but gets fp32.")
    assert [c.rule.id for c in cands[:2]] == ["AMP110", "AMP001"]
    assert cands[0].score > cands[1].score and "ranked below AMP110" in cands[1].reason



def test_a_pre_ampere_gpu_told_not_to_support_bf16_ranks_the_hardware_rule_only_where_nothing_else_is_read():
    alone = first("bf16-true is picked by default, even on cards that do not support it, such as the T4.")
    assert alone.rule.id == "AMP113" and alone.guess and alone.basis == "signature"
    # said only to explain the move to fp16, whose own failure is the question
    moved = first("Our V100 does not support bf16, so I train in fp16: Attempting to unscale FP16 gradients.")
    assert moved.rule.id == "AMP105"


def test_a_lora_run_whose_base_is_quantized_leaves_the_shared_scalar_type_message_to_both_of_its_causes():
    # A launcher line that fine-tunes LoRA adapters over a base quantized by bitsandbytes, said the way launchers and
    # reports say it (QLoRA, `--quantization_bit`, NF4) with no bnb frame printed: the adapter rule and the compute-
    # dtype rule each have their cue in view, so the shared message names neither with confidence.
    msg = "RuntimeError: expected scalar type Float but found Half"
    lora = "python sft.py --finetuning_type lora --lora_target q_proj,v_proj --fp16\n"
    assert first(lora + msg).rule.id == "AMP127" and not first(lora + msg).guess  # the adapters alone: their rule
    for quantized in ("python sft.py --finetuning_type lora --lora_target q_proj,v_proj --quantization_bit 4 --fp16\n",
                      "QLoRA fine-tuning of a 7B model, fp16\n", "lora adapters over an nf4 base, fp16\n"):
        cands = explain(quantized + msg)
        assert cands[0].guess and {"AMP127", "AMP135"} <= {c.rule.id for c in cands[:3]}, quantized


def test_old_pytorchs_by_argument_wording_of_an_fp32_input_into_a_half_weight_ranks_the_input_rule_like_todays():
    # PyTorch before 1.6 named the operand: mat1 (the input) set the expected type, mat2 (the weight) had another.
    frame = ('  File "/venv/lib/python3.6/site-packages/torch/nn/functional.py", line 1371, in linear\n'
             "    output = input.matmul(weight.t())\n")
    old = frame + "RuntimeError: Expected object of scalar type Float but got scalar type Half for argument #2 'mat2'"
    new = frame + "RuntimeError: expected mat1 and mat2 to have the same dtype, but got: float != c10::Half"
    for text in (old, new):
        cands = explain(text)
        assert cands[0].rule.id == "AMP131" and cands[0].guess, text
        assert "AMP201" in {c.rule.id for c in cands[:3]}  # a promotion inside the model prints it too
    # an attention matmul's operands are two activations, not an input and a weight
    attn = "    attn = torch.matmul(q, k.transpose(-1, -2))\n" + old.splitlines()[-1]
    assert first(attn).rule.id != "AMP131"
    # the other order (a half input into fp32 weights) is not this wording's case
    other = frame + "RuntimeError: Expected object of scalar type Half but got scalar type Float for argument #2 'mat2'"
    assert first(other).rule.id != "AMP131"


def test_a_cuda_autocast_region_told_to_be_inert_on_another_device_is_the_device_type_rule_as_a_guess():
    # A CUDA autocast said to do nothing on the device the run is on (an Ascend NPU, an XPU): the code it wraps runs
    # outside any autocast there. Told in words, so a guess; an autocast said to be inert with no device named is not it.
    for told in ('The head is wrapped in `with torch.autocast("cuda", dtype=torch.float32):` so that its ODE runs in fp32.\n'
                 "But on our cluster this context is inert on Ascend, and the ODE inherits bf16 from the backbone.",
                 "torch.autocast('cuda') around the decoder has no effect on xpu devices, so the norm sees fp32 inputs"):
        cand = first(told)
        assert cand.rule.id == "AMP140" and cand.basis == "signature" and cand.guess, told
    assert all(c.rule.id != "AMP140" or c.basis == "wording"
               for c in explain("the autocast around the loss is inert here, the loss is already fp32"))


def test_the_fp16_spelling_of_the_scalar_type_refusal_reads_the_config_mismatch_where_its_context_is_in_view():
    # The incident's message with Half in place of BFloat16 (an fp16 pipeline run whose attention product meets an
    # fp32 operand): the same mismatch, so the config-mismatch rule reads it too, first where its context is shown.
    text = ('  File "/opt/run/deepspeed/runtime/pipe/engine.py", line 640, in _exec_forward_pass\n'
            "    outputs = super().forward(inputs)\n"
            '  File "/opt/run/megatron/model/transformer.py", line 311, in forward\n'
            "    attention_scores = torch.baddbmm(matmul_result, query_layer, key_layer)\n"
            "RuntimeError: expected scalar type Half but found Float\n")
    cand = first(text)
    assert cand.rule.id == "AMP001" and cand.guess


@pytest.mark.parametrize("text, rule", [
    ("After training, the checkpoint is saved as fp32 instead of fp16, doubling its size on disk.", "AMP132"),
    ("The running loss is accumulated in a float16 tensor, so the logged epoch loss stops growing after a while.",
     "AMP137"),
    ("Outputs differ between eager and torch.compile when the model runs in fp16.", "AMP215"),
])
def test_a_cause_told_in_words_with_fp16_reads_as_its_bf16_wording_does(text, rule):
    cands = explain(text)
    assert cands[0].rule.id == rule and cands[0].basis == "signature" and cands[0].guess
