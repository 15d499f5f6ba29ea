"""explain on error texts exactly as public issue trackers show them (machine messages, trimmed to the lines that
matter; bench/explain/corpus.yaml has their sources). Each must name its rule first, and say it with confidence."""

import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from ampdoctor.core import catalog, get_rule
from ampdoctor.explain import RIVAL_SHARE, explain

ROOT = Path(__file__).resolve().parents[1]

REAL = [
    # AMP004: the GradScaler's unscale kernel reached with bf16 gradients, through accelerate's clipping.
    ("AMP004", '.venv/lib/python3.11/site-packages/accelerate/accelerator.py:2946: in unscale_gradients\n'
               '    self.scaler.unscale_(opt)\n'
               'NotImplementedError: "_amp_foreach_non_finite_check_and_unscale_cuda" not implemented for \'BFloat16\''),
    # AMP105: the same unscale on fp16 parameters, with the typo one project prints.
    ("AMP105", "ValueError : Attemting to unscale fp16 Gradients"),
    ("AMP105", '  File "torch/cuda/amp/grad_scaler.py", line 210, in _unscale_grads_\n'
               '    raise ValueError("Attempting to unscale FP16 gradients.")\nValueError: Attempting to unscale FP16 gradients.'),
    # AMP108: the deprecation quoted in double backticks.
    ("AMP108", '``torch.cuda.amp.GradScaler(args...)`` is deprecated. Please use ``torch.amp.GradScaler("cuda", args...)`` instead.'),
    # AMP111 / AMP112: flash-attn with fp32 q/k/v; FA2 requested for an fp32 model.
    ("AMP111", '    out, softmax_lse, S_dmask, rng_state = flash_attn_gpu.fwd(\n'
               "RuntimeError: [address=0.0.0.0:37093, pid=1304] FlashAttention only support fp16 and bf16 data type"),
    ("AMP112", "Flash Attention 2.0 only supports torch.float16 and torch.bfloat16 dtypes, but the current dype in Qwen2ForCausalLM is torch.float32."),
    # AMP113: bf16 on a pre-Ampere GPU, from vLLM and from TrainingArguments.
    ("AMP113", "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has compute capability 7.5."),
    ("AMP113", "ValueError: Your setup doesn't support bf16/gpu."),
    # AMP120: an optimizer's lerp_ between bf16 and fp32 state, `end` unquoted.
    ("AMP120", "RuntimeError: expected dtype float for end but got dtype c10::BFloat16.\nsecond_momentum.lerp_(v_mean, 1 - beta2)"),
    # AMP121: two half types, without the c10:: prefix, and in a matmul.
    ("AMP121", "Input type (BFloat16) and bias type (Half) should be the same."),
    # AMP122: an fp32 additive mask against bf16 queries in SDPA.
    ("AMP122", "x = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_bias)\nRuntimeError: Expected attn_mask dtype to be bool "
               "or to match query dtype, but got attn_mask.dtype: float and  query.dtype: struct c10::BFloat16 instead."),
    # AMP125: index_put in a loss's backward, destination bf16.
    ("AMP125", '    loss_dict = criterion(outputs, new_targets)\nRuntimeError: Index put requires the source and destination dtypes '
               "match, got BFloat16 for the destination and Float for the source."),
    # AMP129 / AMP130: bf16 to NumPy; a half kernel missing on CPU.
    ("AMP129", "    fcsts = torch.vstack(fcsts).numpy()\nTypeError: Got unsupported ScalarType BFloat16"),
    ("AMP130", 'RuntimeError: "erfinv_vml_cpu" not implemented for \'Half\''),
    # AMP131: an fp32 batch into a bf16 conv.
    ("AMP131", "RuntimeError: Input type (float) and bias type (c10::BFloat16) should be the same"),
    # AMP209: a float dtype difference on the same collective.
    ("AMP209", "Collectives differ in the following aspects:   Tensor Tensor dtypes: BFloat16vs Float"),
    # AMP212: DeepSpeed's scaler at its floor.
    ("AMP212", "{'loss': 1.6747, 'learning_rate': 0.0001956, 'epoch': 0.1}\n"
               "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run."),
]


@pytest.mark.parametrize("rule, text", REAL, ids=[f"{r}-{i}" for i, (r, _) in enumerate(REAL)])
def test_real_texts_name_their_rule_first_with_confidence(rule, text):
    cands = explain(text)
    assert cands and cands[0].rule.id == rule, [c.rule.id for c in cands]
    assert not cands[0].guess, cands[0].reason


def test_a_bare_matmul_message_keeps_the_layer_input_rule_among_the_candidates_but_only_guesses():
    cands = explain("expected mat1 and mat2 to have the same dtype, but got: float!= c10::Half")
    assert "AMP131" in [c.rule.id for c in cands[:3]]
    assert cands[0].guess


def test_xformers_refusing_mixed_qkv_dtypes_is_the_op_autocast_does_not_cover_first_but_only_a_guess():
    # memory_efficient_attention is an autograd Function outside autocast's cast lists, so under autocast it gets
    # the query and the keys in the dtypes they come in; a promotion outside autocast (AMP201) prints the same.
    text = ("ValueError: Query/Key/Value should either all have the same dtype, or (in the quantized case) Key/Value "
            "should have dtype torch.int32\n  query.dtype: torch.float32\n  key.dtype  : torch.float16\n"
            "  value.dtype: torch.float16")
    cands = explain(text)
    assert [c.rule.id for c in cands[:2]] == ["AMP110", "AMP201"]
    assert all(c.guess for c in cands)
    # a half query beside fp32 keys/values is a promotion's (an fp32 cache or encoder output), not read here
    half_query = text.replace("query.dtype: torch.float32", "query.dtype: torch.bfloat16").replace(
        "key.dtype  : torch.float16", "key.dtype  : torch.float32").replace("value.dtype: torch.float16", "value.dtype: torch.float32")
    assert explain(half_query)[0].rule.id == "AMP201"


def test_a_framework_refusing_a_gradient_of_another_dtype_than_its_parameter_is_the_grad_dtype_rule():
    # MindSpore's FSDP writing an fp32 reduced gradient back onto a bf16 parameter shard
    text = ("RuntimeError: The grad dtype and shape should be same as source tensor but got\n"
            "  dtype: Float32 vs BFloat16  shape: {64640, 1024} vs {64640, 1024}")
    cands = explain(text)
    assert cands[0].rule.id == "AMP003" and not cands[0].guess
    # the same refusal between two fp32-family dtypes is no precision rule's
    other = "RuntimeError: The grad dtype and shape should be same as source tensor but got\n  dtype: Float32 vs Float64"
    assert "AMP003" not in [c.rule.id for c in explain(other, closest=False)]


def test_the_transformers_overflow_detectors_inf_row_is_the_overflow_rule_named_with_confidence_only_in_fp16():
    table = ("                  model.encoder.layers.10 PegasusEncoderLayer\n2.44e-04 6.86e+04 input[0]\n"
             "9.77e-04      inf output[0]")
    cands = explain(table)
    assert cands[0].rule.id == "AMP212" and cands[0].guess  # the table does not say the run was half precision
    assert not explain("python train.py --fp16\n" + table)[0].guess
    report = explain("Detected inf/nan during batch_number=0\nLast 21 forward frames:\nabs min  abs max  metadata")
    assert report[0].rule.id == "AMP212" and report[0].guess
    finite = table.replace("     inf output", " 6.0e+04 output")
    assert "AMP212" not in [c.rule.id for c in explain(finite, closest=False)]


def test_a_collective_of_another_op_type_is_not_a_dtype_mismatch():
    text = ("RuntimeError: Detected mismatch between collectives on ranks. ... Collectives differ in the following aspects:"
            "   Op type: ALLREDUCEvs BROADCAST  Tensor Tensor shapes: 25vs 1  Tensor Tensor dtypes: Floatvs Long")
    assert "AMP209" not in [c.rule.id for c in explain(text, closest=False)]
    assert all(c.guess for c in explain(text))  # the collective rule may be the closest in wording, never more


def test_no_gpu_for_fp16_is_no_precision_rule():
    text = '    raise ValueError(err.format(mode="fp16", requirement="a GPU"))\nValueError: fp16 mixed precision requires a GPU'
    assert explain(text, closest=False) == []
    assert all(c.guess and c.basis == "wording" for c in explain(text))


def test_a_kernel_message_names_bf16_itself_so_its_dtype_is_no_sign_of_a_bf16_run_around_it():
    # AMP004's context "a run said to be bf16" must come from beside the message, not from the 'BFloat16' it prints
    amp004 = (get_rule("AMP004"),)
    msg = 'RuntimeError: "upsample_bilinear2d_out_frame" not implemented for \'BFloat16\''
    assert explain(msg, rules=amp004, closest=False)[0].guess
    # nor is a run said to be bf16 enough: any op without a bf16 kernel fails so in such a run (an early torch's
    # `copy_`); the scaler in view is
    assert explain("--bf16 True\n" + msg, rules=amp004, closest=False)[0].guess
    assert not explain("    scaler.step(optimizer)\n" + msg, rules=amp004, closest=False)[0].guess


def test_unscale_before_clip_is_the_fixs_order_and_correct_code_says_it_too_so_alone_it_is_a_guess():
    cands = explain("    scaler.unscale_(optimizer)  # Unscale gradients before clip", closest=False)
    assert cands[0].rule.id == "AMP136" and cands[0].guess



def test_deepspeeds_engine_dtype_check_is_generic_so_a_deepspeed_frame_alone_decides_nothing():
    # The engine's dtype may come from a strategy (AMP116) or a hand cast: without AMP116 in the catalog the message
    # is still no diagnosis of AMP001, and a deepspeed frame (which every such text has) does not make it one.
    msg = ("ValueError: torch.float32 is enabled but the following parameters have dtype that is not torch.float32: "
           "[('module.model.weight', torch.bfloat16)]")
    without_116 = tuple(r for r in catalog() if r.id != "AMP116")
    assert explain(msg, rules=without_116)[0].guess
    framed = '  File "deepspeed/runtime/engine.py", line 1030, in _configure_distributed_model\n' + msg
    assert explain(framed)[0].guess


def test_a_message_several_rules_share_needs_half_its_rules_context_to_be_named_with_confidence():
    msg = "RuntimeError: expected scalar type BFloat16 but found Float"
    engine = '  File "deepspeed/runtime/engine.py", line 1836, in forward\n    loss = self.module(*inputs, **kwargs)\n'
    assert explain(engine + msg)[0].rule.id == "AMP001" and explain(engine + msg)[0].guess  # one broad cue of four
    bmm = "    matmul_result = torch.baddbmm(matmul_result, query_layer, key_layer)\n"
    assert not explain(engine + bmm + msg)[0].guess  # the attention bmm beside the engine: GPT-NeoX's case


def test_a_rule_its_context_supports_is_still_a_guess_below_a_rival_reading_the_same_message():
    # A DeepSpeed run with an 8-bit model: the shared scalar-type message, bitsandbytes in view (all of AMP135's
    # context), the engine frame (a little of AMP001's). AMP001 still outscores AMP135 on the message, so the context
    # has not singled AMP135 out: neither may be named with confidence, second place included.
    text = ('  File "deepspeed/runtime/engine.py", line 1836, in forward\n    loss = self.module(*inputs, **kwargs)\n'
            "  model = AutoModelForCausalLM.from_pretrained(path, load_in_8bit=True)\n"
            "RuntimeError: expected scalar type Float but found BFloat16")
    cands = explain(text, limit=3)
    assert [c.rule.id for c in cands[:2]] == ["AMP001", "AMP135"]
    assert all(c.guess for c in cands)


def test_an_fp32_input_into_half_weights_ranks_the_input_rule_first_but_only_as_a_guess():
    # mat1 is the layer's input, mat2 its weight: float into half weights is an fp32 batch into a half model (AMP131)
    # more often than a promotion inside it (AMP201). The message is still shared, so nothing here is a diagnosis.
    for msg in ("RuntimeError: mat1 and mat2 must have the same dtype, but got Float and BFloat16",
                "RuntimeError: expected mat1 and mat2 to have the same dtype, but got: float != c10::Half",
                "expected mat1 and mat2 to have the same dtype, but got: struct float!= struct c10::Half"):
        cands = explain(msg, limit=3)
        assert cands[0].rule.id == "AMP131" and all(c.guess for c in cands), msg
    # The other order (half input, fp32 weights: an fp32 adapter or kept-fp32 module as often) does not lead with it.
    for msg in ("RuntimeError: mat1 and mat2 must have the same dtype, but got BFloat16 and Float",
                "RuntimeError: expected mat1 and mat2 to have the same dtype, but got: c10::BFloat16 != float"):
        assert explain(msg, limit=3)[0].rule.id != "AMP131", msg
    # Under an attention matmul mat1 and mat2 are two activations, not an input and a weight: the order tells nothing.
    attention = "    attn_output = torch.matmul(attn_weights, value_states)\n"
    assert explain(attention + "RuntimeError: mat1 and mat2 must have the same dtype, but got Float and BFloat16",
                   limit=3)[0].rule.id != "AMP131"
    # A frame showing the layer's input made with a module attribute (an fp32 buffer) is a promotion inside the model.
    promoted = "    h = self.proj(h * self.scale)\n"
    assert explain(promoted + "RuntimeError: mat1 and mat2 must have the same dtype, but got Float and BFloat16",
                   limit=3)[0].rule.id == "AMP201"
    # An adapter in view ranks AMP127 first over the input rule's ranking; the other rules' readings of the same
    # message score nearly as well, so it is a guess.
    peft = ('  File "/venv/lib/python3.10/site-packages/peft/tuners/lora.py", line 908, in forward\n'
            "RuntimeError: expected mat1 and mat2 to have the same dtype, but got: float != c10::Half")
    assert explain(peft)[0].rule.id == "AMP127" and explain(peft)[0].guess


def _tune_texts():
    """bench/explain's tune split (texts labelled with a catalog rule): the texts changes may be judged on. Left out:
    texts that show two failures (another rule's own message read with confidence beside the labelled one's), where
    the other rule is a true diagnosis too, so naming it without the labelled rule is not wrong."""
    sys.path.insert(0, str(ROOT / "bench"))
    import benchdocs

    corpus = yaml.safe_load((ROOT / "bench/explain/corpus.yaml").read_text())
    return [e for e in corpus if benchdocs.split_of(e["name"]) == "tune" and e["rule"] != "none"
            and not any("more than one failure" in c.reason for c in explain(e["text"], limit=3))]


def test_with_each_tune_texts_own_rule_out_of_the_catalog_nothing_is_named_with_confidence():
    # Each tune text with its labelled rule taken out of the catalog: whatever explain then names is wrong, so it must
    # be a guess, first or not (a confident second answer under a guessed first one reads as a diagnosis too). A check
    # of calibration (a cause the catalog lacks), not of the signatures' coverage.
    pool = catalog()
    confident = []
    for e in _tune_texts():
        cands = explain(e["text"], limit=3, rules=tuple(r for r in pool if r.id != e["rule"]))
        confident += [(e["name"], c.rule.id) for c in cands if not c.guess]
    assert confident == []


def test_with_the_signatures_that_read_each_tune_text_taken_from_its_rule_nothing_else_is_named_with_confidence():
    # A wording the catalog does not know yet: the labelled rule keeps its prose and context but not the signatures
    # that match the text. Another rule may come first, but only as a guess.
    confident = []
    for e in _tune_texts():
        pool = tuple(replace(r, signatures=tuple(s for s in r.signatures if not re.search(s.pattern, e["text"], re.I)))
                     if r.id == e["rule"] else r for r in catalog())
        cands = explain(e["text"], limit=3, rules=pool)
        confident += [(e["name"], c.rule.id) for c in cands if not c.guess and c.rule.id != e["rule"]]
    assert confident == []


def test_two_rules_read_with_confidence_in_one_text_are_two_failures_so_each_is_a_guess():
    # An fp16 LoRA run failing in the scaler, and the user's attempt at bf16 on a V100 quoted beside it.
    text = ("got error `Attempting to unscale FP16 gradients`. When I set flag `bf16`, I got message "
            "`Your setup doesn't support bf16/gpu.` (I am using V100).")
    cands = explain(text)
    assert {"AMP105", "AMP113"} <= {c.rule.id for c in cands[:3]}
    assert all(c.guess for c in cands)
    assert "more than one failure" in cands[0].reason
    assert not explain("ValueError: Attempting to unscale FP16 gradients.")[0].guess  # either alone is still named


def test_a_specific_message_printed_beside_the_exception_the_text_raised_is_only_a_guess():
    # vLLM logs why bf16 cannot run, then raises about another requirement: the log line names the rule, but the
    # failure the text shows is the exception, so the rule is a guess. As the exception itself it is named.
    beside = ("Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla V100 GPU has "
              "compute capability 7.0.\nRuntimeError: GPUs with compute capability below 7.5 are not supported.")
    first = explain(beside)[0]
    assert first.rule.id == "AMP113" and first.guess
    raised = "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla V100 GPU has compute capability 7.0."
    assert not explain(raised)[0].guess
    # Told in prose, with no exception printed, nothing tells the error from the rest: the message decides.
    assert not explain(beside.splitlines()[0])[0].guess


@pytest.mark.parametrize("text", [
    # a rank prefix before the exception
    "[rank3]: ValueError: Attempting to unscale FP16 gradients.",
    # the source line that raises it comes first; the exception line is the error
    '    raise ValueError("Attempting to unscale FP16 gradients.")\nValueError: Attempting to unscale FP16 gradients.',
    # the message continues on the line after the exception's name
    "torch._dynamo.exc.TorchRuntimeError: Failed running call_method lerp_(*(FakeTensor(..., dtype=torch.bfloat16),), **{}):\n"
    "expected dtype torch.bfloat16 for `weight`, but got dtype torch.float32",
    # the exception quoted in the reporter's words
    "I get `ValueError: Attempting to unscale FP16 gradients.` when clipping",
    # a bare Exception, as DeepSpeed's loss scaler raises it
    "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
])
def test_the_exception_a_text_raises_is_read_through_prefixes_raise_lines_and_continued_messages(text):
    # Another exception printed first (a chained traceback): the message is named with confidence only if its own
    # exception line is read as one of the text's errors.
    chained = "RuntimeError: CUDA error: unspecified launch failure\n\nThe above exception was the direct cause:\n\n" + text
    assert not explain(chained)[0].guess


@pytest.mark.parametrize("text, guess", [
    ("RuntimeError: Unconvertible NCCL type BFloat16", False),
    ("RuntimeError: Input tensor data type is not supported for NCCL process group: BFloat16", False),
    # beside the frame it failed in, which can show nothing AMP113 names, the refusal ranks the rule and is a guess
    ('  File "torch/distributed/distributed_c10d.py", line 1700, in all_reduce\n    work = group.allreduce([tensor], opts)\n'
     "RuntimeError: Input tensor data type is not supported for NCCL process group: BFloat16", True),
])
def test_an_nccl_without_bfloat16_refusing_a_bf16_collective_is_the_unsupported_hardware_rule(text, guess):
    cand = explain(text)[0]
    assert cand.rule.id == "AMP113" and cand.guess is guess


def test_a_signatures_unless_pattern_is_validated_and_read():
    from ampdoctor.core.catalog import _signatures

    sig, = _signatures([{"pattern": "mat1", "weight": 0.5, "unless": "bmm"}], "rule X")
    assert (sig.pattern, sig.weight, sig.unless) == ("mat1", 0.5, "bmm")
    with pytest.raises(ValueError, match="bad regex"):
        _signatures([{"pattern": "mat1", "unless": "(bmm"}], "rule X")


def test_the_catalog_compiles_the_signatures_the_lint_reads_it_without(monkeypatch):
    # lint reads the catalog for its defaults only and compiles no signature; every reader of them goes through
    # `catalog()`, which rejects a bad one
    from ampdoctor.core.model import Signature

    module = sys.modules["ampdoctor.core.catalog"]
    documented = module._documented()
    bad = replace(documented[0], signatures=(Signature("mat1"), Signature("(bmm")))
    monkeypatch.setattr(module, "_documented", lambda: (bad, *documented[1:]))
    catalog.cache_clear()
    try:
        with pytest.raises(ValueError, match=rf"rule {bad.id}: bad regex '\(bmm'"):
            catalog()
    finally:
        catalog.cache_clear()


def test_the_dtypes_own_minimum_said_to_overflow_is_the_mask_fill_rule():
    # Two masks each filled with torch.finfo(dtype).min summed: the fill constant overflows to -inf (then NaN after
    # softmax). Told in words, with no printed error, it is still the mask fill's failure, ahead of a generic overflow.
    told = ("the additive attention mask is built by summing two `torch.finfo(dtype).min` planes, which overflows "
            "bf16 to `-inf`")
    assert explain(told)[0].rule.id == "AMP133"
    # An overflow without the dtype's minimum in view is not this rule's.
    assert explain("the loss overflows to inf in fp16")[0].rule.id == "AMP212"


def test_an_op_without_a_half_kernel_is_read_whether_or_not_the_dtype_is_quoted():
    # ATen's dispatch quotes the dtype ('Half'); an op's own check, or an issue title retyping the message, does not.
    # Either way it is the missing kernel, and the scaler's kernel (AMP004's) is not read from a bare dtype either.
    for msg in ("RuntimeError: grid_sampler_2d_cpu not implemented for Half",
                "svd_cuda_gesvdjBatched not implemented for BFloat16"):
        cands = explain(msg, closest=False)
        assert cands and cands[0].rule.id == "AMP130", (msg, [c.rule.id for c in cands])
    assert "AMP130" not in [c.rule.id for c in explain("some_op not implemented for Halfway", closest=False)]


def test_a_mask_constant_beyond_fp16_told_in_words_is_the_mask_fill_rule():
    # No code and no error message: a user says the mask is set to a constant fp16 cannot hold, in an fp16 run.
    text = "The padding is masked with -1e12 before the softmax; training in fp16 the gradients are NaN."
    cands = explain(text)
    # the mask and the constant are read by the signature itself: nothing beside it confirms it, so it is a guess
    assert cands[0].rule.id == "AMP133" and cands[0].guess, [c.rule.id for c in cands]
    # a constant fp16 holds (-1e4) is no such overflow
    assert "AMP133" not in [c.rule.id for c in explain(text.replace("-1e12", "-1e4"), closest=False)]


def test_mask_inside_another_word_is_no_mask_beside_an_overflow_message():
    # "value cannot be converted ... without overflow" is the mask-fill rule's when a mask is in view; "mask" inside
    # another word (a masked-LM head in a class name, BertForMaskedLM) names no fill, so the message stays a guess.
    message = "RuntimeError: value cannot be converted to type at::BFloat16 without overflow"
    head = explain("model = AutoModelForMaskedLM.from_pretrained(name, torch_dtype=torch.bfloat16)\n" + message)[0]
    assert head.rule.id == "AMP133" and head.guess
    # nor is flash-attn's returned dropout mask (S_dmask) in a frame above the message
    dropout = explain("    out, q, k, v, out_padded, softmax_lse, S_dmask = _flash_attn_forward(\n" + message)[0]
    assert dropout.rule.id == "AMP133" and dropout.guess
    fill = explain("    scores = scores.masked_fill(~mask, torch.finfo(torch.float32).min)\n" + message)[0]
    assert fill.rule.id == "AMP133" and not fill.guess


def test_deepspeed_refusing_bf16_under_a_zero_stage_is_the_strategy_rule():
    first = explain("AssertionError: bfloat16 mode is only enabled for Zero 1,2,3 currently. got 0")[0]
    assert first.rule.id == "AMP116" and not first.guess


def test_bert_attentions_probabilities_in_fp32_beside_half_values_are_the_mask_rule():
    # BERT-style eager attention adds the extended mask (built in the parameters' dtype) to the scores and never
    # upcasts them otherwise: fp32 probabilities against half values are the mask's doing.
    frame = ('  File "/opt/venv/lib/python3.10/site-packages/transformers/models/roberta/modeling_roberta.py", line 290, '
             "in forward\n    context_layer = torch.matmul(attention_probs, value_layer)\n")
    first = explain(frame + "RuntimeError: expected scalar type Half but found Float", limit=3)[0]
    assert first.rule.id == "AMP122" and not first.guess
    # Half probabilities against fp32 values are something else (an fp32 value projection): not the mask.
    assert "AMP122" not in [c.rule.id for c in explain(frame + "RuntimeError: expected scalar type Float but found Half",
                                                        limit=3) if c.basis == "signature"]


def _fit(text, rule_id):
    return next(c for c in explain(text, limit=None, weak=True, closest=False) if c.rule.id == rule_id)


def test_a_context_word_is_read_where_a_word_begins_not_inside_another_word():
    # "rope" inside CudaDeviceProperties, "vision" inside torchvision or division: no rotary table, no vision tower.
    cast = "RuntimeError: expected scalar type BFloat16 but found Float"
    assert not _fit("CudaDeviceProperties(name='Tesla V100-SXM2-32GB', major=7, minor=0)\n" + cast, "AMP001").context_matched
    assert _fit("    q = apply_rope(q, cos, sin)\n" + cast, "AMP001").context_matched
    rotary = "ValueError: Input and cos/sin must have the same dtype, got torch.float32 and torch.bfloat16"
    assert not _fit("import torchvision\n" + rotary, "AMP005").context_matched
    assert _fit("    hidden = self.vision_tower(pixel_values)\n" + rotary, "AMP005").context_matched


@pytest.mark.parametrize("text", [
    # an integer length round-tripped through fp16 in a REPL, beside the off-by-one it caused
    ">>> torch.tensor([4099]).to(dtype=torch.float16).int()\ntensor([4100], dtype=torch.int32)",
    # position ids in fp16 said to land on multiples of a step
    "our position_ids are cast to fp16 first, so past 2048 they are rounded to multiples of 2 and tokens share positions",
    # a timestep rounded through bf16, told in that order
    "the scheduler's timesteps get rounded through bfloat16 before the time embedding (999 -> 1000)",
])
def test_integers_a_half_dtype_does_not_hold_are_the_positions_rule(text):
    first = explain(text)[0]
    assert first.rule.id == "AMP103" and first.basis == "signature" and first.guess


# A shared message its context decides, while another rule's reading of the same message scores nearly as high: first,
# but a guess (RIVAL_SHARE).
RIVALLED = [
    ("AMP110", 'DCNv4/functions/dcnv4_func.py", line 125, in backward\next.dcnv4_backward(*args)\n'
               "RuntimeError: expected scalar type Float but found BFloat16"),
    ("AMP127", "--lora_enable True --bf16 True\nresult = F.linear(x, transpose(self.weight, self.fan_in_fan_out), bias=self.bias)\n"
               "RuntimeError: expected scalar type Float but found BFloat16"),
]


@pytest.mark.parametrize("rule, text", RIVALLED, ids=[r for r, _ in RIVALLED])
def test_a_context_decided_message_another_rule_reads_nearly_as_well_is_first_but_a_guess(rule, text):
    cands = explain(text, limit=None, weak=True)
    assert cands[0].rule.id == rule and cands[0].guess and "fits the text nearly as well" in cands[0].reason
    assert cands[1].score >= RIVAL_SHARE * cands[0].score


def test_accelerates_device_map_dispatch_hooks_are_no_sign_of_its_mixed_precision():
    # accelerate/hooks.py is the `new_forward` every device_map model runs through, whatever its precision set-up: a
    # frame there says nothing of an accelerate launch whose precision disagrees with the model's (AMP001's context).
    msg = "RuntimeError: expected scalar type BFloat16 but found Float"
    for hooks in ('  File "/usr/lib/python3.10/site-packages/accelerate/hooks.py", line 170, in new_forward\n',
                  '  File "C:\\envs\\llm\\lib\\site-packages\\accelerate\\hooks.py", line 170, in new_forward\n'):
        assert not _fit(hooks + msg, "AMP001").context_matched
    assert _fit("accelerate launch --mixed_precision bf16 train.py\n" + msg, "AMP001").context_matched
    assert _fit('  File "site-packages/accelerate/accelerator.py", line 2100, in backward\n' + msg, "AMP001").context_matched


def test_a_compiled_ops_kernel_call_ending_in_conv_forward_is_no_conv_layers_frame():
    # `ext_module.deform_conv_forward(...)` is an extension's kernel (AMP110's), not a conv layer's `self._conv_forward`
    # checking its input against its weight (AMP131's context).
    msg = "RuntimeError: expected scalar type Half but found Float"
    kernel = ('  File "/work/det/ops/deform_conv.py", line 73, in forward\n'
              "    ext_module.deform_conv_forward(input, weight, offset, output)\n")
    assert not _fit(kernel + msg, "AMP131").context_matched
    assert _fit("    return self._conv_forward(input, self.weight, self.bias)\n" + msg, "AMP131").context_matched
    first = explain(kernel + msg)[0]
    assert first.rule.id == "AMP110" and not first.guess, first.reason


def test_the_pre_1_5_wording_of_a_dtype_check_is_an_extensions_only_with_its_frames():
    # "Expected object of scalar type Half but got scalar type Float for argument #N" is the same check as today's
    # "expected scalar type Half but found Float": alone it stays the generic promotion's first, as that message does.
    bare = "RuntimeError: Expected object of scalar type Half but got scalar type Float for argument #2 'other'"
    cands = explain(bare)
    assert cands[0].rule.id == "AMP201" and cands[0].guess
    ext = '  File "/work/det/ops/roi_pool.py", line 40, in forward\n    out = roi_pool_ext.forward(feats, rois)\n' + bare
    assert explain(ext)[0].rule.id == "AMP110"


@pytest.mark.parametrize("fixture", [
    "AMP004-grad-scaler-with-bf16/explain/bad_scaler_needless_in_bf16_told.txt",
    "AMP123-norm-low-precision/explain/bad_square_overflow_told.txt",
    "AMP124-softmax-low-precision/explain/bad_softmax_nan_in_half_told.txt",
    "AMP140-autocast-device-type/explain/bad_autocast_unavailable_on_mps_told.txt",
])
def test_a_cause_told_in_words_ranks_its_rule_but_only_as_a_guess(fixture):
    first = explain((ROOT / "tests/rules" / fixture).read_text())[0]
    assert first.rule.id == fixture[:6] and first.basis == "signature" and first.guess


def test_a_kv_cache_of_another_dtype_than_its_keys_is_the_kv_cache_rule():
    # index_copy_ writing a bf16 step's keys into an fp32 cache: the cache is named in the frame, and no other rule
    # reads index_copy_'s refusal, so it is said with confidence
    text = ("  File \"model.py\", line 88, in forward\n    k = k_cache.index_copy(2, input_pos, k)\n"
            "RuntimeError: index_copy_(): self and source expected to have the same dtype, but got (self) Float and "
            "(source) BFloat16")
    cands = explain(text)
    assert cands[0].rule.id == "AMP141" and not cands[0].guess, [(c.rule.id, c.reason) for c in cands]
    # the scalar-type refusal of attention scores made against keys an fp32 cache promoted: the cache ranks its rule
    # first over the generic promotion reading of the message, but two rules read it, so only as a guess
    promoted = ("the cache's past_keys are created with torch.get_default_dtype() while the model runs in float16\n"
                "    attn_scores = q @ k / scale\nRuntimeError: expected scalar type Half but found Float")
    cands = explain(promoted)
    assert cands[0].rule.id == "AMP141" and cands[0].guess, [c.rule.id for c in cands]
    # the same refusal without a cache in view is no cache's: the cache rule does not come first
    bare = "    attn_scores = q @ k / scale\nRuntimeError: expected scalar type Half but found Float"
    assert explain(bare)[0].rule.id != "AMP141"
    # an argument named past_key_values, which every decoder call passes, is no cache of another dtype
    call = "outputs = model(input_ids, past_key_values=past_key_values)\nRuntimeError: expected scalar type Half but found Float"
    assert explain(call)[0].rule.id != "AMP141"


def test_a_timestep_said_to_fall_between_the_half_dtypes_grid_points_is_the_positions_rule_as_a_guess():
    # the spacing of bf16's grid (its ulp) where a timestep lies is the precision a timestep loses: told, so a guess
    text = ("The sampler casts each timestep to the bf16 compute dtype, whose ulp is 8 in [1024, 2048), before the "
            "time embedding.")
    cands = explain(text)
    assert cands[0].rule.id == "AMP103" and cands[0].guess, [c.rule.id for c in cands]


def test_a_loss_said_to_be_computed_under_a_half_autocast_is_the_loss_rule_as_a_guess():
    text = ("Our mse loss is computed inside torch.autocast(\"cuda\", dtype=torch.bfloat16) together with the forward, "
            "so the squared errors are half precision.")
    cands = explain(text)
    assert cands[0].rule.id == "AMP125" and cands[0].guess, [c.rule.id for c in cands]
    # the loss computed outside the autocast region is not what this reads
    assert not explain("the loss is computed outside autocast, in fp32 as it should be", closest=False)
