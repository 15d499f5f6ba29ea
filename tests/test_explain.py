import json
import subprocess
import sys
from pathlib import Path

import pytest

from ampdoctor.core import Severity
from ampdoctor.explain import MIN_SCORE, explain, explain_findings

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "errors"


def top(text):
    cands = explain(text)
    assert cands, f"no candidate for {text!r}"
    return cands[0].rule.name


# Every exact error text of the public reports behind the catalog, with the rule that must rank first.
@pytest.mark.parametrize(
    "text, rule",
    [
        ("RuntimeError: expected scalar type BFloat16 but found Float", "precision-config-mismatch"),
        ("RuntimeError: Expected BFloat16, got Float", "grad-dtype-mismatch"),
        ("RuntimeError: \"_amp_foreach_non_finite_check_and_unscale_cuda\" not implemented for 'BFloat16'", "grad-scaler-with-bf16"),
        ("AssertionError: Input and cos/sin must have the same dtype, got torch.float32 and torch.bfloat16", "rope-dtype-mismatch"),
        ("ValueError: Attempting to unscale FP16 gradients.", "grad-scaler-with-fp16-params"),
        ("FutureWarning: `torch.cuda.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cuda', args...)` instead.", "deprecated-cuda-amp"),
        ("FutureWarning: `torch.cuda.amp.GradScaler(args...)` is deprecated. Please use `torch.amp.GradScaler('cuda', args...)` instead.", "deprecated-cuda-amp"),
        ("RuntimeError: FlashAttention only support fp16 and bf16 data type", "flash-attention-fp32-inputs"),
        ("Flash Attention 2.0 only supports torch.float16 and torch.bfloat16 dtypes, but the current dype in LlamaModel is torch.float32. You should run training or inference using Automatic Mixed-Precision", "flash-attention-fp32-model"),
        ("ValueError: Flash Attention 2.0 only supports torch.float16 and torch.bfloat16 dtypes. You passed torch.float32, this might lead to unexpected behaviour.", "flash-attention-fp32-model"),
        ("ValueError: Your setup doesn't support bf16/gpu. You need torch>=1.10, using Ampere GPU with cuda>=11.0", "bf16-unsupported-hardware"),
        ("ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has compute capability 7.5.", "bf16-unsupported-hardware"),
        ("bf16 is only supported on A100+ GPUs", "bf16-unsupported-hardware"),
        ("RuntimeError: bf16 precision was requested but not available on this hardware. Please use fp32 precision instead.", "bf16-unsupported-hardware"),
        ("bf16 mixed precision requires PyTorch >= 1.10 and a supported device.", "bf16-unsupported-hardware"),
        ("AssertionError: bfloat16 and fp16 modes cannot be simultaneously enabled", "fp16-bf16-both-enabled"),
        ("ValueError: `precision='bf16-true')` is not supported in DeepSpeed. `precision` must be one of: ('32-true', '16-mixed', 'bf16-mixed').", "precision-strategy-mismatch"),
        ("NotImplementedError: Bfloat16 wrapper must use a gradient accumulation type of fp32, enable ZeRO to use Bfloat16 gradient accumulation", "bf16-grad-accumulation"),
        ("AssertionError: only bfloat 16 is supported.", "optimizer-dtype-mismatch"),
        ("RuntimeError: expected dtype float for `end` but got dtype c10::BFloat16", "optimizer-dtype-mismatch"),
        ("Your configuration is requesting an incompatible dtype and optimizer combination.", "optimizer-dtype-mismatch"),
        ("RuntimeError: Expected tensor for argument #1 'grad_output' to have the same type as tensor for argument #2 'weight'; but type CUDABFloat16Type does not equal torch.cuda.HalfTensor (while checking arguments for cudnn_convolution_backward_input)", "mixed-half-dtypes"),
        ("RuntimeError: Input type (c10::BFloat16) and bias type (c10::Half) should be the same", "mixed-half-dtypes"),
        ("RuntimeError: Expected attn_mask dtype to be bool or to match query dtype, but got attn_mask.dtype: c10::BFloat16 and query.dtype: float instead.", "attn-mask-dtype-mismatch"),
        ("RuntimeError: Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: c10::BFloat16 and  query.dtype: float instead.", "attn-mask-dtype-mismatch"),
        ("RuntimeError: Index put requires the source and destination dtypes match, got Float for the destination and BFloat16 for the source.", "loss-low-precision"),
        ("TypeError: Got unsupported ScalarType BFloat16", "bf16-to-numpy"),
        ("RuntimeError: attempting to assign a gradient with dtype 'float' to a tensor with grad_dtype 'BFloat16'.", "grad-dtype-mismatch"),
    ],
)
def test_exact_error_texts_rank_the_right_rule_first(text, rule):
    assert top(text) == rule


def test_shared_signature_is_decided_by_context():
    bare = "RuntimeError: expected scalar type Half but found Float"
    in_extension = 'File "ops/roi_align.py", line 40, in forward\n    return _C.roi_align(x)\n' + bare
    assert top(in_extension) == "custom-function-without-custom-fwd"


def test_mat_mul_dtype_variants_cpu_and_cuda_are_recognised():
    for text in (
        "RuntimeError: expected m1 and m2 to have the same dtype, but got: c10::BFloat16 != float",
        "RuntimeError: expected mat1 and mat2 to have the same dtype, but got: float != c10::BFloat16",
        "RuntimeError: mat1 and mat2 must have the same dtype, but got BFloat16 and Float",
    ):
        names = [c.rule.name for c in explain(text)]
        assert "implicit-dtype-promotion" in names and "precision-config-mismatch" in names


def test_norm_context_points_at_norm_rule():
    text = (
        '  File "modeling_llama.py", line 88, in forward\n    hidden_states = self.input_layernorm(hidden_states)\n'
        '  File "modeling_llama.py", line 70, in forward  # LlamaRMSNorm\n    return self.weight * hidden_states.to(input_dtype)\n'
        "RuntimeError: expected mat1 and mat2 to have the same dtype, but got: float != c10::BFloat16"
    )
    assert top(text) == "norm-low-precision"


def test_lora_context_points_at_adapter_rule():
    text = 'File "peft/tuners/lora/layer.py", line 500, in forward\n    result = self.lora_B(self.lora_A(x))\nRuntimeError: expected mat1 and mat2 to have the same dtype, but got: float != c10::BFloat16'
    assert top(text) == "adapter-dtype-mismatch"


@pytest.mark.parametrize(
    "log, rule, frame",
    [
        ("incident1_neox_bf16.log", "precision-config-mismatch", "transformer.py"),
        ("incident3_simpletuner_backward.log", "grad-dtype-mismatch", None),
        ("incident4_h2o_gradscaler.log", "grad-scaler-with-bf16", "grad_scaler.py"),
        ("incident5_qwen_omni_rotary.log", "rope-dtype-mismatch", "rotary.py"),
    ],
)
def test_incident_logs(log, rule, frame):
    cands = explain((EXAMPLES / log).read_text())
    assert cands[0].rule.name == rule
    assert cands[0].score > 0.7
    if frame:
        assert cands[0].location.file.endswith(frame)


def test_incident1_context_raises_the_score_over_the_bare_message():
    bare = explain("RuntimeError: expected scalar type BFloat16 but found Float")[0]
    full = explain((EXAMPLES / "incident1_neox_bf16.log").read_text())[0]
    assert full.rule.name == bare.rule.name == "precision-config-mismatch"
    assert full.score > bare.score
    assert "'bmm'" in full.reason and "'gpt-neox'" in full.reason


def test_incident2_has_no_error_text_so_its_rule_is_only_the_closest_by_wording():
    log = (EXAMPLES / "incident2_nanogpt_val_loss.log").read_text()
    assert explain(log, closest=False) == []
    cands = explain(log)
    assert cands[0].rule.id == "AMP002" and len(cands) <= 3
    assert all(c.guess and c.basis == "wording" and c.score < MIN_SCORE for c in cands)
    assert cands[0].reason.startswith("no signature of this rule matched; closest by wording") and cands[0].location is None


def test_a_signature_added_to_one_rule_moves_no_other_rule_in_the_wording_fallback():
    # The wording index weighs words and normalises lengths by the rules' prose alone: a new signature (its words
    # among the text's) changes its own rule's closeness and leaves every other rule's where it was.
    import importlib
    from dataclasses import replace

    from ampdoctor.core import Signature, catalog

    ex = importlib.import_module("ampdoctor.explain")
    text = ("The run skipped an optimizer step after the loss scale overflowed; later the val loss was nan and the "
            "fused Adam kernel said the dtype was not supported for the bf16 weights in the checkpoint")
    pool = tuple(catalog())
    grown = tuple(replace(r, signatures=r.signatures + (Signature("overflow skipping step loss scale kernel", 0.35),))
                  if r.id == "AMP212" else r for r in pool)

    def closeness(rules):  # each rule's BM25 over the best one's, from the score explain gives it
        return {c.rule.id: c.score / (MIN_SCORE - c.score) for c in ex._closest_by_wording(text, rules)}

    before, after = closeness(pool), closeness(grown)
    assert after["AMP212"] > before.get("AMP212", 0)  # the rule with the new words comes closer
    others = [r for r in before if r != "AMP212"]
    assert len(others) > 5 and others == [r for r in after if r != "AMP212"]
    for a, b in zip(others, others[1:]):  # and the others keep their order and their distances
        assert after[a] / after[b] == pytest.approx(before[a] / before[b], rel=1e-9)


def test_a_cause_told_in_words_no_signature_reads_is_offered_as_a_guess_by_its_rules_wording():
    cands = explain("The EMA copy of the weights is kept in bf16 and after 10k steps it is still identical to the "
                    "initial weights.")
    assert [c.basis for c in cands] == ["wording"] * 3 and all(c.guess for c in cands)
    assert cands[0].rule.id == "AMP138"


def test_a_signature_guess_leaves_room_among_the_first_three_for_the_closest_by_wording_of_the_words_beside_it():
    message = "RuntimeError: expected scalar type BFloat16 but found Float"
    cands = explain("    ema_model.step(model.parameters())  # shadow weights, decay 0.9999\n" + message)
    assert cands[0].guess and cands[0].basis == "signature"
    assert ("AMP138", "wording") in [(c.rule.id, c.basis) for c in cands[:3]]
    # the message alone: its words are the signatures' already, so the wording has no evidence of its own
    assert all(c.basis == "signature" for c in explain(message))
    # a confident answer gets no wording-only company
    assert all(c.basis == "signature" for c in explain("ValueError: Attempting to unscale FP16 gradients."))


def test_unrelated_text_has_no_candidates_and_scores_are_bounded():
    assert explain("ModuleNotFoundError: No module named 'foo'") == []
    for c in explain((EXAMPLES / "incident1_neox_bf16.log").read_text()):
        assert MIN_SCORE <= c.score <= 1.0


def test_explain_findings_leave_out_rules_that_are_only_closest_by_wording():
    assert explain_findings((EXAMPLES / "incident2_nanogpt_val_loss.log").read_text()) == []


def test_explain_findings_best_is_error_rest_info():
    found = explain_findings("RuntimeError: expected scalar type BFloat16 but found Float")
    assert found[0].name == "precision-config-mismatch" and found[0].severity is Severity.ERROR
    assert all(f.severity is Severity.INFO for f in found[1:])


def run_cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "ampdoctor", "explain", *args], input=stdin, capture_output=True, text=True)


def test_cli_explain_argument_text_and_json():
    proc = run_cli("--format", "json", "RuntimeError: Expected BFloat16, got Float")
    assert proc.returncode == 0
    data = json.loads(proc.stdout)
    first = data["candidates"][0]
    assert first["name"] == "grad-dtype-mismatch" and first["id"] == "AMP003"
    assert {"name", "id", "score", "reason", "fix"} <= set(first)


def test_cli_explain_stdin_and_file():
    text = (EXAMPLES / "incident4_h2o_gradscaler.log").read_text()
    assert "grad-scaler-with-bf16" in run_cli("-", stdin=text).stdout
    proc = run_cli("--file", str(EXAMPLES / "incident5_qwen_omni_rotary.log"))
    assert proc.returncode == 0 and "rope-dtype-mismatch" in proc.stdout and "confirm with" in proc.stdout


def test_cli_explain_no_match_exits_1_and_says_so():
    proc = run_cli("something unrelated went wrong")
    assert proc.returncode == 1
    assert "No rule in the ampdoctor catalog matches" in proc.stdout and "ampdoctor run" in proc.stdout


def test_cli_explain_offers_the_closest_by_wording_as_guesses_but_exits_1_as_nothing_matched():
    text = "The EMA copy of the weights is kept in bf16 and after 10k steps it is still identical to the initial weights."
    proc = run_cli(text)
    assert proc.returncode == 1
    assert "No signature in the ampdoctor catalog matches this text" in proc.stdout
    assert "1. a guess: AMP138 ema-low-precision" in proc.stdout and "closest by wording" in proc.stdout
    data = json.loads(run_cli("--format", "json", text).stdout)
    assert {(c["basis"], c["guess"]) for c in data["candidates"]} == {("wording", True)}
    assert data["candidates"][0]["matched"] == "" and "location" not in data["candidates"][0]
    assert json.loads(run_cli("--format", "sarif", text).stdout)["runs"][0]["results"] == []


def test_cli_explain_bad_input_exits_2():
    proc = run_cli("--file", "/nonexistent/log.txt")
    assert proc.returncode == 2 and "cannot read /nonexistent/log.txt" in proc.stderr and "Traceback" not in proc.stderr
    assert run_cli().returncode == 2


def test_cli_explain_sarif():
    proc = run_cli("--format", "sarif", "AssertionError: Input and cos/sin must have the same dtype")
    sarif = json.loads(proc.stdout)
    assert sarif["runs"][0]["results"][0]["ruleId"] == "AMP005"


BARE = "RuntimeError: expected scalar type BFloat16 but found Float"


def test_reasons_say_in_words_what_context_was_missing_and_weak_fits_are_left_out():
    every = explain(BARE, limit=None, weak=True, closest=False)
    shown = explain(BARE, limit=None, closest=False)
    assert len(shown) < len(every)  # the weakest fits of a bare message are dropped by default
    assert all(c.score >= 0.65 * shown[0].score for c in shown)
    amp001 = next(c for c in shown if c.rule.id == "AMP001")
    assert "none of what usually comes with it (bmm, baddbmm, attention_probs" in amp001.reason
    assert not any(ch in c.reason for c in every for ch in ("\\b", "|", "\\."))  # no regex syntax reaches the user
    # nor a lookaround saying where a context word may stand: AMP001's "rope" is read where a word begins
    assert "rotary, pos_emb, rope," in amp001.reason
    assert not any(ch in c.reason for c in every for ch in ("(?", "<!", "?!"))


def test_cli_all_lists_weaker_candidates_and_text_says_how_many_were_hidden():
    default = run_cli(BARE)
    hidden = len(explain(BARE, limit=None, weak=True)) - len(explain(BARE))
    assert hidden > 0 and f"{hidden} weaker candidate" in default.stdout and "--all lists them" in default.stdout
    everything = run_cli("--all", BARE)
    assert everything.stdout.count("why it matches:") == len(explain(BARE, limit=None, weak=True))
    assert "not shown" not in everything.stdout


def test_a_terminal_wraps_candidates_under_their_field_and_a_pipe_never_wraps():
    import io

    from ampdoctor.report.candidates import write_candidates

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    term = Terminal()
    write_candidates(explain(BARE), term, color=False)
    body = [line for line in term.getvalue().splitlines() if line and not line[0].isdigit() and "not shown" not in line]
    assert body and all(line.startswith("   ") for line in body)  # continuation lines keep the field's indent
    pipe = io.StringIO()
    write_candidates(explain(BARE), pipe)
    fix = get_fix_line(pipe.getvalue())
    assert fix.startswith("   fix: ") and fix.endswith(explain(BARE)[0].rule.fix)  # one line, however long


def get_fix_line(text):
    return next(line for line in text.splitlines() if line.startswith("   fix: "))


def test_a_shared_message_without_its_context_is_a_guess_and_a_specific_one_is_not():
    generic = explain("RuntimeError: expected scalar type BFloat16 but found Float")[0]
    assert generic.guess and generic.reason.startswith("a guess: ")
    specific = explain("ValueError: Attempting to unscale FP16 gradients.")[0]
    assert not specific.guess and not specific.reason.startswith("a guess")
    in_context = explain((EXAMPLES / "incident1_neox_bf16.log").read_text())[0]
    assert in_context.rule.id == "AMP001" and not in_context.guess  # the same message, with the incident's context


def test_a_message_the_catalog_weighs_as_generic_is_a_guess_even_when_only_one_rule_matches():
    cand = explain("Epoch 3 | loss: nan | lr 3e-4")
    assert cand and all(c.guess for c in cand)


def test_a_specific_message_alone_on_its_line_is_a_guess_when_another_rule_reads_part_of_it():
    # Two half dtypes in a matmul: AMP121's wording, but AMP001 (and the input rules) read "expected mat1 and mat2 to
    # have the same dtype" in it too. Alone, which cause it is the text does not say; a frame around it ranks AMP121
    # first, and AMP121 names no context that frame could confirm it with, so it stays a guess (`_context_missing`).
    message = "RuntimeError: expected mat1 and mat2 to have the same dtype, but got: c10::Half != c10::BFloat16"
    alone = explain(message)[0]
    assert alone.rule.id == "AMP121" and alone.guess
    framed = explain('  File "/site-packages/awq/modules/linear/gemm.py", line 63, in forward\n'
                     "    out = torch.matmul(x, out)\n" + message)[0]
    assert framed.rule.id == "AMP121" and framed.guess
    # a specific message no other rule reads stays confident alone on its line
    assert not explain("ValueError: Attempting to unscale FP16 gradients.")[0].guess


def test_cuda_autocast_disabling_itself_without_cuda_ranks_the_device_type_rule_as_a_guess():
    # The warning CUDA's autocast gives where no CUDA device is: autocast set up for CUDA around code that runs
    # elsewhere (AMP140), or a torch without CUDA (no rule's cause), so it ranks AMP140 and never decides it.
    for text in ("UserWarning: User provided device_type of 'cuda', but CUDA is not available. Disabling",
                 "UserWarning: torch.cuda.amp.autocast only affects CUDA ops, but CUDA is not available.  Disabling."):
        first = explain(text)[0]
        assert first.rule.id == "AMP140" and first.guess, text
    assert explain("UserWarning: torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.")[0].rule.id != "AMP140"


def test_flash_attn_q_dtype_check_ranks_fp32_qkv_first_and_a_pre_ampere_gpu_beside_it():
    text = ("RuntimeError: Expected q_dtype == torch::kFloat16 || ((is_sm8x || is_sm90) && q_dtype == torch::kBFloat16) "
            "to be true, but got false")
    cands = explain(text, limit=3)
    assert [c.rule.id for c in cands[:2]] == ["AMP111", "AMP113"] and all(c.guess for c in cands)
    # with flash-attn's frames in view the fp32 q/k/v reading is the rule's own context: confident
    framed = explain('  File "/site-packages/flash_attn/flash_attn_interface.py", line 52, in _flash_attn_forward\n'
                     + text)[0]
    assert framed.rule.id == "AMP111" and not framed.guess


def test_the_scalar_type_message_in_a_conv_call_ranks_the_input_weight_rule_first():
    message = "RuntimeError: expected scalar type Half but found Float"
    # a functional conv with a kernel of another dtype than its input: the layer's own op, AMP131's context
    conv = explain("    return nn.functional.conv2d(x, self.kernel, groups=self.kernel.shape[0], stride=2)\n" + message)
    assert conv[0].rule.id == "AMP131"
    # the message alone, or in a custom op's frame, does not rank it first
    assert explain(message)[0].rule.id != "AMP131"
    assert explain('  File "/site-packages/mmcv/ops/deform_conv.py", line 81, in forward\n'
                   "    ext_module.deform_conv_forward(\n" + message)[0].rule.id == "AMP110"
    # two half dtypes are not an input against fp32 weights: not this rule's reading, whatever the call
    halves = explain("    return nn.functional.conv2d(x, self.kernel)\n"
                     "RuntimeError: expected scalar type c10::Half but found c10::BFloat16", limit=None, weak=True)
    assert "AMP131" not in [c.rule.id for c in halves if c.basis == "signature"]


def test_cli_marks_a_guess_in_text_and_json():
    text = run_cli("RuntimeError: expected scalar type BFloat16 but found Float")
    assert text.stdout.startswith("1. a guess: AMP001")
    first = json.loads(run_cli("--format", "json", "RuntimeError: expected scalar type BFloat16 but found Float").stdout)["candidates"][0]
    assert first["guess"] is True and first["reason"].startswith("a guess: ")
    sure = json.loads(run_cli("--format", "json", "ValueError: Attempting to unscale FP16 gradients.").stdout)["candidates"][0]
    assert sure["id"] == "AMP105" and sure["guess"] is False


def test_cli_explain_searches_each_signature_once_per_text(monkeypatch, capsys):
    # The CLI asks twice of one text (what to show, how many are left out); on a whole training log the signature
    # search is most of the time, so it must run once per rule, not once per question.
    import importlib

    from ampdoctor.cli import main

    ex = importlib.import_module("ampdoctor.explain")  # the package exports the function under the same name

    calls = []
    real = ex._score
    monkeypatch.setattr(ex, "_score", lambda rule, text: calls.append(rule.id) or real(rule, text))
    for cached in (getattr(ex, "_ranked", None), getattr(ex, "_closest_by_wording", None)):
        if hasattr(cached, "cache_clear"):
            cached.cache_clear()  # a text an earlier test explained must not be answered from the cache
    log = "step 10 loss 2.31\n" * 2000 + "RuntimeError: expected scalar type BFloat16 but found Float\n"
    assert main(["explain", log]) in (0, 1)
    assert calls and len(calls) == len(set(calls))
    capsys.readouterr()


def test_the_literal_prefilter_never_changes_a_search():
    # `_search` skips a pattern's regex when a run of characters every match must contain is not in the text: on
    # every text of the real-text corpus, every pattern of the catalog finds exactly what the plain regex finds.
    import re
    from pathlib import Path

    import yaml

    from ampdoctor.core import catalog
    from ampdoctor.explain import _FLAGS, _required_text, _search

    corpus = yaml.safe_load((Path(__file__).resolve().parents[1] / "bench/explain/corpus.yaml").read_text())
    # and texts with the non-ASCII letters Unicode IGNORECASE folds onto ASCII ones (long s, Kelvin sign, dotless i),
    # which the ASCII matching of `_FLAGS` does not fold
    texts = [e["text"] for e in corpus] + ["RuntimeError: expected ſcalar type BFloat16 but found Float",
                                           "RuntimeError: expected scalar type BFloat16 but found Float \u2588\u2588",
                                           "\u212aernel: expected scalar type Half but found Float", "fıle ſaved"]
    sigs = {s.pattern: s for r in catalog() for s in (*r.signatures, *r.context)}
    assert sum(1 for p in sigs if _required_text(p)) > len(sigs) // 2  # the prefilter does apply to most
    for text in texts:
        for pattern, sig in sigs.items():
            plain = re.search(pattern, text, flags=_FLAGS)
            got = _search(sig, text)
            assert (got and got.span()) == (plain and plain.span()), (pattern, text[:80])


def test_required_text_is_only_what_every_match_contains():
    from ampdoctor.explain import _required_text

    assert _required_text(r"Expected query, key,? and value") == ("expected query, key",)  # the longest run, lowered
    assert _required_text(r"(fp16|bf16) loss") == (" loss",)  # the option whose shortest string is longest
    assert _required_text(r"scaler\.step|unscale_") == ("scaler.step", "unscale_")
    assert _required_text(r"(?:abc)+x") == ("abc",)  # a group repeated at least once
    assert _required_text(r"(?:abcd)?xy") == ()  # an optional group gives nothing; a 2-char run is too short
    assert _required_text(r"abc|d+") == ()  # a branch with nothing required
    assert _required_text(r"[") == ()  # a pattern that does not parse
    # a negative lookaround's characters are what the text must not hold there: never required
    assert _required_text(r"(?!abcd)xy") == () and _required_text(r"(?<!abcd)xy") == ()
    assert _required_text(r"(?-i:ABCD)x") == ("abcd",)  # case-sensitive in the regex, lowered like the text
    assert _required_text("\u212aelvin") == ()  # a non-ASCII letter IGNORECASE folds onto ASCII "k": no requirement


def test_a_failure_told_in_words_ranks_its_rule_but_is_a_guess_while_the_printed_message_decides():
    told = ("Our EMA model is kept in bf16 next to the bf16 weights. With decay 0.9999 the EMA weight updates get "
            "rounded down to 0 in bf16, so the EMA never actually gets updated during training.")
    first = explain(told)[0]
    assert first.rule.id == "AMP138" and first.basis == "signature" and first.guess
    from ampdoctor.core import catalog
    assert any(s.told for r in catalog() if r.id == "AMP138" for s in r.signatures)  # the catalog marks the prose
    printed = explain("ValueError: Attempting to unscale FP16 gradients.")[0]
    assert printed.rule.id == "AMP105" and not printed.guess  # a message software prints still decides


def test_a_dtype_message_that_got_an_integer_dtype_is_only_a_guess_of_a_precision_rule():
    # A broad signature (as the catalog's attn_mask one once was) reads SDPA's mask check whatever dtype the mask had;
    # a Long mask or Int indices are no precision setting's doing, so that reading can only rank its rule.
    from ampdoctor.core import Rule, Signature
    rule = Rule(id="AMP122", name="mask-rule", severity=Severity.WARNING, summary="", why="", fix="", sources=(),
                signatures=(Signature("Expected attn_mask dtype to be bool or (float or )?to match query dtype"),),
                detectors=("explain",))
    head = "RuntimeError: Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: "
    for mask in ("long int and  query.dtype: c10::BFloat16 instead.", "Long and query.dtype: Half instead."):
        first = explain(head + mask, rules=[rule], closest=False)[0]
        assert first.rule.id == "AMP122" and first.guess, mask
    assert not explain(head + "float and  query.dtype: c10::BFloat16 instead.", rules=[rule], closest=False)[0].guess
    index = Rule(id="AMP125", name="index-rule", severity=Severity.WARNING, summary="", why="", fix="", sources=(),
                 signatures=(Signature("Index put requires the source and destination dtypes match"),),
                 detectors=("explain",))
    put = "RuntimeError: Index put requires the source and destination dtypes match, got {} for the destination and Float for the source."
    assert explain(put.format("Long"), rules=[index], closest=False)[0].guess
    assert not explain(put.format("BFloat16"), rules=[index], closest=False)[0].guess
    scalar = Rule(id="AMP001", name="scalar-rule", severity=Severity.WARNING, summary="", why="", fix="", sources=(),
                  signatures=(Signature("expected scalar type \\w+ but found \\w+"),), detectors=("explain",))
    assert explain("RuntimeError: expected scalar type Long but found Float", rules=[scalar], closest=False)[0].guess
    assert not explain("RuntimeError: expected scalar type BFloat16 but found Float", rules=[scalar], closest=False)[0].guess


def _rule(rid, *signatures):
    from ampdoctor.core import Rule
    return Rule(id=rid, name=f"rule-{rid.lower()}", severity=Severity.WARNING, summary="", why="", fix="", sources=(),
                signatures=tuple(signatures), detectors=("explain",))


def test_a_signature_not_marked_told_that_reads_a_report_in_words_only_ranks_its_rule():
    # A signature not marked told that reads a person's sentence: the text prints no exception, no frame, and the
    # line it matched on shows nothing software prints. It ranks its rule; it does not decide.
    from ampdoctor.core import Signature
    acc = _rule("AMP137", Signature(r"accumulat\w* [^\n]{0,40}\bin (bf16|bfloat16)\b"))
    report = ("Found while reading the trainer.\nThe new code path accumulates the running statistics in bf16 over "
              "the whole epoch, which loses the small updates.")
    first = explain(report, rules=[acc], closest=False)[0]
    assert first.rule.id == "AMP137" and first.guess
    # The same words printed by software (a log line, a quoted message, an exception) still decide.
    for printed in ("WARNING trainer.py:88: accumulates the running statistics in bf16\nstep 10 loss 2.1",
                    "Training says `accumulates the running statistics in bf16` and stops\nat step 3",
                    "RuntimeError: accumulates the running statistics in bf16",
                    "accumulates the running statistics in bf16"):  # one line: the message alone, as pasted
        assert not explain(printed, rules=[acc], closest=False)[0].guess, printed


def test_two_printed_failures_read_by_two_rules_leave_the_first_answer_a_guess():
    # An issue lists two errors it hit, one under the other. One rule's specific message reads the first; a generic
    # message of another rule (only a guess by itself) reads the second. Which failure the user asks about is not
    # said, so neither reading decides.
    from ampdoctor.core import Signature
    overflow = _rule("AMP133", Signature("value cannot be converted to type at::BFloat16 without overflow"))
    matmul = _rule("AMP201", Signature("expected m1 and m2 to have the same dtype", weight=0.6))
    one = "RuntimeError: value cannot be converted to type at::BFloat16 without overflow"
    two = "RuntimeError: expected m1 and m2 to have the same dtype, but got: float != c10::BFloat16"
    for text in (f"1. `{two}`\n2. `{one}`", f"{one}\n\n{two}", f"{two}\n{one}"):
        first = explain(text, rules=[overflow, matmul], closest=False)[0]
        assert first.rule.id == "AMP133" and first.guess, text
    assert not explain(one, rules=[overflow, matmul], closest=False)[0].guess  # the one failure alone decides
    # The same message printed twice (two ranks) is one failure, and a rule whose message is in the same failure is
    # no second one.
    assert not explain(f"[rank0]: {one}\n[rank1]: {one}", rules=[overflow, matmul], closest=False)[0].guess
    within = _rule("AMP001", Signature("at::BFloat16", weight=0.6))
    assert not explain(one + "\nstep 3", rules=[overflow, within], closest=False)[0].guess


def test_a_line_that_opens_an_exception_of_its_own_ends_the_failure_above_it():
    from ampdoctor.explain import _errors
    text = "Traceback (most recent call last):\nRuntimeError: first\n  more of the first\nValueError: second\n\nlog"
    spans = [text[a:b] for a, b in _errors(text)]
    assert spans == ["RuntimeError: first\n  more of the first\n", "ValueError: second"]


def test_a_gpu_older_than_ampere_beside_bf16_ranks_the_hardware_rule_as_a_guess():
    # Whatever a bf16 run prints on a compute capability 6.x/7.x GPU, the GPU has no bf16 units; the printed failure
    # may still have another cause, so it ranks and does not decide. Capability 8.0 says nothing of the kind.
    older = ">>> torch.cuda.get_device_capability()\n(7, 0)\n>>> x = torch.randn(8, 8, dtype=torch.bfloat16, device='cuda')\n>>> f(x)\n"
    first = explain(older)[0]
    assert first.rule.id == "AMP113" and first.guess
    assert all(c.rule.id != "AMP113" or c.basis == "wording" for c in explain(older.replace("(7, 0)", "(8, 0)")))


def test_a_conv_input_and_weight_mismatch_under_autocast_is_not_read_as_an_uncast_input():
    # Autocast gives a conv's input and weight one dtype in forward: where the text shows the call under an autocast
    # that is on, the mismatch came from code autocast does not cover (a recompute in backward), not from an input the
    # code forgot to cast; under autocast(enabled=False) it is again the input's.
    message = "RuntimeError: Input type (torch.cuda.HalfTensor) and weight type (torch.cuda.FloatTensor) should be the same"
    assert explain(message)[0].rule.id == "AMP131"
    assert all(c.rule.id != "AMP131" or c.basis == "wording" for c in explain("with torch.cuda.amp.autocast(enabled=self.amp):\n    loss = net(x)\n" + message))
    assert explain("with torch.autocast('cuda', enabled=False):\n    y = conv(x)\n" + message)[0].rule.id == "AMP131"


def test_a_hardware_refusal_beside_the_runtime_reporting_the_support_it_denies_is_only_a_guess():
    # A framework's check that says the device lacks bf16 can misread one that has it (a ROCm build, a newer GPU): where
    # the text shows the runtime reporting bf16 support, a capability of 8.0 or more, or an Ampere-or-newer GPU, the
    # refusal still ranks the hardware rule first, but as a guess.
    refusal = "RuntimeError: bf16 precision was requested but not available on this hardware. Please use fp32 instead."
    alone = explain(refusal)[0]
    assert alone.rule.id == "AMP113" and not alone.guess
    for beside in (">>> torch.cuda.is_bf16_supported()\nTrue\n", "GPU 0: NVIDIA A100-SXM4-40GB\n",
                   "torch.cuda.get_device_capability(): compute capability (8, 9)\n"):
        cand = explain(beside + refusal)[0]
        assert cand.rule.id == "AMP113" and cand.guess and "speaks against it" in cand.reason, beside
    # an older GPU beside it confirms the refusal; a refusal naming the A100 it requires does not doubt itself
    assert not explain("GPU 0: Tesla V100-SXM2-32GB, compute capability 7.0\n" + refusal)[0].guess
    assert not explain("ValueError: bf16 is only supported on A100+ GPUs")[0].guess


def test_a_signatures_doubt_is_read_from_the_catalog_and_checked_like_its_pattern():
    from ampdoctor.core.catalog import _compiled, _signatures

    sig, = _signatures([{"pattern": "refused", "doubt": "but (it|this) works"}], "rule AMP999")
    assert sig.doubt == "but (it|this) works"
    with pytest.raises(ValueError, match="bad regex"):
        _compiled(_signatures([{"pattern": "refused", "doubt": "(unclosed"}], "rule AMP999"), "rule AMP999")


def test_a_report_in_chinese_reads_the_ascii_words_it_writes_against_its_own():
    # A report in Chinese writes "fp16" and "nan" against its own characters, with no space: matched in the ASCII sense
    # of `\b`, the signature that reads "fp16 ... nan" in English reads them here too (with Unicode word characters
    # no boundary separated them, and only the wording fallback was left).
    first = explain("半精度推理：用fp16跑出来全是nan，换成fp32就正常")[0]
    assert first.rule.id == "AMP212" and first.basis == "signature" and first.guess


def test_a_bf16_refusal_on_another_vendors_accelerator_with_bf16_units_is_only_a_guess():
    refusal = "ValueError: Your setup doesn't support bf16/gpu. You need torch>=1.10, using Ampere GPU with cuda>=11.0"
    assert not explain(refusal)[0].guess
    for beside in ("[INFO] Setting ds_accelerator to hpu (auto detect)\n", "Device: Intel Gaudi 2\n",
                   "rocm-smi: AMD Instinct MI250X\n", "Name: gfx90a\n", "running on a TPU v4 pod\n"):
        cand = explain(beside + refusal)[0]
        assert cand.rule.id == "AMP113" and cand.guess and "speaks against it" in cand.reason, beside
    # an older GPU of the same vendors' lines does not doubt it, nor Lightning's banner of the accelerators it lacks
    assert not explain("GPU 0: Tesla T4\n" + refusal)[0].guess
    banner = ("GPU available: True (cuda), used: True\nTPU available: False, using: 0 TPU cores\n"
              "HPU available: False, using: 0 HPUs\n")
    assert not explain(banner + refusal)[0].guess


def test_a_binding_whose_dtype_table_lacks_the_half_type_is_an_op_without_a_half_kernel():
    for text in ("RuntimeError: getCudnnDataTypeFromScalarType() not supported for BFloat16",
                 "RuntimeError: to_backend_dtype() is not supported for 'Half'"):
        first = explain(text)[0]
        assert first.rule.id == "AMP130" and not first.guess, text
    # NCCL's refusal names its process group, not a function: still the hardware rule's
    assert explain("RuntimeError: Input tensor data type is not supported for NCCL process group: BFloat16")[0].rule.id == "AMP113"


def test_autocast_refusing_binary_cross_entropy_is_the_loss_rule():
    printed = ("RuntimeError: torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
               "Many models use a sigmoid layer right before the binary cross entropy layer.")
    first = explain(printed)[0]
    assert first.rule.id == "AMP125" and not first.guess
    told = explain("Turning on AMP breaks our head: the BCELoss after the sigmoid can't be autocast.")[0]
    assert told.rule.id == "AMP125" and told.guess


def test_reductions_optimizer_state_and_custom_bwd_told_in_half_rank_their_rules_as_guesses():
    for text, rule in (
        ("We set reduce_dtype=float32, yet the gradient all-reduce over the tensor-parallel dims still ran in bf16.",
         "AMP118"),
        ("fsdp_policy = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)", "AMP118"),
        ("Under bf16 autocast the forward is bf16, but custom_bwd makes our backward run in float16.", "AMP109"),
        ("The old checkpoints hold bf16 exp_avg tensors because AdamW was built over the bf16 weights.", "AMP206"),
    ):
        first = explain(text)[0]
        assert first.rule.id == rule and first.basis == "signature" and first.guess, text


def test_a_gradient_norm_said_to_be_computed_in_half_ranks_the_sensitive_op_above_the_overflow_it_made():
    # The overflow is what the report tells; the norm computed in fp16 is why. A norm of activations in half stays
    # the normalisation rule's (AMP123), not this one's.
    first, second = explain("With fp16 the clip grad norm became inf: the grad norm is computed in fp16 and "
                            "its squares overflow.")[:2]
    assert (first.rule.id, second.rule.id) == ("AMP204", "AMP212") and first.guess
    assert explain("The RMSNorm variance is computed in bf16 and comes out as 0 for small activations.")[0].rule.id != "AMP204"


def test_a_specific_message_without_its_rules_context_is_a_guess_where_the_text_shows_where_it_failed():
    # AMP131's message names the layer's input and weight dtypes; its context is the conv module's own frames. A
    # traceback or the code that ran, shown without them, had the place to show them: the message then ranks AMP131
    # and no longer decides it. The message alone, or with the conv frame, still decides it.
    message = "RuntimeError: Input type (torch.cuda.HalfTensor) and weight type (torch.cuda.FloatTensor) should be the same"
    alone = explain(message)[0]
    assert alone.rule.id == "AMP131" and not alone.guess
    coded = explain(">>> model = UNet().half().cuda()\n>>> out = model(image)\n" + message)[0]
    assert coded.rule.id == "AMP131" and coded.guess and "none of what usually comes with it" in coded.reason
    traced = explain('  File "/work/train.py", line 12, in step\n    out = block(x)\n' + message)[0]
    assert traced.rule.id == "AMP131" and traced.guess
    with_context = explain('  File "/site-packages/torch/nn/modules/conv.py", line 456, in _conv_forward\n'
                           "    return F.conv2d(input, weight, bias)\n" + message)[0]
    assert with_context.rule.id == "AMP131" and not with_context.guess
    # a rule that names no context has nothing a frame could confirm it with: its message alone decides (a message
    # pasted by itself), beside a frame or the code that ran it ranks the rule and is a guess
    refusal = ("ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. "
               "Your Tesla T4 GPU has compute capability 7.5.")
    assert explain(refusal)[0].rule.id == "AMP113" and not explain(refusal)[0].guess
    framed = explain('  File "/work/serve.py", line 40, in main\n    llm = LLM(model=path)\n' + refusal)[0]
    assert framed.rule.id == "AMP113" and framed.guess and "names nothing there that would confirm it" in framed.reason


@pytest.mark.parametrize("text, rule", [
    # a torch.device given to autocast, the device hard-coded in it, or its device type taken from the run's device
    ("Please allow passing a `torch.device` object to autocast, not only the device-type string.", "AMP140"),
    ("The trainer hard-codes cuda as the device in autocast, so the loop cannot run on an XPU.", "AMP140"),
    ("Suggestion: use torch.autocast(device_type=batch.device.type) in the examples.", "AMP140"),
    # gradients to be accumulated in fp32 where bf16 is trained
    ("Training with bf16 on ZeRO-2, we would like gradient accumulation in fp32 for long accumulation runs.", "AMP117"),
    # a fill value beyond the half dtype's range
    ("The fused kernel crashes because fill_value -1e9 exceeds the fp16 range.", "AMP133"),
    # a norm that must run in fp32 for half inputs
    ("RMSNorm should be computed in fp32 for bf16 activations, else the outputs drift.", "AMP123"),
    # the fused norm kernels' warning about an input and a weight in two dtypes
    ("UserWarning: Mismatch dtype between input and weight: input dtype = c10::Half, weight dtype = float, "
     "Cannot dispatch to fused implementation.", "AMP131"),
    # activation statistics whose max is beyond fp16's range
    ("decoder.block.7 output: min=-1.2e+03 max= 9.1e+04 var= 3.3e+06 mean= 2.1e+00", "AMP212"),
])
def test_wordings_of_causes_rank_their_rule_first_as_a_guess(text, rule):
    first = explain(text)[0]
    assert first.rule.id == rule and first.basis == "signature" and first.guess


def test_a_cause_told_in_words_ranks_below_the_specific_message_the_text_prints():
    # The printed failure is the GradScaler's refusal (AMP105); the reporter's line beside it tells an autocast without
    # a dtype running fp16 (AMP107's told signature, weighed 1.0). The told reading is a theory about the failure and
    # ranks below the message software printed; before, it scored above it and pushed it out of the answers.
    text = ("ValueError: Attempting to unscale FP16 gradients.\n"
            "fp16 fine-tuning on our V100 node fails at the first step (with torch.autocast(\"cuda\") around the forward)\n")
    cands = explain(text)
    assert cands[0].rule.id == "AMP105" and cands[0].basis == "signature"
    told = next(c for c in cands if c.rule.id == "AMP107")
    assert told.guess and told.score < cands[0].score and "ranked below AMP105" in told.reason


def test_a_bf16_refusal_on_a_device_of_another_backend_with_bf16_units_is_only_a_guess():
    # Checks written for CUDA misjudge the devices of other backends: an Intel GPU (`xpu`, an Arc), a Cambricon `mlu`,
    # an Ascend 910B, an RDNA3 Radeon all have bf16. Beside them the refusal ranks the hardware rule first, as a guess;
    # beside their predecessors without bf16 (an Ascend 910A, an RDNA2 card) it stays confident.
    refusal = "ValueError: Your setup doesn't support bf16/gpu. You need torch>=1.10, using Ampere GPU with cuda>=11.0"
    for beside in ("model moved to xpu:0\n", "Intel(R) Arc(TM) A770 Graphics\n", "device: mlu:0\n",
                   "NPU type: Ascend 910B3\n", "gcnArchName: gfx1100\n", "GPU: AMD Radeon RX 7900 XTX\n"):
        cand = explain(beside + refusal)[0]
        assert cand.rule.id == "AMP113" and cand.guess and "speaks against it" in cand.reason, beside
    for beside in ("NPU type: Ascend 910A\n", "GPU: AMD Radeon RX 6800\n"):
        assert not explain(beside + refusal)[0].guess, beside


def test_a_bf16_refusal_that_names_the_torch_release_it_needs_beside_an_older_torch_is_only_a_guess():
    # accelerate's refusal names two causes, the device and a torch before 1.10: a torch that old shown in the text is
    # the cause, whatever the device.
    refusal = "ValueError: bf16 mixed precision requires PyTorch >= 1.10 and a supported device."
    assert not explain(refusal)[0].guess
    for shown in ("torch==1.9.0+cu111\n", "PyTorch version: 1.8.1\n", "pip list: torch 1.7.1\n"):
        cand = explain(shown + refusal)[0]
        assert cand.rule.id == "AMP113" and cand.guess and "speaks against it" in cand.reason, shown
    for shown in ("torch==1.13.1\n", "PyTorch version: 1.10.0\n", "torch==2.1.0\n"):
        assert not explain(shown + refusal)[0].guess, shown


def test_a_backend_that_refuses_to_convert_to_or_hold_bf16_is_the_unsupported_hardware_rule():
    # The conversion itself refused (a cast op not implemented for the bf16 type), or bf16 refused as a data type:
    # the device has no bf16 at all. An op of a compute kernel that lacks bf16 is still the missing-kernel rule.
    for text in ("RuntimeError: call aclnnCast failed, detail:EZ1001: self not implemented for DT_BFLOAT16, should be "
                 "in dtype support list [DT_FLOAT16,DT_FLOAT,DT_INT32,DT_BOOL].",
                 'RuntimeError: "cast_kernel" not supported for \'BFloat16\'',
                 "[F1130 10:02:11 backend_util.cc:97] Invalid or unsupported data type BFloat16."):
        cand = explain(text)[0]
        assert cand.rule.id == "AMP113" and not cand.guess, text
    # beside the code that ran, which names no device, the refusal ranks the rule and is a guess (`_context_missing`)
    coded = explain('    w = w.to(dtype)\nRuntimeError: "cast_kernel" not supported for \'BFloat16\'')[0]
    assert coded.rule.id == "AMP113" and coded.guess
    assert explain("NPU type: Ascend 910B1\nRuntimeError: call aclnnCast failed: self not implemented for DT_BFLOAT16")[0].guess
    for text in ('RuntimeError: "broadcast_kernel" not implemented for \'BFloat16\'',
                 'RuntimeError: "addmm_impl_cpu_" not implemented for \'BFloat16\'',
                 "RuntimeError: Unsupported dtype BFloat16"):
        assert explain(text)[0].rule.id == "AMP130", text


def test_a_dtype_mismatch_in_a_lycoris_adapters_forward_is_the_adapter_rule():
    # LoKr, LoHa, DoRA (LyCORIS's adapters) are adapters as LoRA is: the shared matmul message in their forward is the
    # adapter rule's.
    message = "RuntimeError: expected mat1 and mat2 to have the same dtype, but got: c10::BFloat16 != float"
    for frame in ('  File "site-packages/lycoris/modules/lokr.py", line 300, in forward\n    delta = self.op(x, w)\n',
                  '  File "train/networks/loha.py", line 81, in forward\n',
                  "INFO Weight decomposition (dora_wd) is enabled\n"):
        assert explain(frame + message)[0].rule.id == "AMP127", frame
    assert explain(message)[0].rule.id != "AMP127"


def test_a_report_in_chinese_or_japanese_is_read_through_the_english_of_its_refusals_and_defaults():
    # "不支持" (does not support) and "默认是" / "デフォルトは" (defaults to) are read as the English the catalog's
    # told signatures read: a GPU said not to support bf16 is the hardware rule, an autocast call said to default to
    # fp16 is the no-dtype rule; both only as guesses, since they are told, not printed.
    refused = explain("训练失败了。V100显卡不支持bf16，所以只能改用fp16")[0]
    assert refused.rule.id == "AMP113" and refused.basis == "signature" and refused.guess
    for told in ("ctx = torch.cuda.amp.autocast()\n这里没有写dtype，默认是torch.float16，换成bf16会更好吗",
                 "scaler と一緒に autocast() を使っています\nこの autocast のデフォルトはfloat16です"):
        cand = explain(told)[0]
        assert cand.rule.id == "AMP107" and cand.basis == "signature" and cand.guess, told
    # the same in English, the default told on the line after the call
    cand = explain("with torch.autocast('cuda'):\n    out = model(x)\n# no dtype given: it defaults to torch.float16")[0]
    assert cand.rule.id == "AMP107" and cand.basis == "signature"


def test_the_call_that_raises_a_numpy_or_attention_mask_message_confirms_it_beside_a_frame():
    # AMP129's message names no call and AMP122's names only the mask: the NumPy conversion, the attention call the
    # mask goes into, are their context. Beside a frame that shows them the message decides; beside one that does not,
    # it ranks its rule as a guess.
    numpy_msg = "TypeError: Got unsupported ScalarType BFloat16"
    shown = explain("    scores = logits.cpu().numpy()\n" + numpy_msg)[0]
    assert shown.rule.id == "AMP129" and not shown.guess
    hidden = explain('  File "/work/eval.py", line 30, in score\n    return metric(pred)\n' + numpy_msg)[0]
    assert hidden.rule.id == "AMP129" and hidden.guess
    mask_msg = ("RuntimeError: Expected attn_mask dtype to be bool or to match query dtype, but got attn_mask.dtype: "
                "float and  query.dtype: c10::BFloat16 instead.")
    shown = explain("    out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)\n" + mask_msg)[0]
    assert shown.rule.id == "AMP122" and not shown.guess
    hidden = explain('  File "/work/model.py", line 88, in forward\n    h = self.block(h)\n' + mask_msg)[0]
    assert hidden.rule.id == "AMP122" and hidden.guess


def test_context_that_only_the_signatures_own_match_holds_does_not_decide_a_generic_message():
    # AMP122's context names SDPA, and so does its signature that reads the mixed matmul message beside SDPA (weighed
    # generic): found only inside that match, the SDPA call is the message's own evidence again, not a second one.
    text = ("    out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)\n"
            "RuntimeError: expected mat1 and mat2 to have the same dtype, but got: float != c10::BFloat16")
    cand = explain(text)[0]
    assert cand.rule.id == "AMP122" and cand.guess
    # the same call shown again beside the match (a frame of the attention function) is independent: it decides
    framed = explain('  File "/site-packages/torch/nn/functional.py", line 5, in multi_head_attention_forward\n' + text)[0]
    assert framed.rule.id == "AMP122" and not framed.guess


def test_a_rule_naming_no_context_ranks_below_a_rival_on_the_same_message_whose_context_is_in_view():
    # A shared dtype message that a rule naming no context (implicit promotion) reads too: the launch line shows the
    # precision flag of the config-mismatch rule's context, so that rule comes first, the other just below it.
    text = ("RuntimeError: mat1 and mat2 must have the same dtype, but got Float and BFloat16\n"
            "accelerate launch --mixed_precision bf16 train_model.py --lr 1e-4\n")
    cands = explain(text, weak=True)
    ids = [c.rule.id for c in cands]
    assert ids[0] == "AMP001" and all(c.guess for c in cands)
    promotion = cands[ids.index("AMP201")]
    assert promotion.score < cands[0].score and "ranked below AMP001" in promotion.reason


def test_a_shared_message_quoted_in_a_report_is_not_decided_by_the_reports_own_words():
    # Two rules read one generic dtype message; one's context (an adapter) is in the text. Where the text prints the
    # failure (its exception, a frame), that context decides. Where the message is only quoted in a report (no
    # exception printed, no frame, no code), the context is the reporter's words and command line: it ranks the
    # rule, it does not decide.
    from dataclasses import replace

    from ampdoctor.core import Signature
    message = "expected scalar type Float but found Half"
    adapter = replace(_rule("AMP127", Signature(message, weight=0.6)), context=(Signature("lora"),))
    promotion = _rule("AMP201", Signature(message, weight=0.6))
    pool = [adapter, promotion]
    for printed in (f"RuntimeError: {message}\nI launch it with python train.py --use_lora --fp16",
                    f'  File "site-packages/peft/tuners/lora/layer.py", line 500, in forward\nRuntimeError: {message}'):
        first = explain(printed, rules=pool, closest=False)[0]
        assert first.rule.id == "AMP127" and not first.guess, printed
    quoted = f'Fine-tuning my adapter stops with "{message}"\nI launch it with python train.py --use_lora --fp16'
    first = explain(quoted, rules=pool, closest=False)[0]
    assert first.rule.id == "AMP127" and first.guess
    # A message only one rule reads is its own, quoted or not.
    assert not explain(quoted, rules=[adapter], closest=False)[0].guess


def test_a_sentence_in_words_beside_code_on_one_line_of_a_chinese_report_only_ranks_its_rule():
    # A report in Chinese writes several sentences on one line: one names the code it ran (`model.half()`), the next
    # tells the failure in words. Only the sentence the signature read counts for whether software printed it.
    from ampdoctor.core import Signature
    overflow = _rule("AMP212", Signature(r"overflow[^\n]{0,20}\bfp16\b", weight=0.9))
    report = "我用 model.half() 把模型转成半精度再训练。几步之后就溢出了 fp16 的范围，loss 变成 NaN。\n请问怎么办"
    first = explain(report, rules=[overflow], closest=False)[0]
    assert first.rule.id == "AMP212" and first.guess
    # The sentence itself marked as printed (a quoted message) still decides.
    printed = "我用 model.half() 把模型转成半精度再训练。日志里出现 'overflow in fp16'，loss 变成 NaN。\n请问怎么办"
    assert not explain(printed, rules=[overflow], closest=False)[0].guess


def test_a_call_pasted_on_its_own_line_shows_where_the_failure_happened():
    # A rule that names no context, in a text that shows the code that ran (here a bare call on its own line, as a
    # report pastes what it ran and what it printed), has nothing there to confirm it: a guess (`_context_missing`).
    # The code line the signature itself reads is the message, not where it came from.
    from ampdoctor.core import Signature
    refusal = _rule("AMP113", Signature("bf16 precision was requested but not available on this hardware"))
    error = "I get `RuntimeError: bf16 precision was requested but not available on this hardware.`"
    for code in ("torch.cuda.get_device_name(0)\n'Radeon Pro'", ">>> trainer.fit(model)"):
        first = explain(f"{error}\nthen I ran:\n{code}", rules=[refusal], closest=False)[0]
        assert first.rule.id == "AMP113" and first.guess, code
    assert not explain(f"{error}\nyet the card should have it", rules=[refusal], closest=False)[0].guess
    clip = _rule("AMP136", Signature(r"clip_grad_norm_\([^\n]*LOSS_SCALE"))
    alone = "To clip the fp32 master weights' gradients:\ntorch.nn.utils.clip_grad_norm_(master_params, 5 * LOSS_SCALE)"
    assert not explain(alone, rules=[clip], closest=False)[0].guess
